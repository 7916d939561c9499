"""StagingArena: one of the connection's staging arenas mapped read-write (the writer's
side of the shared-memory data plane; see replayd.shm), and the payload layout writers
fill in it.

Threading: an arena belongs to one writer.
"""
from __future__ import annotations

import math
import mmap
import os
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

from ..errors import ProtocolError
from ..schema import Field
from ..wire import padded

__all__ = ["StagingArena", "batch_layout", "staged_meta"]


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
        return np.ndarray(shape, dtype, self._map, offset)

    def close(self) -> None:
        """Unmaps the arena once no array views it any more."""
        try:
            self._map.close()
        except BufferError:
            pass


def staged_meta(arena: StagingArena, offset: int, rows: int) -> Dict[str, int]:
    """The ``"staged"`` member of a request whose columns lie in `arena` at `offset`, laid
    out for `rows` rows."""
    return {"arena": arena.id, "offset": offset, "rows": rows}
