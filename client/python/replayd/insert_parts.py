"""An insert larger than one request may be: cut into requests that fit, sent pipelined.

The server refuses an insert of more than ``max_batch_items`` items, and closes the
connection on a frame larger than ``max_frame_bytes`` (docs/PROTOCOL.md, Limits). The
client learns both from the server's ``hello`` (`Connection.limits`). `split_insert` cuts
an InsertBatch into consecutive row ranges that respect both; `insert_parts` sends them on
one connection, at most `PARTS_IN_FLIGHT` awaiting their reply, and concatenates their keys
in item order (the server applies one connection's inserts in the order sent).

Pure but for the callables `insert_parts` is given; thread-safe.
"""
from __future__ import annotations

import math
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Deque, List, Mapping, Optional, Tuple

import numpy as np

from .columns import InsertBatch
from .errors import ReplayError, ResourceExhausted
from .wire import HEADER_BYTES, encode_meta

__all__ = ["PARTS_IN_FLIGHT", "split_insert", "insert_parts", "gathered_keys"]

#: Requests of one large insert awaiting their reply at once. Bounds the keys the server
#: queues for a client that is still sending (64 Ki items: 512 KiB of keys a request).
PARTS_IN_FLIGHT = 4


def _splittable(batch: InsertBatch) -> bool:
    """Whether every column (and the priorities) holds exactly batch.n rows. A batch that
    does not is sent whole: the server names the field that is wrong."""
    arrays = list(batch.arrays) + ([] if batch.priorities is None else [batch.priorities])
    if isinstance(batch.version, np.ndarray):
        arrays.append(batch.version)
    return all(a.ndim >= 1 and a.shape[0] == batch.n for a in arrays)


def rows_per_request(batch: InsertBatch, table: str, meta: Mapping[str, Any],
                     limits: Mapping[str, int]) -> int:
    """The most rows of `batch` one insert request (metadata `meta`) may carry under the
    server's `limits`: batch.n when no limit applies. Raises ResourceExhausted naming the
    sizes when one row alone is larger than a frame may be."""
    rows = batch.n
    max_items = limits.get("max_batch_items")
    if max_items:
        rows = min(rows, int(max_items))
    max_frame = limits.get("max_frame_bytes")
    if max_frame:
        row_bytes = sum(a.itemsize * math.prod(a.shape[1:]) for a in batch.arrays)
        if batch.priorities is not None:
            row_bytes += 8
        if isinstance(batch.version, np.ndarray):
            row_bytes += 8
        if rows * row_bytes + _meta_bound(meta) <= int(max_frame):
            return max(1, rows)  # fits whatever the metadata's exact length (no JSON)
        # Header, metadata (its numbers never longer than the whole batch's) and at most
        # 7 bytes of padding after each column.
        fixed = HEADER_BYTES + len(encode_meta(dict(meta))) + 8 * (len(batch.arrays) + 2)
        fit = (int(max_frame) - fixed) // max(1, row_bytes)
        if fit < 1:
            raise ResourceExhausted(f"table '{table}': one item of {row_bytes} bytes does not "
                                    f"fit in a request: the server's max_frame_bytes is "
                                    f"{max_frame}")
        rows = min(rows, fit)
    return max(1, rows)


def _meta_bound(meta: Mapping[str, Any]) -> int:
    """An upper bound of an insert frame's bytes besides its rows: header, metadata (a
    character escapes to at most 6 bytes of JSON, a number to at most 24) and padding."""
    columns = meta.get("columns") or ()
    text = len(str(meta.get("table", ""))) + sum(len(str(c.get("name", ""))) for c in columns)
    numbers = sum(len(c.get("shape") or ()) for c in columns)
    return (HEADER_BYTES + 256 + 6 * text + 24 * numbers + 64 * len(columns)
            + 8 * (len(columns) + 1))


