"""The performance summary at the top of docs/BENCHMARKS.md: measures it, writes its JSON,
renders its tables into the document (between markers) and its chart (PNG).

    scripts/bench-summary                      # the full run (about 7 minutes on 2 cores)
    scripts/bench-summary --quick              # a smoke check: short loops, small tables
    scripts/bench-summary --dry-run --from-json FILE   # render an earlier run, measure nothing

Systems: replayd (its Python client, the shared-memory plane on the Unix socket), cpprb
(the real library, in the learner's process: systems/cpprb_real.py), shm (a
multiprocessing shared-memory ring), manager (multiprocessing.managers proxy) and redis
(redis-server, pipelined). A system that cannot run here (not built, not installed) is
recorded as absent with the reason. Rows, per workload (bench/python/workloads.py):
insert (batches of 64, pipelined where the system can), sample (uniform, prefetched where
it can), prioritized sample+update, mixed (each batch drawn 50/50 from two uniform tables:
replayd's ``sample({a: 0.5, b: 0.5}, n)``, elsewhere n/2 from each of two stores).
Every server runs on CPU 0 (replayd's under taskset, the others inherit this process's
pinning), every measuring worker on CPU 1; repetitions interleave the systems, so the
machine's drift moves them alike; cells are medians. W1 tables hold 100,000 transitions,
W2 tables 2,000 (not compare.py's 10,000), so that ten of them (the mixed rows hold two per
system) fit a shared machine.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "client" / "python"))

import summary_render  # noqa: E402

SYSTEM_ORDER = ("replayd", "cpprb", "shm", "manager", "redis")
#: row -> the compare.py measure it is (mixed is measured here).
ROW_MEASURES = {"insert": "insert64_pipelined", "sample": "sample_prefetch",
                "prioritized": "prioritized"}
FULL = dict(reps=3, duration=2.0, warmup=0.2, capacity={"W1": 100_000, "W2": 2_000})
QUICK = dict(reps=1, duration=0.2, warmup=0.05, capacity={"W1": 4_096, "W2": 256})


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="a smoke check: 1 repetition of 0.2 s loops on small tables")
    p.add_argument("--dry-run", action="store_true",
                   help="measure nothing: render --from-json into the document and chart")
    p.add_argument("--from-json", default="", help="the results to render (with --dry-run)")
    p.add_argument("--reps", type=int, default=0, help="repetitions (default 3; quick 1)")
    p.add_argument("--json", default="",
                   help="where to write the results (default docs/images/bench_summary.json, "
                        "beside the chart it draws; quick: bench/results/summary-quick.json)")
    p.add_argument("--doc", default=str(REPO / "docs" / "BENCHMARKS.md"),
                   help="the document whose summary block is rewritten ('' to skip)")
    p.add_argument("--png", default=str(REPO / "docs" / "images" / "bench_summary.png"),
                   help="the chart ('' to skip)")
    args = p.parse_args(argv)
    if args.dry_run and not args.from_json:
        p.error("--dry-run renders an earlier run: give it --from-json FILE")
    if args.reps < 0:
        p.error("--reps must be >= 1")
    if not args.json:
        args.json = str(REPO / "bench" / "results" / "summary-quick.json" if args.quick else
                        REPO / "docs" / "images" / "bench_summary.json")
    return args


def busy() -> List[str]:
    """Compilers running beside the measures (names of cc1plus processes found)."""
    out = subprocess.run(["pgrep", "-c", "cc1plus"], capture_output=True, text=True)
    count = int(out.stdout.strip() or 0)
    return [f"{count} cc1plus"] if count else []


def absent_systems() -> Dict[str, str]:
    """system -> why it cannot run on this machine."""
    from systems import load_system
    from systems.cpprb_real import CPPRB_REAL, available
    from systems.replayd_system import server_binary
    reasons: Dict[str, str] = {}
    if not server_binary().exists():
        reasons["replayd"] = f"no server binary at {server_binary()} (scripts/build)"
    if not available():
        reasons["cpprb"] = (f"not built at {CPPRB_REAL} "
                            f"(FILES=' ' ../shared/cpprb/run-suite builds it)")
    if shutil.which("redis-server") is None:
        reasons["redis"] = "redis-server not installed (apt-get install redis-server)"
    for name in SYSTEM_ORDER:
        if name not in reasons:
            try:
                load_system(name)
            except ImportError as error:
                reasons[name] = f"Python package missing: {error.name}"
    return reasons


def stats(values: List[float]) -> Dict[str, Any]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def run_mixed(systems: List[str], workload: Any, reps: int, duration: float,
              warmup: float, tmp: Path, log: Any) -> Dict[str, Dict[str, Any]]:
    """Transitions/s of a synchronous learner whose batches are half from each of two
    uniform tables, per system; repetitions interleave the systems."""
    import replayd
    from runner import _run_workers, fill
    from systems import load_system
    from systems.replayd_system import TABLE

    stores: List[Tuple[str, Any, List[Any], List[Any]]] = []  # name, cls, systems, handles
    n = workload.sample_batch

    def timed(step: Any) -> float:
        end = time.perf_counter() + warmup
        while time.perf_counter() < end:
            step()
        count, start = 0, time.perf_counter()
        while True:
            count += step()
            now = time.perf_counter()
            if now >= start + duration:
                return count / (now - start)

    def replayd_job(handle: Any) -> Any:
        def job(_: Any) -> float:
            with replayd.Client(handle) as client:
                share = {TABLE: 0.5, f"{TABLE}-b": 0.5}
                return timed(lambda: len(client.sample(share, n)))
        return job

    def pair_job(cls: Any, handle_b: Any) -> Any:
        def job(endpoint_a: Any) -> float:
            endpoint_b = cls.connect(handle_b)
            half = n // 2
            return timed(lambda: len(endpoint_a.sample(half)) + len(endpoint_b.sample(n - half)))
        return job

    results: Dict[str, List[float]] = {}
    try:
        for name in systems:
            cls = load_system(name)
            workdir = tmp / f"mixed-{workload.name}-{name}"
            workdir.mkdir()
            if name == "replayd":
                system = cls()
                address = system.create_store(workload, False, workdir)
                stores.append((name, cls, [system], [address]))
                with replayd.Client(address) as client:
                    client.create_table(f"{TABLE}-b",
                                        {f: (d, s) for f, d, s in workload.fields},
                                        capacity=workload.capacity, seed=1)
                    for start in range(0, workload.capacity, 256):
                        count = min(256, workload.capacity - start)
                        client.insert(f"{TABLE}-b", workload.batch(count, seed=700 + start))
                fill(cls, address, workload)
            else:
                pair = [cls(), cls()]
                handles = []
                for i, system in enumerate(pair):
                    (workdir / str(i)).mkdir()
                    handles.append(system.create_store(workload, False, workdir / str(i)))
                    stores.append((name, cls, [system], [handles[-1]]))
                    fill(cls, handles[-1], workload)
                stores.pop()
                stores[-1] = (name, cls, pair, handles)
            log(f"{workload.name} {name}: two uniform tables filled for mixed")
        for rep in range(reps):
            for name, cls, _, handles in stores:
                job = replayd_job(handles[0]) if name == "replayd" else pair_job(cls, handles[1])
                value = _run_workers(cls, handles[0], [job])[0]
                results.setdefault(name, []).append(value)
                log(f"{workload.name} {name} rep {rep + 1}: mixed {value:,.0f}/s")
    finally:
        for _, _, pair, _ in stores:
            for system in pair:
                system.destroy_store()
    return {name: stats(values) for name, values in results.items()}


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    import compare
    from report import machine_info

    plan = QUICK if args.quick else FULL
    reps = args.reps or plan["reps"]

    def log(msg: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    pinned = (os.cpu_count() or 1) >= 2
    if pinned:  # servers started from here (manager, redis) inherit CPU 0
        os.sched_setaffinity(0, {0})
    absent = absent_systems()
    present = [s for s in SYSTEM_ORDER if s not in absent]
    for name, why in absent.items():
        log(f"{name}: absent ({why})")
    started = datetime.datetime.now(datetime.timezone.utc)
    busy_seen = busy()
    results: Dict[str, Dict[str, Dict[str, Any]]] = {}
    import workloads
    with tempfile.TemporaryDirectory(prefix="replayd-summary-") as tmp:
        for wname in ("W1", "W2"):
            cargs = SimpleNamespace(
                systems=present, workloads=[wname], measures=list(ROW_MEASURES.values()),
                reps=reps, duration=plan["duration"], mixed_duration=plan["duration"],
                warmup=plan["warmup"], capacity=plan["capacity"][wname],
                client=str(REPO / "client" / "python"), quiet=False, pin=pinned,
                memcpy=False, interleave=True)
            doc = compare.run(cargs)
            rows = results.setdefault(wname, {})
            for row, key in ROW_MEASURES.items():
                for r in doc["results"]:
                    if r["measure"] == key:
                        rows.setdefault(row, {})[r["system"]] = {
                            k: r["transitions_per_s"][k] for k in ("median", "min", "max", "runs")}
                        if r["substituted_by"]:
                            rows[row][r["system"]]["mode"] = r["substituted_by"]
            busy_seen += busy()
            workload = workloads.WORKLOADS[wname]
            import dataclasses
            workload = dataclasses.replace(workload, capacity=plan["capacity"][wname])
            rows["mixed"] = run_mixed(present, workload, reps, plan["duration"],
                                      plan["warmup"], Path(tmp), log)
            busy_seen += busy()
    machine = machine_info()
    return {"date_utc": started.strftime("%Y-%m-%d %H:%M UTC"),
            "ended_utc": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC"),
            "quick": bool(args.quick), "reps": reps, "duration_s": plan["duration"],
            "warmup_s": plan["warmup"], "capacity": plan["capacity"], "pinned": pinned,
            "machine": {"cpu_model": machine["cpu_model"], "nproc": machine["nproc"],
                        "redis": machine.get("redis")},
            "loadavg_end": os.getloadavg(), "busy": sorted(set(busy_seen)),
            "systems": list(SYSTEM_ORDER), "absent": absent, "results": results}


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    if args.dry_run:
        with open(args.from_json) as f:
            doc = json.load(f)
    else:
        doc = measure(args)
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"JSON: {args.json}", file=sys.stderr)
    print(summary_render.tables(doc))
    if args.doc:
        summary_render.splice(Path(args.doc), summary_render.block(doc))
        print(f"rewrote the summary in {args.doc}", file=sys.stderr)
    if args.png:
        summary_render.chart(doc, Path(args.png))
        print(f"chart: {args.png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
