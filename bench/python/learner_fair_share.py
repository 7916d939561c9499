#!/usr/bin/python3
"""Two learners share the server's thread (docs/BENCHMARKS.md, "Scheduling"): a greedy one
samples 64 MiB batches (64 items of 1 MiB) through a prefetching sampler (4 requests in
flight) and reads them as fast as it can; a small one samples batches of 32 small items,
one request at a time, timing each round trip. For each server binary and learner_share, in
turn, REPS times: the small learner alone, the greedy one alone, then both together, each
for SECONDS. Prints medians: the small learner's rate beside the greedy one over its solo
rate, its p50 and p99 round trips, and the greedy one's rate over its solo rate.

    [SMALL_THINK_MS=3] /usr/bin/python3 bench/python/learner_fair_share.py BINARY [BINARY...]
        [--shares 0 0.7] [--reps 3] [--seconds 5]

SMALL_THINK_MS: the small learner pauses this long after each sample (a training step), so
that it is between requests, off the server, most of the time.

The server is pinned to CPU 0 (bench/python/pinned_server.py), the learners to CPU 1.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import replayd  # noqa: E402
from pinned_server import pinned_server  # noqa: E402

BIG_ITEM = 1 << 20  # bytes
BIG_BATCH = 64      # items: 64 MiB a sample
SMALL_BATCH = 32
THINK_MS = float(os.environ.get("SMALL_THINK_MS", "0"))  # pause after each small sample


def small_learner(address: str, seconds: float, results: "mp.Queue[tuple]") -> None:
    client = replayd.Client(address, timeout=60)
    times: List[float] = []
    end = time.monotonic() + seconds
    think = THINK_MS / 1e3
    while True:
        start = time.perf_counter()
        client.sample("small", SMALL_BATCH)
        times.append(time.perf_counter() - start)
        if think:
            time.sleep(think)
        if time.monotonic() >= end:
            break
    results.put(("small", len(times) / seconds, float(np.percentile(times, 50)),
                 float(np.percentile(times, 99))))


def greedy_learner(address: str, seconds: float, results: "mp.Queue[tuple]") -> None:
    client = replayd.Client(address, timeout=60)
    count = 0
    end = time.monotonic() + seconds
    with client.sampler("big", BIG_BATCH, prefetch=4) as sampler:
        for _ in sampler:
            count += 1
            if time.monotonic() >= end:
                break
    results.put(("greedy", count / seconds, 0.0, 0.0))


def run(address: str, seconds: float, small: bool, greedy: bool) -> Dict[str, Tuple]:
    results: "mp.Queue[tuple]" = mp.Queue()
    processes = []
    if greedy:
        processes.append(mp.Process(target=greedy_learner, args=(address, seconds, results)))
    if small:
        processes.append(mp.Process(target=small_learner, args=(address, seconds, results)))
    for process in processes:
        process.start()
    out = {}
    for _ in processes:
        kind, *values = results.get()
        out[kind] = tuple(values)
    for process in processes:
        process.join()
    return out


def measure(binary: str, share: Optional[float], seconds: float) -> Dict[str, float]:
    limits = None if share is None else {"learner_share": share}
    with pinned_server(binary, limits) as address:
        client = replayd.Client(address, timeout=60)
        client.create_table("big", {"x": (np.uint8, (BIG_ITEM,))}, BIG_BATCH)
        client.create_table("small", {"obs": (np.float32, (8,))}, 10_000)
        for _ in range(BIG_BATCH // 8):
            client.insert("big", {"x": np.zeros((8, BIG_ITEM), np.uint8)})
        client.insert("small", {"obs": np.zeros((10_000, 8), np.float32)})
        small_solo = run(address, seconds, small=True, greedy=False)["small"]
        greedy_solo = run(address, seconds, small=False, greedy=True)["greedy"]
        both = run(address, seconds, small=True, greedy=True)
    return {"small solo": small_solo[0], "small beside": both["small"][0],
            "small p50 ms": both["small"][1] * 1e3, "small p99 ms": both["small"][2] * 1e3,
            "small solo p99 ms": small_solo[2] * 1e3,
            "greedy solo": greedy_solo[0], "greedy beside": both["greedy"][0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--shares", nargs="+", type=float, default=[0.0, 0.7])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    mp.set_start_method("spawn")
    os.sched_setaffinity(0, {1})
    runs = [(b, s) for b in args.binaries for s in args.shares]
    figures: Dict[Tuple[str, float], List[Dict[str, float]]] = {run_: [] for run_ in runs}
    for rep in range(args.reps):
        for binary, share in runs:
            figures[(binary, share)].append(measure(binary, share, args.seconds))
            print(f"  rep {rep + 1} {binary} learner_share {share}: "
                  f"{figures[(binary, share)][-1]}", file=sys.stderr)
    print("| binary | learner_share | small solo (samples/s) | small beside greedy | "
          "small / solo | small p50 / p99 ms (solo p99) | greedy solo (64 MiB/s) | "
          "greedy beside | greedy / solo |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (binary, share), values in figures.items():
        def med(key: str) -> float:
            return statistics.median(v[key] for v in values)

        def ratio(a: str, b: str) -> str:
            ratios = [v[a] / v[b] for v in values]
            return (f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")

        print(f"| {binary} | {share} | {med('small solo'):,.0f} | {med('small beside'):,.0f} | "
              f"{ratio('small beside', 'small solo')} | {med('small p50 ms'):.2f} / "
              f"{med('small p99 ms'):.1f} ({med('small solo p99 ms'):.2f}) | "
              f"{med('greedy solo'):.1f} | {med('greedy beside'):.1f} | "
              f"{ratio('greedy beside', 'greedy solo')} |")


if __name__ == "__main__":
    main()
