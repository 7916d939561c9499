"""Samples over the shared-memory plane: a keys-only sample reply (``"rows": "keys"``)
turned into a `Sample` by gathering the rows from the table's mapping, and the rows that
changed under the copy drawn again (see replayd.shm).

`PlaneTable` does no I/O: its callers (Client.sample, Client.sample_async, Sampler) send the
requests and hand it the replies, so each keeps its own way of waiting.

Threading: a PlaneTable may be used by several threads at once (it keeps no state per call).
"""
from __future__ import annotations

from dataclasses import dataclass
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from .. import requests
from ..columns import decode_sample, sample_layout
from ..errors import NotFound, ProtocolError, ResourceExhausted, TimeoutError
from ..sample import Sample
from ..schema import Field
from ..wire import PayloadPool
from .mapping import TableMapping

__all__ = ["KeysReply", "MAX_REDRAW_ROUNDS", "PlaneTable", "RedrawBound", "allocated_buffer",
           "auto_decoder", "decode_keys_reply", "keys_request", "split_draws", "split_sample"]

#: Rounds of redraws a plane sample without a timeout makes before it gives up. A row
#: changes under the copy only when a writer overwrites its slot during the copy, so a
#: round redraws few rows and the next round fewer: an honest table needs one or two. As
#: the C++ PlaneSampler's kMaxRedrawRounds.
MAX_REDRAW_ROUNDS = 64


