"""The measures of the comparison benchmark, each run in forked worker processes.

A measure runs for `duration_s` of wall time after a short warm-up and returns the
transitions per second it achieved; the clock stops after `flush` (whatever was sent
asynchronously is stored). The main process only starts stores and workers: no socket or
client of its own crosses a fork.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Type

import numpy as np

from systems.base import Endpoint, System
from workloads import Workload

__all__ = ["Measure", "MEASURES", "fill", "memcpy_gb_per_s", "run_measure", "run_mixed"]

CTX = mp.get_context("fork")
FILL_BATCH = 256
WARMUP_S = 0.2  # default warm-up before each timed loop
PREFETCH = 4
WORKER_TIMEOUT_S = 300.0

#: The last timed loop of this process: transitions, wall seconds, CPU seconds of this
#: process (all its threads). Read by profile_client.py.
LAST_TIMING: Dict[str, float] = {}


@dataclass(frozen=True)
class Measure:
    """One row of the result table."""

    key: str
    title: str
    mode: Optional[str]  # the asynchronous mode it needs; None: synchronous
    fallback: Optional[str]  # measure whose number stands in when the mode is missing
    prioritized: bool = False


MEASURES: Dict[str, Measure] = {m.key: m for m in (
    Measure("insert1_sync", "(a) insert 1/call, sync", None, None),
    Measure("insert1_writer", "(a) insert 1/call, writer", "writer", "insert1_sync"),
    Measure("insert64_sync", "(b) insert 64/call, sync", None, None),
    Measure("insert64_pipelined", "(b) insert 64/call, pipelined", "pipelined",
            "insert64_sync"),
    Measure("sample_sync", "(c) uniform sample, sync", None, None),
    Measure("sample_prefetch", "(c) uniform sample, prefetch", "prefetch", "sample_sync"),
    Measure("prioritized", "(d) prioritized sample+update", None, None, prioritized=True),
)}


def _timed(step: Callable[[], int], endpoint: Endpoint, duration_s: float,
           warmup_s: float) -> float:
    """Calls step (which returns transitions handled) for warmup_s, then for duration_s;
    returns transitions/s of the second part."""
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        step()
    endpoint.flush()
    count = 0
    cpu_start = time.process_time()
    start = time.perf_counter()
    end = start + duration_s
    while time.perf_counter() < end:
        count += step()
    endpoint.flush()
    elapsed = time.perf_counter() - start
    LAST_TIMING.update(count=count, elapsed_s=elapsed,
                       client_cpu_s=time.process_time() - cpu_start)
    return count / elapsed


def _loop(key: str, endpoint: Endpoint, workload: Workload, duration_s: float,
          warmup_s: float = WARMUP_S) -> float:
    """The loop of measure `key` on an endpoint of a full store."""
    items = workload.items()
    batch = workload.batch(64, seed=2)
    n = workload.sample_batch
    state = {"i": 0}

    def next_item() -> Dict[str, Any]:
        state["i"] += 1
        return items[state["i"] % len(items)]

    if key == "insert1_sync":
        return _timed(lambda: endpoint.insert_one(next_item()) or 1, endpoint, duration_s, warmup_s)
    if key in ("insert1_writer", "explorer"):
        return _timed(lambda: endpoint.append(next_item()) or 1, endpoint, duration_s, warmup_s)
    if key == "insert64_sync":
        return _timed(lambda: endpoint.insert(batch) or 64, endpoint, duration_s, warmup_s)
    if key == "insert64_pipelined":
        return _timed(lambda: endpoint.insert_pipelined(batch) or 64, endpoint, duration_s, warmup_s)
    if key == "sample_sync":
        return _timed(lambda: len(endpoint.sample(n)), endpoint, duration_s, warmup_s)
    if key in ("sample_prefetch", "learner"):
        stream = endpoint.samples(n, PREFETCH)
        return _timed(lambda: len(next(stream)), endpoint, duration_s, warmup_s)
    if key == "prioritized":
        stream = endpoint.samples(n, PREFETCH)
        rng = np.random.default_rng(3)

        def step() -> int:
            sample = next(stream)
            endpoint.update_priorities(sample.keys, rng.random(len(sample)) + 0.01)
            return len(sample)
        return _timed(step, endpoint, duration_s, warmup_s)
    raise ValueError(f"unknown measure {key!r}")


#: The CPU worker processes run on (REPLAYD_BENCH_CLIENT_CPU; unset: wherever the OS puts
#: them). compare.py --pin sets it, and the server's (REPLAYD_BENCH_SERVER_CPU), apart.
def _pin_worker() -> None:
    cpu = os.environ.get("REPLAYD_BENCH_CLIENT_CPU")
    if cpu:
        os.sched_setaffinity(0, {int(cpu)})


def memcpy_gb_per_s(megabytes: int = 64, reps: int = 5) -> float:
    """Single-core memcpy bandwidth (numpy copyto of `megabytes`), the median of `reps`,
    measured in a worker process (pinned like the others)."""
    def job(queue: Any) -> None:
        _pin_worker()
        source = np.ones(megabytes << 20, np.uint8)
        target = np.empty_like(source)
        np.copyto(target, source)  # every page touched once
        rates = []
        for _ in range(reps):
            start = time.perf_counter()
            np.copyto(target, source)
            rates.append(source.nbytes / (time.perf_counter() - start) / 1e9)
        queue.put(sorted(rates)[len(rates) // 2])
    queue = CTX.Queue()
    proc = CTX.Process(target=job, args=(queue,), daemon=True)
    proc.start()
    value = float(queue.get(timeout=WORKER_TIMEOUT_S))
    proc.join(10)
    return value


def _worker(system: Type[System], handle: Any, job: Callable[[Endpoint], Any],
            results: Any, start: Any) -> None:
    try:
        _pin_worker()
        endpoint = system.connect(handle)
        if start is not None:
            start.wait()
        value = job(endpoint)
        endpoint.close()
        results.put(("ok", value))
    except BaseException:
        results.put(("error", traceback.format_exc()))


def _run_workers(system: Type[System], handle: Any,
                 jobs: List[Callable[[Endpoint], Any]]) -> List[Any]:
    """Runs each job in its own forked process on its own endpoint, all started together;
    returns their results in job order."""
    queues = [CTX.Queue() for _ in jobs]
    start = CTX.Barrier(len(jobs)) if len(jobs) > 1 else None
    procs = [CTX.Process(target=_worker, args=(system, handle, job, q, start), daemon=True)
             for job, q in zip(jobs, queues)]
    for p in procs:
        p.start()
    results = []
    try:
        for q in queues:
            status, value = q.get(timeout=WORKER_TIMEOUT_S)
            if status != "ok":
                raise RuntimeError(f"{system.name} worker failed:\n{value}")
            results.append(value)
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join()
    return results


def fill(system: Type[System], handle: Any, workload: Workload) -> None:
    """Fills the store to capacity with distinct random items (one worker, batches)."""
    def job(endpoint: Endpoint) -> None:
        for start in range(0, workload.capacity, FILL_BATCH):
            n = min(FILL_BATCH, workload.capacity - start)
            endpoint.insert(workload.batch(n, seed=100 + start))
    _run_workers(system, handle, [job])


def run_measure(system: Type[System], handle: Any, workload: Workload, key: str,
                duration_s: float, warmup_s: float = WARMUP_S) -> float:
    """Transitions/s of measure `key`, from one worker process."""
    return _run_workers(system, handle,
                        [lambda e: _loop(key, e, workload, duration_s, warmup_s)])[0]


def run_mixed(system: Type[System], handle: Any, workload: Workload,
              duration_s: float, warmup_s: float = WARMUP_S) -> Dict[str, float]:
    """One explorer (1 item per call, the system's writer mode) and one learner
    (prefetching uniform samples), separate processes, running at the same time."""
    explorer, learner = _run_workers(system, handle, [
        lambda e: _loop("explorer", e, workload, duration_s, warmup_s),
        lambda e: _loop("learner", e, workload, duration_s, warmup_s)])
    return {"explorer": explorer, "learner": learner}
