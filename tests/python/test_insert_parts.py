"""An insert larger than the server's limits (max_batch_items, max_frame_bytes, from its
hello) goes in several requests, pipelined, and returns every key in item order; one part
that fails says how many items were stored."""
from __future__ import annotations

import json

import numpy as np
import pytest

import replayd


def limited_server(make_server, tmp_path, **limits):
    config = tmp_path / "limits.json"
    config.write_text(json.dumps({"limits": limits}))
    return make_server(tcp=False, extra_args=["--config", str(config)])


def drain_queue(client, table, n, per_request):
    """Every item of a queue table in insertion order: (keys, x values)."""
    keys, xs = [], []
    while len(keys) < n:
        sample = client.sample(table, min(per_request, n - len(keys)))
        keys += sample.keys.tolist()
        xs += sample.data["x"].tolist()
    return keys, xs


def test_an_insert_above_max_batch_items_goes_in_parts_with_keys_in_item_order(
        make_server, tmp_path):
    server = limited_server(make_server, tmp_path, max_batch_items=100)
    with replayd.Client(server.unix_address, timeout=30) as client:
        assert client.server["limits"]["max_batch_items"] == 100
        client.create_queue("q", {"x": (np.int64, ())}, size=2000)
        keys = client.insert("q", {"x": np.arange(1050)})
        assert keys.dtype == np.uint64 and len(keys) == 1050
        assert client.size("q") == 1050
        drawn_keys, xs = drain_queue(client, "q", 1050, 100)
    assert xs == list(range(1050))  # stored in item order
    assert drawn_keys == keys.tolist()  # and each key is its item's


def test_an_insert_above_max_frame_bytes_goes_in_parts(make_server, tmp_path):
    server = limited_server(make_server, tmp_path, max_frame_bytes=16384)
    with replayd.Client(server.unix_address, timeout=30) as client:
        client.create_queue("q", {"x": (np.int64, ()), "v": (np.float32, 64)}, size=1000)
        v = np.arange(300 * 64, dtype=np.float32).reshape(300, 64)  # 77 KB of values
        keys = client.insert("q", {"x": np.arange(300), "v": v}, priorities=np.ones(300))
        assert len(keys) == 300
        got = client.sample("q", 40)
        assert got.data["x"].tolist() == list(range(40))
        assert np.array_equal(got.data["v"], v[:40])
        future = client.insert_async("q", {"x": np.arange(300, 500),
                                           "v": np.zeros((200, 64), np.float32)})
        assert len(future.result(30)) == 200
        assert client.size("q") == 460


def test_the_default_limits_take_a_million_rows_in_one_call(client, table_name):
    client.create_table(table_name, {"x": (np.int32, ())}, 1_000_000)
    keys = client.insert(table_name, {"x": np.arange(1_000_000, dtype=np.int32)})
    assert len(keys) == 1_000_000 and len(np.unique(keys)) == 1_000_000
    assert client.size(table_name) == 1_000_000


def test_a_part_that_fails_says_how_many_items_were_stored(make_server, tmp_path):
    server = limited_server(make_server, tmp_path, max_batch_items=100)
    with replayd.Client(server.unix_address, timeout=30) as client:
        client.create_table("q", {"x": (np.int64, ())}, 1000,  # the third part waits
                            rate_limiter=replayd.Queue(250))
        with pytest.raises(replayd.TimeoutError) as failure:
            client.insert("q", {"x": np.arange(300)}, timeout=0.5)
        message = failure.value.message
        assert "went in requests of at most 100 items" in message, message
        assert "the request from item 200 failed; 200 of the 300 items were stored" in message
        assert client.size("q") == 200


def test_an_insert_above_the_capacity_is_refused_before_anything_is_stored(client,
                                                                          table_name):
    client.create_table(table_name, {"x": (np.int64, ())}, 100)
    with pytest.raises(replayd.InvalidArgument, match="insert of 150 items exceeds capacity 100"):
        client.insert(table_name, {"x": np.arange(150)})
    assert client.size(table_name) == 0

