#!/usr/bin/python3
"""Batches per second of replayd.torch.ReplayDataset against the plain Sampler it wraps,
both over the shared-memory plane, on one table, alternating in every round.

The server runs pinned to CPU 0 and this script to CPU 1 (bench/python/pinned_server.py).
Each round fills nothing new: the table (W1 or W2 of workloads.py, full) is sampled for
SECONDS by a plain `client.sampler(table, batch, prefetch=4)` and for SECONDS by
iterating `ReplayDataset(client, table, batch)` (tensors sharing the gathered arrays,
device None: this machine has no CUDA), in alternating order; the consumer does nothing
else. Prints the medians
and the ratio per round.

    /usr/bin/python3 bench/python/torch_plane.py [--workload W2] [--rounds 5] [--seconds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))

import replayd  # noqa: E402
import replayd.torch  # noqa: E402
from pinned_server import pinned_server  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


def rate(iterator, seconds: float) -> float:
    """Batches per second of `iterator` over `seconds` (after 50 warm-up batches)."""
    for _ in range(50):
        next(iterator)
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        next(iterator)
        count += 1
    return count / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="W2", choices=sorted(WORKLOADS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--binary", default=str(HERE.parents[1] / "build" / "service" / "replayd"))
    args = parser.parse_args()
    workload = WORKLOADS[args.workload]
    os.sched_setaffinity(0, {1})
    with pinned_server(args.binary) as address:
        client = replayd.Client(address)
        client.create_table("t", {name: (dtype, shape) for name, dtype, shape in workload.fields},
                            capacity=workload.capacity, remover="fifo", seed=0,
                            rate_limiter=replayd.MinSize(1))
        for start in range(0, workload.capacity, 256):
            client.insert("t", workload.batch(min(256, workload.capacity - start), seed=start))
        assert client.plane_table("t") is not None, "the plane is not offered"
        plain, dataset, ratios = [], [], []
        for round_ in range(args.rounds):
            # Which goes first alternates (ABBA), so a drift of the machine favours neither.
            for which in ((0, 1) if round_ % 2 == 0 else (1, 0)):
                if which == 0:
                    with client.sampler("t", workload.sample_batch, prefetch=4) as sampler:
                        plain.append(rate(sampler, args.seconds))
                else:
                    data = replayd.torch.ReplayDataset(client, "t", workload.sample_batch,
                                                       prefetch=4)
                    dataset.append(rate(iter(data), args.seconds))
            ratios.append(dataset[-1] / plain[-1])
            print(f"round {round_ + 1}: sampler {plain[-1]:,.0f} batches/s, ReplayDataset "
                  f"{dataset[-1]:,.0f} batches/s, ratio {ratios[-1]:.3f}", flush=True)
    print(f"{args.workload} batch {workload.sample_batch}, medians of {args.rounds}: sampler "
          f"{statistics.median(plain):,.0f} batches/s, ReplayDataset "
          f"{statistics.median(dataset):,.0f} batches/s, ratio (per round) "
          f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
