"""replayd.cpprb buffers behave as independent cpprb objects: own tables, ring positions,
episode lengths and max priorities, checked against a small model of cpprb's ring buffer
(cpprb/PyReplayBuffer.pyx: ``add`` returns the index of its first item and advances
``index = (index + N) % buffer_size``; ``on_episode_end`` and ``clear`` reset the episode
length; the prioritized buffers' max priority starts at 1.0)."""
from __future__ import annotations

import gc
import multiprocessing
import pickle

import numpy as np
import pytest

import cpprb_workers
import replayd
from replayd.cpprb import (MPReplayBuffer, PrioritizedReplayBuffer, ReplayBuffer,
                           create_buffer)


class RingModel:
    """cpprb's ring bookkeeping: next index and the stored values in ring order."""

    def __init__(self, size):
        self.size, self.index, self.stored, self.values = size, 0, 0, [None] * size

    def add(self, values):
        first = self.index
        for v in values:
            self.values[self.index] = v
            self.index = (self.index + 1) % self.size
            self.stored = min(self.stored + 1, self.size)
        return first


@pytest.fixture
def address_only(address):
    return {"address": address}


def test_two_buffers_without_table_names_are_independent(address_only):
    a = ReplayBuffer(8, {"x": {}}, **address_only)
    b = ReplayBuffer(8, {"x": {}}, **address_only)
    c = ReplayBuffer(8, {"x": {"shape": 2}}, **address_only)  # no AlreadyExists
    a.add(x=1.0)
    assert a.get_stored_size() == 1
    assert b.get_stored_size() == 0 and c.get_stored_size() == 0
    assert len({a.table, b.table, c.table}) == 3


def test_a_collected_buffer_drops_its_table_unless_it_persists(address):
    with replayd.Client(address) as client:
        rb = ReplayBuffer(8, {"x": {}}, address=address)
        kept = ReplayBuffer(8, {"x": {}}, address=address, persist=True)
        name, kept_name = rb.table, kept.table
        rb.add(x=1.0)
        kept.add(x=2.0)  # still in the writer: collection delivers it
        assert {name, kept_name} <= set(client.tables())
        del rb, kept
        gc.collect()
        tables = client.tables()
        assert name not in tables and kept_name in tables
        assert client.size(kept_name) == 1
        client.drop_table(kept_name)


def test_a_named_table_outlives_its_buffers(address, table_name):
    rb = ReplayBuffer(8, {"x": {}}, address=address, table=table_name)
    rb.add(x=1.0)
    del rb
    gc.collect()
    with replayd.Client(address) as client:
        assert client.size(table_name) == 1


def test_a_pickled_copy_shares_the_table_and_never_drops_it(address):
    rb = ReplayBuffer(8, {"x": {}}, address=address)
    rb.add(x=1.0)  # pending in the writer: pickling delivers it
    copy = pickle.loads(pickle.dumps(rb))
    assert copy.table == rb.table and copy.get_stored_size() == 1
    copy.add(x=2.0)
    del copy
    gc.collect()
    assert rb.get_stored_size() == 2


def test_add_returns_ring_positions_like_cpprb(address_only):
    rng = np.random.default_rng(5)
    rb = ReplayBuffer(7, {"i": {"dtype": np.int64}}, **address_only)
    model = RingModel(7)
    counter = 0
    for _ in range(40):
        n = int(rng.integers(1, 5))
        values = list(range(counter, counter + n))
        counter += n
        got = rb.add(i=values[0] if n == 1 else values)
        assert got == model.add(values)
        assert rb.get_next_index() == model.index
    assert rb.get_stored_size() == model.stored == 7
    assert set(rb.sample(500)["i"].ravel().tolist()) == set(model.values)


def test_issue_example_capacity_3_five_adds(address_only):
    rb = ReplayBuffer(3, {"x": {}}, **address_only)
    assert [rb.add(x=float(i)) for i in range(5)] == [0, 1, 2, 0, 1]
    assert rb.get_next_index() == 2 and rb.get_stored_size() == 3


