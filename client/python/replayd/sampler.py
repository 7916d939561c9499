"""Sampler: a prefetching iterator over samples of one table: plain samples, n-step
samples (``nstep``) or sequences (``sequence``) of an episodic table.

A background thread keeps `prefetch` sample requests in flight on a private connection and
fills a ready queue (at most `prefetch` entries) in request order, applying `transform`
there, so the consumer usually finds a batch waiting instead of paying a round trip. The
connection has no reader thread of its own: the background thread reads its replies.

Threading: one thread consumes (iteration is not meant to be shared). `close` may be called
from any thread. A Sampler belongs to the process that created it: do not use it across
fork, and it does not pickle (pickle the Client instead).

Shared memory (docs/SHM.md): for plain samples of a table the client maps (`plane_table`),
the requests (``"rows": "auto"``) are of up to ``prefetch // 2`` batches each (one batch with
`allocate`), two in flight; the server leaves the rows to the table's mapping and the
background thread gathers each batch's rows (into `allocate`'s buffer when given), drawing
again the rare rows that changed under the copy. Other samples keep `prefetch` requests of
one batch in flight.

Shutdown: `close` closes the private connection, so the server drops the requests still
waiting for its rate limiter; requests it already executed count as sampled. Iteration ends
(StopIteration) after close. An error (e.g. NotFound when the table is dropped, a
transform's exception) is raised by `next` in its place in the sequence, and ends the
iteration.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Deque, Optional

from . import requests, wait_notice
from .client_interface import ClientLike
from .columns import decode_sample, sample_decoder
from .episode_replies import decode_sequences
from .errors import InvalidArgument, NotFound, TimeoutError
from .shm import PlaneTable, keys_request
from .shm.sampling import (KeysReply, allocated_buffer, auto_decoder, decode_keys_reply,
                           split_draws, split_sample)
from .wire import Allocator, encode_meta
from .sample import Sample

__all__ = ["Sampler"]


class _Failure:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class Sampler:
    """Iterator of `Sample` (or of ``transform(sample)``); use as a context manager.

    Args:
        client: where to sample from (a private connection is opened to its address).
        table: the table.
        batch_size: items per sample.
        prefetch: sample requests kept in flight, and size of the ready queue (>= 1).
        beta: importance-sampling exponent sent with each request.
        timeout: server-side wait per request for the rate limiter (None: forever); a
            request that times out ends the iteration with replayd.TimeoutError.
        transform: runs in the background thread on each Sample; its result is yielded.
        allocate: where each reply is received (see Client.sample); called in the
            background thread, up to `prefetch` requests ahead of the one being consumed.
        nstep, gamma: n-step samples of an episodic table (see Client.sample).
        sequence: sequences of an episodic table (see Client.sample_sequences); batch_size
            is then the number of sequences.
    """

    def __init__(self, client: ClientLike, table: str, batch_size: int, *, prefetch: int = 4,
                 beta: float = 0.4, timeout: Optional[float] = None,
                 transform: Optional[Callable[[Sample], Any]] = None,
                 allocate: Optional[Allocator] = None, nstep: Optional[int] = None,
                 gamma: float = 1.0,
                 sequence: Optional[requests.SequenceShape] = None) -> None:
        if prefetch < 1:
            raise InvalidArgument(f"prefetch must be >= 1, got {prefetch}")
        self._decode: Callable[..., Any] = decode_sample
        if nstep is not None and sequence is not None:
            raise InvalidArgument(f"table '{table}': a sampler draws n-step samples or "
                                  "sequences, not both")
        if sequence is not None:
            self._decode = decode_sequences
            meta = requests.sequence_meta(table, batch_size, *sequence, beta, timeout)
        elif nstep is not None:
            meta = requests.nstep_meta(table, batch_size, nstep, gamma, beta, timeout)
            self._decode = sample_decoder(client.schema(table))  # discount: the reward's dtype
        else:
            meta = requests.sample_meta(table, batch_size, beta, timeout)
        # Plain samples of a table the client maps: several batches per request, rows left
        # to the mapping when the server can (else as without the plane).
        self._over_plane = False
        if nstep is None and sequence is None:
            try:
                self._over_plane = client.plane_table(table) is not None
            except NotFound:
                pass  # the first request reports it, in its turn
        if self._over_plane:
            self._group = 1 if allocate is not None else max(1, prefetch // 2)
            meta = keys_request(table, batch_size, beta, timeout, self._group, rows="auto")
            self._keys_meta = (table, beta, timeout)
            self._nbytes = client.sample_nbytes(table, batch_size) if allocate else 0
            self._decode = auto_decoder(self._decode)
        self._meta = encode_meta(meta)
        self._client = client
        self._table = table
        self._batch_size = int(batch_size)
        self._noticed = False  # logged why the consumer waits, since the last quick batch
        self._prefetch = int(prefetch)
        self._transform = transform
        self._allocate = allocate
        self._ready: Deque[Any] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self._finished = False  # the thread ended; nothing more will be queued
        # Only the background thread uses the connection, so it reads the replies itself.
        self._conn = client.open_connection(reader_thread=False)
        self._thread = threading.Thread(
            target=self._run_plane if self._over_plane else self._run,
            name=f"replayd-sampler {table}", daemon=True)
        self._thread.start()

    # -- consumer side -----------------------------------------------------------------

    def __iter__(self) -> "Sampler":
        return self

    def __next__(self) -> Any:
        return self.get()

    def get(self, timeout: Optional[float] = None) -> Any:
        """The next sample, waiting at most `timeout` seconds (None: forever).

        Raises StopIteration once closed or after an error was delivered, the background
        error in its turn, or replayd.TimeoutError when nothing arrived in time.
        """
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        notice_at = None if self._noticed else started + wait_notice.WAIT_NOTICE_S
        while True:
            with self._cond:
                while not self._ready:
                    if self._closed or self._finished:
                        raise StopIteration
                    now = time.monotonic()
                    if deadline is not None and deadline <= now:
                        raise TimeoutError(f"no sample of table '{self._table}' ready "
                                           f"within {timeout:g} s")
                    if notice_at is not None and notice_at <= now:
                        break
                    wake = min(t for t in (deadline, notice_at, now + 3600.0) if t is not None)
                    self._cond.wait(wake - now)
                else:
                    item = self._ready.popleft()
                    self._cond.notify_all()
                    break
            # Waited WAIT_NOTICE_S: say why, once, outside the lock.
            self._noticed = True
            notice_at = None
            wait_notice.log_wait(self._client, "sample", self._table, self._batch_size,
                                 time.monotonic() - started)
        if time.monotonic() - started < wait_notice.WAIT_NOTICE_S:
            self._noticed = False
        if isinstance(item, _Failure):
            self.close()
            raise item.exc
        return item

    @property
    def ready(self) -> int:
        """Samples waiting in the ready queue."""
        return len(self._ready)

    def close(self) -> None:
        """Stops the background thread and drops what was prefetched. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._ready.clear()
            self._cond.notify_all()
        self._conn.close()  # fails the requests in flight, which wakes the thread
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10.0)

    def __enter__(self) -> "Sampler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self) -> Any:
        raise TypeError("a replayd Sampler cannot be pickled; pickle the Client and create "
                        "a sampler in the process that consumes it")

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("ended" if self._finished else "open")
        return (f"<replayd.Sampler table={self._table!r} batch_size={self._batch_size} "
                f"prefetch={self._prefetch} ready={len(self._ready)} {state}>")

    # -- background thread -------------------------------------------------------------

    def _run(self) -> None:
        in_flight: Deque[Any] = collections.deque()
        try:
            while not self._closed:
                while len(in_flight) < self._prefetch:
                    in_flight.append(self._conn.submit(self._meta, (), self._decode,
                                                       allocate=self._allocate))
                request_id, future = in_flight.popleft()
                sample = self._conn.wait(request_id, future, None)
                item = sample if self._transform is None else self._transform(sample)
                if not self._put(item):
                    return
        except BaseException as exc:  # delivered to the consumer in its turn
            if not self._closed:
                self._put(_Failure(exc))
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify_all()

    def _run_plane(self) -> None:
        """The background thread with the plane: two requests in flight, each of up to
        `_group` batches; rows left to the mapping are gathered here."""
        in_flight: Deque[Any] = collections.deque()
        received: Deque[Any] = collections.deque()  # buffers `allocate` gave, in order
        allocate = None if self._allocate is None else self._receive_into(received)
        try:
            while not self._closed:
                while len(in_flight) < 2:
                    in_flight.append(self._conn.submit(self._meta, (), self._decode,
                                                       allocate=allocate))
                request_id, future = in_flight.popleft()
                reply = self._conn.wait(request_id, future, None)
                buffer = received.popleft() if received else None
                if isinstance(reply, Sample):
                    batches = split_sample(reply, len(reply) // self._batch_size)
                else:
                    plane = self._client._plane_of(self._table, reply.region)
                    batches = [self._gather(plane, draws, buffer)
                               for draws in split_draws(reply.draws, reply.batches)]
                for batch in batches:
                    item: Any = batch if self._transform is None else self._transform(batch)
                    if not self._put(item):
                        return
        except BaseException as exc:  # delivered to the consumer in its turn
            if not self._closed:
                self._put(_Failure(exc))
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify_all()

    def _receive_into(self, received: Deque[Any]) -> Allocator:
        """`allocate` for replies that may be keys only: each buffer is of the whole
        sample's size (the rows are gathered into it) and remembered, in order."""
        assert self._allocate is not None
        allocate, nbytes = self._allocate, self._nbytes

        def receive(size: int) -> Any:
            buffer = allocate(max(size, nbytes))
            received.append(buffer)
            return buffer
        return receive

    def _gather(self, plane: PlaneTable, draws: Sample, buffer: Any) -> Sample:
        """One batch: its rows gathered from the mapping (into `buffer` when it holds a
        whole sample), the rows that changed under the copy drawn again (a request of
        their count, waited for here)."""
        if buffer is not None:
            buffer = allocated_buffer(lambda _: buffer, self._nbytes)
        sample, bad = plane.complete(draws, buffer)
        table, beta, timeout = self._keys_meta
        while bad.size:
            request_id, future = self._conn.submit(keys_request(table, len(bad), beta, timeout),
                                                   (), decode_keys_reply)
            more: KeysReply = self._conn.wait(request_id, future, None)
            bad = plane.repair(sample, bad, more.draws)
        return sample

    def _put(self, item: Any) -> bool:
        """Queues `item`, waiting for room; False if the sampler closed meanwhile."""
        with self._cond:
            while len(self._ready) >= self._prefetch and not self._closed:
                self._cond.wait()
            if self._closed:
                return False
            self._ready.append(item)
            self._cond.notify_all()
            return True
