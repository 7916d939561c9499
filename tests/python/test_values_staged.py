"""Staged publishes (docs/VALUES.md, "Staged publishes"): a same-host publisher of a large
value writes it straight into the block the server sends it, and the server seals the block
at the commit only once nobody can write it any more (the real server)."""
from __future__ import annotations

import mmap
import os
import urllib.request
from typing import Any, Dict

import numpy as np
import pytest

import replayd
from replayd import values as values_module
from replayd.connection import Connection

METRICS = ["--metrics", "127.0.0.1:0"]


def parts_received(server: Any) -> float:
    """publish_part requests the server answered, whatever their outcome."""
    text = urllib.request.urlopen(f"http://{server.ready['metrics']}/metrics",
                                  timeout=10).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith('replayd_requests_total{op="publish_part"'))


def big_value(seed: int) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w": rng.standard_normal((700, 1001)).astype(np.float32),      # 2.8 MB
            "b": rng.standard_normal(1001).astype(np.float64),
            "empty": np.zeros((0, 3), dtype=np.int16), "step": np.array(9, dtype=np.int64)}


def test_a_large_value_from_the_same_host_is_staged_and_fetched_identically(make_server):
    server = make_server(extra_args=METRICS)
    with replayd.Client(server.unix_address, timeout=30, shm=True) as local, \
            replayd.Client(server.tcp_address, timeout=30) as remote:
        published = big_value(1)
        parts_before = parts_received(server)
        assert local.publish("policy", published) == 1
        # Staged: not one part crossed the socket.
        assert parts_received(server) == parts_before
        for client in (local, remote):
            version, got = client.fetch("policy")
            assert version == 1 and got is not None
            for name, array in published.items():
                np.testing.assert_array_equal(got[name], array)
                assert got[name].dtype == array.dtype and got[name].shape == array.shape
        # A remote publisher sends parts, with the same result.
        assert remote.publish("policy", big_value(2)) == 2
        assert parts_received(server) > parts_before
        _, got = local.fetch("policy", newer_than=1)
        assert got is not None
        np.testing.assert_array_equal(got["w"], big_value(2)["w"])


def test_a_staged_block_still_mapped_writable_is_not_committed(make_server):
    server = make_server()
    conn = Connection.open(replayd.parse_address(server.unix_address), timeout=30, shm=True)
    try:
        begin = conn.call({"op": "publish_begin", "name": "policy", "version": None,
                           "staged": True,
                           "arrays": [{"name": "w", "dtype": "uint8", "shape": [1 << 20]}]})
        assert begin["staged"] is True
        fd = begin["descriptors"][0]
        block = mmap.mmap(fd, 1 << 20, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        block[:4] = b"abcd"
        with pytest.raises(replayd.InvalidArgument, match="still mapped writable"):
            conn.call({"op": "publish_commit", "upload": begin["upload"]})
        with pytest.raises(replayd.InvalidArgument, match="takes no parts"):
            conn.call({"op": "publish_part", "upload": begin["upload"], "offset": 0},
                      [np.zeros(8, dtype=np.uint8)])
        block.close()
        assert conn.call({"op": "publish_commit", "upload": begin["upload"]})["version"] == 1
        # Sealed: the descriptor the publisher kept can neither write nor map writable.
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"x", 0)
        with pytest.raises(PermissionError):
            mmap.mmap(fd, 1 << 20, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        fetched = values_module.fetch(conn, "policy", newer_than=None, seconds=10, grace=5)
        assert fetched.arrays is not None
        assert bytes(fetched.arrays["w"][:4]) == b"abcd"
    finally:
        conn.close()


def test_a_staged_publish_needs_the_plane(make_server):
    server = make_server()
    with replayd.Client(server.tcp_address, timeout=30) as remote:
        conn = remote.connection()
        with pytest.raises(replayd.PermissionDenied):
            conn.call({"op": "publish_begin", "name": "policy", "version": None,
                       "staged": True,
                       "arrays": [{"name": "w", "dtype": "uint8", "shape": [16]}]})
