"""InsertWindow: the slots of a Client's `insert_async` calls in flight (at most `size` per
Client and process; a call beyond them waits for the oldest to be done).

A BoundedSemaphore's terms at a third of its cost on the path every call takes: taking a
free slot and giving slots back hold a plain lock (whose `with` runs in C) instead of a
Condition's Python-level one, and nothing is notified unless a caller waits.

Threading: any thread; `acquire` may block (only while every slot is taken), `release`
never does.
"""
from __future__ import annotations

import threading

__all__ = ["InsertWindow"]


class InsertWindow:
    """`size` slots; `acquire` takes one (waiting while none is free), `release(k)` gives
    k back (ValueError when more than were taken: a bookkeeping bug, as a
    BoundedSemaphore says)."""

    __slots__ = ("size", "_free", "_waiting", "_lock", "_freed")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"an insert window needs at least one slot, got {size}")
        self.size = size
        self._free = size
        self._waiting = 0  # callers blocked in acquire
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)  # notified by release while waiting

    def acquire(self, blocking: bool = True) -> bool:
        """Takes a slot; False when none is free and `blocking` is False."""
        with self._lock:
            if self._free:
                self._free -= 1
                return True
            if not blocking:
                return False
            self._waiting += 1
            try:
                while not self._free:
                    self._freed.wait()
            finally:
                self._waiting -= 1
            self._free -= 1
            return True

    def release(self, count: int = 1) -> None:
        """Gives back `count` slots, waking as many waiting callers."""
        with self._lock:
            if self._free + count > self.size:
                raise ValueError(f"{count} insert window slots given back, but only "
                                 f"{self.size - self._free} are taken")
            self._free += count
            if self._waiting:
                self._freed.notify(count)

    @property
    def free(self) -> int:
        """Slots not taken (for tests; may change at once)."""
        return self._free
