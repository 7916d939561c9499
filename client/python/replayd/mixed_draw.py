"""The requests of a mixed batch (replayd.mixed, docs/MIXED.md): a plain batch of tables
with the same fields is one ``sample_mixed`` request (replayd.mixed_request), policy
version bounds included; otherwise
one sample request per table with rows, all written to the connection in one write before
any reply is read (one round trip for the batch, not one per table), and the replies
assembled into one MixedSample.

`MixedDraw` is one batch in flight on one connection: Client.sample waits for it on the
client's connection, a Sampler's thread on its private one. `combine` builds the same
batch from Futures of one-table samples (the _async calls, ShardedClient). `assemble`
turns the replies into the batch: each table's rows copied once into the batch's arrays
(large ones reused, as a reply's payload is); over the shared-memory plane, gathered
straight from the table's mapping into them (a row that changed under the copy is drawn
again from its own table).

A failure of any table's request fails the batch; the other tables' requests were sent and
count as sampled on their tables (their rate limiters, times_sampled), as docs/MIXED.md
says. Not thread-safe: one thread waits for a MixedDraw.
"""
from __future__ import annotations

import math
import threading
import time
from concurrent.futures import Future
from typing import (Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence,
                    Tuple, Union)

import numpy as np

from . import requests, wait_notice
from .client_interface import ClientLike
from .columns import sample_decoder
from .connection import Connection
from .episode_replies import decode_sequences
from .errors import TimeoutError
from .mixed import FieldSpec, Mix, MixedSample, check_fields, leaves, mixed_sample, selected
from .mixed_bounds import MixBound
from .mixed_request import (Bound, assemble_mixed_reply, decode_mixed_reply, one_request,
                            table_of_error)
from .sample import Sample
from .shm.sampling import KeysReply, auto_decoder, decode_keys_reply, keys_request
from .wire import PayloadPool, encode_meta

__all__ = ["DrawKind", "MixedDraw", "assemble", "combine", "check_schemas"]

Reply = Union[Sample, KeysReply]
#: Draws `count` more keys of `table` (a keys-only reply), for rows that changed under the
#: copy from the mapping.
Redraw = Callable[[str, int], KeysReply]
#: A sampling call's wait notice: (connection, future, table, rows) -> None, called before
#: waiting for a table's reply (see Client._notice_wait).
Notice = Callable[[Connection, "Future[Any]", str, int], None]


class DrawKind(NamedTuple):
    """What each table's request draws: plain samples, n-step samples (`nstep`) or
    sequences (`sequence`); `bound`: a plain batch's policy version members, each
    table's share under its own bound (replayd.mixed_bounds)."""

    nstep: Optional[int] = None
    gamma: float = 1.0
    sequence: Optional[requests.SequenceShape] = None
    bound: Optional[MixBound] = None

    @property
    def plain(self) -> bool:
        return self.nstep is None and self.sequence is None

    def meta(self, table: str, n: int, beta: float, seconds: Optional[float],
             plane: bool) -> Dict[str, Any]:
        """The request of n rows of `table`; `plane`: keys only where the server can leave
        the rows to the table's mapping (plain samples only)."""
        if self.sequence is not None:
            return requests.sequence_meta(table, n, *self.sequence, beta, seconds)
        if self.nstep is not None:
            return requests.nstep_meta(table, n, self.nstep, self.gamma, beta, seconds)
        bound = None if self.bound is None else self.bound.members(table)
        if plane:
            return keys_request(table, n, beta, seconds, rows="auto", bound=bound)
        meta = requests.sample_meta(table, n, beta, seconds)
        if bound is not None:
            meta.update(bound)
        return meta

    def decoder(self, client: ClientLike, table: str,
                plane: bool) -> Callable[[Mapping[str, Any], np.ndarray[Any, Any]], Any]:
        if self.sequence is not None:
            return decode_sequences
        decode = sample_decoder(client.schema(table), versions=self.bound is not None)
        return auto_decoder(decode) if plane and self.plain else decode


# Each table's request as sent (its encoded metadata) and its decoder: a learner sends the
# same ones every batch. Keyed by the schema object too (a table created again gets a new
# one). Bounded.
_REQUESTS: Dict[Tuple[Any, ...], Tuple[bytes, Callable[..., Any]]] = {}


def table_request(client: ClientLike, kind: DrawKind, table: str, n: int, beta: float,
                  seconds: Optional[float], plane: bool
                  ) -> Tuple[bytes, Callable[..., Any]]:
    """(encoded metadata, decoder) of the request of n rows of `table` (cached)."""
    schema = client.schema(table)
    key = (kind, table, n, beta, seconds, plane, id(schema))
    found = _REQUESTS.get(key)
    if found is None:
        found = (encode_meta(kind.meta(table, n, beta, seconds, plane)),
                 kind.decoder(client, table, plane))
        if len(_REQUESTS) >= 256:
            _REQUESTS.clear()
        _REQUESTS[key] = found
    return found


