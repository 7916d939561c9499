"""InsertArena: the staging arena that `Client.insert` and `insert_async` copy their rows
into (docs/SHM.md, "Batched inserts"), one per Client, process and connection.

A call's rows are copied once, into a region of the arena laid out as the insert's
payload, and its request names the region (``"staged"``) instead of carrying the bytes;
the server copies them into the table when it admits the request. Regions are handed out
in ring order and a region is free again once its request is done (its reply, its error
or a lost connection): the oldest region still in use bounds the ring, so the rows of a
request are never rewritten before the server has read them.

What is staged: a part whose columns are exactly the table's fields in order, each of the
field's dtype and of shape ``[n, *field.shape]`` (what the socket would carry and the
server accept as is), into a table without frame fields. Anything else (a malformed batch
whose error the server must name, a part larger than half the largest arena) goes through
the socket, as does a part that finds no room for `ROOM_WAIT_S` (the arena held by
requests the rate limiter parks: waiting for them would hold up a call the server could
admit at once). Both paths give the same keys, rows and errors.

Plain samples of tables the client cannot map use the same ring (`send_sample`): the
server writes a reply's rows into a region, which is free again once they are copied out.

One arena serves every call of the connection; it is replaced by a larger one only when a
part needs more than half of it (up to `MAX_ARENA_BYTES`), so the server's per-connection
arena limits see one or two arenas, never one per call.

Threading: any thread; a lock guards the ring. Regions are freed by the thread that
reserves the next one (it checks the oldest requests' futures), so no callback runs in the
reader thread.
"""
from __future__ import annotations

import collections
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import numpy as np

from ..columns import InsertBatch, decode_keys
from ..schema import TableSchema
from ..wire import PayloadPool, encode_meta, padded
from . import sample_into
from .sample_into import region_decoder
from .staging import ARENA_REFUSED, StagingArena, batch_layout, map_staging

__all__ = ["InsertArena", "InsertPlan", "insert_plan", "arena_bytes_for", "open_insert_arena",
           "open_sample_arena",
           "ARENA_BYTES", "MAX_ARENA_BYTES", "ROOM_WAIT_S", "stageable"]

#: The first arena's size: two calls of 64 W2 transitions (3.6 MB each) at once, one
#: filled while the server copies the other; over 2,000 of 64 W1 ones (3.5 KB each).
ARENA_BYTES = 8 << 20
#: The largest arena a connection's inserts get (a part over half of it: the socket).
MAX_ARENA_BYTES = 128 << 20
#: How long a part waits for room in the arena before it goes through the socket.
ROOM_WAIT_S = 0.5
_ALIGN = 64
_MAX_PLANS = 256  # InsertPlans kept (a few tables, sizes and timeouts)


def stageable(schema: TableSchema, batch: InsertBatch) -> bool:
    """Whether `batch` is exactly what the table stores (see the module's docstring)."""
    fields = schema.fields
    n = batch.n
    if isinstance(batch.version, np.ndarray):
        return False  # per-row versions: the socket (one int for all rows is staged)
    if n < 1 or len(batch.arrays) != len(fields) or len(batch.columns) != len(fields):
        return False
    if schema.capacity is not None and n > schema.capacity:
        return False  # the server's error names the capacity
    for field, column, array in zip(fields, batch.columns, batch.arrays):
        if (field.is_frame or column["name"] != field.name or array.dtype != field.dtype
                or array.shape != (n, *field.shape)):
            return False
    prio = batch.priorities
    return prio is None or prio.shape == (n,)


