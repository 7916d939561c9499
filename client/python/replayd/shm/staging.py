"""StagingArena: one of the connection's staging arenas mapped read-write (the writer's
side of the shared-memory data plane; see replayd.shm), the payload layout writers fill in
it, and BatchSlots, a writer's batches laid out in an arena in turn.

Threading: an arena belongs to one writer.
"""
from __future__ import annotations

import math
import mmap
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..errors import (InvalidArgument, PermissionDenied, ProtocolError, ReplayError,
                      ResourceExhausted)
from ..schema import Field
from ..wire import padded

__all__ = ["ARENA_REFUSED", "BatchSlots", "StagingArena", "batch_layout", "map_staging",
           "staged_meta"]

#: How the server refuses a writer's arena (a ``map_staging`` of a well-formed size): no
#: plane on the connection (PermissionDenied), an arena over
#: ``max_staging_bytes_per_connection`` (InvalidArgument), or the arenas held already at
#: the staging limits (ResourceExhausted). A writer then sends its batches through the
#: socket.
ARENA_REFUSED = (PermissionDenied, InvalidArgument, ResourceExhausted)


def batch_layout(fields: Sequence[Field], rows: int, *, episodes: bool = False,
                 priorities: bool = False) -> Tuple[List[int], int]:
    """Offsets of the columns of an insert payload laid out for `rows` rows (each field's
    column, then episode ids, then priorities, each 8-aligned: docs/PROTOCOL.md) and its
    total bytes."""
    offsets: List[int] = []
    offset = 0
    sizes = [rows * f.item_bytes for f in fields]
    if episodes:
        sizes.append(8 * rows)
    if priorities:
        sizes.append(8 * rows)
    for size in sizes:
        offsets.append(offset)
        offset += padded(size)
    return offsets, offset


