"""The interface every benchmarked system implements.

A `System` lives in the benchmark's main process: it starts a store (a server process, or
shared memory) for one workload and hands out a small `handle`. Worker processes (forked)
call `System.connect(handle)` to get an `Endpoint`, the client side, which they own alone.

Endpoint calls are synchronous unless named otherwise; `flush` waits for everything an
asynchronous call (`append`, `insert_pipelined`, `update_priorities`) left in flight.
`native` lists the asynchronous modes the system has for real; for the others the
default methods below fall back to the synchronous call, and the runner reports the
synchronous number instead of measuring the same thing twice.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterator, Type

import numpy as np

from workloads import Workload

__all__ = ["Batch", "Endpoint", "System", "MODES"]

#: Asynchronous modes a system may have: a non-blocking 1-item insert, batches in flight,
#: sample requests prefetched.
MODES = ("writer", "pipelined", "prefetch")


@dataclass
class Batch:
    """A sampled batch: field -> (n, *shape) arrays, the keys to update, IS weights."""

    data: Dict[str, np.ndarray]
    keys: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return int(self.keys.shape[0])


class Endpoint:
    """The client side of a store, used by one worker process."""

    native: FrozenSet[str] = frozenset()

    def insert_one(self, item: Dict[str, Any]) -> None:
        """Stores one transition (no batch dimension) and waits until it is stored."""
        self.insert({k: np.asarray(v)[np.newaxis] for k, v in item.items()})

    def insert(self, batch: Dict[str, np.ndarray]) -> None:
        """Stores n transitions (columns with a leading batch dimension), waiting."""
        raise NotImplementedError

    def append(self, item: Dict[str, Any]) -> None:
        """Hands one transition over without waiting for the store (mode "writer")."""
        self.insert_one(item)

    def insert_pipelined(self, batch: Dict[str, np.ndarray]) -> None:
        """Sends a batch without waiting for its acknowledgement (mode "pipelined")."""
        self.insert(batch)

    def sample(self, n: int) -> Batch:
        """One uniform (or, on a prioritized store, proportional) sample, waiting."""
        raise NotImplementedError

    def samples(self, n: int, prefetch: int) -> Iterator[Batch]:
        """Endless samples with up to `prefetch` requests ahead (mode "prefetch")."""
        while True:
            yield self.sample(n)

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        """Sets the priorities of sampled items (may return before they apply)."""
        raise NotImplementedError

    def flush(self) -> None:
        """Waits until everything sent asynchronously is stored."""

    def close(self) -> None:
        """Releases the connection."""


class System:
    """A store factory in the main process. One store at a time."""

    name = "?"
    networked = True  # items cross a socket to another process
    endpoint_type: Type[Endpoint] = Endpoint  # what `connect` returns (its `native` modes)

    def create_store(self, workload: Workload, prioritized: bool, workdir: Path) -> Any:
        """Starts an empty store for `workload`; returns the handle workers connect with.
        A prioritized store samples in proportion to priority^0.6 (new items get the
        largest priority seen), with importance weights for beta 0.4."""
        raise NotImplementedError

    def destroy_store(self) -> None:
        """Stops the store and frees what it holds. Idempotent."""

    @staticmethod
    def connect(handle: Any) -> Endpoint:
        """In a worker process: a new Endpoint on the store of `handle`."""
        raise NotImplementedError
