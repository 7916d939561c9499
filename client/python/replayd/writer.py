"""Writer: buffers single items and inserts them a batch at a time, without waiting for
replies.

Items are copied into preallocated column arrays of `batch` rows (by default about 64 KiB
of items: `default_batch`); a full batch is sent at once (handed to the kernel, so the
arrays are reused immediately), and so is a partial one by the append that finds its first
item `max_delay` old (no timer: a writer that stops appending keeps its partial batch until
`flush` or `close`); its reply is collected later. Up to `max_in_flight` batches await their replies; beyond that `append`
waits for the oldest, which is how a server-side rate limiter slows an explorer down.

Errors: each item is validated when appended (InvalidArgument naming the field). An error
from a batch already sent (e.g. NotFound after the table was dropped, ConnectionLost) is
raised by the next `append`, `flush` or `close`; that batch's items are lost.

Threading: one thread appends (a Writer is not shared between threads). A Writer belongs to
the process that created it and does not pickle; pickle the Client instead.

Shared memory (docs/SHM.md): when the client has the plane and the table no frame fields,
the batches are laid out in a staging arena (``max_in_flight + 1`` slots of one batch) and
each request names its slot instead of carrying the rows; the server copies them into the
table. A slot is filled again only after its request's reply, so the server never reads
rows that change under it. If that connection is lost, the batch goes through the socket
and the next ones stage on a new arena.
"""
from __future__ import annotations

import collections
import time
from concurrent import futures
from concurrent.futures import Future
from typing import Any, Deque, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import requests, wait_notice
from .batch_limits import writer_batch
from .client_interface import ClientLike
from .columns import InsertBatch, convert_item, decode_keys
from .errors import InvalidArgument, ReplayError
from .policy_versions import MAX_VERSION, check_version
from .row_writer import RowWriter, compile_row_writer
from .schema import Field
from .shm.staging import BatchSlots
from .wire import encode_meta

__all__ = ["Writer", "default_batch"]

_monotonic = time.monotonic

#: `max_delay`'s default, seconds (Writer and Client.writer).
DEFAULT_MAX_DELAY = 0.05

#: `max_in_flight`'s default: batches awaiting replies (Writer and Client.writer).
DEFAULT_MAX_IN_FLIGHT = 8

#: A batch's default size (`batch=None`): about this many bytes of items...
AUTO_BATCH_BYTES = 64 << 10
#: ...and between these many rows. 64 rows of W2 (56 KB) transitions; 1024 of W1 (45 B),
#: where a request's fixed cost in the client (send, reply, GIL hand-over: 100-200 us)
#: would otherwise be as much as the items' own.
AUTO_BATCH_ROWS = (64, 1024)


