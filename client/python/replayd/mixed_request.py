"""A plain mixed batch in one request (``sample_mixed``, docs/MIXED.md): the server waits
until every table can supply its share, draws them all at once and replies with one batch,
rows grouped by table in the mix's order. Over the socket the reply's columns are the
batch (nothing is copied on this side); over the shared-memory plane the reply names each
table's keys and column block, and the rows are gathered from each table's mapping
straight into the batch (a row that changed under the copy is drawn again from its own
table). A batch of few bytes is copied through the socket even where the plane is offered
(PLANE_MIN_BATCH_BYTES).

Used by replayd.mixed_draw for plain samples of tables with the same fields (no frame
fields) on one connection, policy versions and bounds included (docs/VERSIONS.md: the
request's ``"versions"`` and ``"bounds"``, one entry per table, replayd.mixed_bounds); n-step samples, sequences
and frame tables keep one request per table.
"""
from __future__ import annotations

import re
import threading
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import requests
from .client_interface import ClientLike
from .columns import decode_sample
from .errors import ProtocolError, ReplayError
from .mixed import FieldSpec, MixedSample, check_fields, mixed_sample, selected
from .mixed_bounds import MixBound
from .sample import Sample
from .wire import encode_meta

__all__ = ["MixedReply", "OneRequest", "one_request", "decode_mixed_reply",
           "assemble_mixed_reply", "table_of_error", "PLANE_MIN_BATCH_BYTES"]


class MixedReply(NamedTuple):
    """A ``sample_mixed`` reply: the draws of all tables (rows in the order of `parts`),
    each part's (table, rows, column block or None), the slot of each draw when the
    rows were left to the tables' mappings, and each part's bound as the server resolved
    it (None: unbounded). The draws' `versions` when the request asked for them."""

    draws: Sample
    parts: Tuple[Tuple[str, int, Optional[int]], ...]
    slots: Optional[np.ndarray[Any, Any]]
    min_versions: Tuple[Optional[int], ...] = ()


def decode_mixed_reply(meta: Mapping[str, Any], payload: np.ndarray[Any, Any]) -> MixedReply:
    """Decodes a ``sample_mixed`` reply, viewing the payload."""
    try:
        parts = tuple((str(p["table"]), int(p["n"]),
                       None if p.get("region") is None else int(p["region"]))
                      for p in meta["parts"])
        min_versions = tuple(None if p.get("min_version") is None else int(p["min_version"])
                             for p in meta["parts"])
    except (KeyError, TypeError, ValueError):
        raise ProtocolError(f"a sample_mixed reply without its parts: {dict(meta)!r}") from None
    # Versions asked for: the last column (after the slots of a keys-only reply).
    draws = decode_sample(meta, payload, versions=meta.get("versions") is True)
    slots = None
    if meta.get("rows") == "keys":
        slots = draws.data.pop("slot", None)
        if slots is None or slots.dtype != np.int64 or len(slots) != len(draws) or \
                any(region is None for _, _, region in parts):
            raise ProtocolError("a keys-only sample_mixed reply without a slot per draw and "
                                "a column block per table")
    if sum(n for _, n, _ in parts) != len(draws):
        raise ProtocolError("a sample_mixed reply whose parts do not add up to its rows")
    return MixedReply(draws, parts, slots, min_versions)


#: Below this many bytes of rows, a mixed batch's rows are copied through the socket even
#: where the plane is offered: gathering each table's share from its mapping costs a numpy
#: call per field and table and a stamp check per table, more than copying a few KiB.
PLANE_MIN_BATCH_BYTES = 64 * 1024


class OneRequest(NamedTuple):
    """A prepared ``sample_mixed``: its encoded metadata and the schemas it was prepared
    for (a table created again gets a new schema object, and a new request)."""

    request: bytes
    schemas: Tuple[Any, ...]


# Prepared requests (None: the tables cannot share one request), by the mix's tables and
# counts and the call's options: a learner repeats one mix. Bounded.
_PREPARED: Dict[Tuple[Any, ...], Optional[OneRequest]] = {}
_PREPARED_LOCK = threading.Lock()


#: A mixed batch's policy version members, each table's bound (replayd.mixed_bounds), or
#: None.
Bound = Optional[MixBound]


