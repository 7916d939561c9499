#!/usr/bin/python3
"""A soak of the shared-memory plane (docs/SHM.md) with kill -9 and restarts: plane writers
and learners run against one server while the server is killed with SIGKILL and restarted
from its data directory, round after round. Nothing acknowledged before a snapshot request
may be lost, and no learner may ever see a torn or foreign row. Not part of CI.

    /usr/bin/python3 bench/python/plane_soak.py [--rounds 5] [--round-s 15] [--rate 1000]

The server (build/service/replayd, or REPLAYD_BIN, or --server) runs pinned to CPU 0
(taskset), on a Unix socket, with --data-dir and no periodic snapshots; this driver and its
client processes are pinned to CPU 1. One table, prioritized sampler, whose capacity exceeds
every id the writers may write (so nothing is evicted and every acknowledged item must
survive); rows as in plane_soak_roles.py (an int64 id, 1 KiB of float32, a check).

Each round: the writers (`Client.writer`, staged through the plane) and learners (a
`Sampler` over the plane, priority updates) run; the driver reads each writer's
acknowledged ids, asks for a `snapshot` (which holds every change acknowledged before the
request), lets them run a little more, kills the server with SIGKILL and restarts it. While
it checks, writers wait to reconnect (learners reconnect at once): the restored table holds
exactly the snapshot's `items`; every item read back (`read_items`, in insertion order) is
whole; every item present after the previous restart and every id acknowledged to this
server before the request is present. Exits 1 on any lost item, torn or foreign row, or
failed check.
"""
from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "client" / "python"))

import replayd  # noqa: E402
from plane_soak_roles import (ID_SPAN, LearnerSlots, WriterSlots, fields,  # noqa: E402
                              run_learner, run_writer, torn_rows)

TABLE = "plane_soak"
SERVER_CPU, CLIENT_CPU = 0, 1
READY_TIMEOUT_S = 120.0  # a restart restores the whole table before it listens
CTX = mp.get_context("fork")


