"""replayd.cpprb's ring positions are cpprb's: ``sample()["indexes"]`` are ring positions
that ``_encode_sample`` and ``update_priorities`` take (and users index their own
per-transition arrays with), and the MP buffers share one ring between processes: each add
is stored before it returns, every process sees the same next index and stored size,
whatever the start method."""
from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

import cpprb_workers
from replayd.cpprb import (MPPrioritizedReplayBuffer, MPReplayBuffer, PrioritizedReplayBuffer,
                           ReplayBuffer)


@pytest.fixture
def rb_args(address, table_name):
    return {"address": address, "table": table_name}


def test_sample_indexes_are_ring_positions_that_encode_sample_reads(rb_args):
    rb = PrioritizedReplayBuffer(8, {"x": {}}, **rb_args)
    rb.add(x=np.arange(5))
    s = rb.sample(64)
    assert s["indexes"].dtype == np.uint64
    assert set(s["indexes"].tolist()) <= {0, 1, 2, 3, 4}
    np.testing.assert_array_equal(s["x"][:, 0], s["indexes"].astype(np.float32))
    again = rb._encode_sample(s["indexes"])
    np.testing.assert_array_equal(again["x"], s["x"])
    mine = np.arange(8) * 10  # a user's own per-transition array, indexed by position
    assert set(mine[s["indexes"]].tolist()) <= {0, 10, 20, 30, 40}


def test_ring_positions_wrap_as_cpprb(rb_args):
    rb = PrioritizedReplayBuffer(4, {"x": {}}, **rb_args)
    for i in range(6):
        assert rb.add(x=float(i)) == i % 4
    s = rb.sample(200)
    expected = {0: 4.0, 1: 5.0, 2: 2.0, 3: 3.0}
    assert {int(i): float(x) for i, x in zip(s["indexes"], s["x"][:, 0])} == expected
    assert rb.get_all_transitions()["x"][:, 0].tolist() == [4, 5, 2, 3]


def test_a_batch_larger_than_the_ring_keeps_cpprb_positions_and_next_index(rb_args):
    rb = ReplayBuffer(4, {"x": {}}, **rb_args)
    assert rb.add(x=np.arange(7)) == 0
    assert rb.get_next_index() == 3
    assert rb.get_all_transitions()["x"][:, 0].tolist() == [4, 5, 6, 3]
    rb.add(x=7.0)  # overwrites position 3, the oldest
    assert rb._encode_sample([3, 0])["x"][:, 0].tolist() == [7, 4]


def test_update_priorities_takes_any_numeric_index_dtype_and_one_priority_for_all(rb_args):
    rb = PrioritizedReplayBuffer(4, {"x": {}}, alpha=1.0, eps=0.0, **rb_args)
    rb.add(x=np.arange(4))
    rb.update_priorities(np.arange(4, dtype=np.float16), 1e-9)  # every position at once
    rb.update_priorities(np.array([2], dtype=np.uint8), [5.0])
    assert rb.get_max_priority() == 5.0
    s = rb.sample(100)
    assert (s["x"][:, 0] == 2).mean() > 0.95
    with pytest.raises(ValueError, match="3 indexes but 2 priorities"):
        rb.update_priorities([0, 1, 2], [1.0, 2.0])
    with pytest.raises(IndexError, match="outside"):
        rb.update_priorities([4], [1.0])


def test_check_for_update_ignores_positions_written_after_the_sample(rb_args):
    rb = PrioritizedReplayBuffer(1, {"done": {}}, check_for_update=True, **rb_args)
    rb.add(done=1.0)
    i = rb.sample(1)["indexes"]
    rb.update_priorities(i, [2.0])
    assert rb.get_max_priority() == 2.0
    rb.add(done=1.0)
    rb.update_priorities(i, [3.0])  # position 0 was written since: ignored
    assert rb.get_max_priority() == 2.0


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_mp_buffers_share_the_ring_between_processes(rb_args, method):
    ctx = multiprocessing.get_context(method)
    rb = MPReplayBuffer(8, {"x": {}}, ctx=ctx, **rb_args)
    rb.add(x=100.0)
    seen = ctx.Queue()
    child = ctx.Process(target=cpprb_workers.add_then_report, args=(rb, range(10), seen))
    child.start()
    reports = [seen.get(timeout=60) for _ in range(10)]
    child.join(60)
    assert child.exitcode == 0
    # each add's position and the next index the child saw right after it: the shared ring
    assert [r[0] for r in reports] == [i % 8 for i in range(1, 11)]
    assert [r[1] for r in reports] == [i % 8 for i in range(2, 12)]
    assert [r[2] for r in reports] == [min(i, 8) for i in range(2, 12)]
    assert rb.get_next_index() == 11 % 8 and rb.get_stored_size() == 8
    assert rb.add(x=200.0) == 3
    assert rb.get_all_transitions()["x"][:, 0].tolist() == [7, 8, 9, 200, 3, 4, 5, 6]


def test_mp_update_priorities_reaches_only_positions_sampled_since_written(rb_args):
    rb = MPPrioritizedReplayBuffer(1, {"done": {}}, **rb_args)
    rb.add(done=1.0)
    rb.update_priorities([0], [2.0])  # not sampled yet: ignored, as in cpprb
    assert rb.get_max_priority() == 1.0
    rb.sample(1)
    rb.update_priorities([0], [2.0])
    assert rb.get_max_priority() == 2.0
