"""A buffer object in a server process behind `multiprocessing.managers` proxies: the
standard library's equivalent of a replay buffer held by a Ray actor.

The server process owns a ColumnStore (numpy columns, FIFO slots, a numpy sum tree when
prioritized). Every proxy call is one synchronous round trip that pickles its arguments
and result; the manager serves each connection on its own thread, and the store's lock
serializes them. Proxies have no asynchronous calls, so this system has no writer,
pipelined or prefetch mode.
"""
from __future__ import annotations

import os
from multiprocessing.managers import BaseManager
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np

from systems.arrays import ColumnStore
from systems.base import Batch, Endpoint, System
from workloads import Workload

__all__ = ["ManagerSystem"]

_STORE: Optional[ColumnStore] = None  # in the manager's server process


def _get_store() -> ColumnStore:
    assert _STORE is not None
    return _STORE


def _init_store(workload: Workload, prioritized: bool) -> None:
    global _STORE
    _STORE = ColumnStore(workload, prioritized)


class BufferManager(BaseManager):
    pass


BufferManager.register("store", callable=_get_store,
                       exposed=("insert", "sample", "update_priorities"))


class ManagerEndpoint(Endpoint):
    native: frozenset = frozenset()

    def __init__(self, handle: Dict[str, Any]) -> None:
        self.manager = BufferManager(address=handle["address"], authkey=handle["authkey"])
        self.manager.connect()
        self.store = self.manager.store()

    def insert(self, batch: Dict[str, np.ndarray]) -> None:
        self.store.insert(batch)

    def sample(self, n: int) -> Batch:
        data, slots, weights = self.store.sample(n)
        return Batch(data, slots, weights)

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        self.store.update_priorities(keys, priorities)

    def close(self) -> None:
        del self.store


class ManagerSystem(System):
    name = "manager"
    endpoint_type = ManagerEndpoint

    def __init__(self) -> None:
        self.manager: Optional[BufferManager] = None

    def create_store(self, workload: Workload, prioritized: bool, workdir: Path) -> Any:
        authkey = os.urandom(16)
        address = str(workdir / "manager.sock")
        self.manager = BufferManager(address=address, authkey=authkey)
        self.manager.start(initializer=_init_store, initargs=(workload, prioritized))
        return {"address": address, "authkey": authkey}

    def destroy_store(self) -> None:
        if self.manager is not None:
            self.manager.shutdown()
            self.manager = None

    @staticmethod
    def connect(handle: Any) -> Endpoint:
        return ManagerEndpoint(handle)
