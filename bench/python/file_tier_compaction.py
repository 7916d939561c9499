"""A file tier under removers other than fifo (docs/FILE_TIER.md, "Eviction, compaction and
segments"): what compaction costs and what it keeps on disk.

For each remover (fifo, the baseline that never compacts; uniform; min_heap with random
priorities), interleaved in each repetition, on one server: a table of `--gib` of W2
transitions (56,457 B of random bytes, so every record is raw) with `--ram-mib` in RAM and
segments of `--segment-mib`, filled `--passes` times over (insert_async of 64 rows, 8 in
flight: evictions all along), then

- inserts/s over the whole fill (the writer and compaction keep up, or inserts wait);
- once the writer and compaction are done: the segment files' bytes against the live
  records' bytes (cold rows x the mean record), and rows copied by compaction per row
  written out (its write amplification);
- uniform samples of 32, 4 in flight, for `--seconds` (records in the page cache).

The server is pinned to CPU 0 (its I/O pool with it), this process to CPU 1.

Usage: taskset -c 1 /usr/bin/python3 bench/python/file_tier_compaction.py [--gib 1]
       [--ram-mib 100] [--passes 4] [--reps 3] [--tier-dir /var/tmp/replayd-compaction]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "client" / "python"))
sys.path.insert(0, str(HERE))

import replayd  # noqa: E402
from file_tier_bench import sample_rate  # noqa: E402
from pinned_server import pinned_server  # noqa: E402
from workloads import W2  # noqa: E402

REMOVERS = ("fifo", "uniform", "min_heap")


def fill(client: replayd.Client, table: str, rows: int, prioritized: bool) -> float:
    """Inserts `rows` W2 rows (64 a call, 8 in flight); returns rows/s."""
    pool = W2.batch(512, seed=3)
    rng = np.random.default_rng(5)
    pending = []
    started = time.perf_counter()
    for start in range(0, rows, 64):
        at = (start // 64 * 64) % 448
        n = min(64, rows - start)
        batch = {name: column[at:at + n] for name, column in pool.items()}
        extra = {"priorities": rng.random(n) + 0.01} if prioritized else {}
        pending.append(client.insert_async(table, batch, **extra))
        if len(pending) >= 8:
            pending.pop(0).result()
    for future in pending:
        future.result()
    return rows / (time.perf_counter() - started)


def settled(client: replayd.Client, table: str, timeout: float = 300) -> Dict[str, Any]:
    """The tier's INFO once the writer and compaction stopped moving (1 s unchanged)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        tier = client.info(table)["file_tier"]
        now = (tier["rows_written"], tier["rows_moved"], tier["segments"])
        if tier["hot_rows"] <= tier["ram_rows"] and now == last:
            return tier
        last = now
        time.sleep(1.0)
    raise RuntimeError(f"the tier of {table} never settled: {tier}")


def one_run(client: replayd.Client, remover: str, rows: int, passes: int, ram_bytes: int,
            seconds: float) -> Dict[str, float]:
    fields = {name: (dtype, shape) for name, dtype, shape in W2.fields}
    table = f"c_{remover}"
    client.create_table(table, fields, rows, ram_bytes=ram_bytes, remover=remover)
    try:
        inserts = fill(client, table, rows * passes, prioritized=remover == "min_heap")
        tier = settled(client, table)
        record = tier["bytes_written"] / max(1, tier["rows_written"])
        live = tier["cold_rows"] * record
        return {"inserts_per_s": inserts,
                "file_over_live": tier["file_bytes"] / live,
                "file_mib": tier["file_bytes"] / (1 << 20),
                "moved_per_written": tier["rows_moved"] / max(1, tier["rows_written"]),
                "samples_per_s": sample_rate(client, table, seconds)}
    finally:
        client.drop_table(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(ROOT / "build" / "service" / "replayd"))
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--ram-mib", type=float, default=100.0)
    parser.add_argument("--segment-mib", type=int, default=64)
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--removers", default=",".join(REMOVERS))
    parser.add_argument("--tier-dir", default="/var/tmp/replayd-compaction")
    args = parser.parse_args()
    rows = int(args.gib * (1 << 30) / W2.item_bytes)
    ram_bytes = int(args.ram_mib * (1 << 20))
    tier_dir = Path(args.tier_dir)
    shutil.rmtree(tier_dir, ignore_errors=True)
    tier_dir.mkdir(parents=True)
    removers = args.removers.split(",")
    runs: Dict[str, List[Dict[str, float]]] = {r: [] for r in removers}
    try:
        with pinned_server(args.binary,
                           limits={"tier_segment_bytes": args.segment_mib << 20},
                           extra_args=["--tier-dir", str(tier_dir)]) as address, \
                replayd.Client(address, timeout=300) as client:
            for rep in range(args.reps):
                order = removers[rep % len(removers):] + removers[:rep % len(removers)]
                for remover in order:
                    result = one_run(client, remover, rows, args.passes, ram_bytes,
                                     args.seconds)
                    runs[remover].append(result)
                    print(json.dumps({"rep": rep, "remover": remover, **result}), flush=True)
    finally:
        shutil.rmtree(tier_dir, ignore_errors=True)
    print(f"\n{rows} rows of {W2.item_bytes} B ({args.gib} GiB), {args.ram_mib} MiB in RAM, "
          f"{args.segment_mib} MiB segments, {args.passes} passes; medians of {args.reps} "
          "(min-max)")
    keys = ("inserts_per_s", "file_over_live", "file_mib", "moved_per_written",
            "samples_per_s")
    print("| remover | " + " | ".join(keys) + " |")
    for remover in removers:
        cells = []
        for key in keys:
            values = [run[key] for run in runs[remover]]
            cells.append(f"{statistics.median(values):.3g} ({min(values):.3g}-"
                         f"{max(values):.3g})")
        print(f"| {remover} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
