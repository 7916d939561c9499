"""What one `insert_async` call of 64 rows costs the client, piece by piece: the Python
cost per call that bounds W1 batched inserts (45-byte rows: the bytes are nothing, the
call is everything).

    /usr/bin/python3 bench/python/insert_call_cost.py [--calls 20000] [--workload W1] \
        [--client DIR] [--busy-poll-us US]

Times, per call (median of 5 runs of `--calls` calls each, the server on CPU 0 and this
process on CPU 1): the steps of the client's staged path run alone in a loop
(`prepare_insert`, the request split, the stageable check and plan, the copy into the
arena and the request's send, the reply's decode in the reader thread; and those of a call
that shares a request: its checks, its Future and copy into the group), then whole
`insert_async` calls with 8 in flight, in wall time and in CPU time of the calling thread
and of the process (the difference is the reader thread's: the replies); over the plane,
also the calls per shared request and the reader thread's CPU per shared request (us).
"""
from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Deque, Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# --client DIR (parsed here, before replayd is imported): measure another copy of the
# Python client, e.g. an older commit's (`git archive REV client/python | tar -x -C DIR`).
_CLIENT = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--client"),
               str(HERE.parents[1] / "client" / "python"))
sys.path.insert(0, _CLIENT)

import os  # noqa: E402

import numpy as np  # noqa: E402

import replayd  # noqa: E402
from pinned_server import pinned_server  # noqa: E402
from replayd import requests  # noqa: E402
from replayd.columns import decode_keys, prepare_insert  # noqa: E402
from replayd.insert_parts import split_insert  # noqa: E402
from replayd.shm.insert_arena import insert_plan, stageable  # noqa: E402
from replayd.shm.insert_sharing import CallFuture, _Group  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

IN_FLIGHT = 8


