"""cpprb's ``Nstep`` option: a local cache of the newest steps of the current episode that
turns them into n-step transitions before they are stored (cpprb's NstepBuffer).

``Nstep={"size": k, "gamma": g, "rew": names, "next": names}`` (gamma defaults to 0.99,
``rew`` and ``next`` to none). The transition that starts at step s and covers the steps
``s .. e`` (e = s + k - 1 while the episode goes on, the episode's last step when
``on_episode_end()`` flushes a shorter window) holds

- every field of step s, except:
- each ``rew`` field: ``sum_j r_j * prod_{l<j} g * (1 - done_l)`` over j = s .. e (a reward
  after a done step counts 0);
- each ``next`` field: its value at step e;
- ``done``: the sum of ``done`` over s .. e.

A step is stored once k steps from it on were added, or at ``on_episode_end()``; until
then the cache holds it (cpprb keeps k - 1 steps the same way). With a prioritized buffer a
step's priority travels with it and becomes its transition's priority.

Where cpprb differs, on purpose: cpprb's ``done`` of a full window sums only ``s .. e-1``,
so a window whose last step terminates bootstraps from the terminal observation; and at
``on_episode_end()`` cpprb's ``next`` fields of the flushed transitions are values it never
wrote (its cache does not keep ``next`` fields), so a truncated episode's tail bootstraps
from garbage. Here ``done`` covers the whole window and ``next`` is the window's last step.
"""
from __future__ import annotations

import collections
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

__all__ = ["NstepCache"]

Fields = Sequence[Tuple[str, "np.dtype[Any]", Tuple[int, ...]]]
Columns = Dict[str, "np.ndarray[Any, Any]"]


def _names(spec: Mapping[str, Any], key: str, fields: Mapping[str, Any]) -> List[str]:
    value = spec.get(key)
    if value is None:
        return []
    names = [str(name) for name in np.array(value, ndmin=1)]
    for name in names:
        if name not in fields:
            raise KeyError(f"Nstep['{key}'] names '{name}', which env_dict does not define")
    return names


class NstepCache:
    """The steps of the current episode not yet stored, and the n-step transitions they
    become. One object per buffer object and process; not thread-safe."""

    def __init__(self, spec: Mapping[str, Any], fields: Fields) -> None:
        if not isinstance(spec, Mapping) or "size" not in spec:
            raise ValueError("Nstep must be a dict with at least 'size', e.g. "
                             "{'size': 3, 'gamma': 0.99, 'rew': 'rew', 'next': 'next_obs'}")
        self.size = int(spec["size"])
        if self.size < 1:
            raise ValueError(f"Nstep['size'] must be >= 1, got {spec['size']!r}")
        self.gamma = float(spec.get("gamma", 0.99))
        by_name = {name: (dtype, shape) for name, dtype, shape in fields}
        if "done" not in by_name:
            raise KeyError("Nstep needs a 'done' value in env_dict (it ends the sums)")
        self.rew = _names(spec, "rew", by_name)
        self.next = _names(spec, "next", by_name)
        self._dtypes = {name: dtype for name, dtype, _ in fields}
        self._steps: Deque[Tuple[Columns, Optional[float]]] = collections.deque()

    def __len__(self) -> int:
        return len(self._steps)

    def add(self, data: Columns, n: int,
            priorities: Optional["np.ndarray[Any, Any]"]) -> Tuple[Columns, Optional[Any], int]:
        """Takes n steps (arrays ``(n, *shape)``); returns the transitions they complete as
        (columns, priorities or None, count)."""
        done: List[Tuple[Columns, Optional[float]]] = []
        for i in range(n):
            step = {name: np.array(array[i]) for name, array in data.items()}
            self._steps.append((step, None if priorities is None else float(priorities[i])))
            if len(self._steps) == self.size:
                done.append(self._transition(list(self._steps)))
                self._steps.popleft()
        return self._stack(done)

    def flush(self) -> Tuple[Columns, Optional[Any], int]:
        """The transitions of every step still cached (shorter windows that end at the last
        added step); the cache is empty afterwards."""
        steps = list(self._steps)
        self._steps.clear()
        return self._stack([self._transition(steps[i:]) for i in range(len(steps))])

    def clear(self) -> None:
        self._steps.clear()

    def empty_copy(self) -> "NstepCache":
        """The same settings with no cached steps (for a pickled buffer)."""
        copy = object.__new__(NstepCache)
        copy.__dict__.update(self.__dict__)
        copy._steps = collections.deque()
        return copy

    def _transition(self, window: List[Tuple[Columns, Optional[float]]]
                    ) -> Tuple[Columns, Optional[float]]:
        first, priority = window[0]
        out = dict(first)
        dones = [float(np.ravel(step["done"])[0]) for step, _ in window]
        for name in self.rew:
            total = np.zeros(first[name].shape, dtype=np.float64)
            discount = 1.0
            for (step, _), done in zip(window, dones):
                total += discount * step[name]
                discount *= self.gamma * (1.0 - done)
            out[name] = total.astype(self._dtypes[name])
        last = window[-1][0]
        for name in self.next:
            out[name] = last[name]
        out["done"] = np.full(first["done"].shape, sum(dones)).astype(self._dtypes["done"])
        return out, priority

    @staticmethod
    def _stack(done: List[Tuple[Columns, Optional[float]]]
               ) -> Tuple[Columns, Optional[Any], int]:
        if not done:
            return {}, None, 0
        columns = {name: np.stack([step[name] for step, _ in done]) for name in done[0][0]}
        given = [p for _, p in done]
        priorities = None if any(p is None for p in given) else np.asarray(given, np.float64)
        return columns, priorities, len(done)
