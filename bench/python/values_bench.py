"""Published values (docs/VALUES.md) under load: a learner's broadcast of its weights to
12 explorers, against the same broadcast through pyzmq PUB/SUB, and a small sample's
latency while a large value is published.

    /usr/bin/python3 bench/python/values_bench.py            # about 3.5 minutes
    /usr/bin/python3 bench/python/values_bench.py --quick    # a smoke run (about 20 s)

1. Broadcast. A publisher process publishes a 64 MiB state dict (16 float32 arrays of 1M
   elements) every 0.5 s; 12 explorer processes loop ``fetch(name, newer_than=mine,
   timeout=5)``; the learner (this process) samples W2 (56,457-byte Atari items, batch 32,
   a synchronous ``client.sample`` loop as bench/python/mixed.py) meanwhile. Phases of
   --duration s, interleaved in every repetition (the order rotates): no broadcast;
   replayd's, the explorers on the shared-memory plane (a fetch maps the version's sealed
   memfd); replayd's with the plane off (the bytes through the Unix socket, as over TCP);
   zmq's (PUB on CPU 1 with every other client); zmq's with the PUB process on CPU 0
   beside the server. Reported: the learner's batches/s per phase and their ratio to the
   phase without broadcast; each explorer's delay from a version's publication (publish
   returned, i.e. the commit's reply read; and from publish called) to holding it (fetch
   or receive returned: the first version >= it), p50/p99 over explorers and versions;
   per version, the time until all 12 explorers hold it.
2. Unchanged fetches. Each explorer (plane off) fetches the version it holds 50 times
   with timeout=0 and once waiting 0.2 s; replayd_value_fetched_bytes_total and
   replayd_value_fetches_total{changed="false"} from /metrics before and after.
3. Small samples beside a large publish. One client's synchronous ``client.sample`` of a
   W1 table (45-byte items, batch 32) timed call by call, in windows alternating between
   quiet and while another process publishes a 1 GiB value back to back (less when the
   machine's available memory cannot hold three copies of it: the publisher's, and the
   server's old and new versions; the output says so).

The server runs pinned to CPU 0 (taskset -c 0), every client process to CPU 1, except the
zmq PUB process in the phase that names CPU 0. pyzmq is Debian's python3-zmq; without it
the zmq phases are left out and the output says so.
"""
from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "client" / "python"))

import replayd  # noqa: E402
import values_procs as procs  # noqa: E402
from workloads import W1, W2, Workload  # noqa: E402

PHASES = ("none", "replayd", "replayd_socket", "zmq", "zmq_pub_cpu0")
PHASE_TITLES = {"none": "no broadcast", "replayd": "replayd fetch (plane: memfd mapped)",
                "replayd_socket": "replayd fetch (plane off: bytes on the socket)",
                "zmq": "zmq PUB/SUB (PUB on CPU 1)", "zmq_pub_cpu0": "zmq PUB/SUB (PUB on CPU 0)"}
MIB = 1 << 20
SLOW_SAMPLE_S = 0.02  # part 3: samples slower than this are listed with their time


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binary", default=str(REPO / "build" / "service" / "replayd"))
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--duration", type=float, default=5.0, help="seconds of each broadcast phase")
    p.add_argument("--period", type=float, default=0.5, help="seconds between publishes")
    p.add_argument("--explorers", type=int, default=12)
    p.add_argument("--value-mib", type=float, default=64.0, help="the broadcast value")
    p.add_argument("--arrays", type=int, default=16)
    p.add_argument("--phases", default=",".join(PHASES))
    p.add_argument("--big-mib", type=int, default=1024, help="the value of part 3")
    p.add_argument("--window", type=float, default=3.0,
                   help="seconds of each part-3 window (quiet, publishing)")
    p.add_argument("--no-small", action="store_true", help="leave part 3 out")
    p.add_argument("--quick", action="store_true", help="a smoke run of every part")
    p.add_argument("--json", default="", help="also write every figure here")
    args = p.parse_args(argv)
    if args.quick:
        args.reps, args.duration, args.explorers = 1, 2.0, 4
        args.value_mib, args.big_mib, args.window = 16.0, 128, 1.0
    return args


