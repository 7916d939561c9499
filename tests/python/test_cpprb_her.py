"""replayd.cpprb.HindsightReplayBuffer against cpprb/HER.py: on_episode_end(goal) stores the
episode with `goal` and reward_func(next_obs, act, goal), then relabelled copies whose goals
come from the strategy ("final": the last next_obs; "future": next_obs of a step at or after
each step; "episode": of any step of the episode; "random": of any stored transition), the
buffer's env_dict gaining "rew" and "goal"."""
from __future__ import annotations

import numpy as np
import pytest

from replayd.cpprb import HindsightReplayBuffer

ENV = {"obs": {"shape": 2}, "act": {}, "next_obs": {"shape": 2}}


def reached(next_obs, act, goal):
    """-1 until the goal is reached, 0 on it (batch reward function, as cpprb expects)."""
    return -(np.abs(next_obs - goal).sum(axis=1) > 0.1).astype(np.float32)


@pytest.fixture
def rb_args(address, table_name):
    return {"address": address, "table": table_name}


def play(rb, steps=3):
    for t in range(steps):
        rb.add(obs=[t, 0], act=t, next_obs=[t + 1, 0])


def test_final_strategy_relabels_with_the_last_state(rb_args):
    rb = HindsightReplayBuffer(32, ENV, 8, reached, strategy="final", additional_goals=7,
                               prioritized=False, **rb_args)
    play(rb)
    assert rb.get_stored_size() == 0  # the episode is held until it ends
    rb.on_episode_end([9, 9])
    got = rb.get_all_transitions()
    assert rb.get_stored_size() == 6  # one copy: additional_goals is ignored for "final"
    assert got["goal"].tolist() == [[9, 9]] * 3 + [[3, 0]] * 3
    assert got["rew"].ravel().tolist() == [-1, -1, -1, -1, -1, 0]
    assert got["obs"][:, 0].tolist() == [0, 1, 2, 0, 1, 2]
    with pytest.raises(ValueError, match="without PER"):
        rb.update_priorities([0], [1.0])


def test_future_goals_come_from_the_same_or_later_steps(rb_args):
    rb = HindsightReplayBuffer(64, ENV, 8, reached, additional_goals=4, **rb_args)
    rb.rng = np.random.default_rng(5)
    play(rb, 4)
    rb.on_episode_end([9, 9])
    got = rb.get_all_transitions()
    assert got["obs"].shape == (4 * 5, 2)
    expected = np.random.default_rng(5)  # cpprb's draws, in its order
    idx = np.zeros((4, 4), dtype=np.int64)
    for i in range(4):
        idx[:, i] = expected.integers(low=i, high=4, size=4)
    relabelled = got["goal"][4:, 0].reshape(4, 4)
    assert relabelled.tolist() == (idx + 1).tolist()  # next_obs of step j is [j + 1, 0]
    assert (relabelled >= np.arange(1, 5)).all()
    assert rb.get_max_priority() == 1.0
    assert rb.sample(8, beta=0.5)["weights"].shape == (8,)


def test_episode_and_random_goals_come_from_stored_states(rb_args):
    rb = HindsightReplayBuffer(64, ENV, 8, reached, strategy="episode", additional_goals=2,
                               prioritized=False, **rb_args)
    play(rb, 3)
    rb.on_episode_end([9, 9])
    assert set(rb.get_all_transitions()["goal"][3:, 0].tolist()) <= {1, 2, 3}
    other = HindsightReplayBuffer(64, ENV, 8, reached, strategy="random", additional_goals=2,
                                  prioritized=False, address=rb_args["address"])
    play(other, 3)
    other.on_episode_end([9, 9])
    goals = other.get_all_transitions()["goal"][3:]
    assert other.get_stored_size() == 9
    assert {tuple(g) for g in goals.tolist()} <= {(1, 0), (2, 0), (3, 0)}


def test_goal_func_and_goal_shape(rb_args):
    rb = HindsightReplayBuffer(16, ENV, 4, lambda s, a, g: (s[:, :1] == g).ravel(),
                               goal_func=lambda s: s[:, :1], goal_shape=1,
                               strategy="final", prioritized=False, **rb_args)
    play(rb, 2)
    rb.on_episode_end(5)
    got = rb.get_all_transitions()
    assert got["goal"].shape == (4, 1)
    assert got["goal"].ravel().tolist() == [5, 5, 2, 2]
    assert got["rew"].ravel().tolist() == [0, 0, 0, 1]


def test_her_errors_and_empty_episodes(rb_args):
    with pytest.raises(ValueError, match="Unknown Strategy: best"):
        HindsightReplayBuffer(8, ENV, 2, reached, strategy="best", **rb_args)
    rb = HindsightReplayBuffer(8, ENV, 2, reached, prioritized=False, **rb_args)
    rb.on_episode_end([0, 0])
    assert rb.get_stored_size() == 0
    play(rb, 2)
    with pytest.raises(ValueError, match="Exceed Max Episode Length"):
        rb.add(obs=[0, 0], act=0, next_obs=[0, 0])
    with pytest.raises(KeyError):
        HindsightReplayBuffer(8, ENV, 2, reached, address=rb_args["address"]).add(obs=[0, 0])
