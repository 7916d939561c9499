"""replayd through its Python client: a replayd server started on a temporary Unix socket.

Modes: the Writer (1-item appends, its default batch, 8 batches in flight), insert_async
(pipelined batches), the prefetching Sampler, and update_priorities_async (updates never
wait for their reply; `flush` collects them).

Two systems: "replayd" is the client as it comes, using the shared-memory plane the server
offers on its Unix socket (docs/SHM.md); "replayd-socket" is the same client with
``shm=False``, every byte through the socket. REPLAYD_BENCH_SERVER_CPU, when set, pins the
server to that CPU (taskset).
"""
from __future__ import annotations

import collections
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Deque, Dict, Iterator, Optional, Tuple

import numpy as np

import replayd
from systems.arrays import BETA, PRIORITY_EXPONENT
from systems.base import Batch, Endpoint, System
from workloads import Workload

__all__ = ["ReplaydSystem", "ReplaydSocketSystem", "ReplaydRowsSystem", "ReplaydDeepSystem",
           "server_binary"]

TABLE = "bench"
MAX_IN_FLIGHT = 8  # pipelined insert batches and priority updates awaiting replies


def server_binary() -> Path:
    """REPLAYD_BIN, else build/service/replayd of this checkout."""
    repo = Path(__file__).resolve().parents[3]
    return Path(os.environ.get("REPLAYD_BIN", repo / "build" / "service" / "replayd"))


class ReplaydEndpoint(Endpoint):
    native = frozenset({"writer", "pipelined", "prefetch"})

    def __init__(self, address: str, shm: Optional[bool] = None) -> None:
        self.client = replayd.Client(address, shm=shm)
        self.client.schema(TABLE)
        self.writer: Optional[replayd.Writer] = None
        self.in_flight: Deque[Any] = collections.deque()

    def insert_one(self, item: Dict[str, Any]) -> None:
        self.client.insert(TABLE, item)

    def insert(self, batch: Dict[str, np.ndarray]) -> None:
        self.client.insert(TABLE, batch)

    def append(self, item: Dict[str, Any]) -> None:
        if self.writer is None:
            # The client's default batch (about 64 KiB: 1024 W1 items, 64 W2 ones).
            self.writer = self.client.writer(TABLE, max_in_flight=MAX_IN_FLIGHT)
        self.writer.append(item)

    def insert_pipelined(self, batch: Dict[str, np.ndarray]) -> None:
        self._bound_in_flight()
        self.in_flight.append(self.client.insert_async(TABLE, batch))

    def sample(self, n: int) -> Batch:
        s = self.client.sample(TABLE, n, beta=BETA)
        return Batch(s.data, s.keys, s.weights)

    def samples(self, n: int, prefetch: int) -> Iterator[Batch]:
        with self.client.sampler(TABLE, n, prefetch=prefetch, beta=BETA) as sampler:
            for s in sampler:
                yield Batch(s.data, s.keys, s.weights)

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        self._bound_in_flight()
        self.in_flight.append(self.client.update_priorities_async(TABLE, keys, priorities))

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()
        while self.in_flight:
            self.in_flight.popleft().result()

    def close(self) -> None:
        self.flush()
        self.client.close()

    #: Requests (or insert_async calls) awaiting replies before the next waits for the oldest.
    max_in_flight = MAX_IN_FLIGHT

    def _bound_in_flight(self) -> None:
        while len(self.in_flight) >= self.max_in_flight:
            self.in_flight.popleft().result()