class Server:
    """The server on a Unix socket with its metrics listener, pinned to CPU 0."""

    def __init__(self, binary: str, tmp: str, pinned: bool) -> None:
        ready = f"{tmp}/ready.json"
        args = [binary, "--unix", f"{tmp}/s.sock", "--tcp", "", "--metrics", "127.0.0.1:0",
                "--ready-file", ready, "--log-level", "warn"]
        self.proc = subprocess.Popen((["taskset", "-c", "0"] if pinned else []) + args)
        deadline = time.monotonic() + 30
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start: {args}")
            time.sleep(0.05)
        time.sleep(0.05)
        with open(ready) as f:
            info = json.load(f)
        self.address = f"unix://{info['unix']}"
        self.metrics_url = f"http://{info['metrics']}/metrics"

    def value_counters(self) -> Dict[str, float]:
        """replayd_value_fetched_bytes_total and replayd_value_fetches_total by `changed`."""
        text = urllib.request.urlopen(self.metrics_url, timeout=10).read().decode()
        wanted = {"replayd_value_fetched_bytes_total": "bytes",
                  'replayd_value_fetches_total{changed="false"}': "unchanged",
                  'replayd_value_fetches_total{changed="true"}': "changed"}
        out = {}
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name in wanted:
                out[wanted[name]] = float(value)
        return out

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()


class Worker:
    """A forked process running a values_procs loop, spoken to over a Pipe."""

    def __init__(self, target: Any, *args: Any) -> None:
        self.pipe, theirs = multiprocessing.Pipe()
        self.proc = multiprocessing.get_context("fork").Process(target=target,
                                                                 args=(theirs, *args))
        self.proc.start()

    def ask(self, *command: Any) -> None:
        self.pipe.send(command)

    def answer(self, expected: str) -> Any:
        reply = self.pipe.recv()
        if reply[0] != expected:
            raise RuntimeError(f"expected {expected!r} from a worker, got {reply[0]!r}")
        return reply[1] if len(reply) > 1 else None

    def close(self) -> None:
        self.ask("exit")
        self.proc.join(10)


# --- what the learner does -------------------------------------------------------------

