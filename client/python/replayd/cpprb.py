"""Drop-in replacements for cpprb's replay buffers, stored in a replayd table.

    from replayd.cpprb import MPPrioritizedReplayBuffer
    rb = MPPrioritizedReplayBuffer(10**6, {"obs": {"shape": 4}, "act": {}, "rew": {},
                                           "next_obs": {"shape": 4}, "done": {}},
                                   alpha=0.6, eps=1e-4, address="unix:///tmp/replayd.sock")

Unlike cpprb's shared-memory buffers, these pickle (they are a replayd.Client plus the
table's description), so they can be passed to processes started with any method and to
Ray tasks. Every process talks to the server; the server serializes.

What matches cpprb:
- constructor arguments ``size``, ``env_dict``, ``default_dtype``, ``alpha``, ``eps``;
  env_dict entries ``{"shape": int or tuple, "dtype": ...}``: a missing shape means
  ``(1,)`` as in cpprb (so a scalar comes back with shape ``(batch, 1)``), a missing dtype
  means ``default_dtype`` (float32 by default);
- ``add(**kw)`` with one transition or a batch (values reshaped to ``(-1, *shape)`` and
  cast to the field's dtype, as cpprb does), returning an index-like int (the first key);
  a batch larger than the buffer keeps its newest ``size`` steps, as a ring buffer does;
- ``sample(batch_size)`` returning a dict of arrays ``(batch, *shape)``; the prioritized
  buffers add ``"indexes"`` (uint64 keys) and ``"weights"`` (float32);
- ``update_priorities(indexes, priorities)``: priorities become ``|p| + eps`` and the table
  samples proportionally to ``(p + eps)^alpha`` (the server applies alpha); new items get
  the largest priority given so far, like cpprb's max priority;
- ``get_stored_size()``, ``get_buffer_size()``, ``clear()``, ``on_episode_end()`` (a
  no-op, as in cpprb without Nstep or memory compression), ``is_Nstep()``.

Differences and unsupported options (they fail loudly, with NotImplementedError):
- ``Nstep``: not supported (it needs per-episode client-side state);
- ``mmap_prefix``: not supported (storage lives on the server);
- ``get_all_transitions``, ``save_transitions``, ``load_transitions``, ``get_next_index``,
  ``get_max_priority``: not supported: the server has no operation that reads every item
  or reports the maximum priority, and sampling cannot return each item exactly once;
- ``next_of`` and ``stack_compress`` are accepted but only change memory use in cpprb:
  here ``next_<name>`` fields are ordinary fields (``add`` must be given them, as in cpprb)
  and stacked values are stored uncompressed; results are the same;
- ``ctx``, ``backend``, ``logger`` are accepted and ignored; ``check_for_update`` is always
  in effect (keys of overwritten items are stale and ignored by the server);
- indexes are replayd keys, not ring-buffer positions; stale ones are ignored;
- before any priority is given, new items get priority 1.0 (cpprb: 1.0 + eps);
- ``sample`` on an empty buffer raises ValueError (cpprb raises ValueError from numpy);
- the sampling RNG is the server's (seeded per table), not numpy's global one.

The table is created on the server if missing (``create_table(..., exist_ok=True)``); an
existing table with the same description is reused with its contents, and one with a
different description raises replayd.AlreadyExists. Name it with ``table=`` (default
``"cpprb"``). The server address is ``address=``, else the environment variable
``REPLAYD_ADDRESS``, else ``unix:///tmp/replayd.sock``.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .client import Client
from .errors import TimeoutError as ReplayTimeout
from .sample import Sample
from .schema import wire_dtype

__all__ = ["ReplayBuffer", "PrioritizedReplayBuffer", "MPReplayBuffer",
           "MPPrioritizedReplayBuffer", "DEFAULT_ADDRESS", "DEFAULT_TABLE"]

DEFAULT_ADDRESS = "unix:///tmp/replayd.sock"
DEFAULT_TABLE = "cpprb"
_IGNORED_OPTIONS = ("ctx", "backend", "logger", "check_for_update")


def _resolve_address(address: Optional[str]) -> str:
    return address or os.environ.get("REPLAYD_ADDRESS") or DEFAULT_ADDRESS


def _env_fields(env_dict: Optional[Mapping[str, Any]], default_dtype: Any,
                next_of: Any) -> List[Tuple[str, np.dtype[Any], Tuple[int, ...]]]:
    """cpprb's env_dict as (name, dtype, shape) fields, with next_<name> for next_of."""
    if not env_dict:
        raise ValueError("env_dict must define at least one value, e.g. "
                         "{'obs': {'shape': 4}, 'act': {}, 'rew': {}}")
    fallback = np.float32 if default_dtype is None else default_dtype
    fields = []
    for name, spec in env_dict.items():
        spec = spec or {}
        shape = spec.get("shape", 1)
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else \
            tuple(int(d) for d in shape)
        try:
            dtype = wire_dtype(spec.get("dtype", fallback))
        except TypeError as exc:
            raise TypeError(f"env_dict['{name}']: {exc}") from None
        fields.append((str(name), dtype, shape))
    if next_of is not None:
        by_name = {name: (dtype, shape) for name, dtype, shape in fields}
        for name in np.array(next_of, ndmin=1):
            name = str(name)
            if name not in by_name:
                raise KeyError(f"next_of names '{name}', which env_dict does not define")
            if f"next_{name}" not in by_name:
                fields.append((f"next_{name}", *by_name[name]))
    return fields


