"""replayd.cpprb.train follows cpprb.train's loop (PyReplayBuffer.pyx): one add per step,
a sample and update_policy per step after the warm-up, priorities from update_policy for
prioritized buffers, callbacks and the end of episodes as cpprb calls them."""
from __future__ import annotations

import numpy as np
import pytest

from replayd.cpprb import PrioritizedReplayBuffer, ReplayBuffer, train

ENV = {"obs": {"shape": 2}, "act": {"dtype": np.int64}, "rew": {}, "next_obs": {"shape": 2},
       "done": {}}


class Counter:
    """Episodes of `length` steps; obs = (episode, t), reward t."""

    def __init__(self, length):
        self.length, self.episode, self.t = length, -1, 0

    def reset(self):
        self.episode, self.t = self.episode + 1, 0
        return np.array([self.episode, 0.0])

    def step(self, action):
        self.t += 1
        return (np.array([self.episode, float(self.t)]), float(self.t),
                self.t == self.length, {})


def run(buffer, **kwargs):
    calls = {"update": [], "episodes": [], "actions": []}

    def get_action(obs, step, episode, is_warmup):
        calls["actions"].append((step, episode, is_warmup))
        return step % 2

    def update_policy(sample, step, episode):
        calls["update"].append((step, sample["obs"].shape))
        return np.full(len(sample["obs"]), 5.0)

    with pytest.warns(UserWarning, match="beta"):
        train(buffer, Counter(4), get_action, update_policy, batch_size=8,
              episode_callback=lambda *a: calls["episodes"].append(a), **kwargs)
    return calls


def test_train_steps_warmup_and_episodes_like_cpprb(address):
    rb = ReplayBuffer(100, ENV, address=address)
    calls = run(rb, max_steps=10, n_warmups=3)
    assert rb.get_stored_size() == 10
    assert [s for s, _ in calls["update"]] == list(range(3, 10))
    assert all(shape == (8, 2) for _, shape in calls["update"])
    assert calls["actions"][:5] == [(0, 0, True), (1, 0, True), (2, 0, True),
                                    (3, 0, False), (4, 1, False)]
    # (episode, episode_step index, last reward: cpprb does not sum without rew_sum)
    assert calls["episodes"] == [(0, 3, 4.0), (1, 3, 4.0)]
    assert rb.get_current_episode_len() == 2  # reset by on_episode_end at each episode end
    sample = rb.sample(200)
    assert set(sample["obs"][:, 1].tolist()) == {0.0, 1.0, 2.0, 3.0}  # obs follows next_obs


def test_train_stops_after_max_episodes_and_sums_with_rew_sum(address):
    rb = ReplayBuffer(100, ENV, address=address)
    calls = run(rb, max_steps=100, max_episodes=2, rew_sum=lambda acc, t: acc + t["rew"])
    assert rb.get_stored_size() == 8
    assert calls["episodes"] == [(0, 3, 10.0), (1, 3, 10.0)]


def test_train_updates_priorities_of_prioritized_buffers(address):
    rb = PrioritizedReplayBuffer(100, ENV, address=address)
    run(rb, max_steps=6)
    assert rb.get_max_priority() == 5.0


def test_train_rejects_too_many_steps(address):
    with pytest.raises(ValueError, match="too big"), pytest.warns(UserWarning):
        train(ReplayBuffer(4, ENV, address=address), Counter(4), None, None,
              max_steps=2**64)
