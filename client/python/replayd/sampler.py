"""Sampler: a prefetching iterator over samples of one table: plain samples, n-step
samples (``nstep``) or sequences (``sequence``) of an episodic table.

A background thread keeps `prefetch` sample requests in flight on a private connection and
fills a ready queue (at most `prefetch` entries) in request order, applying `transform`
there, so the consumer usually finds a batch waiting instead of paying a round trip. The
connection has no reader thread of its own: the background thread reads its replies.

Mixed batches (replayd.mixed, docs/MIXED.md): `table` may be a dict of table -> fraction or
a schedule (batch index -> such a dict). Each batch in flight is then one ``sample_mixed``
request, or one request per table where it cannot be (replayd.mixed_draw), assembled in
the background thread; the schedule is called when a
batch is requested, up to `prefetch` batches ahead of the one the consumer takes.

Threading: one thread consumes (iteration is not meant to be shared). `close` may be called
from any thread. A Sampler belongs to the process that created it: do not use it across
fork, and it does not pickle (pickle the Client instead).

Shared memory (docs/SHM.md): plain samples of a table the client maps (`plane_table`) have
no background thread (replayd.shm.prefetch): one request of 2 x `prefetch` batches stays
in flight (with `allocate`, two of one batch), and `next` gathers each batch's rows from the
table's mapping (into `allocate`'s buffer when given) and applies `transform` in the
consumer's thread. Only the keys are drawn ahead (at most 4 x `prefetch` batches); the rows
are copied when a batch is taken, or for small rows (a reply of at most 256 KiB) when the
reply arrives.

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
from typing import Any, Callable, Deque, Dict, Mapping, Optional, Sequence, Tuple, Union

from . import requests, wait_notice
from .client_interface import ClientLike
from .columns import decode_sample, sample_decoder
from .episode_replies import decode_sequences
from .errors import InvalidArgument, NotFound, ReplayError, TimeoutError
from .mixed import MixLike, Schedule, is_mix, schedule_of, scheduled_mix
from .mixed_bounds import MixBound
from .mixed_draw import DrawKind, MixedDraw, check_schemas
from .shm.insert_arena import InsertArena, open_sample_arena
from .shm.prefetch import PlanePrefetch
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
        table: the table; or a dict of table -> fraction, or a schedule (a callable from
            the batch index, 0 for the first batch requested, to such a dict, naming the
            same tables in the same order every time), for mixed batches (docs/MIXED.md).
        batch_size: items per sample.
        prefetch: sample requests kept in flight, and size of the ready queue (>= 1);
            over the shared-memory plane, one request of 2 x prefetch batches (above).
        beta: importance-sampling exponent sent with each request.
        timeout: server-side wait per request for the rate limiter (None: forever); a
            request that times out ends the iteration with replayd.TimeoutError.
        transform: runs in the background thread on each Sample; its result is yielded.
        allocate: where each reply is received (see Client.sample); called in the
            background thread, up to `prefetch` requests ahead of the one being consumed.
        nstep, gamma: n-step samples of an episodic table (see Client.sample).
        sequence: sequences of an episodic table (see Client.sample_sequences); batch_size
            is then the number of sequences.
        fields: of mixed batches, the fields each batch carries (None: every field; the
            tables must then have the same ones).
        bound: plain samples' policy version members (replayd.policy_versions
            .sample_version_meta: versions, min_version, max_staleness, value; for mixed
            batches, every table's), a replayd.mixed_bounds.MixBound (each table's own
            bound), or None.
    """

    def __init__(self, client: ClientLike, table: Union[str, MixLike, Schedule],
                 batch_size: int, *, prefetch: int = 4,
                 beta: float = 0.4, timeout: Optional[float] = None,
                 transform: Optional[Callable[[Sample], Any]] = None,
                 allocate: Optional[Allocator] = None, nstep: Optional[int] = None,
                 gamma: float = 1.0,
                 sequence: Optional[requests.SequenceShape] = None,
                 fields: Optional[Sequence[str]] = None,
                 bound: Union[None, Mapping[str, Any], MixBound] = None) -> None:
        if prefetch < 1:
            raise InvalidArgument(f"prefetch must be >= 1, got {prefetch}")
        self._decode: Callable[..., Any] = decode_sample
        if nstep is not None and sequence is not None:
            raise InvalidArgument(f"table '{table}': a sampler draws n-step samples or "
                                  "sequences, not both")
        if bound is not None and (nstep is not None or sequence is not None):
            raise InvalidArgument(f"table '{table}': versions, min_version and "
                                  "max_staleness apply to plain samples, not to n-step "
                                  "samples or sequences")
        # Mixed batches: the schedule, its tables and what each table's request draws.
        self._mixed: Optional[Tuple[Schedule, Tuple[str, ...], DrawKind]] = None
        self._mixed_plane = False
        self._batches_requested = 0
        self._fields = None if fields is None else list(fields)
        meta: Dict[str, Any] = {}
        one_bound: Optional[Mapping[str, Any]] = None  # a one-table sample's members
        if not isinstance(bound, MixBound):
            one_bound = bound
        elif isinstance(table, str):  # a per-table bound, read for this table
            one_bound = bound.members(table)
        if not isinstance(table, str):
            if not is_mix(table) and not callable(table):
                raise InvalidArgument(f"a sampler takes a table name, a dict of table -> "
                                      f"fraction or a schedule; got {table!r}")
            if allocate is not None:
                raise InvalidArgument("allocate= receives one table's reply; a mixed batch "
                                      "is assembled from several (leave it out)")
            schedule, tables = schedule_of(table)
            mixed_bound = bound if isinstance(bound, MixBound) or bound is None else \
                MixBound.every(tables, bound)
            self._mixed = (schedule, tables, DrawKind(nstep, float(gamma), sequence,
                                                      mixed_bound))
            self._mixed_plane = nstep is None and sequence is None and client.shm_enabled()
            check_schemas(client, tables, fields)  # a disagreement raised here, not later
            table = "+".join(tables)
        elif fields is not None:
            raise InvalidArgument(f"table '{table}': fields= selects the fields of mixed "
                                  "batches (a dict of table -> fraction)")
        elif sequence is not None:
            self._decode = decode_sequences
            meta = requests.sequence_meta(table, batch_size, *sequence, beta, timeout)
        elif nstep is not None:
            meta = requests.nstep_meta(table, batch_size, nstep, gamma, beta, timeout)
            self._decode = sample_decoder(client.schema(table))  # discount: the reward's dtype
        else:
            meta = requests.sample_meta(table, batch_size, beta, timeout)
            if one_bound is not None:
                meta.update(one_bound)
                self._decode = sample_decoder(None, versions=True)
        # Plain samples of a table the client maps: PlanePrefetch, no thread (see there).
        over_plane = False
        if nstep is None and sequence is None and self._mixed is None:
            try:
                over_plane = client.plane_table(table) is not None
            except NotFound:
                pass  # the first request reports it, in its turn
        self._meta = encode_meta(meta) if self._mixed is None else b""
        self._client = client
        self._table = table
        self._batch_size = int(batch_size)
        self._noticed = False  # logged why the consumer waits, since the last quick batch
        self._request_timeout = timeout  # a bounded wait logs no notice (wait_notice)
        self._prefetch = int(prefetch)
        self._transform = transform
        self._allocate = allocate
        self._ready: Deque[Any] = collections.deque()
        self._cond = threading.Condition()
        self._beta = float(beta)
        self._timeout = timeout
        self._closed = False
        self._finished = False  # the thread ended; nothing more will be queued
        # Only one thread (the background one, or the consumer's over the plane) uses the
        # connection, so it reads the replies itself.
        # Plain samples of a table the client cannot map (a file tier, a queue) may have
        # their rows written into an arena of this connection (below): it may then receive
        # the arena's descriptor.
        into_candidate = (not over_plane and nstep is None and sequence is None and
                          self._mixed is None and one_bound is None)
        self._conn = client.open_connection(reader_thread=False, shm=into_candidate)
        self._plane: Optional[PlanePrefetch] = None
        self._thread: Optional[threading.Thread] = None
        self._into: Optional[Tuple[InsertArena, int]] = None  # see below
        self._into_meta = meta
        if over_plane:
            # One request of 2 x prefetch batches (a reply's fixed cost is most of a small
            # batch's); with `allocate`, each batch's own buffer: two requests of one.
            group, in_flight = (1, 2) if allocate is not None else (2 * max(1, int(prefetch)), 1)
            nbytes = client.sample_nbytes(table, batch_size) if allocate else 0
            self._plane = PlanePrefetch(client, self._conn, table, int(batch_size), beta,
                                        timeout, group, in_flight, self._decode, allocate,
                                        nbytes, one_bound)
        else:
            # Their rows written into an arena of this connection, with room for every
            # request in flight (shm/sample_into.py), where the plane is offered.
            if into_candidate:
                try:
                    self._into = open_sample_arena(client, self._conn, table,
                                                   self._batch_size, self._prefetch + 1,
                                                   timeout)
                except NotFound:
                    pass  # the first request reports it, in its turn
            self._thread = threading.Thread(target=self._run, name=f"replayd-sampler {table}",
                                            daemon=True)
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
        if self._plane is not None:
            return self._next_over_plane(timeout)
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        noticing = wait_notice.notices(timeout) and wait_notice.notices(self._request_timeout)
        notice_at = started + wait_notice.WAIT_NOTICE_S if noticing and not self._noticed \
            else None
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
            if isinstance(item.exc, ReplayError):  # a server timeout: say why it waited
                raise wait_notice.with_reason(self._client, "sample", self._table,
                                              self._batch_size, item.exc) from None
            raise item.exc
        return item

    def _next_over_plane(self, timeout: Optional[float]) -> Any:
        """get() over the plane: the next batch, gathered (and transformed) here."""
        if self._closed or self._finished:
            raise StopIteration
        assert self._plane is not None
        try:
            sample = self._plane.next(timeout)
            return sample if self._transform is None else self._transform(sample)
        except TimeoutError as exc:
            if exc.message.startswith("no sample of table"):
                raise  # the local wait: the request is still in flight
            self._finished = True
            self.close()
            raise
        except BaseException:
            self._finished = True  # the error ends the iteration, as from the thread
            self.close()
            raise

    @property
    def ready(self) -> int:
        """Samples waiting in the ready queue."""
        return len(self._ready) if self._plane is None else self._plane.ready

    def close(self) -> None:
        """Stops the background thread and drops what was prefetched. Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._ready.clear()
            self._cond.notify_all()
        self._conn.close()  # fails the requests in flight, which wakes the thread
        if self._thread is not None and threading.current_thread() is not self._thread:
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
                    in_flight.append(self._request())
                sample = self._receive(in_flight.popleft())
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

    def _request(self) -> Any:
        """Sends the next batch's request (a mixed batch's: one per table)."""
        if self._mixed is None:
            if self._into is not None:
                arena, nbytes = self._into
                sent = arena.send_sample(self._into_meta, nbytes, self._decode, self._allocate)
                if sent is not None:
                    return sent
            return self._conn.submit(self._meta, (), self._decode, allocate=self._allocate)
        schedule, tables, kind = self._mixed
        mix = scheduled_mix(schedule, self._batches_requested, tables)
        self._batches_requested += 1
        return MixedDraw(self._client, self._conn, mix, self._batch_size, kind, self._beta,
                         self._timeout, self._fields, plane=self._mixed_plane)

    def _receive(self, request: Any) -> Sample:
        """The sample of a request `_request` sent."""
        if isinstance(request, MixedDraw):
            return request.result(None)
        request_id, future = request
        sample: Sample = self._conn.wait(request_id, future, None)
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