def fill(client: replayd.Client, workload: Workload, name: str, capacity: int,
         batch: int) -> None:
    client.create_table(name, list(workload.fields), capacity)
    data = workload.batch(batch)
    for _ in range(capacity // batch):
        client.insert(name, data)


def sample_rate(client: replayd.Client, table: str, n: int, duration: float) -> float:
    batches = 0
    started = time.perf_counter()
    end = started + duration
    while True:
        client.sample(table, n)
        batches += 1
        now = time.perf_counter()
        if now >= end:
            return batches / (now - started)


def sample_latencies(client: replayd.Client, table: str, n: int, until: Any,
                     slow: List[Tuple[float, float]]) -> List[float]:
    """Seconds of each synchronous sample call while until() is false; the calls over
    SLOW_SAMPLE_S are added to `slow` as (monotonic start, seconds)."""
    out = []
    while not until():
        started = time.monotonic()
        client.sample(table, n)
        took = time.monotonic() - started
        out.append(took)
        if took > SLOW_SAMPLE_S:
            slow.append((started, took))
    return out


# --- the broadcast ---------------------------------------------------------------------

def run_phase(phase: str, learner: replayd.Client, publisher: Worker,
              explorers: Sequence[Worker], version: int, args: argparse.Namespace
              ) -> Dict[str, Any]:
    """One phase: the learner's rate, and the publications and holdings of its versions."""
    if phase == "none":
        return {"rate": sample_rate(learner, "W2", W2.sample_batch, args.duration)}
    kind = "zmq" if phase.startswith("zmq") else "replayd"
    for explorer in explorers:
        if kind == "replayd":
            explorer.ask(kind, version, phase == "replayd")
        else:
            explorer.ask(kind)
    for explorer in explorers:
        explorer.answer("ready")
    if kind == "replayd":
        publisher.ask("replayd", args.duration, args.period)
    else:
        publisher.ask("zmq", args.duration, args.period, {0} if phase == "zmq_pub_cpu0" else {1})
    rate = sample_rate(learner, "W2", W2.sample_batch, args.duration)
    published = publisher.answer("done")
    answers = [explorer.answer("done") for explorer in explorers]
    return {"rate": rate, "published": published, "held": [a["held"] for a in answers],
            "local_timeouts": sum(a["local_timeouts"] for a in answers)}


def delays(published: Sequence[Tuple[int, float, float]],
           held: Sequence[Sequence[Tuple[int, float]]]) -> Dict[str, Any]:
    """Per explorer and version: from publish returned (and called) to that explorer's
    first holding of a version >= it; per version, until all explorers hold it."""
    from_return, from_call, all_return, all_call, skipped, missing = [], [], [], [], 0, 0
    for version, called, returned in published:
        times = []
        for explorer in held:
            at = next((t for v, t in explorer if v >= version), None)
            if at is None:
                missing += 1
                continue
            skipped += all(v != version for v, _ in explorer)
            times.append(at)
            from_return.append(at - returned)
            from_call.append(at - called)
        if len(times) == len(held):
            all_return.append(max(times) - returned)
            all_call.append(max(times) - called)
    return {"each_from_return": from_return, "each_from_call": from_call,
            "all_from_return": all_return, "all_from_call": all_call,
            "skipped": skipped, "missing": missing, "versions": len(published)}


def broadcast(args: argparse.Namespace, server: Server, learner: replayd.Client,
              publisher: Worker, explorers: Sequence[Worker], phases: List[str]
              ) -> Dict[str, Any]:
    if any(p.startswith("zmq") for p in phases):
        for explorer in explorers:
            explorer.ask("zmq_sync")
        publisher.ask("zmq_sync")
        if not all(explorer.answer("synced") for explorer in explorers):
            raise RuntimeError("an explorer's SUB socket received nothing in 10 s")
        publisher.ask("stop")
        publisher.answer("synced")
    before = server.value_counters()
    results: Dict[str, List[Dict[str, Any]]] = {p: [] for p in phases}
    version = 0
    for rep in range(args.reps):
        order = phases[rep % len(phases):] + phases[:rep % len(phases)]
        for phase in order:
            result = run_phase(phase, learner, publisher, explorers, version, args)
            if phase.startswith("replayd"):
                version = result["published"][-1][0] + 1  # the stop version followed
            if phase != "none":
                result.update(delays(result.pop("published"), result.pop("held")))
            results[phase].append(result)
        print(f"broadcast repetition {rep + 1}/{args.reps} done", file=sys.stderr)
    after = server.value_counters()
    return {"phases": results,
            "metrics": {k: after.get(k, 0) - before.get(k, 0) for k in after}}


def unchanged_fetches(server: Server, publisher: Worker, explorers: Sequence[Worker]
                      ) -> Dict[str, Any]:
    publisher.ask("publish_once")  # a full version (the broadcast ended with a stop value)
    publisher.answer("done")
    for explorer in explorers:
        explorer.ask("hold")
    holding = [explorer.answer("holding") for explorer in explorers]
    before = server.value_counters()
    for explorer in explorers:
        explorer.ask("unchanged", 50, 0.2)
    counted = [explorer.answer("done") for explorer in explorers]
    after = server.value_counters()
    return {"versions_held": sorted(set(holding)),
            "fetches": sum(c["fetches"] for c in counted),
            "without_arrays": sum(c["without_arrays"] for c in counted),
            "metrics": {k: after.get(k, 0) - before.get(k, 0) for k in after}}


# --- small samples beside a large publish ----------------------------------------------

def available_bytes() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def big_value_bytes(wanted: int) -> Tuple[int, str]:
    """The largest of `wanted`, halved, that leaves 2 GiB once three copies are held."""
    available, size = available_bytes(), wanted
    while size > 64 * MIB and 3 * size + 2 * 1024 * MIB > available:
        size //= 2
    note = (f"{size // MIB} MiB ({available / 2**30:.1f} GiB available"
            + (f"; {wanted // MIB} MiB did not fit)" if size != wanted else ")"))
    return size, note


def small_samples(args: argparse.Namespace, learner: replayd.Client, publisher: Worker
                  ) -> Dict[str, Any]:
    size, note = big_value_bytes(args.big_mib * MIB)
    publisher.ask("big_prepare", size)
    publisher.answer("ready")
    windows: Dict[str, List[List[float]]] = {"quiet": [], "publishing": []}
    publishes: List[Tuple[float, float]] = []
    slow: Dict[str, List[Tuple[float, float]]] = {"quiet": [], "publishing": []}
    for rep in range(args.reps):
        for kind in (("quiet", "publishing") if rep % 2 == 0 else ("publishing", "quiet")):
            if kind == "quiet":
                end = time.monotonic() + args.window
                windows[kind].append(sample_latencies(learner, "W1", 32,
                                                      lambda: time.monotonic() >= end,
                                                      slow[kind]))
                continue
            publisher.ask("big", args.window)
            windows[kind].append(sample_latencies(learner, "W1", 32, publisher.pipe.poll,
                                                  slow[kind]))
            publishes += publisher.answer("done")
        print(f"small-sample repetition {rep + 1}/{args.reps} done", file=sys.stderr)
    publisher.ask("big_free")
    publisher.answer("freed")
    return {"value_bytes": size, "note": note, "windows": windows, "slow": slow,
            "publish_s": [returned - called for called, returned in publishes],
            "slow_near_publish_ends": near_publish_ends(slow["publishing"], publishes)}


def near_publish_ends(slow: Sequence[Tuple[float, float]],
                      publishes: Sequence[Tuple[float, float]]) -> Dict[str, int]:
    """How many slow samples overlap the first or last 50 ms of a publish (its begin, its
    commit) rather than its middle (the parts)."""
    counts = {"begin": 0, "commit": 0, "parts": 0}
    for started, took in slow:
        ended = started + took
        for called, returned in publishes:
            if started <= called + 0.05 and ended >= called:
                counts["begin"] += 1
                break
            if started <= returned and ended >= returned - 0.05:
                counts["commit"] += 1
                break
        else:
            counts["parts"] += 1
    return counts


# --- the report ------------------------------------------------------------------------

def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f}"


