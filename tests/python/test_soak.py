"""A bounded soak: explorers, a learner and connection churn against one server for about a
minute. The server's resident memory stays flat and nobody sees an error.

Duration: REPLAYD_SOAK_S seconds (default 45). Against a sanitizer build (ASAN_OPTIONS set, as
scripts/sanitize does) the run is shorter and memory is not judged: ASan's quarantine holds
freed memory on purpose."""
from __future__ import annotations

import multiprocessing
import os
import time

import numpy as np

import replayd
import soak_workers
from conftest import resident_bytes

UNDER_ASAN = "ASAN_OPTIONS" in os.environ
SOAK_S = float(os.environ.get("REPLAYD_SOAK_S", "15" if UNDER_ASAN else "45"))
# Allowed growth of the server's resident memory between the end of the warm-up and the end.
RSS_GROWTH_LIMIT_BYTES = 16 << 20


def test_memory_stays_flat_under_explorers_learners_and_reconnects(make_server):
    server = make_server(tcp=False)
    address = server.unix_address
    with replayd.Client(address, timeout=30) as client:
        client.create_table("soak", {"obs": (np.uint8, (4, 84)), "act": (np.int64, ()),
                                     "rew": (np.float32, ())},
                            capacity=20_000, sampler="prioritized",
                            rate_limiter=replayd.MinSize(256))
        client.create_table("waits", {"x": (np.uint8, ())}, capacity=10,
                            rate_limiter=replayd.MinSize(5))
    warmup_s = min(10.0, SOAK_S / 4)
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    deadline = time.time() + SOAK_S
    workers = [context.Process(target=soak_workers.explorer, args=(address, "soak", deadline, results))
               for _ in range(2)]
    workers.append(context.Process(target=soak_workers.learner, args=(address, "soak", deadline, results)))
    workers.append(context.Process(target=soak_workers.churner, args=(address, "soak", deadline, results)))
    for worker in workers:
        worker.start()

    time.sleep(warmup_s)  # the table fills and every buffer reaches its working size
    after_warmup = resident_bytes(server.proc.pid)
    reports = [results.get(timeout=SOAK_S + 120) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    at_end = resident_bytes(server.proc.pid)

    errors = [f"{role}: {error}" for role, _, error in reports if error]
    assert not errors, "\n".join(errors)
    counts = {role: c for role, c, _ in reports}
    assert counts["explorer"]["inserted"] > 0 and counts["learner"]["sampled"] > 0
    assert counts["churner"]["connections"] > 10
    growth = at_end - after_warmup
    assert UNDER_ASAN or growth < RSS_GROWTH_LIMIT_BYTES, (
        f"resident memory grew {growth / 2**20:.1f} MiB after warm-up "
        f"({after_warmup / 2**20:.1f} -> {at_end / 2**20:.1f} MiB); counts {counts}")
    with replayd.Client(address, timeout=30) as client:
        info = client.table_info("waits")
        assert info["waiting"] == {"inserts": 0, "samples": 0}  # churned waiters were removed
        assert client.size("soak") == 20_000
    log = server.log_path.read_text()
    assert "[error]" not in log and "[critical]" not in log, log[-3000:]
