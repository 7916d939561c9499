"""The scheduler against the real binary (docs/ARCHITECTURE.md, "Scheduling"): a learner of
large samples cannot starve a learner of small ones. As in the benchmarks, the server is
pinned to CPU 0 and the learners to CPU 1, so that the figure is the server's sharing and
not the OS scheduler's; the test compares the small learner beside the greedy one with the
same learner alone, in the same test. (The explorer side, and a learner parked by its rate
limiter: tests/service/scheduling_test.cpp.)"""
from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import time

import numpy as np
import pytest

import replayd
import scheduling_workers as workers

pytestmark = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 or shutil.which("taskset") is None,
    reason="needs 2 CPUs and taskset")


def run(address: str, seconds: float, *learners) -> dict:
    """Runs the learners (worker functions) in processes on CPU 1 from the same instant;
    returns their rates by kind."""
    context = mp.get_context("spawn")
    results = context.Queue()
    start_at = time.time() + 2.0  # every process is up and connected by then
    processes = [context.Process(target=learner, args=(address, 1, start_at, seconds, results))
                 for learner in learners]
    for process in processes:
        process.start()
    rates = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
    return rates


def test_a_learner_of_small_samples_keeps_its_share_beside_one_of_64_mib_samples(make_server):
    server = make_server(tcp=False, cpus="0")
    client = replayd.Client(server.unix_address)
    client.create_table("big", {"x": (np.uint8, (1 << 20,))}, 64)
    client.create_table("small", {"v": (np.int64, ())}, 1000)
    for _ in range(8):
        client.insert("big", {"x": np.zeros((8, 1 << 20), np.uint8)})
    client.insert("small", {"v": np.zeros(1000, np.int64)})
    alone = run(server.unix_address, 1.5, workers.small_learner)["small"]
    beside = run(server.unix_address, 3.0, workers.small_learner, workers.greedy_learner)
    share = beside["small"] / alone
    # Turn by turn, the small learner keeps a fair part of its solo rate (about half of the
    # thread's time at worst; 0.25-0.8 measured on a busy 2-core machine). Without turns it
    # waited behind one 64 MiB sample after another: 0.01-0.02 of its solo rate.
    assert share >= 0.1, (f"small learner: {beside['small']:.0f} samples/s beside the greedy "
                          f"one ({beside['greedy']:.1f} samples of 64 MiB/s), {alone:.0f} alone")
    assert beside["greedy"] > 0  # and the greedy one is not starved either