def test_a_single_add_is_seen_by_the_next_sample(address_only):
    rb = ReplayBuffer(100, {"x": {"dtype": np.int64}}, **address_only)
    for i in range(10):
        rb.add(x=i)
        # 2000 draws miss the newest of at most 10 items with probability below 1e-90
        # (64 draws did so about once in 500 runs).
        assert rb.sample(2000)["x"].max() == i


def test_single_and_batch_adds_keep_their_order(address_only):
    rb = ReplayBuffer(4, {"x": {"dtype": np.int64}}, **address_only)
    rb.add(x=0)
    rb.add(x=1)
    rb.add(x=[2, 3, 4])  # evicts 0 only if 0 and 1 were stored first
    assert set(rb.sample(300)["x"].ravel().tolist()) == {1, 2, 3, 4}


def test_add_with_nothing_returns_none(address_only):
    rb = ReplayBuffer(4, {"x": {}}, **address_only)
    assert rb.add(x=np.zeros(0)) is None and rb.get_next_index() == 0


def test_episode_length_counts_adds_until_on_episode_end(address_only):
    rb = ReplayBuffer(16, {"x": {}}, **address_only)
    assert rb.get_current_episode_len() == 0
    rb.add(x=1.0)
    rb.add(x=[1.0, 2.0, 3.0])
    assert rb.get_current_episode_len() == 4
    rb.on_episode_end()
    assert rb.get_current_episode_len() == 0
    rb.add(x=1.0)
    rb.clear()
    assert rb.get_current_episode_len() == 0 and rb.get_next_index() == 0
    assert rb.get_stored_size() == 0


def test_max_priority_follows_cpprb(address_only):
    rb = PrioritizedReplayBuffer(8, {"x": {}}, **address_only)
    assert rb.get_max_priority() == 1.0
    rb.add(x=[1.0, 2.0], priorities=[0.5, 3.0])
    assert rb.get_max_priority() == 3.0
    rb.add(x=1.0, priorities=0.1)
    assert rb.get_max_priority() == 3.0
    keys = rb.sample(2)["indexes"]
    rb.update_priorities(keys, [7.0, 2.0])
    assert rb.get_max_priority() == 7.0
    rb.clear()
    assert rb.get_max_priority() == 1.0


def test_single_prioritized_adds_keep_their_priorities(address_only):
    rb = PrioritizedReplayBuffer(8, {"i": {"dtype": np.int64}}, alpha=1.0, eps=0.0,
                                 **address_only)
    rb.add(i=0, priorities=1.0)
    rb.add(i=1, priorities=3.0)
    counts = np.bincount(rb.sample(4000)["i"].ravel(), minlength=2)
    assert abs(counts[1] / 4000 - 0.75) < 0.04


def test_create_buffer_picks_the_class(address_only):
    assert type(create_buffer(4, {"x": {}}, **address_only)) is ReplayBuffer
    per = create_buffer(4, {"x": {}}, prioritized=True, alpha=0.5, **address_only)
    assert type(per) is PrioritizedReplayBuffer


def test_mmap_prefix_is_accepted(address_only):
    rb = ReplayBuffer(4, {"x": {}}, mmap_prefix="rb", **address_only)
    rb.add(x=1.0)
    assert rb.get_stored_size() == 1


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_single_adds_of_a_child_process_are_delivered_when_it_exits(address, method):
    rb = MPReplayBuffer(1000, {"x": {}}, address=address)
    ctx = multiprocessing.get_context(method)
    child = ctx.Process(target=cpprb_workers.add_single, args=(rb, 10))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert rb.get_stored_size() == 10


