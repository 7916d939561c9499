"""A table's file tier (docs/FILE_TIER.md) against the real server: rows past the RAM budget
are written out to segment files and read back exactly when drawn, over both transports;
prioritized draws over both tiers follow the priorities; FIFO eviction deletes the segments
of evicted rows; dropping the table removes its directory; and every way a file tier cannot
be used is refused with a message that says why and what to do."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

import replayd
from conftest import ServerProcess
from test_metrics import parse_samples, require_tool, scrape, value

VALUES = 2048  # float32: 8 KB a row, two pages


def row_of(item: int) -> np.ndarray:
    """Row `item`'s observation: random (incompressible) and reproducible from the id."""
    return np.random.default_rng(item).standard_normal(VALUES, dtype=np.float32)


def rows_of(items: np.ndarray) -> np.ndarray:
    return np.stack([row_of(int(i)) for i in items])


@pytest.fixture
def tiered(make_server, tmp_path) -> ServerProcess:
    """A server with a tier directory, 1 MiB segments (so that a test fills several)."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"limits": {"tier_segment_bytes": 1 << 20}}))
    return make_server(extra_args=["--tier-dir", str(tmp_path / "tier"), "--config",
                                   str(config)])


def tier_info(client: replayd.Client, table: str) -> Dict[str, Any]:
    return client.info(table)["file_tier"]


def wait_written_out(client: replayd.Client, table: str) -> Dict[str, Any]:
    """Waits until the writer has brought the hot rows down to the RAM budget."""
    deadline = time.monotonic() + 30
    while True:
        tier = tier_info(client, table)
        if tier["hot_rows"] <= tier["ram_rows"]:
            return tier
        assert time.monotonic() < deadline, f"the writer never caught up: {tier}"
        time.sleep(0.02)


def insert_items(client: replayd.Client, table: str, first: int, count: int,
                 batch: int = 100, **extra: Any) -> np.ndarray:
    keys = []
    for start in range(first, first + count, batch):
        items = np.arange(start, min(start + batch, first + count), dtype=np.int64)
        keys.append(client.insert(table, {"item": items, "obs": rows_of(items)}, **extra))
    return np.concatenate(keys)


FIELDS = {"item": (np.int64, ()), "obs": (np.float32, (VALUES,))}
ROW_BYTES = 8 + VALUES * 4


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_rows_past_the_ram_budget_are_written_out_and_read_back_exactly(tiered, transport):
    with replayd.Client(tiered.address(transport), timeout=30) as c:
        c.create_table("t", FIELDS, 2000, ram_bytes=50 * ROW_BYTES)
        insert_items(c, "t", 0, 1000)
        tier = wait_written_out(c, "t")
        assert tier["ram_rows"] == 50
        assert tier["cold_rows"] == 1000 - tier["hot_rows"] >= 950
        assert tier["segments"] >= 5  # 1 MiB segments of 7-8 KB records
        drawn = set()
        for _ in range(8):
            batch = c.sample("t", 200)
            np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
            drawn.update(int(i) for i in batch["item"])
        assert len(drawn) > 700  # uniform over 1,000: hot and cold rows alike
        assert tier_info(c, "t")["cold_reads"] > 1000


def test_prioritized_draws_over_both_tiers_follow_the_priorities(tiered):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        c.create_table("p", FIELDS, 64, sampler="prioritized", priority_exponent=1.0,
                       ram_bytes=8 * ROW_BYTES)
        items = np.arange(32, dtype=np.int64)
        keys = c.insert("p", {"item": items, "obs": rows_of(items)},
                        priorities=(items + 1).astype(np.float64))
        wait_written_out(c, "p")
        # A cold item's priority changes like a hot one's.
        c.update_priorities("p", keys[:2], np.array([40.0, 0.5]))
        mass = (items + 1).astype(np.float64)
        mass[0], mass[1] = 40.0, 0.5
        counts = np.zeros(32)
        for _ in range(40):
            batch = c.sample("p", 500)
            np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
            counts += np.bincount(batch["item"], minlength=32)
        expected = mass / mass.sum() * counts.sum()
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert chi2 < 61.1, (chi2, counts)  # df 31, p = 0.001


def test_fifo_eviction_deletes_the_segments_of_evicted_rows(tiered, tmp_path):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        c.create_table("f", FIELDS, 300, ram_bytes=20 * ROW_BYTES)
        insert_items(c, "f", 0, 3000)
        tier = wait_written_out(c, "f")
        # 300 live rows (<= 3 MiB of records) in 1 MiB segments: the ones before are gone.
        assert tier["segments"] <= 5, tier
        assert tier["segments_deleted"] >= 10, tier
        files = list((tmp_path / "tier").glob("f.*/segment-*"))
        assert len(files) == tier["segments"]
        assert sum(f.stat().st_size for f in files) == tier["file_bytes"]
        batch = c.sample("f", 300)
        assert batch["item"].min() >= 2700
        np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))


def test_deleted_cold_rows_are_never_drawn_and_a_reset_empties_the_tier(tiered):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        c.create_table("d", FIELDS, 1000, ram_bytes=10 * ROW_BYTES)
        keys = insert_items(c, "d", 0, 200)
        wait_written_out(c, "d")
        c.delete("d", keys[:150])  # cold ones
        batch = c.sample("d", 500)
        assert batch["item"].min() >= 150
        np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
        c.reset("d")
        assert tier_info(c, "d")["cold_rows"] == 0
        insert_items(c, "d", 1000, 50)
        batch = c.sample("d", 100)
        assert batch["item"].min() >= 1000
        np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))


def test_dropping_a_table_removes_its_tier_directory(tiered, tmp_path):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        c.create_table("g", FIELDS, 500, ram_bytes=10 * ROW_BYTES)
        insert_items(c, "g", 0, 300)
        wait_written_out(c, "g")
        assert list((tmp_path / "tier").glob("g.*/segment-*"))
        c.drop_table("g")
        deadline = time.monotonic() + 10
        while list((tmp_path / "tier").glob("g.*")):
            assert time.monotonic() < deadline, "the dropped table's directory stayed"
            time.sleep(0.05)


def test_a_file_tier_needs_a_tier_directory(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        with pytest.raises(replayd.ReplayError, match="--tier-dir"):
            c.create_table(table_name, FIELDS, 100, ram_bytes=1 << 20)


def test_a_file_tier_is_refused_beside_snapshots(make_server, tmp_path):
    server = make_server(extra_args=["--tier-dir", str(tmp_path / "tier"), "--data-dir",
                                     str(tmp_path / "data")])
    with replayd.Client(server.unix_address, timeout=30) as c:
        with pytest.raises(replayd.ReplayError, match="snapshots"):
            c.create_table("s", FIELDS, 100, ram_bytes=1 << 20)


@pytest.mark.parametrize("options, expected", [
    ({"episodic": True}, "episodic"),
    ({"remover": "uniform"}, "fifo remover"),
])
def test_a_file_tier_refuses_what_it_cannot_hold(tiered, options, expected):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        fields = dict(FIELDS, rew=(np.float32, ()), next_obs=(np.float32, (4,)))
        with pytest.raises(replayd.InvalidArgument, match=expected):
            c.create_table("r", fields, 100, ram_bytes=1 << 20, **options)


def test_a_tiered_table_is_sampled_with_rows_copied_only(tiered):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        c.create_table("k", FIELDS, 100, ram_bytes=10 * ROW_BYTES)
        c.create_table("k2", FIELDS, 100)
        insert_items(c, "k", 0, 40)
        insert_items(c, "k2", 0, 40)
        assert c.info("k")["shared_memory"] is False
        with pytest.raises(replayd.ReplayError, match="file tier"):
            c._call({"op": "sample", "table": "k", "n": 4, "rows": "keys"})
        with pytest.raises(replayd.ReplayError, match="shared memory"):
            c._call({"op": "sample_mixed", "tables": ["k", "k2"], "counts": [2, 2], "n": 4,
                     "rows": "keys"})


def test_read_items_returns_cold_rows_from_disk(tiered):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        c.create_table("ri", FIELDS, 1000, ram_bytes=10 * ROW_BYTES)
        insert_items(c, "ri", 0, 300)
        wait_written_out(c, "ri")
        items, obs = [], []
        for page in c.read_items("ri", page=64):
            items.append(page["item"])
            obs.append(page["obs"])
        items = np.concatenate(items)
        np.testing.assert_array_equal(items, np.arange(300))
        np.testing.assert_array_equal(np.concatenate(obs), rows_of(items))


def test_a_mixed_batch_reads_the_cold_rows_of_a_tiered_table(tiered):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        c.create_table("m1", FIELDS, 1000, ram_bytes=10 * ROW_BYTES)
        c.create_table("m2", FIELDS, 1000)
        insert_items(c, "m1", 0, 300)
        insert_items(c, "m2", 10_000, 100)
        wait_written_out(c, "m1")
        batch = c.sample({"m1": 0.5, "m2": 0.5}, 200)
        items = np.asarray(batch["item"])
        assert (items < 300).sum() == 100 and (items >= 10_000).sum() == 100
        np.testing.assert_array_equal(np.asarray(batch["obs"]), rows_of(items))


def test_compressible_rows_are_stored_compressed_and_read_back_exactly(tiered):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        c.create_table("z", FIELDS, 1000, ram_bytes=10 * ROW_BYTES)
        items = np.arange(400, dtype=np.int64)
        # Frames with few distinct values, as rendered screens have: zstd shrinks them.
        obs = (np.repeat(items[:, None] % 7, VALUES, axis=1) * (np.arange(VALUES) % 5)).astype(
            np.float32)
        c.insert("z", {"item": items, "obs": obs})
        tier = wait_written_out(c, "z")
        assert tier["bytes_written"] < tier["rows_written"] * ROW_BYTES / 20
        for _ in range(4):
            batch = c.sample("z", 256)
            expected = (np.repeat(batch["item"][:, None] % 7, VALUES, axis=1) *
                        (np.arange(VALUES) % 5)).astype(np.float32)
            np.testing.assert_array_equal(batch["obs"], expected)


def test_metrics_show_each_tier_and_the_cold_reads(make_server, tmp_path):
    server = make_server(extra_args=["--tier-dir", str(tmp_path / "tier"), "--metrics",
                                     "127.0.0.1:0"])
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("mt", FIELDS, 1000, ram_bytes=10 * ROW_BYTES)
        insert_items(c, "mt", 0, 200)
        wait_written_out(c, "mt")
        c.sample("mt", 100)
        text = scrape(server)
    samples = parse_samples(text)
    assert value(samples, "replayd_tier_rows", table="mt", tier="ram") == 10
    assert value(samples, "replayd_tier_rows", table="mt", tier="disk") == 190
    assert value(samples, "replayd_tier_bytes", table="mt", tier="ram") == 10 * ROW_BYTES
    assert value(samples, "replayd_tier_bytes", table="mt", tier="disk") > 190 * ROW_BYTES * 0.8
    assert value(samples, "replayd_tier_rows_written_total", table="mt") == 190
    assert value(samples, "replayd_tier_cold_reads_total", table="mt") > 50
    assert value(samples, "replayd_tier_read_requests_total", table="mt") == 1
    assert value(samples, "replayd_tier_read_seconds_total", table="mt") > 0
    promtool = require_tool("promtool")
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                            text=True)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr
