"""How a replayd.cpprb buffer maps onto a table: cpprb's env_dict as table fields, the
table's name, and what happens to the table and to pending adds when the buffer goes away.
Used by replayd.cpprb only."""
from __future__ import annotations

import collections
import os
import uuid
from concurrent.futures import Future
from multiprocessing import ProcessError
from multiprocessing import managers
from typing import Any, Deque, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..client import Client
from ..schema import WIRE_DTYPES, wire_dtype
from .steps import Episode, StepWriter

DEFAULT_ADDRESS = "unix:///tmp/replayd.sock"
WRITER_BATCH_ITEMS = 64  # single-transition adds sent per insert request
UPDATES_IN_FLIGHT = 8  # priority updates sent and not yet acknowledged
# This process's id, kept by a fork hook: os.getpid is a system call, and every add asks.
PID = [os.getpid()]
os.register_at_fork(after_in_child=lambda: PID.__setitem__(0, os.getpid()))


def resolve_address(address: Optional[str]) -> str:
    return address or os.environ.get("REPLAYD_ADDRESS") or DEFAULT_ADDRESS


def new_table_name() -> str:
    return f"cpprb-{uuid.uuid4().hex[:16]}"


class Lifetime:
    """What a buffer does when it is garbage-collected, held apart from the buffer so that
    weakref.finalize does not keep it alive: deliver the transitions its writer still holds
    and, in the process that created the table and unless it persists, drop the table.
    A forked child inherits the object but neither the writer nor the table."""

    def __init__(self, client: Client, table: str, drop: bool, batch: int,
                 ring: Any = None) -> None:
        self.client = client
        self.ring = ring  # where the writer notes the keys of stored steps, if anywhere
        self.batch = batch
        self.table = table
        self.drop = drop
        self.creator_pid = os.getpid()
        self._start_process()

    def _start_process(self) -> None:
        """This process's state, fresh: its writer (made on first use), its episode, the
        priority updates and the sample it sent without waiting."""
        self.pid = PID[0]
        self.writer: Optional[StepWriter] = None
        self.episode_ = Episode(self.client, self.table)
        self.updates: Deque["Future[Any]"] = collections.deque()
        self.prefetched: Optional[Tuple[Any, "Future[Any]"]] = None  # (request, sample)

    def _here(self) -> None:
        """A forked child inherits the object but none of the parent's process state."""
        if self.pid != PID[0]:
            self._start_process()

    def prefetch(self, request: Any, future: "Future[Any]") -> None:
        """Keeps the sample requested ahead for `request` (batch size, beta)."""
        self._here()
        self.prefetched = (request, future)

    def take_prefetched(self, request: Any) -> Optional["Future[Any]"]:
        """The sample requested ahead for `request` in this process, else None; either
        way none is kept afterwards (a sample of another request is dropped unread)."""
        self._here()
        kept, self.prefetched = self.prefetched, None
        return kept[1] if kept is not None and kept[0] == request else None

    def track_update(self, future: "Future[Any]") -> None:
        """Keeps a priority update sent without waiting. Requests sent after it on this
        process's connection see it (the server executes them in order); its error, if
        any, is raised by a later track_update or flush. At most UPDATES_IN_FLIGHT wait."""
        self._here()
        # Earlier updates only: this one's error, if any, always waits for a later call.
        while self.updates and (len(self.updates) >= UPDATES_IN_FLIGHT or self.updates[0].done()):
            self.updates.popleft().result()
        self.updates.append(future)

    def writer_here(self) -> StepWriter:
        """This process's writer (created on first use, a new one after a fork)."""
        self._here()
        if self.writer is None:
            self.writer = StepWriter(self.client, self.table, self.batch, self.episode_,
                                     self.ring)
        return self.writer

    def episode(self) -> Episode:
        """This process's episode of the buffer."""
        self.writer_here()
        return self.episode_

    def end_episode(self) -> None:
        """Sends what the writer holds, then ends this process's episode."""
        self.send()
        if self.writer is not None:  # send() forgot a parent's
            self.episode_.end()

    def send(self) -> None:
        """Sends the transitions the writer holds without waiting for the reply. Requests
        sent after it on this process's connection (sample, info, insert, reset) see them:
        the server executes a connection's requests in order, and the tables of
        replayd.cpprb have no rate limiter that could hold an insert back."""
        self._here()
        if self.writer is not None:
            self.writer._send()  # the partial batch; Writer.flush would also wait for replies

    def flush(self) -> None:
        """Waits until every transition given to add() is stored and every priority update
        applied (a no-op if none is pending, so it costs nothing on the sample-only paths)."""
        self._here()
        if self.writer is not None and self.writer.pending:
            self.writer.flush()
        while self.updates:
            self.updates.popleft().result()

    def end(self) -> None:
        drop = self.drop and self.creator_pid == os.getpid()
        try:
            if not drop:
                self.flush()
        except Exception:  # the server is gone or the table was dropped
            pass
        if drop:
            try:
                self.client.drop_table(self.table, timeout=5.0)
            except Exception:
                pass


