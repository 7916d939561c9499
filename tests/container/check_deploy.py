#!/usr/bin/env python3
"""config/deploy/ played with `podman kube play`: two replayd shards as the StatefulSet
describes them, used as one table by a ShardedClient, one shard restarted from its snapshot.

What is played, and what is translated (podman 4.3.1 runs Pods, Deployments and
PersistentVolumeClaims; `kind: StatefulSet` is refused: "YAML document does not contain any
supported kube kind"):
  - The StatefulSet becomes what its controller would create (tests/container/statefulset_pods.py):
    for ordinals 0 and 1, a PersistentVolumeClaim `data-replayd-<i>` from the
    volumeClaimTemplate (a podman named volume) and a Pod `replayd-<i>` from the pod
    template with `hostname: replayd-<i>`, `subdomain: replayd`, the label
    `statefulset.kubernetes.io/pod-name` and the claim as its `data` volume. The manifest asks
    for 3 replicas; 2 are played (as `kubectl scale --replicas=2` would), enough for a union.
  - The image is the one under test (--image), not the tag a cluster pulls.
  - The readiness and liveness probes are dropped: podman 4.3 would run an httpGet probe as
    `curl` inside the container (the image has no curl; a named port becomes port 0). This
    script polls /readyz and reads /metrics from the host instead.
  - The container ports are dropped: podman 4.3 publishes each containerPort on every host
    address at the same number (0.0.0.0:7700), so the second pod would not start; in a
    cluster they only name the ports the server listens on, which it still does.
  - terminationGracePeriodSeconds is not applied by podman 4.3 (it stops after 10 s), so the
    restart stops the pod with `podman pod stop -t <terminationGracePeriodSeconds>`.
  - The ConfigMap is passed unchanged with `--configmap config/deploy/configmap.yaml`.
  - The Secret `replayd-token` (podman 4.3 has no `kind: Secret` for kube play) is a podman
    secret holding the Secret's `data` as JSON (`{"token": "<base64>"}`), the form podman
    reads for `secretKeyRef`.
  - The headless Service is not played (podman has no Services). It is checked instead: it
    is headless, named as the StatefulSet's serviceName, selects the pods' labels, and its
    targetPorts name the container's ports. Clients reach each pod at its address on
    podman's network at the container's port, which is what `replayd-<i>.replayd` resolves
    to in a cluster. That address is reachable from the host only with rootful podman.
Unchanged: securityContext (runAsUser/runAsGroup 999, which this checks against the
process), env from the Secret, resources, the config and data mounts, the config itself
(data_dir on the claim's volume, snapshot on SIGTERM).

Checks: a client without the token, or with a wrong one, is refused; the server runs as the
manifest's runAsUser; items inserted through the ShardedClient land whole batches per shard;
draws from the union return every inserted item (each from the shard holding it, its fields
intact), with the union-wide probability 1/N, split among shards by their sizes; each pod's
/metrics counts its items; SIGTERM to one pod exits 0 and writes a snapshot to its volume; a
new pod on the same claim restores every item it held, and the union is whole again.

Pods, volumes and the secret this run creates are removed on exit, failure included; names
already present (from another run) are reported, never removed.
Usage (as root; scripts/container-test runs it after building the image):
  PYTHONPATH=client/python /usr/bin/python3 tests/container/check_deploy.py [--image IMAGE]
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import yaml

import replayd
from replayd.sharded import SHARD_BITS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from statefulset_pods import claim_name, load_statefulset, statefulset_pod  # noqa: E402

HERE = Path(__file__).resolve().parent
DEPLOY = HERE.parents[1] / "config" / "deploy"
REPLICAS = 2
DRAW_CALLS, DRAW_BATCH = 60, 1000  # 60,000 draws: every one of 3,000 items w.p. 1 - 6e-6


class Failure(Exception):
    pass


def podman(*args: str, check: bool = True) -> str:
    """podman's stdout; Failure with its stderr when it fails and `check`."""
    done = subprocess.run(["podman", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise Failure(f"podman {' '.join(args)} failed ({done.returncode}): "
                      f"{done.stderr.strip()}")
    return done.stdout.strip()


def exists(kind: str, name: str) -> bool:
    """Whether podman has the pod, volume or secret `name`."""
    args = ["secret", "inspect", name] if kind == "secret" else [kind, "exists", name]
    return subprocess.run(["podman", *args], capture_output=True).returncode == 0


def load_yaml(name: str) -> Dict[str, Any]:
    with open(DEPLOY / name) as f:
        return yaml.safe_load(f)


def container_ports(sts: Dict[str, Any]) -> Dict[str, int]:
    ports = sts["spec"]["template"]["spec"]["containers"][0]["ports"]
    return {p["name"]: int(p["containerPort"]) for p in ports}


def check_service(service: Dict[str, Any], sts: Dict[str, Any]) -> None:
    """The headless Service routes to the StatefulSet's pods and names their ports."""
    spec = service["spec"]
    if spec.get("clusterIP") != "None":
        raise Failure("service.yaml: the Service is not headless (clusterIP: None)")
    if service["metadata"]["name"] != sts["spec"]["serviceName"]:
        raise Failure(f"service.yaml: named {service['metadata']['name']!r}, the StatefulSet's "
                      f"serviceName is {sts['spec']['serviceName']!r}")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in spec["selector"].items()):
        raise Failure(f"service.yaml: selector {spec['selector']} does not select pods "
                      f"labelled {labels}")
    ports = container_ports(sts)
    for port in spec["ports"]:
        target = port.get("targetPort", port["port"])
        if target not in ports and target not in ports.values():
            raise Failure(f"service.yaml: targetPort {target!r} is not a container port "
                          f"of the pod template ({ports})")


def check_paths(sts: Dict[str, Any], configmap: Dict[str, Any], image: str) -> None:
    """The server reads the ConfigMap's replayd.json where it is mounted and keeps its
    snapshots on the claim's volume."""
    pod_spec = sts["spec"]["template"]["spec"]
    container = pod_spec["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    claim = sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    config = json.loads(configmap["data"]["replayd.json"])
    if os.path.normpath(config["data_dir"]) != os.path.normpath(mounts[claim]):
        raise Failure(f"configmap.yaml: data_dir {config['data_dir']!r} is not the snapshot "
                      f"volume's mountPath {mounts[claim]!r}: snapshots would not survive "
                      f"the pod")
    volume = [v["name"] for v in pod_spec["volumes"]
              if v.get("configMap", {}).get("name") == configmap["metadata"]["name"]]
    if not volume or volume[0] not in mounts:
        raise Failure("statefulset.yaml: the ConfigMap is not mounted")
    command = container.get("command") or json.loads(podman(
        "image", "inspect", image, "--format", "{{json .Config.Entrypoint}}"))
    command = command + container.get("args", [])
    read = command[command.index("--config") + 1] if "--config" in command else None
    if read != os.path.join(mounts[volume[0]], "replayd.json"):
        raise Failure(f"the server reads its config from {read}; the ConfigMap's "
                      f"replayd.json is mounted at {mounts[volume[0]]}")


def items(ids: np.ndarray) -> Dict[str, np.ndarray]:
    """The fields of the items numbered `ids`, each a function of its number."""
    ids = np.asarray(ids, dtype=np.int64)
    obs = ids[:, None].astype(np.float32) + np.array([0, 0.25, 0.5, 0.75], np.float32)
    return {"obs": obs, "act": ids, "rew": (ids * 0.5).astype(np.float32),
            "next_obs": obs + 1, "done": (ids % 2).astype(np.uint8)}


def http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return reply.read().decode()


class Deployment:
    """The pods played from the manifests; remembers what it created for `remove`."""

    def __init__(self, sts: Dict[str, Any], image: str, workdir: Path) -> None:
        self.sts = sts
        self.image = image
        self.workdir = workdir
        self.ports = container_ports(sts)
        self.container = sts["spec"]["template"]["spec"]["containers"][0]["name"]
        self.grace_s = int(sts["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30))
        self.token = "deploy-" + secrets.token_hex(12)
        self.names = [f"{sts['metadata']['name']}-{i}" for i in range(REPLICAS)]
        self.pod_files: List[Path] = []
        self.claims: List[str] = []
        self.config_volume = load_yaml("configmap.yaml")["metadata"]["name"]  # podman's name
        self.created: List[tuple] = []  # ("pod" | "volume" | "secret", name)

    def refuse_leftovers(self) -> None:
        """Failure naming any pod, volume or secret of ours that podman already has."""
        wanted = ([("pod", n) for n in self.names]
                  + [("volume", claim_name(self.sts, c["metadata"]["name"], i))
                     for i in range(REPLICAS)
                     for c in self.sts["spec"].get("volumeClaimTemplates", [])]
                  + [("volume", self.config_volume), ("secret", "replayd-token")])
        taken = [f"{kind} {name}" for kind, name in wanted if exists(kind, name)]
        if taken:
            raise Failure("podman already has " + ", ".join(taken) + " (left by an earlier "
                          "run?); remove them first (podman pod rm -f / volume rm / secret rm)")

    def play(self) -> None:
        data = {"token": base64.b64encode(self.token.encode()).decode()}
        secret_file = self.workdir / "replayd-token.json"
        secret_file.write_text(json.dumps(data))
        podman("secret", "create", "replayd-token", str(secret_file))
        self.created.append(("secret", "replayd-token"))
        self.created.append(("volume", self.config_volume))  # made by the first pod's play
        for i, name in enumerate(self.names):
            *claims, pod = statefulset_pod(self.sts, i, image=self.image)
            claim_file = self.workdir / f"claims-{name}.yaml"
            claim_file.write_text(yaml.safe_dump_all(claims))
            pod_file = self.workdir / f"pod-{name}.yaml"
            pod_file.write_text(yaml.safe_dump(pod))
            self.pod_files.append(pod_file)
            self.created += [("volume", c["metadata"]["name"]) for c in claims]
            self.claims.append(claims[0]["metadata"]["name"])
            podman("kube", "play", str(claim_file))
            self.play_pod(i)

    def play_pod(self, i: int) -> None:
        self.created.append(("pod", self.names[i]))
        podman("kube", "play", "--configmap", str(DEPLOY / "configmap.yaml"),
               str(self.pod_files[i]))

    def container_name(self, i: int) -> str:
        return f"{self.names[i]}-{self.container}"

    def address(self, i: int) -> str:
        """The pod's address on podman's network (what replayd-<i>.replayd resolves to)."""
        infra = podman("pod", "inspect", self.names[i], "--format", "{{.InfraContainerID}}")
        ip = podman("inspect", infra, "--format",
                    "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}")
        if not ip:
            raise Failure(f"pod {self.names[i]} has no address on podman's network")
        return ip

    def wait_ready(self, i: int) -> str:
        """Polls /readyz as the readinessProbe would; returns the pod's address."""
        deadline = time.monotonic() + 60
        while True:
            ip = self.address(i)
            try:
                if http_get(f"http://{ip}:{self.ports['metrics']}/readyz").strip() == "ready":
                    return ip
            except OSError:
                pass
            state = podman("inspect", self.container_name(i), "--format", "{{.State.Status}}")
            if state != "running" or time.monotonic() > deadline:
                raise Failure(f"{self.names[i]} never became ready (container {state}):\n"
                              + self.logs(i))
            time.sleep(0.3)

    def logs(self, i: int) -> str:
        return podman("logs", "--tail", "20", self.container_name(i), check=False)

    def snapshots(self, i: int) -> List[str]:
        mount = podman("volume", "inspect", self.claims[i], "--format", "{{.Mountpoint}}")
        return sorted(p.name for p in Path(mount).glob("*.rsnap"))

    def remove(self) -> None:
        """Removes what this run created; a second SIGTERM or Ctrl-C cannot cut it short."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for kind, name in reversed(self.created):
            if kind == "pod":
                podman("pod", "rm", "-f", "-t", "0", name, check=False)
        for kind, name in self.created:
            if kind == "volume":
                podman("volume", "rm", "-f", name, check=False)
            elif kind == "secret":
                podman("secret", "rm", name, check=False)


class Union:
    """The items inserted through the ShardedClient and the checks of draws from them."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, np.uint64)   # sorted global keys
        self.ids = np.zeros(0, np.int64)     # the item number of each key

    def insert(self, shards: replayd.ShardedClient, table: str, ids: np.ndarray) -> int:
        """Inserts the items numbered `ids` as one batch; returns the shard that took it."""
        keys = shards.insert(table, items(ids), np.ones(len(ids)))
        owners = set((keys >> np.uint64(64 - SHARD_BITS)).tolist())
        if len(owners) != 1:
            raise Failure(f"one batch was split over shards {owners}")
        order = np.argsort(np.concatenate([self.keys, keys]))
        self.keys = np.concatenate([self.keys, keys])[order]
        self.ids = np.concatenate([self.ids, ids])[order]
        return owners.pop()

    def held_by(self, shard: int) -> int:
        return int(np.sum((self.keys >> np.uint64(64 - SHARD_BITS)) == shard))

    def check_draws(self, shards: replayd.ShardedClient, table: str) -> None:
        """Draws DRAW_CALLS x DRAW_BATCH items from the union: each is an inserted item under
        its own key (so from the shard holding it), fields intact, probability 1/N; every
        item is drawn; the shards' shares of the draws follow their sizes."""
        n = len(self.ids)
        seen = np.zeros(n, bool)
        per_shard = np.zeros(len(shards.shards), np.int64)
        for _ in range(DRAW_CALLS):
            sample = shards.sample(table, DRAW_BATCH)
            at = np.searchsorted(self.keys, sample.keys)
            found = (at < n) & (self.keys[np.minimum(at, n - 1)] == sample.keys)
            if not found.all():
                raise Failure(f"drew key {int(sample.keys[~found][0])}, never inserted")
            expected = items(self.ids[at])
            for field, column in expected.items():
                if not np.array_equal(sample.data[field], column):
                    row = int(np.argmax(np.any((sample.data[field] != column).reshape(
                        len(column), -1), axis=1)))
                    raise Failure(f"key {int(sample.keys[row])} (item {self.ids[at][row]}): "
                                  f"{field} is {sample.data[field][row]}, inserted "
                                  f"{column[row]}")
            if not np.allclose(sample.probabilities, 1.0 / n, rtol=1e-9, atol=0):
                raise Failure(f"union probabilities {np.unique(sample.probabilities)[:4]}, "
                              f"expected 1/{n}")
            seen[at] = True
            per_shard += np.bincount((sample.keys >> np.uint64(64 - SHARD_BITS)).astype(np.int64),
                                     minlength=len(per_shard))
        if not seen.all():
            raise Failure(f"{int((~seen).sum())} of {n} items never drawn in "
                          f"{DRAW_CALLS * DRAW_BATCH} draws (e.g. item {self.ids[~seen][0]})")
        draws = DRAW_CALLS * DRAW_BATCH
        for s, count in enumerate(per_shard):
            p = self.held_by(s) / n
            if abs(count / draws - p) > 5 * np.sqrt(p * (1 - p) / draws):
                raise Failure(f"shard {s} gave {count} of {draws} draws; it holds a share "
                              f"{p:.3f} of the items")


def run(deployment: Deployment, table: Dict[str, Any]) -> None:
    name = table["name"]
    min_size = int(table.get("rate_limiter", {}).get("min_size_to_sample", 1))
    deployment.play()
    ips = [deployment.wait_ready(i) for i in range(REPLICAS)]
    replay_port = deployment.ports["replay"]
    addresses = [f"tcp://{ip}:{replay_port}" for ip in ips]
    print(f"check-deploy: {', '.join(deployment.names)} ready at {', '.join(addresses)}")

    for token in (None, "wrong-" + deployment.token):
        try:
            replayd.Client(addresses[0], token=token, timeout=10).ping()
        except replayd.ReplayError:
            continue
        raise Failure(f"a client with token {token!r} was served")
    run_as = deployment.sts["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    for i in range(REPLICAS):
        uid = podman("exec", deployment.container_name(i), "id", "-u")
        if uid != str(run_as):
            raise Failure(f"{deployment.names[i]} runs as uid {uid}, the manifest's runAsUser "
                          f"is {run_as}")

    union = Union()
    # Whole batches go round-robin; each shard needs min_size items before it can be sampled.
    sizes = [min_size + 500, min_size + 200, 300]
    owners = []
    with replayd.ShardedClient(addresses, token=deployment.token, timeout=30, seed=7) as shards:
        start = 0
        for size in sizes:
            owners.append(union.insert(shards, name, np.arange(start, start + size)))
            start += size
        if owners[0] == owners[1]:
            raise Failure(f"two batches in a row went to shard {owners[0]}")
        for s, shard in enumerate(shards.shards):
            if shard.size(name) != union.held_by(s):
                raise Failure(f"shard {s} holds {shard.size(name)} items, "
                              f"{union.held_by(s)} were inserted there")
            if union.held_by(s) < min_size:
                raise Failure(f"shard {s} holds fewer than min_size_to_sample items")
        union.check_draws(shards, name)
    for i, ip in enumerate(ips):
        text = http_get(f"http://{ip}:{deployment.ports['metrics']}/metrics")
        line = f'replayd_table_items{{table="{name}"}} {union.held_by(i)}'
        if line not in text:
            raise Failure(f"{deployment.names[i]}'s /metrics lacks {line!r}")
    print(f"check-deploy: {len(union.ids)} items over {REPLICAS} shards "
          f"({', '.join(str(union.held_by(s)) for s in range(REPLICAS))}); "
          f"{DRAW_CALLS * DRAW_BATCH} union draws: every item, from its shard, p = 1/N")

    last = REPLICAS - 1
    before = deployment.snapshots(last)
    podman("pod", "stop", "-t", str(deployment.grace_s), deployment.names[last])
    status = podman("inspect", deployment.container_name(last), "--format", "{{.State.ExitCode}}")
    if status != "0":
        raise Failure(f"{deployment.names[last]} exited {status} on SIGTERM:\n"
                      + deployment.logs(last))
    after = deployment.snapshots(last)
    if not after or after == before:
        raise Failure(f"no new snapshot on {deployment.claims[last]} after SIGTERM "
                      f"(before {before}, after {after})")
    old_id = podman("inspect", deployment.container_name(last), "--format", "{{.Id}}")
    podman("pod", "rm", deployment.names[last])  # the controller deletes the pod ...
    deployment.play_pod(last)                     # ... and creates it again on its claim
    ips[last] = deployment.wait_ready(last)
    if podman("inspect", deployment.container_name(last), "--format", "{{.Id}}") == old_id:
        raise Failure("the restarted pod kept its old container")
    addresses[last] = f"tcp://{ips[last]}:{replay_port}"
    with replayd.ShardedClient(addresses, token=deployment.token, timeout=30, seed=8) as shards:
        restored = shards.shards[last].size(name)
        if restored != union.held_by(last):
            raise Failure(f"{deployment.names[last]} restored {restored} items from "
                          f"{after[-1]}, it held {union.held_by(last)}")
        union.check_draws(shards, name)
    print(f"check-deploy: {deployment.names[last]} stopped (exit 0, {after[-1]} on "
          f"{deployment.claims[last]}), replayed on its claim: {restored} items restored, "
          f"the union whole again")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default=os.environ.get("REPLAYD_IMAGE",
                                                          "localhost/replayd:test"))
    args = parser.parse_args()
    os.environ.setdefault("CONTAINERS_CONF", str(HERE / "containers.conf"))
    if os.geteuid() != 0:
        sys.exit("check-deploy: needs rootful podman (pods are reached at their addresses "
                 "on podman's network)")
    # SIGTERM (and SIGINT) unwind through the `finally` below, so nothing is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="replayd-deploy-") as workdir:
        deployment: Optional[Deployment] = None
        try:
            sts = load_statefulset(str(DEPLOY / "statefulset.yaml"))
            configmap = load_yaml("configmap.yaml")
            config = json.loads(configmap["data"]["replayd.json"])
            check_service(load_yaml("service.yaml"), sts)
            check_paths(sts, configmap, args.image)
            deployment = Deployment(sts, args.image, Path(workdir))
            deployment.refuse_leftovers()
            run(deployment, config["tables"][0])
        except Failure as failure:
            sys.exit(f"check-deploy: FAILED: {failure}")
        finally:
            if deployment is not None:
                deployment.remove()
    print(f"check-deploy: passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
