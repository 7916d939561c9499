#!/usr/bin/env python3
"""Creating and dropping a large table beside a client that pings (docs/CONFIG.md,
"max_tables_total_bytes"; service/commands/create_table.cpp): the server sets up a large
table on a thread of its own and frees a dropped one on its release thread, so the thread
that serves every client keeps answering. One process pings the server back to back (one
request at a time, each timed) while another creates, then drops, a table of
`--capacity` one-byte items; the pings' latency while each runs, against quiet windows of
the same length before, in every repetition.

The server runs pinned to CPU 0 (taskset), both client processes on CPU 1.

    /usr/bin/python3 bench/python/table_lifecycle.py                 # 2^26 items, 5 reps
    /usr/bin/python3 bench/python/table_lifecycle.py --capacity 1000000 --reps 2

With `--tier-dir DIR --ram-mib M --row-bytes B` the table has a file tier (docs/FILE_TIER.md):
rows of B bytes, M MiB of them in RAM, and it is filled before it is dropped (so that the
drop frees its hot rows and deletes its segment files):

    /usr/bin/python3 bench/python/table_lifecycle.py --capacity 380000 --row-bytes 56457 \
        --ram-mib 2048 --tier-dir /var/tmp/replayd-lifecycle --reps 2
"""
from __future__ import annotations

import argparse
import array
import gc
import multiprocessing
import os
import statistics
import sys
import time

import numpy as np
from pathlib import Path
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import replayd  # noqa: E402
from pinned_server import pinned_server  # noqa: E402
from replayd.testing import find_binary  # noqa: E402


def pinger(address: str, stop: Any, out: Any) -> None:
    """Pings until `stop` is set; sends [(start, seconds)] of every ping. Python's cyclic
    garbage collector is off and the times go into flat arrays: a full collection over the
    tens of thousands of (start, seconds) tuples a creation's window gathers held this
    process 30-120 ms without sending a ping (the server idle meanwhile, seen with perf
    sched), which read as the server's stalls."""
    os.sched_setaffinity(0, {1})
    gc.disable()
    client = replayd.Client(address, timeout=60)
    client.ping()
    starts, durations = array.array("d"), array.array("d")
    while not stop.is_set():
        started = time.monotonic()
        client.ping()
        starts.append(started)
        durations.append(time.monotonic() - started)
    out.send(list(zip(starts, durations)))


