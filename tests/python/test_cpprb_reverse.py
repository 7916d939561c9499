"""replayd.cpprb.ReverseReplayBuffer against cpprb's documented RER sampling (cpprb's
"Reverse Experience Replay" page) and ports of cpprb's own ReverseReplayBuffer tests: batch
k holds the newest - i - j * stride transitions (j = 0 .. batch_size - 1), i = k until it
reaches 2 * stride, then from the newest again; positions wrap around the stored size."""
from __future__ import annotations

import numpy as np
import pytest

from replayd.cpprb import ReverseReplayBuffer


@pytest.fixture
def rb_args(address, table_name):
    return {"address": address, "table": table_name}


def test_single_samples_walk_back_from_the_newest(rb_args):
    rb = ReverseReplayBuffer(20, {"obs": {}}, stride=5, **rb_args)
    rb.add(obs=np.arange(20))
    assert [rb.sample(1)["obs"][0, 0] for _ in range(9)] == [19 - i for i in range(9)]


def test_a_batch_is_strided(rb_args):
    rb = ReverseReplayBuffer(20, {"obs": {}}, stride=5, **rb_args)
    rb.add(obs=np.arange(20))
    for i in range(9):
        assert rb.sample(2)["obs"][:, 0].tolist() == [19 - i, 14 - i]


def test_the_start_returns_to_the_newest_after_two_strides(rb_args):
    rb = ReverseReplayBuffer(20, {"obs": {}}, stride=2, **rb_args)
    rb.add(obs=np.arange(20))
    got = [rb.sample(1)["obs"][0, 0] for _ in range(10)]
    assert got == [19, 18, 17, 16, 19, 18, 17, 16, 19, 18]


def test_positions_wrap_around_the_stored_size(rb_args):
    rb = ReverseReplayBuffer(20, {"obs": {}}, stride=5, **rb_args)
    rb.add(obs=0)
    assert all(rb.sample(1)["obs"][0, 0] == 0 for _ in range(9))
    ring = ReverseReplayBuffer(8, {"obs": {}}, stride=3, address=rb_args["address"])
    for t in range(11):  # the ring holds 8 9 10 3 4 5 6 7
        ring.add(obs=t)
    assert ring.sample(3)["obs"][:, 0].tolist() == [10, 7, 4]
    assert ring.sample(3)["obs"][:, 0].tolist() == [9, 6, 3]


def test_reverse_refuses_a_bad_stride_and_an_empty_buffer(rb_args):
    with pytest.raises(ValueError, match="stride"):
        ReverseReplayBuffer(8, {"obs": {}}, stride=0, **rb_args)
    with pytest.raises(ValueError, match="empty"):
        ReverseReplayBuffer(8, {"obs": {}}, **rb_args).sample(1)
