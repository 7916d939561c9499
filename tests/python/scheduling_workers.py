"""Process entry points of test_scheduling.py (importable by spawned children): learners
pinned to one CPU, reporting how many samples they made."""
from __future__ import annotations

import os
import time

import replayd


def small_learner(address: str, cpu: int, start_at: float, seconds: float, results) -> None:
    """Samples 32 small items, one request at a time, from start_at for `seconds`."""
    os.sched_setaffinity(0, {cpu})
    client = replayd.Client(address, timeout=60)
    time.sleep(max(0.0, start_at - time.time()))
    count = 0
    while time.time() < start_at + seconds:
        client.sample("small", 32)
        count += 1
    results.put(("small", count / seconds))


def greedy_learner(address: str, cpu: int, start_at: float, seconds: float, results) -> None:
    """Samples the whole 'big' table (64 MiB) with 4 requests in flight, reading each reply
    as soon as it arrives, from start_at for `seconds`."""
    os.sched_setaffinity(0, {cpu})
    client = replayd.Client(address, timeout=60)
    size = client.size("big")
    time.sleep(max(0.0, start_at - time.time()))
    count = 0
    with client.sampler("big", size, prefetch=4) as sampler:
        for _ in sampler:
            count += 1
            if time.time() >= start_at + seconds:
                break
    results.put(("greedy", count / seconds))