# Tables whose fields were checked up front, with the fields asked for: a learner asks
# for the same mix every batch. Bounded; the check at assembly still runs every time.
_CHECKED: Dict[Tuple[Tuple[Tuple[str, int], ...], Optional[Tuple[str, ...]]], bool] = {}
_CHECKED_LOCK = threading.Lock()


def check_schemas(client: ClientLike, tables: Sequence[str],
                  fields: Optional[Sequence[str]]) -> None:
    """Before anything is drawn: InvalidArgument when the tables' fields disagree (see
    replayd.mixed.check_fields), from their schemas (one ``info`` round trip per table the
    first time, then cached). Tables with frame fields (docs/PIXELS.md) are left to the
    check at assembly: their samples' fields are not their stored ones."""
    schemas = [client.schema(table) for table in tables]
    # The schema objects name the tables' versions (one created again is read anew).
    key = (tuple(zip(tables, map(id, schemas))), None if fields is None else tuple(fields))
    if key in _CHECKED:
        return
    if not any(f.is_frame for schema in schemas for f in schema.fields):
        check_fields([(table, {f.name: (f.dtype, f.shape) for f in schema.fields})
                      for table, schema in zip(tables, schemas)], fields)
    with _CHECKED_LOCK:
        if len(_CHECKED) >= 64:
            _CHECKED.clear()
        _CHECKED[key] = True


class _Part(NamedTuple):
    table: str
    rows: int
    request_id: int
    future: "Future[Any]"


class MixedDraw:
    """One mixed batch in flight on `conn`: every table's request sent on construction
    (before any reply is read), `result` waits for all of them and assembles the batch.

    `plane`: ask for keys only where the server can leave the rows to the mapping (plain
    samples over a Unix socket of the server's uid). `caller_waits`: the caller will wait
    at once (no reader thread needed)."""

    def __init__(self, client: ClientLike, conn: Connection, mix: Mix, n: int,
                 kind: DrawKind, beta: float, seconds: Optional[float],
                 fields: Optional[Sequence[str]], *, plane: bool,
                 caller_waits: bool = True) -> None:
        self._client = client
        self._conn = conn
        self._mix = mix
        self._counts = mix.counts(n)
        self._kind = kind
        self._beta = beta
        self._seconds = seconds
        self._fields = fields
        self._plane = plane and kind.plain
        self._parts: List[_Part] = []
        wanted = [(table, count) for table, count in zip(mix.tables, self._counts)
                  if count > 0]  # a table of 0 rows is not requested: nothing drawn
        self._one: Optional[Tuple[int, "Future[Any]"]] = None
        prepared = one_request(client, wanted, beta, seconds, self._plane, kind.bound) \
            if kind.plain and len(wanted) > 1 else None
        if prepared is not None:
            # One request and one reply for every table (replayd.mixed_request): the
            # tables hold the same fields (the server checks it too); `fields` is checked
            # against them at assembly.
            self._wanted = wanted
            self._one = conn.submit(prepared.request, (), decode_mixed_reply,
                                    caller_waits=caller_waits)
            return
        check_schemas(client, mix.tables, fields)
        sent = conn.submit_all([(meta, (), decode) for meta, decode in (
            table_request(client, kind, table, count, beta, seconds, self._plane)
            for table, count in wanted)], caller_waits=caller_waits)
        self._parts = [_Part(table, count, request_id, future)
                       for (table, count), (request_id, future) in zip(wanted, sent)]

    def result(self, local: Optional[float], notice: Optional[Notice] = None) -> MixedSample:
        """The batch, once every table's share arrived (at most `local` seconds from now;
        None: no limit). Raises the first failed table's error (the others' requests are
        forgotten; what they drew stays drawn)."""
        if self._one is not None:
            return self._one_result(local, notice)
        deadline = None if local is None else time.monotonic() + local
        # Each share is copied into the batch as soon as it arrives, while the server still
        # draws the next ones (and the next reply's wake-up is not waited for idle).
        assembly = Assembly(self._client, self._mix.tables, self._counts, len(self._parts),
                            self._fields, self._redraw)
        for i, part in enumerate(self._parts):
            try:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if notice is not None and not part.future.done() and \
                        wait_notice.notices(remaining):  # a bounded wait says why at its end
                    notice(self._conn, part.future, part.table, part.rows)
                reply = self._conn.wait(part.request_id, part.future, remaining)
            except TimeoutError as exc:  # the server's: say why the table held its share
                self._forget(i + 1)
                raise wait_notice.with_reason(self._client, "sample", part.table, part.rows,
                                              exc) from None
            except BaseException:
                self._forget(i + 1)
                raise
            try:
                assembly.add(part.table, part.rows, reply)
            except BaseException:
                self._forget(i + 1)
                raise
        return assembly.finish()

    def _one_result(self, local: Optional[float], notice: Optional[Notice]) -> MixedSample:
        """The batch of the one ``sample_mixed`` request."""
        assert self._one is not None
        request_id, future = self._one
        first_table, _ = self._wanted[0]
        try:
            if notice is not None and not future.done() and wait_notice.notices(local):
                notice(self._conn, future, first_table, sum(c for _, c in self._wanted))
            reply = self._conn.wait(request_id, future, local)
        except TimeoutError as exc:  # the server's names the table that held its share
            table = table_of_error(exc, first_table)
            rows = dict(self._wanted).get(table, 0)
            raise wait_notice.with_reason(self._client, "sample", table, rows, exc) from None
        return assemble_mixed_reply(self._client, self._mix.tables, self._counts, reply,
                                    self._fields, self._redraw, _batch_arrays, _repair)

    def _forget(self, first: int) -> None:
        for part in self._parts[first:]:
            self._conn.forget(part.request_id)

    def _redraw(self, table: str, count: int) -> KeysReply:
        bound = None if self._kind.bound is None else self._kind.bound.members(table)
        request_id, future = self._conn.submit(
            keys_request(table, count, self._beta, self._seconds, bound=bound), (),
            decode_keys_reply, caller_waits=True)
        reply: KeysReply = self._conn.wait(request_id, future, None)
        return reply