class ReplaydSystem(System):
    name = "replayd"
    networked = True
    endpoint_type = ReplaydEndpoint
    #: More of the server's flags (the default configuration: none).
    server_args: Tuple[str, ...] = ()

    def __init__(self) -> None:
        self.proc: Optional[subprocess.Popen] = None

    def create_store(self, workload: Workload, prioritized: bool, workdir: Path) -> Any:
        binary = server_binary()
        if not binary.exists():
            raise RuntimeError(f"replayd binary not found at {binary}: run scripts/build or "
                               f"set REPLAYD_BIN")
        sock, ready = workdir / "replayd.sock", workdir / "replayd.ready"
        for path in (sock, ready):
            path.unlink(missing_ok=True)
        log = open(workdir / "replayd.log", "ab")
        pin = os.environ.get("REPLAYD_BENCH_SERVER_CPU")
        self.proc = subprocess.Popen([*(["taskset", "-c", pin] if pin else []),
                                      str(binary), "--unix", str(sock), "--tcp", "", "--metrics", "",
                                      "--ready-file", str(ready), "--log-level", "warn",
                                      *self.server_args],
                                     stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + 10
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.destroy_store()
                log_tail = (workdir / "replayd.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{binary} did not start; its log:\n{log_tail}")
            time.sleep(0.01)
        address = f"unix://{sock}"
        with replayd.Client(address) as client:
            client.create_table(TABLE, {name: (dtype, shape)
                                        for name, dtype, shape in workload.fields},
                                capacity=workload.capacity,
                                sampler="prioritized" if prioritized else "uniform",
                                priority_exponent=PRIORITY_EXPONENT, remover="fifo",
                                rate_limiter=replayd.MinSize(1), seed=0)
        return address

    def destroy_store(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    @staticmethod
    def connect(handle: Any) -> Endpoint:
        return ReplaydEndpoint(handle)


class ReplaydRowsEndpoint(ReplaydEndpoint):
    """insert_pipelined through a VectorWriter: each call's rows go into the writer's
    batches (about 64 KiB a request: 1,024 W1 rows, 64 W2 ones), so consecutive calls
    share requests; keys and errors are the writer's (later, per batch)."""

    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.rows_writer: Optional[replayd.VectorWriter] = None

    def insert_pipelined(self, batch: Dict[str, np.ndarray]) -> None:
        n = len(next(iter(batch.values())))
        if self.rows_writer is None or self.rows_writer.envs != n:
            if self.rows_writer is not None:
                self.rows_writer.close()
            self.rows_writer = self.client.vector_writer(TABLE, n, max_in_flight=MAX_IN_FLIGHT)
        self.rows_writer.append(batch)

    def flush(self) -> None:
        if self.rows_writer is not None:
            self.rows_writer.flush()
        super().flush()


class ReplaydRowsSystem(ReplaydSystem):
    """The same server; 64-row inserts through a VectorWriter (ReplaydRowsEndpoint)."""

    name = "replayd-writer"
    endpoint_type = ReplaydRowsEndpoint

    @staticmethod
    def connect(handle: Any) -> Endpoint:
        return ReplaydRowsEndpoint(handle)


class ReplaydDeepEndpoint(ReplaydEndpoint):
    """insert_async with 32 calls in flight (the client's own window of insert_async calls)
    instead of 8: the caller waits for a call's keys only 32 calls later, so more calls
    share each request."""

    max_in_flight = 32


class ReplaydDeepSystem(ReplaydSystem):
    """The same server; insert_async with 32 calls in flight (ReplaydDeepEndpoint)."""

    name = "replayd-deep"
    endpoint_type = ReplaydDeepEndpoint

    @staticmethod
    def connect(handle: Any) -> Endpoint:
        return ReplaydDeepEndpoint(handle)


class ReplaydPollSystem(ReplaydSystem):
    """The same client, the server's thread polling 200 us for work before it sleeps
    (``--busy-poll-us 200``, docs/OPERATIONS.md, Busy polling): for a server with a core
    of its own."""

    name = "replayd-poll"
    server_args = ("--busy-poll-us", "200")


class ReplaydSocketSystem(ReplaydSystem):
    """The same server and client, the shared-memory plane turned off (``shm=False``)."""

    name = "replayd-socket"

    @staticmethod
    def connect(handle: Any) -> Endpoint:
        return ReplaydEndpoint(handle, shm=False)
