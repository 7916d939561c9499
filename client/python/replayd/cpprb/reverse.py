"""cpprb.ReverseReplayBuffer (Reverse Experience Replay, arXiv:1910.08780) on a
replayd.cpprb buffer, with cpprb's documented sampling (cpprb's RER page and its tests):

    sample k (k = 0, 1, ...) returns the ring positions
        t - i - j * stride   (mod the stored size),  j = 0 .. batch_size - 1,
    t the newest transition at that call and i = k mod (2 * stride): after the first index
    has gone 2 * stride steps back from the newest, it starts at the newest again.

Each sample reads the whole table in order (``read_steps``): it costs O(stored size), not
O(batch_size), so this class suits the small buffers RER is used with.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np

from .buffers import ReplayBuffer

__all__ = ["ReverseReplayBuffer"]


class ReverseReplayBuffer(ReplayBuffer):
    """cpprb.ReverseReplayBuffer: strided batches from the newest transition backwards.

    Args:
        size, env_dict, **kwargs: as ReplayBuffer.
        stride: positions between the transitions of one batch (>= 1; cpprb's default 300).
    """

    def __init__(self, size: int, env_dict: Optional[Mapping[str, Any]] = None, *,
                 stride: int = 300, **kwargs: Any) -> None:
        if int(stride) < 1:
            raise ValueError(f"stride must be >= 1, got {stride!r}")
        self._stride = int(stride)
        self._back = 0  # i: how far the first index of the next sample is behind the newest
        super().__init__(size, env_dict, **kwargs)

    def sample(self, batch_size: int) -> Dict[str, np.ndarray[Any, Any]]:
        """`batch_size` transitions at the newest - i - j * stride ring positions (see the
        module docstring); raises ValueError when the buffer is empty."""
        ordered = self._ordered()  # oldest first: ring positions, rotated to the newest
        stored = next(iter(ordered.values())).shape[0]
        if stored == 0:
            raise ValueError(f"cannot sample from table '{self._table}': it is empty")
        positions = (stored - 1 - self._back - np.arange(int(batch_size)) * self._stride) % stored
        self._back = (self._back + 1) % (2 * self._stride)
        return {name: values[positions] for name, values in ordered.items()}
