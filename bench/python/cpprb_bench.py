"""What replayd.cpprb costs over the plain client's idioms, per call, on one server.

    taskset -c 1 /usr/bin/python3 bench/python/cpprb_bench.py [--reps 5]

The server is pinned to CPU 0, this process (which should run on CPU 1) adds and samples.
Rows, each timed as a loop of single-transition adds (then one call that waits for them to
be stored) and a loop of samples; medians of --reps interleaved repetitions, with the ratio
of the two columns of a row taken in each repetition:

- W1, W2 (bench/python/workloads.py): replayd.cpprb.ReplayBuffer of the workload's env_dict
  against Writer.append (batch 64; given a dict, and given keyword arguments as the README
  writes it) and Client.sample on a plain table.
- W2 frames: the W2 transition as cpprb's Atari users write it, obs and next_obs u8[84, 84, 4]
  (stack on the last axis) of a stream of frames, with ``next_of="obs"`` and
  ``stack_compress="obs"`` (a frame stored once), against the plain client's own idiom for
  it: an episodic table with a ``next_of`` ``stack`` frame field, EpisodeWriter.append of the
  newest frame, and ``sample(nstep=1)`` (stacks on the first axis). Episodes of 1,000 steps.
  Also replayd.cpprb storing both stacks as ordinary values (``W2 frames, no next_of``).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "client" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import replayd  # noqa: E402
from replayd.cpprb import ReplayBuffer  # noqa: E402
from pixels_bench import Server  # noqa: E402
from workloads import W1, W2, Workload  # noqa: E402

EPISODE = 1000
STACK = 4
WHATS = ("add", "add, keywords", "sample")  # the calls compared, in the table's order


def per_call(body: Callable[[], int]) -> float:
    """Seconds per call of `body`, which returns the number of calls it made."""
    start = time.perf_counter()
    calls = body()
    return (time.perf_counter() - start) / calls


def workload_row(client: replayd.Client, address: str, w: Workload, adds: int,
                 samples: int) -> Dict[str, Callable[[], float]]:
    fields = [(name, np.dtype(dtype), shape) for name, dtype, shape in w.fields]
    table = f"plain-{w.name}"
    client.create_table(table, fields, w.capacity, exist_ok=True)
    rb = ReplayBuffer(w.capacity, {name: {"dtype": dtype, "shape": shape or 1}
                                   for name, dtype, shape in w.fields}, address=address)
    items = w.items()
    writer = client.writer(table, batch=64)

    def plain_add() -> int:
        for i in range(adds):
            writer.append(items[i % len(items)])
        writer.flush()
        return adds

    def plain_add_keywords() -> int:  # the README's form: writer.append(obs=..., ...)
        for i in range(adds):
            writer.append(**items[i % len(items)])
        writer.flush()
        return adds

    def cpprb_add() -> int:
        for i in range(adds):
            rb.add(**items[i % len(items)])
        rb.get_stored_size()  # waits until they are stored
        return adds

    def plain_sample() -> int:
        for _ in range(samples):
            client.sample(table, w.sample_batch)
        return samples

    def cpprb_sample() -> int:
        for _ in range(samples):
            rb.sample(w.sample_batch)
        return samples

    return {"plain add": lambda: per_call(plain_add), "cpprb add": lambda: per_call(cpprb_add),
            "plain add, keywords": lambda: per_call(plain_add_keywords),
            "cpprb add, keywords": lambda: per_call(cpprb_add),
            "plain sample": lambda: per_call(plain_sample),
            "cpprb sample": lambda: per_call(cpprb_sample)}


def frame_stream(count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 4, (count, 84, 84), dtype=np.uint8) * 60


def frames_row(client: replayd.Client, address: str, adds: int, samples: int,
               dedup: bool) -> Dict[str, Callable[[], float]]:
    """W2 frames: the plain client's frame table against replayd.cpprb."""
    table = f"plain-frames-{dedup}"
    client.create_table(table, {"obs": (np.uint8, (84, 84)), "act": (np.int32, ()),
                                "rew": (np.float32, ())}, 10_000, episodic=True,
                        next_of=["obs"], stack={"obs": STACK}, exist_ok=True)
    env = {"obs": {"shape": (84, 84, STACK), "dtype": np.uint8}, "act": {"dtype": np.int32},
           "rew": {}, "done": {"dtype": np.uint8}}
    if dedup:
        rb = ReplayBuffer(10_000, env, next_of="obs", stack_compress="obs", address=address)
    else:
        rb = ReplayBuffer(10_000, {**env, "next_obs": env["obs"]}, address=address)
    frames = frame_stream(EPISODE + STACK, 3)
    stacks = np.stack([np.moveaxis(frames[t:t + STACK], 0, -1) for t in range(EPISODE + 1)])
    writer = client.episode_writer(table, batch=64)

    def plain_add() -> int:
        for i in range(adds):
            t = i % EPISODE
            writer.append(obs=frames[t + STACK - 1], act=1, rew=0.5)
            if t == EPISODE - 1:
                writer.end_episode(obs=frames[t + STACK])
        writer.flush()
        return adds

    def cpprb_add() -> int:
        for i in range(adds):
            t = i % EPISODE
            rb.add(obs=stacks[t], act=1, rew=0.5, next_obs=stacks[t + 1], done=0)
            if t == EPISODE - 1:
                rb.on_episode_end()
        rb.get_stored_size()
        return adds

    def plain_sample() -> int:
        for _ in range(samples):
            client.sample(table, 32, nstep=1)
        return samples

    def cpprb_sample() -> int:
        for _ in range(samples):
            rb.sample(32)
        return samples

    return {"plain add": lambda: per_call(plain_add), "cpprb add": lambda: per_call(cpprb_add),
            "plain sample": lambda: per_call(plain_sample),
            "cpprb sample": lambda: per_call(cpprb_sample)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--binary", default=str(REPO / "build" / "service" / "replayd"))
    args = parser.parse_args()
    server = Server(args.binary)
    try:
        client = replayd.Client(server.address)
        rows: List[Tuple[str, Dict[str, Callable[[], float]]]] = [
            ("W1", workload_row(client, server.address, W1, 20_000, 2_000)),
            ("W2", workload_row(client, server.address, W2, 2_000, 300)),
            ("W2 frames, next_of + stack_compress",
             frames_row(client, server.address, 2_000, 300, dedup=True)),
            ("W2 frames, no next_of", frames_row(client, server.address, 2_000, 300,
                                                 dedup=False)),
        ]
        for _, row in rows:  # warm up: fill the tables, first connections
            for measure in row.values():
                measure()
        results: Dict[Tuple[str, str], List[float]] = {}
        for _ in range(args.reps):
            for name, row in rows:
                times = {key: measure() for key, measure in row.items()}
                for what in WHATS:
                    if f"plain {what}" not in times:
                        continue
                    plain, cpprb = times[f"plain {what}"], times[f"cpprb {what}"]
                    results.setdefault((name, f"{what} plain"), []).append(plain)
                    results.setdefault((name, f"{what} cpprb"), []).append(cpprb)
                    results.setdefault((name, f"{what} ratio"), []).append(cpprb / plain)
        print("| row | call | plain client (us) | replayd.cpprb (us) | cpprb / plain, median "
              "(min-max) |")
        print("|---|---|---:|---:|---:|")
        for name, _ in rows:
            for what in WHATS:
                if (name, f"{what} ratio") not in results:
                    continue
                ratios = results[(name, f"{what} ratio")]
                print(f"| {name} | {what} | "
                      f"{statistics.median(results[(name, f'{what} plain')]) * 1e6:.1f} | "
                      f"{statistics.median(results[(name, f'{what} cpprb')]) * 1e6:.1f} | "
                      f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
