#!/usr/bin/python3
"""Explorers and a learner held together by a samples_per_insert rate limiter: 4 explorer
processes append 32-byte items through writers (64 per request), one learner samples
batches of 256, for SECONDS; the table's SampleToInsertRatio(1.0) keeps the two rates
equal, so the figure is the pair's common rate. Used to weigh the scheduler's
learner_share when a rate limiter, not the thread, paces the learner (docs/BENCHMARKS.md,
"Scheduling").

Usage: rate_limited_mix.py ADDRESS [SECONDS]   (start the server pinned to CPU 0 and this
script to CPU 1, as scripts/bench-scale does)
"""
import multiprocessing as mp
import sys
import time

import numpy as np

import replayd
from replayd.rate_limiters import SampleToInsertRatio

EXPLORERS = 4


def explorer(address: str, seconds: float, results: "mp.Queue[tuple]") -> None:
    client = replayd.Client(address, timeout=60)
    item = {"obs": np.zeros(8, np.float32)}
    count = 0
    start = time.monotonic()
    with client.writer("t", batch=64) as writer:
        while time.monotonic() - start < seconds:
            writer.append(item)
            count += 1
    results.put(("insert", count))


def learner(address: str, seconds: float, results: "mp.Queue[tuple]",
            explorers_done: "mp.Event") -> None:
    client = replayd.Client(address, timeout=60)
    count = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        client.sample("t", 256)
        count += 256
    results.put(("sample", count))
    while not explorers_done.is_set():  # releases the explorers' last inserts
        client.sample("t", 256, timeout=1)


def main(address: str, seconds: float) -> None:
    mp.set_start_method("spawn")
    client = replayd.Client(address, timeout=60)
    client.create_table("t", {"obs": (np.float32, (8,))}, 100_000,
                        rate_limiter=SampleToInsertRatio(samples_per_insert=1.0,
                                                         min_size_to_sample=1000,
                                                         error_buffer=2000))
    results: "mp.Queue[tuple]" = mp.Queue()
    done = mp.Event()
    explorers = [mp.Process(target=explorer, args=(address, seconds, results))
                 for _ in range(EXPLORERS)]
    sampler = mp.Process(target=learner, args=(address, seconds, results, done))
    for process in explorers + [sampler]:
        process.start()
    counts = [results.get() for _ in range(EXPLORERS + 1)]
    for process in explorers:
        process.join()
    done.set()
    sampler.join()
    inserted = sum(n for kind, n in counts if kind == "insert")
    sampled = sum(n for kind, n in counts if kind == "sample")
    print(f"inserts/s {inserted / seconds:,.0f} samples/s {sampled / seconds:,.0f}")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 5.0)
