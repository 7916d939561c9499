"""Episodic tables against plain ones, through the Python client (docs/BENCHMARKS.md,
"Episodic tables over the wire"): the EpisodeWriter against the Writer, n-step samples
(k = 3, 10) against plain samples, and R2D2-shaped sequences (64 x 80 steps) against plain
samples of as many steps.

    /usr/bin/python3 bench/python/episodes_bench.py [--server build/service/replayd]
        [--reps 5] [--seconds 2]

The server is pinned to CPU 0 and this process to CPU 1 (on a 2-core machine the figures
then show the server and one client, not the OS scheduler). W1-sized steps: obs f32[4],
act i64, rew f32, next_obs f32[4], done u8; tables of 100,000 steps, FIFO, uniform. The
episodic table is written by 8 environments in turn, episodes of 100-300 steps (one in four
truncated). Every measure runs once per repetition, in turn; ratios are taken within a
repetition, then the median over repetitions is printed with the min-max.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "client" / "python"))

import replayd  # noqa: E402

FIELDS = {"obs": (np.float32, (4,)), "act": (np.int64, ()), "rew": (np.float32, ()),
          "next_obs": (np.float32, (4,)), "done": (np.uint8, ())}
CAPACITY = 100_000
ENVS = 8


def steps(count: int, seed: int) -> List[Dict[str, object]]:
    """`count` distinct W1 steps whose values are already of the fields' dtypes (the
    writers' fast path, as an explorer holding numpy arrays would use it)."""
    rng = np.random.default_rng(seed)
    return [{"obs": rng.random(4, dtype=np.float32), "act": int(rng.integers(0, 4)),
             "rew": float(rng.random()), "next_obs": rng.random(4, dtype=np.float32),
             "done": False} for _ in range(count)]


def timed(seconds: float, body: Callable[[], int]) -> float:
    """Calls body (which returns the items it handled) until `seconds` passed; items/s."""
    items = 0
    start = time.perf_counter()
    while True:
        items += body()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return items / elapsed


def explore(data: List[Dict[str, object]], lengths: np.ndarray, seconds: float,
            append: Callable[[int, Dict[str, object]], None],
            end: Callable[[int, bool], None]) -> float:
    """An explorer stepping ENVS environments in turn, episodes of `lengths` steps: calls
    append(env, step) per step and end(env, terminated) per episode end; steps/s."""
    left = [int(n) for n in lengths[:ENVS]]
    state = {"next": ENVS}

    def body() -> int:
        for j, step in enumerate(data):
            env = j % ENVS
            append(env, step)
            left[env] -= 1
            if left[env] == 0:
                n = state["next"]
                end(env, bool(n % 4))
                left[env] = int(lengths[n % len(lengths)])
                state["next"] = n + 1
        return len(data)
    return timed(seconds, body)


def write_plain(client: replayd.Client, data: List[Dict[str, object]], lengths: np.ndarray,
                seconds: float) -> float:
    """The same explorer storing transitions through a Writer (episode ends are its own
    business)."""
    with client.writer("plain", batch=64) as writer:
        return explore(data, lengths, seconds, lambda env, step: writer.append(step),
                       lambda env, terminated: None)


def write_episodes(client: replayd.Client, data: List[Dict[str, object]], lengths: np.ndarray,
                   seconds: float) -> float:
    with client.episode_writer("episodes", envs=ENVS, batch=64, keep_keys=False) as writer:
        return explore(data, lengths, seconds, writer.append,
                       writer.end_episode)


def sample_rate(sampler: "replayd.Sampler", items: int, seconds: float) -> float:
    with sampler:
        next(sampler)  # warm: the window index exists, the prefetch is full
        return timed(seconds, lambda: len(next(sampler)) and items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default=str(REPO / "build" / "service" / "replayd"))
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})
    with tempfile.TemporaryDirectory() as tmp:
        socket, ready = f"{tmp}/s.sock", f"{tmp}/ready"
        server = subprocess.Popen(["taskset", "-c", "0", args.server, "--unix", socket,
                                   "--tcp", "", "--metrics", "", "--ready-file", ready,
                                   "--log-level", "warn"])
        try:
            while not os.path.exists(ready):
                time.sleep(0.05)
            run(replayd.Client(f"unix://{socket}"), args.reps, args.seconds)
        finally:
            server.terminate()
            server.wait()


def run(client: replayd.Client, reps: int, seconds: float) -> None:
    client.create_table("plain", FIELDS, CAPACITY, seed=1)
    client.create_table("episodes", FIELDS, CAPACITY, episodic=True, reward="rew", seed=1)
    data = steps(4096, 1)
    lengths = np.random.default_rng(2).integers(100, 301, 1000)
    measures: Dict[str, Callable[[], float]] = {
        "writer, 1 transition per append": lambda: write_plain(client, data, lengths,
                                                               seconds),
        "episode_writer, 1 step per append": lambda: write_episodes(client, data, lengths,
                                                                    seconds),
        "sample 256": lambda: sample_rate(client.sampler("plain", 256), 256, seconds),
        "n-step k=3, 256": lambda: sample_rate(
            client.sampler("episodes", 256, nstep=3, gamma=0.99), 256, seconds),
        "n-step k=10, 256": lambda: sample_rate(
            client.sampler("episodes", 256, nstep=10, gamma=0.99), 256, seconds),
        "sample 5120 (steps)": lambda: sample_rate(client.sampler("plain", 5120), 5120,
                                                   seconds),
        "sequences 64 x 80 (steps)": lambda: sample_rate(
            client.sequence_sampler("episodes", 64, 80), 64 * 80, seconds),
    }
    baselines = {"episode_writer, 1 step per append": "writer, 1 transition per append",
                 "n-step k=3, 256": "sample 256", "n-step k=10, 256": "sample 256",
                 "sequences 64 x 80 (steps)": "sample 5120 (steps)"}
    rates: Dict[str, List[float]] = {name: [] for name in measures}
    for rep in range(reps):
        for name, measure in measures.items():
            rates[name].append(measure())
        print(f"  rep {rep + 1} done", file=sys.stderr)
    print(f"nproc {os.cpu_count()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"{reps} repetitions of {seconds} s")
    print("| measure | items/s, median (min-max) | ratio to its baseline, median (min-max) |")
    print("|---|---:|---:|")
    for name, values in rates.items():
        cell = f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"
        ratio = ""
        if name in baselines:
            ratios = [a / b for a, b in zip(values, rates[baselines[name]])]
            ratio = (f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) "
                     f"of {baselines[name]}")
        print(f"| {name} | {cell} | {ratio} |")


if __name__ == "__main__":
    main()
