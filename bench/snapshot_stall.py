"""Request latency of a concurrent client while the server snapshots a multi-GB table.

Starts the real server (--data-dir in a fresh temporary directory), fills a W2 table
(obs/next_obs uint8[4,84,84], 56,457 bytes per item) to `--items`, then, `--runs` times:
  1. baseline: for `--seconds`, a client alternates a 1-item W2 insert and a ping, timing
     each request;
  2. snapshot: another client asks for a snapshot; the same loop runs until the reply
     arrives (inserts write pages the fork shares, so they pay copy-on-write faults).
Prints, per run and as medians over runs: p50/p99/max latency of each phase, the fork stall
the server reports (stall_ms), the snapshot's duration and size.

    /usr/bin/python3 bench/snapshot_stall.py --bin build/service/replayd --items 40000
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "client" / "python"))
import replayd  # noqa: E402

W2 = {"obs": ("uint8", (4, 84, 84)), "act": ("int32", ()), "rew": ("float32", ()),
      "next_obs": ("uint8", (4, 84, 84)), "done": ("uint8", ())}
W2_ITEM_BYTES = 56_457


def w2_batch(n: int, rng: np.random.Generator) -> Dict[str, np.ndarray]:
    return {"obs": rng.integers(0, 255, (n, 4, 84, 84), dtype=np.uint8),
            "act": rng.integers(0, 18, n, dtype=np.int32),
            "rew": rng.random(n, dtype=np.float32),
            "next_obs": rng.integers(0, 255, (n, 4, 84, 84), dtype=np.uint8),
            "done": np.zeros(n, dtype=np.uint8)}


def start_server(binary: str, workdir: Path) -> subprocess.Popen:
    ready = workdir / "ready.json"
    proc = subprocess.Popen([binary, "--unix", str(workdir / "s.sock"), "--tcp", "",
                             "--metrics", "", "--data-dir", str(workdir / "data"),
                             "--ready-file", str(ready), "--log-level", "warn"])
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("replayd did not start")
        time.sleep(0.05)
    return proc


def timed_loop(client: replayd.Client, item: Dict[str, np.ndarray], keep_going) -> Dict[str, List[float]]:
    latencies: Dict[str, List[float]] = {"insert": [], "ping": []}
    while keep_going():
        t0 = time.perf_counter()
        client.insert("w2", item)
        t1 = time.perf_counter()
        client.ping()
        t2 = time.perf_counter()
        latencies["insert"].append((t1 - t0) * 1e3)
        latencies["ping"].append((t2 - t1) * 1e3)
    return latencies


def summary(values: List[float]) -> Dict[str, float]:
    array = np.asarray(values)
    return {"p50": float(np.percentile(array, 50)), "p99": float(np.percentile(array, 99)),
            "max": float(array.max()), "n": len(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=str(REPO / "build" / "service" / "replayd"))
    parser.add_argument("--items", type=int, default=40_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--tmp", default=None, help="parent of the data directory")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="replayd-snapbench-", dir=args.tmp))
    proc = start_server(args.bin, workdir)
    rng = np.random.default_rng(0)
    results = []
    try:
        address = f"unix://{workdir / 's.sock'}"
        with replayd.Client(address, timeout=600) as c, replayd.Client(address, timeout=600) as s:
            c.create_table("w2", W2, capacity=args.items, seed=1)
            batch = w2_batch(256, rng)
            for _ in range(0, args.items, 256):
                c.insert("w2", batch)
            item = w2_batch(1, rng)
            print(f"table: {args.items} W2 items, {args.items * W2_ITEM_BYTES / 1e9:.2f} GB",
                  flush=True)
            for run in range(args.runs):
                deadline = time.monotonic() + args.seconds
                baseline = timed_loop(c, item, lambda: time.monotonic() < deadline)
                reply: Dict[str, float] = {}
                thread = threading.Thread(target=lambda: reply.update(s.snapshot()))
                thread.start()
                during = timed_loop(c, item, thread.is_alive)
                thread.join()
                row = {"run": run, "stall_ms": reply["stall_ms"],
                       "snapshot_s": reply["duration_ms"] / 1e3, "gb": reply["bytes"] / 1e9}
                for op in ("ping", "insert"):
                    row[f"{op}_base"] = summary(baseline[op])
                    row[f"{op}_snap"] = summary(during[op])
                results.append(row)
                print(json.dumps(row), flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=600)
        shutil.rmtree(workdir, ignore_errors=True)

    def med(key: str, stat: str = "") -> float:
        return statistics.median(r[key][stat] if stat else r[key] for r in results)

    print(f"\nmedians over {len(results)} runs "
          f"(snapshot {med('gb'):.2f} GB in {med('snapshot_s'):.2f} s, fork stall "
          f"{med('stall_ms'):.1f} ms)")
    print("| request | p50 without | p99 without | p50 during | p99 during | max during | p99 ratio |")
    print("|---|---|---|---|---|---|---|")
    for op in ("ping", "insert"):
        p99_base, p99_snap = med(f"{op}_base", "p99"), med(f"{op}_snap", "p99")
        print(f"| {op} | {med(f'{op}_base', 'p50'):.3f} ms | {p99_base:.3f} ms | "
              f"{med(f'{op}_snap', 'p50'):.3f} ms | {p99_snap:.3f} ms | "
              f"{med(f'{op}_snap', 'max'):.1f} ms | {p99_snap / p99_base:.1f}x |")


if __name__ == "__main__":
    main()
