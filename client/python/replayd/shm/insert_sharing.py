"""SharedInserts: consecutive `Client.insert_async` calls of one connection share requests
(docs/SHM.md, "Batched inserts").

An insert request costs the client about 100 us of Python and system calls whatever its
size (the send, the reply's read and decode, the futures), against a microsecond to copy
64 rows of 45 bytes. So while shared requests of the connection are in flight, the next
calls are not sent: each is copied into the current *group* (one buffer per field, filled
row after row) and returns a Future of its own keys. The group goes as one request when:

- no shared request is in flight (a call then goes at once), or one is and the group holds
  `SECOND_REQUEST_CALLS` calls (it goes as the second);
- a shared request in flight is done and the rule above holds (no request left in flight
  always sends it: the flush runs in the thread that completed the request, the reader
  thread, without waiting);
- it is full (`SHARE_ROWS` rows, `SHARE_BYTES` bytes, the server's limits, the table's
  capacity), or a call of another table, timeout, version or priorities arrives;
- any other request is about to be sent on the connection (`Connection.before_submit`),
  so every request after a call is applied after it, as when each call was its own;
- `result()` or `exception()` of a call in it is asked for, or the Client closes.

Each call's Future resolves to its slice of the shared request's keys (the server applies
a request's rows in order, and a connection's inserts in the order sent). A shared request
that fails fails every call in it with its error (same class, code and message). A group
goes on its own connection only: held when it was lost, its calls fail with
ConnectionLost.

What keeps each call's semantics: only calls that could not fail on their own while
another succeeds share a request: exactly the table's columns (dtypes and shapes: nothing
for the server to refuse), priorities absent or finite and >= 0, one version for all rows,
and only into a table whose rate limiter never holds inserts back (no ``max_diff``: the
``min_size`` limiter). A call that a limiter may hold back is sent alone as before, so
its wait is its own. A table whose limiter is reconfigured to hold inserts back while this
client shares into it is seen at the client's next schema refresh.

Threading: any thread. `_state` guards the group and the count in flight (held briefly,
never while sending); `_order` is held while a group is taken and sent, so groups go in
the order they were made. A completion never waits for `_order` (it leaves the group to
the thread that holds it, which checks again after releasing it).
"""
from __future__ import annotations

import functools
import threading
from concurrent.futures import Future
from concurrent.futures._base import FINISHED as _FINISHED
from concurrent.futures._base import RUNNING as _RUNNING
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..columns import InsertBatch, _dtype_name
from ..schema import TableSchema

__all__ = ["SharedInserts", "ShareRule", "CallFuture", "SHARE_CALL_BYTES", "SHARE_BYTES",
           "SHARE_ROWS", "SHARED_IN_FLIGHT", "SECOND_REQUEST_CALLS", "FRAME_SLACK",
           "shareable_priorities"]

#: A call with more bytes than this is sent alone (its bytes, not the request, dominate).
SHARE_CALL_BYTES = 64 << 10
#: The most bytes of rows and rows one shared request carries.
SHARE_BYTES = 256 << 10
SHARE_ROWS = 4096
#: Shared requests in flight at most: two, one filled while the server applies the other.
#: A call finding none in flight goes at once (alone: nothing to wait for); while one is in
#: flight, a group goes as the second once it holds SECOND_REQUEST_CALLS calls, and fewer
#: go when the first is done. Calls of a caller that keeps 8 in flight then share requests
#: four by four, the client's core never idle (one in flight: groups of 8 and of 1
#: alternated, the core idle while each was applied; docs/BENCHMARKS.md).
SHARED_IN_FLIGHT = 2
#: Calls a group holds before it goes as the second request in flight.
SECOND_REQUEST_CALLS = 4
#: Room kept for an insert frame's header and metadata under the server's max_frame_bytes.
FRAME_SLACK = 64 << 10

#: send(conn, table, schema, part, seconds, from_callback) -> the Future of the part's
#: keys, sent on `conn` (the group's connection, never another: calls held when it was
#: lost fail with it); `from_callback`: called where nothing may wait for a reply (no
#: arena mapping, no room wait).
SendPart = Callable[[Any, str, TableSchema, InsertBatch, Optional[float], bool],
                    "Future[Any]"]


