"""replayd.cpprb's buffer classes: ReplayBuffer, PrioritizedReplayBuffer, their MP names and
create_buffer, stored in a replayd table (what matches cpprb and what differs: the package
docstring, replayd/cpprb/__init__.py)."""
from __future__ import annotations

import warnings
from multiprocessing import util as mp_util
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .. import requests
from ..client import Client
from ..columns import prepare_insert
from ..errors import TimeoutError as ReplayTimeout
from ..sample import Sample
from ..writer import Writer
from . import npz
from .nstep import NstepCache
from .frame_ring import FrameRing
from .pixel_frames import FramePlan
from .steps import (HIDDEN_REWARD, RESERVED, SAMPLE_EXTRAS, RingKeys, read_ordered, send_steps,
                    with_hidden)
from .table import (PID, WRITER_BATCH_ITEMS, Lifetime, check_mp_options, env_fields,
                    new_table_name, raw_dtypes, resolve_address, reward_field_of, stored_shape)

__all__ = ["ReplayBuffer", "PrioritizedReplayBuffer", "MPReplayBuffer",
           "MPPrioritizedReplayBuffer", "create_buffer"]

_IGNORED_OPTIONS = ("ctx", "backend", "logger", "mmap_prefix")
# Dead transitions' rows gathered before a frame buffer's add sends their priority 0 and
# the deletes (a sample sends them first anyway).
SETTLE_DEAD_ROWS = 256


def python_numbers(dtype: "np.dtype[Any]") -> Optional[Tuple[Tuple[type, ...], Any, Any]]:
    """(types, low, high): the Python numbers of those types within [low, high] that the
    writer stores in a scalar field of `dtype` as they are (Writer.append's fast path),
    with the value ``np.asarray(value, dtype)`` has; add() passes them on unconverted.
    Floats stop at 2**53, below which an int converts exactly to a double first."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return (int, bool), int(info.min), int(info.max)
    if dtype.kind == "f":
        high = min(float(np.finfo(dtype).max), 2.0 ** 53)
        return (int, float, bool), -high, high
    if dtype.kind == "b":
        return (bool,), False, True
    return None


def names_of(value: Any) -> List[str]:
    """cpprb's `next_of` / `stack_compress`: None, a name or names."""
    return [] if value is None else [str(name) for name in np.array(value, ndmin=1)]