def per_call_us(step: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        step()
    return (time.perf_counter() - start) / calls * 1e6


def count_shared_requests(client: replayd.Client) -> List[int]:
    """Counts the shared requests `client` sends from now on (call before its first
    insert_async: its SharedInserts keeps the send function it was made with)."""
    sent = [0]
    send = client._send_shared

    def counted(*args: Any) -> Any:
        sent[0] += 1
        return send(*args)
    client._send_shared = counted  # type: ignore[method-assign]
    return sent


def pipelined(client: replayd.Client, table: str, batch: Dict[str, np.ndarray],
              calls: int, shared: List[int]) -> Dict[str, float]:
    """Wall, calling-thread CPU and process CPU per call of insert_async, 8 in flight;
    over the plane, the calls per shared request and the other threads' CPU (the reader
    thread's: the replies) per shared request."""
    in_flight: Deque[Any] = collections.deque()
    shared[0] = 0
    wall, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
    for _ in range(calls):
        in_flight.append(client.insert_async(table, batch))
        if len(in_flight) > IN_FLIGHT:
            in_flight.popleft().result()
    while in_flight:
        in_flight.popleft().result()
    result = {"wall": (time.perf_counter() - wall) / calls * 1e6,
              "thread_cpu": (time.thread_time() - thread) / calls * 1e6,
              "process_cpu": (time.process_time() - process) / calls * 1e6}
    if shared[0]:
        result["calls_per_request"] = calls / shared[0]
        result["reader_cpu_per_request"] = ((result["process_cpu"] - result["thread_cpu"])
                                            * result["calls_per_request"])
    return result


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--workload", default="W1")
    p.add_argument("--client", default=_CLIENT,
                   help="directory holding the replayd Python package to measure "
                        "(default: client/python of this checkout)")
    p.add_argument("--busy-poll-us", type=int, default=0,
                   help="the server's busy_poll_us (docs/OPERATIONS.md, Busy polling)")
    p.add_argument("--binary", default=os.environ.get(
        "REPLAYD_BIN", str(HERE.parents[1] / "build" / "service" / "replayd")))
    args = p.parse_args(argv)
    os.sched_setaffinity(0, {1})
    workload = WORKLOADS[args.workload]
    batch = workload.batch(64, seed=1)
    server_args = ["--busy-poll-us", str(args.busy_poll_us)] if args.busy_poll_us else []
    with pinned_server(args.binary, extra_args=server_args) as address, \
            replayd.Client(address, timeout=60) as plane, \
            replayd.Client(address, timeout=60, shm=False) as socket_client:
        plane.create_table("t", {n: (d, s) for n, d, s in workload.fields},
                           capacity=workload.capacity, remover="fifo")
        for _ in range(-(-workload.capacity // 64)):
            plane.insert("t", batch)  # a full table: its pages touched
        schema = plane.schema("t")
        conn = plane.connection()
        prepared = prepare_insert(schema, batch)
        meta = requests.insert_meta("t", prepared, None)
        parts = split_insert(prepared, "t", meta, conn.limits)
        arena = plane._insert_stager(conn, "t", schema, prepared, parts, None)
        assert arena is not None, "the plane is not offered"
        plan = insert_plan("t", schema, prepared, None)
        rule = plane._share_rule(conn, "t", schema)
        assert rule is not None, "the table's calls may not share requests"
        columns, _ = rule.exact_arrays(batch) or ([], 0)
        groups = [_Group(("t",), "t", rule, None, None, False)]

        def append_to_group() -> None:
            group = groups[0]
            if group.rows + 64 > rule.cap:
                group = groups[0] = _Group(("t",), "t", rule, None, None, False)
            group.append(CallFuture(sharing, group), columns, 64, None)

        sharing: Any = None  # the group's flush is not called here
        reply_meta = {"n": 64}
        reply_payload = np.zeros(64, np.uint64).view(np.uint8)
        steps: Dict[str, Callable[[], Any]] = {
            "prepare_insert (checks, converts)": lambda: prepare_insert(schema, batch),
            "insert_meta + split_insert": lambda: split_insert(
                prepared, "t", requests.insert_meta("t", prepared, None), conn.limits),
            "stageable + insert_plan": lambda: (stageable(schema, prepared),
                                                insert_plan("t", schema, prepared, None)),
            "decode_keys (reader thread)": lambda: decode_keys(reply_meta, reply_payload),
            "shared: ShareRule.exact_arrays (checks)": lambda: rule.exact_arrays(batch),
            "shared: Future + copy into the group": append_to_group,
        }
        rows: Dict[str, List[float]] = {name: [] for name in steps}
        rows["copy into the arena + send (+ reply)"] = []
        whole: Dict[str, Dict[str, List[float]]] = {"plane": collections.defaultdict(list),
                                                     "socket": collections.defaultdict(list)}
        shared_requests = {"plane": count_shared_requests(plane),
                           "socket": count_shared_requests(socket_client)}
        for _ in range(args.reps):
            for name, step in steps.items():
                rows[name].append(per_call_us(step, args.calls))

            def send_and_wait() -> None:
                sent = arena.send(plan, prepared, caller_waits=True)
                assert sent is not None
                conn.wait(sent[0], sent[1], 60)
            rows["copy into the arena + send (+ reply)"].append(
                per_call_us(send_and_wait, args.calls // 4))
            for label, client in (("plane", plane), ("socket", socket_client)):
                for key, value in pipelined(client, "t", batch, args.calls,
                                            shared_requests[label]).items():
                    whole[label][key].append(value)
        print(f"# {args.workload}, 64 rows per call, {args.calls} calls per run, median of "
              f"{args.reps} runs; server on CPU 0, client on CPU 1")
        print("\nsteps of a staged insert_async, each alone in a loop (us per call):")
        for name, values in rows.items():
            print(f"  {name:44s} {statistics.median(values):8.1f}")
        print("\nwhole insert_async calls, 8 in flight (us per call):")
        for label, values_of in whole.items():
            cells = ", ".join(f"{key} {statistics.median(v):.1f}" for key, v in values_of.items())
            rate = 64 / statistics.median(values_of["wall"]) * 1e6
            print(f"  {label:7s} {cells}  ->  {rate:,.0f} rows/s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