def one_request(client: ClientLike, wanted: Sequence[Tuple[str, int]], beta: float,
                seconds: Optional[float], plane: bool,
                bound: Bound = None) -> Optional[OneRequest]:
    """The ``sample_mixed`` of `wanted` (table, rows >= 1) when the tables hold the same
    fields and none of them frame fields (the server refuses others), else None. `plane`:
    the plane is offered; the rows are left to the mappings ("rows": "auto") when the
    batch holds at least PLANE_MIN_BATCH_BYTES of them. `bound`: the call's policy
    version members, each table's share drawn under its own bound (as one sample request
    per table would be: a ``max_staleness`` is resolved by each table's own followed
    value)."""
    schemas = tuple(client.schema(table) for table, _ in wanted)
    key = (tuple(wanted), beta, seconds, plane, tuple(map(id, schemas)), PLANE_MIN_BATCH_BYTES,
           bound)
    if key in _PREPARED:
        found = _PREPARED[key]
        if found is None or found.schemas == schemas:
            return found
    prepared: Optional[OneRequest] = None
    first = schemas[0].fields
    if not any(f.is_frame for f in first) and all(s.fields == first for s in schemas[1:]):
        n = sum(count for _, count in wanted)
        meta = requests.sample_meta(wanted[0][0], n, beta, seconds)
        del meta["table"]
        meta["op"] = "sample_mixed"
        meta["tables"] = [table for table, _ in wanted]
        meta["counts"] = [int(count) for _, count in wanted]
        if bound is not None:
            meta.update(version_members(bound, [table for table, _ in wanted]))
        row_bytes = sum(f.dtype.itemsize * int(np.prod(f.shape)) for f in first)
        if plane and n * row_bytes >= PLANE_MIN_BATCH_BYTES:
            meta["rows"] = "auto"
        prepared = OneRequest(encode_meta(meta), schemas)
    with _PREPARED_LOCK:
        if len(_PREPARED) >= 256:
            _PREPARED.clear()
        _PREPARED[key] = prepared
    return prepared


def version_members(bound: MixBound, tables: Sequence[str]) -> Dict[str, Any]:
    """A ``sample_mixed``'s members for a mixed batch's version members: ``"versions":
    true`` (a bound implies it), and ``"bounds"``, one entry per table of `tables` (null,
    or its ``min_version``, or ``max_staleness`` and maybe ``value``), when any table is
    bounded."""
    members: Dict[str, Any] = {"versions": True}
    bounds = bound.bounds(tables)
    if any(entry is not None for entry in bounds):
        members["bounds"] = bounds
    return members


_TABLE_OF_ERROR = re.compile(r"^table '([^']*)': ")


def table_of_error(error: ReplayError, fallback: str) -> str:
    """The table a server error names first ("table 'x': ..."), else `fallback`."""
    found = _TABLE_OF_ERROR.match(error.message)
    return found.group(1) if found else fallback


Redraw = Callable[[str, int], Any]  # replayd.mixed_draw.Redraw
BatchArrays = Callable[[Sequence[Tuple[str, np.dtype[Any], Tuple[int, ...]]], int],
                       Dict[str, np.ndarray[Any, Any]]]
Repair = Callable[..., None]


def assemble_mixed_reply(client: ClientLike, tables: Tuple[str, ...], counts: Sequence[int],
                         reply: MixedReply, fields: Optional[Sequence[str]],
                         redraw: Redraw, batch_arrays: BatchArrays,
                         repair: Repair) -> MixedSample:
    """The MixedSample of a ``sample_mixed`` reply: its own columns when the server copied
    the rows; else each part's rows gathered from its table's mapping into arrays of
    `batch_arrays`, the changed ones drawn again with `repair` (replayd.mixed_draw)."""
    draws = reply.draws
    bounds = dict((table, bound) for (table, _, _), bound in zip(reply.parts,
                                                                  reply.min_versions))
    min_versions = tuple(bounds.get(table) for table in tables)
    if reply.slots is None and fields is None:
        # Every field of tables the server found alike: the reply's columns are the batch.
        return mixed_sample(tables, counts, draws.flat, draws.keys, draws.probabilities,
                            draws.weights, draws.times_sampled, draws.mask, draws.versions,
                            min_versions)
    if reply.slots is None:
        spec: Mapping[str, FieldSpec] = {name: (a.dtype, a.shape[1:])
                                         for name, a in draws.flat.items()}
        wanted = None if fields is None else list(selected(fields, spec))
        names = check_fields([(reply.parts[0][0], spec)], wanted)
        return mixed_sample(tables, counts, {name: draws.flat[name] for name in names},
                            draws.keys, draws.probabilities, draws.weights,
                            draws.times_sampled, draws.mask, draws.versions, min_versions)
    planes = [client._plane_of(table, int(region or 0)) for table, _, region in reply.parts]
    spec = {f.name: (f.dtype, f.shape) for f in planes[0].fields}
    wanted = None if fields is None else list(selected(fields, spec))
    names = check_fields([(reply.parts[0][0], spec)], wanted)
    data = batch_arrays([(name, *spec[name]) for name in names], len(draws))
    repairs: List[Tuple[str, np.ndarray[Any, Any]]] = []
    offset = 0
    for (table, count, _), plane in zip(reply.parts, planes):
        rows = slice(offset, offset + count)
        bad = plane.mapping.gather(draws.keys[rows], data, offset, slots=reply.slots[rows])
        plane.changed_rows += len(bad)
        if bad.size:
            repairs.append((table, bad + offset))
        offset += count
    info: Tuple[np.ndarray[Any, Any], ...] = (draws.keys, draws.probabilities, draws.weights,
                                              draws.times_sampled) + \
        (() if draws.versions is None else (draws.versions,))
    if repairs:  # the repaired rows' draws are written in: own arrays, not the reply's
        info = tuple(np.array(column) for column in info)
        for table, bad in repairs:
            repair(client, table, redraw, data, bad, info)
    keys, probabilities, weights, times_sampled = info[:4]
    return mixed_sample(tables, counts, data, keys, probabilities, weights, times_sampled,
                        draws.mask, info[4] if len(info) > 4 else None, min_versions)