def spread(values: Sequence[float], fmt: str = "{:,.0f}") -> str:
    return (f"{fmt.format(statistics.median(values))} "
            f"({fmt.format(min(values))}-{fmt.format(max(values))})")


def report_broadcast(result: Mapping[str, Any], args: argparse.Namespace) -> None:
    phases = result["phases"]
    base = [r["rate"] for r in phases["none"]] if "none" in phases else []
    print(f"\n## 1. Learner's W2 sample rate (batch 32, synchronous), batches/s, "
          f"median (min-max) of {args.reps}")
    print("| phase | batches/s | / no broadcast (medians) | per repetition |")
    print("|---|---:|---:|---|")
    for phase, runs in phases.items():
        rates = [r["rate"] for r in runs]
        ratio = statistics.median(rates) / statistics.median(base) if base else float("nan")
        each = (", ".join(f"{r / b:.2f}" for r, b in zip(rates, base)) if base else "")
        print(f"| {PHASE_TITLES[phase]} | {spread(rates)} | {ratio:.2f} | {each} |")
    print(f"\n## 1-2. Delay from publication to holding, ms ({args.explorers} explorers, "
          f"{args.value_mib:g} MiB every {args.period:g} s)")
    print("| phase | each explorer p50 | p99 | max | all explorers p50 | p99 | max | "
          "from publish called: each p99, all p99 | versions | skipped | missing | "
          "local timeouts |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|")
    for phase, runs in phases.items():
        if phase == "none":
            continue
        each = [d for r in runs for d in r["each_from_return"]]
        every = [d for r in runs for d in r["all_from_return"]]
        each_c = [d for r in runs for d in r["each_from_call"]]
        every_c = [d for r in runs for d in r["all_from_call"]]
        print(f"| {PHASE_TITLES[phase]} | {ms(pct(each, 50))} | {ms(pct(each, 99))} | "
              f"{ms(max(each, default=float('nan')))} | {ms(pct(every, 50))} | "
              f"{ms(pct(every, 99))} | {ms(max(every, default=float('nan')))} | "
              f"{ms(pct(each_c, 99))}, {ms(pct(every_c, 99))} | "
              f"{sum(r['versions'] for r in runs)} | {sum(r['skipped'] for r in runs)} | "
              f"{sum(r['missing'] for r in runs)} | {sum(r['local_timeouts'] for r in runs)} |")
        medians = [pct(r["all_from_return"], 50) for r in runs]
        print(f"|   per repetition, all-explorers median | {', '.join(ms(m) for m in medians)} "
              f"||||||||||")
    m = result["metrics"]
    print(f"\nServer counters over the broadcast: {m.get('changed', 0):,.0f} fetches with a "
          f"version, {m.get('unchanged', 0):,.0f} without, "
          f"{m.get('bytes', 0) / MIB:,.1f} MiB of value bytes sent")


def report_unchanged(result: Mapping[str, Any]) -> None:
    m = result["metrics"]
    print(f"\n## Unchanged fetches of version {result['versions_held']}: "
          f"{result['fetches']} fetches, {result['without_arrays']} replies without arrays; "
          f"server counters: fetches_total{{changed=\"false\"}} "
          f"+{m.get('unchanged', 0):,.0f}, {{changed=\"true\"}} +{m.get('changed', 0):,.0f}, "
          f"fetched_bytes_total +{m.get('bytes', 0):,.0f}")


