"""TableMapping: a table's column block mapped read-only, the learner's side of the
shared-memory data plane (see replayd.shm): its stamps and one array per field, and the
gather that copies sampled rows out of it and then checks that each row is still the
item its key names.

Threading: a TableMapping may be read by any number of threads at once.
"""
from __future__ import annotations

import math
import mmap
import os
import platform
import threading
from typing import Any, Dict, Mapping, Tuple

import numpy as np

from ..columns import column_plan
from ..errors import ProtocolError

__all__ = ["TableMapping"]

# x86-64 never reorders a load with an older load, and numpy's copies and the stamp check
# are separate C calls the compiler cannot interleave: the check after the copy needs no
# fence there. Elsewhere an uncontended lock's acquire and release give one.
_NEEDS_FENCE = platform.machine().lower() not in ("x86_64", "amd64")
_FENCE = threading.Lock()


_NONE = np.zeros(0, np.intp)  # no row changed (shared: callers only read it)


def _acquire_fence() -> None:
    """Orders the loads before it (the rows' bytes) before the loads after (the stamps)."""
    if _NEEDS_FENCE:
        _FENCE.acquire()
        _FENCE.release()


class TableMapping:
    """A table's column block mapped read-only: its stamps and one array per field.

    Built from a ``map_table`` reply (its metadata and its one descriptor, which this
    takes over and closes). Every offset and size is checked against the block before a
    view is made. The arrays stay valid while the mapping lives, even after the table is
    dropped (the server's later samples then name another `region`).
    """

    def __init__(self, meta: Mapping[str, Any], fd: int) -> None:
        try:
            self.table = str(meta["table"])
            self.region = int(meta["region"])
            self.capacity = int(meta["capacity"])
            slot_bits = int(meta["slot_bits"])
            nbytes = int(meta["bytes"])
            stamps_offset = int(meta["stamps_offset"])
            columns = list(meta["columns"])
            if not (0 < self.capacity <= 1 << slot_bits and 0 < slot_bits < 63 and nbytes > 0):
                raise ValueError("capacity, slot_bits or bytes out of range")
            self._map = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        except (KeyError, TypeError, ValueError, OSError) as exc:
            raise ProtocolError(f"cannot map table {meta.get('table')!r}: {exc}") from None
        finally:
            os.close(fd)
        self.slot_mask = np.uint64((1 << slot_bits) - 1)
        self.stamps = self._view(np.dtype("<u8"), (self.capacity,), stamps_offset, nbytes)
        self.columns: Dict[str, np.ndarray[Any, Any]] = {}
        for column in columns:
            # (name, dtype, item shape, count, offset, end) as a sample reply's column.
            name, dtype, shape, _, offset, _ = column_plan(column)
            self.columns[name] = self._view(dtype, (self.capacity, *shape), offset, nbytes)
        self.fields = tuple(self.columns)

    def _view(self, dtype: np.dtype[Any], shape: Tuple[int, ...], offset: int,
              nbytes: int) -> np.ndarray[Any, Any]:
        size = math.prod(shape) * dtype.itemsize
        if offset < 0 or offset % 8 or offset + size > nbytes:
            raise ProtocolError(f"map_table of {self.table!r}: {size} bytes at offset "
                                f"{offset} do not fit the block's {nbytes}")
        # frombuffer holds the mapping's buffer while the array lives, so `close` cannot
        # unmap it under a view (np.ndarray(buffer=...) holds none: reading such a view
        # after close would crash the process).
        return np.frombuffer(self._map, dtype, math.prod(shape), offset).reshape(shape)

    def slots(self, keys: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The slots the keys name (``key & slot_mask``, as int64 and >= 0: slot_bits <
        63). `gather` checks them against the capacity."""
        return (keys & self.slot_mask).view(np.int64)

    def gather(self, keys: np.ndarray[Any, Any], out: Mapping[str, np.ndarray[Any, Any]],
               first: int = 0, slots: Any = None) -> np.ndarray[Any, Any]:
        """Copies the rows of `keys` into rows ``first...`` of each array in `out` (every
        field's, or those of the fields a caller wants; shape ``(>= first + n,
        *field_shape)``, the field's dtype), then checks each slot's stamp. `slots`: the
        keys' slots as int64 when known (a keys reply carries them), else computed.
        Returns the positions (0-based in `keys`) of the rows that changed under the
        copy: their rows in `out` are not the items' and must be drawn again.
        Raises ProtocolError when a key names a slot beyond the capacity.
        Cost: a numpy call per field and two for the stamps (their fixed cost, some
        thousands of instructions each, dominates small batches), plus the bytes."""
        n = len(keys)
        if slots is None:
            slots = self.slots(keys)
        if n and int(slots.max()) >= self.capacity:
            raise ProtocolError(f"a key of table {self.table!r} names a slot beyond its "
                                f"capacity {self.capacity}")
        # mode="clip" once the slots are known to be in range: numpy buffers the output of
        # a take in the default "raise" mode (twice the cost for small rows, a second copy
        # of large ones).
        for name, target in out.items():  # every field, or those a caller selected
            column = self.columns[name]
            if first == 0 and target.shape[0] == n:
                column.take(slots, 0, target, mode="clip")
            else:
                column.take(slots, 0, target[first:first + n], mode="clip")
        _acquire_fence()
        stamps = self.stamps.take(slots, mode="clip")
        if stamps.tobytes() == keys.tobytes():  # the usual case, in half the instructions
            return _NONE
        return np.flatnonzero(stamps != keys)

    def close(self) -> None:
        """Unmaps the block once no array views it any more (numpy keeps it mapped while
        one does)."""
        self.columns = {}
        try:
            self._map.close()
        except BufferError:
            pass  # a caller still holds a view; the mapping goes with the last one
