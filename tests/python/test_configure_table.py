"""A table's settings changed at run time (`configure_table`), against the real binary.

What a user relies on: a dataset preloaded with no rate limiter, then given a
samples-per-insert ratio, admits the next samples and inserts exactly as the new limiter
says (the preloaded steps are not charged); requests waiting on the old limiter are judged
by the new one at once; a new priority exponent shows in the description and in the draws;
a refused change changes nothing; snapshots keep the new settings.
"""
from __future__ import annotations

import threading
import time
from typing import Any, List

import numpy as np
import pytest

import replayd

STEP = {"obs": ("float32", (3,)), "act": ("int64", ()), "rew": ("float32", ())}
PRELOADED = 100_000


def preload(c: replayd.Client, name: str) -> None:
    c.create_table(name, STEP, PRELOADED + 10_000, episodic=True, reward="rew",
                   rate_limiter=replayd.MinSize(1))
    with c.episode_writer(name, batch=4096) as writer:
        for episode in range(PRELOADED // 1000):
            for t in range(1000):
                writer.append(0, obs=np.full(3, t, np.float32), act=t, rew=1.0)
            writer.end_episode(0, terminated=episode % 2 == 0)
    assert c.size(name) == PRELOADED


def samples_admitted(c: replayd.Client, name: str, limit: int = 100) -> int:
    """Single n-step draws admitted at once, until the first that would wait."""
    for count in range(limit):
        try:
            c.sample(name, 1, nstep=1, timeout=0.05)
        except replayd.TimeoutError:
            return count
    return limit


def test_a_limiter_turned_on_after_a_preload_admits_exactly_what_it_says(server, table_name):
    with replayd.Client(server.unix_address, timeout=60) as c:
        preload(c, table_name)
        assert samples_admitted(c, table_name, 500) == 500  # no limiter yet
        ratio = replayd.SampleToInsertRatio(2.0, min_size_to_sample=1000, error_buffer=10.0)
        info = c.configure_table(table_name, rate_limiter=ratio)
        limiter = info["description"]["rate_limiter"]
        assert (limiter["samples_per_insert"], limiter["min_diff"], limiter["max_diff"]) == (
            2.0, 1990.0, 2010.0)
        # The reference: the diff starts at the band's middle (2000); a sample of n needs
        # diff - n >= 1990, an insert of n needs diff + 2n <= 2010.
        assert samples_admitted(c, table_name) == 10  # diff 2000 -> 1990
        with c.episode_writer(table_name, batch=1) as writer:
            for t in range(5):  # diff 1990 -> 2000
                writer.append(0, obs=np.zeros(3, np.float32), act=t, rew=0.0)
            writer.flush()
        assert samples_admitted(c, table_name) == 10


def test_inserts_follow_the_new_limiter_and_waiting_ones_are_judged_at_once(server, table_name):
    with replayd.Client(server.unix_address, timeout=60) as c:
        c.create_table(table_name, {"x": ("int64", ())}, 10_000)
        c.insert(table_name, {"x": np.arange(1000)})
        # Band [1 - 4, 1 + 4] around spi * min_size = 1: the diff starts at 1.
        c.configure_table(table_name, rate_limiter=replayd.SampleToInsertRatio(
            1.0, min_size_to_sample=1, error_buffer=4.0))
        for i in range(4):  # diff 1 -> 5
            c.insert(table_name, {"x": np.array([2000 + i])}, timeout=0.05)
        with pytest.raises(replayd.TimeoutError):
            c.insert(table_name, {"x": np.array([3000])}, timeout=0.05)
        done: List[float] = []
        waiting = threading.Thread(target=lambda: (
            c.insert(table_name, {"x": np.array([4000])}, timeout=30),
            done.append(time.monotonic())), daemon=True)
        waiting.start()
        time.sleep(0.3)
        assert not done, "the insert should wait on the limiter"
        started = time.monotonic()
        c.configure_table(table_name, rate_limiter=replayd.MinSize(1))
        waiting.join(10)
        assert done and done[0] - started < 2, "the new limiter did not release the insert"
        assert c.size(table_name) == 1005


def test_a_sample_waiting_on_the_old_limiter_is_released_by_the_new_one(server, table_name):
    with replayd.Client(server.unix_address, timeout=60) as c:
        c.create_table(table_name, {"x": ("int64", ())}, 1000,
                       rate_limiter=replayd.MinSize(100))
        c.insert(table_name, {"x": np.arange(10)})
        result: List[Any] = []
        waiting = threading.Thread(
            target=lambda: result.append(c.sample(table_name, 4, timeout=30)), daemon=True)
        waiting.start()
        time.sleep(0.3)
        assert not result
        c.configure_table(table_name, rate_limiter=replayd.MinSize(5))
        waiting.join(10)
        assert result and len(result[0].keys) == 4


def test_a_new_exponent_shows_and_a_refused_change_changes_nothing(server, table_name):
    with replayd.Client(server.unix_address, timeout=60) as c:
        c.create_table(table_name, {"x": ("int64", ())}, 8, sampler="prioritized",
                       priority_exponent=1.0)
        c.insert(table_name, {"x": np.arange(8)}, priorities=np.arange(1, 9, dtype=float))
        info = c.configure_table(table_name, priority_exponent=0.0)
        assert info["description"]["sampler"]["priority_exponent"] == 0.0
        # Exponent 0: every item has mass 1, whatever its priority.
        assert info["mass"] == 8.0
        np.testing.assert_allclose(c.sample(table_name, 64).probabilities, 1 / 8)
        before = c.table_info(table_name)["description"]
        with pytest.raises(replayd.InvalidArgument, match="min_size_to_sample"):
            c.configure_table(table_name, rate_limiter=replayd.MinSize(1000),
                              priority_exponent=2.0)
        with pytest.raises(replayd.InvalidArgument, match="priority_exponent"):
            c.configure_table(table_name, priority_exponent=-1.0)
        assert c.table_info(table_name)["description"] == before
        c.create_table(table_name + "u", {"x": ("int64", ())}, 8)
        with pytest.raises(replayd.InvalidArgument, match="prioritized"):
            c.configure_table(table_name + "u", priority_exponent=0.5)


def test_snapshots_keep_the_new_settings(make_server, tmp_path):
    data_dir = tmp_path / "data"
    server = make_server(extra_args=["--data-dir", str(data_dir)])
    ratio = replayd.SampleToInsertRatio(2.0, min_size_to_sample=10, error_buffer=6.0)
    with replayd.Client(server.unix_address, timeout=60) as c:
        c.create_table("t", {"x": ("int64", ())}, 1000, sampler="prioritized",
                       metadata={"source": "demos"})
        c.insert("t", {"x": np.arange(500)})
        c.configure_table("t", rate_limiter=ratio, priority_exponent=0.9)
        described = c.table_info("t")["description"]
        # Band [14, 26]; the diff starts at 20: take 3 (20 -> 17) and stop.
        assert samples_admitted_plain(c, "t", limit=3) == 3
    server.stop()
    server.start()
    with replayd.Client(server.unix_address, timeout=60) as c:
        assert c.table_info("t")["description"] == described
        assert described["metadata"] == {"source": "demos"}
        assert samples_admitted_plain(c, "t") == 3  # diff 17 -> 14: the counters were kept


def samples_admitted_plain(c: replayd.Client, name: str, limit: int = 100) -> int:
    for count in range(limit):
        try:
            c.sample(name, 1, timeout=0.05)
        except replayd.TimeoutError:
            return count
    return limit
