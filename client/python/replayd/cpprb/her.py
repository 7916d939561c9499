"""cpprb.HindsightReplayBuffer (Hindsight Experience Replay, arXiv:1707.01495) on a
replayd.cpprb buffer, with cpprb's arguments and relabelling (cpprb/HER.py).

``add`` collects the current episode locally (at most ``max_episode_len`` steps, cpprb's
episode buffer); ``on_episode_end(goal)`` stores the episode with ``goal`` and
``rew = reward_func(next_state, action, goal)``, then ``additional_goals`` relabelled
copies (fields ``rew`` and ``goal`` added to env_dict), the goals drawn by ``strategy``:

- ``"future"``: for step i, ``goal_func`` of the next state of a step drawn from i .. end;
- ``"episode"``: of a step drawn from the whole episode;
- ``"final"``: of the episode's last step (one copy; ``additional_goals`` is ignored);
- ``"random"``: of a transition drawn from the whole buffer (``_encode_sample``, which
  reads the table).

Draws use ``self.rng`` (``numpy.random.default_rng()``) in cpprb's order; assign a seeded
one to reproduce them. Samples, priorities and the rest are the underlying buffer's
(``prioritized=True``, the default, makes it a PrioritizedReplayBuffer).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Mapping, Optional

import numpy as np

from .buffers import PrioritizedReplayBuffer, ReplayBuffer
from .table import env_fields

__all__ = ["HindsightReplayBuffer"]

STRATEGIES = ["future", "episode", "random", "final"]


class EpisodeRing:
    """cpprb's local episode buffer: a ring of `size` steps per env_dict field, read back
    by ring position (0 .. stored - 1) as cpprb's get_all_transitions does."""

    def __init__(self, size: int, env_dict: Mapping[str, Any]) -> None:
        self.size = int(size)
        self.fields = env_fields(env_dict, None, None)
        self.columns = {name: np.zeros((self.size, *shape), dtype)
                        for name, dtype, shape in self.fields}
        self.index = self.stored = 0

    def add(self, kwargs: Mapping[str, Any]) -> None:
        missing = [name for name, _, _ in self.fields if name not in kwargs]
        if missing:
            raise KeyError(f"add() is missing values for {missing}")
        n = 0
        for name, dtype, shape in self.fields:
            values = np.asarray(kwargs[name]).astype(dtype, copy=False).reshape(-1, *shape)
            n = values.shape[0]
            positions = (self.index + np.arange(n)) % self.size
            self.columns[name][positions] = values
        self.index = (self.index + n) % self.size
        self.stored = min(self.stored + n, self.size)

    def transitions(self) -> Dict[str, np.ndarray[Any, Any]]:
        return {name: column[:self.stored].copy() for name, column in self.columns.items()}

    def clear(self) -> None:
        self.index = self.stored = 0