class _Plan(NamedTuple):
    """A learner's repeated plain mix, prepared once: the mix, its counts, the tables with
    rows and the ``sample_mixed`` request (None: the tables cannot share one request)."""

    mix: Mix
    counts: List[int]
    wanted: List[Tuple[str, int]]
    request: Optional[bytes]
    schemas: Tuple[Any, ...]  # of `wanted`, as the request was prepared for them


# Plans by (fractions' items, n, beta, server timeout, plane, version bound). Bounded.
_PLANS: Dict[Tuple[Any, ...], _Plan] = {}


def _plan_of(client: ClientLike, fractions: Any, n: int, beta: float,
             seconds: Optional[float], plane: bool, bound: Bound) -> Optional[_Plan]:
    """The plan of this call (cached while the tables' schemas are the same objects), or
    None when the fractions are not a plain dict (Mix.of checks them the long way)."""
    try:
        key = (tuple(fractions.items()), n, beta, seconds, plane, bound)
        plan = _PLANS.get(key)
    except (AttributeError, TypeError):  # not a dict, or unhashable values
        return None
    if plan is not None and all(client.schema(table) is schema
                                for (table, _), schema in zip(plan.wanted, plan.schemas)):
        return plan
    mix = Mix.of(fractions)
    counts = mix.counts(n)
    wanted = [(table, count) for table, count in zip(mix.tables, counts) if count > 0]
    prepared = one_request(client, wanted, beta, seconds, plane, bound) \
        if len(wanted) > 1 else None
    plan = _Plan(mix, counts, wanted, None if prepared is None else prepared.request,
                 tuple(client.schema(table) for table, _ in wanted))
    if len(_PLANS) >= 256:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def sample_plain_mix(client: ClientLike, conn: Connection, fractions: Any, n: int,
                     beta: float, seconds: Optional[float], plane: bool,
                     fields: Optional[Sequence[str]], local: Optional[float],
                     notice: Optional[Notice], bound: Bound = None) -> Optional[MixedSample]:
    """A synchronous plain mixed batch as one ``sample_mixed`` request, with what a
    learner repeats prepared once (the hot path of ``Client.sample(dict, n)``); None when
    this mix cannot be one request (the caller then uses MixedDraw). `bound`: the call's
    policy version members (each table's share drawn under its own bound)."""
    plan = _plan_of(client, fractions, n, beta, seconds, plane, bound)
    if plan is None or plan.request is None:
        return None
    request_id, future = conn.submit(plan.request, (), decode_mixed_reply, caller_waits=True)
    first_table, _ = plan.wanted[0]
    try:
        if notice is not None and not future.done() and wait_notice.notices(local):
            notice(conn, future, first_table, n)
        reply = conn.wait(request_id, future, local)
    except TimeoutError as exc:  # the server's names the table that held its share
        table = table_of_error(exc, first_table)
        rows = dict(plan.wanted).get(table, 0)
        raise wait_notice.with_reason(client, "sample", table, rows, exc) from None

    def redraw(table: str, count: int) -> KeysReply:  # under the table's same bound
        members = None if bound is None else bound.members(table)
        again_id, again = conn.submit(keys_request(table, count, beta, seconds,
                                                   bound=members), (),
                                      decode_keys_reply, caller_waits=True)
        drawn: KeysReply = conn.wait(again_id, again, None)
        return drawn

    return assemble_mixed_reply(client, plan.mix.tables, plan.counts, reply, fields, redraw,
                                _batch_arrays, _repair)


