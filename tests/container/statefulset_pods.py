#!/usr/bin/env python3
"""The Pods and volume claims a StatefulSet controller would create, as manifests that
`podman kube play` runs (podman 4.3 plays Pods, Deployments and PersistentVolumeClaims,
not StatefulSets).

For ordinal i of StatefulSet `name`, `statefulset_pod(sts, i)` returns the documents the
controller would make:
  - a PersistentVolumeClaim `<claim>-<name>-<i>` from each volumeClaimTemplate (podman
    makes it a named volume of that name, kept across pod restarts), and
  - a Pod `<name>-<i>` from the pod template: its labels plus
    `statefulset.kubernetes.io/pod-name`, `hostname: <name>-<i>`, `subdomain: <serviceName>`,
    and a `persistentVolumeClaim` volume per claim template under the template's name.
Three podman-only changes are made to the pod, each an option of `statefulset_pod`:
  - `image` replaces every container's image (the one under test instead of the tag a
    cluster pulls);
  - readiness and liveness probes are dropped (`for_podman`): podman 4.3 turns an httpGet
    probe into a `curl` command run inside the container (the image has no curl, and a
    named port becomes port 0), so a caller probes the pod from outside instead;
  - container ports are dropped (`for_podman`): podman 4.3 publishes every containerPort
    on all the host's addresses at the same port number, so two pods collide on 7700; in a
    cluster they only name the pod's ports. The pod still listens on them at its address.
`terminationGracePeriodSeconds` stays in the Pod, but podman 4.3 does not apply it (its stop
timeout stays 10 s): a caller stopping the pod passes it as `podman pod stop -t`.

Usage: statefulset_pods.py STATEFULSET.yaml [--replicas N] [--image IMAGE]  (prints YAML)
"""
from __future__ import annotations

import argparse
import copy
from typing import Any, Dict, List, Optional

import yaml

PROBES = ("readinessProbe", "livenessProbe", "startupProbe")


def load_statefulset(path: str) -> Dict[str, Any]:
    """The one StatefulSet in `path`; ValueError naming the file otherwise."""
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    sets = [d for d in docs if d.get("kind") == "StatefulSet"]
    if len(sets) != 1:
        raise ValueError(f"{path}: expected one StatefulSet, found {len(sets)}")
    return sets[0]


def claim_name(sts: Dict[str, Any], template: str, ordinal: int) -> str:
    """The claim a StatefulSet makes for `template` at `ordinal`: <template>-<set>-<i>."""
    return f"{template}-{sts['metadata']['name']}-{ordinal}"


def statefulset_pod(sts: Dict[str, Any], ordinal: int, *, image: Optional[str] = None,
                    for_podman: bool = True) -> List[Dict[str, Any]]:
    """[claim, ..., pod] for `ordinal`, as described in the module docstring."""
    name = sts["metadata"]["name"]
    spec = sts["spec"]
    replicas = int(spec.get("replicas", 1))
    if not 0 <= ordinal < replicas:
        raise ValueError(f"ordinal {ordinal} outside the StatefulSet's {replicas} replicas")
    pod_name = f"{name}-{ordinal}"
    template = copy.deepcopy(spec["template"])
    pod_spec = template["spec"]
    labels = dict(template.get("metadata", {}).get("labels", {}))
    selector = spec["selector"]["matchLabels"]
    if any(labels.get(k) != v for k, v in selector.items()):
        raise ValueError(f"the pod template's labels {labels} do not match the selector "
                         f"{selector}")
    labels["statefulset.kubernetes.io/pod-name"] = pod_name

    docs: List[Dict[str, Any]] = []
    volumes = pod_spec.setdefault("volumes", [])
    for claim in spec.get("volumeClaimTemplates", []):
        template_name = claim["metadata"]["name"]
        claim_doc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": claim_name(sts, template_name, ordinal),
                                  "labels": dict(selector)},
                     "spec": copy.deepcopy(claim["spec"])}
        docs.append(claim_doc)
        volumes.append({"name": template_name,
                        "persistentVolumeClaim": {"claimName": claim_doc["metadata"]["name"]}})

    pod_spec["hostname"] = pod_name
    pod_spec["subdomain"] = spec["serviceName"]
    for container in pod_spec["containers"]:
        if image is not None:
            container["image"] = image
        if for_podman:
            for probe in PROBES:
                container.pop(probe, None)
            container.pop("ports", None)
    metadata = {"name": pod_name, **template.get("metadata", {}), "labels": labels}
    docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec})
    return docs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("statefulset")
    parser.add_argument("--replicas", type=int, help="the first N ordinals (default: all)")
    parser.add_argument("--image", help="replaces every container's image")
    args = parser.parse_args()
    sts = load_statefulset(args.statefulset)
    count = args.replicas if args.replicas is not None else int(sts["spec"].get("replicas", 1))
    docs = [d for i in range(count) for d in statefulset_pod(sts, i, image=args.image)]
    print(yaml.safe_dump_all(docs, sort_keys=False), end="")


if __name__ == "__main__":
    main()