class HindsightReplayBuffer:
    """cpprb.HindsightReplayBuffer; see the module docstring.

    Args (cpprb's): size, env_dict, max_episode_len, reward_func(next_state, action, goal)
    -> rewards, goal_func(states) -> goals (default: the state), goal_shape (default: the
    state's), state / action / next_state (field names), strategy, additional_goals,
    prioritized; other keyword arguments (``address=``, ``alpha``, ...) go to the buffer.
    Raises ValueError for an unknown strategy.
    """

    def __init__(self, size: int, env_dict: Mapping[str, Any], max_episode_len: int,
                 reward_func: Callable[..., Any], *,
                 goal_func: Optional[Callable[..., Any]] = None,
                 goal_shape: Optional[Iterable[int]] = None, state: str = "obs",
                 action: str = "act", next_state: str = "next_obs",
                 strategy: str = "future", additional_goals: int = 4,
                 prioritized: bool = True, **kwargs: Any) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"Unknown Strategy: {strategy}. Known Strategies: {STRATEGIES}")
        self.max_episode_len = int(max_episode_len)
        self.reward_func = reward_func
        self.goal_func: Callable[..., Any] = goal_func or (lambda s: s)
        self.state, self.action, self.next_state = state, action, next_state
        self.strategy = strategy
        self.additional_goals = 1 if strategy == "final" else int(additional_goals)
        self.prioritized = bool(prioritized)
        if goal_shape:
            goal_dict = {**env_dict[state], "shape": goal_shape}
            self.goal_shape = np.array(goal_shape, ndmin=1)
        else:
            goal_dict = env_dict[state]
            self.goal_shape = np.array(env_dict[state].get("shape", 1), ndmin=1)
        buffer_env = {**env_dict, "rew": {}, "goal": goal_dict}
        self.rb: ReplayBuffer = (PrioritizedReplayBuffer(size, buffer_env, **kwargs)
                                 if self.prioritized else ReplayBuffer(size, buffer_env, **kwargs))
        self.episode_rb = EpisodeRing(self.max_episode_len, env_dict)
        self.rng = np.random.default_rng()

    def add(self, **kwargs: Any) -> None:
        """Adds step(s) of the current episode (kept locally until on_episode_end).
        Raises ValueError once the episode holds max_episode_len steps."""
        if self.episode_rb.stored >= self.max_episode_len:
            raise ValueError("Exceed Max Episode Length")
        self.episode_rb.add(kwargs)

    def sample(self, batch_size: int, **kwargs: Any) -> Dict[str, np.ndarray[Any, Any]]:
        """The underlying buffer's sample (``beta=`` for the prioritized one)."""
        return self.rb.sample(batch_size, **kwargs)

    def on_episode_end(self, goal: Any) -> None:
        """Stores the episode with its original `goal` and its relabelled copies, then
        starts a new episode. Does nothing for an empty episode."""
        episode_len = self.episode_rb.stored
        if episode_len == 0:
            return None
        trajectory = self.episode_rb.transitions()
        add_shape = (trajectory[self.state].shape[0], *self.goal_shape)
        goal = np.broadcast_to(np.asarray(goal), add_shape)
        self._add_relabelled(trajectory, goal)
        nexts = trajectory[self.next_state]
        if self.strategy == "future":
            idx = np.zeros((self.additional_goals, episode_len), dtype=np.int64)
            for i in range(episode_len):
                idx[:, i] = self.rng.integers(low=i, high=episode_len,
                                              size=self.additional_goals)
            for i in range(self.additional_goals):
                self._add_relabelled(trajectory, self.goal_func(nexts[idx[i]]))
        elif self.strategy == "episode":
            idx = self.rng.integers(low=0, high=episode_len,
                                    size=(self.additional_goals, episode_len))
            for row in idx:
                self._add_relabelled(trajectory, self.goal_func(nexts[row]))
        elif self.strategy == "final":
            self._add_relabelled(trajectory,
                                 self.goal_func(np.broadcast_to(nexts[-1], nexts.shape)))
        else:  # random: goals from the whole buffer, drawn uniformly (not by priority)
            idx = self.rng.integers(low=0, high=self.rb.get_stored_size(),
                                    size=self.additional_goals * episode_len)
            goals = self.goal_func(self.rb._encode_sample(idx)[self.next_state])
            goals = goals.reshape((self.additional_goals, episode_len, *goals.shape[1:]))
            for g in goals:
                self._add_relabelled(trajectory, g)
        self.episode_rb.clear()
        self.rb.on_episode_end()

    def _add_relabelled(self, trajectory: Mapping[str, Any], goal: Any) -> None:
        rew = self.reward_func(trajectory[self.next_state], trajectory[self.action], goal)
        self.rb.add(**trajectory, rew=rew, goal=goal)

    def clear(self) -> None:
        self.rb.clear()
        self.episode_rb.clear()

    def get_stored_size(self) -> int:
        return self.rb.get_stored_size()

    def get_buffer_size(self) -> int:
        return self.rb.get_buffer_size()

    def get_all_transitions(self, shuffle: bool = False) -> Dict[str, np.ndarray[Any, Any]]:
        return self.rb.get_all_transitions(shuffle)

    def update_priorities(self, indexes: Any, priorities: Any) -> None:
        """Raises ValueError when the buffer is not prioritized."""
        if not isinstance(self.rb, PrioritizedReplayBuffer):
            raise ValueError("Buffer is constructed without PER")
        self.rb.update_priorities(indexes, priorities)

    def get_max_priority(self) -> float:
        """Raises ValueError when the buffer is not prioritized."""
        if not isinstance(self.rb, PrioritizedReplayBuffer):
            raise ValueError("Buffer is constructed without PER")
        return self.rb.get_max_priority()
