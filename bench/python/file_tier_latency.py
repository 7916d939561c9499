"""A RAM-only table's sample latency while another table is read from disk (docs/FILE_TIER.md):
what the disk costs the server's thread, apart from what the other reader's traffic costs.

The server is pinned to CPU 0 (its I/O pool with it), every client to CPU 1. Tables: `tiered`
(W2 transitions, `--gib` of them, `--ram-mib` in RAM, the rest in segment files), `in_ram` (the
same rows, all in RAM) and `probe` (W1, 50,000 items in RAM). The probe samples 256 items one
request at a time (p50/p99 of each call) in windows of `--seconds`, each repetition all of them in
this order:

- ``quiet``: nothing else;
- ``cold``: another process samples `tiered` flat out (32 a request, 4 in flight), dropping
  the segments' pages from the page cache every 0.5 s so that its rows are read from disk;
- ``ram_paced``: that process samples `in_ram` at the rate it reached in ``cold`` (the same
  replies, no disk);
- ``cold_idle`` and ``ram_paced_idle``: the same with the other process under SCHED_IDLE, so
  that it does not hold the probe's core (CPU 1) when the probe wakes: what remains is the
  server's.

On a machine whose clients share one core, ``cold`` against ``quiet`` mixes three things: the
other process's CPU on the probe's core, its replies on the server's thread, and the disk.
``cold`` against ``ram_paced`` isolates the disk; the ``_idle`` windows take out the first.

Usage: taskset -c 1 /usr/bin/python3 bench/python/file_tier_latency.py [--gib 2]
       [--ram-mib 200] [--reps 5] [--seconds 4] [--tier-dir /var/tmp/replayd-tier-latency]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "client" / "python"))
sys.path.insert(0, str(HERE))

import replayd  # noqa: E402
from file_tier_bench import (BATCH, IN_FLIGHT, drop_cache, fill, latencies,  # noqa: E402
                             segment_files, wait_written_out)
from pinned_server import pinned_server  # noqa: E402
from workloads import W1, W2  # noqa: E402

WINDOWS = ("quiet", "cold", "ram_paced", "cold_idle", "ram_paced_idle")


def other_reader(address: str, table: str, stop_at: float, files: List[str],
                 rate: Optional[float], idle: bool, reached: "multiprocessing.Queue[float]") -> None:
    """Samples `table` until `stop_at`: flat out, or paced to `rate` transitions/s; drops
    `files` from the page cache every 0.5 s; puts the transitions/s it reached."""
    os.sched_setaffinity(0, {1})
    if idle:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    client = replayd.Client(address, timeout=120)
    paths = [Path(f) for f in files]
    interval = BATCH / rate if rate else 0.0
    started = time.perf_counter()
    futures = [client.sample_async(table, BATCH) for _ in range(IN_FLIGHT)]
    sent, done, last_drop = IN_FLIGHT, 0, 0.0
    while time.perf_counter() < stop_at:
        futures.pop(0).result()
        done += BATCH
        if interval:
            delay = started + sent * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        futures.append(client.sample_async(table, BATCH))
        sent += 1
        if paths and time.perf_counter() - last_drop > 0.5:
            drop_cache(paths)
            last_drop = time.perf_counter()
    elapsed = time.perf_counter() - started
    for future in futures:
        future.result()
    client.close()
    reached.put(done / elapsed)


def window(address: str, client: replayd.Client, kind: str, seconds: float, files: List[str],
           rate: Optional[float]) -> Tuple[Tuple[float, float], Optional[float]]:
    """The probe's (p50, p99) in one window, and the other reader's transitions/s (paced to
    `rate` when given)."""
    if kind == "quiet":
        return latencies(client, "probe", seconds), None
    table = "tiered" if kind.startswith("cold") else "in_ram"
    reached: "multiprocessing.Queue[float]" = multiprocessing.Queue()
    stop_at = time.perf_counter() + seconds + 1.5
    reader = multiprocessing.Process(target=other_reader, args=(
        address, table, stop_at, files if table == "tiered" else [], rate,
        kind.endswith("_idle"), reached))
    reader.start()
    time.sleep(1)  # the reader connected and running
    probe = latencies(client, "probe", seconds)
    reader.join()
    return probe, reached.get()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(ROOT / "build" / "service" / "replayd"))
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--ram-mib", type=float, default=200.0)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--tier-dir", default="/var/tmp/replayd-tier-latency")
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})
    rows = int(args.gib * (1 << 30) / W2.item_bytes)
    tier_dir = Path(args.tier_dir)
    shutil.rmtree(tier_dir, ignore_errors=True)
    tier_dir.mkdir(parents=True)
    results: Dict[str, List[Dict[str, float]]] = {kind: [] for kind in WINDOWS}
    try:
        with pinned_server(args.binary, extra_args=["--tier-dir", str(tier_dir)]) as address, \
                replayd.Client(address, timeout=300) as client:
            fields = {name: (dtype, shape) for name, dtype, shape in W2.fields}
            client.create_table("tiered", fields, rows, ram_bytes=int(args.ram_mib * (1 << 20)))
            fill(client, "tiered", rows)
            wait_written_out(client, "tiered")
            client.create_table("in_ram", fields, rows)
            fill(client, "in_ram", rows)
            client.create_table("probe", {n: (d, s) for n, d, s in W1.fields}, 100_000)
            client.insert("probe", W1.batch(50_000))
            files = [str(f) for f in segment_files(tier_dir, "tiered")]
            for rep in range(args.reps):
                # Each ram_paced window follows the rate its cold window reached just before.
                measured: Dict[str, Dict[str, float]] = {}
                for kind in WINDOWS:
                    rate = (measured[kind.replace("ram_paced", "cold")]["other_per_s"]
                            if kind.startswith("ram_paced") else None)
                    (p50, p99), other = window(address, client, kind, args.seconds, files, rate)
                    measured[kind] = {"p50_us": p50, "p99_us": p99, "other_per_s": other or 0.0}
                for kind, result in measured.items():
                    results[kind].append(result)
                print(json.dumps({"rep": rep, **measured}), flush=True)
    finally:
        shutil.rmtree(tier_dir, ignore_errors=True)

    def median(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in results[kind])

    print(f"\n{rows} W2 rows ({args.gib} GiB), {args.ram_mib} MiB in RAM; probe: W1 samples of "
          f"256, one at a time; medians of {args.reps} windows of {args.seconds} s")
    print("| window | probe p50 (us) | probe p99 (us) | p99 / quiet (per repetition) | "
          "other reader, transitions/s |")
    print("|---|---:|---:|---|---:|")
    for kind in WINDOWS:
        ratios = [r["p99_us"] / q["p99_us"] for r, q in zip(results[kind], results["quiet"])]
        print(f"| {kind} | {median(kind, 'p50_us'):.0f} | {median(kind, 'p99_us'):.0f} | "
              f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
              f"{median(kind, 'other_per_s'):.0f} |")
    for cold, ram in (("cold", "ram_paced"), ("cold_idle", "ram_paced_idle")):
        ratios = [c["p99_us"] / r["p99_us"] for c, r in zip(results[cold], results[ram])]
        print(f"{cold} p99 / {ram} p99: {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
