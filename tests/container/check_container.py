#!/usr/bin/env python3
"""Host-side checks of a running replayd container (used by scripts/container-test).

  write:    waits until /readyz, checks that a missing or wrong token is refused, inserts a
            known batch into the default table `replay`, samples it back, reads /metrics.
  restored: the same items are there after a restart on the same volume.
"""
from __future__ import annotations

import argparse
import sys
import time
import urllib.request

import numpy as np

import replayd

ITEMS = 500


def batch():
    obs = np.arange(ITEMS * 4, dtype=np.float32).reshape(ITEMS, 4)
    return {"obs": obs, "act": np.arange(ITEMS), "rew": np.ones(ITEMS, np.float32),
            "next_obs": obs + 1, "done": np.zeros(ITEMS, np.uint8)}


def http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return reply.read().decode()


def wait_ready(metrics: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            http_get(metrics + "/readyz")
            return
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("container never became ready")
            time.sleep(0.5)


def check_write(args) -> None:
    for token in (None, "wrong-" + args.token):
        try:
            replayd.Client(args.address, token=token, timeout=10).ping()
        except replayd.ReplayError:
            continue
        sys.exit(f"a client with token {token!r} was served")
    with replayd.Client(args.address, token=args.token, timeout=30) as client:
        client.insert("replay", batch())
        sample = client.sample("replay", 64)
        assert set(sample.data["act"].tolist()) <= set(range(ITEMS))
        assert np.array_equal(sample.data["obs"][:, 0], sample.data["act"] * 4.0)
        assert client.size("replay") == ITEMS
    text = http_get(args.metrics + "/metrics")
    assert 'replayd_table_items{table="replay"} 500' in text, "items gauge missing from /metrics"
    print("container-test: insert, sample, token and /metrics ok")


def check_restored(args) -> None:
    with replayd.Client(args.address, token=args.token, timeout=30) as client:
        size = client.size("replay")
        assert size == ITEMS, f"restored table holds {size} items, expected {ITEMS}"
        sample = client.sample("replay", 256)
        assert np.array_equal(sample.data["obs"][:, 0], sample.data["act"] * 4.0)
    print("container-test: snapshot restored on the same volume")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("phase", choices=["write", "restored"])
    parser.add_argument("--address", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--metrics", required=True)
    args = parser.parse_args()
    wait_ready(args.metrics)
    check_write(args) if args.phase == "write" else check_restored(args)


if __name__ == "__main__":
    main()