def default_batch(fields: Sequence[Field], capacity: Optional[int] = None) -> int:
    """The rows of a batch of `fields` when the writer is not told (see Writer); never more
    than the table's `capacity` (an insert larger than the table is refused)."""
    item_bytes = sum(f.item_bytes for f in fields) + 8  # and its priority
    low, high = AUTO_BATCH_ROWS
    rows = max(low, min(high, -(-AUTO_BATCH_BYTES // item_bytes)))
    return rows if capacity is None else max(1, min(rows, capacity))


class Writer:
    """Batching inserter for one table; use as a context manager (flushes on exit).

    Args:
        client: the Client whose connection carries the inserts.
        table: the table (its schema is fetched once).
        batch: items per insert request; None: as many as fill about 64 KiB, at least 64
            and at most 1024 (`default_batch`: 1024 for a 45-byte transition, 64 for items
            of 1 KiB or more), and never more than the table's capacity or the server's
            ``max_batch_items``. A `batch` above ``max_batch_items`` raises InvalidArgument
            here (the server would refuse every request).
        max_in_flight: batches sent but not yet acknowledged before `append` waits.
        max_delay: seconds an item may wait in a partial batch: an `append` that finds the
            batch's first item older than this sends the batch (a slow explorer's items
            are sampleable within about this long, however large the batch). None: only
            full batches are sent, and `flush` and `close`.
        timeout: server-side wait of each insert for the rate limiter (None: forever).
        keep_keys: collect the keys of confirmed items (see `keys`).
    """

    # A subclass whose batches are append_steps requests sets this and implements
    # _submit_staged: its staging slots then hold an episode-id column.
    _STAGES_APPENDS = False

    def __init__(self, client: ClientLike, table: str, batch: Optional[int] = None, *,
                 max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, timeout: Optional[float] = None,
                 keep_keys: bool = False,
                 max_delay: Optional[float] = DEFAULT_MAX_DELAY) -> None:
        if max_in_flight < 1:
            raise InvalidArgument(f"max_in_flight must be >= 1, got {max_in_flight}")
        if max_delay is not None and not max_delay >= 0:
            raise InvalidArgument(f"max_delay must be >= 0 or None, got {max_delay}")
        # Any, not ClientLike: a subclass may use the client it was given as that type
        # (replayd.cpprb's StepWriter passes its Client on); this class calls only the
        # ClientLike methods (send_insert, table_info through wait_notice).
        self._client: Any = client
        self._table = table
        self._schema = client.schema(table)
        # Checked against the server's max_batch_items now: a batch above it would fail
        # only at its first send, after the caller has appended a batch's worth of items.
        self._batch = writer_batch(client, table, batch,
                                   default_batch(self._schema.fields, self._schema.capacity))
        self._max_delay = max_delay
        self._first_at = 0.0  # when the batch being filled got its first item
        self._max_in_flight = int(max_in_flight)
        self._timeout = timeout
        self._staging: Optional[BatchSlots] = None
        # Encoded metadata of full staged batches of the current arena, by (slot,
        # priorities or not); cleared when the arena is replaced.
        self._staged_metas: Dict[Tuple[int, bool, Optional[int]], bytes] = {}
        # Staged batches are inserts, or appends for a subclass that says so
        # (_STAGES_APPENDS, with _submit_staged); another subclass that sends its batches
        # otherwise keeps the socket.
        stageable = type(self)._submit is Writer._submit or self._STAGES_APPENDS
        if stageable and not any(f.is_frame for f in self._schema.fields):
            self._staging = BatchSlots.open(client, self._schema.fields, self._batch,
                                            self._max_in_flight + 1, self._STAGES_APPENDS)
        if self._staging is not None:
            self._columns, self._priorities = self._staging.slot(0)
        else:
            self._columns = [np.empty((self._batch, *f.shape), dtype=f.dtype)
                             for f in self._schema.fields]
            self._priorities = np.empty(self._batch, dtype="<f8")
        self._write_row = self._row_writer_of(self._columns)
        self._full_columns = [{"name": f.name, "dtype": f.dtype.name,
                               "shape": [self._batch, *f.shape]}
                              for f in self._schema.fields]
        self._with_priorities: Optional[bool] = None  # of the batch being filled
        # The policy version of the batch being filled (one per batch: a new version
        # sends the batch first), and the published value whose version stamps items
        # appended without one (docs/VERSIONS.md).
        self._version: Optional[int] = None
        self._follows = self._schema.follows
        # Whether appends without version= need _switch_version (the table follows a
        # value, or the batch being filled has a version): one test on the hot path.
        self._versioned = self._follows is not None
        self._count = 0
        self._in_flight: Deque[Tuple[Future[Any], int]] = collections.deque()
        self._error: Optional[BaseException] = None
        self._failed = False  # a batch in flight failed (set by the connection's reader)
        self._closed = False
        self._noticed = False  # logged why append waits (see replayd.wait_notice)
        self.items_written = 0  # items whose insert the server confirmed
        self._keep_keys = keep_keys
        self._keys: List[np.ndarray[Any, Any]] = []

    def _row_writer_of(self, columns: List[np.ndarray[Any, Any]]) -> RowWriter:
        """The fast path of append for a batch in `columns` (see replayd.row_writer)."""
        return compile_row_writer(self._schema.fields, columns)

    @property
    def batch(self) -> int:
        """Items per insert request (the `batch` given, or `default_batch`'s)."""
        return self._batch

    @property
    def staged(self) -> bool:
        """Whether batches go through shared memory (a staging arena) rather than the
        socket (see the module's docstring)."""
        return self._staging is not None

    @property
    def keys(self) -> np.ndarray[Any, Any]:
        """uint64 keys of the confirmed items, in append order (needs keep_keys=True)."""
        if not self._keep_keys:
            raise ReplayError("create the writer with keep_keys=True to collect keys",
                              "invalid_argument")
        return np.concatenate(self._keys) if self._keys else np.zeros(0, np.uint64)

    @property
    def pending(self) -> int:
        """Items appended but not yet confirmed by the server."""
        return self._count + sum(n for _, n in self._in_flight)

    def append(self, item: Optional[Mapping[str, Any]] = None, *,
               priority: Optional[float] = None, version: Optional[int] = None,
               **fields: Any) -> None:
        """Adds one item, given as a dict or as keyword arguments (no batch dimension).

        `priority` None lets the server assign the largest priority seen. A batch holds
        either only items with priorities or only items without; switching sends the
        partial batch first. `version`: the policy version the item was acted with; None
        for the version of the value the table follows that the client last fetched or
        published (none: 0). A batch holds items of one version: a new one sends the
        partial batch first (docs/VERSIONS.md).

        Cost: about 1-2 us for an item of ndarrays already of the field's dtype and shape,
        of Python bool/int/float scalars and of numpy scalars of the field's dtype (written
        straight into the batch); other values go through `convert_item` (a few us per
        field).
        """
        # The same steps as try_append, written out: a shared helper call measured 4% on
        # this, the hottest call of the client.
        if self._closed or self._failed:
            self._check_open()
        values = item if item is not None else fields
        with_priority = priority is not None
        if self._count and self._with_priorities is not with_priority:
            self._send()
        if version is not None or self._versioned:
            self._switch_version(version)
        row = self._count
        if not self._write_row(values, row):
            for column, value in zip(self._columns,
                                     convert_item(self._schema, values)):
                column[row] = value
        self._commit(row, priority)

    def try_append(self, item: Mapping[str, Any], priority: Optional[float] = None,
                   version: Optional[int] = None) -> bool:
        """Appends `item` (a dict of exactly the table's fields) if it needs no conversion:
        each value an ndarray of its field's dtype and shape, or for a scalar field a bool
        or an int/float in the dtype's range. Otherwise appends nothing and returns False
        (then `append` converts, or raises naming the field)."""
        if self._closed or self._failed:
            self._check_open()
        if self._count and self._with_priorities is not (priority is not None):
            self._send()
        if version is not None or self._versioned:
            self._switch_version(version)
        row = self._count
        if not self._write_row(item, row):
            return False
        self._commit(row, priority)
        return True

    def _commit(self, row: int, priority: Optional[float]) -> None:
        """Counts the `row` just written; sends the batch when it is full, or when its
        first item is older than max_delay."""
        with_priority = priority is not None
        self._with_priorities = with_priority
        if with_priority:
            self._priorities[row] = priority
        self._count = row + 1
        if self._count == self._batch:
            self._send()
        elif row == 0:
            self._first_at = _monotonic()
        elif self._max_delay is not None and _monotonic() - self._first_at > self._max_delay:
            self._send()

    def _switch_version(self, version: Optional[int]) -> None:
        """Makes the batch being filled one of `version` (None: the followed value's
        version as the client knows it now), sending the partial batch of another one."""
        if version is None:
            if self._follows is not None:
                version = self._client.policy_version(self._follows)
        elif type(version) is not int or not 0 <= version <= MAX_VERSION:
            version = check_version(self._table, version)  # InvalidArgument when bad
        if version != self._version:
            if self._count:
                self._send()
            self._version = version
            self._versioned = version is not None or self._follows is not None

    def _extend(self, arrays: List[np.ndarray[Any, Any]],
                priorities: Optional[np.ndarray[Any, Any]],
                version: Optional[int] = None) -> None:
        """Adds k rows at once: `arrays` holds one array of k rows per field, of the
        field's dtype and shape (checked by the caller: replayd.vector_writers), and
        `priorities` k float64 or None. As k appends would, but one slice copy per field
        per batch they fall in; full batches go out as they fill."""
        if self._closed or self._failed:
            self._check_open()
        with_priority = priorities is not None
        if self._count and self._with_priorities is not with_priority:
            self._send()
        if version is not None or self._versioned:
            self._switch_version(version)
        k = int(arrays[0].shape[0]) if arrays else 0
        done = 0
        while done < k:
            row = self._count
            take = min(k - done, self._batch - row)
            for column, array in zip(self._columns, arrays):
                column[row:row + take] = array[done:done + take]
            if priorities is not None:
                self._priorities[row:row + take] = priorities[done:done + take]
            self._with_priorities = with_priority
            self._count = row + take
            done += take
            if self._count == self._batch:
                self._send()
            elif row == 0:
                self._first_at = _monotonic()
            elif self._max_delay is not None and _monotonic() - self._first_at > self._max_delay:
                self._send()

    def flush(self) -> None:
        """Sends the partial batch and waits until every batch is confirmed; raises the
        first error of a batch sent earlier."""
        self._check_open()
        self._send()
        while self._in_flight:
            self._reap_oldest()
        self._raise_error()

    def close(self) -> None:
        """Flushes, then refuses further items. Idempotent."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            if self._staging is not None:
                self._staging.close(self._client)

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
            return
        try:  # keep the original exception; still try to deliver what was appended
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (f"<replayd.Writer table={self._table!r} batch={self._batch} "
                f"buffered={self._count} in_flight={len(self._in_flight)} "
                f"written={self.items_written} {state}>")

    def __reduce__(self) -> Any:
        raise TypeError("a replayd Writer cannot be pickled; pickle the Client and create "
                        "a writer in the process that uses it")

    # -- internals ---------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ReplayError(f"writer for table '{self._table}' is closed", "closed")
        self._raise_error()

    def _raise_error(self) -> None:
        self._reap_done()
        if self._error is not None:
            error, self._error = self._error, None
            self._failed = any(f.done() and f.exception() is not None
                               for f, _ in self._in_flight)
            raise error

    def _send(self) -> None:
        n = self._count
        if n == 0:
            return
        while len(self._in_flight) >= self._max_in_flight:
            self._reap_oldest()
        self._reap_done()
        if n == self._batch:
            arrays, columns = self._columns, self._full_columns
        else:
            arrays = [column[:n] for column in self._columns]
            columns = [{"name": f.name, "dtype": f.dtype.name, "shape": [n, *f.shape]}
                       for f in self._schema.fields]
        priorities = self._priorities[:n] if self._with_priorities else None
        self._count = 0
        batch = InsertBatch(n, columns, arrays, priorities, self._version)
        staging = self._staging
        if staging is not None and staging.conn.alive:
            future = self._submit_staged(batch, staging)
        else:
            future = self._submit(batch)  # through the socket
        future.add_done_callback(self._note_failure)
        self._in_flight.append((future, n))
        if staging is not None:
            self._next_slot(staging)

    def _submit_staged(self, batch: InsertBatch, staging: "BatchSlots") -> Future[Any]:
        """Sends one batch whose rows lie in the current staging slot, without waiting.
        The metadata of a full batch differs only by its slot: it is encoded once per slot
        (priorities or not, and version), which saves 15-30 us of JSON per batch."""
        full = batch.n == self._batch
        key = (staging.current, batch.priorities is not None, batch.version)
        meta = self._staged_metas.get(key) if full else None
        if meta is None:
            described = requests.insert_meta(self._table, batch, self._timeout)
            described["staged"] = staging.meta()
            meta = encode_meta(described)
            if full:
                self._staged_metas[key] = meta
        future: Future[Any] = staging.conn.submit(meta, (), decode_keys)[1]
        return future

    def _next_slot(self, staging: "BatchSlots") -> None:
        """Moves on to the next staging slot (whose request has had its reply: at most
        max_in_flight are in flight and there is one slot more), or, when the arena's
        connection was lost, to a new arena on the client's new connection (or to the
        socket, when the plane is gone)."""
        if not staging.conn.alive:
            staging.close(self._client)
            self._staged_metas.clear()
            self._staging = BatchSlots.open(self._client, self._schema.fields, self._batch,
                                            self._max_in_flight + 1, self._STAGES_APPENDS)
            if self._staging is None:
                self._columns = [np.empty((self._batch, *f.shape), dtype=f.dtype)
                                 for f in self._schema.fields]
                self._priorities = np.empty(self._batch, dtype="<f8")
                self._write_row = self._row_writer_of(self._columns)
                return
            staging = self._staging
        self._columns, self._priorities = staging.advance()
        self._write_row = staging.memo(self._row_writer_of)

    def _submit(self, batch: InsertBatch) -> Future[Any]:
        """Sends one batch without waiting; the future holds its keys."""
        client: ClientLike = self._client
        return client.send_insert(self._table, batch, timeout=self._timeout)

    def _note_failure(self, future: Future[Any]) -> None:
        # Runs in the connection's reader thread: only raises a flag for the next call.
        if future.exception() is not None:
            self._failed = True

    def _reap_done(self) -> None:
        while self._in_flight and self._in_flight[0][0].done():
            self._reap_oldest()

    def _reap_oldest(self) -> None:
        future, n = self._in_flight.popleft()
        if not future.done() and not self._noticed and wait_notice.notices(self._timeout):
            try:
                future.exception(wait_notice.WAIT_NOTICE_S)
            except futures.TimeoutError:  # say why, once until a batch goes through quickly
                self._noticed = True
                wait_notice.log_wait(self._client, "insert", self._table, n,
                                     wait_notice.WAIT_NOTICE_S)
        elif future.done():
            self._noticed = False
        exc = future.exception()
        if exc is None:
            self.items_written += n
            if self._keep_keys:
                self._keys.append(future.result())
        elif self._error is None:  # a server timeout says why the rate limiter held it
            self._error = wait_notice.with_reason(self._client, "insert", self._table, n, exc) \
                if isinstance(exc, ReplayError) else exc

