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
  cast to the field's dtype, as cpprb does), returning cpprb's ring position of the first
  item (None when nothing was given); a batch larger than the buffer keeps its newest
  ``size`` steps, as a ring buffer does. One transition goes into a batching writer (no
  round trip per call); every method of the same object (``sample``, ``get_stored_size``,
  ...) first delivers what the writer holds, so it sees every earlier ``add``;
- ``sample(batch_size)`` returning a dict of arrays ``(batch, *shape)``; the prioritized
  buffers add ``"indexes"`` (uint64 keys) and ``"weights"`` (float32);
- ``update_priorities(indexes, priorities)``: priorities become ``|p| + eps`` and the table
  samples proportionally to ``(p + eps)^alpha`` (the server applies alpha); new items get
  the largest priority given so far, like cpprb's max priority; ``get_max_priority()``;
- ``get_stored_size()``, ``get_buffer_size()``, ``get_next_index()``,
  ``get_current_episode_len()``, ``clear()``, ``on_episode_end()``, ``is_Nstep()``;
- ``create_buffer(size, env_dict, prioritized=...)``, ``train(...)`` (replayd.cpprb_train),
  ``LaBERmean``, ``LaBERlazy``, ``LaBERmax`` (replayd.cpprb_laber).

Each buffer object owns its table: a unique name (``cpprb-<hex>``) unless ``table=`` names
one, created if missing (an existing table with the same description is reused with its
contents, one with a different description raises replayd.AlreadyExists). A table the
buffer named itself is dropped when the buffer is garbage-collected, or at exit, in the
process that created it, unless ``persist=True``; a named table is never dropped. Pickled
copies (for other processes: they are a replayd.Client plus the table's description) refer
to the same table and never drop it.

Differences and unsupported options:
- ``Nstep``, ``ReverseReplayBuffer``, ``SelectiveReplayBuffer``, ``HindsightReplayBuffer``:
  not provided yet (NotImplementedError; they need episodes on the server);
- single-transition adds reach *other* objects and processes sharing the table when 64 of
  them (at most the size) are collected, at ``on_episode_end()``, when the buffer is
  pickled, collected or its process exits; cpprb's shared memory shows them at once;
- ``get_next_index()``, ``add()``'s return value and ``get_current_episode_len()`` count
  this object's adds (cpprb's MP buffers share the ring index between processes);
  ``get_max_priority()`` sees the priorities given through this object;
- ``get_all_transitions``, ``save_transitions``, ``load_transitions``: NotImplementedError:
  the server has no operation that reads every item in insertion order, and sampling
  cannot return each item exactly once;
- ``next_of`` and ``stack_compress`` are accepted but only change memory use in cpprb:
  here ``next_<name>`` fields are ordinary fields (``add`` must be given them, as in cpprb)
  and stacked values are stored uncompressed; results are the same;
- ``mmap_prefix``, ``ctx``, ``backend``, ``logger`` are accepted and ignored (storage lives
  on the server); ``check_for_update`` is always in effect (keys of overwritten items are
  stale and ignored by the server);
- ``indexes`` of a sample are replayd keys, not ring-buffer positions; stale ones are
  ignored by ``update_priorities``;
- before any priority is given, new items get priority 1.0 (cpprb: 1.0 + eps);
- ``sample`` on an empty buffer raises ValueError (cpprb raises ValueError from numpy);
- the sampling RNG is the server's (seeded per table), not numpy's global one.

