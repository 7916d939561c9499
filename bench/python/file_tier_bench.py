"""A table ten times its RAM budget (docs/FILE_TIER.md): the server's memory, and uniform W2
sampling from disk against the disk's own random-read rate, from the page cache against the
same table all in RAM, and a RAM-only table's latency while another table is read from disk.

The server is pinned to CPU 0 (its I/O pool with it), the clients to CPU 1. One run:

1. ``tiered``: W2 transitions (56,457 B, random bytes: zstd cannot shrink them), `--gib` of
   them with `--ram-mib` in RAM. Filled in batches of 64; the server's RSS after the writer
   caught up, against the RSS before the table and the budget.
2. Cold: every segment's pages dropped from the page cache (posix_fadvise DONTNEED), then
   uniform samples of 32 with 4 requests in flight for `--seconds`: transitions/s. Beside
   it, the disk's random-read rate in the same state: 8 threads reading random records of
   the segment files (their own sizes, the same files) with pread: records/s.
3. Page cache: the files read once, then the same sampling; then the table dropped, the
   same rows inserted into a table all in RAM, and the same sampling: the ratio.
4. A W1 table in RAM sampled one request at a time (256 items): its p50/p99 latency alone,
   then while another process samples the tiered table (cache dropped) flat out, and at
   the end while that process samples the table all in RAM flat out (the same replies
   without a disk).

Usage: taskset -c 1 /usr/bin/python3 bench/python/file_tier_bench.py [--gib 8] [--ram-mib 800]
       [--tier-dir /var/tmp/replayd-tier] [--seconds 5]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "client" / "python"))
sys.path.insert(0, str(HERE))

import replayd  # noqa: E402
from workloads import W1, W2  # noqa: E402

BATCH = 32
IN_FLIGHT = 4


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def segment_files(tier_dir: Path, table: str) -> List[Path]:
    return sorted(tier_dir.glob(f"{table}.*/segment-*"))


def drop_cache(files: List[Path]) -> None:
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm_cache(files: List[Path]) -> None:
    for path in files:
        with open(path, "rb") as f:
            while f.read(16 << 20):
                pass


def fill(client: replayd.Client, table: str, rows: int) -> None:
    pool = W2.batch(512, seed=3)
    pending = []
    for start in range(0, rows, 64):
        at = (start // 64 * 64) % 448
        n = min(64, rows - start)
        batch = {name: column[at:at + n] for name, column in pool.items()}
        pending.append(client.insert_async(table, batch))
        if len(pending) >= 8:
            pending.pop(0).result()
    for future in pending:
        future.result()


def wait_written_out(client: replayd.Client, table: str) -> Dict[str, int]:
    while True:
        tier = client.info(table)["file_tier"]
        if tier["hot_rows"] <= tier["ram_rows"]:
            return tier
        time.sleep(0.1)


def sample_rate(client: replayd.Client, table: str, seconds: float) -> float:
    """Transitions/s of uniform samples of BATCH, IN_FLIGHT requests in flight."""
    futures = [client.sample_async(table, BATCH) for _ in range(IN_FLIGHT)]
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        futures.pop(0).result()
        done += BATCH
        futures.append(client.sample_async(table, BATCH))
    elapsed = time.perf_counter() - started
    for future in futures:
        future.result()
    return done / elapsed


def disk_random_reads(files: List[Path], record_bytes: int, seconds: float,
                      threads: int = 8) -> float:
    """Records/s of random preads of `record_bytes` from `files` by `threads` threads."""
    descriptors = [(os.open(path, os.O_RDONLY), path.stat().st_size) for path in files]
    counts = [0] * threads
    stop = time.perf_counter() + seconds

    def reader(index: int) -> None:
        rng = random.Random(index)
        while time.perf_counter() < stop:
            fd, size = descriptors[rng.randrange(len(descriptors))]
            offset = rng.randrange(max(1, size - record_bytes))
            os.pread(fd, record_bytes, offset)
            counts[index] += 1

    workers = [threading.Thread(target=reader, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    for fd, _ in descriptors:
        os.close(fd)
    return sum(counts) / elapsed


def latencies(client: replayd.Client, table: str, seconds: float) -> Tuple[float, float]:
    times = []
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        started = time.perf_counter()
        client.sample(table, 256)
        times.append(time.perf_counter() - started)
    return float(np.percentile(times, 50)) * 1e6, float(np.percentile(times, 99)) * 1e6


def cold_reader(address: str, table: str, stop_at: float, files: List[str]) -> None:
    os.sched_setaffinity(0, {1})
    client = replayd.Client(address, timeout=120)
    futures = [client.sample_async(table, BATCH) for _ in range(IN_FLIGHT)]
    last_drop = 0.0
    while time.perf_counter() < stop_at:
        futures.pop(0).result()
        futures.append(client.sample_async(table, BATCH))
        if time.perf_counter() - last_drop > 0.5:  # keep the reads cold
            drop_cache([Path(f) for f in files])
            last_drop = time.perf_counter()
    for future in futures:
        future.result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(ROOT / "build" / "service" / "replayd"))
    parser.add_argument("--gib", type=float, default=8.0)
    parser.add_argument("--ram-mib", type=float, default=800.0)
    parser.add_argument("--tier-dir", default="/var/tmp/replayd-tier-bench")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()

    rows = int(args.gib * (1 << 30) / W2.item_bytes)
    ram_bytes = int(args.ram_mib * (1 << 20))
    tier_dir = Path(args.tier_dir)
    shutil.rmtree(tier_dir, ignore_errors=True)
    tier_dir.mkdir(parents=True)
    results: Dict[str, object] = {"rows": rows, "row_bytes": W2.item_bytes,
                                  "table_bytes": rows * W2.item_bytes, "ram_bytes": ram_bytes}
    with tempfile.TemporaryDirectory() as tmp:
        socket, ready = f"{tmp}/s.sock", f"{tmp}/ready"
        server = subprocess.Popen(["taskset", "-c", "0", args.binary, "--unix", socket, "--tcp",
                                   "", "--metrics", "", "--ready-file", ready, "--log-level",
                                   "warn", "--tier-dir", str(tier_dir)])
        try:
            while not os.path.exists(ready):
                time.sleep(0.05)
            address = f"unix://{socket}"
            client = replayd.Client(address, timeout=300)
            fields = {name: (dtype, shape) for name, dtype, shape in W2.fields}
            rss_before = rss(server.pid)
            client.create_table("tiered", fields, rows, ram_bytes=ram_bytes)
            started = time.perf_counter()
            fill(client, "tiered", rows)
            tier = wait_written_out(client, "tiered")
            results["fill_s"] = time.perf_counter() - started
            results["rss_growth"] = rss(server.pid) - rss_before
            results["tier"] = tier
            files = segment_files(tier_dir, "tiered")
            record = tier["bytes_written"] // max(1, tier["rows_written"])
            results["record_bytes"] = record

            runs = []
            for _ in range(3):
                drop_cache(files)
                disk = disk_random_reads(files, record, args.seconds)
                drop_cache(files)
                cold = sample_rate(client, "tiered", args.seconds)
                runs.append((cold, disk))
            results["cold_runs"] = runs
            warm_cache(files)
            results["warm_rate"] = [sample_rate(client, "tiered", args.seconds) for _ in range(3)]

            # The RAM-only table's latency, alone and beside the cold reader.
            client.create_table("ram_w1", {n: (d, s) for n, d, s in W1.fields}, 100_000)
            client.insert("ram_w1", W1.batch(50_000))
            quiet = [latencies(client, "ram_w1", args.seconds) for _ in range(2)]
            stop_at = time.perf_counter() + args.seconds + 2
            reader = multiprocessing.Process(target=cold_reader, args=(
                address, "tiered", stop_at, [str(f) for f in files]))
            reader.start()
            time.sleep(1)
            busy = latencies(client, "ram_w1", args.seconds)
            reader.join()
            results["ram_table_quiet_us"] = quiet
            results["ram_table_beside_cold_us"] = busy
            results["cold_reads_during"] = client.info("tiered")["file_tier"]["cold_reads"]

            client.drop_table("tiered")
            client.drop_table("ram_w1")
            time.sleep(2)
            client.create_table("in_ram", fields, rows)
            fill(client, "in_ram", rows)
            results["ram_rate"] = [sample_rate(client, "in_ram", args.seconds) for _ in range(3)]
            # The RAM-only table beside the same reader drawing from a table all in RAM: what
            # the other reader's replies cost the thread, disk or not.
            client.create_table("ram_w1", {n: (d, s) for n, d, s in W1.fields}, 100_000)
            client.insert("ram_w1", W1.batch(50_000))
            stop_at = time.perf_counter() + args.seconds + 2
            reader = multiprocessing.Process(target=cold_reader, args=(
                address, "in_ram", stop_at, []))
            reader.start()
            time.sleep(1)
            results["ram_table_beside_ram_reader_us"] = latencies(client, "ram_w1", args.seconds)
            reader.join()
            client.drop_table("in_ram")
        finally:
            server.terminate()
            server.wait()
            shutil.rmtree(tier_dir, ignore_errors=True)
    print(json.dumps(results, indent=1))
    cold = sorted(runs, key=lambda run: run[0] / run[1])[1]
    warm = float(np.median(results["warm_rate"]))
    in_ram = float(np.median(results["ram_rate"]))
    print(f"RSS growth {results['rss_growth'] / 2**20:.0f} MiB for a {args.ram_mib:.0f} MiB "
          f"budget ({results['table_bytes'] / 2**30:.1f} GiB table)")
    print(f"cold: {cold[0]:.0f} transitions/s against {cold[1]:.0f} random record reads/s "
          f"(ratio {cold[0] / cold[1]:.2f}, median of 3)")
    print(f"page cache: {warm:.0f}/s against all in RAM {in_ram:.0f}/s (ratio {warm / in_ram:.2f})")
    quiet_p99 = float(np.median([q[1] for q in quiet]))
    beside_ram = results["ram_table_beside_ram_reader_us"][1]
    print(f"RAM table p99 {quiet_p99:.0f} us quiet, {busy[1]:.0f} us beside cold reads (ratio "
          f"{busy[1] / quiet_p99:.2f}), {beside_ram:.0f} us beside the same reader on the "
          f"table all in RAM (cold against that: {busy[1] / beside_ram:.2f})")


if __name__ == "__main__":
    main()
