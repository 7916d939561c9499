"""The two workloads of the Python comparison benchmark, and the data they insert.

W1 is a control task (CartPole-sized items, 45 B); W2 is Atari (two stacks of four 84x84
frames, 56,457 B). Pure data: every process builds the same items from the same seed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

import numpy as np

__all__ = ["Workload", "WORKLOADS", "SAMPLE_POOL_ITEMS"]

SAMPLE_POOL_ITEMS = 64  # distinct items cycled through by the insert loops


@dataclass(frozen=True)
class Workload:
    """Fields of one transition, the table capacity and the learner's batch size."""

    name: str
    fields: Tuple[Tuple[str, str, Tuple[int, ...]], ...]  # (name, numpy dtype, item shape)
    capacity: int
    sample_batch: int

    @property
    def item_bytes(self) -> int:
        return self.record_dtype.itemsize

    @property
    def record_dtype(self) -> np.dtype:
        """One transition as a packed numpy record (how byte stores keep it)."""
        return np.dtype([(name, dtype, shape) for name, dtype, shape in self.fields])

    def batch(self, n: int, seed: int = 0) -> Dict[str, np.ndarray]:
        """n random transitions as columns: field -> array of shape (n, *item_shape)."""
        rng = np.random.default_rng(seed)
        out: Dict[str, np.ndarray] = {}
        for name, dtype, shape in self.fields:
            kind = np.dtype(dtype).kind
            if kind == "f":
                out[name] = rng.standard_normal((n, *shape)).astype(dtype)
            elif kind == "u" and np.dtype(dtype).itemsize == 1:
                out[name] = rng.integers(0, 256, (n, *shape), dtype=np.uint8)
            else:
                out[name] = rng.integers(0, 2 if name == "done" else 18, (n, *shape)).astype(dtype)
        return out

    def items(self, n: int = SAMPLE_POOL_ITEMS, seed: int = 1) -> List[Dict[str, Any]]:
        """n single transitions as an environment loop produces them: observations as
        numpy arrays, action, reward and done as Python int, float and bool."""
        columns = self.batch(n, seed)
        out = []
        for i in range(n):
            item: Dict[str, Any] = {}
            for name, dtype, shape in self.fields:
                value = columns[name][i]
                if shape:
                    item[name] = np.array(value)  # an array of its own, as env.step returns
                elif name == "done":
                    item[name] = bool(value)
                elif np.dtype(dtype).kind == "f":
                    item[name] = float(value)
                else:
                    item[name] = int(value)
            out.append(item)
        return out


W1 = Workload("W1", (("obs", "float32", (4,)), ("act", "int64", ()), ("rew", "float32", ()),
                     ("next_obs", "float32", (4,)), ("done", "uint8", ())),
              capacity=100_000, sample_batch=256)
W2 = Workload("W2", (("obs", "uint8", (4, 84, 84)), ("act", "int32", ()), ("rew", "float32", ()),
                     ("next_obs", "uint8", (4, 84, 84)), ("done", "uint8", ())),
              capacity=10_000, sample_batch=32)

WORKLOADS: Dict[str, Workload] = {"W1": W1, "W2": W2}