class ReplayBuffer:
    """cpprb.ReplayBuffer on a replayd table (uniform sampling with replacement, FIFO
    eviction). See the module docstring for what differs from cpprb."""

    _prioritized = False

    def __init__(self, size: int, env_dict: Optional[Mapping[str, Any]] = None, *,
                 next_of: Any = None, stack_compress: Any = None, default_dtype: Any = None,
                 Nstep: Any = None, mmap_prefix: Optional[str] = None,
                 address: Optional[str] = None, table: str = DEFAULT_TABLE,
                 timeout: Optional[float] = None, **kwargs: Any) -> None:
        if Nstep:
            raise NotImplementedError("replayd.cpprb does not support Nstep yet; compute "
                                      "N-step returns before add()")
        if mmap_prefix:
            raise NotImplementedError("replayd.cpprb does not support mmap_prefix: the data "
                                      "lives on the replayd server")
        unknown = sorted(set(kwargs) - set(_IGNORED_OPTIONS))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments "
                            f"{unknown}")
        self._size = int(size)
        self._table = table
        self._fields = _env_fields(env_dict, default_dtype, next_of)
        self._client = Client(_resolve_address(address), timeout=timeout)
        if self._prioritized:
            self._client.create_table(self._table, self._fields, self._size,
                                      sampler="prioritized", priority_exponent=self._alpha,
                                      exist_ok=True)
        else:
            self._client.create_table(self._table, self._fields, self._size, exist_ok=True)

    # -- cpprb API ---------------------------------------------------------------------

    def add(self, **kwargs: Any) -> Optional[int]:
        """Adds one transition or a batch (every value reshaped to ``(-1, *shape)``).
        Returns the first new item's key. Raises KeyError if a value is missing; values for
        names the buffer does not define are ignored, as in cpprb."""
        return self._add(kwargs, None)

    def sample(self, batch_size: int) -> Dict[str, np.ndarray[Any, Any]]:
        """A dict of ``(batch_size, *shape)`` arrays drawn uniformly with replacement."""
        return dict(self._sample(batch_size, 0.0).data)

    def get_stored_size(self) -> int:
        """Items currently stored (shared by every process using this table)."""
        return self._client.size(self._table)

    def get_buffer_size(self) -> int:
        """Capacity of the buffer."""
        return self._size

    def clear(self) -> None:
        """Removes every item (for every process using the table)."""
        self._client.reset(self._table)

    def on_episode_end(self) -> None:
        """Nothing to do: without Nstep and memory compression cpprb does nothing either."""

    def is_Nstep(self) -> bool:  # noqa: N802 - cpprb's name
        return False

    def get_all_transitions(self, shuffle: bool = False) -> Dict[str, np.ndarray[Any, Any]]:
        raise NotImplementedError(
            "get_all_transitions is not supported by replayd.cpprb: the replayd server has "
            "no operation that reads every stored item, and sampling cannot return each "
            "item exactly once. Keep a local cpprb.ReplayBuffer for that pattern.")

    def save_transitions(self, file: Any, *, safe: bool = True) -> None:
        raise NotImplementedError("save_transitions is not supported by replayd.cpprb (the "
                                  "server cannot read every stored item)")

    def load_transitions(self, file: Any) -> None:
        raise NotImplementedError("load_transitions is not supported by replayd.cpprb")

    def get_next_index(self) -> int:
        raise NotImplementedError("get_next_index has no meaning in replayd.cpprb: items "
                                  "are identified by keys, not ring-buffer positions")

    # -- replayd extras ----------------------------------------------------------------

    @property
    def client(self) -> Client:
        """The replayd.Client this buffer uses."""
        return self._client

    @property
    def table(self) -> str:
        """The replayd table holding this buffer."""
        return self._table

    def __repr__(self) -> str:
        return (f"replayd.cpprb.{type(self).__name__}(size={self._size}, "
                f"table={self._table!r}, address={self._client.address!r})")

    # -- internals ---------------------------------------------------------------------

    def _add(self, kwargs: Mapping[str, Any], priorities: Any) -> Optional[int]:
        missing = [name for name, _, _ in self._fields if name not in kwargs]
        if missing:
            raise KeyError(f"add() is missing values for {missing}")
        data: Dict[str, np.ndarray[Any, Any]] = {}
        n = None
        for name, dtype, shape in self._fields:
            array = np.asarray(kwargs[name]).astype(dtype, copy=False)
            try:
                array = array.reshape(-1, *shape)
            except ValueError:
                raise ValueError(f"add(): '{name}' of shape {np.shape(kwargs[name])} cannot "
                                 f"be reshaped to (-1, {', '.join(map(str, shape))})") from None
            if n is None:
                n = array.shape[0]
            elif array.shape[0] != n:
                raise ValueError(f"add(): '{name}' holds {array.shape[0]} steps, the other "
                                 f"values {n}")
            data[name] = array
        prio = None
        if priorities is not None:
            prio = np.ravel(np.asarray(priorities, dtype=np.float64))
            if prio.shape[0] != n:
                raise ValueError("`priorities` shape is incompatible")
            prio = np.abs(prio) + self._eps
        if n is None:
            return None
        if n > self._size:  # a ring buffer keeps only the newest `size` of them
            data = {name: array[-self._size:] for name, array in data.items()}
            prio = None if prio is None else prio[-self._size:]
            n = self._size
        step = max(1, int(self._client.server["limits"].get("max_batch_items", n)))
        first = None
        for start in range(0, n, step):
            part = {name: array[start:start + step] for name, array in data.items()}
            keys = self._client.insert(self._table, part,
                                       None if prio is None else prio[start:start + step])
            if first is None and len(keys):
                first = int(keys[0])
        return first

    def _sample(self, batch_size: int, beta: float) -> Sample:
        try:
            return self._client.sample(self._table, int(batch_size), beta=beta, timeout=0)
        except ReplayTimeout as exc:
            raise ValueError(f"cannot sample from table '{self._table}': it is empty "
                             f"({exc.message})") from exc

    _eps = 0.0
    _alpha = 0.0


