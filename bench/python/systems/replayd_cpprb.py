"""replayd through replayd.cpprb, written as a cpprb user writes it: the same server as the
"replayd" column, a ReplayBuffer / PrioritizedReplayBuffer (alpha 0.6) of the workload's
env_dict in each worker (every worker's buffer names the same table), ``add(**item)`` per
transition or per batch, ``sample(n)`` (``sample(n, beta)`` and ``update_priorities`` on a
prioritized store).

Modes: "writer" is ``add`` of one transition (replayd.cpprb batches them, without a round
trip per call); cpprb has no synchronous insert, so "sync" is ``add`` followed by
``get_stored_size()`` (one round trip, after which the transition is stored); a batch
``add`` waits for its reply; cpprb has no pipelined inserts. "prefetch" is a buffer made
with replayd's ``prefetch=True`` (each sample asks for the next at once), whose priority
updates do not wait either.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator

import numpy as np

from replayd.cpprb import PrioritizedReplayBuffer, ReplayBuffer
from systems.arrays import BETA, PRIORITY_EXPONENT
from systems.base import Batch, Endpoint
from systems.replayd_system import ReplaydSystem
from workloads import Workload

__all__ = ["ReplaydCpprbSystem"]

TABLE = "bench-cpprb"


def env_dict(workload: Workload) -> Dict[str, Any]:
    """cpprb's env_dict of the workload: scalars as cpprb writes them (no shape: (1,))."""
    return {name: ({"dtype": dtype, "shape": shape} if shape else {"dtype": dtype})
            for name, dtype, shape in workload.fields}


class ReplaydCpprbEndpoint(Endpoint):
    native = frozenset({"writer", "prefetch"})

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.rb = self.buffer(prefetch=False)
        self.prioritized = bool(handle[3])

    def buffer(self, prefetch: bool) -> ReplayBuffer:
        address, size, env, prioritized = self.handle
        if prioritized:
            return PrioritizedReplayBuffer(size, env, alpha=PRIORITY_EXPONENT, address=address,
                                           table=TABLE, prefetch=prefetch)
        return ReplayBuffer(size, env, address=address, table=TABLE, prefetch=prefetch)

    def samples(self, n: int, prefetch: int) -> Iterator[Batch]:
        self.rb = self.buffer(prefetch=True)  # its updates go on the same connection
        while True:
            yield self.sample(n)

    def insert_one(self, item: Dict[str, Any]) -> None:
        self.rb.add(**item)
        self.rb.get_stored_size()

    def insert(self, batch: Dict[str, np.ndarray]) -> None:
        self.rb.add(**batch)

    def append(self, item: Dict[str, Any]) -> None:
        self.rb.add(**item)

    def sample(self, n: int) -> Batch:
        if self.prioritized:
            assert isinstance(self.rb, PrioritizedReplayBuffer)
            data = self.rb.sample(n, BETA)
            return Batch(data, data["indexes"], data["weights"])
        data = self.rb.sample(n)
        return Batch(data, np.zeros(n, np.uint64), np.ones(n))

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        assert isinstance(self.rb, PrioritizedReplayBuffer)
        self.rb.update_priorities(keys, priorities)

    def flush(self) -> None:
        self.rb.get_stored_size()  # sends what the buffer's writer holds and waits

    def close(self) -> None:
        self.flush()


class ReplaydCpprbSystem(ReplaydSystem):
    name = "replayd.cpprb"
    endpoint_type = ReplaydCpprbEndpoint

    def create_store(self, workload: Workload, prioritized: bool, workdir: Any) -> Any:
        address = super().create_store(workload, prioritized, workdir)
        env = env_dict(workload)
        handle = (address, workload.capacity, env, prioritized)
        ReplaydCpprbEndpoint(handle)  # creates the table; workers' buffers reuse it
        return handle

    @staticmethod
    def connect(handle: Any) -> Endpoint:
        return ReplaydCpprbEndpoint(handle)
