"""A table ten times its RAM budget through a snapshot and a restart (docs/FILE_TIER.md,
"Snapshots and restarts"): what the snapshot writes, how long it takes, what a ping waits
meanwhile, how long the stop and the start take, and that the restarted server holds every
item, byte for byte, from the very same segment files.

The server is pinned to CPU 0 (its I/O pool with it), the client to CPU 1; the tier and
data directories are on one filesystem. One run:

1. ``tiered``: W2 transitions (56,457 B, random bytes), `--gib` of them with `--ram-mib` in
   RAM, filled in batches of 64; the writer caught up.
2. A digest (BLAKE2b) of every item (key, priority and fields, in the table's order) read
   back through ``read_items``.
3. ``snapshot``: its duration, its image's bytes against the table's, the fork's stall, and
   pings from a second process meanwhile (max, p99).
4. SIGTERM (the final snapshot links the segments again) and a start on the same
   directories: the stop's and the start's time to ready, the server's RSS after it.
5. The digest again (it must equal the first), and the segment files the restarted tier
   reads: their inodes against those kept beside the snapshot (links, not copies).

Usage: taskset -c 1 /usr/bin/python3 bench/python/file_tier_restart.py [--gib 8]
       [--ram-mib 800] [--dir /var/tmp/replayd-restart-bench]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "client" / "python"))
sys.path.insert(0, str(HERE))

import replayd  # noqa: E402
from file_tier_bench import fill, rss, wait_written_out  # noqa: E402
from workloads import W2  # noqa: E402


def digest(client: replayd.Client, table: str) -> Dict[str, object]:
    h = hashlib.blake2b(digest_size=16)
    items = 0
    started = time.perf_counter()
    for page in client.read_items(table, page=256):
        for name in sorted(page):
            h.update(np.ascontiguousarray(page[name]).tobytes())
        items += len(page["key"])
    return {"items": items, "digest": h.hexdigest(), "read_s": time.perf_counter() - started}


def pinger(address: str, stop: "multiprocessing.synchronize.Event",
           out: "multiprocessing.Queue[List[float]]") -> None:
    client = replayd.Client(address, timeout=60)
    waits = []
    while not stop.is_set():
        started = time.perf_counter()
        client.ping()
        waits.append((time.perf_counter() - started) * 1e3)
    out.put(waits)


def start_server(binary: str, run_dir: Path, n: int) -> subprocess.Popen:
    ready = run_dir / f"ready-{n}"
    server = subprocess.Popen(["taskset", "-c", "0", binary, "--unix", str(run_dir / "s.sock"),
                               "--tcp", "", "--metrics", "", "--ready-file", str(ready),
                               "--log-level", "info", "--tier-dir", str(run_dir / "tier"),
                               "--data-dir", str(run_dir / "data")],
                              stdout=open(run_dir / "server.log", "ab"), stderr=subprocess.STDOUT)
    while not ready.exists():
        if server.poll() is not None:
            raise RuntimeError((run_dir / "server.log").read_text()[-3000:])
        time.sleep(0.01)
    return server


def inodes(paths: List[Path]) -> Dict[str, int]:
    return {p.name: p.stat().st_ino for p in paths}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(ROOT / "build" / "service" / "replayd"))
    parser.add_argument("--gib", type=float, default=8.0)
    parser.add_argument("--ram-mib", type=float, default=800.0)
    parser.add_argument("--dir", default="/var/tmp/replayd-restart-bench")
    args = parser.parse_args()

    rows = int(args.gib * (1 << 30) / W2.item_bytes)
    ram_bytes = int(args.ram_mib * (1 << 20))
    run_dir = Path(args.dir)
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    address = f"unix://{run_dir / 's.sock'}"
    results: Dict[str, object] = {"rows": rows, "table_bytes": rows * W2.item_bytes,
                                  "ram_bytes": ram_bytes}
    server = start_server(args.binary, run_dir, 1)
    try:
        client = replayd.Client(address, timeout=600)
        fields = {name: (dtype, shape) for name, dtype, shape in W2.fields}
        client.create_table("tiered", fields, rows, ram_bytes=ram_bytes)
        started = time.perf_counter()
        fill(client, "tiered", rows)
        results["tier"] = wait_written_out(client, "tiered")
        results["fill_s"] = time.perf_counter() - started
        before = digest(client, "tiered")
        results["before"] = before

        queue: "multiprocessing.Queue[List[float]]" = multiprocessing.Queue()
        stop = multiprocessing.Event()
        ping = multiprocessing.Process(target=pinger, args=(address, stop, queue))
        ping.start()
        time.sleep(0.5)
        results["snapshot"] = client.snapshot()
        time.sleep(0.5)
        stop.set()
        waits = np.array(queue.get())
        ping.join()
        results["pings_during_snapshot_ms"] = {
            "count": len(waits), "p50": float(np.percentile(waits, 50)),
            "p99": float(np.percentile(waits, 99)), "max": float(waits.max())}
        client.close()

        started = time.perf_counter()
        server.terminate()
        results["stop_exit"] = server.wait()
        results["stop_s"] = time.perf_counter() - started
        kept = sorted((run_dir / "data").glob("snapshot-*.segments/tiered/segment-*"))
        newest = max(p.parent.parent for p in kept)
        kept_inodes = inodes([p for p in kept if p.parent.parent == newest])

        started = time.perf_counter()
        server = start_server(args.binary, run_dir, 2)
        results["start_s"] = time.perf_counter() - started
        results["rss_after_start"] = rss(server.pid)
        client = replayd.Client(address, timeout=600)
        after = digest(client, "tiered")
        results["after"] = after
        results["same_items"] = (after["items"] == before["items"] and
                                 after["digest"] == before["digest"])
        restored = inodes(sorted((run_dir / "tier").glob("tiered.*/segment-*")))
        results["segments_kept"] = len(kept_inodes)
        results["segments_restored_are_the_kept_files"] = all(
            restored.get(name) == ino for name, ino in kept_inodes.items())
        results["rss_after_read"] = rss(server.pid)
        client.close()
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(run_dir, ignore_errors=True)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
