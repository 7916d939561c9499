"""How long one request holds the server's thread when it asks for a window requirement
the table has not indexed yet, on a table of 2^20 stored steps (four long episodes, the
last one wrapping the ring): the request builds the index from every stored step. Prints
each request's round trip in milliseconds (the build is nearly all of it); a repeated
requirement is served from the index already built. Then what those indexes cost the
writers: 65,536 more steps appended (each evicting the oldest), timed before the requests
(no index) and after them (every index kept up to date on each append and eviction).
Last, the largest n-step and sequence samples the default limits allow, and one past each
(refused before anything is drawn), five times each.

    taskset -c 1 /usr/bin/python3 bench/python/window_index_build.py SERVER_BINARY...

Each server is started pinned to CPU 0 (bench/python/pinned_server.py).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import replayd  # noqa: E402
from pinned_server import pinned_server  # noqa: E402

STEPS = 1 << 20
REQUESTS = [
    ("sample nstep=1000 (new)", lambda c: c.sample("e", 1, nstep=1000)),
    ("sample nstep=1000 (indexed)", lambda c: c.sample("e", 1, nstep=1000)),
    ("sample_sequences length=4000 burn_in=96 (new)",
     lambda c: c.sample_sequences("e", 1, 4000, burn_in=96)),
    ("sample nstep=7, 256 (new)", lambda c: c.sample("e", 256, nstep=7)),
    ("sample_sequences length=80, 32 (new)", lambda c: c.sample_sequences("e", 32, 80)),
]


def fill(client: replayd.Client) -> None:
    client.create_table("e", {"obs": (np.float32, (2,)), "rew": (np.float32, ())}, STEPS,
                        episodic=True, reward="rew", seed=1)
    lengths = [STEPS // 4] * 3 + [STEPS - 3 * (STEPS // 4) + 1000]
    obs = np.zeros(2, np.float32)
    with client.episode_writer("e", envs=1, batch=4096) as writer:
        for length in lengths:
            for _ in range(length):
                writer.append(0, obs=obs, rew=1.0)
            writer.end_episode(0, terminated=True)


APPENDS = 1 << 16


def append_seconds(client: replayd.Client) -> float:
    """Appends APPENDS steps as one episode (the table is full: each evicts the oldest)."""
    obs = np.zeros(2, np.float32)
    began = time.perf_counter()
    with client.episode_writer("e", envs=1, batch=4096) as writer:
        for _ in range(APPENDS):
            writer.append(0, obs=obs, rew=1.0)
        writer.end_episode(0, terminated=True)
    return time.perf_counter() - began


# The largest requests the default limits allow (docs/CONFIG.md), and one step past each:
# the longest a client can hold the thread on this table, and how soon a refusal comes.
# Each: (label, request, whether the server refuses it).
LONGEST = [
    ("sample n=4,096 nstep=1,024 (max_nstep_walk_steps, 2^22)",
     lambda c: c.sample("e", 4096, nstep=1024), False),
    ("sample n=4,097 nstep=1,024 (refused)", lambda c: c.sample("e", 4097, nstep=1024), True),
    ("sample_sequences n=128 length=4,096 (max_sequence_sample_steps, 2^19)",
     lambda c: c.sample_sequences("e", 128, 4096), False),
    ("sample_sequences n=129 length=4,096 (refused)",
     lambda c: c.sample_sequences("e", 129, 4096), True),
]


def longest(binary: str, client: replayd.Client) -> None:
    for label, request, refused in LONGEST:
        times = []
        for _ in range(5):
            began = time.perf_counter()
            try:
                request(client)
                assert not refused, f"{label}: served, not refused"
            except replayd.InvalidArgument:
                if not refused:  # a limit lower than this script assumes: not a timing
                    raise
            times.append((time.perf_counter() - began) * 1e3)
        print(f"| {binary} | {label}, median of 5 (max) | {float(np.median(times)):,.1f} "
              f"({max(times):,.1f}) |")


def measure(binary: str) -> None:
    with pinned_server(binary) as address:
        with replayd.Client(address, timeout=600) as client:
            fill(client)
            fresh = append_seconds(client)
            print(f"| {binary} | append {APPENDS:,} steps, no index | {fresh * 1e3:,.1f} |")
            for label, request in REQUESTS:
                began = time.perf_counter()
                request(client)
                print(f"| {binary} | {label} | {(time.perf_counter() - began) * 1e3:,.1f} |")
            indexed = append_seconds(client)
            print(f"| {binary} | append {APPENDS:,} steps, {len(REQUESTS) - 1} indexes | "
                  f"{indexed * 1e3:,.1f} ({indexed / fresh:.2f}x) |")
            longest(binary, client)


def main() -> None:
    print("| server | request | ms |\n|---|---|---:|")
    for binary in sys.argv[1:]:
        measure(binary)


if __name__ == "__main__":
    main()