def shareable_priorities(priorities: Any, n: int) -> Optional[np.ndarray[Any, Any]]:
    """`priorities` as n float64 when every one is finite and >= 0 (none the server could
    refuse), else None (the call goes alone and gets its own error, if any)."""
    try:
        prio = np.ascontiguousarray(np.asarray(priorities, dtype="<f8").reshape(-1))
    except (TypeError, ValueError):
        return None
    if prio.shape != (n,) or not bool(np.isfinite(prio).all()) or bool((prio < 0).any()):
        return None
    return prio


class ShareRule:
    """Whether and how calls into one table (as of `schema`) may share requests: the
    fields' row sizes and the most rows a shared request may carry (`cap`; 0: never)."""

    __slots__ = ("schema", "names", "shapes", "dtypes", "row_bytes", "total_bytes", "cap",
                 "columns_dtype", "specs", "spares", "_columns")

    def __init__(self, schema: TableSchema, cap_rows: int) -> None:
        fields = schema.fields
        self.schema = schema
        self.names = [f.name for f in fields]
        self.shapes = [tuple(f.shape) for f in fields]
        # The canonical dtype objects (numpy's own for native byte order, the ones arrays
        # carry), so that exact_arrays' `is` test settles most checks without `!=`.
        self.dtypes = [np.dtype(f.dtype.str) for f in fields]
        self.columns_dtype = [_dtype_name(np.dtype(f.dtype)) for f in fields]
        self.row_bytes = [np.dtype(f.dtype).itemsize * int(np.prod(f.shape, dtype=np.int64))
                          for f in fields]
        self.total_bytes = sum(self.row_bytes)
        self.cap = max(0, min(cap_rows, SHARE_ROWS, SHARE_BYTES // max(1, self.total_bytes)))
        self.specs = list(zip(self.names, self.shapes, self.dtypes))
        # Buffers of groups already sent (their rows copied into the arena or handed to
        # the kernel), for the next groups: list.pop and append are atomic.
        self.spares: List[Tuple[List[np.ndarray[Any, Any]], np.ndarray[Any, Any]]] = []
        self._columns: Dict[int, List[Dict[str, Any]]] = {}

    def columns(self, n: int) -> List[Dict[str, Any]]:
        """The insert metadata's columns of `n` rows (cached; never modified by a send)."""
        columns = self._columns.get(n)
        if columns is None:
            if len(self._columns) >= 64:
                self._columns.clear()
            columns = self._columns[n] = [
                {"name": name, "dtype": dtype, "shape": [n, *shape]}
                for name, dtype, shape in zip(self.names, self.columns_dtype, self.shapes)]
        return columns

    def buffers(self) -> Tuple[List[np.ndarray[Any, Any]], np.ndarray[Any, Any]]:
        """A group's buffers: a spare one, or new ones (one per field, and priorities)."""
        try:
            return self.spares.pop()
        except IndexError:
            arrays = [np.empty((self.cap, *shape), dtype)
                      for shape, dtype in zip(self.shapes, self.dtypes)]
            return arrays, np.empty(self.cap, "<f8")

    def exact_arrays(self, data: Any) -> Optional[Tuple[List[np.ndarray[Any, Any]], int]]:
        """`data`'s columns in field order and their rows, when `data` is exactly the
        table's columns (numpy arrays of each field's dtype and shape, with a batch axis)
        and small enough to share; None otherwise (the ordinary path takes it:
        conversions, single items, the server's error for a wrong one)."""
        if type(data) is not dict or len(data) != len(self.names):
            return None
        get = data.get
        arrays: List[np.ndarray[Any, Any]] = []
        n = -1
        for name, shape, dtype in self.specs:
            array = get(name)
            if type(array) is not np.ndarray:
                return None
            array_dtype = array.dtype
            if array_dtype is not dtype and array_dtype != dtype:
                return None
            array_shape = array.shape
            if array_shape[1:] != shape or not array_shape:
                return None
            if array_shape[0] != n:
                if n != -1:
                    return None
                n = array_shape[0]
            arrays.append(array)
        if n < 1 or n > self.cap or n * self.total_bytes > SHARE_CALL_BYTES:
            return None
        return arrays, n


class CallFuture(Future):  # type: ignore[type-arg]
    """The Future of one call's keys. Asking for its result (or exception) sends its group
    if it is still waiting for the requests in flight."""

    def __init__(self, sharing: "SharedInserts", group: "_Group") -> None:
        # Future.__init__'s attributes, with the group's Condition instead of one of its
        # own: the group's calls are settled together, under one hold of it, and notified
        # once (`_Group.settle`), so a waiter never wakes to find its call unsettled.
        # RUNNING, like a sent request: cannot be cancelled (set_running_or_notify_cancel's
        # effect; nothing waits on a Future not yet returned, so no notice is needed).
        self._condition = group.condition
        self._state = _RUNNING
        self._result = None
        self._exception = None
        self._waiters: List[Any] = []
        self._done_callbacks: List[Any] = []
        self._sharing = sharing
        self._group: Optional[_Group] = group

    def result(self, timeout: Optional[float] = None) -> Any:
        # Settled with keys: the state is set last and never changes again, so it is read
        # without the Future's lock (the usual case of a caller keeping calls in flight).
        if self._state == _FINISHED and self._exception is None:  # type: ignore[comparison-overlap]
            return self._result
        self._send_group()
        return super().result(timeout)

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        self._send_group()
        return super().exception(timeout)

    def _send_group(self) -> None:
        group = self._group
        if group is not None and not group.sent:
            self._sharing.flush()


class _Group:
    """The rows of the calls waiting to share one request, copied into one buffer per
    field (laid out for `cap` rows; the request takes the first `rows`)."""

    __slots__ = ("key", "table", "rule", "seconds", "version", "arrays", "prio",
                 "priorities", "rows", "calls", "sent", "condition")

    def __init__(self, key: Tuple[Any, ...], table: str, rule: ShareRule,
                 seconds: Optional[float], version: Optional[int], priorities: bool) -> None:
        self.key = key
        self.table = table
        self.rule = rule
        self.seconds = seconds
        self.version = version
        self.arrays, self.prio = rule.buffers()
        self.priorities = priorities
        self.rows = 0
        self.calls: List[Tuple[CallFuture, int, int]] = []
        self.sent = False
        self.condition = threading.Condition()  # the calls' Futures' (CallFuture)

    def append(self, future: CallFuture, columns: List[np.ndarray[Any, Any]], n: int,
               priorities: Optional[np.ndarray[Any, Any]]) -> None:
        start = self.rows
        stop = start + n
        for array, column in zip(self.arrays, columns):
            array[start:stop] = column
        if priorities is not None:
            self.prio[start:start + n] = priorities
        self.rows = stop
        self.calls.append((future, start, stop))

    def part(self) -> InsertBatch:
        """The group's rows as one InsertBatch (views of its buffers)."""
        n = self.rows
        return InsertBatch(n, self.rule.columns(n), [a[:n] for a in self.arrays],
                           self.prio[:n] if self.priorities else None, self.version)

    def give_back_buffers(self) -> None:
        """Once its request is sent (its rows copied or handed to the kernel): the
        buffers serve a later group."""
        spares = self.rule.spares
        if len(spares) < 2:
            spares.append((self.arrays, self.prio))

    def settle(self, keys: Any, release: Callable[[int], None]) -> None:
        """Each call's keys, its slice of the shared request's; then `release(calls)`."""
        self._finish([keys[start:stop] for _, start, stop in self.calls], None, release)

    def fail(self, error: BaseException, release: Callable[[int], None]) -> None:
        self._finish(None, error, release)

    def _finish(self, results: Optional[List[Any]], error: Optional[BaseException],
                release: Callable[[int], None]) -> None:
        """Future.set_result / set_exception for every call at once: all settled under
        one hold of the group's Condition, then one notify (a waiter woken finds its call
        settled), then each call's callbacks."""
        # Any: Future's private fields, typed by CallFuture.__init__'s first values
        futures: List[Any] = [future for future, _, _ in self.calls]
        with self.condition:
            for index, future in enumerate(futures):
                if results is not None:
                    future._result = results[index]
                else:
                    future._exception = error
                future._state = _FINISHED
                future._group = None  # no cycle left for the collector
                for waiter in future._waiters:  # concurrent.futures.wait / as_completed
                    if results is not None:
                        waiter.add_result(future)
                    else:
                        waiter.add_exception(future)
            self.condition.notify_all()
        for future in futures:
            if future._done_callbacks:  # usually none: a caller keeping calls in flight
                future._invoke_callbacks()
        release(len(futures))


class SharedInserts:
    """The shared insert requests of one connection (see the module's docstring)."""

    def __init__(self, conn: Any, send: SendPart, release: Callable[[int], None],
                 refused: Callable[[str, BaseException], None]) -> None:
        """`send`: how a group's request goes; `release(k)`: k calls' Futures are done
        (the Client's window of insert_async calls); `refused(table, error)`: a shared
        request failed (before its calls are settled; in the thread that completed it)."""
        self.conn = conn
        self._send = send
        self._release = release
        self._refused = refused
        self._state = threading.Lock()
        self._order = threading.Lock()
        self._group: Optional[_Group] = None
        self._in_flight = 0  # shared requests sent (or being sent) and not done
        self._sender: Optional[int] = None  # the thread sending a group
        conn.before_submit = self._before_submit

    def add(self, table: str, rule: ShareRule, columns: List[np.ndarray[Any, Any]], n: int,
            priorities: Optional[np.ndarray[Any, Any]], version: Optional[int],
            seconds: Optional[float], timeout_ms: Optional[int]) -> CallFuture:
        """Copies one call's rows (`columns` of `rule.exact_arrays`) into the group and
        returns the Future of its keys; sends the group when nothing is in flight or it
        is full. Raises nothing of the request's: a failed send fails the calls'
        Futures."""
        key = (table, id(rule.schema), priorities is not None, timeout_ms, version)
        while True:
            with self._state:
                group = self._group
                if group is None or (group.key == key and group.rows + n <= group.rule.cap):
                    if group is None:
                        group = self._group = _Group(key, table, rule, seconds, version,
                                                     priorities is not None)
                    future = CallFuture(self, group)
                    group.append(future, columns, n, priorities)
                    send_now = (self._should_send(group)
                                or group.rows + n > group.rule.cap)
                    break
            self.flush()  # another kind of call, or no room: the group goes first
        if send_now:
            self.flush()
        return future

    def flush(self, from_callback: bool = False) -> None:
        """Sends the waiting group, if any. `from_callback`: in a request's completion,
        where nothing may wait (left to the thread sending, when one is)."""
        me = threading.get_ident()
        if self._sender == me:
            return  # our own send's submit (before_submit): the group is already taken
        if from_callback:
            if not self._order.acquire(blocking=False):
                return  # the holder checks again once it releases
        else:
            self._order.acquire()
        try:
            self._sender = me
            with self._state:
                group, self._group = self._group, None
                if group is None:
                    return
                group.sent = True
                self._in_flight += 1
            try:
                request = self._send(self.conn, group.table, group.rule.schema,
                                     group.part(), group.seconds, from_callback)
            except BaseException as exc:
                with self._state:
                    self._in_flight -= 1
                group.fail(exc, self._release)
                if not isinstance(exc, Exception):
                    raise
            else:
                request.add_done_callback(functools.partial(self._done, group))
            group.give_back_buffers()
        finally:
            self._sender = None
            self._order.release()
        with self._state:
            again = self._group is not None and self._should_send(self._group)
        if again:
            self.flush(from_callback)

    def _should_send(self, group: _Group) -> bool:
        """Whether `group` goes now (called with _state held; see SHARED_IN_FLIGHT). A
        group held back always has a request in flight whose end sends it."""
        in_flight = self._in_flight
        return in_flight == 0 or (in_flight < SHARED_IN_FLIGHT
                                  and len(group.calls) >= SECOND_REQUEST_CALLS)

    def pending(self) -> int:
        """Calls waiting in the group (for tests and benchmarks)."""
        with self._state:
            return 0 if self._group is None else len(self._group.calls)

    # -- internals ---------------------------------------------------------------------

    def _done(self, group: _Group, request: "Future[Any]") -> None:
        # The next group goes before this one's calls are settled: a caller woken by its
        # Future would otherwise wait for this thread (the interpreter's lock) meanwhile.
        with self._state:
            self._in_flight -= 1
            idle = self._group is not None and self._should_send(self._group)
        try:
            if idle:
                self.flush(from_callback=True)
        finally:  # whatever the send raised, this group's calls are done
            error = request.exception()  # done: neither waits
            if error is None:
                group.settle(request.result(), self._release)
            else:
                try:  # first: a caller woken by its call's error finds the schema dropped
                    self._refused(group.table, error)
                finally:
                    group.fail(error, self._release)

    def _before_submit(self) -> None:
        if self._group is not None:
            self.flush()
