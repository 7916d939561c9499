"""The real cpprb's multiprocess buffer (MPReplayBuffer / MPPrioritizedReplayBuffer,
alpha 0.6): the columns in shared memory (sharedctypes), made in the benchmark's process
and used by forked workers, a lock around each add and sample; no server, no socket. The
cpprb users' way to share one buffer between explorer processes and a learner.

Imported from CPPRB_REAL as systems/cpprb_real.py does; `available` says whether it is there.
"""
from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

from systems.base import Endpoint, System
from systems.cpprb_real import FILL_BATCH, CpprbRealEndpoint, _import_cpprb, available, env_dict
from systems.arrays import PRIORITY_EXPONENT
from workloads import Workload

__all__ = ["CpprbMPSystem", "available"]


class CpprbMPSystem(System):
    name = "cpprb-mp"
    networked = False
    endpoint_type = CpprbRealEndpoint

    def __init__(self) -> None:
        self.handle: Any = None

    def create_store(self, workload: Workload, prioritized: bool, workdir: Path) -> Any:
        cpprb = _import_cpprb()
        env = env_dict(workload)
        ctx = mp.get_context("fork")
        rb = (cpprb.MPPrioritizedReplayBuffer(workload.capacity, env, alpha=PRIORITY_EXPONENT,
                                              ctx=ctx)
              if prioritized else cpprb.MPReplayBuffer(workload.capacity, env, ctx=ctx))
        for start in range(0, workload.capacity, FILL_BATCH):
            rb.add(**workload.batch(min(FILL_BATCH, workload.capacity - start),
                                    seed=100 + start))
        self.handle = (rb, prioritized)
        return self.handle

    def destroy_store(self) -> None:
        self.handle = None

    @staticmethod
    def connect(handle: Any) -> Endpoint:
        return CpprbRealEndpoint(handle)
