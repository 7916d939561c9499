"""What the server's busy polling (``--busy-poll-us``, docs/OPERATIONS.md, "Busy polling")
buys and costs: request latency and pipelined inserts against the server's CPU.

    /usr/bin/python3 bench/python/busy_poll.py [--windows 0,50,200] [--reps 5]

For each window (0: the server's thread sleeps as soon as nothing is ready), a fresh
server pinned to CPU 0 and this process on CPU 1 measure, per repetition and with the
windows alternated: synchronous calls (``size``, ``insert`` of one W1 row, ``sample`` of
32), in us per call; ``insert_async`` of 64 W1 rows with 8 in flight, in us per call; and
the server's CPU per second of each measure and of one second with no request at all.
Medians over the repetitions.
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Deque, Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))

import replayd  # noqa: E402
from pinned_server import cpu_seconds, pinned_server_process  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

IN_FLIGHT = 8


def timed(call: Callable[[], Any], seconds: float, pid: int) -> Dict[str, float]:
    """Calls `call` for about `seconds`: us per call, and the server's CPU share."""
    calls = 0
    cpu, start = cpu_seconds(pid), time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(50):
            call()
        calls += 50
    wall = time.perf_counter() - start
    return {"us": wall / calls * 1e6, "server_cpu": (cpu_seconds(pid) - cpu) / wall}


def pipelined(client: replayd.Client, batch: Dict[str, Any]) -> Callable[[], None]:
    in_flight: Deque[Any] = collections.deque()

    def call() -> None:
        in_flight.append(client.insert_async("t", batch))
        if len(in_flight) > IN_FLIGHT:
            in_flight.popleft().result()
    return call


def one_run(binary: str, window: int, seconds: float) -> Dict[str, Dict[str, float]]:
    workload = WORKLOADS["W1"]
    one, batch = workload.batch(1, seed=1), workload.batch(64, seed=2)
    args = ["--busy-poll-us", str(window)]
    with pinned_server_process(binary, extra_args=args) as (address, pid), \
            replayd.Client(address, timeout=60) as client:
        client.create_table("t", {n: (d, s) for n, d, s in workload.fields},
                            capacity=workload.capacity, remover="fifo")
        for _ in range(-(-workload.capacity // 64)):
            client.insert("t", batch)
        result = {
            "size": timed(lambda: client.size("t"), seconds, pid),
            "insert 1 row": timed(lambda: client.insert("t", one), seconds, pid),
            "sample 32": timed(lambda: client.sample("t", 32), seconds, pid),
            "insert_async 64 rows, 8 in flight": timed(pipelined(client, batch), seconds, pid),
        }
        time.sleep(0.2)
        cpu = cpu_seconds(pid)
        time.sleep(1.0)
        result["no request"] = {"us": 0.0, "server_cpu": cpu_seconds(pid) - cpu}
        return result


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--windows", default="0,50,200", help="busy_poll_us values, comma-separated")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--seconds", type=float, default=1.0, help="per measure and repetition")
    p.add_argument("--binary", default=os.environ.get(
        "REPLAYD_BIN", str(HERE.parents[1] / "build" / "service" / "replayd")))
    args = p.parse_args(argv)
    os.sched_setaffinity(0, {1})
    windows = [int(w) for w in args.windows.split(",")]
    runs: Dict[int, List[Dict[str, Dict[str, float]]]] = {w: [] for w in windows}
    for _ in range(args.reps):
        for window in windows:  # alternated: each repetition runs every window in turn
            runs[window].append(one_run(args.binary, window, args.seconds))
    print(f"# W1; server on CPU 0, client on CPU 1; median of {args.reps} alternated runs, "
          f"{args.seconds:g} s each")
    print(f"{'measure':36s}" + "".join(f"{f'poll {w} us':>24s}" for w in windows))
    for measure in runs[windows[0]][0]:
        cells = []
        for window in windows:
            us = statistics.median(r[measure]["us"] for r in runs[window])
            cpu = statistics.median(r[measure]["server_cpu"] for r in runs[window])
            cells.append(f"{us:8.1f} us, cpu {cpu:4.2f}" if us else f"cpu {cpu:4.2f}")
        print(f"{measure:36s}" + "".join(f"{c:>24s}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