class ReplayBuffer:
    """cpprb.ReplayBuffer on a replayd table (uniform sampling with replacement, FIFO
    eviction). See the module docstring for what differs from cpprb."""

    _prioritized = False
    # MP buffers: every process sees the same ring (adds wait until stored, the next index
    # is the table's), and update_priorities only reaches positions sampled since they
    # were last written (cpprb's MP buffers' "unsampled" mask).
    _shared_index = False

    def __init__(self, size: int, env_dict: Optional[Mapping[str, Any]] = None, *,
                 next_of: Any = None, stack_compress: Any = None, default_dtype: Any = None,
                 Nstep: Any = None, mmap_prefix: Optional[str] = None,
                 address: Optional[str] = None, table: Optional[str] = None,
                 persist: bool = False, timeout: Optional[float] = None,
                 prefetch: bool = False, check_for_update: bool = False,
                 **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(_IGNORED_OPTIONS))
        if unknown:  # cpprb ignores them silently
            warnings.warn(f"{type(self).__name__}() got unexpected keyword arguments "
                          f"{unknown}; they are ignored, as cpprb does", stacklevel=2)
        self._size = int(size)
        self._table = new_table_name() if table is None else table
        self._fields = env_fields(env_dict, default_dtype, next_of)
        self._nstep = NstepCache(Nstep, self._fields) if Nstep else None
        self._raw = raw_dtypes(self._fields)  # stored as their bytes
        # Frames stored once (replayd.cpprb.pixel_frames); with Nstep, in the MP buffers
        # and stacks deeper than the server's limit, as ordinary values.
        stored_once = Nstep is None and not self._shared_index
        self._frames = FramePlan(
            self._fields, [n for n in names_of(next_of) if n not in self._raw] if stored_once
            else [], [n for n in names_of(stack_compress) if n not in self._raw]
            if stored_once else [])
        # The values cpprb's buffer would keep compressed, which save_transitions(safe=False)
        # writes as cpprb does (cpprb turns next_of off with Nstep; its MP buffers both).
        self._cpprb_next_of = names_of(next_of) if stored_once else []
        self._cpprb_stack_compress = names_of(stack_compress) if not self._shared_index \
            else []
        self._client = Client(resolve_address(address), timeout=timeout)
        reserved = sorted({name for name, _, _ in self._fields} & set(RESERVED))
        if reserved:
            raise ValueError(f"env_dict names {reserved}: replayd.cpprb reserves "
                             f"{', '.join(RESERVED)} for its episodic table")
        # cpprb's (1,)-shaped values are stored as scalars (samples reshape them back), so
        # that the writer takes Python numbers as they are.
        self._units = [name for name, _, shape in self._fields
                       if shape == (1,) and name not in self._raw]
        stored = [(name, np.dtype(np.uint8), (*shape, dtype.itemsize)) if name in self._raw
                  else (name, dtype, stored_shape(shape)) for name, dtype, shape in
                  (self._frames.table_fields() if self._frames else self._fields)]
        # The episodic table's reward field: a float scalar of the buffer (a 1-step sample
        # returns it unchanged, but -0.0 as 0.0), else one more field, always 0, never shown.
        reward = reward_field_of([f for f in stored if f[0] not in self._frames.table_stacks()])
        self._hidden = HIDDEN_REWARD if reward is None else None
        self._hidden_values = {HIDDEN_REWARD: 0.0} if reward is None else {}
        if reward is None:
            stored.append((HIDDEN_REWARD, np.dtype(np.float32), ()))
        # With frame values, rows that hold no live transition get priority 0, so the table
        # is prioritized (uniform buffers: every live transition priority 1, exponent 1).
        self._frame_ring = FrameRing(self._size, self._frames.history_rows) \
            if self._frames else None
        self._client.create_table(self._table, stored,
                                  self._frame_ring.capacity if self._frame_ring else self._size,
                                  sampler="prioritized" if self._prioritized or self._frames
                                  else "uniform",
                                  priority_exponent=self._alpha if self._prioritized or
                                  not self._frames else 1.0, exist_ok=True,
                                  episodic=True, reward=reward or HIDDEN_REWARD, bootstrap=[],
                                  stack=self._frames.table_stacks() or None,
                                  pad_history=not self._frames)
        # replayd's option: each sample asks for the next one at once (see _sample).
        self._prefetch = bool(prefetch)
        # add() of one transition may go to the writer as given (no Nstep, no frames).
        self._exact_adds = self._nstep is None and not self._frames and not self._raw
        self._direct: Optional[Writer] = None  # that writer, once known (see _add_one)
        self._direct_pid = 0
        # Per value: name, dtype, size, stored shape, and for a frame buffer's other scalar
        # values the Python numbers add() passes on as given (see python_numbers).
        plain = set(self._frames.plain_names) if self._frames else set()
        self._one_plan = [(name, dtype, int(np.prod(shape)), stored_shape(shape),
                           python_numbers(dtype) if name in plain and stored_shape(shape) == ()
                           else None)
                          for name, dtype, shape in self._fields]
        if self._raw:  # add() of one transition takes the general path (_store converts)
            self._one_plan = []
        self._added = 0  # transitions this object added since it was made or cleared
        self._episode_start = 0  # _added at the last on_episode_end()
        self._max_priority = 1.0
        # cpprb gives an item added without a priority its largest priority + eps, from
        # 1.0 + eps; the server the largest priority the table has seen, from 1.0. This
        # object's first such add (since made or cleared) sends 1.0 + eps (or its largest
        # + eps) itself: the table's largest is then at least that, and both agree after.
        self._default_priority_sent = False
        self._writer_batch = max(1, min(WRITER_BATCH_ITEMS, self._size, int(
            self._client.server["limits"].get("max_batch_items", self._size))))
        self._ring_keys = RingKeys(self._size, self._shared_index or check_for_update)
        self._life = Lifetime(self._client, self._table, drop=table is None and not persist,
                              batch=self._writer_batch, ring=self._keys_watcher())
        self._watch_lifetime()

    def __getstate__(self) -> Dict[str, Any]:
        """A copy (for another process) refers to the same table and never drops it."""
        self._life.flush()
        state = dict(self.__dict__)
        del state["_life"]
        state["_direct"] = None  # the writer belongs to this process
        if self._nstep is not None:  # a copy starts its own episodes
            state["_nstep"] = self._nstep.empty_copy()
        return state

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.__dict__.update(state)
        self._life = Lifetime(self._client, self._table, drop=False, batch=self._writer_batch,
                              ring=self._keys_watcher())
        self._watch_lifetime()

    def _keys_watcher(self) -> Any:
        """What takes the keys of the writer's batches: the frame ring; for a prioritized
        buffer the ring of keys (update_priorities of a position not sampled); for a
        uniform one nothing (nothing asks for a key)."""
        if self._frame_ring is not None:
            return self._frame_ring
        return self._ring_keys if self._prioritized else None

    def _watch_lifetime(self) -> None:
        # multiprocessing's Finalize (not weakref.finalize) also runs when a
        # multiprocessing child exits, which skips atexit; a forked child gets its own.
        mp_util.Finalize(self, self._life.end, exitpriority=10)
        mp_util.register_after_fork(self, ReplayBuffer._after_fork)

    def _after_fork(self) -> None:
        self._direct = None
        self._life = Lifetime(self._client, self._table, drop=False, batch=self._writer_batch,
                              ring=self._keys_watcher())
        self._watch_lifetime()

    # -- cpprb API ---------------------------------------------------------------------

    def add(self, **kwargs: Any) -> Optional[int]:
        """Adds one transition or a batch (every value reshaped to ``(-1, *shape)``) and
        returns cpprb's ring position of the first one. One transition goes to a batching
        writer (no round trip); every other method sees it. Raises KeyError if a value is
        missing; values for names the buffer does not define are ignored, as in cpprb."""
        direct = self._direct
        if direct is not None and self._direct_pid == PID[0]:
            if direct.try_append(kwargs):  # values already as stored: the cheapest path
                self._added += 1
                return (self._added - 1) % self._size
        return self._add(kwargs, None)

    def sample(self, batch_size: int) -> Dict[str, np.ndarray[Any, Any]]:
        """A dict of ``(batch_size, *shape)`` arrays drawn uniformly with replacement."""
        return dict(self._sample(batch_size, 0.0).data)

    def get_stored_size(self) -> int:
        """Transitions currently stored (shared by every process using this table)."""
        if self._frame_ring is not None:  # this object's ring (see replayd.cpprb.frame_ring)
            return min(self._frame_ring.added, self._size)
        self._life.send()
        info = self._client.table_info(self._table)
        return int(info["size"]) - int(info.get("history_steps", 0))

    def get_buffer_size(self) -> int:
        """Capacity of the buffer."""
        return self._size

    def get_next_index(self) -> int:
        """cpprb's ring position of the next transition: the number of transitions this
        object added since the last clear(), modulo the size; for the MP buffers, the
        number stored in the table by every process since the last clear()."""
        if self._shared_index:
            self._life.send()
            info = self._client.table_info(self._table)
            return int(info["rate_limiter"]["inserts"]) % self._size
        return self._added % self._size

    def get_current_episode_len(self) -> int:
        """Transitions added since the last on_episode_end() (or clear())."""
        return self._added - self._episode_start

    def clear(self) -> None:
        """Removes every item (for every process using the table)."""
        self._life.end_episode()
        self._life.take_prefetched(None)  # drawn before the reset
        if self._frame_ring is not None:
            self._life.flush()  # every row's key noted before the ring forgets them
            self._frame_ring.reset()
        self._client.reset(self._table)
        self._added = self._episode_start = 0
        self._ring_keys.clear()
        self._max_priority = 1.0
        self._default_priority_sent = False
        if self._nstep is not None:
            self._nstep.clear()

    def on_episode_end(self) -> None:
        """Starts a new episode (get_current_episode_len() becomes 0). With Nstep, first
        stores the transitions of the steps still cached (see replayd.cpprb.nstep).
        Transitions still in the writer are sent, so other processes see them (as with
        cpprb's MP buffers)."""
        if self._nstep is not None:
            data, prio, n = self._nstep.flush()
            self._store(data, n, prio)
        self._episode_start = self._added
        self._life.end_episode()

    def is_Nstep(self) -> bool:  # noqa: N802 - cpprb's name
        """True when the buffer was made with ``Nstep``."""
        return self._nstep is not None

    def get_all_transitions(self, shuffle: bool = False) -> Dict[str, np.ndarray[Any, Any]]:
        """Every stored transition, as cpprb returns them: ``(get_stored_size(), *shape)``
        arrays of each value in ring order (position 0 first; once the ring has wrapped,
        position ``get_next_index()`` holds the oldest), or in numpy's random order with
        `shuffle`. Reads the whole table (``read_steps``, paged)."""
        _, ring = self._ring()
        if not shuffle:
            return ring
        order = np.arange(next(iter(ring.values())).shape[0])
        np.random.shuffle(order)
        return {name: values[order] for name, values in ring.items()}

    def _encode_sample(self, idx: Any) -> Dict[str, np.ndarray[Any, Any]]:
        """The transitions at the ring positions `idx` (cpprb's internal read, used by
        subclasses and scripts). Reads the whole table. A position nothing was written to
        yet holds what cpprb's memory starts with: 1 in every value. Raises IndexError for a
        position outside the buffer."""
        wanted = np.array(idx, ndmin=1).astype(np.int64)
        wanted = np.where(wanted < 0, wanted + self._size, wanted)
        if np.any((wanted < 0) | (wanted >= self._size)):
            raise IndexError(f"_encode_sample: positions {wanted.tolist()[:8]} are outside "
                             f"the buffer of size {self._size}")
        positions, ring = self._ring()
        at = np.minimum(np.searchsorted(positions, wanted), max(positions.shape[0] - 1, 0))
        found = positions[at] == wanted if positions.shape[0] else np.zeros(wanted.shape, bool)
        if np.all(found):
            return {name: values[at] for name, values in ring.items()}
        out = {}
        for name, dtype, shape in self._fields:
            values = np.ones((wanted.shape[0], *shape), dtype)
            values[found] = ring[name][at[found]]
            out[name] = values
        return out

    def save_transitions(self, file: Any, *, safe: bool = True) -> None:
        """Writes every stored transition to `file` (a path or a binary file) in cpprb's
        ``.npz`` layout (replayd.cpprb.npz), which cpprb's load_transitions reads: as
        cpprb, `safe=False` on a buffer with ``next_of`` or ``stack_compress`` values writes
        cpprb's unsafe layout (each ``next_of`` value once), any other the safe one."""
        npz.write(file, self.get_all_transitions(), self.is_Nstep(), safe=safe,
                  next_of=self._cpprb_next_of, stack_compress=self._cpprb_stack_compress)

    def load_transitions(self, file: Any) -> None:
        """Adds the transitions of a file written by save_transitions, here or by cpprb
        (either of its layouts; ValueError for a file of the other Nstep kind or an unknown
        version). Unpickles the file: never load an untrusted one."""
        for data, episode_ends in npz.read(file, self.is_Nstep()):
            if self.is_Nstep():  # already n-step transitions: stored as they are (cpprb)
                columns, n = self._columns(data)
                self._store(columns, n, None)
            else:
                self._add(data, None)
            if episode_ends:
                self._episode_start = self._added
                self._life.end_episode()

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
        if (priorities is not None and type(priorities) is not float) or not self._one_plan:
            return None
        priority = self._first_default_priority() if priorities is None else \
            abs(priorities) + self._eps
        if self._exact_adds:  # values as the table stores them
            exact = dict(kwargs)
            exact.update(self._hidden_values)
            writer = self._life.writer_here()
            if self._hidden is None:  # add() may hand this process's writer kwargs as given
                self._direct, self._direct_pid = writer, PID[0]
            if writer.try_append(exact, priority):
                return self._added_one(priorities)
        item: Dict[str, Any] = dict(self._hidden_values)
        try:
            for name, dtype, size, stored, numbers in self._one_plan:
                value = kwargs[name]
                if numbers is not None and type(value) in numbers[0] and \
                        numbers[1] <= value <= numbers[2]:
                    item[name] = value  # the writer stores it as numpy's cast would
                    continue
                array = np.asarray(value, dtype=dtype)
                if array.shape != stored:
                    if array.size != size:
                        return None
                    array = array.reshape(stored)
                item[name] = array
        except (KeyError, ValueError, TypeError):
            return None  # the general path names the problem
        if self._frames:
            self._frames.check(item)  # ValueError before anything is stored
            self._append_frames(item, priority)
        else:
            self._life.writer_here().append(item, priority=priority)
        return self._added_one(priorities)

    def _first_default_priority(self) -> Optional[float]:
        """The priority of an add without priorities: this object's largest + eps for its
        first (prioritized buffers; see _default_priority_sent), else None (the table's
        largest)."""
        if not self._prioritized or self._default_priority_sent:
            return None
        self._default_priority_sent = True
        return self._max_priority + self._eps

    def _added_one(self, priorities: Optional[float]) -> int:
        """Counts one transition given to the writer; returns its ring position."""
        if priorities is not None:
            self._max_priority = max(self._max_priority, priorities)
        position = self._added % self._size
        self._added += 1
        if self._ring_keys.sampled_only:  # written since sampled: updates ignored
            self._ring_keys.keys[position] = 0
        return position

    def _add(self, kwargs: Mapping[str, Any], priorities: Any) -> Optional[int]:
        if self._nstep is None and not self._shared_index:
            fast = self._add_one(kwargs, priorities)
            if fast is not None:
                return fast
        data, n = self._columns(kwargs)
        prio = None
        if priorities is not None:
            prio = np.ravel(np.asarray(priorities, dtype=np.float64))
            if prio.shape[0] != n:
                raise ValueError("`priorities` shape is incompatible")
        if self._nstep is not None:
            if prio is None and self._prioritized:  # cpprb: the max priority at add time
                prio = np.full(n, self._max_priority)
            data, prio, n = self._nstep.add(data, n, prio)
        return self._store(data, n, prio)

    def _columns(self, kwargs: Mapping[str, Any]) -> Tuple[Dict[str, np.ndarray[Any, Any]], int]:
        """Every field of `kwargs` as ``(n, *shape)`` arrays of its dtype, and n."""
        missing = [name for name, _, _ in self._fields if name not in kwargs]
        if missing:
            raise KeyError(f"add() is missing values for {missing}")
        data: Dict[str, np.ndarray[Any, Any]] = {}
        n = 0
        for i, (name, dtype, shape) in enumerate(self._fields):
            array = np.asarray(kwargs[name]).astype(dtype, copy=False)
            try:
                array = array.reshape(-1, *shape)
            except ValueError:
                raise ValueError(f"add(): '{name}' of shape {np.shape(kwargs[name])} cannot "
                                 f"be reshaped to (-1, {', '.join(map(str, shape))})") from None
            if i == 0:
                n = array.shape[0]
            elif array.shape[0] != n:
                raise ValueError(f"add(): '{name}' holds {array.shape[0]} steps, the other "
                                 f"values {n}")
            data[name] = array
        return data, n

    def _store(self, data: Mapping[str, np.ndarray[Any, Any]], n: int,
               raw: Optional[np.ndarray[Any, Any]]) -> Optional[int]:
        """Stores n transitions (priorities as given to add, or None) at the next ring
        positions and returns the first position (None when n is 0)."""
        prio = None
        if raw is not None:
            if raw.shape[0]:
                self._max_priority = max(self._max_priority, float(raw.max()))
            prio = np.abs(raw) + self._eps
        elif n:
            first = self._first_default_priority()
            prio = None if first is None else np.full(n, first)
        if not n:
            return None
        data = {name: array.reshape(n) if name in self._units else
                self._raw_bytes(name, array) if name in self._raw else array
                for name, array in data.items()}
        transitions = []
        if self._frames:  # nothing is stored unless every transition can be
            transitions = [{name: array[i] for name, array in data.items()} for i in range(n)]
            for transition in transitions:
                self._frames.check(transition)
        first = self._added % self._size
        self._added += n
        if self._ring_keys.sampled_only:  # written since sampled: updates ignored
            self._ring_keys.keys[(first + np.arange(min(n, self._size))) % self._size] = 0
        if self._frames:
            for i, transition in enumerate(transitions):
                self._append_frames(transition, None if prio is None else float(prio[i]))
            return first
        if n == 1 and not self._shared_index:  # MP buffers: stored before add() returns
            item: Dict[str, Any] = {name: array[0] for name, array in data.items()}
            item.update(self._hidden_values)
            self._life.writer_here().append(
                item, priority=None if prio is None else float(prio[0]))
            return first
        self._life.send()  # keeps the order of earlier single adds
        if n > self._size:
            # A ring keeps the newest `size`; storing the newest size + (n mod size) of
            # them leaves each at its ring position and the table's next slot at cpprb's
            # next index (the first n mod size are overwritten by the last ones).
            keep = self._size + n % self._size
            data = {name: array[-keep:] for name, array in data.items()}
            prio = None if prio is None else prio[-keep:]
            n = keep
        episode = self._life.episode()
        schema = self._client.schema(self._table)
        step = max(1, min(self._size, int(self._client.server["limits"].get("max_batch_items",
                                                                            n))))
        for start in range(0, n, step):
            part = with_hidden({name: array[start:start + step]
                                for name, array in data.items()}, min(step, n - start),
                               self._hidden)
            batch = prepare_insert(schema, part,
                                   None if prio is None else prio[start:start + step])
            keys = send_steps(self._client, self._table, batch, episode.current()).result()
            episode.has_steps = True
            self._ring_keys.note_added(keys)
            if self._shared_index and start == 0:
                first = int(self._ring_keys.positions(keys[:1])[0])
        return first

    def _append_frames(self, transition: Mapping[str, Any], priority: Optional[float]) -> None:
        """Gives the writer the rows of one transition of a buffer with frame values
        (replayd.cpprb.pixel_frames): its row, after history rows when it starts a stored episode.
        `transition` holds cpprb's values, of their dtypes and shapes, and passed
        FramePlan.check."""
        episode = self._life.episode()
        rows, starts = self._frames.rows(transition, episode.previous)
        if starts and episode.previous is not None:  # it does not continue the last one
            self._life.end_episode()
        writer = self._life.writer_here()
        ring = self._frame_ring
        assert ring is not None
        for row in rows[:-1]:  # history rows: never drawn
            row.update(self._hidden_values)
            ring.new_row()
            writer.append(row, priority=0.0)
        rows[-1].update(self._hidden_values)
        if priority is None:  # cpprb: the largest priority so far (uniform: all the same)
            priority = self._max_priority + self._eps if self._prioritized else 1.0
        writer.append(rows[-1], priority=priority)
        ring.add_transition(ring.new_row())
        episode.previous = {name: np.array(transition[name]) for name in self._frames.names}
        if len(ring.dead_rows) >= SETTLE_DEAD_ROWS:
            self._settle_frames(wait=False)

    def _settle_frames(self, wait: bool, live_keys: bool = True) -> None:
        """Sends priority 0 for the rows of dead transitions and deletes the rows no live
        transition needs (replayd.cpprb.frame_ring), for those whose keys are known; with
        `wait`, first waits for the keys of every dead row (and, with `live_keys`, of every
        live transition), so that a sample sent afterwards draws live transitions only."""
        ring = self._frame_ring
        assert ring is not None
        if ring.idle():
            return
        if wait:
            self._life.send()
            if not ring.settled(live_keys):
                self._life.flush()
        ring.note_keys()
        zero, deleted = ring.take_requests()
        if zero.shape[0]:
            self._life.track_update(self._client.update_priorities_async(
                self._table, zero, np.zeros(zero.shape[0])))
        if deleted.shape[0]:
            request = requests.keyed_request("delete", self._table, deleted, None)
            assert request is not None
            self._life.track_update(self._client.connection().submit(*request)[1])

    def _ordered(self, keys: bool = False) -> Dict[str, np.ndarray[Any, Any]]:
        """Every stored transition, oldest first (reads the whole table); with `keys`, also
        each one's ``key`` (plain values only)."""
        if self._frame_ring is not None:
            self._settle_frames(wait=True)
        self._life.send()
        rows = read_ordered(self._client, self._table)
        if self._frame_ring is not None:
            steps = self._frames.transitions(rows)
            live = self._frame_ring.positions(steps["key"]) >= 0
            steps = {name: values[live] for name, values in steps.items()
                     if keys or name != "key"}
        else:
            hidden = ("episode", "position") if keys else ("key", "episode", "position")
            steps = {name: values for name, values in rows.items() if name not in hidden}
        return self._with_units(steps)

    def _with_units(self, data: Dict[str, np.ndarray[Any, Any]]
                    ) -> Dict[str, np.ndarray[Any, Any]]:
        """cpprb's (n, 1) shape back on the values stored as scalars, and the values stored
        as bytes back in their dtype."""
        for name in self._units:
            data[name] = data[name].reshape(-1, 1)
        for name, dtype in self._raw.items():
            if name in data:
                raw = np.ascontiguousarray(data[name])
                data[name] = raw.view(dtype).reshape(raw.shape[:-1])
        return data

    def _raw_bytes(self, name: str, array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """A value of a dtype the wire lacks as the uint8 array of its bytes."""
        values = np.ascontiguousarray(array, dtype=self._raw[name])
        return values.view(np.uint8).reshape(*values.shape, values.dtype.itemsize)

    def _note_stored_keys(self) -> None:
        """Notes the key of every stored transition (reads the whole table)."""
        self._ring_keys.note(read_ordered(self._client, self._table)["key"])

    def _ring(self) -> Tuple[np.ndarray[Any, Any], Dict[str, np.ndarray[Any, Any]]]:
        """Every stored transition and its ring position, in position order (the slot of
        its key; with frame values, the position replayd.cpprb.frame_ring gave it)."""
        if not self._frames:  # a step's ring position is its key's slot
            steps = self._ordered(keys=True)
            keys = steps.pop("key")
            positions = self._ring_keys.positions(keys).astype(np.int64)
            order = np.argsort(positions, kind="stable")
            return positions[order], {name: values[order] for name, values in steps.items()}
        steps = self._ordered(keys=True)
        positions = self._frame_ring.positions(steps.pop("key")) if self._frame_ring else \
            np.zeros(0, np.int64)
        order = np.argsort(positions, kind="stable")
        return positions[order], {name: values[order] for name, values in steps.items()}

    def _sample(self, batch_size: int, beta: float) -> Sample:
        """One sample of the table, cpprb's values. With prefetch, the sample requested by
        the previous call (of the same size and beta) when there is one, and the next one
        is requested at once: it is drawn before whatever this object adds or updates
        until the next call, which it therefore does not see."""
        if self._frame_ring is not None:  # dead transitions' rows at priority 0 first
            self._settle_frames(wait=True, live_keys=False)
        self._life.send()
        request = (int(batch_size), float(beta))
        # Stored steps are the transitions, drawn as items; frame values need the 1-step
        # sample's stacks.
        nstep = 1 if self._frames else None
        try:
            future = self._life.take_prefetched(request)
            if future is not None:
                sample: Sample = future.result()
            else:
                sample = self._client.sample(self._table, request[0], beta=beta, nstep=nstep,
                                             timeout=0)
            if self._prefetch:
                self._life.prefetch(request, self._client.sample_async(
                    self._table, request[0], beta=beta, nstep=nstep, timeout=0))
        except ReplayTimeout as exc:
            raise ValueError(f"cannot sample from table '{self._table}': it is empty "
                             f"({exc.message})") from exc
        for name in SAMPLE_EXTRAS:
            sample.data.pop(name, None)
        values = self._frames.from_stacks(sample.data) if self._frames else sample.data
        values = self._with_units(values)
        if values is not sample.data:  # stacks of frames back into cpprb's values
            sample.data.clear()
            sample.data.update(values)
        return sample

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
        out["indexes"] = self._positions_of(sample.keys)
        return out

    def _positions_of(self, keys: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The ring positions of sampled `keys` (uint64, as cpprb's indexes)."""
        ring = self._frame_ring
        if ring is None:
            self._ring_keys.note(keys)
            return self._ring_keys.positions(keys)
        ring.note_keys()
        positions = ring.positions(keys)
        if np.any(positions < 0):  # a transition whose key had not come back yet
            self._settle_frames(wait=True)
            positions = ring.positions(keys)
        return positions.astype(np.uint64)

    def update_priorities(self, indexes: Any, priorities: Any) -> None:
        """Sets priorities ``|p| + eps`` of the transitions at the ring positions `indexes`
        (any numeric dtype, as cpprb casts them; one priority for all of them or one each).
        A position this object has not seen written or sampled is looked up in the table
        (read whole, once); with the MP buffers, positions not sampled since they were last
        written are ignored, as in cpprb."""
        if priorities is None:
            raise TypeError("`priorities` must not be `None`")
        positions = np.ravel(np.asarray(indexes)).astype(np.int64)
        raw = np.ravel(np.asarray(priorities, dtype=np.float64))
        if raw.shape[0] == 1 and positions.shape[0] != 1:
            raw = np.full(positions.shape[0], raw[0])
        if raw.shape[0] != positions.shape[0]:
            raise ValueError(f"update_priorities: {positions.shape[0]} indexes but "
                             f"{raw.shape[0]} priorities")
        outside = (positions < 0) | (positions >= self._size)
        if outside.any():
            raise IndexError(f"update_priorities: indexes {positions[outside][:8].tolist()} "
                             f"are outside the buffer of size {self._size}")
        self._life.send()
        if self._frame_ring is not None:
            self._settle_frames(wait=True)
            keys = np.asarray(self._frame_ring.position_keys, np.uint64)[positions]
        else:
            self._ring_keys.absorb()
            keys = self._ring_keys.keys[positions]
        if self._frame_ring is None and not self._ring_keys.sampled_only and not keys.all():
            self._note_stored_keys()
            keys = self._ring_keys.keys[positions]
        known = keys != 0
        if not known.all():
            keys, raw = keys[known], raw[known]
        if raw.shape[0]:
            self._max_priority = max(self._max_priority, float(raw.max()))
            self._life.track_update(  # sent without waiting; every later request sees it
                self._client.update_priorities_async(self._table, keys,
                                                     np.abs(raw) + self._eps))

    def get_max_priority(self) -> float:
        """The largest priority given to add() or update_priorities() through this object
        since it was made or cleared, at least 1.0 (cpprb's starting value). Priorities given
        by other processes sharing the table are not seen."""
        return self._max_priority


class MPReplayBuffer(ReplayBuffer):
    """cpprb.MPReplayBuffer: a ReplayBuffer whose processes share one ring: each add is
    stored before it returns, get_next_index() and add()'s positions count every process's
    adds, update_priorities reaches positions sampled since they were last written.
    ``next_of`` and ``stack_compress`` store values as they are (cpprb's MP buffers ignore
    them)."""

    _shared_index = True

    def __init__(self, size: int, env_dict: Optional[Mapping[str, Any]] = None, *,
                 default_dtype: Any = None, ctx: Any = None, backend: str = "sharedctypes",
                 **kwargs: Any) -> None:
        check_mp_options(ctx, backend)
        super().__init__(size, env_dict, default_dtype=default_dtype, **kwargs)


class MPPrioritizedReplayBuffer(PrioritizedReplayBuffer):
    """cpprb.MPPrioritizedReplayBuffer: a PrioritizedReplayBuffer shared by processes as
    MPReplayBuffer is."""

    _shared_index = True

    def __init__(self, size: int, env_dict: Optional[Mapping[str, Any]] = None, *,
                 alpha: float = 0.6, eps: float = 1e-4, ctx: Any = None,
                 backend: str = "sharedctypes", **kwargs: Any) -> None:
        check_mp_options(ctx, backend)
        super().__init__(size, env_dict, alpha=alpha, eps=eps, **kwargs)


def create_buffer(size: int, env_dict: Optional[Mapping[str, Any]] = None, *,
                  prioritized: bool = False, **kwargs: Any) -> ReplayBuffer:
    """cpprb.create_buffer: a PrioritizedReplayBuffer when `prioritized`, else a
    ReplayBuffer; other keyword arguments go to the constructor."""
    if prioritized:
        return PrioritizedReplayBuffer(size, env_dict, **kwargs)
    return ReplayBuffer(size, env_dict, **kwargs)