def percentile(values: List[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def window(times: List[Tuple[float, float]], begin: float, end: float) -> List[float]:
    return [1e3 * seconds for started, seconds in times if begin <= started < end]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=None)
    parser.add_argument("--capacity", type=int, default=1 << 26)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--row-bytes", type=int, default=1)
    parser.add_argument("--ram-mib", type=float, default=0, help="a file tier's RAM budget")
    parser.add_argument("--tier-dir", default="")
    parser.add_argument("--drop-window", type=float, default=1.0,
                        help="seconds of pings after a drop (a file tier's segment files "
                             "take seconds to delete)")
    parser.add_argument("--settle", action="store_true",
                        help="with a file tier: write the fill's dirty pages back (sync) and "
                             "wait 1 s before the drop, so that its window holds the drop's "
                             "own work")
    args = parser.parse_args()
    tiered = args.ram_mib > 0
    os.sched_setaffinity(0, {1})
    binary = find_binary(args.binary or os.environ.get("REPLAYD_BIN") or
                         str(Path(__file__).resolve().parents[2] / "build/service/replayd"))
    rows: Dict[str, List[List[float]]] = {"quiet": [], "create": [], "drop": []}
    took: Dict[str, List[float]] = {"create": [], "drop": []}
    promised = 0
    extra = ["--tier-dir", args.tier_dir] if tiered else []
    fill_s: List[float] = []
    with pinned_server(binary, extra_args=extra, log_level="info" if tiered else "warn") as address:
        client = replayd.Client(address, timeout=600)
        for rep in range(args.reps):
            stop = multiprocessing.Event()
            receive, send = multiprocessing.Pipe(duplex=False)
            process = multiprocessing.Process(target=pinger, args=(address, stop, send))
            process.start()
            time.sleep(0.5)
            marks = {"quiet": time.monotonic()}
            started = time.monotonic()
            info = client.create_table(
                "big", {"x": ("uint8", (args.row_bytes,) if args.row_bytes > 1 else ())},
                args.capacity, ram_bytes=int(args.ram_mib * 2**20) if tiered else None)
            took["create"].append(time.monotonic() - started)
            promised = int(info.get("bytes", 0)) if isinstance(info, dict) else 0
            marks["create"] = started
            marks["create_end"] = time.monotonic()
            time.sleep(0.2)
            if tiered:  # full, most of it on disk, before the drop
                filled = time.monotonic()
                batch = np.random.default_rng(0).integers(0, 256, (64, args.row_bytes),
                                                          dtype=np.uint8)
                pending = []
                for _ in range(0, args.capacity, 64):
                    pending.append(client.insert_async("big", {"x": batch}))
                    if len(pending) >= 8:
                        pending.pop(0).result()
                for future in pending:
                    future.result()
                while client.info("big")["file_tier"]["hot_rows"] > \
                        client.info("big")["file_tier"]["ram_rows"]:
                    time.sleep(0.1)
                fill_s.append(time.monotonic() - filled)
                if args.settle:  # the fill's dirty pages written back first: not the drop's
                    os.sync()
                    time.sleep(1.0)
                time.sleep(0.5)
            started = time.monotonic()
            client.drop_table("big")
            took["drop"].append(time.monotonic() - started)
            marks["drop"] = started
            time.sleep(args.drop_window)  # the table is freed (and its files deleted) meanwhile
            marks["drop_end"] = time.monotonic()
            stop.set()
            times = receive.recv()
            process.join()
            length = marks["create_end"] - marks["create"]
            rows["quiet"].append(window(times, marks["create"] - 0.45, marks["create"] - 0.45
                                        + min(length, 0.4)))
            rows["create"].append(window(times, marks["create"], marks["create_end"]))
            rows["drop"].append(window(times, marks["drop"], marks["drop_end"]))
            slowest = max((t for t in times if marks["create"] <= t[0] < marks["create_end"]),
                          key=lambda t: t[1], default=(marks["create"], 0.0))
            slowest_drop = max((t for t in times if marks["drop"] <= t[0] < marks["drop_end"]),
                               key=lambda t: t[1], default=(marks["drop"], 0.0))
            print(f"repetition {rep + 1}/{args.reps}: create {took['create'][-1]:.2f} s "
                  f"(slowest ping {slowest[1] * 1e3:.1f} ms at +{slowest[0] - marks['create']:.2f}"
                  f" s), drop {took['drop'][-1] * 1e3:.1f} ms (slowest ping "
                  f"{slowest_drop[1] * 1e3:.1f} ms at +{slowest_drop[0] - marks['drop']:.3f} s)",
                  file=sys.stderr)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; a table of "
          f"{args.capacity:,} items of {args.row_bytes:,} B ({promised / 2**30:.2f} GiB "
          f"allocated once created); server on CPU 0, pinger and creator on CPU 1; "
          f"{args.reps} repetitions")
    print("| window | pings | p50 ms | p99 ms | max ms | per repetition max ms |")
    print("|---|---:|---:|---:|---:|---|")
    for name, reps in rows.items():
        every = [v for rep in reps for v in rep]
        print(f"| {name} | {len(every):,} | {statistics.median(every):.3f} | "
              f"{percentile(every, 0.99):.3f} | {max(every):.2f} | "
              f"{', '.join(f'{max(r):.2f}' if r else '-' for r in reps)} |")
    print(f"create_table took {statistics.median(took['create']):.2f} s (median), "
          f"drop_table {1e3 * statistics.median(took['drop']):.1f} ms")
    if tiered:
        print(f"a file tier: rows of {args.row_bytes:,} B, {args.capacity * args.row_bytes / 2**30:.1f}"
              f" GiB in all, {args.ram_mib:.0f} MiB in RAM; filled in "
              f"{statistics.median(fill_s):.0f} s (median) before each drop")


if __name__ == "__main__":
    main()