The server address is ``address=``, else the environment variable ``REPLAYD_ADDRESS``,
else ``unix:///tmp/replayd.sock``.
"""
from __future__ import annotations

from multiprocessing import util as mp_util
from typing import Any, Dict, Mapping, Optional

import numpy as np

from .client import Client
from .cpprb_laber import LaBER, LaBERlazy, LaBERmax, LaBERmean
from .cpprb_table import (DEFAULT_ADDRESS, WRITER_BATCH_ITEMS, Lifetime, env_fields,
                          new_table_name, resolve_address)
from .errors import TimeoutError as ReplayTimeout
from .sample import Sample

__all__ = ["ReplayBuffer", "PrioritizedReplayBuffer", "MPReplayBuffer",
           "MPPrioritizedReplayBuffer", "create_buffer", "LaBER", "LaBERmean", "LaBERlazy",
           "LaBERmax", "train", "ReverseReplayBuffer", "SelectiveReplayBuffer",
           "HindsightReplayBuffer", "DEFAULT_ADDRESS"]

_IGNORED_OPTIONS = ("ctx", "backend", "logger", "check_for_update", "mmap_prefix")


class ReplayBuffer:
    """cpprb.ReplayBuffer on a replayd table (uniform sampling with replacement, FIFO
    eviction). See the module docstring for what differs from cpprb."""

    _prioritized = False

    def __init__(self, size: int, env_dict: Optional[Mapping[str, Any]] = None, *,
                 next_of: Any = None, stack_compress: Any = None, default_dtype: Any = None,
                 Nstep: Any = None, mmap_prefix: Optional[str] = None,
                 address: Optional[str] = None, table: Optional[str] = None,
                 persist: bool = False, timeout: Optional[float] = None,
                 **kwargs: Any) -> None:
        if Nstep:
            raise NotImplementedError("replayd.cpprb does not support Nstep yet; compute "
                                      "N-step returns before add()")
        unknown = sorted(set(kwargs) - set(_IGNORED_OPTIONS))
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected keyword arguments "
                            f"{unknown}")
        self._size = int(size)
        self._table = new_table_name() if table is None else table
        self._fields = env_fields(env_dict, default_dtype, next_of)
        self._client = Client(resolve_address(address), timeout=timeout)
        if self._prioritized:
            self._client.create_table(self._table, self._fields, self._size,
                                      sampler="prioritized", priority_exponent=self._alpha,
                                      exist_ok=True)
        else:
            self._client.create_table(self._table, self._fields, self._size, exist_ok=True)
        self._one_plan = [(name, dtype, shape, int(np.prod(shape)))
                          for name, dtype, shape in self._fields]
        self._index = 0  # cpprb's next ring position, counted over this object's adds
        self._episode_len = 0
        self._max_priority = 1.0
        self._writer_batch = max(1, min(WRITER_BATCH_ITEMS, self._size, int(
            self._client.server["limits"].get("max_batch_items", self._size))))
        self._life = Lifetime(self._client, self._table, drop=table is None and not persist,
                               batch=self._writer_batch)
        self._watch_lifetime()

    def __getstate__(self) -> Dict[str, Any]:
        """A copy (for another process) refers to the same table and never drops it."""
        self._life.flush()
        state = dict(self.__dict__)
        del state["_life"]
        return state

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.__dict__.update(state)
        self._life = Lifetime(self._client, self._table, drop=False, batch=self._writer_batch)
        self._watch_lifetime()

    def _watch_lifetime(self) -> None:
        # multiprocessing's Finalize (not weakref.finalize) also runs when a
        # multiprocessing child exits, which skips atexit; a forked child gets its own.
        mp_util.Finalize(self, self._life.end, exitpriority=10)
        mp_util.register_after_fork(self, ReplayBuffer._after_fork)

    def _after_fork(self) -> None:
        self._life = Lifetime(self._client, self._table, drop=False, batch=self._writer_batch)
        self._watch_lifetime()

    # -- cpprb API ---------------------------------------------------------------------

    def add(self, **kwargs: Any) -> Optional[int]:
        """Adds one transition or a batch (every value reshaped to ``(-1, *shape)``) and
        returns cpprb's ring position of the first one. One transition goes to a batching
        writer (no round trip); every other method sees it. Raises KeyError if a value is
        missing; values for names the buffer does not define are ignored, as in cpprb."""
        return self._add(kwargs, None)

    def sample(self, batch_size: int) -> Dict[str, np.ndarray[Any, Any]]:
        """A dict of ``(batch_size, *shape)`` arrays drawn uniformly with replacement."""
        return dict(self._sample(batch_size, 0.0).data)

    def get_stored_size(self) -> int:
        """Items currently stored (shared by every process using this table)."""
        self._life.send()
        return self._client.size(self._table)

    def get_buffer_size(self) -> int:
        """Capacity of the buffer."""
        return self._size

    def get_next_index(self) -> int:
        """cpprb's ring position of the next transition: the number of transitions this
        object added since the last clear(), modulo the size (other processes' adds to a
        shared table are not counted)."""
        return self._index

    def get_current_episode_len(self) -> int:
        """Transitions added since the last on_episode_end() (or clear())."""
        return self._episode_len

    def clear(self) -> None:
        """Removes every item (for every process using the table)."""
        self._life.send()
        self._client.reset(self._table)
        self._index = self._episode_len = 0
        self._max_priority = 1.0

    def on_episode_end(self) -> None:
        """Starts a new episode (get_current_episode_len() becomes 0). Transitions still in
        the writer are sent, so other processes see them (as with cpprb's MP buffers)."""
        self._episode_len = 0
        self._life.send()

    def is_Nstep(self) -> bool:  # noqa: N802 - cpprb's name
        return False

    def get_all_transitions(self, shuffle: bool = False) -> Dict[str, np.ndarray[Any, Any]]:
        raise NotImplementedError(
            "get_all_transitions is not supported by replayd.cpprb: the replayd server has "
            "no operation that reads every stored item in insertion order, and sampling "
            "cannot return each item exactly once. Keep a local cpprb.ReplayBuffer for "
            "that pattern (see client/python/README.md, 'cpprb migration').")

    def save_transitions(self, file: Any, *, safe: bool = True) -> None:
        raise NotImplementedError("save_transitions is not supported by replayd.cpprb: the "
                                  "server cannot read every stored item in order (use the "
                                  "server's snapshots to keep a table)")

    def load_transitions(self, file: Any) -> None:
        raise NotImplementedError("load_transitions is not supported by replayd.cpprb "
                                  "yet (it pairs with save_transitions)")

    # -- replayd extras ----------------------------------------------------------------

    @property
    def client(self) -> Client:
        """The replayd.Client this buffer uses."""
        return self._client

    @property
    def table(self) -> str:
        """The replayd table holding this buffer."""
        return self._table

    @property
    def persist(self) -> bool:
        """False when garbage collection in the creating process drops the table."""
        return not self._life.drop

    def __repr__(self) -> str:
        return (f"replayd.cpprb.{type(self).__name__}(size={self._size}, "
                f"table={self._table!r}, address={self._client.address!r})")

    # -- internals ---------------------------------------------------------------------

    def _add_one(self, kwargs: Mapping[str, Any], priorities: Any) -> Optional[int]:
        """The fast path of add(): exactly one transition, no priority or a scalar one.
        Returns None (having changed nothing) when `kwargs` is anything else."""
        if priorities is not None and type(priorities) is not float:
            return None
        item = {}
        try:
            for name, dtype, shape, size in self._one_plan:
                array = np.asarray(kwargs[name], dtype=dtype)
                if array.shape != shape:
                    if array.size != size:
                        return None
                    array = array.reshape(shape)
                item[name] = array
        except (KeyError, ValueError, TypeError):
            return None  # the general path names the problem
        priority = None
        if priorities is not None:
            self._max_priority = max(self._max_priority, priorities)
            priority = abs(priorities) + self._eps
        self._life.writer_here().append(item, priority=priority)
        first = self._index
        self._index = (first + 1) % self._size
        self._episode_len += 1
        return first

    def _add(self, kwargs: Mapping[str, Any], priorities: Any) -> Optional[int]:
        fast = self._add_one(kwargs, priorities)
        if fast is not None:
            return fast
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
            raw = np.ravel(np.asarray(priorities, dtype=np.float64))
            if raw.shape[0] != n:
                raise ValueError("`priorities` shape is incompatible")
            if raw.shape[0]:
                self._max_priority = max(self._max_priority, float(raw.max()))
            prio = np.abs(raw) + self._eps
        if not n:
            return None
        first = self._index
        self._index = (self._index + n) % self._size
        self._episode_len += n
        if n == 1:
            self._life.writer_here().append(
                {name: array[0] for name, array in data.items()},
                priority=None if prio is None else float(prio[0]))
            return first
        self._life.send()  # keeps the order of earlier single adds
        if n > self._size:  # a ring buffer keeps only the newest `size` of them
            data = {name: array[-self._size:] for name, array in data.items()}
            prio = None if prio is None else prio[-self._size:]
            n = self._size
        step = max(1, int(self._client.server["limits"].get("max_batch_items", n)))
        for start in range(0, n, step):
            part = {name: array[start:start + step] for name, array in data.items()}
            self._client.insert(self._table, part,
                                None if prio is None else prio[start:start + step])
        return first

    def _sample(self, batch_size: int, beta: float) -> Sample:
        self._life.send()
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
        raw = np.ravel(np.asarray(priorities, dtype=np.float64))
        if raw.shape[0]:
            self._max_priority = max(self._max_priority, float(raw.max()))
        self._life.send()
        self._client.update_priorities(self._table, indexes, np.abs(raw) + self._eps)

    def get_max_priority(self) -> float:
        """The largest priority given to add() or update_priorities() through this object
        since it was made or cleared, at least 1.0 (cpprb's starting value). Priorities given
        by other processes sharing the table are not seen."""
        return self._max_priority


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


def create_buffer(size: int, env_dict: Optional[Mapping[str, Any]] = None, *,
                  prioritized: bool = False, **kwargs: Any) -> ReplayBuffer:
    """cpprb.create_buffer: a PrioritizedReplayBuffer when `prioritized`, else a
    ReplayBuffer; other keyword arguments go to the constructor."""
    if prioritized:
        return PrioritizedReplayBuffer(size, env_dict, **kwargs)
    return ReplayBuffer(size, env_dict, **kwargs)


class _PendingEpisodes:
    """A cpprb class that reads items in insertion order or by episode: not provided until
    the server keeps episodes (constructing one raises NotImplementedError)."""

    needs = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"replayd.cpprb has no {type(self).__name__} yet: it {self.needs}, which needs "
            f"episodes on the replayd server (see client/python/README.md, 'cpprb drop-in')")


class ReverseReplayBuffer(_PendingEpisodes):
    needs = "samples consecutive items backwards from the newest"


class SelectiveReplayBuffer(_PendingEpisodes):
    needs = "stores, reads and deletes whole episodes"


class HindsightReplayBuffer(_PendingEpisodes):
    needs = "relabels goals within stored episodes"


from .cpprb_train import train  # noqa: E402  (it uses the classes above)