def split_insert(batch: InsertBatch, table: str, meta: Mapping[str, Any],
                 limits: Mapping[str, int]) -> List[InsertBatch]:
    """`batch` as consecutive parts, each within `limits` (`rows_per_request`); [batch]
    itself when it fits, or when its columns disagree on the number of rows."""
    if not _splittable(batch):
        return [batch]
    rows = rows_per_request(batch, table, meta, limits)
    if rows >= batch.n:
        return [batch]
    parts = []
    for start in range(0, batch.n, rows):
        stop = min(start + rows, batch.n)
        columns = [dict(column, shape=[stop - start, *column["shape"][1:]])
                   for column in batch.columns]
        parts.append(InsertBatch(stop - start, columns,
                                 [a[start:stop] for a in batch.arrays],
                                 None if batch.priorities is None
                                 else batch.priorities[start:stop],
                                 batch.version[start:stop]
                                 if isinstance(batch.version, np.ndarray) else batch.version))
    return parts


def insert_parts(parts: List[InsertBatch], table: str,
                 send: Callable[[InsertBatch], Tuple[int, "Future[Any]"]],
                 wait: Callable[[int, "Future[Any]", InsertBatch], np.ndarray[Any, Any]]
                 ) -> np.ndarray[Any, Any]:
    """Sends `parts` in order (`send` returns a request id and the future of its keys),
    keeping at most PARTS_IN_FLIGHT awaiting their reply (`wait` returns the keys or
    raises), and returns every part's keys concatenated in order.

    When a part fails, no later part is sent; the error is raised (same class and code)
    once the parts in flight are done, its message saying how many items were stored: the
    parts before it (and any in flight after it that succeeded)."""
    total = sum(part.n for part in parts)
    keys: List[np.ndarray[Any, Any]] = []
    in_flight: Deque[Tuple[int, "Future[Any]", InsertBatch]] = deque()
    failure: Optional[Tuple[ReplayError, int]] = None  # the first error, its first item
    stored = 0
    sent = 0
    for part in parts:
        if len(in_flight) == PARTS_IN_FLIGHT:
            failure, stored = _reap(in_flight, wait, keys, failure, stored, sent)
        if failure is not None:
            break
        in_flight.append((*send(part), part))
        sent += part.n
    while in_flight:
        failure, stored = _reap(in_flight, wait, keys, failure, stored, sent)
    if failure is not None:
        error, first = failure
        raise type(error)(f"{error.message} (an insert of {total} items into table '{table}' "
                          f"went in requests of at most {parts[0].n} items, as the server's "
                          f"limits allow: the request from item {first} failed; {stored} of "
                          f"the {total} items were stored)", error.code)
    return keys[0] if len(keys) == 1 else np.concatenate(keys)


def gathered_keys(futures: List["Future[Any]"]) -> "Future[Any]":
    """One Future of the keys of `futures` (the parts of one insert, in order),
    concatenated; it fails with the first part's error (in part order) once all are done."""
    if len(futures) == 1:
        return futures[0]
    outcome: "Future[Any]" = Future()
    outcome.set_running_or_notify_cancel()
    left = [len(futures)]
    lock = threading.Lock()

    def settle(_: "Future[Any]") -> None:
        with lock:
            left[0] -= 1
            if left[0]:
                return
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            outcome.set_exception(errors[0])
        else:
            outcome.set_result(np.concatenate([f.result() for f in futures]))

    for future in futures:
        future.add_done_callback(settle)
    return outcome


def _reap(in_flight: Deque[Tuple[int, "Future[Any]", InsertBatch]],
          wait: Callable[[int, "Future[Any]", InsertBatch], np.ndarray[Any, Any]],
          keys: List[np.ndarray[Any, Any]], failure: Optional[Tuple[ReplayError, int]],
          stored: int, sent: int) -> Tuple[Optional[Tuple[ReplayError, int]], int]:
    """Waits for the oldest part in flight; returns the first failure and the items stored."""
    request_id, future, part = in_flight.popleft()
    first = sent - part.n - sum(p.n for _, _, p in in_flight)
    try:
        part_keys = wait(request_id, future, part)
    except ReplayError as exc:
        return (failure or (exc, first)), stored
    if failure is None:
        keys.append(part_keys)
    return failure, stored + part.n
