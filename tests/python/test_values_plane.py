"""Published values over the shared-memory plane (docs/VALUES.md, docs/SHM.md): a same-host
fetcher maps the value's sealed block instead of receiving its bytes, with the same arrays
as a fetch through the socket; the mapping is private (writes stay in the process), a
committed block never changes, and fetches leave no descriptor behind (the real server)."""
from __future__ import annotations

import gc
import os
import time
import urllib.request
from typing import Any, Dict

import numpy as np
import pytest

import replayd

METRICS = ["--metrics", "127.0.0.1:0"]


def fetched_bytes(server: Any, metric: str = "replayd_value_fetched_bytes_total") -> float:
    text = urllib.request.urlopen(f"http://{server.ready['metrics']}/metrics",
                                  timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(metric + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{metric} is missing")


def value(seed: int) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w": rng.standard_normal((300, 301)).astype(np.float32),
            "steps": np.arange(7, dtype=np.int64), "flag": np.array(True)}


def test_a_same_host_fetch_maps_the_block_and_matches_the_socket(make_server):
    server = make_server(extra_args=METRICS)
    with replayd.Client(server.unix_address, timeout=30, shm=True) as local, \
            replayd.Client(server.tcp_address, timeout=30) as remote:
        published = value(1)
        assert local.publish("policy", published) == 1
        before = fetched_bytes(server)
        shared_before = fetched_bytes(server, "replayd_value_shared_bytes_total")
        version, mapped = local.fetch("policy")
        assert version == 1 and mapped is not None
        assert fetched_bytes(server) == before            # no value bytes through the socket
        assert fetched_bytes(server, "replayd_value_shared_bytes_total") == \
            shared_before + 300 * 301 * 4 + 7 * 8 + 8     # the block handed over instead
        _, sent = remote.fetch("policy")
        assert sent is not None
        assert fetched_bytes(server) == before + 300 * 301 * 4 + 7 * 8 + 8
        for name, array in published.items():
            np.testing.assert_array_equal(mapped[name], array)
            np.testing.assert_array_equal(sent[name], array)
            assert mapped[name].dtype == array.dtype and mapped[name].shape == array.shape

        # Private: a write stays in this result; the block and other fetches are unchanged.
        mapped["w"][0, 0] = 12345.0
        _, again = local.fetch("policy")
        assert again is not None and again["w"][0, 0] == published["w"][0, 0]

        # A committed block never changes: a new version is a new block.
        assert local.publish("policy", value(2)) == 2
        np.testing.assert_array_equal(again["w"], published["w"])
        _, newer = local.fetch("policy", newer_than=1)
        assert newer is not None
        np.testing.assert_array_equal(newer["w"], value(2)["w"])


def test_fetches_over_the_plane_leave_no_descriptor_open(make_server):
    server = make_server()
    with replayd.Client(server.unix_address, timeout=30, shm=True) as c:
        c.publish("v", {"x": np.ones(1 << 16, np.float64)})
        c.fetch("v")                                          # the connection is up
        gc.collect()
        before = len(os.listdir("/proc/self/fd"))
        results = [c.fetch("v") for _ in range(200)]
        assert all(r.arrays is not None and r.arrays["x"][5] == 1.0 for r in results)
        assert len(os.listdir("/proc/self/fd")) == before    # mapped, descriptor closed
        server_fds = len(os.listdir(f"/proc/{server.proc.pid}/fd"))
        del results
        gc.collect()
        for _ in range(3):
            c.publish("v", {"x": np.zeros(1 << 16)})          # old blocks go with their version
        time.sleep(0.2)
        assert len(os.listdir(f"/proc/{server.proc.pid}/fd")) <= server_fds


def test_without_the_plane_the_bytes_come_through_the_socket(make_server):
    server = make_server(extra_args=METRICS)
    with replayd.Client(server.unix_address, timeout=30, shm=False) as c:
        c.publish("v", {"x": np.arange(1000, dtype=np.int16)})
        before = fetched_bytes(server)
        _, arrays = c.fetch("v")
        assert arrays is not None
        np.testing.assert_array_equal(arrays["x"], np.arange(1000, dtype=np.int16))
        assert fetched_bytes(server) == before + 2000


@pytest.mark.parametrize("shm", [True, False])
def test_a_value_restored_from_a_snapshot_is_fetched_alike(make_server, tmp_path, shm):
    data_dir = tmp_path / "data"
    server = make_server(extra_args=["--data-dir", str(data_dir)])
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.publish("policy", value(3), version=9)
    server.stop()
    server.extra_args = ["--data-dir", str(data_dir)]
    server.start()
    with replayd.Client(server.unix_address, timeout=30, shm=shm) as c:
        version, arrays = c.fetch("policy", timeout=0)
        assert version == 9 and arrays is not None
        for name, array in value(3).items():
            np.testing.assert_array_equal(arrays[name], array)
        assert c.publish("policy", value(4)) == 10
