"""An episodic table ten times its RAM budget (docs/FILE_TIER.md, "Episodic tables"): n-step
and sequence sampling with the steps cold (page cache dropped), from the page cache, and
from the same steps all in RAM.

The server is pinned to CPU 0 (its I/O pool with it), the clients to CPU 1. One run:

1. ``tiered``: an episodic table of W2 steps (obs, act, rew, next_obs, done: 56,457 B of
   random bytes; ``rew`` stays in RAM, the rest is written out), `--gib` of them with
   `--ram-mib` in RAM, in episodes of 100 steps (ended alternately terminated and
   truncated), appended 64 steps per request.
2. Cold: every segment's pages dropped from the page cache (posix_fadvise DONTNEED), then
   n-step samples (k = 3, gamma 0.99) of 32 with 4 requests in flight for `--seconds`:
   transitions/s (each draw reads step t's record and, when it is cold, the bootstrap
   step's); then sequences of 8 steps, 4 per request: steps/s. Beside them, the disk's
   random-read rate in the same state (8 threads reading random records of the same files).
3. Page cache: the files read once, then the same sampling.
4. The table dropped, the same steps appended to a table all in RAM, the same sampling:
   the ratios.

Usage: taskset -c 1 /usr/bin/python3 bench/python/file_tier_episodes.py [--gib 2]
       [--ram-mib 200] [--tier-dir /var/tmp/replayd-tier-episodes] [--seconds 4]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "client" / "python"))
sys.path.insert(0, str(HERE))

import replayd  # noqa: E402
from file_tier_bench import (drop_cache, disk_random_reads, segment_files,  # noqa: E402
                             wait_written_out, warm_cache)
from pinned_server import pinned_server  # noqa: E402
from workloads import W2  # noqa: E402

BATCH = 32
SEQUENCES = 4
SEQUENCE_LENGTH = 8
IN_FLIGHT = 4
EPISODE_STEPS = 100


def append_episodes(client: replayd.Client, table: str, steps: int) -> None:
    """`steps` W2 steps in episodes of EPISODE_STEPS, 64 per request."""
    pool = W2.batch(512, seed=3)
    with client.episode_writer(table, batch=64) as writer:
        for step in range(steps):
            row = {name: column[step % 512] for name, column in pool.items()}
            writer.append(**row)
            if step % EPISODE_STEPS == EPISODE_STEPS - 1:
                writer.end_episode(terminated=(step // EPISODE_STEPS) % 2 == 0)


def rate(draw: Callable[[], "replayd.Future"], per_request: int, seconds: float) -> float:
    """Rows/s of requests of `per_request` rows, IN_FLIGHT in flight."""
    futures = [draw() for _ in range(IN_FLIGHT)]
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        futures.pop(0).result()
        done += per_request
        futures.append(draw())
    elapsed = time.perf_counter() - started
    for future in futures:
        future.result()
    return done / elapsed


def measure(client: replayd.Client, table: str, seconds: float) -> Dict[str, float]:
    def nstep() -> "replayd.Future":
        return client.sample_async(table, BATCH, nstep=3, gamma=0.99)

    def sequences() -> "replayd.Future":
        return client.sample_sequences_async(table, SEQUENCES, SEQUENCE_LENGTH)

    return {"nstep_per_s": rate(nstep, BATCH, seconds),
            "sequence_steps_per_s": rate(sequences, SEQUENCES * SEQUENCE_LENGTH, seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(ROOT / "build" / "service" / "replayd"))
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--ram-mib", type=float, default=200.0)
    parser.add_argument("--tier-dir", default="/var/tmp/replayd-tier-episodes")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    steps = int(args.gib * (1 << 30) / W2.item_bytes) // EPISODE_STEPS * EPISODE_STEPS
    tier_dir = Path(args.tier_dir)
    shutil.rmtree(tier_dir, ignore_errors=True)
    tier_dir.mkdir(parents=True)
    fields = {name: (dtype, shape) for name, dtype, shape in W2.fields}
    results: Dict[str, object] = {"steps": steps, "step_bytes": W2.item_bytes,
                                  "ram_bytes": int(args.ram_mib * (1 << 20))}
    try:
        with pinned_server(args.binary, extra_args=["--tier-dir", str(tier_dir)]) as address:
            client = replayd.Client(address, timeout=300)
            client.create_table("tiered", fields, steps, episodic=True, reward="rew",
                                bootstrap=["next_obs"], ram_bytes=results["ram_bytes"])
            started = time.perf_counter()
            append_episodes(client, "tiered", steps)
            tier = wait_written_out(client, "tiered")
            results["fill_s"] = time.perf_counter() - started
            results["tier"] = tier
            files = segment_files(tier_dir, "tiered")
            record = tier["bytes_written"] // max(1, tier["rows_written"])
            cold: List[Dict[str, float]] = []
            for _ in range(args.repeats):
                drop_cache(files)
                disk = disk_random_reads(files, record, args.seconds)
                drop_cache(files)
                run = measure(client, "tiered", args.seconds / 2)
                run["disk_records_per_s"] = disk
                cold.append(run)
            results["cold"] = cold
            warm_cache(files)
            results["page_cache"] = [measure(client, "tiered", args.seconds)
                                     for _ in range(args.repeats)]
            results["cold_reads"] = client.info("tiered")["file_tier"]["cold_reads"]
            client.drop_table("tiered")
            time.sleep(2)
            client.create_table("in_ram", fields, steps, episodic=True, reward="rew",
                                bootstrap=["next_obs"])
            append_episodes(client, "in_ram", steps)
            results["in_ram"] = [measure(client, "in_ram", args.seconds)
                                 for _ in range(args.repeats)]
    finally:
        shutil.rmtree(tier_dir, ignore_errors=True)
    print(json.dumps(results, indent=1))

    def median(runs: object, key: str) -> float:
        return float(np.median([run[key] for run in runs]))  # type: ignore[attr-defined]

    disk = median(results["cold"], "disk_records_per_s")
    print(f"{steps} steps ({steps * W2.item_bytes / 2**30:.1f} GiB), {args.ram_mib:.0f} MiB in "
          f"RAM; disk {disk:.0f} random record reads/s")
    for key, label in (("nstep_per_s", "n-step (k=3) transitions/s"),
                       ("sequence_steps_per_s", "sequence steps/s (T=8)")):
        cold_rate = median(results["cold"], key)
        warm = median(results["page_cache"], key)
        in_ram = median(results["in_ram"], key)
        print(f"{label}: cold {cold_rate:.0f} ({cold_rate / disk:.2f} of the disk's reads), "
              f"page cache {warm:.0f}, all in RAM {in_ram:.0f} (page cache / RAM "
              f"{warm / in_ram:.2f})")


if __name__ == "__main__":
    main()
