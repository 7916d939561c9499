"""Compares replayd's Python client with the replay buffers Python users build instead,
on the same workloads in the same run, and prints one table (transitions/s).

    scripts/bench-python                       # everything: 3 repetitions, 10 s mixed
    scripts/bench-python --systems replayd,shm --workloads W1 --duration 0.5 --reps 1

Systems: replayd (this repository's client and server, using the shared-memory plane the
server offers on its Unix socket), replayd-socket (the same with shm=False: every byte
through the socket), shm (multiprocessing shared memory ring, a lock per chunk of slots),
manager (multiprocessing.managers proxy to a buffer in a server process), redis
(redis-server, pipelined, Lua), zmq (pyzmq replay server, DEALER/ROUTER). Results: medians
over repetitions with min-max, ratios of replayd to the best networked alternative, to shm
and to replayd-socket; single-core memcpy measured in the same run (--memcpy); JSON
written to --json. --pin puts the replayd server on CPU 0 and every worker on CPU 1.
--interleave keeps every system's store up and runs each repetition on all of them in turn,
so that the machine's drift (on a shared host, 30-50% between minutes) moves every system
alike and the ratios hold; without it, each system's repetitions run in a row.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
# --client DIR (parsed here, before replayd is imported): measure another copy of the
# Python client, e.g. an older commit's, against the same server.
_CLIENT = next((sys.argv[i + 1] for i, a in enumerate(sys.argv[:-1]) if a == "--client"),
               str(REPO / "client" / "python"))
sys.path.insert(0, _CLIENT)

from report import format_table, machine_info  # noqa: E402
from runner import MEASURES, fill, memcpy_gb_per_s, run_measure, run_mixed  # noqa: E402
from systems import BUILT_APART, ON_REQUEST, SYSTEMS, load_system  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

ALL_MEASURES = list(MEASURES) + ["mixed"]


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default=",".join(s for s in SYSTEMS
                                                 if s not in BUILT_APART + ON_REQUEST),
                   help=f"comma-separated, from {','.join(SYSTEMS)} (default: all but "
                        f"{','.join(BUILT_APART)}, which must be built first, and "
                        f"{','.join(ON_REQUEST)})")
    p.add_argument("--workloads", default="W1,W2", help="comma-separated: W1,W2")
    p.add_argument("--measures", default=",".join(ALL_MEASURES),
                   help=f"comma-separated, from {','.join(ALL_MEASURES)}")
    p.add_argument("--reps", type=int, default=3, help="repetitions (median reported)")
    p.add_argument("--duration", type=float, default=2.0,
                   help="seconds each measure runs, after a 0.2 s warm-up (default 2)")
    p.add_argument("--mixed-duration", type=float, default=10.0,
                   help="seconds the mixed explorer+learner measure runs (default 10)")
    p.add_argument("--warmup", type=float, default=0.2,
                   help="seconds of warm-up before each timed loop (default 0.2)")
    p.add_argument("--capacity", type=int, default=0,
                   help="override both workloads' capacity (for quick checks; 0: as defined)")
    p.add_argument("--client", default=_CLIENT,
                   help="directory holding the replayd Python package to measure "
                        "(default: client/python of this checkout)")
    p.add_argument("--json", default=str(REPO / "bench" / "results" / "python_compare.json"),
                   help="where to write the results as JSON ('' to skip)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--pin", action="store_true",
                   help="replayd's server on CPU 0, every worker process on CPU 1 (2+ CPUs)")
    p.add_argument("--memcpy", action="store_true",
                   help="measure single-core memcpy (on the workers' CPU) in every repetition")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--interleave", action="store_true",
                   help="keep every system's store up and run each repetition on all of "
                        "them in turn (the machine's drift then moves every system alike)")
    p.add_argument("--from-json", default="",
                   help="print the table of an earlier run's JSON instead of running")
    args = p.parse_args(argv)
    args.systems = [s for s in args.systems.split(",") if s]
    args.workloads = [w for w in args.workloads.split(",") if w]
    args.measures = [m for m in args.measures.split(",") if m]
    for name in args.systems:
        if name not in SYSTEMS:
            p.error(f"unknown system {name!r}; expected some of {', '.join(SYSTEMS)}")
    for name in args.workloads:
        if name not in WORKLOADS:
            p.error(f"unknown workload {name!r}; expected W1 and/or W2")
    for name in args.measures:
        if name not in ALL_MEASURES:
            p.error(f"unknown measure {name!r}; expected some of {', '.join(ALL_MEASURES)}")
    if args.reps < 1 or args.duration <= 0 or args.mixed_duration <= 0 or args.warmup < 0:
        p.error("--reps must be >= 1, durations > 0 and --warmup >= 0")
    if args.capacity < 0:
        p.error("--capacity must be >= 0")
    return args


def run(args: argparse.Namespace) -> Dict:
    """Runs every (workload, system, measure) `reps` times; returns the JSON document."""
    def log(msg: str) -> None:
        if not args.quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    started_utc = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
    machine = machine_info()
    if args.pin:
        os.environ["REPLAYD_BENCH_SERVER_CPU"] = "0"
        os.environ["REPLAYD_BENCH_CLIENT_CPU"] = "1"
    memcpy: List[float] = []
    raw: Dict[str, Dict[str, Dict[str, List[float]]]] = {}  # workload/measure/system
    substituted: Dict[str, Dict[str, Dict[str, str]]] = {}
    def run_rep(sname: str, system_cls: Any, handle: Any, workload: Any, keys: List[str],
                rep: int) -> None:
        """One repetition of every measure in `keys` on one system's store."""
        for key in keys:
            if key == "mixed":
                result = run_mixed(system_cls, handle, workload, args.mixed_duration,
                                   args.warmup)
                for side, value in result.items():
                    raw.setdefault(workload.name, {}).setdefault(
                        f"mixed_{side}", {}).setdefault(sname, []).append(value)
                log(f"{workload.name} {sname} rep {rep + 1}: mixed "
                    f"explorer {result['explorer']:,.0f}/s learner "
                    f"{result['learner']:,.0f}/s")
                continue
            measure = MEASURES[key]
            native = system_cls.endpoint_type.native
            run_key = key
            if measure.mode and measure.mode not in native:
                substituted.setdefault(workload.name, {}).setdefault(key, {})[
                    sname] = measure.fallback
                if measure.fallback in keys:
                    continue  # its number is copied below
                run_key = measure.fallback
            value = run_measure(system_cls, handle, workload, run_key, args.duration,
                                args.warmup)
            raw.setdefault(workload.name, {}).setdefault(run_key, {}).setdefault(
                sname, []).append(value)
            log(f"{workload.name} {sname} rep {rep + 1}: {run_key} {value:,.0f}/s")

    def measure_memcpy() -> None:
        if args.memcpy:
            memcpy.append(memcpy_gb_per_s())
            log(f"memcpy, one core: {memcpy[-1]:.2f} GB/s")

    with tempfile.TemporaryDirectory(prefix="replayd-bench-") as tmp:
        for wname in args.workloads:
            workload = WORKLOADS[wname]
            if args.capacity:
                workload = dataclasses.replace(workload, capacity=args.capacity)
            for prioritized in (False, True):
                keys = [m for m in args.measures if m == "mixed" and not prioritized
                        or m in MEASURES and MEASURES[m].prioritized == prioritized]
                if not keys:
                    continue
                # Each store: (name, class, system, handle). With --interleave every
                # system's store is up at once and each repetition runs on all of them in
                # turn; otherwise one store at a time, all its repetitions in a row.
                stores: List[Tuple[str, Any, Any, Any]] = []

                def open_store(sname: str) -> Tuple[str, Any, Any, Any]:
                    system_cls = load_system(sname)
                    system = system_cls()
                    workdir = Path(tmp) / f"{sname}-{wname}-{int(prioritized)}"
                    workdir.mkdir()
                    log(f"{wname} {sname}: starting a "
                        f"{'prioritized' if prioritized else 'uniform'} store")
                    handle = system.create_store(workload, prioritized, workdir)
                    stores.append((sname, system_cls, system, handle))
                    started = time.monotonic()
                    fill(system_cls, handle, workload)
                    log(f"{wname} {sname}: filled {workload.capacity} items in "
                        f"{time.monotonic() - started:.1f} s")
                    return stores[-1]

                try:
                    if args.interleave:
                        for sname in args.systems:
                            open_store(sname)
                        for rep in range(args.reps):
                            measure_memcpy()
                            for sname, system_cls, _, handle in stores:
                                run_rep(sname, system_cls, handle, workload, keys, rep)
                    else:
                        for sname in args.systems:
                            _, system_cls, system, handle = open_store(sname)
                            for rep in range(args.reps):
                                measure_memcpy()
                                run_rep(sname, system_cls, handle, workload, keys, rep)
                            stores.pop()
                            system.destroy_store()
                finally:
                    for _, _, system, _ in stores:
                        system.destroy_store()
    # A mode a system does not have is reported with its synchronous number (measured
    # for it when the synchronous row itself was not asked for).
    for wname, by_key in substituted.items():
        for key, by_system in by_key.items():
            for sname, fallback in by_system.items():
                values = raw.get(wname, {}).get(fallback, {}).get(sname)
                if values:
                    raw.setdefault(wname, {}).setdefault(key, {})[sname] = list(values)
                    if fallback not in args.measures:
                        del raw[wname][fallback][sname]
    results = []
    for wname, by_key in raw.items():
        for key, by_system in by_key.items():
            for sname, values in by_system.items():
                results.append({
                    "workload": wname, "measure": key, "system": sname,
                    "transitions_per_s": {"median": statistics.median(values),
                                          "min": min(values), "max": max(values),
                                          "runs": values},
                    "substituted_by": substituted.get(wname, {}).get(key, {}).get(sname)})
    return {"command": " ".join(["bench/python/compare.py", *sys.argv[1:]]),
            "date_utc": started_utc,
            "ended_utc": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
            "loadavg_end": os.getloadavg(),
            "machine": machine, "python": platform.python_version(),
            "reps": args.reps, "duration_s": args.duration, "warmup_s": args.warmup,
            "capacity_override": args.capacity or None, "client_path": args.client,
            "mixed_duration_s": args.mixed_duration, "results": results,
            "pinned": bool(args.pin), "interleaved": bool(args.interleave),
            "memcpy_gb_per_s": ({"median": statistics.median(memcpy), "runs": memcpy}
                                if memcpy else None)}


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            doc = json.load(f)
        present = {r["system"] for r in doc["results"]}
        print(format_table(doc, [s for s in args.systems if s in present], args.markdown))
        return 0
    doc = run(args)
    print(format_table(doc, args.systems, args.markdown))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