def combine(client: ClientLike, mix: Mix, counts: Sequence[int],
            request: Callable[[str, int], "Future[Sample]"],
            fields: Optional[Sequence[str]]) -> "Future[MixedSample]":
    """The Future of a mixed batch from one-table Futures: ``request(table, rows)`` is
    called for each table with rows (all before any reply is awaited); the batch is
    assembled in the thread that completes the last one. Fails with the first table's
    error (in `mix` order)."""
    check_schemas(client, mix.tables, fields)
    parts = [(table, count, request(table, count))
             for table, count in zip(mix.tables, counts) if count > 0]
    result: "Future[MixedSample]" = Future()
    result.set_running_or_notify_cancel()
    remaining = [len(parts)]
    guard = threading.Lock()

    def one_done(_future: "Future[Any]") -> None:
        with guard:
            remaining[0] -= 1
            if remaining[0]:
                return
        try:
            replies: List[Tuple[str, int, Reply]] = [(t, c, f.result()) for t, c, f in parts]
            result.set_result(assemble(client, mix.tables, counts, replies, fields, None))
        except BaseException as exc:  # a table's error, or a disagreement of fields
            result.set_exception(exc)

    for _, _, future in parts:
        future.add_done_callback(one_done)
    return result  # (Mix.counts refused a batch of 0 rows: `parts` is never empty)


def assemble(client: ClientLike, tables: Tuple[str, ...], counts: Sequence[int],
             replies: Sequence[Tuple[str, int, Reply]], fields: Optional[Sequence[str]],
             redraw: Optional[Redraw]) -> MixedSample:
    """One MixedSample of the tables' replies (in `tables` order, `counts` rows each): see
    Assembly."""
    assembly = Assembly(client, tables, counts, len(replies), fields, redraw)
    for table, count, reply in replies:
        assembly.add(table, count, reply)
    return assembly.finish()


