"""cpprb.SelectiveReplayBuffer on a replayd table, with cpprb's API and bookkeeping
(cpprb/PyReplayBuffer.pyx SelectiveEnvironment and CppSelectiveEnvironment in
cpprb/ReplayBuffer.hh):

- cpprb's fixed layout: ``obs`` and ``next_obs`` of ``obs_dim`` values (or ``obs_shape``),
  ``act`` of ``act_dim`` (1 with ``is_discrete_action``, sampled as int64), ``rew`` of
  ``rew_dim``, ``done`` of 1; float64 throughout. ``add(obs, act, rew, next_obs, done)``
  flattens each value and stores ``len(ravel(done))`` steps;
- the buffer is not a ring: it holds ``episode_len * Nepisodes`` steps and an add stores
  only what still fits (returning the old ``get_next_index()``);
- an episode starts after the *first* ``done`` of each add (cpprb looks for one per add);
  ``get_episode(i)`` returns its steps (``(len, dim)`` arrays, ``(0, dim)`` when there is
  no episode i), ``delete_episode(i)`` removes it and moves the later steps back, returning
  how many steps went (0 for no episode i; the unfinished last episode can be deleted too);
- ``sample(batch_size)`` draws positions with ``np.random.randint`` over the stored steps.

The steps live in an episodic table; positions are the order in which the surviving steps
were stored, so a deletion removes their keys on the server and the later steps move back
by themselves. ``get_episode``, ``sample`` and ``_encode_sample`` read the whole table
(O(stored size)).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .buffers import ReplayBuffer

__all__ = ["SelectiveReplayBuffer"]


class SelectiveReplayBuffer:
    """cpprb.SelectiveReplayBuffer; see the module docstring. Other keyword arguments
    (``address=``, ``table=``, ``persist=``, ``timeout=``) go to the replayd buffer."""

    def __init__(self, episode_len: int, obs_dim: int = 1, act_dim: int = 1, *,
                 Nepisodes: int = 10, rew_dim: int = 1,  # noqa: N803 - cpprb's name
                 is_discrete_action: bool = False,
                 obs_shape: Optional[Sequence[int]] = None, **kwargs: Any) -> None:
        self.obs_shape = None if obs_shape is None else tuple(int(d) for d in obs_shape)
        self.obs_dim = int(np.prod(self.obs_shape)) if self.obs_shape else int(obs_dim)
        self.is_discrete_action = bool(is_discrete_action)
        self.act_dim = 1 if self.is_discrete_action else int(act_dim)
        self.rew_dim = int(rew_dim)
        self.buffer_size = int(episode_len) * int(Nepisodes)
        self._dims = {"obs": self.obs_dim, "act": self.act_dim, "rew": self.rew_dim,
                      "next_obs": self.obs_dim, "done": 1}
        env_dict = {name: {"shape": dim, "dtype": np.float64} for name, dim in self._dims.items()}
        self._rb = ReplayBuffer(self.buffer_size, env_dict, **kwargs)
        self._next_index = 0
        self._episode_begins: List[int] = [0]

    def add(self, obs: Any, act: Any, rew: Any, next_obs: Any, done: Any) -> int:
        """Stores the steps that still fit; returns the position of the first."""
        values = {"obs": obs, "act": act, "rew": rew, "next_obs": next_obs, "done": done}
        flat = {name: np.ravel(np.asarray(v, dtype=np.float64)) for name, v in values.items()}
        n = flat["done"].shape[0]
        rows = {name: flat[name].reshape(-1, self._dims[name]) for name in flat}
        copy_n = min(n, self.buffer_size - self._next_index)
        if copy_n:
            self._rb.add(**{name: array[:copy_n] for name, array in rows.items()})
            ends = np.flatnonzero(rows["done"][:copy_n, 0])
            if ends.size:
                self._episode_begins.append(self._next_index + int(ends[0]) + 1)
        first = self._next_index
        self._next_index += copy_n
        return first

    def get_episode(self, i: int) -> Dict[str, np.ndarray[Any, Any]]:
        """The steps of episode `i` (empty ``(0, dim)`` arrays when there is none)."""
        if i >= self.get_stored_episode_size():
            return {name: np.ndarray((0, dim)) if name != "done" else np.ndarray(0)
                    for name, dim in self._dims.items()}
        begin = self._episode_begins[i]
        end = (self._episode_begins[i + 1] if i + 1 < len(self._episode_begins)
               else self._next_index)
        steps = self._steps()
        return {name: steps[name][begin:end] for name in self._dims}

    def delete_episode(self, i: int) -> int:
        """Removes episode `i`, moves the later steps back; returns how many steps went."""
        if i < 0:
            raise OverflowError("can't convert negative value to size_t")
        begins = self._episode_begins
        if i > len(begins) - 1:
            return 0
        if i == len(begins) - 1:  # the episode still being written
            old, self._next_index = self._next_index, begins[-1]
            self._delete_positions(self._next_index, old)
            return old - self._next_index
        delete_begin, move_begin = begins[i], begins[i + 1]
        self._delete_positions(delete_begin, move_begin)
        size = move_begin - delete_begin
        if move_begin == self._next_index:
            self._next_index = delete_begin
            begins.pop()
            return size
        self._next_index -= size
        begins[i:-1] = [begin - size for begin in begins[i + 1:]]
        begins.pop()
        return size

    def sample(self, batch_size: int) -> Dict[str, np.ndarray[Any, Any]]:
        """`batch_size` stored steps drawn by ``np.random.randint`` (with replacement)."""
        idx = np.random.randint(0, self.get_stored_size(), batch_size)
        return self._encode_sample(idx)

    def _encode_sample(self, idx: Any) -> Dict[str, np.ndarray[Any, Any]]:
        positions = np.asarray(idx)
        steps = self._steps()
        out = {name: steps[name][positions] for name in self._dims}
        if self.obs_shape is not None:
            out["obs"] = out["obs"].reshape(-1, *self.obs_shape)
            out["next_obs"] = out["next_obs"].reshape(-1, *self.obs_shape)
        if self.is_discrete_action:
            out["act"] = out["act"].astype(np.int64)
        return out

    def clear(self) -> None:
        self._rb.clear()
        self._next_index = 0
        self._episode_begins = [0]

    def get_stored_size(self) -> int:
        return self._next_index

    def get_next_index(self) -> int:
        return self._next_index

    def get_buffer_size(self) -> int:
        return self.buffer_size

    def get_stored_episode_size(self) -> int:
        """Episodes stored, the unfinished last one included when it has steps."""
        unfinished_empty = self._next_index == self._episode_begins[-1]
        return len(self._episode_begins) - (1 if unfinished_empty else 0)

    def get_obs_dim(self) -> int:
        return self.obs_dim

    def get_obs_shape(self) -> Optional[Sequence[int]]:
        return self.obs_shape

    def get_act_dim(self) -> int:
        return self.act_dim

    def get_rew_dim(self) -> int:
        return self.rew_dim

    @property
    def table(self) -> str:
        return self._rb.table

    # -- internals ---------------------------------------------------------------------

    def _steps(self) -> Dict[str, np.ndarray[Any, Any]]:
        """The stored steps in position order (keys included)."""
        self._rb._life.send()
        pages = list(self._rb.client.read_all(self._rb.table))
        names = ["key", *self._dims]
        if not pages:
            return {name: np.zeros((0, self._dims.get(name, 1))) for name in names}
        steps = {name: np.concatenate([page[name] for page in pages]) for name in names}
        return {name: values.reshape(values.shape[0], -1) if name != "key" else values
                for name, values in steps.items()}  # (1,)-shaped values are stored as scalars

    def _delete_positions(self, begin: int, end: int) -> None:
        if end > begin:
            keys = self._steps()["key"][begin:end]
            self._rb.client.delete(self._rb.table, keys)