class StagingArena:
    """One of the connection's staging arenas, mapped read-write: from a ``map_staging``
    reply (its metadata and its descriptor, which this takes over and closes). A writer
    views batches in it (`view`), fills rows and names them in a staged request; it must
    not touch those rows again until the request's reply has come (the server copies them
    when the request is admitted)."""

    def __init__(self, meta: Mapping[str, Any], fd: int) -> None:
        try:
            self.id = int(meta["arena"])
            self.nbytes = int(meta["bytes"])
            self._map = mmap.mmap(fd, self.nbytes, flags=mmap.MAP_SHARED,
                                  prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except (KeyError, TypeError, ValueError, OSError) as exc:
            raise ProtocolError(f"cannot map a staging arena: {exc}") from None
        finally:
            os.close(fd)

    def view(self, dtype: np.dtype[Any], shape: Tuple[int, ...], offset: int
             ) -> np.ndarray[Any, Any]:
        """A writable array over the arena's bytes at `offset`."""
        size = math.prod(shape) * np.dtype(dtype).itemsize
        if offset < 0 or offset + size > self.nbytes:
            raise ValueError(f"{size} bytes at offset {offset} exceed the arena's {self.nbytes}")
        # frombuffer holds the mapping's buffer while the array lives, so `close` cannot
        # unmap it under a view (np.ndarray(buffer=...) holds none: a view of a closed
        # arena, in a lost batch's traceback say, would crash the process when read).
        return np.frombuffer(self._map, dtype, math.prod(shape), offset).reshape(shape)

    def memoryview(self) -> memoryview:
        """The whole arena as writable bytes (it holds the mapping, as `view` does)."""
        return memoryview(self._map)

    def close(self) -> None:
        """Unmaps the arena once no array or memoryview views it any more."""
        try:
            self._map.close()
        except BufferError:
            pass


def map_staging(conn: Any, nbytes: int, timeout: Optional[float]) -> StagingArena:
    """A new staging arena of `nbytes` on `conn` (a connection offered the plane, which
    reads descriptors). Raises one of ARENA_REFUSED when the server refuses it."""
    request_id, future = conn.submit({"op": "map_staging", "bytes": int(nbytes)},
                                     caller_waits=True)
    meta = conn.wait(request_id, future, timeout)
    fds = meta.get("descriptors")
    if not isinstance(fds, list) or len(fds) != 1:
        for fd in fds if isinstance(fds, list) else ():
            os.close(fd)
        raise ProtocolError(f"a map_staging reply without its one descriptor: {fds!r}")
    return StagingArena(meta, int(fds[0]))


def staged_meta(arena: StagingArena, offset: int, rows: int) -> Dict[str, int]:
    """The ``"staged"`` member of a request whose columns lie in `arena` at `offset`, laid
    out for `rows` rows."""
    return {"arena": arena.id, "offset": offset, "rows": rows}


class BatchSlots:
    """A writer's batches in a staging arena: `slots` slots, each one batch of `rows` rows
    laid out as an insert payload (the fields' columns, then priorities), used in turn.
    The writer fills the current slot, sends a request naming it (`meta`) and moves on
    (`advance`); with at most slots - 1 requests in flight, a slot is refilled only after
    its request's reply."""

    def __init__(self, conn: Any, arena: StagingArena, fields: Sequence[Field], rows: int,
                 slots: int, episodes: bool = False) -> None:
        offsets, slot_bytes = batch_layout(fields, rows, episodes=episodes, priorities=True)
        self.conn = conn
        self.arena = arena
        self._slot_bytes = -(-slot_bytes // 64) * 64
        self._slots = [([arena.view(f.dtype, (rows, *f.shape), k * self._slot_bytes + offset)
                         for f, offset in zip(fields, offsets)],
                        arena.view(np.dtype("<f8"), (rows,), k * self._slot_bytes + offsets[-1]))
                       for k in range(slots)]
        # An append's episode ids, after the fields (before the priorities).
        self._episode_ids = [arena.view(np.dtype("<u8"), (rows,),
                                        k * self._slot_bytes + offsets[len(fields)])
                             for k in range(slots)] if episodes else []
        self._memos: List[Any] = [None] * slots
        self._rows = rows
        self._current = 0

    @classmethod
    def open(cls, client: Any, fields: Sequence[Field], rows: int, slots: int,
             episodes: bool = False) -> "Optional[BatchSlots]":
        """A new arena on the client's connection, or None when the client has no plane
        (shm=False, not offered, or a client without staging) or the server refuses the
        arena (ARENA_REFUSED). `episodes`: the slots hold an append's episode-id column."""
        opener = getattr(client, "staging_arena", None)
        if opener is None or not getattr(client, "shm_enabled", lambda: False)():
            return None
        _, slot_bytes = batch_layout(fields, rows, episodes=episodes, priorities=True)
        try:
            conn, arena = opener((-(-slot_bytes // 64) * 64) * slots)
        except ARENA_REFUSED:
            return None
        return cls(conn, arena, fields, rows, slots, episodes)

    @classmethod
    def on_connection(cls, conn: Any, fields: Sequence[Field], rows: int, slots: int,
                      episodes: bool, timeout: Optional[float]) -> "BatchSlots":
        """A new arena on `conn` (one of an append's writer, offered the plane)."""
        _, slot_bytes = batch_layout(fields, rows, episodes=episodes, priorities=True)
        arena = map_staging(conn, (-(-slot_bytes // 64) * 64) * slots, timeout)
        return cls(conn, arena, fields, rows, slots, episodes)

    def slot(self, k: int) -> Tuple[List[np.ndarray[Any, Any]], np.ndarray[Any, Any]]:
        """The columns and priorities of slot k."""
        return self._slots[k]

    def episode_ids(self) -> np.ndarray[Any, Any]:
        """The current slot's episode-id column (slots made with `episodes`)."""
        return self._episode_ids[self._current]

    def advance(self) -> Tuple[List[np.ndarray[Any, Any]], np.ndarray[Any, Any]]:
        """Moves to the next slot; returns its columns and priorities."""
        self._current = (self._current + 1) % len(self._slots)
        return self._slots[self._current]

    def memo(self, make: Callable[[List[np.ndarray[Any, Any]]], Any]) -> Any:
        """``make(columns)`` of the current slot, made once per slot (a writer's plan)."""
        memo = self._memos[self._current]
        if memo is None:
            memo = self._memos[self._current] = make(self._slots[self._current][0])
        return memo

    @property
    def current(self) -> int:
        """The index of the slot being filled."""
        return self._current

    def meta(self) -> Dict[str, int]:
        """The request's "staged" member for the current slot."""
        return staged_meta(self.arena, self._current * self._slot_bytes, self._rows)

    def close(self, client: Any) -> None:
        """Releases the arena (on the server too, when its connection lives)."""
        self._slots = []
        self._memos = []
        try:
            client.unmap_staging(self.conn, self.arena)
        except ReplayError:
            self.arena.close()