class Assembly:
    """A mixed batch put together from its tables' replies, added in `tables` order as
    they arrive: a Sample (rows copied by the server) or a KeysReply (rows gathered here
    from the table's mapping straight into the batch's arrays; `redraw` draws the rows
    that changed meanwhile again). The first reply's fields decide the batch's (all of
    them, or `fields`); each later table must agree (InvalidArgument naming the field and
    both tables). `parts`: how many replies will be added."""

    def __init__(self, client: ClientLike, tables: Tuple[str, ...], counts: Sequence[int],
                 parts: int, fields: Optional[Sequence[str]],
                 redraw: Optional[Redraw]) -> None:
        self._client = client
        self._tables = tables
        self._counts = counts
        self._parts = parts
        self._fields = fields
        self._redraw = redraw
        self._first: Optional[Tuple[str, Mapping[str, FieldSpec]]] = None
        self._names: List[str] = []
        self._data: Dict[str, np.ndarray[Any, Any]] = {}
        self._draws: List[Sample] = []
        self._offset = 0
        self._repairs: List[Tuple[str, np.ndarray[Any, Any]]] = []  # (table, rows)

    def add(self, table: str, count: int, reply: Reply) -> None:
        """Copies (or gathers) one table's `count` rows into the batch."""
        if isinstance(reply, KeysReply):
            plane = self._client._plane_of(table, reply.region)
            spec: Mapping[str, FieldSpec] = {f.name: (f.dtype, f.shape) for f in plane.fields}
            draw = reply.draws
        else:
            spec = {name: (a.dtype, a.shape[1:]) for name, a in leaves(reply).items()}
            draw = reply
        if self._first is None:
            wanted = None if self._fields is None else list(selected(self._fields, spec))
            self._names = check_fields([(table, spec)], wanted)
            self._first = (table, spec)
            if self._parts == 1 and not isinstance(reply, KeysReply):
                self._draws.append(draw)  # one table's reply: its arrays, no copy
                return
            self._data = _batch_arrays([(name, *spec[name]) for name in self._names],
                                       sum(self._counts))
        elif spec != self._first[1]:  # (the same fields: nothing to check)
            check_fields([self._first, (table, spec)], self._names)
            if self._fields is None:  # the same fields as the first, no more
                check_fields([(table, spec), self._first], None)
        offset, data = self._offset, self._data
        if isinstance(reply, KeysReply):
            bad = plane.mapping.gather(draw.keys, data, offset, slots=reply.slots)
            plane.changed_rows += len(bad)
            if bad.size:
                self._repairs.append((table, bad + offset))
        else:
            rows = slice(offset, offset + count)
            for name in self._names:
                data[name][rows] = leaves(draw)[name]
        self._draws.append(draw)
        self._offset += count

    def finish(self) -> MixedSample:
        """The batch, its changed rows drawn again from their own tables."""
        draws, tables, counts = self._draws, self._tables, self._counts
        if not draws:  # a batch of 0 rows
            return mixed_sample(tables, counts, {}, np.zeros(0, np.uint64), np.zeros(0),
                                np.zeros(0), np.zeros(0, np.uint32))
        masks = [d.mask for d in draws if d.mask is not None]
        mask = None if not masks else (masks[0] if len(draws) == 1 else np.concatenate(masks))
        if not self._data:  # one table's reply, as it came
            only = draws[0]
            return mixed_sample(tables, counts, {name: leaves(only)[name]
                                                 for name in self._names},
                                only.keys, only.probabilities, only.weights,
                                only.times_sampled, mask, only.versions,
                                self._min_versions())
        keys = np.concatenate([d.keys for d in draws])
        probabilities = np.concatenate([d.probabilities for d in draws])
        weights = np.concatenate([d.weights for d in draws])
        times_sampled = np.concatenate([d.times_sampled for d in draws])
        with_versions = [d.versions for d in draws if d.versions is not None]
        versions = np.concatenate(with_versions) if len(with_versions) == len(draws) \
            else None
        info = (keys, probabilities, weights, times_sampled) + \
            (() if versions is None else (versions,))
        for table, bad in self._repairs:
            if self._redraw is None:
                raise AssertionError("a keys reply without a way to draw again")
            _repair(self._client, table, self._redraw, self._data, bad, info)
        return mixed_sample(tables, counts, self._data, keys, probabilities, weights,
                            times_sampled, mask, versions, self._min_versions())

    def _min_versions(self) -> Tuple[Optional[int], ...]:
        """Each table's resolved bound, in `tables` order (None: unbounded, or no rows)."""
        drawn = iter(self._draws)  # one per table with rows, in `tables` order
        return tuple(next(drawn).min_version if count > 0 else None
                     for count in self._counts)


# Large batches' rows go into blocks reused once no batch refers to them any more (a fresh
# allocation of megabytes costs a page fault per page, more than the copy): see
# wire.PayloadPool. The lock: several threads may assemble batches.
_POOL = PayloadPool()
_POOL_LOCK = threading.Lock()


def _batch_arrays(specs: Sequence[Tuple[str, np.dtype[Any], Tuple[int, ...]]],
                  n: int) -> Dict[str, np.ndarray[Any, Any]]:
    """Uninitialised arrays of n rows for fields (name, dtype, item shape), views of one
    block (each 64-byte aligned): from the pool when large."""
    offsets, total = [], 0
    for _, dtype, shape in specs:
        offsets.append(total)
        total += -(-n * math.prod(shape) * dtype.itemsize // 64) * 64
    with _POOL_LOCK:
        block = _POOL.take(total)
    return {name: np.ndarray((n, *shape), dtype, block, offset)
            for (name, dtype, shape), offset in zip(specs, offsets)}


def _repair(client: ClientLike, table: str, redraw: Redraw,
            data: Dict[str, np.ndarray[Any, Any]], bad: np.ndarray[Any, Any],
            info: Tuple[np.ndarray[Any, Any], ...]) -> None:
    """Rows `bad` of the batch (of `table`) changed under the copy: draws as many again
    from `table` and gathers them in their place, until none changed."""
    while bad.size:
        more = redraw(table, len(bad))
        plane = client._plane_of(table, more.region)
        rows = {name: np.empty((len(bad), *array.shape[1:]), array.dtype)
                for name, array in data.items()}
        again = plane.mapping.gather(more.draws.keys, rows)
        plane.changed_rows += len(again)
        for name, values in rows.items():
            data[name][bad] = values
        for target, source in zip(info, (more.draws.keys, more.draws.probabilities,
                                         more.draws.weights, more.draws.times_sampled,
                                         more.draws.versions)):
            if source is not None:  # (versions: when the batch carries them)
                target[bad] = source
        bad = bad[again]