def test_single_and_batch_adds_cast_like_numpy_astype(address_only):
    # cpprb stores np.asarray(v).astype(dtype).reshape(-1, *shape), one item or many
    env = {"i": {"dtype": np.int8}, "v": {"shape": (2,), "dtype": np.float32}}
    one = ReplayBuffer(4, env, **address_only)
    many = ReplayBuffer(4, env, **address_only)
    one.add(i=2.7, v=[[1.5, 2.5]])  # a batch of one
    many.add(i=[2.7, 2.7], v=np.array([[1.5, 2.5], [1.5, 2.5]], np.float64))
    expected_i = np.asarray(2.7).astype(np.int8)
    for rb in (one, many):
        sample = rb.sample(3)
        assert sample["i"].dtype == np.int8 and sample["i"].shape == (3, 1)
        assert (sample["i"] == expected_i).all()
        np.testing.assert_array_equal(sample["v"], np.float32([[1.5, 2.5]] * 3))


def test_a_program_that_exits_drops_its_tables_and_delivers_persistent_adds(address):
    import subprocess
    import sys

    from conftest import REPO
    code = ("import sys; from replayd.cpprb import ReplayBuffer\n"
            "a = ReplayBuffer(8, {'x': {}}, address=sys.argv[1])\n"
            "b = ReplayBuffer(8, {'x': {}}, address=sys.argv[1], persist=True)\n"
            "b.add(x=1.0); b.add(x=2.0)\n"
            "print(a.table, b.table)\n")
    result = subprocess.run([sys.executable, "-c", code, address], capture_output=True,
                            text=True, timeout=60,
                            env={"PYTHONPATH": str(REPO / "client" / "python")})
    assert result.returncode == 0, result.stderr
    dropped, kept = result.stdout.split()
    with replayd.Client(address) as client:
        tables = client.tables()
        assert dropped not in tables and kept in tables
        assert client.size(kept) == 2
        client.drop_table(kept)


def test_priority_updates_do_not_wait_and_their_errors_surface_later(address_only):
    """update_priorities sends without waiting for the reply; the next sample already
    draws by the new priorities (the server runs a connection's requests in order), and an
    update the server refused raises from the next update_priorities."""
    rb = PrioritizedReplayBuffer(8, {"obs": {}}, alpha=1.0, eps=0.0, **address_only)
    rb.add(obs=[0, 1, 2, 3])
    everything = rb.sample(200)
    by_obs = {float(o): int(k) for k, o in zip(everything["indexes"], everything["obs"][:, 0])}
    assert sorted(by_obs) == [0.0, 1.0, 2.0, 3.0]
    rb.update_priorities([by_obs[1.0], by_obs[2.0], by_obs[3.0]], [0.0, 0.0, 0.0])
    assert set(rb.sample(50)["obs"][:, 0].tolist()) == {0.0}
    rb.update_priorities([by_obs[0.0]], [float("nan")])
    rb.sample(1)  # its reply comes after the update's
    with pytest.raises(replayd.InvalidArgument):
        rb.update_priorities([by_obs[0.0]], [1.0])


def test_prefetch_serves_the_sample_asked_for_at_the_previous_call(address_only):
    """prefetch=True (a replayd option): each sample requests the next one at once, so a
    sample does not see what this object added since the previous sample of the same size
    and beta; one of another size is drawn fresh, and clear() drops the one asked for."""
    rb = ReplayBuffer(16, {"obs": {}}, prefetch=True, **address_only)
    rb.add(obs=[1, 1])
    assert set(rb.sample(8)["obs"][:, 0].tolist()) == {1.0}   # drawn now; the next asked for
    rb.add(obs=[2] * 14)
    assert set(rb.sample(8)["obs"][:, 0].tolist()) == {1.0}   # drawn before the adds
    assert 2.0 in set(rb.sample(64)["obs"][:, 0].tolist())    # another size: drawn now
    rb.clear()
    rb.add(obs=[3])
    assert set(rb.sample(64)["obs"][:, 0].tolist()) == {3.0}
    plain = ReplayBuffer(16, {"obs": {}}, **address_only)
    plain.add(obs=[1])
    plain.sample(4)
    plain.add(obs=[2] * 15)
    assert 2.0 in set(plain.sample(64)["obs"][:, 0].tolist())  # without prefetch: current
