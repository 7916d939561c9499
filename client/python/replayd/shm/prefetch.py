"""PlanePrefetch: a Sampler's plain samples over the shared-memory plane (see
replayd.shm), without a background thread.

`in_flight` ``"rows": "auto"`` requests of `group` batches each are kept in flight on the
sampler's private connection; the Sampler asks for one request of 2 x prefetch batches
(at most 4 x prefetch batches drawn ahead of the caller: the batches left of the reply in
hand and the request in flight; a socket Sampler draws up to 2 x prefetch ahead), or, with
`allocate`, two of one batch (each batch is received into a buffer of its own).
`next` hands out the batches of the oldest reply one by one, gathering each batch's rows
from the table's mapping when it is taken (so its rows are as fresh as they can be; only
the choice of keys was made ahead) and drawing again the rare rows that changed under the
copy; when they run out it waits for the next reply and sends another request at once, so
the server draws ahead while the caller uses these batches. A reply whose rows the server
copied (a table it cannot leave to the mapping) is handed out as it came.

Small rows are gathered a reply at a time: when a reply's rows come to at most
GATHER_REPLY_BYTES, they are copied on its arrival, one numpy call per field for all its
batches, and the batches are views of that copy. A numpy call's fixed cost is most of a
small batch's gather (W1, batch 256: 5 fields of 11 KiB); the rows of the reply's last
batch are then copied up to `group` batches before it is taken, as a socket Sampler's
server copies them up to 2 x prefetch batches ahead (the same depth by default).

Why few, large requests: a reply costs the caller's thread about 100-140 us of Python
(receive, parse, decode, split, and the next request's send) whatever its size, against
20-30 us per small batch gathered; one reply of 8 batches instead of two of 4 took W1
(batch 256) from 1.5-1.7x to 2.0-2.6x the socket path's rate (bench/python/compare.py).
The request in flight still has the caller's time for the whole reply in hand to come
back.

Why no thread: a learner that takes batches as fast as it can spent most of a batch's time
handing it from a sampler thread to itself (a lock and a wake-up per batch, and the GIL in
between); here the only wake-ups are the request's and the reply's, one per `group`
batches.

Threading: one consumer thread (as a Sampler). Blocking: `next` waits for a reply when no
batch is left, at most `timeout`.
"""
from __future__ import annotations

import collections
import time
from typing import Any, Callable, Deque, Mapping, Optional, Tuple

from .. import wait_notice
from ..errors import TimeoutError
from ..sample import Sample
from ..wire import Allocator, encode_meta
from .sampling import (KeysReply, PlaneTable, RedrawBound, allocated_buffer, auto_decoder,
                       decode_keys_reply, keys_request, split_draws, split_sample)

__all__ = ["PlanePrefetch", "GATHER_REPLY_BYTES"]

#: A reply whose rows come to at most this is gathered at once on arrival (see above):
#: the copy then fits the core's own cache, and so does the learner's next step.
GATHER_REPLY_BYTES = 256 * 1024