def env_fields(env_dict: Optional[Mapping[str, Any]], default_dtype: Any,
                next_of: Any) -> List[Tuple[str, np.dtype[Any], Tuple[int, ...]]]:
    """cpprb's env_dict as (name, dtype, shape) fields, with next_<name> for next_of."""
    env_dict = env_dict or {}  # cpprb takes a buffer of no values
    fallback = np.float32 if default_dtype is None else default_dtype
    fields = []
    for name, spec in env_dict.items():
        spec = spec or {}
        shape = spec.get("shape", 1)
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else \
            tuple(int(d) for d in shape)
        try:
            dtype = wire_dtype(spec.get("dtype", fallback))
        except TypeError as exc:  # a numeric dtype the wire lacks is stored as its bytes
            numeric = _numeric_dtype(spec.get("dtype", fallback))
            if numeric is None:
                raise TypeError(f"env_dict['{name}']: {exc}") from None
            dtype = numeric
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


def _numeric_dtype(value: Any) -> Optional["np.dtype[Any]"]:
    """`value` as a numeric numpy dtype (bool, int, float, complex), else None."""
    try:
        dtype = np.dtype(value)
    except TypeError:
        return None
    return dtype if dtype.kind in "biufc" else None


def raw_dtypes(fields: List[Tuple[str, "np.dtype[Any]", Tuple[int, ...]]]
               ) -> Dict[str, "np.dtype[Any]"]:
    """The values whose dtype the wire lacks (longdouble, complex): stored as uint8 arrays of
    their bytes, shape ``(*shape, itemsize)``."""
    return {name: dtype for name, dtype, _ in fields if dtype.name not in WIRE_DTYPES}


def stored_shape(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """The table's shape of a cpprb value: its (1,)-shaped values are stored as scalars."""
    return () if shape == (1,) else shape


def reward_field_of(fields: List[Tuple[str, "np.dtype[Any]", Tuple[int, ...]]]
                    ) -> Optional[str]:
    """A stored float scalar field that may serve as the episodic table's reward field (a
    1-step sample returns its value as the return: 0 + 1 * r), ``rew`` or ``reward`` first;
    None when there is none."""
    scalars = [name for name, dtype, shape in fields
               if shape == () and dtype in (np.dtype(np.float32), np.dtype(np.float64))]
    for name in ("rew", "reward"):
        if name in scalars:
            return name
    return scalars[0] if scalars else None


MP_BACKENDS = ("sharedctypes", "SharedMemory")


def check_mp_options(ctx: Any, backend: Any) -> None:
    """Raises what cpprb's MP buffers raise for their `ctx` and `backend`: ValueError for
    an unknown backend, multiprocessing.ProcessError for a SyncManager that was shut down
    (an unstarted one is fine: cpprb would start it, replayd does not need it)."""
    if backend not in MP_BACKENDS:
        raise ValueError(f"Unknown backend: {backend} (cpprb's backends are "
                         f"{', '.join(MP_BACKENDS)}; replayd uses neither)")
    shutdown = getattr(managers, "State").SHUTDOWN  # not in typeshed's stubs
    if isinstance(ctx, managers.SyncManager) and getattr(ctx, "_state").value == shutdown:
        raise ProcessError(f"ctx: the SyncManager {ctx!r} was shut down, so cpprb could not "
                           "create the buffer's shared state with it")
