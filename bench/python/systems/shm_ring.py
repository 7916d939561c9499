"""Shared-memory ring buffer: the pure-Python alternative with no server at all.

One `multiprocessing.shared_memory.SharedMemory` block holds every field's column, the
write cursor and (prioritized) a sum tree; numpy views it in place. Locks (all
`multiprocessing.Lock`, inherited by forked workers):
- `head`: guards the cursor; an inserter takes the chunk locks of the slots it reserves
  before releasing it, so a sampler that sees the new cursor waits for the data;
- one lock per chunk of CHUNK_SLOTS slots: held while rows are written or copied out;
- `tree` (prioritized): guards the sum tree and the largest priority.
Lock order: head, then chunks in ascending order, then tree.
"""
from __future__ import annotations

import mmap
import multiprocessing as mp
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from systems.arrays import (PRIORITY_EXPONENT, SumTree, importance_weights, tree_leaves)
from systems.base import Batch, Endpoint, System
from workloads import Workload

__all__ = ["ShmRingSystem"]

CHUNK_SLOTS = 1024
_CTX = mp.get_context("fork")


class _Layout:
    """Byte offsets of the columns, cursor and tree in the block."""

    def __init__(self, workload: Workload, prioritized: bool) -> None:
        self.capacity = workload.capacity
        self.fields = workload.fields
        self.offsets: Dict[str, int] = {}
        offset = 64  # cursor (int64), max priority mass (float64)
        for name, dtype, shape in workload.fields:
            self.offsets[name] = offset
            nbytes = self.capacity * int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            offset += -(-nbytes // 64) * 64
        self.tree_offset = offset
        self.tree_len = 2 * tree_leaves(self.capacity) if prioritized else 0
        self.nbytes = offset + 8 * self.tree_len


class ShmEndpoint(Endpoint):
    native: frozenset = frozenset()  # every call is already local and synchronous

    def __init__(self, handle: Dict[str, Any]) -> None:
        layout: _Layout = handle["layout"]
        self.shm = shared_memory.SharedMemory(name=handle["name"])
        buf = self.shm.buf
        # Map every page now, as a long-running process would have: a fresh mapping takes a
        # page fault on each first touch (14 per W2 item), which is not the buffer's cost.
        np.frombuffer(buf, np.uint8)[::mmap.PAGESIZE].max()
        self.capacity = layout.capacity
        self.cursor = np.ndarray((1,), np.int64, buf, 0)  # items ever inserted
        self.max_mass = np.ndarray((1,), np.float64, buf, 8)
        self.columns = {name: np.ndarray((layout.capacity, *shape), dtype, buf,
                                         layout.offsets[name])
                        for name, dtype, shape in layout.fields}
        self.tree: Optional[SumTree] = None
        if layout.tree_len:
            self.tree = SumTree(np.ndarray((layout.tree_len,), np.float64, buf,
                                           layout.tree_offset))
        self.head, self.chunk_locks, self.tree_lock = (handle["head"], handle["chunks"],
                                                       handle["tree"])
        self.rng = np.random.default_rng()

    def insert_one(self, item: Dict[str, Any]) -> None:
        with self.head:
            slot = int(self.cursor[0]) % self.capacity
            lock = self.chunk_locks[slot // CHUNK_SLOTS]
            lock.acquire()
            self.cursor[0] += 1
        try:
            for name, column in self.columns.items():
                column[slot] = item[name]
        finally:
            lock.release()
        if self.tree is not None:
            with self.tree_lock:
                self.tree.set(np.array([slot]), self.max_mass[:1].copy())

    def insert(self, batch: Dict[str, np.ndarray]) -> None:
        n = len(next(iter(batch.values())))
        with self.head:
            first = int(self.cursor[0])
            slots = (first + np.arange(n)) % self.capacity
            chunks = sorted(set((slots // CHUNK_SLOTS).tolist()))
            locks = self._acquire(chunks)
            self.cursor[0] = first + n
        try:
            start = first % self.capacity
            if start + n <= self.capacity:  # contiguous: slice assignment
                for name, column in self.columns.items():
                    column[start:start + n] = batch[name]
            else:
                for name, column in self.columns.items():
                    column[slots] = batch[name]
        finally:
            self._release(locks)
        if self.tree is not None:
            with self.tree_lock:
                self.tree.set(slots, np.full(n, self.max_mass[0]))

    def sample(self, n: int) -> Batch:
        size = min(int(self.cursor[0]), self.capacity)
        if self.tree is None:
            slots = self.rng.integers(0, size, n)
            weights = np.ones(n)
        else:
            with self.tree_lock:
                slots, probabilities = self.tree.draw(n, self.rng)
            weights = importance_weights(probabilities, size)
        locks = self._acquire(np.unique(slots // CHUNK_SLOTS).tolist())
        try:
            data = {name: column[slots] for name, column in self.columns.items()}
        finally:
            self._release(locks)
        return Batch(data, slots, weights)

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        assert self.tree is not None, "update_priorities on a uniform store"
        masses = np.asarray(priorities, dtype=np.float64) ** PRIORITY_EXPONENT
        with self.tree_lock:
            self.max_mass[0] = max(self.max_mass[0], masses.max())
            self.tree.set(keys, masses)

    def close(self) -> None:
        self.columns.clear()
        self.tree = None
        del self.cursor, self.max_mass
        self.shm.close()

    def _acquire(self, chunks: List[int]) -> List[Any]:
        locks = [self.chunk_locks[c] for c in chunks]
        for lock in locks:
            lock.acquire()
        return locks

    @staticmethod
    def _release(locks: List[Any]) -> None:
        for lock in locks:
            lock.release()


class ShmRingSystem(System):
    name = "shm"
    networked = False
    endpoint_type = ShmEndpoint

    def __init__(self) -> None:
        self.shm: Optional[shared_memory.SharedMemory] = None

    def create_store(self, workload: Workload, prioritized: bool, workdir: Path) -> Any:
        layout = _Layout(workload, prioritized)
        self.shm = shared_memory.SharedMemory(create=True, size=layout.nbytes)
        self.shm.buf[:64] = bytes(64)
        np.ndarray((1,), np.float64, self.shm.buf, 8)[0] = 1.0  # max priority mass
        if layout.tree_len:
            np.ndarray((layout.tree_len,), np.float64, self.shm.buf, layout.tree_offset)[:] = 0
        chunks = -(-workload.capacity // CHUNK_SLOTS)
        return {"name": self.shm.name, "layout": layout, "head": _CTX.Lock(),
                "chunks": [_CTX.Lock() for _ in range(chunks)], "tree": _CTX.Lock()}

    def destroy_store(self) -> None:
        if self.shm is not None:
            self.shm.close()
            self.shm.unlink()
            self.shm = None

    @staticmethod
    def connect(handle: Any) -> Endpoint:
        return ShmEndpoint(handle)
