"""Bad input raises the right exception, carrying the server's code and message, and
leaves the connection usable."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import replayd


@pytest.fixture
def table(client, table_name):
    client.create_table(table_name, {"obs": (np.float32, 4), "act": (np.int64, ())}, 100)
    return table_name


def good(n=2):
    return {"obs": np.zeros((n, 4), np.float32), "act": np.arange(n)}


def check_usable(client, table):
    assert client.insert(table, good()).shape == (2,)


def test_wrong_dtype_names_the_field(client, table):
    with pytest.raises(replayd.InvalidArgument) as info:
        client.insert(table, {**good(), "obs": np.zeros((2, 4), np.float64)})
    assert info.value.code == "invalid_argument"
    assert "obs" in info.value.message and "float64" in info.value.message
    assert table in info.value.message  # the server's message, which names the table
    check_usable(client, table)


def test_wrong_shape_names_the_field(client, table):
    with pytest.raises(replayd.InvalidArgument, match="obs"):
        client.insert(table, {**good(), "obs": np.zeros((2, 5), np.float32)})
    check_usable(client, table)


def test_mismatched_batch_lengths_are_rejected(client, table):
    with pytest.raises(replayd.InvalidArgument, match="act"):
        client.insert(table, {"obs": np.zeros((2, 4), np.float32), "act": np.arange(3)})
    assert client.size(table) == 0


def test_unknown_field_is_named(client, table):
    with pytest.raises(replayd.InvalidArgument, match="extra"):
        client.insert(table, {**good(), "extra": np.zeros(2)})
    check_usable(client, table)


def test_missing_field_is_named(client, table):
    with pytest.raises(replayd.InvalidArgument, match="act"):
        client.insert(table, {"obs": np.zeros((2, 4), np.float32)})
    check_usable(client, table)


def test_unknown_table(client, table_name):
    for call in (lambda: client.insert(table_name, good()),
                 lambda: client.sample(table_name, 1),
                 lambda: client.update_priorities(table_name, [1], [1.0]),
                 lambda: client.delete(table_name, [1]),
                 lambda: client.reset(table_name),
                 lambda: client.drop_table(table_name),
                 lambda: client.table_info(table_name)):
        with pytest.raises(replayd.NotFound) as info:
            call()
        assert info.value.code == "not_found" and table_name in info.value.message


@pytest.mark.parametrize("priority", [-1.0, math.nan, math.inf])
def test_bad_priorities_reject_the_whole_request(client, table, priority):
    keys = client.insert(table, good(3))
    with pytest.raises(replayd.InvalidArgument, match="priorit"):
        client.update_priorities(table, keys, [1.0, priority, 1.0])
    with pytest.raises(replayd.InvalidArgument, match="priorit"):
        client.insert(table, good(2), priorities=[1.0, priority])
    assert client.size(table) == 3
    assert client.table_info(table)["counters"]["priority_updates"] == 0


@pytest.mark.parametrize(
    "priority, text",
    [(float("nan"), r"priorities\[1\] is NaN:"), (-1.0, r"priorities\[1\] is -1:"),
     (-1e-300, r"priorities\[1\] is -1e-300:"), (float("inf"), r"priorities\[1\] is inf:")],
)
def test_a_bad_priority_is_named_by_its_index_and_its_exact_value(client, table, priority, text):
    keys = client.insert(table, good(3))
    with pytest.raises(replayd.InvalidArgument, match=text):
        client.update_priorities(table, keys, [1.0, priority, 1.0])


def test_a_bad_gamma_is_reported_exactly(client, table_name):
    name = table_name
    client.create_table(name, {"rew": (np.float32, ())}, 16, episodic=True, reward="rew")
    with pytest.raises(replayd.InvalidArgument, match=r"got -1e-300"):
        client.sample(name, 1, nstep=1, gamma=-1e-300, timeout=0)
    with pytest.raises(replayd.InvalidArgument, match=r"got 1.0000000000000002"):
        client.sample(name, 1, nstep=1, gamma=1 + 2.220446049250313e-16, timeout=0)


def test_bad_sample_arguments(client, table):
    client.insert(table, good())
    with pytest.raises(replayd.InvalidArgument):
        client.sample(table, 0)
    with pytest.raises(replayd.InvalidArgument, match="beta"):
        client.sample(table, 1, beta=-1)
    with pytest.raises(replayd.InvalidArgument):
        client.sample(table, 1.5)


def test_batches_beyond_the_server_limit_are_resource_exhausted(client, table):
    limit = client.server["limits"]["max_batch_items"]
    with pytest.raises(replayd.ResourceExhausted):
        client.sample(table, limit + 1)
    check_usable(client, table)


def test_frames_beyond_the_server_limit_are_refused_before_sending(make_server, tmp_path):
    """(An insert that large goes in parts instead: tests/python/test_insert_parts.py.)"""
    config = tmp_path / "limits.json"
    config.write_text(json.dumps({"limits": {"max_frame_bytes": 4096}}))
    server = make_server(tcp=False, extra_args=["--config", str(config)])
    with replayd.Client(server.unix_address, timeout=30) as client:
        client.create_table("t", {"obs": (np.float32, 4)}, 1000, sampler="prioritized")
        keys = client.insert("t", {"obs": np.zeros((300, 4), np.float32)})
        with pytest.raises(replayd.ResourceExhausted, match="max_frame_bytes"):
            client.update_priorities("t", keys, np.ones(300))  # 4.8 KB of keys and priorities
        assert client.update_priorities("t", keys[:100], np.ones(100)) == 0  # still usable


def test_create_table_conflicts(client, table):
    with pytest.raises(replayd.AlreadyExists) as info:
        client.create_table(table, {"obs": (np.float32, 5)}, 100, exist_ok=True)
    assert info.value.code == "already_exists" and table in info.value.message
    with pytest.raises(replayd.AlreadyExists):
        client.create_table(table, {"obs": (np.float32, 4), "act": (np.int64, ())}, 100)


@pytest.mark.parametrize("kwargs,match", [
    ({"capacity": 0}, "capacity"),
    ({"sampler": "sideways"}, "sampler"),
    ({"remover": "sideways"}, "remover"),
    ({"rate_limiter": replayd.MinSize(0)}, "min_size_to_sample"),
    ({"rate_limiter": replayd.MinSize(1000)}, "min_size_to_sample"),
])
def test_impossible_tables_are_invalid_arguments(client, table_name, kwargs, match):
    args = {"capacity": 100, **kwargs}
    capacity = args.pop("capacity")
    with pytest.raises(replayd.InvalidArgument, match=match):
        client.create_table(table_name, {"x": (np.int8, ())}, capacity, **args)


def test_bad_table_names_are_invalid_arguments(client):
    with pytest.raises(replayd.InvalidArgument):
        client.create_table("no spaces allowed", {"x": (np.int8, ())}, 10)


def test_values_no_dtype_can_carry_fail_before_sending(client, table):
    with pytest.raises(replayd.InvalidArgument, match="field 'act'"):
        client.insert(table, {**good(), "act": ["a", "b"]})


def test_bad_keys(client, table):
    with pytest.raises(replayd.InvalidArgument, match="keys"):
        client.delete(table, [-1])
    with pytest.raises(replayd.InvalidArgument, match="keys"):
        client.update_priorities(table, [1.5], [1.0])
    with pytest.raises(replayd.InvalidArgument, match="2 keys but 1 priorities"):
        client.update_priorities(table, [1, 2], [1.0])


def test_a_failed_insert_stores_nothing(client, table):
    with pytest.raises(replayd.InvalidArgument):
        client.insert(table, {"obs": np.zeros((3, 4), np.float32), "act": np.zeros(3)})
    assert client.size(table) == 0
    assert client.table_info(table)["counters"]["inserts"] == 0