class Server:
    """The replayd process: started pinned to SERVER_CPU, killed with SIGKILL, started
    again on the same socket and data directory."""

    def __init__(self, binary: str, workdir: Path, pin: bool) -> None:
        self.binary, self.workdir, self.pin = binary, workdir, pin
        self.socket = workdir / "replayd.sock"
        self.data_dir = workdir / "data"
        self.config = workdir / "config.json"
        self.config.write_text(json.dumps({"snapshot_interval_s": 0, "shared_memory": True}))
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0

    @property
    def address(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> float:
        """Starts the server; returns the seconds until it was listening (restore included)."""
        self.starts += 1
        ready = self.workdir / f"ready-{self.starts}.json"
        args = [self.binary, "--config", str(self.config), "--unix", str(self.socket),
                "--tcp", "", "--metrics", "", "--data-dir", str(self.data_dir),
                "--ready-file", str(ready), "--log-level", "info"]
        if self.pin:
            args = ["taskset", "-c", str(SERVER_CPU), *args]
        started = time.monotonic()
        with open(self.workdir / "replayd.log", "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        while not ready.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"replayd exited with {self.proc.returncode}; see "
                                   f"{self.workdir / 'replayd.log'}")
            if time.monotonic() - started > READY_TIMEOUT_S:
                raise RuntimeError(f"replayd not ready after {READY_TIMEOUT_S} s")
            time.sleep(0.005)
        return time.monotonic() - started

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    def resident_bytes(self) -> int:
        try:
            with open(f"/proc/{self.proc.pid}/status") as status:  # type: ignore[union-attr]
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except (OSError, AttributeError):
            pass
        return 0


class PeakResident(threading.Thread):
    """Samples the server's resident memory every 0.5 s; `peak` is the largest seen."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        self.server, self.peak, self.done = server, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.5):
            self.peak = max(self.peak, self.server.resident_bytes())


def read_back(client: replayd.Client) -> Tuple[np.ndarray, int, int]:
    """Every stored item's id (sorted, unique), how many items were read, and how many of
    them were torn (values not those of their id)."""
    ids: List[np.ndarray] = []
    read = torn = 0
    for page in client.read_items(TABLE, page=4096):
        ids.append(np.array(page["id"]))
        read += len(page["id"])
        torn += torn_rows(page)
    return np.unique(np.concatenate(ids)) if ids else np.zeros(0, np.int64), read, torn


def absent(present: np.ndarray, wanted: np.ndarray) -> int:
    """How many of `wanted` (sorted) are not in `present` (sorted)."""
    if len(wanted) == 0:
        return 0
    at = np.searchsorted(present, wanted).clip(max=max(len(present) - 1, 0))
    found = present[at] == wanted if len(present) else np.zeros(len(wanted), bool)
    return int((~found).sum())


def absent_in_range(present: np.ndarray, low: int, high: int) -> int:
    """How many ids in [low, high] are not in `present` (sorted, unique)."""
    if high < low:
        return 0
    inside = np.searchsorted(present, high, "right") - np.searchsorted(present, low, "left")
    return (high - low + 1) - int(inside)


def writer_view(slots: Any) -> Tuple[int, int, int]:
    """(segment_start, acked, incarnation) of a writer, read together."""
    with slots.get_lock():
        return (slots[WriterSlots.SEGMENT_START], slots[WriterSlots.ACKED],
                slots[WriterSlots.INCARNATION])


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--round-s", type=float, default=15.0,
                        help="seconds of each round before the kill (default 15)")
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--learners", type=int, default=2)
    parser.add_argument("--rate", type=float, default=1000.0,
                        help="rows/s per writer, 0: as fast as it can (default 1000)")
    parser.add_argument("--flush-every", type=int, default=500)
    parser.add_argument("--batch", type=int, default=64, help="learner batch (default 64)")
    parser.add_argument("--capacity", type=int, default=0,
                        help="table capacity; 0: twice what the writers may write at --rate")
    parser.add_argument("--server", default=os.environ.get(
        "REPLAYD_BIN", str(REPO / "build" / "service" / "replayd")))
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    if args.capacity <= 0:
        if args.rate <= 0:
            parser.error("--rate 0 needs --capacity")
        args.capacity = int(2 * args.writers * args.rate * args.rounds * (args.round_s + 10))
    budget = args.capacity // args.writers  # ids per writer: the table never evicts

    pin = len(os.sched_getaffinity(0)) >= 2
    if pin:
        os.sched_setaffinity(0, {CLIENT_CPU})  # the client processes inherit it
    workdir = Path(tempfile.mkdtemp(prefix="plane-soak-"))
    server = Server(args.server, workdir, pin)
    print(f"plane soak {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC: {args.rounds} rounds "
          f"of {args.round_s:g} s, {args.writers} writers at "
          f"{args.rate:g} rows/s each (flush every {args.flush_every}), {args.learners} "
          f"learners (batch {args.batch}), capacity {args.capacity:,}")
    print("server pinned to CPU 0 (taskset -c 0), driver and clients to CPU 1" if pin else
          "fewer than 2 CPUs: nothing pinned")
    print(f"server {args.server}, work directory {workdir}", flush=True)

    server.start()
    with replayd.Client(server.address, timeout=30) as client:
        client.create_table(TABLE, fields(), capacity=args.capacity, sampler="prioritized",
                            remover="fifo", rate_limiter=replayd.MinSize(1))
    incarnation: Any = CTX.Value("q", 1)  # the server's start count, read by the writers
    may_connect, stop = CTX.Event(), CTX.Event()
    errors = CTX.Queue()
    wslots = [CTX.Array("q", WriterSlots.SIZE) for _ in range(args.writers)]
    lslots = [CTX.Array("q", LearnerSlots.SIZE) for _ in range(args.learners)]
    for w, slots in enumerate(wslots):
        slots[WriterSlots.SEGMENT_START] = w * ID_SPAN
        slots[WriterSlots.ACKED] = slots[WriterSlots.SENT] = w * ID_SPAN - 1
    procs = [CTX.Process(target=run_writer, daemon=True, args=(
        w, server.address, TABLE, args.flush_every, args.rate, budget, wslots[w],
        incarnation, may_connect, stop, errors)) for w in range(args.writers)]
    procs += [CTX.Process(target=run_learner, daemon=True, args=(
        i, server.address, TABLE, args.batch, lslots[i], wslots, stop, errors))
        for i in range(args.learners)]
    for proc in procs:
        proc.start()
    may_connect.set()
    peak = PeakResident(server)
    peak.start()

    failures: List[str] = []
    present = np.zeros(0, np.int64)  # ids read back after the last restart
    totals = {"lost": 0, "checked": 0, "torn": 0, "lost_after_request": 0}
    restart_s: List[float] = []
    resume_s: List[float] = []
    rss_at_kill: List[int] = []
    columns = ["round", "guaranteed (acked before a request)", "snapshot items (dropped)",
               "restart s", "restored", "read back", "torn", "lost acked",
               "acked after the request, lost (allowed)", "writers resumed s",
               "server RSS at kill"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    try:
        for rnd in range(1, args.rounds + 1):
            time.sleep(args.round_s * 2 / 3)
            views = [writer_view(s) for s in wslots]
            # Acknowledged to this server before the request: in the snapshot.
            ranges = [(start, acked) for start, acked, inc in views
                      if inc == incarnation.value]
            with replayd.Client(server.address, timeout=120) as client:
                snap = client.snapshot()
            if snap["items_dropped"] != 0:
                failures.append(f"round {rnd}: snapshot dropped {snap['items_dropped']} items")
            time.sleep(args.round_s / 3)
            rss_at_kill.append(server.resident_bytes())
            may_connect.clear()
            server.kill()
            incarnation.value += 1
            restart_s.append(server.start())
            with replayd.Client(server.address, timeout=120) as client:
                restored = client.size(TABLE)
                before = present
                present, read, torn = read_back(client)
                evictions = client.table_info(TABLE)["counters"]["evictions"]
            if restored != snap["items"]:
                failures.append(f"round {rnd}: restored {restored} items, the snapshot "
                                f"said {snap['items']}")
            if read != restored:  # writers wait while the driver checks
                failures.append(f"round {rnd}: read back {read} items of {restored}")
            if evictions:
                failures.append(f"round {rnd}: {evictions} evictions (capacity too small)")
            acked_ids = [np.arange(lo, hi + 1, dtype=np.int64) for lo, hi in ranges]
            must = np.union1d(before, np.concatenate(acked_ids or [before]))
            lost = absent(present, must)
            # Acknowledged after the request and before the kill: the kill may lose them.
            after = 0
            for (start, acked_then, _), slots in zip(views, wslots):
                _, acked_at_kill, _ = writer_view(slots)
                after += absent_in_range(present, max(start, acked_then + 1), acked_at_kill)
            acks_at_kill = sum(s[WriterSlots.ACK_COUNT] for s in wslots)
            may_connect.set()
            resumed = time.monotonic()
            while (sum(s[WriterSlots.ACK_COUNT] for s in wslots) == acks_at_kill
                   and time.monotonic() - resumed < 30):
                time.sleep(0.01)
            resume_s.append(time.monotonic() - resumed)
            totals["lost"] += lost
            totals["checked"] += read
            totals["torn"] += torn
            totals["lost_after_request"] += after
            print(f"| {rnd} | {len(must):,} | {snap['items']:,} ({snap['items_dropped']}) | "
                  f"{restart_s[-1]:.2f} | {restored:,} | {read:,} | {torn} | {lost} | "
                  f"{after:,} | {resume_s[-1]:.2f} | {mib(rss_at_kill[-1])} |", flush=True)
        time.sleep(1.0)
    finally:
        stop.set()
        for proc in procs:
            proc.join(30)
        peak.done.set()
        server.stop()

    written = sum(s[WriterSlots.APPENDED] for s in wslots)
    acked = sum(s[WriterSlots.ACK_COUNT] for s in wslots)
    learned = {name: sum(s[getattr(LearnerSlots, name)] for s in lslots)
               for name in ("CHECKED", "TORN", "FOREIGN", "SAMPLES", "RECONNECTS",
                            "CHANGED_ROWS", "NOT_ON_PLANE", "OTHER_ERRORS")}
    other_errors = []
    while not errors.empty():
        other_errors.append(errors.get())
    if any(s[WriterSlots.NOT_STAGED] for s in wslots):
        failures.append("a writer was not staged through the plane")
    if learned["NOT_ON_PLANE"]:
        failures.append("a learner did not get the plane")
    if any(s[WriterSlots.BUDGET_REACHED] for s in wslots):
        print("note: a writer reached its id budget and stopped appending (raise --capacity)")
    failures += other_errors
    print()
    print(f"rounds {args.rounds}, SIGKILLs {args.rounds}, restarts {args.rounds}")
    print(f"items appended {written:,}, acknowledged {acked:,}")
    print(f"items checked after the restarts (summed) {totals['checked']:,}; "
          f"torn {totals['torn']}; lost acknowledged {totals['lost']}")
    print(f"acknowledged after the snapshot request and lost by the kill (allowed) "
          f"{totals['lost_after_request']:,}")
    print(f"learners: rows checked {learned['CHECKED']:,} in {learned['SAMPLES']:,} batches, "
          f"torn {learned['TORN']}, foreign {learned['FOREIGN']}, rows redrawn (changed "
          f"under the copy) {learned['CHANGED_ROWS']}, reconnects {learned['RECONNECTS']}")
    print(f"writer reconnects {sum(s[WriterSlots.RECONNECTS] for s in wslots)}")
    print(f"restart to listening, s: {', '.join(f'{s:.2f}' for s in restart_s)}")
    print(f"writers acknowledged again after the check, s: "
          f"{', '.join(f'{s:.2f}' for s in resume_s)}")
    print(f"server RSS at each kill: {', '.join(mib(r) for r in rss_at_kill)}; "
          f"peak {mib(peak.peak)}")
    for failure in failures:
        print(f"FAILED: {failure}")
    bad = failures or totals["lost"] or totals["torn"] or learned["TORN"] or learned["FOREIGN"]
    print("FAILED" if bad else "OK: nothing acknowledged lost, no torn or foreign row")
    if args.keep or bad:
        print(f"work directory kept: {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
