"""Process entry points for the soak test (importable by spawned children). Each runs until
`deadline` (time.time()) and reports its counts on `results`; any exception is reported too."""
from __future__ import annotations

import time
import traceback

import numpy as np

import replayd

OBS = np.arange(84 * 4, dtype=np.uint8).reshape(4, 84)


def _report(results, role, counts, error=None):
    results.put((role, counts, error))


def explorer(address: str, table: str, deadline: float, results) -> None:
    """Appends transitions through a writer, closing and reopening it every 2000 items."""
    counts = {"inserted": 0}
    try:
        client = replayd.Client(address, timeout=30)
        while time.time() < deadline:
            with client.writer(table, batch=64) as writer:
                for i in range(2000):
                    writer.append(obs=OBS, act=i, rew=1.0)
            counts["inserted"] += 2000
        client.close()
        _report(results, "explorer", counts)
    except Exception:
        _report(results, "explorer", counts, traceback.format_exc())


def learner(address: str, table: str, deadline: float, results) -> None:
    """Samples with a prefetching sampler and updates priorities of every batch."""
    counts = {"sampled": 0, "updates": 0}
    try:
        client = replayd.Client(address, timeout=30)
        rng = np.random.default_rng(0)
        with client.sampler(table, 128, prefetch=4) as batches:
            for batch in batches:
                client.update_priorities(table, batch.keys, rng.random(len(batch)) + 0.01)
                counts["sampled"] += len(batch)
                counts["updates"] += 1
                if time.time() >= deadline:
                    break
        client.close()
        _report(results, "learner", counts)
    except Exception:
        _report(results, "learner", counts, traceback.format_exc())


def churner(address: str, table: str, deadline: float, results) -> None:
    """Connects, does a little work (sometimes leaving a sample waiting), and disconnects,
    over and over: the connections a crashing or restarting worker leaves behind."""
    counts = {"connections": 0}
    try:
        while time.time() < deadline:
            client = replayd.Client(address, timeout=30)
            client.ping()
            client.insert(table, {"obs": OBS, "act": 1, "rew": 0.0})
            client.sample_async("waits", 1)  # parks on an empty table; the close cancels it
            client.sample(table, 8)
            client.close()
            counts["connections"] += 1
        _report(results, "churner", counts)
    except Exception:
        _report(results, "churner", counts, traceback.format_exc())
