"""A sample can be received straight into a buffer the caller owns (sample_into, allocate=)."""
from __future__ import annotations

import numpy as np
import pytest

import replayd


@pytest.fixture
def filled(client, table_name):
    client.create_table(table_name, {"obs": (np.float32, 3), "act": (np.int64, ())}, 100)
    obs = np.arange(30, dtype=np.float32).reshape(10, 3)
    keys = client.insert(table_name, {"obs": obs, "act": np.arange(10)})
    return dict(zip(keys.tolist(), obs))


def test_sample_into_lands_in_the_callers_buffer(client, table_name, filled):
    need = client.sample_nbytes(table_name, 16)
    assert need == 16 * (8 + 8 + 8 + 4) + 16 * 12 + 16 * 8  # key, prob, weight, times, obs, act
    out = np.zeros(need + 100, np.uint8)
    sample = client.sample_into(table_name, out, 16)
    for array in (sample.keys, sample.weights, sample.data["obs"], sample.data["act"]):
        assert np.shares_memory(array, out)
    for key, row in zip(sample.keys.tolist(), sample.data["obs"]):
        np.testing.assert_array_equal(row, filled[key])


def test_sample_into_refuses_a_buffer_too_small_or_read_only(client, table_name, filled):
    need = client.sample_nbytes(table_name, 4)
    with pytest.raises(replayd.InvalidArgument, match=f"needs {need}"):
        client.sample_into(table_name, np.zeros(need - 1, np.uint8), 4)
    with pytest.raises(replayd.InvalidArgument, match="read-only"):
        client.sample_into(table_name, bytes(need), 4)
    assert len(client.sample(table_name, 4)) == 4  # the connection is still fine


def test_sampler_receives_each_reply_where_its_allocator_says(client, table_name, filled):
    buffers = []

    def allocate(nbytes):
        buffers.append(np.empty(nbytes, np.uint8))
        return buffers[-1]

    with client.sampler(table_name, 8, prefetch=2, allocate=allocate) as batches:
        samples = [next(batches) for _ in range(5)]
    assert len(buffers) >= 5
    for sample in samples:
        assert any(np.shares_memory(sample.data["obs"], b) for b in buffers)


def test_an_allocator_buffer_that_does_not_fit_is_ignored(client, table_name, filled):
    sample = client.sample(table_name, 8, allocate=lambda nbytes: np.empty(1, np.uint8))
    assert len(sample) == 8 and sample.data["obs"].shape == (8, 3)
