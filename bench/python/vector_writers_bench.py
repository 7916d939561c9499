"""A vectorized environment's explorer: 16 environments stepping together, each step
appending one transition per environment, in one process. Compares a `VectorWriter`
(one `append` of 16-row arrays per step) with 16 single `Writer`s (one per environment,
one `append` each per step), and with them one `VectorEpisodeWriter` (episodic table,
an episode per environment, ends every 200 steps) against an `EpisodeWriter` with
``envs=16`` appended env by env (both with the Writer's default batch). Reports environment steps (transitions) per second.

    /usr/bin/python3 bench/python/vector_writers_bench.py [--reps 5] [--duration 1]

The server runs on CPU 0 (taskset), this process on CPU 1. Every variant runs once per
repetition, in turn (interleaved); medians of the repetitions, ratios per repetition.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "client" / "python"))

import replayd  # noqa: E402
from replayd.writer import default_batch  # noqa: E402
from pinned_server import pinned_server  # noqa: E402
from workloads import WORKLOADS, Workload  # noqa: E402

ENVS = 16
EPISODE_STEPS = 200
VARIANTS = ("vector_writer", "16_writers", "vector_episode_writer", "episode_writer_by_env")


def make_steps(workload: Workload, count: int = 8) -> List[Dict[str, np.ndarray]]:
    """`count` steps of the 16 environments (16-row arrays), cycled through."""
    return [workload.batch(ENVS, seed=s) for s in range(count)]


def run_variant(client: replayd.Client, workload: Workload, variant: str, table: str,
                duration_s: float) -> float:
    """Environment steps per second of one variant for `duration_s` (after a warm-up),
    the clock stopped after the writers' flush."""
    steps = make_steps(workload)
    rows = [[{k: v[e] for k, v in s.items()} for e in range(ENVS)] for s in steps]
    closers: List[Callable[[], None]] = []
    flushers: List[Callable[[], None]] = []
    t = [0]
    if variant == "vector_writer":
        vector = client.vector_writer(table, ENVS)
        flushers, closers = [vector.flush], [vector.close]

        def step() -> None:
            vector.append(steps[t[0] % len(steps)])
    elif variant == "16_writers":
        writers = [client.writer(table) for _ in range(ENVS)]
        flushers, closers = [w.flush for w in writers], [w.close for w in writers]
        appends = [w.append for w in writers]

        def step() -> None:
            items = rows[t[0] % len(rows)]
            for env in range(ENVS):
                appends[env](items[env])
    elif variant == "vector_episode_writer":
        episodic = client.vector_episode_writer(table, ENVS)
        flushers, closers = [episodic.flush], [episodic.close]
        ends = np.ones(ENVS, bool)

        def step() -> None:
            end = t[0] % EPISODE_STEPS == EPISODE_STEPS - 1
            episodic.append(steps[t[0] % len(steps)], truncated=ends if end else None)
    else:
        # the batch the vector writer takes by default (the EpisodeWriter's is 64)
        schema = client.schema(table)
        writer = client.episode_writer(table, envs=ENVS,
                                       batch=default_batch(schema.fields, schema.capacity))
        flushers, closers = [writer.flush], [writer.close]
        append, end_episode = writer.append, writer.end_episode

        def step() -> None:
            items = rows[t[0] % len(rows)]
            for env in range(ENVS):
                append(env, items[env])
            if t[0] % EPISODE_STEPS == EPISODE_STEPS - 1:
                for env in range(ENVS):
                    end_episode(env, terminated=False)

    end = time.perf_counter() + 0.2
    while time.perf_counter() < end:
        step()
        t[0] += 1
    for flush in flushers:
        flush()
    start = time.perf_counter()
    first = t[0]
    end = start + duration_s
    while time.perf_counter() < end:
        step()
        t[0] += 1
    for flush in flushers:
        flush()
    elapsed = time.perf_counter() - start
    for close in closers:
        close()
    return (t[0] - first) * ENVS / elapsed


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--duration", type=float, default=1.0)
    p.add_argument("--workloads", default="W1,W2")
    p.add_argument("--binary", default=os.environ.get(
        "REPLAYD_BIN", str(REPO / "build" / "service" / "replayd")))
    args = p.parse_args(argv)
    os.sched_setaffinity(0, {1})
    print(f"# {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, {ENVS} environments, "
          f"{args.reps} repetitions of {args.duration:g} s, server on CPU 0, client on CPU 1")
    with pinned_server(args.binary) as address, replayd.Client(address, timeout=60) as client:
        for wname in args.workloads.split(","):
            workload = WORKLOADS[wname]
            fields = {name: (dtype, shape) for name, dtype, shape in workload.fields}
            client.create_table(f"plain-{wname}", fields, capacity=workload.capacity,
                                remover="fifo")
            client.create_table(f"episodic-{wname}", fields, capacity=workload.capacity,
                                episodic=True, reward="rew")
            # Full tables, as a running explorer's: every slot's pages already touched
            # (a fresh table's first pass costs the server a page fault per 4 KiB).
            fill = workload.batch(64, seed=99)
            for _ in range(-(-workload.capacity // 64)):
                client.insert(f"plain-{wname}", fill)
            with client.vector_episode_writer(f"episodic-{wname}", 64) as episodes:
                for _ in range(-(-workload.capacity // 64)):
                    episodes.append(fill)
            results: Dict[str, List[float]] = {v: [] for v in VARIANTS}
            for _ in range(args.reps):
                for variant in VARIANTS:
                    table = (f"episodic-{wname}" if "episode" in variant
                             else f"plain-{wname}")
                    results[variant].append(run_variant(client, workload, variant, table,
                                                        args.duration))
            print(f"\n{wname} ({workload.item_bytes:,} B per transition): env steps/s, "
                  "median (min-max)")
            for variant, values in results.items():
                print(f"  {variant:24s} {statistics.median(values):>12,.0f} "
                      f"({min(values):,.0f}-{max(values):,.0f})")
            for mine, theirs in (("vector_writer", "16_writers"),
                                 ("vector_episode_writer", "episode_writer_by_env")):
                ratios = sorted(a / b for a, b in zip(results[mine], results[theirs]))
                print(f"  {mine} / {theirs}: {statistics.median(ratios):.2f} "
                      f"({ratios[0]:.2f}-{ratios[-1]:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
