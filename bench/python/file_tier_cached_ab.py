"""The page-cache case of a tiered table, A/B: variants (a server build, and whether the
client has the rows written into its arena or sent through the socket) sample the same table
with its segments in the page cache, interleaved, with the server's and the client's CPU.

Per repetition and per variant: a server pinned to CPU 0 (its I/O pool with it), a W2 table
of `--gib` with `--ram-mib` in RAM filled as in file_tier_bench.py, written out, its
segments read once, then uniform samples of 32, 4 requests in flight (`sample_async`), for
`--seconds`: transitions/s, the server's CPU (all its threads) and this client's, in cores.
A variant `NAME=PATH` uses the client as it is (rows into its arena, docs/SHM.md, where the
server offers the plane); `NAME=PATH:socket` keeps every reply on the socket (a server
without "into" needs it). With `--in-ram`, the same for the table all in RAM (on the plane)
with the last variant's build.

Usage: taskset -c 1 /usr/bin/python3 bench/python/file_tier_cached_ab.py
       --variant before=PATH:socket --variant after=PATH [--gib 1] [--ram-mib 100] [--reps 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import file_tier_bench as tier  # noqa: E402
from file_tier_bench import replayd  # noqa: E402
from pinned_server import cpu_seconds, pinned_server_process  # noqa: E402
from replayd.shm import sample_into  # noqa: E402
from workloads import W2  # noqa: E402

INTO_MIN_BYTES = sample_into.INTO_MIN_BYTES


def one_run(binary: str, rows: int, ram_bytes: Optional[int], seconds: float,
            tier_dir: Path, socket_only: bool = False) -> Dict[str, float]:
    # Replies under INTO_MIN_BYTES keep the socket: raising it keeps them all there.
    sample_into.INTO_MIN_BYTES = 1 << 62 if socket_only else INTO_MIN_BYTES
    shutil.rmtree(tier_dir, ignore_errors=True)
    tier_dir.mkdir(parents=True)
    try:
        with pinned_server_process(binary, extra_args=["--tier-dir", str(tier_dir)]) as (
                address, pid):
            client = replayd.Client(address, timeout=300)
            fields = {name: (dtype, shape) for name, dtype, shape in W2.fields}
            if ram_bytes is None:
                client.create_table("t", fields, rows)
            else:
                client.create_table("t", fields, rows, ram_bytes=ram_bytes)
            tier.fill(client, "t", rows)
            if ram_bytes is not None:
                tier.wait_written_out(client, "t")
                tier.warm_cache(tier.segment_files(tier_dir, "t"))
            tier.sample_rate(client, "t", 1.0)  # warm-up
            cpu_before, own_before = cpu_seconds(pid), os.times()
            started = time.perf_counter()
            rate = tier.sample_rate(client, "t", seconds)
            elapsed = time.perf_counter() - started
            cpu_after, own_after = cpu_seconds(pid), os.times()
            own = (own_after.user + own_after.system - own_before.user - own_before.system)
            return {"rate": rate, "server_cores": (cpu_after - cpu_before) / elapsed,
                    "client_cores": own / elapsed}
    finally:  # after the server stopped
        shutil.rmtree(tier_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", required=True,
                        help="NAME=PATH of a server build, PATH:socket to keep replies on "
                             "the socket; give two or more")
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--ram-mib", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--in-ram", action="store_true",
                        help="also the table all in RAM, with the last variant's build")
    parser.add_argument("--tier-dir", default="/var/tmp/replayd-cached-ab")
    args = parser.parse_args()
    builds = dict(item.split("=", 1) for item in args.variant)
    rows = int(args.gib * (1 << 30) / W2.item_bytes)
    ram_bytes = int(args.ram_mib * (1 << 20))
    runs: Dict[str, List[Dict[str, float]]] = {name: [] for name in builds}
    for rep in range(args.reps):
        for name, binary in builds.items():
            path, _, mode = binary.partition(":")
            result = one_run(path, rows, ram_bytes, args.seconds, Path(args.tier_dir),
                             socket_only=mode == "socket")
            runs[name].append(result)
            print(f"rep {rep} {name}: {result['rate']:,.0f} transitions/s, server "
                  f"{result['server_cores']:.2f} cores, client {result['client_cores']:.2f}",
                  flush=True)
    if args.in_ram:
        name, binary = list(builds.items())[-1]
        binary = binary.partition(":")[0]
        runs["in_ram"] = [one_run(binary, rows, None, args.seconds, Path(args.tier_dir))
                          for _ in range(args.reps)]
        for result in runs["in_ram"]:
            print(f"in RAM ({name}): {result['rate']:,.0f} transitions/s, server "
                  f"{result['server_cores']:.2f} cores, client {result['client_cores']:.2f}")
    first = statistics.median(r["rate"] for r in runs[next(iter(builds))])
    for name, results in runs.items():
        median = statistics.median(r["rate"] for r in results)
        print(f"{name}: median {median:,.0f} transitions/s ({median / first:.2f}x the first)")


if __name__ == "__main__":
    main()