def report_small(result: Mapping[str, Any], args: argparse.Namespace) -> None:
    print(f"\n## 3. W1 sample latency (batch 32, synchronous), ms, beside publishes of "
          f"{result['note']}")
    print("| window | samples | p50 | p99 | max | p99 per window |")
    print("|---|---:|---:|---:|---:|---|")
    for kind, windows in result["windows"].items():
        pooled = [x for w in windows for x in w]
        print(f"| {kind} | {len(pooled):,} | {ms(pct(pooled, 50))} | {ms(pct(pooled, 99))} | "
              f"{ms(max(pooled))} | {', '.join(ms(pct(w, 99)) for w in windows)} |")
    slow = result["slow"]
    slowest = sorted((t for _, t in slow["publishing"]), reverse=True)[:8]
    print(f"\nSamples over {SLOW_SAMPLE_S * 1e3:g} ms: quiet {len(slow['quiet'])}, publishing "
          f"{len(slow['publishing'])} (near a publish's begin / commit / elsewhere: "
          f"{'/'.join(str(v) for v in result['slow_near_publish_ends'].values())}); the "
          f"slowest while publishing: "
          f"{', '.join(ms(t) for t in slowest)} ms")
    p = result["publish_s"]
    print(f"\nPublishes: {len(p)}, each {ms(statistics.median(p))} ms median "
          f"({ms(min(p))}-{ms(max(p))}), "
          f"{result['value_bytes'] / statistics.median(p) / 2**30:.2f} GiB/s")


def machine_line(pinned: bool) -> str:
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    busy = subprocess.run(["pgrep", "-f", "cc1plus|cmake --build"], capture_output=True,
                          text=True).stdout.split()
    return (f"{model}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
            f"{'a C++ build running' if busy else 'no C++ build running'}; "
            + ("server on CPU 0, every client on CPU 1" if pinned
               else "fewer than 2 CPUs: nothing pinned"))


def main(argv: List[str]) -> None:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server on the way out
    pinned = (os.cpu_count() or 1) >= 2
    phases = args.phases.split(",")
    if procs.zmq is None:
        print("# pyzmq is missing (Debian: apt-get install python3-zmq): no zmq phases",
              file=sys.stderr)
        phases = [p for p in phases if not p.startswith("zmq")]
    started = datetime.datetime.now(datetime.timezone.utc)
    print(f"# {started:%Y-%m-%d %H:%M} UTC; {machine_line(pinned)}")
    with tempfile.TemporaryDirectory(prefix="replayd-values-") as tmp:
        server = Server(args.binary, tmp, pinned)
        if pinned:
            os.sched_setaffinity(0, {1})  # the workers forked below inherit it
        endpoint = f"ipc://{tmp}/zmq.sock" if procs.zmq is not None else None
        publisher = Worker(procs.publisher_main, server.address, endpoint,
                           int(args.value_mib * MIB), args.arrays)
        explorers = [Worker(procs.explorer_main, server.address, endpoint)
                     for _ in range(args.explorers)]
        try:
            for worker in [publisher, *explorers]:
                worker.answer("started")
            learner = replayd.Client(server.address, timeout=60)
            fill(learner, W2, "W2", 2_000, 64)
            fill(learner, W1, "W1", 100_000, 4096)
            results: Dict[str, Any] = {}
            results["broadcast"] = broadcast(args, server, learner, publisher, explorers,
                                             phases)
            results["unchanged"] = unchanged_fetches(server, publisher, explorers)
            if not args.no_small:
                results["small"] = small_samples(args, learner, publisher)
        finally:
            for worker in [publisher, *explorers]:
                worker.close()
            server.stop()
    ended = datetime.datetime.now(datetime.timezone.utc)
    print(f"# ended {ended:%H:%M:%S} UTC ({(ended - started).total_seconds():.0f} s); "
          f"{machine_line(pinned)}")
    report_broadcast(results["broadcast"], args)
    report_unchanged(results["unchanged"])
    if "small" in results:
        report_small(results["small"], args)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"date": f"{started:%Y-%m-%d %H:%M} UTC", "args": vars(args),
                       "results": results}, out)


if __name__ == "__main__":
    main(sys.argv[1:])