def keys_request(table: str, n: int, beta: float, timeout: Optional[float],
                 batches: int = 1, rows: str = "keys",
                 bound: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """A ``sample`` request for the keys of n draws (no rows), or of up to `batches`
    batches of n drawn at once. `rows` "auto": the server leaves the rows to the mapping
    when it can (the connection has the plane, the table lives in shared memory and keeps
    its items when sampled) and copies them otherwise. `bound`: the request's policy
    version members (replayd.policy_versions.sample_version_meta), or None."""
    meta = requests.sample_meta(table, n, beta, timeout)
    meta["rows"] = rows
    if bound is not None:
        meta.update(bound)
    if batches > 1:
        meta["batches"] = batches
    return meta


@dataclass(frozen=True)
class KeysReply:
    """A keys-only sample reply: the draws (a Sample without data), the column block
    they name, and how many batches they are."""

    draws: Sample
    region: int
    batches: int
    slots: Optional[np.ndarray[Any, Any]] = None  # int64, one per draw


def decode_keys_reply(meta: Mapping[str, Any], payload: np.ndarray[Any, Any]) -> KeysReply:
    """Decodes a keys-only sample reply (viewing the payload): the draws, and the slot of
    each as the server computed it (its "slot" column), kept apart from the draws' data."""
    if meta.get("rows") != "keys" or "region" not in meta:
        raise ProtocolError(f"a keys-only sample reply without rows: keys and its region: "
                            f"{dict(meta)!r}")
    draws = decode_sample(meta, payload)
    slots = draws.data.pop("slot", None)
    versions = draws.data.pop("version", None)  # asked for: after the slots
    if versions is not None or "min_version" in meta:
        draws = Sample(draws.data, draws.keys, draws.probabilities, draws.weights,
                       draws.times_sampled, draws.state, versions=versions,
                       min_version=None if meta.get("min_version") is None
                       else int(meta["min_version"]))
    if slots is not None and (slots.dtype != np.int64 or len(slots) != len(draws)):
        raise ProtocolError("a keys-only sample reply whose slot column is not int64 per draw")
    return KeysReply(draws, int(meta["region"]), int(meta.get("batches", 1)), slots)


def auto_decoder(copy_decoder: Callable[..., Sample]
                 ) -> Callable[[Mapping[str, Any], np.ndarray[Any, Any]], Union[KeysReply, Sample]]:
    """The decoder of a ``"rows": "auto"`` reply: a KeysReply when the server left the
    rows to the mapping, else ``copy_decoder``'s Sample."""
    def decode(meta: Mapping[str, Any], payload: np.ndarray[Any, Any]
               ) -> Union[KeysReply, Sample]:
        if meta.get("rows") == "keys":
            return decode_keys_reply(meta, payload)
        return copy_decoder(meta, payload)
    return decode


class PlaneTable:
    """One table sampled over the plane: its mapping and its fields.

    `complete` gathers a reply's rows into new arrays (or into a caller's buffer laid out
    as a socket reply's payload would be, so `allocate` and `sample_into` work alike);
    `repair` fills the rows that changed under the copy from a new draw of as many.
    """

    @classmethod
    def from_map_reply(cls, meta: Mapping[str, Any], fd: int) -> "PlaneTable":
        """From a ``map_table`` reply and its descriptor (taken over): the fields as the
        mapping describes them."""
        mapping = TableMapping(meta, fd)
        fields = tuple(Field(name, column.dtype, tuple(column.shape[1:]))
                       for name, column in mapping.columns.items())
        return cls(mapping, fields)

    def __init__(self, mapping: TableMapping, fields: Tuple[Field, ...]) -> None:
        for field in fields:
            column = mapping.columns.get(field.name)
            if column is None or column.dtype != field.dtype or column.shape[1:] != field.shape:
                raise ProtocolError(f"table {mapping.table!r}: the mapping's column "
                                    f"{field.name!r} does not match the table's field")
        self.mapping = mapping
        self.fields = fields
        self.row_bytes = sum(field.item_bytes for field in fields)  # one item's, all fields
        #: Rows that changed under the copy and were drawn again, since the table was
        #: mapped (a statistic: threads sharing the table may undercount it).
        self.changed_rows = 0
        # Large samples' rows go into arrays reused once no Sample refers to them (a fresh
        # allocation of megabytes costs a page fault per page); the lock: several threads
        # may sample one table.
        self._pool = PayloadPool()
        self._pool_lock = threading.Lock()
        self._layouts: Dict[int, Tuple[List[int], int]] = {}  # n -> field offsets, bytes

    @property
    def region(self) -> int:
        return self.mapping.region

    def check_region(self, region: int) -> None:
        """Raises NotFound when draws name another column block than this mapping's: the
        table was dropped (and maybe created again) since it was mapped, so the draws'
        keys name no row here (the C++ PlaneSampler's check_region)."""
        if region != self.mapping.region:
            raise NotFound(f"table '{self.mapping.table}' was dropped or replaced while it "
                           f"was sampled (its draws name column block {region}, the "
                           f"mapping holds {self.mapping.region}): sample it again")

    def complete(self, draws: Sample, buffer: Any = None,
                 slots: Optional[np.ndarray[Any, Any]] = None
                 ) -> Tuple[Sample, np.ndarray[Any, Any]]:
        """The Sample of `draws` (a keys-only Sample) with its rows gathered, and the
        positions of the rows that changed under the copy (to `repair`). `buffer`: a
        writable contiguous buffer of at least `sample_nbytes` bytes to gather into (the
        Sample's arrays then view it), or None for new arrays. `slots`: the draws' slots
        when the reply carried them."""
        n = len(draws)
        info: Optional[List[np.ndarray[Any, Any]]] = None
        versions = draws.versions
        if buffer is None:
            data = self._arrays(n)
        else:
            data, info = self._views(buffer, n)
            if slots is not None:  # received into the same buffer, where the rows go
                slots = slots.copy()
            if versions is not None:
                versions = versions.copy()
        bad = self.mapping.gather(draws.keys, data, slots=slots)
        self.changed_rows += len(bad)
        if info is None:
            return Sample(data, draws.keys, draws.probabilities, draws.weights,
                          draws.times_sampled, draws.state, versions=versions,
                          min_version=draws.min_version), bad
        for target, source in zip(info, (draws.keys, draws.probabilities, draws.weights,
                                         draws.times_sampled)):
            target[...] = source
        keys, probabilities, weights, times_sampled = info
        return Sample(data, keys, probabilities, weights, times_sampled, draws.state,
                      versions=versions, min_version=draws.min_version), bad

    def repair(self, sample: Sample, bad: np.ndarray[Any, Any],
               redrawn: Sample) -> np.ndarray[Any, Any]:
        """Replaces the items at positions `bad` of `sample` with those of `redrawn` (a
        keys-only Sample of len(bad) new draws), gathering their rows; returns the
        positions of `sample` still to repair (rows that changed again)."""
        if len(redrawn) != len(bad):
            raise ProtocolError(f"{len(redrawn)} draws to replace {len(bad)} rows")
        rows = {f.name: np.empty((len(bad), *f.shape), f.dtype) for f in self.fields}
        again = self.mapping.gather(redrawn.keys, rows)  # few rows: slots computed here
        self.changed_rows += len(again)
        for name, values in rows.items():
            sample.flat[name][bad] = values
        sample.keys[bad] = redrawn.keys
        sample.probabilities[bad] = redrawn.probabilities
        sample.weights[bad] = redrawn.weights
        sample.times_sampled[bad] = redrawn.times_sampled
        if sample.versions is not None and redrawn.versions is not None:
            sample.versions[bad] = redrawn.versions
        still: np.ndarray[Any, Any] = bad[again]
        return still

    def _arrays(self, n: int) -> Dict[str, np.ndarray[Any, Any]]:
        """Arrays for n rows of every field: new ones for small samples, views of one
        pooled block (PayloadPool) for large ones."""
        layout = self._layouts.get(n)
        if layout is None:
            offsets, total = [], 0
            for f in self.fields:
                offsets.append(total)
                total += -(-n * f.item_bytes // 64) * 64
            if len(self._layouts) >= 64:  # batch sizes are few; a caller varying n
                self._layouts.clear()     # at random does not grow this without bound
            layout = self._layouts[n] = (offsets, total)
        offsets, total = layout
        if total < PayloadPool.MIN_BYTES:
            return {f.name: np.empty((n, *f.shape), f.dtype) for f in self.fields}
        with self._pool_lock:
            block = self._pool.take(total)
        return {f.name: np.ndarray((n, *f.shape), f.dtype, block, offset)
                for f, offset in zip(self.fields, offsets)}

    def _views(self, buffer: Any, n: int
               ) -> Tuple[Dict[str, np.ndarray[Any, Any]], List[np.ndarray[Any, Any]]]:
        view = np.frombuffer(buffer, np.uint8)
        data: Dict[str, np.ndarray[Any, Any]] = {}
        info: List[np.ndarray[Any, Any]] = []
        for i, (name, dtype, shape, offset) in enumerate(sample_layout(self.fields, n)):
            size = int(np.prod(shape)) * dtype.itemsize
            array = view[offset:offset + size].view(dtype).reshape(shape)
            if i < 4:
                info.append(array)
            else:
                data[name] = array
        return data, info


class RedrawBound:
    """Bounds the redraws of one plane sample: rows whose stamps never settle (rewritten
    faster than they are copied, or a same-uid process writing the table's shared memory)
    would otherwise be drawn again forever. With a timeout, the redraws end at the call's
    deadline (replayd.TimeoutError); without one, after MAX_REDRAW_ROUNDS rounds
    (ResourceExhausted). `started`: when the call started (time.monotonic(); None: now)."""

    def __init__(self, table: str, timeout: Optional[float],
                 started: Optional[float] = None) -> None:
        self._table = table
        self._timeout = timeout
        start = time.monotonic() if started is None else started
        self._deadline = None if timeout is None else start + timeout
        self._rounds = 0

    def next_round(self, changed: int) -> Optional[float]:
        """Counts a redraw of the `changed` rows; returns the seconds left for it (None: no
        timeout), or raises when the bound is spent."""
        self._rounds += 1
        if self._deadline is None:
            if self._rounds <= MAX_REDRAW_ROUNDS:
                return None
            raise ResourceExhausted(self._message(changed, f"{MAX_REDRAW_ROUNDS} rounds"))
        left = self._deadline - time.monotonic()
        if left > 0:
            return left
        raise TimeoutError(self._message(changed, f"the call's timeout of {self._timeout:g} s "
                                                  f"({self._rounds - 1} rounds)"))

    def _message(self, changed: int, spent: str) -> str:
        return (f"table '{self._table}': {changed} rows of the sample kept changing under the "
                f"copy through {spent} of redraws: the table's rows are rewritten faster "
                "than this process copies them (a table much smaller than its writers' rate), "
                "or something else writes its shared memory. Sample again, make the table "
                "larger, or sample through the socket (Client(..., shm=False))")


def allocated_buffer(allocate: Any, nbytes: int) -> Any:
    """The caller's buffer for a sample of `nbytes` (``allocate(nbytes)``) when it fits
    (writable, contiguous, large enough), else None (the sample then gets arrays of its
    own), as for replies received through the socket."""
    try:
        view = memoryview(allocate(nbytes)).cast("B")
    except (TypeError, ValueError):
        return None
    return view if not view.readonly and view.nbytes >= nbytes else None


def split_sample(sample: Sample, batches: int) -> List[Sample]:
    """A reply of `batches` batches (rows copied) as one Sample per batch (views)."""
    if batches == 1:
        return [sample]
    n = len(sample) // batches
    if n * batches != len(sample):
        raise ProtocolError(f"{len(sample)} draws do not split into {batches} batches")
    parts = []
    for i in range(batches):
        rows = slice(i * n, (i + 1) * n)
        parts.append(Sample({name: array[rows] for name, array in sample.flat.items()},
                            sample.keys[rows], sample.probabilities[rows], sample.weights[rows],
                            sample.times_sampled[rows], sample.state,
                            None if sample.mask is None else sample.mask[rows],
                            None if sample.versions is None else sample.versions[rows],
                            sample.min_version))
    return parts


def split_draws(reply: KeysReply) -> List[Tuple[Sample, Optional[np.ndarray[Any, Any]]]]:
    """A reply of several batches of draws as (keys-only Sample, slots) per batch
    (views)."""
    draws, batches, slots = reply.draws, reply.batches, reply.slots
    n = len(draws) // batches
    if batches < 1 or n * batches != len(draws):
        raise ProtocolError(f"{len(draws)} draws do not split into {batches} batches")
    if batches == 1:
        return [(draws, slots)]
    return [(Sample({}, draws.keys[i * n:(i + 1) * n], draws.probabilities[i * n:(i + 1) * n],
                    draws.weights[i * n:(i + 1) * n], draws.times_sampled[i * n:(i + 1) * n],
                    draws.state, versions=None if draws.versions is None
                    else draws.versions[i * n:(i + 1) * n], min_version=draws.min_version),
             None if slots is None else slots[i * n:(i + 1) * n]) for i in range(batches)]
