"""Numpy building blocks the alternative stores share: a vectorized sum tree and a
column store (ring of slots, FIFO eviction) that a server process owns.

Not thread-safe by themselves: `ColumnStore` takes its own lock in every method, because
a multiprocessing manager serves each client connection on its own thread.
"""
from __future__ import annotations

import threading
from typing import Dict, Optional, Tuple

import numpy as np

from workloads import Workload

__all__ = ["PRIORITY_EXPONENT", "BETA", "SumTree", "ColumnStore", "importance_weights"]

PRIORITY_EXPONENT = 0.6
BETA = 0.4


def tree_leaves(capacity: int) -> int:
    """Leaves of a sum tree for `capacity` slots: the next power of two."""
    return 1 << max(0, (capacity - 1).bit_length())


class SumTree:
    """Proportional sampling over slot masses kept in a flat array (root at 1, leaves at
    [leaves, 2*leaves)). The array may live in shared memory. Update and draw of k slots
    are O(k log n), done level by level with numpy."""

    def __init__(self, tree: np.ndarray) -> None:
        self.tree = tree
        self.leaves = tree.shape[0] // 2
        self.depth = self.leaves.bit_length() - 1

    def set(self, slots: np.ndarray, masses: np.ndarray) -> None:
        """Sets leaf masses (for a repeated slot the last value wins) and re-sums parents."""
        tree = self.tree
        pos = np.asarray(slots, dtype=np.int64) + self.leaves
        tree[pos] = masses
        pos = np.sort(pos)
        for _ in range(self.depth):
            pos >>= 1
            pos = pos[np.concatenate(([True], pos[1:] != pos[:-1]))]
            tree[pos] = tree[2 * pos] + tree[2 * pos + 1]

    def total(self) -> float:
        return float(self.tree[1])

    def draw(self, n: int, rng: np.random.Generator) -> Tuple[np.ndarray, np.ndarray]:
        """n slots drawn in proportion to their mass (with replacement), and each one's
        probability."""
        tree = self.tree
        total = tree[1]
        u = rng.random(n) * total
        pos = np.ones(n, dtype=np.int64)
        for _ in range(self.depth):
            left = tree[2 * pos]
            right = u >= left
            u -= left * right
            pos = 2 * pos + right
        # Rounding can step onto an empty leaf; step back to its left sibling then.
        empty = tree[pos] <= 0
        if empty.any():
            pos[empty] -= 1
        return pos - self.leaves, tree[pos] / total


def importance_weights(probabilities: np.ndarray, size: int, beta: float = BETA) -> np.ndarray:
    """(N*P)^-beta normalized by the batch's largest weight."""
    weights = (size * probabilities) ** -beta
    return weights / weights.max()


class ColumnStore:
    """A replay buffer in one process: per-field arrays, slots reused oldest first,
    optionally a sum tree of priority^alpha."""

    def __init__(self, workload: Workload, prioritized: bool, seed: int = 0) -> None:
        self.capacity = workload.capacity
        self.columns = {name: np.zeros((self.capacity, *shape), dtype=dtype)
                        for name, dtype, shape in workload.fields}
        self.next_slot = 0
        self.size = 0
        self.tree: Optional[SumTree] = (SumTree(np.zeros(2 * tree_leaves(self.capacity)))
                                        if prioritized else None)
        self.max_mass = 1.0
        self.rng = np.random.default_rng(seed)
        self.lock = threading.Lock()

    def insert(self, batch: Dict[str, np.ndarray]) -> int:
        """Stores n items (evicting the oldest when full); returns n."""
        with self.lock:
            n = len(next(iter(batch.values())))
            slots = (self.next_slot + np.arange(n)) % self.capacity
            for name, column in self.columns.items():
                column[slots] = batch[name]
            self.next_slot = int((self.next_slot + n) % self.capacity)
            self.size = min(self.capacity, self.size + n)
            if self.tree is not None:
                self.tree.set(slots, np.full(n, self.max_mass))
            return n

    def sample(self, n: int) -> Tuple[Dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """(columns of n items, their slots, importance weights); uniform or proportional."""
        with self.lock:
            if self.tree is None:
                slots = self.rng.integers(0, self.size, n)
                weights = np.ones(n)
            else:
                slots, probabilities = self.tree.draw(n, self.rng)
                weights = importance_weights(probabilities, self.size)
            data = {name: column[slots] for name, column in self.columns.items()}
            return data, slots, weights

    def update_priorities(self, slots: np.ndarray, priorities: np.ndarray) -> None:
        with self.lock:
            assert self.tree is not None, "update_priorities on a uniform store"
            masses = np.asarray(priorities, dtype=np.float64) ** PRIORITY_EXPONENT
            self.max_mass = max(self.max_mass, float(masses.max()))
            self.tree.set(slots, masses)