class PlanePrefetch:
    """Batches of `batch_size` from `table` over the plane; see the module's docstring.

    Args:
        client: the Client (maps the table: `_plane_of`; the wait notice's INFO).
        conn: a private connection without a reader thread (this object reads it).
        copy_decoder: decodes a reply whose rows the server copied.
        group: batches per request (>= 1; 1 with `allocate`, so that each batch has the
            buffer of its own reply).
        in_flight: requests kept in flight (>= 1).
        allocate: where each reply is received (and its rows gathered), as Client.sample's.
        nbytes: a whole sample's payload bytes (for `allocate`).
    """

    def __init__(self, client: Any, conn: Any, table: str, batch_size: int, beta: float,
                 timeout: Optional[float], group: int, in_flight: int,
                 copy_decoder: Callable[..., Sample], allocate: Optional[Allocator],
                 nbytes: int, bound: Optional[Mapping[str, Any]] = None) -> None:
        self._client = client
        self._conn = conn
        self._table = table
        self._batch_size = batch_size
        self._beta = beta
        self._timeout = timeout
        self._max_in_flight = max(1, in_flight)
        self._bound = bound  # policy versions asked for (docs/VERSIONS.md), or None
        self._meta = encode_meta(keys_request(table, batch_size, beta, timeout, group,
                                              rows="auto", bound=bound))
        self._decode = auto_decoder(copy_decoder)
        self._allocate = allocate
        self._nbytes = nbytes
        self._received: Deque[Any] = collections.deque()  # buffers allocate gave, in order
        self._in_flight: Deque[Tuple[int, Any]] = collections.deque()
        # Batches of the last reply: (draws or copied sample, slots, region or None, buffer).
        self._batches: Deque[Tuple[Sample, Any, Optional[int], Any]] = collections.deque()
        self._noticed = False  # logged why the consumer waits, since the last quick batch

    @property
    def ready(self) -> int:
        """Batches received and not handed out yet."""
        return len(self._batches)

    def next(self, timeout: Optional[float]) -> Sample:
        """The next batch, waiting at most `timeout` seconds (None: forever) for a reply
        when none is left. Raises replayd.TimeoutError after that (the request stays in
        flight), and the request's error (NotFound, the server's TimeoutError...)."""
        started = time.monotonic()
        if not self._batches:
            self._receive(timeout)
        draws, slots, region, buffer = self._batches.popleft()
        if region is None:
            return draws
        if buffer is not None:
            buffer = allocated_buffer(lambda _: buffer, self._nbytes)
        return self._gather(draws, slots, region, buffer, timeout, started)

    def _gather(self, draws: Sample, slots: Any, region: int, buffer: Any,
                timeout: Optional[float], started: float) -> Sample:
        """The Sample of `draws` with its rows gathered from the mapping (into `buffer`
        when given), the rows that changed under the copy drawn again within `timeout`
        seconds of `started` (the caller's; else the requests' own; else within
        MAX_REDRAW_ROUNDS rounds). Raises NotFound when the table was dropped or replaced
        since the draws."""
        if timeout is None:
            timeout, started = self._timeout, time.monotonic()
        bound = RedrawBound(self._table, timeout, started)
        plane: PlaneTable = self._client._plane_of(self._table, region)
        sample: Sample
        sample, bad = plane.complete(draws, buffer, slots)
        while bad.size:
            left = bound.next_round(len(bad))
            request_id, future = self._conn.submit(
                keys_request(self._table, len(bad), self._beta, left, bound=self._bound), (),
                decode_keys_reply)
            more: KeysReply = self._conn.wait(request_id, future, None)
            plane.check_region(more.region)  # the rows gathered are of this mapping's table
            bad = plane.repair(sample, bad, more.draws)
        return sample

    def _submit(self) -> None:
        """Keeps `in_flight` requests in flight."""
        allocate = None if self._allocate is None else self._receive_into
        while len(self._in_flight) < self._max_in_flight:
            self._in_flight.append(self._conn.submit(self._meta, (), self._decode,
                                                     allocate=allocate))

    def _receive_into(self, size: int) -> Any:
        assert self._allocate is not None
        buffer = self._allocate(max(size, self._nbytes))
        self._received.append(buffer)
        return buffer

    def _receive(self, timeout: Optional[float]) -> None:
        """Waits for the oldest reply in flight (sending requests first if none are),
        sends the next request, and queues the reply's batches."""
        self._submit()
        request_id, future = self._in_flight[0]
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        # Only a wait without any timeout logs why (a bounded one fails saying why).
        noticing = wait_notice.notices(timeout) and wait_notice.notices(self._timeout)
        while True:
            wait_s = wait_notice.WAIT_NOTICE_S if noticing and not self._noticed else 3600.0
            if deadline is not None:
                wait_s = min(wait_s, max(0.0, deadline - time.monotonic()))
            if self._conn.wait_done(future, wait_s):
                break
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"no sample of table '{self._table}' ready within "
                                   f"{timeout:g} s")
            if noticing and not self._noticed:  # say why, once until a batch comes quickly
                self._noticed = True
                wait_notice.log_wait(self._client, "sample", self._table, self._batch_size,
                                     time.monotonic() - started)
        if time.monotonic() - started < wait_notice.WAIT_NOTICE_S:
            self._noticed = False
        self._in_flight.popleft()
        buffer = self._received.popleft() if self._received else None
        try:
            reply = self._conn.wait(request_id, future, 0.0)  # done: its result or its error
        except TimeoutError as exc:  # the server's: say why the rate limiter held it
            raise wait_notice.with_reason(self._client, "sample", self._table,
                                          self._batch_size, exc) from None
        self._submit()  # the server draws ahead while these batches are used
        if isinstance(reply, Sample):
            for part in split_sample(reply, max(1, len(reply) // self._batch_size)):
                self._batches.append((part, None, None, None))
            return
        plane: PlaneTable = self._client._plane_of(self._table, reply.region)
        if buffer is None and reply.batches > 1 and \
                len(reply.draws) * plane.row_bytes <= GATHER_REPLY_BYTES:
            whole = self._gather(reply.draws, reply.slots, reply.region, None, timeout,
                                 started)
            for part in split_sample(whole, reply.batches):
                self._batches.append((part, None, None, None))
            return
        for draws, slots in split_draws(reply):
            self._batches.append((draws, slots, reply.region, buffer))
