"""Long reliability soak of replayd (not part of CI; see bench/soak/README.md).

    /usr/bin/python3 bench/soak/soak.py --minutes 30 [--server build/service/replayd]

Starts the server pinned to CPU 0 with a data dir, a snapshot every minute and tight
limits; runs explorers, learners and a hostile client mix pinned to CPU 1; SIGKILLs and
restarts the server every --kill-every-s seconds; checks that acknowledged inserts that a
completed snapshot covered survive, that the server's RSS stays under the worst-case
memory of docs/OPERATIONS.md, and that learners are never starved. Prints a markdown
summary; exits 1 if a check failed.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "client" / "python")]

import numpy as np  # noqa: E402

import replayd  # noqa: E402
import soak_checks  # noqa: E402
import soak_hostile  # noqa: E402
import soak_roles  # noqa: E402
from soak_checks import DurabilityModel, Incarnation  # noqa: E402

TABLE = "soak"
SERVER_CPU, CLIENT_CPU = 0, 1
ITEM_BYTES = 4 * 4 + 8 + 4 + 4 * 4 + 1 + 4 + 8  # the fields of soak_roles.TABLE_FIELDS
# Seconds around a kill in which learners may see connection errors and low rates: from
# just before the kill until this long after the restarted server is ready.
RESTART_GRACE_S = 3.0
LIMITS = {"max_frame_bytes": 1 << 20, "max_meta_bytes": 64 << 10,
          "max_queued_reply_bytes": 1 << 20, "max_connections": 64, "max_tables": 1,
          "max_batch_items": 65536, "write_timeout_ms": 10_000, "idle_timeout_ms": 20_000}


def table_bytes(capacity: int) -> int:
    """docs/CONFIG.md, What a table costs: data + 33 B slot metadata + fifo remover (8) +
    prioritized sampler (32 x next_pow2 + 8 per slot)."""
    next_pow2 = 1 << max(0, (capacity - 1).bit_length())
    return capacity * (ITEM_BYTES + 33 + 8 + 8) + 32 * next_pow2


def server_config(capacity: int, snapshot_interval_s: int) -> Dict[str, Any]:
    fields = [{"name": name, "dtype": np.dtype(dtype).name, "shape": list(shape)}
              for name, (dtype, shape) in soak_roles.TABLE_FIELDS.items()]
    limits = dict(LIMITS, max_table_bytes=table_bytes(capacity))
    return {"log_level": "info", "snapshot_interval_s": snapshot_interval_s, "snapshot_keep": 3,
            "limits": limits,
            "tables": [{"name": TABLE, "capacity": capacity, "fields": fields,
                        "sampler": {"kind": "prioritized", "priority_exponent": 0.6},
                        "remover": "fifo", "max_times_sampled": 0,
                        "rate_limiter": {"kind": "min_size", "min_size_to_sample": 256}}]}


class Server:
    """The server under test; each start is one Incarnation with its own log."""

    def __init__(self, binary: Path, workdir: Path, config_path: Path) -> None:
        self.binary, self.workdir, self.config_path = binary, workdir, config_path
        self.unix = str(workdir / "replayd.sock")
        self.tcp = "127.0.0.1:0"
        self.proc: Optional[subprocess.Popen] = None
        self.incarnations: List[Incarnation] = []
        self.ready_s: List[float] = []

    def pid(self) -> Optional[int]:
        proc = self.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> Incarnation:
        number = len(self.incarnations)
        ready_file = self.workdir / f"ready-{number}.json"
        log_path = self.workdir / f"replayd-{number}.log"
        args = ["taskset", "-c", str(SERVER_CPU), str(self.binary), "--config",
                str(self.config_path), "--unix", self.unix, "--tcp", self.tcp, "--metrics", "",
                "--data-dir", str(self.workdir / "data"), "--ready-file", str(ready_file)]
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not ready_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"replayd did not start ({self.proc.poll()}); log:\n"
                                   f"{log_path.read_text()[-3000:]}")
            time.sleep(0.02)
        ready = json.loads(ready_file.read_text())
        self.tcp = ready["tcp"]  # the same port after every restart
        self.ready_s.append(time.time())
        incarnation = Incarnation(number, log_path)
        incarnation.parse_log(TABLE)
        self.incarnations.append(incarnation)
        return incarnation

    def idle_rss(self, limits: Dict[str, int]) -> int:
        """VmRSS of this binary serving no table and no client: code, libraries, stacks
        (what the memory formula leaves out)."""
        config = self.workdir / "idle.json"
        config.write_text(json.dumps({"log_level": "warn", "limits": limits}))
        ready_file = self.workdir / "ready-idle.json"
        proc = subprocess.Popen(["taskset", "-c", str(SERVER_CPU), str(self.binary),
                                 "--config", str(config), "--unix",
                                 str(self.workdir / "idle.sock"), "--tcp", "", "--metrics", "",
                                 "--ready-file", str(ready_file)], stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not ready_file.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.5)
            with open(f"/proc/{proc.pid}/status") as status:
                return next(int(line.split()[1]) * 1024 for line in status
                            if line.startswith("VmRSS:"))
        finally:
            proc.terminate()
            proc.wait(timeout=30)

    def kill(self) -> float:
        assert self.proc is not None
        killed_s = time.time()
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        return killed_s

    def terminate(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=300)


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.workdir = Path(args.workdir or tempfile.mkdtemp(prefix="replayd-soak-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        total_items = int(args.minutes * 60 * args.explorers * args.rate * 1.25) + 100_000
        self.capacity = total_items
        self.config = server_config(self.capacity, args.snapshot_interval_s)
        config_path = self.workdir / "replayd.json"
        config_path.write_text(json.dumps(self.config, indent=1))
        self.server = Server(Path(args.server).resolve(), self.workdir, config_path)
        self.records = [self.workdir / f"explorer-{i}.acks" for i in range(args.explorers)]
        self.model = DurabilityModel()
        self.failures: List[str] = []
        self.kills: List[Tuple[float, float]] = []  # (kill time, ready time after it)
        self.checked: List[Dict[str, Any]] = []
        self.rss: List[Tuple[float, int]] = []

    def client(self) -> replayd.Client:
        return replayd.Client(f"unix://{self.server.unix}", timeout=60, name="soak-driver")

    def check_restart(self) -> None:
        """After a restart: the keys the restored snapshot had to hold are all live."""
        killed, started = self.server.incarnations[-2], self.server.incarnations[-1]
        killed.parse_log(TABLE)
        time.sleep(1.0)  # explorers write out the acks they noted before the kill
        window = (self.server.ready_s[-2], self.server.ready_s[-1])
        required = self.model.required_after_restart(
            killed, started, soak_checks.read_records(self.records), window)
        with self.client() as client:
            missing = soak_checks.missing_keys(client, TABLE, required)
            size = client.size(TABLE)
        entry = {"start": started.number, "restored_from": started.restored_from,
                 "restored_items": started.restored_items, "required": len(required),
                 "missing": len(missing), "size_after": size,
                 "snapshots_before_kill": len(killed.snapshots)}
        self.checked.append(entry)
        print(f"  restart {started.number}: {json.dumps(entry)}", flush=True)
        if len(missing):
            self.failures.append(f"start {started.number}: {len(missing)} of {len(required)} "
                                 f"acknowledged items covered by {started.restored_from} are "
                                 f"missing, e.g. keys {missing[:5].tolist()}")
        if started.restored_items < len(required):
            self.failures.append(f"start {started.number} restored {started.restored_items} "
                                 f"items, fewer than the {len(required)} required")

    def check_graceful(self) -> None:
        """A SIGTERM writes a final snapshot holding every acknowledged insert: after it,
        every key acknowledged by any explorer since the last restore must be live."""
        last = self.server.incarnations[-1]
        stopped_at = time.time()
        code = self.server.terminate()
        if code != 0:
            self.failures.append(f"graceful shutdown exited with code {code}")
        started = self.server.start()
        acked = np.concatenate(soak_checks.read_records(self.records))
        mine = acked[acked["ack_s"] >= self.server.ready_s[-2]]
        required = np.union1d(self.model.held_by(last.restored_from), mine["key"])
        with self.client() as client:
            missing = soak_checks.missing_keys(client, TABLE, required)
        entry = {"start": started.number, "after": "SIGTERM", "required": len(required),
                 "missing": len(missing), "restored_items": started.restored_items}
        self.checked.append(entry)
        print(f"  graceful restart: {json.dumps(entry)} ({time.time() - stopped_at:.1f} s)")
        if len(missing):
            self.failures.append(f"after SIGTERM: {len(missing)} of {len(required)} "
                                 f"acknowledged items missing")
        self.server.terminate()

    def run(self) -> int:
        args = self.args
        soak_roles.pin_to(CLIENT_CPU)
        baseline_rss = self.server.idle_rss(self.config["limits"])
        self.server.start()
        rss_stop = threading.Event()
        sampler = threading.Thread(target=soak_roles.rss_sampler,
                                   args=(self.server.pid, self.rss, rss_stop), daemon=True)
        sampler.start()
        context = multiprocessing.get_context("spawn")
        stop, results = context.Event(), context.Queue()
        address = f"unix://{self.server.unix}"
        workers = [context.Process(target=soak_roles.explorer,
                                   args=(address, TABLE, i, str(self.records[i]), args.rate,
                                         CLIENT_CPU, stop, results))
                   for i in range(args.explorers)]
        workers += [context.Process(target=soak_roles.learner,
                                    args=(address, TABLE, i, CLIENT_CPU, stop, results))
                    for i in range(args.learners)]
        if not args.no_hostile:
            limits = self.config["limits"]
            workers.append(context.Process(
                target=soak_hostile.hostile,
                args=(f"unix://{self.server.unix}", f"tcp://{self.server.tcp}", TABLE, limits, CLIENT_CPU, stop, results)))
        for worker in workers:
            worker.start()
        began = time.time()
        end = began + args.minutes * 60
        # Kills drift against the snapshot timer (+-20% of its interval), so they land
        # before, during and after snapshot writes.
        jitter = random.Random(7)

        def kill_after(ready_s: float) -> float:
            return ready_s + args.kill_every_s + \
                jitter.uniform(-0.2, 0.2) * args.snapshot_interval_s
        next_kill = kill_after(self.server.ready_s[0])
        print(f"soak: {args.minutes} min, kill every {args.kill_every_s} s, workdir "
              f"{self.workdir}", flush=True)
        while True:
            now = time.time()
            if now >= end:
                break
            if now < next_kill:
                time.sleep(min(1.0, end - now, next_kill - now))
                continue
            killed_at = self.server.kill()
            self.server.start()
            self.kills.append((killed_at, self.server.ready_s[-1]))
            self.check_restart()
            next_kill = kill_after(self.server.ready_s[-1])
        stop.set()
        reports = [results.get(timeout=120) for _ in workers]
        for worker in workers:
            worker.join(timeout=60)
        ended = time.time()
        rss_stop.set()
        sampler.join()
        self.check_graceful()
        return self.report(reports, began, ended, baseline_rss)

    def report(self, reports: List[Dict[str, Any]], began: float, ended: float,
               baseline_rss: int) -> int:
        explorers = [r for r in reports if r["role"] == "explorer"]
        learners = [r for r in reports if r["role"] == "learner"]
        hostile = [r for r in reports if r["role"] == "hostile"]
        excluded = [(k - 1.0, ready + RESTART_GRACE_S) for k, ready in self.kills]
        warmup_end = self.server.ready_s[0] + 5.0
        errors: List[str] = []
        for report in reports:
            for at, connection, text in report["errors"]:
                in_restart = any(lo <= at <= hi for lo, hi in excluded)
                if not (connection and in_restart):
                    errors.append(f"{report['role']} {report.get('index', '')} at "
                                  f"{at - began:.1f} s: {text.strip()[-300:]}")
        if errors:
            self.failures.append(f"{len(errors)} client errors outside restart windows")
        rates: List[int] = []
        for learner in learners:
            per_second = {int(s): n for s, n in learner["per_second"].items()}
            rates += soak_checks.learner_windows(per_second, excluded, warmup_end, ended - 1)
            if learner["corrupt"]:
                self.failures.append(f"learner {learner['index']}: {learner['corrupt']} "
                                     f"sampled items whose data disagrees with their seq")
        low, median = soak_checks.summarize_rates(rates)
        floor = soak_roles.LEARNER_BATCH
        starved = sum(1 for r in rates if r < floor)
        if starved:
            self.failures.append(f"learner below {floor} items/s in {starved} of {len(rates)} "
                                 f"one-second windows")
        bound = soak_checks.memory_bound(self.config["limits"], listeners=2)
        bound_total = bound["total"] + baseline_rss
        max_rss = max((r for _, r in self.rss), default=0)
        if max_rss > bound_total:
            self.failures.append(f"RSS {max_rss} above the bound {bound_total}")
        self.failures += self.model.anomalies
        for incarnation in self.server.incarnations:
            for line in incarnation.log_path.read_text(errors="replace").splitlines():
                if "] [error] " in line or "] [critical] " in line:
                    self.failures.append(f"server log {incarnation.log_path.name}: {line}")
        for incarnation in self.server.incarnations:
            incarnation.parse_log(TABLE)
        snapshots = sum(len(i.snapshots) for i in self.server.incarnations)
        restoring = sum(1 for c in self.checked if "after" not in c and c["restored_from"])
        mib = 1 << 20
        lines = [
            f"### Soak: {self.args.minutes:g} min, SIGKILL every {self.args.kill_every_s:g} s",
            "",
            "| measure | value |", "|---|---|",
            f"| duration | {(ended - began) / 60:.1f} min |",
            f"| explorers / learners | {len(explorers)} x {self.args.rate:g} items/s / "
            f"{len(learners)} |",
            f"| inserts acknowledged | {sum(r['acked'] for r in explorers):,} "
            f"(of {sum(r['appended'] for r in explorers):,} appended) |",
            f"| writers created (after errors) | {sum(r['writers'] for r in explorers)} |",
            f"| restarts after SIGKILL | {len(self.kills)} ({restoring} restored a snapshot) |",
            f"| periodic snapshots completed | {snapshots} |",
            f"| keys checked after restarts (summed over restarts) | "
            f"{sum(c['required'] for c in self.checked if 'after' not in c):,}; missing "
            f"{sum(c['missing'] for c in self.checked if 'after' not in c)} |",
            f"| items checked after the final SIGTERM | "
            f"{sum(c['required'] for c in self.checked if 'after' in c):,}; missing "
            f"{sum(c['missing'] for c in self.checked if 'after' in c)} |",
            f"| max RSS | {max_rss / mib:.0f} MiB (table {table_bytes(self.capacity) / mib:.0f}"
            f" MiB) |",
            f"| RSS bound | {bound_total / mib:.0f} MiB = tables {bound['tables'] / mib:.0f} + "
            f"connections {bound['connections'] / mib:.0f} + snapshot copy "
            f"{bound['snapshot_copy'] / mib:.0f} + idle server {baseline_rss / mib:.0f} |",
            f"| learner items/s per 1 s window (min / median) | {low} / {median:.0f} "
            f"(floor {floor}; {len(rates)} windows) |",
            f"| learner samples / corrupt items | {sum(r['sampled'] for r in learners):,} / "
            f"{sum(r['corrupt'] for r in learners)} |",
        ]
        for h in hostile:
            counts = h.get("counts", {})
            lines.append("| hostile actions | " + ", ".join(
                f"{k} {v}" for k, v in counts.items() if not k.startswith("malformed: ")) + " |")
        lines.append(f"| client errors at kills (expected) / elsewhere | "
                     f"{sum(len(r['errors']) for r in reports) - len(errors)} / {len(errors)} |")
        lines.append(f"| result | {'PASS' if not self.failures else 'FAIL'} |")
        print("\n".join(lines))
        for note in self.model.notes:
            print(f"note: {note}")
        for failure in self.failures:
            print(f"FAIL: {failure}")
        for error in errors[:20]:
            print(f"  error: {error}")
        (self.workdir / "summary.md").write_text("\n".join(lines) + "\n")
        return 1 if self.failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--server", default=str(ROOT / "build" / "service" / "replayd"))
    parser.add_argument("--kill-every-s", type=float, default=300)
    parser.add_argument("--snapshot-interval-s", type=int, default=60,
                        help="the server's snapshot_interval_s (default 60)")
    parser.add_argument("--explorers", type=int, default=16)
    parser.add_argument("--learners", type=int, default=2)
    parser.add_argument("--rate", type=float, default=200,
                        help="items/s each explorer appends (default 200)")
    parser.add_argument("--workdir", help="default: a new temporary directory")
    parser.add_argument("--keep", action="store_true", help="keep the workdir")
    parser.add_argument("--no-hostile", action="store_true")
    args = parser.parse_args()
    soak = Soak(args)
    try:
        code = soak.run()
    finally:
        if soak.server.pid() is not None:
            soak.server.kill()
    if not args.keep and code == 0:
        shutil.rmtree(soak.workdir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
