"""Mixed batches (docs/MIXED.md) against one-table samples of the same size.

    /usr/bin/python3 bench/python/mixed.py                      # 5 repetitions of 2 s
    /usr/bin/python3 bench/python/mixed.py --reps 1 --duration 0.2   # a smoke run

For W1 (45-byte transitions, batch 256) and W2 (Atari, 56,457 bytes, batch 32), over the
Unix socket (samples gather their rows over the shared-memory plane) and over TCP (rows
through the socket): a learner's synchronous loop of ``client.sample(table, n)`` against
``client.sample({a: 0.5, b: 0.5}, n)``, two uniform tables of the same fields, each filled.
The single-table loop samples table a. Repetitions interleave every case, so the machine's
drift moves them alike; each cell is the median of the repetitions' batches per second,
and the ratio is mixed / single (1.0: a mixed batch costs what a one-table one does).

The server runs pinned to CPU 0 (taskset -c 0), this process to CPU 1 (on a machine with
fewer than 2 CPUs both run unpinned, and the output says so). W2's tables hold 2,000
items each (not the comparison benchmark's 10,000), so the two fit a shared machine.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "client" / "python"))

import replayd  # noqa: E402
from workloads import WORKLOADS, Workload  # noqa: E402

CAPACITY = {"W1": 100_000, "W2": 2_000}
FILL_BATCH = {"W1": 4096, "W2": 64}


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", default=str(REPO / "build" / "service" / "replayd"))
    p.add_argument("--workloads", default="W1,W2")
    p.add_argument("--transports", default="unix,tcp")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--duration", type=float, default=2.0,
                   help="seconds each loop is timed, after a 0.2 s warm-up")
    p.add_argument("--json", default="", help="also write the results here")
    return p.parse_args(argv)


class Server:
    """The server on a Unix socket and a TCP port, pinned to CPU 0 when there are two."""

    def __init__(self, binary: str, pinned: bool) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="replayd-mixed-")
        ready = f"{self._tmp.name}/ready.json"
        args = [binary, "--unix", f"{self._tmp.name}/s.sock", "--tcp", "127.0.0.1:0",
                "--metrics", "", "--ready-file", ready, "--log-level", "warn"]
        self.proc = subprocess.Popen((["taskset", "-c", "0"] if pinned else []) + args)
        deadline = time.monotonic() + 30
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start: {args}")
            time.sleep(0.05)
        time.sleep(0.05)  # the file is written whole before it is renamed into place
        with open(ready) as f:
            info = json.load(f)
        self.addresses = {"unix": f"unix://{info['unix']}", "tcp": f"tcp://{info['tcp']}"}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()
        self._tmp.cleanup()


def fill(client: replayd.Client, workload: Workload) -> Tuple[str, str]:
    """Two uniform tables of the workload's fields, each filled to its capacity."""
    names = (f"{workload.name}-a", f"{workload.name}-b")
    fields = [(name, dtype, shape) for name, dtype, shape in workload.fields]
    capacity, batch = CAPACITY[workload.name], FILL_BATCH[workload.name]
    data = workload.batch(batch)
    for name in names:
        client.create_table(name, fields, capacity)
        for _ in range(capacity // batch):
            client.insert(name, data)
    return names


def rate(client: replayd.Client, table: Any, n: int, duration: float) -> float:
    """Batches per second of a synchronous sampling loop, timed for `duration` s."""
    end = time.perf_counter() + 0.2
    while time.perf_counter() < end:
        client.sample(table, n)
    batches = 0
    started = time.perf_counter()
    end = started + duration
    while True:
        batch = client.sample(table, n)
        del batch
        batches += 1
        now = time.perf_counter()
        if now >= end:
            return batches / (now - started)


def cases(args: argparse.Namespace) -> Iterator[Tuple[str, str]]:
    for transport in args.transports.split(","):
        for workload in args.workloads.split(","):
            yield transport, workload


def main(argv: List[str]) -> None:
    args = parse_args(argv)
    pinned = (os.cpu_count() or 1) >= 2
    server = Server(args.binary, pinned)
    if pinned:
        os.sched_setaffinity(0, {1})
    results: Dict[str, Dict[str, List[float]]] = {}
    try:
        clients = {t: replayd.Client(server.addresses[t], timeout=60)
                   for t in args.transports.split(",")}
        tables = {w: fill(next(iter(clients.values())), WORKLOADS[w])
                  for w in args.workloads.split(",")}
        for rep in range(args.reps):
            for transport, workload in cases(args):
                client, (a, b) = clients[transport], tables[workload]
                n = WORKLOADS[workload].sample_batch
                runs = [("single", a), ("mixed", {a: 0.5, b: 0.5})]
                if rep % 2:
                    runs.reverse()  # neither always first
                cell = results.setdefault(f"{transport} {workload}", {})
                for kind, table in runs:
                    cell.setdefault(kind, []).append(rate(client, table, n, args.duration))
            print(f"repetition {rep + 1}/{args.reps} done", file=sys.stderr)
    finally:
        server.stop()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"# {when}; server on CPU 0, this client on CPU 1" if pinned else
          f"# {when}; fewer than 2 CPUs: server and client unpinned")
    print(f"# medians of {args.reps} repetitions of {args.duration:g} s (min-max), "
          f"batches/s")
    print("| transport | workload (batch) | single table | mixed 50/50 | mixed / single |")
    print("|---|---|---:|---:|---:|")
    summary = {}
    for key, cell in results.items():
        transport, workload = key.split()
        single, mixed = statistics.median(cell["single"]), statistics.median(cell["mixed"])
        summary[key] = {"single": cell["single"], "mixed": cell["mixed"],
                        "ratio": mixed / single}
        print(f"| {'Unix (plane)' if transport == 'unix' else 'TCP (socket)'} | {workload} "
              f"({WORKLOADS[workload].sample_batch}) | {single:,.0f} "
              f"({min(cell['single']):,.0f}-{max(cell['single']):,.0f}) | {mixed:,.0f} "
              f"({min(cell['mixed']):,.0f}-{max(cell['mixed']):,.0f}) | "
              f"{mixed / single:.2f} |")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"date": when, "pinned": pinned, "reps": args.reps,
                       "duration_s": args.duration, "results": summary}, out, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
