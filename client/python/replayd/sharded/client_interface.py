"""`ShardedClientLike`: the part of `ShardedClient` that the episodic helpers of
replayd.sharded.episodes use (its shards, its shard choice, its per-table window states
and its gather of shard parts), as a typing.Protocol.

episodes.py annotates with it, so it need not import sharded/client.py, which imports it
to build ShardedEpisodeWriter and window draws: the two modules form no import cycle.
Holds no state.
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable, ContextManager, Dict, List, Optional, Protocol, Set, Tuple

import numpy as np

from ..client import Client
from ..sample import Sample

__all__ = ["ShardedClientLike", "WindowState"]

#: One shard's window index for a requirement: valid starts, their mass, the smallest
#: positive mass.
WindowState = Tuple[int, float, float]


class ShardedClientLike(Protocol):
    """What ShardedEpisodeWriter, `sample_windows_async` and `read_all` use of their
    client (a `replayd.ShardedClient`)."""

    @property
    def shards(self) -> List[Client]:
        """One Client per shard, in shard order (a key's top bits index it)."""
        ...

    @property
    def episodic_tables(self) -> Set[str]:
        """Tables known to be episodic (added to once checked)."""
        ...

    @property
    def window_states(self) -> Dict[str, Dict[Tuple[Any, ...], List[Optional[WindowState]]]]:
        """Per table, per window requirement, each shard's last known window state."""
        ...

    @property
    def _lock(self) -> ContextManager[Any]:
        """Held while reading or changing window_states."""
        ...

    def pick_shard(self) -> int:
        """The next shard in round-robin order."""
        ...

    def _gather(self, batch_size: int, shares: np.ndarray[Any, Any],
                combine: Callable[[List[Tuple[int, Sample]]], Sample],
                request: Callable[[Client, int], "Future[Sample]"]) -> "Future[Sample]":
        """A Future of `combine` over the shards' parts of a draw split by `shares`."""
        ...
