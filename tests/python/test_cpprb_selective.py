"""replayd.cpprb.SelectiveReplayBuffer against cpprb's CppSelectiveEnvironment
(cpprb/ReplayBuffer.hh): a buffer of episode_len * Nepisodes float64 steps that is not a
ring (an add stores what fits), an episode begins after the first done of an add,
get_episode(i) slices [begin_i, begin_{i+1} or next_index), delete_episode(i) moves the
later steps back and returns the number deleted, and the unfinished last episode counts in
get_stored_episode_size once it has steps. Expected values are worked out from that code."""
from __future__ import annotations

import numpy as np
import pytest

from replayd.cpprb import SelectiveReplayBuffer


@pytest.fixture
def rb_args(address, table_name):
    return {"address": address, "table": table_name}


def step(rb, t, done):
    return rb.add([t, 10 * t], t, 0.5 * t, [t + 1, 10 * t + 10], done)


def filled(rb_args):
    """Episodes A (steps 0-2), B (3-4) and the unfinished C (5)."""
    rb = SelectiveReplayBuffer(4, 2, 1, Nepisodes=3, **rb_args)
    assert rb.add(obs=[[0, 0], [1, 10], [2, 20]], act=[0, 1, 2], rew=[0, 0.5, 1],
                  next_obs=[[1, 10], [2, 20], [3, 30]], done=[0, 0, 1]) == 0
    assert step(rb, 3, 0) == 3
    assert step(rb, 4, 1) == 4
    assert step(rb, 5, 0) == 5
    return rb


def test_episodes_are_found_and_read(rb_args):
    rb = filled(rb_args)
    assert rb.get_stored_size() == rb.get_next_index() == 6
    assert rb.get_buffer_size() == 12
    assert rb.get_stored_episode_size() == 3
    b = rb.get_episode(1)
    assert b["obs"].tolist() == [[3, 30], [4, 40]]
    assert b["act"].tolist() == [[3], [4]] and b["rew"].tolist() == [[1.5], [2.0]]
    assert b["done"].tolist() == [[0], [1]] and b["obs"].dtype == np.float64
    assert rb.get_episode(2)["obs"].tolist() == [[5, 50]]
    empty = rb.get_episode(3)
    assert empty["obs"].shape == (0, 2) and empty["done"].shape == (0,)


def test_delete_moves_later_episodes_back(rb_args):
    rb = filled(rb_args)
    assert rb.delete_episode(0) == 3
    assert rb.get_next_index() == 3 and rb.get_stored_episode_size() == 2
    assert rb.get_episode(0)["obs"][:, 0].tolist() == [3, 4]
    assert rb.get_episode(1)["obs"][:, 0].tolist() == [5]
    assert rb.delete_episode(1) == 1  # the unfinished one
    assert rb.get_next_index() == 2 and rb.get_stored_episode_size() == 1
    assert rb.delete_episode(5) == 0
    assert step(rb, 6, 1) == 2  # appended after B
    assert rb.get_episode(1)["obs"][:, 0].tolist() == [6]
    assert rb._encode_sample([0, 1, 2])["obs"][:, 0].tolist() == [3, 4, 6]


def test_deleting_the_last_finished_episode(rb_args):
    rb = SelectiveReplayBuffer(4, 2, 1, Nepisodes=3, **rb_args)
    step(rb, 0, 0)
    step(rb, 1, 1)
    assert rb.delete_episode(0) == 2
    assert rb.get_next_index() == 0 and rb.get_stored_episode_size() == 0
    step(rb, 2, 1)
    assert rb.get_episode(0)["obs"][:, 0].tolist() == [2]


def test_the_buffer_is_not_a_ring_and_one_done_per_add_counts(rb_args):
    rb = SelectiveReplayBuffer(2, 1, 1, Nepisodes=3, **rb_args)
    assert rb.add(np.arange(8), np.zeros(8), np.zeros(8), np.arange(8),
                  [1, 0, 1, 0, 0, 0, 0, 0]) == 0
    assert rb.get_stored_size() == 6  # 2 * 3 steps fit, the rest is dropped
    assert rb.get_stored_episode_size() == 2  # only the first done of the add
    assert rb.add(9, 0, 0, 9, 1) == 6 and rb.get_stored_size() == 6
    assert rb.get_episode(1)["obs"].ravel().tolist() == [1, 2, 3, 4, 5]


def test_sample_draws_positions_with_numpy(rb_args):
    rb = filled(rb_args)
    np.random.seed(11)
    got = rb.sample(16)
    np.random.seed(11)
    idx = np.random.randint(0, 6, 16)
    assert got["obs"][:, 0].tolist() == idx.tolist()
    assert got["next_obs"][:, 1].tolist() == (10 * idx + 10).tolist()


def test_obs_shape_and_discrete_actions(rb_args):
    rb = SelectiveReplayBuffer(4, act_dim=3, obs_shape=(2, 1), is_discrete_action=True,
                               **rb_args)
    assert rb.get_obs_dim() == 2 and rb.get_act_dim() == 1
    rb.add([[1], [2]], 2, 0.0, [[3], [4]], 0)
    s = rb._encode_sample([0])
    assert s["obs"].shape == (1, 2, 1) and s["next_obs"].tolist() == [[[3], [4]]]
    assert s["act"].dtype == np.int64 and s["act"].tolist() == [[2]]
    rb.clear()
    assert rb.get_stored_size() == 0 and rb.get_stored_episode_size() == 0
    with pytest.raises(OverflowError):
        rb.delete_episode(-1)
