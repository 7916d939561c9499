"""Every dtype and shape survives the trip through the server, over both transports."""
from __future__ import annotations

import numpy as np
import pytest

import replayd
from replayd.schema import WIRE_DTYPES


def random_values(rng: np.random.Generator, dtype: str, shape) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return (rng.standard_normal(shape) * 1000).astype(dtype)


@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 1)], ids=["scalar", "vector", "tensor"])
def test_every_dtype_round_trips(client, table_name, shape):
    n = 37
    fields = {f"f_{dtype}": (dtype, shape) for dtype in WIRE_DTYPES}
    client.create_table(table_name, fields, capacity=n)
    rng = np.random.default_rng(42)
    data = {name: random_values(rng, dtype, (n, *shape)) for name, (dtype, _) in fields.items()}
    keys = client.insert(table_name, data)
    assert keys.dtype == np.uint64 and keys.shape == (n,) and len(set(keys.tolist())) == n
    row_of = {int(k): i for i, k in enumerate(keys)}
    sample = client.sample(table_name, 200)
    assert list(sample.data) == list(fields)
    rows = [row_of[int(k)] for k in sample.keys]
    for name, (dtype, _) in fields.items():
        got = sample.data[name]
        assert got.dtype == np.dtype(dtype) and got.shape == (200, *shape)
        np.testing.assert_array_equal(got, data[name][rows])
    np.testing.assert_allclose(sample.probabilities, 1 / n)
    np.testing.assert_array_equal(sample.weights, 1.0)
    assert sample.times_sampled.dtype == np.uint32 and sample.times_sampled.min() >= 1


def test_a_single_transition_without_batch_dimension(client, table_name):
    client.create_table(table_name, {"obs": (np.float32, (2, 2)), "done": (bool, ())}, 10)
    keys = client.insert(table_name, {"obs": np.eye(2, dtype=np.float32), "done": True})
    assert keys.shape == (1,)
    sample = client.sample(table_name, 3)
    np.testing.assert_array_equal(sample.data["obs"], np.stack([np.eye(2)] * 3))
    assert sample.data["done"].tolist() == [True] * 3
    assert sample.keys.tolist() == [keys[0]] * 3


def test_python_scalars_and_lists_are_converted(client, table_name):
    client.create_table(table_name, {"obs": (np.float32, 3), "act": (np.uint8, ()),
                                     "rew": (np.float64, ())}, 10)
    client.insert(table_name, {"obs": [1, 2.5, 3], "act": 200, "rew": 1})
    sample = client.sample(table_name, 1)
    assert sample.data["obs"].tolist() == [[1.0, 2.5, 3.0]]
    assert sample.data["act"].tolist() == [200] and sample.data["rew"].tolist() == [1.0]


def test_safe_casts_store_the_same_values(client, table_name):
    client.create_table(table_name, {"x": (np.float64, 2), "i": (np.int64, ())}, 10)
    client.insert(table_name, {"x": np.array([[0.5, -2]], np.float32),
                               "i": np.array([-7], np.int16)})
    sample = client.sample(table_name, 1)
    assert sample.data["x"].tolist() == [[0.5, -2.0]] and sample.data["i"].tolist() == [-7]


def test_large_batches_cross_the_wire_intact(client, table_name):
    # ~12 MiB each way: exercises partial sends and payloads received in place.
    n = 1000
    client.create_table(table_name, {"img": (np.uint8, (64, 64, 3)), "id": (np.int64, ())}, n)
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (n, 64, 64, 3), dtype=np.uint8)
    keys = client.insert(table_name, {"img": images, "id": np.arange(n)})
    sample = client.sample(table_name, n)
    ids = sample.data["id"]
    np.testing.assert_array_equal(sample.data["img"], images[ids])
    np.testing.assert_array_equal(sample.keys, keys[ids])


def test_sample_data_views_the_received_buffer(address, table_name):
    # Through the socket: the reply's one buffer. (Over shared memory the rows are gathered
    # into arrays of the sample's own; test_shm_plane.py.)
    with replayd.Client(address, timeout=30, shm=False) as client:
        client.create_table(table_name, {"a": (np.float32, 4), "b": (np.int8, 3)}, 10)
        client.insert(table_name, {"a": np.ones((4, 4), np.float32),
                                   "b": np.ones((4, 3), np.int8)})
        sample = client.sample(table_name, 8)
        base = sample.keys.base
        for array in (sample.data["a"], sample.data["b"], sample.weights):
            assert np.shares_memory(array, base)
    for shm in (False, True):
        with replayd.Client(address, timeout=30, shm=None if shm else False) as client:
            sample = client.sample(table_name, 8)
            sample.data["a"][0, 0] = 5  # the arrays are the sample's own: writable
            assert sample.data["a"][0, 0] == 5


def test_table_admin_operations(client, table_name):
    info = client.create_table(table_name, {"x": (np.int32, ())}, 10, sampler="prioritized",
                               priority_exponent=0.5, seed=3)
    assert info["name"] == table_name and info["capacity"] == 10 and info["size"] == 0
    assert info["description"]["sampler"] == {"kind": "prioritized", "priority_exponent": 0.5}
    assert table_name in client.tables()
    again = client.create_table(table_name, {"x": (np.int32, ())}, 10, sampler="prioritized",
                                priority_exponent=0.5, seed=4, exist_ok=True)
    assert again["name"] == table_name
    client.insert(table_name, {"x": np.arange(4, dtype=np.int32)})
    assert client.size(table_name) == 4
    assert client.info()["server"]["protocol"] == 1
    client.reset(table_name)
    assert client.size(table_name) == 0
    client.drop_table(table_name)
    assert table_name not in client.tables()


def test_update_priorities_and_delete_report_stale_keys(client, table_name):
    client.create_table(table_name, {"x": (np.int32, ())}, 10, sampler="prioritized")
    keys = client.insert(table_name, {"x": np.arange(5, dtype=np.int32)})
    assert client.update_priorities(table_name, keys, [1, 2, 3, 4, 5]) == 0
    assert client.delete(table_name, keys[:2]) == 2
    assert client.update_priorities(table_name, keys, np.ones(5)) == 2
    assert client.delete(table_name, keys) == 3
    assert client.update_priorities(table_name, [], []) == 0
    counters = client.table_info(table_name)["counters"]
    assert counters["deletes"] == 5 and counters["stale_deletes"] == 2
    assert counters["stale_updates"] == 2


def test_hello_reports_limits(client):
    limits = client.server["limits"]
    assert limits["max_batch_items"] >= 1 and limits["max_frame_bytes"] > 0