class PrioritizedReplayBuffer(ReplayBuffer):
    """cpprb.PrioritizedReplayBuffer on a replayd table: proportional prioritized sampling
    with ``P(i) ~ (p_i + eps)^alpha`` and importance weights normalized by their maximum."""

    _prioritized = True

    def __init__(self, size: int, env_dict: Optional[Mapping[str, Any]] = None, *,
                 alpha: float = 0.6, eps: float = 1e-4, **kwargs: Any) -> None:
        self._alpha = float(alpha)
        self._eps = float(eps)
        super().__init__(size, env_dict, **kwargs)

    def add(self, *, priorities: Any = None, **kwargs: Any) -> Optional[int]:
        """Adds transitions; `priorities` (one per step) default to the largest seen."""
        return self._add(kwargs, priorities)

    def sample(self, batch_size: int, beta: float = 0.4) -> Dict[str, np.ndarray[Any, Any]]:
        """Samples by priority; the dict also holds ``indexes`` (keys to pass back to
        update_priorities) and ``weights`` (float32 importance weights)."""
        sample = self._sample(batch_size, beta)
        out = dict(sample.data)
        out["weights"] = sample.weights.astype(np.float32)
        out["indexes"] = sample.keys
        return out

    def update_priorities(self, indexes: Any, priorities: Any) -> None:
        """Sets priorities ``|p| + eps`` of the items `indexes` (keys from sample); keys of
        items overwritten since are ignored."""
        if priorities is None:
            raise TypeError("`priorities` must not be `None`")
        prio = np.abs(np.ravel(np.asarray(priorities, dtype=np.float64))) + self._eps
        self._client.update_priorities(self._table, indexes, prio)

    def get_max_priority(self) -> float:
        raise NotImplementedError("get_max_priority is not supported by replayd.cpprb: the "
                                  "server does not report its maximum priority")


class MPReplayBuffer(ReplayBuffer):
    """cpprb.MPReplayBuffer: the same as ReplayBuffer here (every replayd buffer may be
    shared by processes; pass it to them, it pickles)."""

    def __init__(self, size: int, env_dict: Optional[Mapping[str, Any]] = None, *,
                 default_dtype: Any = None, ctx: Any = None, backend: str = "sharedctypes",
                 **kwargs: Any) -> None:
        super().__init__(size, env_dict, default_dtype=default_dtype, **kwargs)


class MPPrioritizedReplayBuffer(PrioritizedReplayBuffer):
    """cpprb.MPPrioritizedReplayBuffer: the same as PrioritizedReplayBuffer here."""

    def __init__(self, size: int, env_dict: Optional[Mapping[str, Any]] = None, *,
                 alpha: float = 0.6, eps: float = 1e-4, ctx: Any = None,
                 backend: str = "sharedctypes", **kwargs: Any) -> None:
        super().__init__(size, env_dict, alpha=alpha, eps=eps, **kwargs)
