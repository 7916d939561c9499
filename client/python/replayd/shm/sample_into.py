"""Plain samples whose rows the server writes into a staging arena of the connection
(``"into"``, docs/SHM.md, "Rows into the learner's arena").

A table the client cannot map (one with a file tier, whose cold rows the server reads from
disk; a queue, whose items retire when sampled) has its rows copied into every reply. On
the same host the server can write them into a region of the learner's arena instead, and
the reply carries the metadata alone: the rows never cross the socket, which takes one
copy off the server's core and one system call's worth off both. The learner copies the
region into the Sample's buffer (the caller's `allocate` one, or one of its own) when the
reply is handled, after which the region is free again.

Used by `Client.sample`, `sample_async` and the `Sampler` for plain samples of such tables
of at least `INTO_MIN_BYTES` a reply (smaller ones cost the socket less than a region's
bookkeeping).
A region is taken only when the ring has room at once; otherwise the request goes through
the socket, as does everything when the plane is off. Both give the same rows.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Tuple

import numpy as np

from ..columns import sample_nbytes
from ..errors import ProtocolError
from ..schema import TableSchema
from ..wire import Allocator, PayloadPool
from .sampling import allocated_buffer

__all__ = ["INTO_MIN_BYTES", "into_bytes", "region_decoder"]

#: The smallest reply (its columns' bytes) sent into an arena rather than the socket.
INTO_MIN_BYTES = 256 << 10

Decoder = Callable[[Mapping[str, Any], np.ndarray[Any, Any]], Any]


# into_bytes per (schema, batch size): laying a reply out costs tens of microseconds, and a
# learner asks again for every request. Holds the schema, so that its id is not reused.
_INTO_BYTES: Dict[Tuple[int, int], Tuple[TableSchema, int]] = {}
_MAX_CACHED = 256


def into_bytes(schema: TableSchema, batch_size: int) -> Optional[int]:
    """The bytes of a plain sample of `batch_size` items of a table of `schema` (its reply's
    columns) when its rows may go into an arena, else None: a table with frame fields
    (sampled as n-step transitions), or a reply under INTO_MIN_BYTES. Thread-safe: racing
    threads compute equal values."""
    key = (id(schema), int(batch_size))
    cached = _INTO_BYTES.get(key)
    if cached is None or cached[0] is not schema:
        frames = any(field.is_frame for field in schema.fields)
        cached = (schema, 0 if frames else sample_nbytes(schema.fields, int(batch_size)))
        if len(_INTO_BYTES) >= _MAX_CACHED:
            _INTO_BYTES.clear()
        _INTO_BYTES[key] = cached
    nbytes = cached[1]
    return nbytes if nbytes >= INTO_MIN_BYTES else None


def region_decoder(arena_id: int, arena_bytes: memoryview, start: int, end: int,
                   decode: Decoder, allocate: Optional[Allocator],
                   payloads: PayloadPool) -> Decoder:
    """`decode` of a reply whose columns the server wrote into the arena's bytes
    [start, end) (its ``"into"`` member names them): they are copied into the caller's
    buffer (`allocate`) or one from `payloads`, and decoded from there as a payload. A reply
    without ``"into"`` (its rows came in the frame) is decoded as it is. Runs in the thread
    that reads the reply, before the request counts as done: the region is copied before
    anything may reuse it."""

    def decode_region(meta: Mapping[str, Any], payload: np.ndarray[Any, Any]) -> Any:
        into = meta.get("into")
        if into is None:
            return decode(meta, payload)
        try:
            offset, nbytes = int(into["offset"]), int(into["bytes"])
            same = int(into["arena"]) == arena_id
        except (KeyError, TypeError, ValueError):
            raise ProtocolError(f"a sample reply with a malformed \"into\": {into!r}") from None
        if not same or offset != start or nbytes < 0 or offset + nbytes > end:
            raise ProtocolError(f"a sample reply names bytes [{offset}, {offset + nbytes}) of "
                                f"arena {into.get('arena')!r}; its request gave "
                                f"[{start}, {end}) of arena {arena_id}")
        buffer = None
        if allocate is not None:
            view = allocated_buffer(allocate, nbytes)
            if view is not None:
                buffer = np.frombuffer(view, np.uint8, nbytes)
        if buffer is None:
            buffer = payloads.take(nbytes)
        buffer[:] = np.frombuffer(arena_bytes, np.uint8, nbytes, offset)
        return decode(meta, buffer)

    return decode_region