def _padded_size(nbytes: int) -> int:
    return -(-nbytes // _ALIGN) * _ALIGN


class InsertPlan:
    """How a stageable part of `n` rows of a table lies in a region (its columns' offsets
    and its padded size) and its metadata, encoded but for the arena and offset. Made once
    per (table, schema, n, priorities, timeout, version): JSON and layout cost 20-40 us a request
    otherwise. Holds the schema, so that its id, part of the key, is not reused."""

    __slots__ = ("schema", "offsets", "nbytes", "head", "tail")

    def __init__(self, table: str, schema: TableSchema, part: InsertBatch,
                 timeout_ms: Optional[int]) -> None:
        with_priorities = part.priorities is not None
        offsets, nbytes = batch_layout(schema.fields, part.n, priorities=with_priorities)
        self.schema = schema
        self.offsets = offsets
        self.nbytes = _padded_size(nbytes)
        described = {"op": "insert", "table": table, "n": part.n,
                     "priorities": with_priorities, "timeout_ms": timeout_ms,
                     "columns": part.columns}
        if part.version is not None:
            described["version"] = part.version
        self.head = encode_meta(described)[:-1] + b',"staged":{"arena":'
        self.tail = b',"rows":%d}}' % part.n


_PLANS: Dict[Tuple[Any, ...], InsertPlan] = {}


def insert_plan(table: str, schema: TableSchema, part: InsertBatch,
                timeout_ms: Optional[int]) -> InsertPlan:
    """The (cached) InsertPlan of a stageable `part`. Thread-safe: racing threads make
    equal plans."""
    key = (table, id(schema), part.n, part.priorities is not None, timeout_ms, part.version)
    plan = _PLANS.get(key)
    if plan is None or plan.schema is not schema:
        plan = InsertPlan(table, schema, part, timeout_ms)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


class _Region:
    __slots__ = ("start", "end", "request")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end
        self.request: Optional["Future[Any]"] = None  # set once sent


class InsertArena:
    """A ring of regions in one staging arena of `conn` (see the module's docstring)."""

    def __init__(self, conn: Any, arena: StagingArena) -> None:
        self.conn = conn
        self.arena = arena
        # The whole arena as bytes: a column is copied in with one slice assignment of a
        # memoryview (a memcpy: 0.3 us against 10 us for numpy's assignment of a buffer).
        self._bytes = arena.memoryview()
        self._regions: Deque[_Region] = collections.deque()
        self._lock = threading.Lock()
        self.retired = False  # replaced or given up: no new region
        # Buffers of samples copied out of regions (send_sample); used by the thread that
        # reads the connection's replies, one at a time.
        self._payloads = PayloadPool()

    @property
    def nbytes(self) -> int:
        return self.arena.nbytes

    def send(self, plan: InsertPlan, part: InsertBatch, *, caller_waits: bool,
             room_wait: float = ROOM_WAIT_S) -> Optional[Tuple[int, "Future[Any]"]]:
        """Copies `part` (a `stageable` one, laid out by `plan`) into a free region and
        sends the staged insert; (request id, future of the keys), or None when it found
        no room within `room_wait` seconds (send it through the socket; 0: where nothing
        may wait for a reply, a completion). Raises what `Connection.submit` raises; the
        region is then free again."""
        region = self._reserve(plan.nbytes, room_wait)
        if region is None:
            return None

        def fill(at: _Region) -> bytes:
            target, start = self._bytes, at.start
            for offset, array in zip(plan.offsets, part.arrays):
                _copy_in(target, start + offset, array)
            if part.priorities is not None:
                _copy_in(target, start + plan.offsets[-1], part.priorities)
            return b"%s%d,\"offset\":%d%s" % (plan.head, self.arena.id, start, plan.tail)

        return self._submit_in(region, fill, decode_keys, caller_waits)

    def send_columns(self, meta: Dict[str, Any], columns: List[np.ndarray[Any, Any]],
                     rows: int, *, decode: Any = decode_keys, caller_waits: bool = False
                     ) -> Optional[Tuple[int, "Future[Any]"]]:
        """The general form of `send`: `columns` laid out as a payload of `rows` rows
        (each padded to 8 bytes, in order: the fields, then an append's episode ids, then
        the priorities) in a free region, and `meta` sent with its ``"staged"`` member.
        None when no region fits (see `fits_bytes`) or none came free within ROOM_WAIT_S
        (send the payload through the socket). For requests whose metadata differs each
        time (an append's ends): `send` caches what this encodes."""
        offsets, nbytes = _layout(columns)
        nbytes = _padded_size(nbytes)
        if not self.fits_bytes(nbytes):
            return None
        region = self._reserve(nbytes, ROOM_WAIT_S)
        if region is None:
            return None

        def fill(at: _Region) -> Dict[str, Any]:
            for offset, array in zip(offsets, columns):
                _copy_in(self._bytes, at.start + offset, array)
            return dict(meta, staged={"arena": self.arena.id, "offset": at.start, "rows": rows})

        return self._submit_in(region, fill, decode, caller_waits)

    def send_sample(self, meta: Dict[str, Any], nbytes: int, decode: Any,
                    allocate: Optional[Any] = None, *, caller_waits: bool = False
                    ) -> Optional[Tuple[int, "Future[Any]"]]:
        """Sends the plain sample `meta` naming a region of `nbytes` (its reply's columns)
        that the server writes the rows into (``"into"``, shm/sample_into.py); (request id,
        future of the decoded Sample), or None when no region is free at once (send it
        through the socket: a sample never waits for room). The region is free again once
        the reply is decoded (its rows copied out), failed or lost; a caller that stops
        waiting for it (a local timeout) must retire the arena."""
        nbytes = _padded_size(nbytes)
        if not self.fits_bytes(nbytes):
            return None
        region = self._reserve(nbytes, 0.0)
        if region is None:
            return None

        def fill(at: _Region) -> Dict[str, Any]:
            return dict(meta, into={"arena": self.arena.id, "offset": at.start,
                                    "bytes": at.end - at.start})

        decoder = region_decoder(self.arena.id, self._bytes, region.start, region.end,
                                 decode, allocate, self._payloads)
        return self._submit_in(region, fill, decoder, caller_waits)

    def fits_bytes(self, nbytes: int) -> bool:
        """Whether a region of `nbytes` is small enough for this arena's ring."""
        return 2 * _padded_size(nbytes) <= self.arena.nbytes

    def retire(self) -> None:
        """No more regions: the arena is being replaced, or a request was forgotten (a
        local timeout: its region can never be known free). The caller unmaps it; a
        request still reading it keeps the server's mapping until it ends."""
        self.retired = True

    # -- internals ---------------------------------------------------------------------

    def _reserve(self, nbytes: int, room_wait: float) -> Optional[_Region]:
        deadline = time.monotonic() + room_wait
        while True:
            with self._lock:
                if self.retired:
                    return None
                self._free_done()
                region = self._place(nbytes)
                if region is not None:
                    self._regions.append(region)
                    return region
                oldest = self._regions[0].request
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if oldest is None:  # another thread is still copying into it
                time.sleep(min(remaining, 0.0005))
            else:
                self.conn.wait_done(oldest, min(remaining, 0.05))

    def _free_done(self) -> None:
        regions = self._regions
        while regions and regions[0].request is not None and regions[0].request.done():
            regions.popleft()

    def _place(self, nbytes: int) -> Optional[_Region]:
        """A region of `nbytes` after the newest one, wrapping to 0, before the oldest."""
        size = self.arena.nbytes
        if not self._regions:
            return _Region(0, nbytes) if nbytes <= size else None
        first, last = self._regions[0].start, self._regions[-1].end
        if last > first:  # not wrapped: room after the newest, else at the start
            if last + nbytes <= size:
                return _Region(last, last + nbytes)
            return _Region(0, nbytes) if nbytes <= first else None
        return _Region(last, last + nbytes) if last + nbytes <= first else None

    def _submit_in(self, region: _Region, fill: Callable[[_Region], Any], decode: Any,
                   caller_waits: bool) -> Tuple[int, "Future[Any]"]:
        """Fills `region` (`fill(region)` copies what the request names into it and returns
        its metadata) and sends the request; the region is then done when its request is. If
        either raises, the region is free again at once."""
        try:
            request_id, future = self.conn.submit(fill(region), (), decode,
                                                  caller_waits=caller_waits)
        except BaseException:
            self._abandon(region)
            raise
        region.request = future
        return request_id, future

    def _abandon(self, region: _Region) -> None:
        """A region whose request was not sent: done at once."""
        failed: "Future[Any]" = Future()
        failed.set_result(None)
        region.request = failed


def open_insert_arena(conn: Any, nbytes: int, timeout: Optional[float]
                      ) -> Optional[InsertArena]:
    """An InsertArena on `conn` whose ring takes regions of `nbytes`; None when the
    connection has no plane, the regions are too large, or the server refuses the
    arena (its requests then keep the socket)."""
    size = arena_bytes_for(nbytes)
    if size is None or not getattr(conn, "shm_offered", False):
        return None
    try:
        return InsertArena(conn, map_staging(conn, size, timeout))
    except ARENA_REFUSED:
        return None


def open_sample_arena(client: Any, conn: Any, table: str, batch_size: int, regions: int,
                      timeout: Optional[float]) -> Optional[Tuple[InsertArena, int]]:
    """An arena on `conn` for `regions` plain samples of `batch_size` items of `table` at
    once, whose rows the server writes into it (``"into"``, shm/sample_into.py), and the
    bytes of one; None where its samples keep the socket: no plane, a table with frame
    fields, a reply under INTO_MIN_BYTES, regions too large, or the arena refused. For a
    Sampler's own connection (the client's insert arena serves `Client.sample_async`)."""
    if not getattr(conn, "shm_offered", False) or not client.shm_enabled():
        return None
    nbytes = sample_into.into_bytes(client.schema(table), batch_size)
    if nbytes is None:
        return None
    size = ARENA_BYTES
    while size < max(2, regions) * _padded_size(nbytes) and size < MAX_ARENA_BYTES:
        size *= 2
    if 2 * _padded_size(nbytes) > size:
        return None
    try:
        return InsertArena(conn, map_staging(conn, size, timeout)), nbytes
    except ARENA_REFUSED:
        return None


def _layout(columns: List[np.ndarray[Any, Any]]) -> Tuple[List[int], int]:
    """Offsets of `columns` in a payload (each padded to 8 bytes) and its bytes."""
    offsets: List[int] = []
    offset = 0
    for array in columns:
        offsets.append(offset)
        offset += padded(array.nbytes)
    return offsets, offset


def arena_bytes_for(nbytes: int, current: int = 0) -> Optional[int]:
    """The size of an arena whose ring takes regions of `nbytes` (ARENA_BYTES, doubled
    as needed, at least `current`), or None when even MAX_ARENA_BYTES is too small."""
    size = max(ARENA_BYTES, current)
    while 2 * _padded_size(nbytes) > size and size < MAX_ARENA_BYTES:
        size *= 2
    return size if 2 * _padded_size(nbytes) <= size else None


def _copy_in(target: memoryview, offset: int, array: np.ndarray[Any, Any]) -> None:
    """Copies `array`'s bytes into `target` (the arena's bytes) from `offset`."""
    nbytes = array.nbytes
    if array.flags.c_contiguous:
        target[offset:offset + nbytes] = memoryview(array).cast("B")  # type: ignore[arg-type]
    else:
        np.copyto(np.frombuffer(target, array.dtype, array.size, offset).reshape(array.shape),
                  array)


def regions_in_use(arena: InsertArena) -> List[Tuple[int, int]]:
    """(start, end) of the regions not yet free (for tests)."""
    with arena._lock:
        arena._free_done()
        return [(r.start, r.end) for r in arena._regions]
