"""The deployment files parse and agree with each other and with the server's config."""
from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from conftest import REPO, server_binary

DEPLOY = REPO / "config" / "deploy"


def manifests():
    docs = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs[doc["kind"]] = doc
    return docs


def test_manifests_are_valid_yaml_with_the_kinds_a_shard_needs():
    docs = manifests()
    assert {"StatefulSet", "Service", "ConfigMap"} <= set(docs)
    for doc in docs.values():
        assert doc["apiVersion"] and doc["metadata"]["name"]


def test_the_statefulset_probes_scrapes_and_exposes_what_the_server_serves():
    docs = manifests()
    pod = docs["StatefulSet"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(ports["metrics"])
    assert docs["StatefulSet"]["spec"]["serviceName"] == docs["Service"]["metadata"]["name"]
    assert docs["Service"]["spec"]["clusterIP"] == "None"  # headless: one name per shard
    env = {e["name"] for e in container["env"]}
    assert "REPLAYD_TOKEN" in env


@pytest.mark.parametrize("path", ["configmap", "container"])
def test_shipped_configs_are_accepted_by_the_server(path, tmp_path):
    if path == "configmap":
        text = manifests()["ConfigMap"]["data"]["replayd.json"]
    else:
        text = (REPO / "config" / "container.json").read_text()
    config = tmp_path / "replayd.json"
    config.write_text(text)
    json.loads(text)
    # --check-config parses and validates without listening.
    result = subprocess.run([str(server_binary()), "--config", str(config), "--check-config"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr

