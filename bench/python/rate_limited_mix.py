#!/usr/bin/python3
"""Explorers and a learner held together by a samples_per_insert rate limiter: 4 explorer
processes append 32-byte items through writers (64 per request), one learner samples
batches of 256, for SECONDS; the table's SampleToInsertRatio(1.0) keeps the two rates
equal, so the figure is the pair's common rate. Used to weigh the scheduler's
learner_share when a rate limiter, not the thread, paces the learner (docs/BENCHMARKS.md,
"Scheduling").

Usage: rate_limited_mix.py ADDRESS [SECONDS]   (start the server pinned to CPU 0 and this
script to CPU 1, as scripts/bench-scale does)
       rate_limited_mix.py --binary BINARY [--shares 0 0.7] [--reps 5] [--seconds 5]
           starts BINARY pinned to CPU 0 (bench/python/pinned_server.py) with each
           learner_share in turn, REPS times, runs the pair on CPU 1, and prints each share's
           median common rate and its ratio to the first share's, within each repetition.
"""
import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

import replayd
from replayd.rate_limiters import SampleToInsertRatio

EXPLORERS = 4


def wait_until(start_at: float) -> None:
    """Every process starts measuring at the same wall-clock time (they start up unevenly)."""
    time.sleep(max(0.0, start_at - time.time()))


def explorer(address: str, start_at: float, seconds: float, results: "mp.Queue[tuple]") -> None:
    client = replayd.Client(address, timeout=60)
    item = {"obs": np.zeros(8, np.float32)}
    count = 0
    wait_until(start_at)
    with client.writer("t", batch=64) as writer:
        while time.time() < start_at + seconds:
            writer.append(item)
            count += 1
    results.put(("insert", count))


def learner(address: str, start_at: float, seconds: float, results: "mp.Queue[tuple]",
            explorers_done: "mp.Event") -> None:
    client = replayd.Client(address, timeout=60)
    count = 0
    wait_until(start_at)
    while time.time() < start_at + seconds:
        try:  # a bounded wait: past the end, the explorers may have stopped inserting
            client.sample("t", 256, timeout=0.5)
            count += 256
        except replayd.TimeoutError:
            pass
    results.put(("sample", count))
    while not explorers_done.is_set():  # releases the explorers' last inserts
        try:
            client.sample("t", 256, timeout=1)
        except replayd.TimeoutError:  # nothing to release for now; the explorers may flush
            pass


def run_pair(address: str, seconds: float) -> float:
    """Runs the pair against the server at `address`; returns the common rate (items/s)."""
    client = replayd.Client(address, timeout=60)
    client.create_table("t", {"obs": (np.float32, (8,))}, 100_000,
                        rate_limiter=SampleToInsertRatio(samples_per_insert=1.0,
                                                         min_size_to_sample=1000,
                                                         error_buffer=2000))
    results: "mp.Queue[tuple]" = mp.Queue()
    done = mp.Event()
    start_at = time.time() + 2.0
    explorers = [mp.Process(target=explorer, args=(address, start_at, seconds, results))
                 for _ in range(EXPLORERS)]
    sampler = mp.Process(target=learner, args=(address, start_at, seconds, results, done))
    for process in explorers + [sampler]:
        process.start()
    counts = [results.get() for _ in range(EXPLORERS + 1)]
    for process in explorers:
        process.join()
    done.set()
    sampler.join()
    inserted = sum(n for kind, n in counts if kind == "insert")
    sampled = sum(n for kind, n in counts if kind == "sample")
    print(f"inserts/s {inserted / seconds:,.0f} samples/s {sampled / seconds:,.0f}",
          file=sys.stderr)
    return min(inserted, sampled) / seconds


def compare_shares(binary: str, shares: List[float], reps: int, seconds: float) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from pinned_server import pinned_server
    os.sched_setaffinity(0, {1})
    rates: Dict[float, List[float]] = {share: [] for share in shares}
    for rep in range(reps):
        for share in shares:
            with pinned_server(binary, {"learner_share": share}) as address:
                rates[share].append(run_pair(address, seconds))
            print(f"  rep {rep + 1} learner_share {share}: {rates[share][-1]:,.0f} items/s",
                  file=sys.stderr)
    base = shares[0]
    print(f"| learner_share | common rate (items/s), median (min-max) | / learner_share {base}, "
          "median (min-max) |")
    print("|---:|---:|---:|")
    for share, values in rates.items():
        ratios = [a / b for a, b in zip(values, rates[base])]
        print(f"| {share} | {statistics.median(values):,.0f} ({min(values):,.0f}-"
              f"{max(values):,.0f}) | {statistics.median(ratios):.3f} ({min(ratios):.3f}-"
              f"{max(ratios):.3f}) |")


if __name__ == "__main__":
    mp.set_start_method("spawn")
    if len(sys.argv) > 1 and not sys.argv[1].startswith("--"):
        run_pair(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 5.0)
    else:
        parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
        parser.add_argument("--binary", required=True)
        parser.add_argument("--shares", nargs="+", type=float, default=[0.0, 0.7])
        parser.add_argument("--reps", type=int, default=5)
        parser.add_argument("--seconds", type=float, default=5.0)
        args = parser.parse_args()
        compare_shares(args.binary, args.shares, args.reps, args.seconds)
