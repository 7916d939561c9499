"""The real cpprb (the library replayd.cpprb imitates), as its users run it: a
ReplayBuffer / PrioritizedReplayBuffer (alpha 0.6) of the workload's env_dict inside the
process that adds and samples; no server, no socket.

It is imported from CPPRB_REAL (default /tmp/cpprb-real, where
``FILES=' ' ../shared/cpprb/run-suite`` builds it); `available` says whether it is there.
A buffer is local memory, so the store is built and filled in the main process, and each
forked worker works on its own copy of it (inserts of one worker are not seen by another;
each measure runs in one worker, so that costs nothing measured).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Dict

import numpy as np

from systems.arrays import BETA, PRIORITY_EXPONENT
from systems.base import Batch, Endpoint, System
from workloads import Workload

__all__ = ["CpprbRealSystem", "available", "CPPRB_REAL"]

CPPRB_REAL = Path(os.environ.get("CPPRB_REAL", "/tmp/cpprb-real"))
FILL_BATCH = 1024


def _import_cpprb() -> Any:
    if str(CPPRB_REAL) not in sys.path:
        sys.path.insert(0, str(CPPRB_REAL))
    import cpprb  # the real one; replayd's imitation is replayd.cpprb
    return cpprb


def available() -> bool:
    """Whether the real cpprb is built at CPPRB_REAL (a fresh subprocess imports it)."""
    import subprocess
    probe = subprocess.run([sys.executable, "-c", "import cpprb.PyReplayBuffer"],
                           env=dict(os.environ, PYTHONPATH=str(CPPRB_REAL)),
                           capture_output=True, timeout=60)
    return probe.returncode == 0


def env_dict(workload: Workload) -> Dict[str, Any]:
    return {name: ({"dtype": dtype, "shape": shape} if shape else {"dtype": dtype})
            for name, dtype, shape in workload.fields}


class CpprbRealEndpoint(Endpoint):
    native: frozenset = frozenset()  # every call is a local, synchronous one

    def __init__(self, handle: Any) -> None:
        self.rb, self.prioritized = handle

    def insert_one(self, item: Dict[str, Any]) -> None:
        self.rb.add(**item)

    def insert(self, batch: Dict[str, np.ndarray]) -> None:
        self.rb.add(**batch)

    def sample(self, n: int) -> Batch:
        if self.prioritized:
            data = self.rb.sample(n, beta=BETA)
            return Batch(data, data["indexes"], data["weights"])
        data = self.rb.sample(n)
        return Batch(data, np.zeros(n, np.uint64), np.ones(n))

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        self.rb.update_priorities(keys, priorities)


class CpprbRealSystem(System):
    name = "cpprb"
    networked = False
    endpoint_type = CpprbRealEndpoint

    def __init__(self) -> None:
        self.handle: Any = None

    def create_store(self, workload: Workload, prioritized: bool, workdir: Path) -> Any:
        cpprb = _import_cpprb()
        env = env_dict(workload)
        rb = (cpprb.PrioritizedReplayBuffer(workload.capacity, env, alpha=PRIORITY_EXPONENT)
              if prioritized else cpprb.ReplayBuffer(workload.capacity, env))
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
