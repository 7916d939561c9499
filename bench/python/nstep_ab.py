"""The n-step row of scripts/bench-ab: n-step samples (k = 3, batch 256, gamma 0.99) of an
episodic W1 table through the Python client's prefetching sampler, for several server
binaries, interleaved (every binary once per repetition), the server pinned to CPU 0 and
this process to CPU 1. Prints each binary's median items/s and its ratio to the first,
computed within each repetition.

    /usr/bin/python3 bench/python/nstep_ab.py BASE_BINARY OTHER_BINARY... [--reps 5]
        [--seconds 3]

The table (bench/python/episodes_bench.py's episodic table: 100,000 steps, 8 environments
in turn, episodes of 100-300 steps) is filled for 2 s before each measure.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import episodes_bench as eb  # noqa: E402
from pinned_server import pinned_server  # noqa: E402


def measure(binary: str, seconds: float) -> float:
    with pinned_server(binary) as address:
        # A socket row: no plane asked for, so servers that predate it answer the same hello.
        client = eb.replayd.Client(address, shm=False)
        client.create_table("episodes", eb.FIELDS, eb.CAPACITY, episodic=True, reward="rew",
                            seed=1)
        lengths = np.random.default_rng(2).integers(100, 301, 1000)
        eb.write_episodes(client, eb.steps(4096, 1), lengths, 2.0)
        return eb.sample_rate(client.sampler("episodes", 256, nstep=3, gamma=0.99), 256,
                              seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})
    rates: Dict[str, List[float]] = {b: [] for b in args.binaries}
    for rep in range(args.reps):
        for binary in args.binaries:
            rates[binary].append(measure(binary, args.seconds))
        print(f"  n-step rep {rep + 1} done", file=sys.stderr)
    base = args.binaries[0]
    print("| binary | n-step k=3, 256: items/s, median (min-max) | / first, median (min-max) |")
    print("|---|---:|---:|")
    for binary, values in rates.items():
        ratios = [a / b for a, b in zip(values, rates[base])]
        print(f"| {binary} | {statistics.median(values):,.0f} ({min(values):,.0f}-"
              f"{max(values):,.0f}) | {statistics.median(ratios):.3f} ({min(ratios):.3f}-"
              f"{max(ratios):.3f}) |")


if __name__ == "__main__":
    main()
