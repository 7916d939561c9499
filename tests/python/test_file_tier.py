"""A table's file tier (docs/FILE_TIER.md) against the real server: rows past the RAM budget
are written out to segment files and read back exactly when drawn, over both transports;
prioritized draws over both tiers follow the priorities; FIFO eviction deletes the segments
of evicted rows, and other removers' half-live segments are compacted; dropping the table removes its directory; a restart (graceful or after a
kill) keeps every item, its snapshot keeping the segments as links, not copies; and every
way a file tier cannot be used is refused with a message that says why and what to do."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
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
        # Seeded: the draws are the same in every run (a chi-square test at p = 0.001 would
        # fail one run in a thousand otherwise).
        c.create_table("p", FIELDS, 64, sampler="prioritized", priority_exponent=1.0,
                       ram_bytes=8 * ROW_BYTES, seed=20261205)
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
        keys = insert_items(c, "d", 0, 400)
        wait_written_out(c, "d")
        segments = tier_info(c, "d")["segments"]
        assert segments >= 3
        # Cold ones: the first segment (at most 1 MiB and one write of 64 rows) holds only
        # them, and goes.
        c.delete("d", keys[:300])
        assert tier_info(c, "d")["segments"] < segments
        batch = c.sample("d", 500)
        assert batch["item"].min() >= 300
        np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
        c.reset("d")
        tier = tier_info(c, "d")
        assert tier["cold_rows"] == 0
        assert tier["segments"] <= 1  # every segment but the one being written to
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


def persistent(make_server, tmp_path) -> ServerProcess:
    """A server with snapshots and a tier directory on one filesystem, 1 MiB segments."""
    config = tmp_path / "persistent.json"
    config.write_text(json.dumps({"limits": {"tier_segment_bytes": 1 << 20}}))
    return make_server(extra_args=["--tier-dir", str(tmp_path / "tier"), "--data-dir",
                                   str(tmp_path / "data"), "--config", str(config)])


def read_all(client: replayd.Client, table: str) -> np.ndarray:
    """Every item of `table` in its order, checking each row's bytes."""
    items = []
    for page in client.read_items(table, page=128):
        np.testing.assert_array_equal(page["obs"], rows_of(page["item"]))
        items.append(page["item"])
    return np.concatenate(items)


def segment_inodes(directory: Path) -> Dict[str, int]:
    return {f.name: f.stat().st_ino for f in directory.glob("segment-*")}


def test_a_restart_keeps_every_item_and_reuses_the_segments(make_server, tmp_path):
    server = persistent(make_server, tmp_path)
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("r", FIELDS, 1000, ram_bytes=50 * ROW_BYTES)
        insert_items(c, "r", 0, 1200)  # 200 evicted, 950 cold, 50 hot
        tier = wait_written_out(c, "r")
        assert tier["cold_rows"] >= 900
    before = {name: ino for d in (tmp_path / "tier").glob("r.*")
              for name, ino in segment_inodes(d).items()}
    assert len(before) >= 5
    assert server.stop() == 0  # the final snapshot links the segments beside it
    kept = list((tmp_path / "data").glob("snapshot-*.segments/r"))
    assert len(kept) == 1
    kept_inodes = segment_inodes(kept[0])
    # Links, not copies: the very files the tier wrote.
    assert kept_inodes and all(before.get(name) == ino for name, ino in kept_inodes.items())
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        np.testing.assert_array_equal(read_all(c, "r"), np.arange(200, 1200))
        tier = tier_info(c, "r")
        assert tier["cold_rows"] >= 900 and tier["ram_rows"] == 50
        restored = [d for d in (tmp_path / "tier").glob("r.*")]
        assert len(restored) == 1
        assert set(segment_inodes(restored[0]).items()) >= set(kept_inodes.items())
        batch = c.sample("r", 500)
        np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
        # New rows go to new segments; FIFO eviction retires the restored ones.
        insert_items(c, "r", 1200, 1000)
        wait_written_out(c, "r")
        np.testing.assert_array_equal(read_all(c, "r"), np.arange(1200, 2200))
        assert not set(segment_inodes(restored[0]).values()) & set(kept_inodes.values())


def wait_compacted(client: replayd.Client, table: str, segment_bytes: int) -> Dict[str, Any]:
    """Waits until the writer is done and compaction has left the tier within its bound:
    every segment but the open one at least half live, so the files hold at most twice the
    live records plus the open segment (and a write in flight)."""
    deadline = time.monotonic() + 30
    while True:
        tier = tier_info(client, table)
        live = tier["cold_rows"] * (ROW_BYTES + 8)  # raw records at most
        if (tier["hot_rows"] <= tier["ram_rows"]
                and tier["file_bytes"] <= 2 * live + 2 * segment_bytes):
            return tier
        assert time.monotonic() < deadline, f"compaction never caught up: {tier}"
        time.sleep(0.02)


def test_a_remover_other_than_fifo_compacts_half_live_segments(make_server, tmp_path):
    """A min_heap remover evicts cold rows anywhere in the files: compaction copies the live
    records of segments it left less than half live and deletes those segments, and every
    item is the reference model's, before and after a restart."""
    server = persistent(make_server, tmp_path)
    priorities = np.random.default_rng(7).permutation(3000).astype(np.float64) + 1
    model: Dict[int, float] = {}  # item -> priority: the min_heap remover's choice, exactly
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("h", FIELDS, 300, remover="min_heap", ram_bytes=20 * ROW_BYTES)
        for i in range(3000):
            if len(model) == 300:
                del model[min(model, key=model.__getitem__)]
            model[i] = priorities[i]
            c.insert("h", {"item": np.array([i]), "obs": row_of(i)[None]},
                     priorities=priorities[i:i + 1])
        tier = wait_compacted(c, "h", 1 << 20)
        # 3,000 rows written (24 MB); without compaction most segments would stay.
        assert tier["rows_moved"] > 0 and tier["segments_deleted"] > 0, tier
        assert tier["file_bytes"] < 10 << 20, tier
        files = list((tmp_path / "tier").glob("h.*/segment-*"))
        assert len(files) == tier["segments"]
        assert sum(f.stat().st_size for f in files) == tier["file_bytes"]
        np.testing.assert_array_equal(np.sort(read_all(c, "h")), sorted(model))
        batch = c.sample("h", 500)
        np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
    assert server.stop() == 0
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        np.testing.assert_array_equal(np.sort(read_all(c, "h")), sorted(model))
        # Evictions go on after the restart, from the restored (read-only) segments too.
        for i in range(3000, 3600):
            if len(model) == 300:
                del model[min(model, key=model.__getitem__)]
            model[i] = float(i)
            c.insert("h", {"item": np.array([i]), "obs": row_of(i)[None]},
                     priorities=np.array([float(i)]))
        wait_compacted(c, "h", 1 << 20)
        np.testing.assert_array_equal(np.sort(read_all(c, "h")), sorted(model))
        # A snapshot, then compaction moves its rows and deletes the segments it names: its
        # kept links still hold them, so a killed server restores it exactly.
        c.snapshot()
        at_snapshot = sorted(model)
        moved = tier_info(c, "h")["rows_moved"]
        rng = np.random.default_rng(8)
        for i in range(3600, 5000):
            if len(model) == 300:
                del model[min(model, key=model.__getitem__)]
            model[i] = float(rng.random() * 5000)
            c.insert("h", {"item": np.array([i]), "obs": row_of(i)[None]},
                     priorities=np.array([model[i]]))
        assert wait_compacted(c, "h", 1 << 20)["rows_moved"] > moved
    server.kill()
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        np.testing.assert_array_equal(np.sort(read_all(c, "h")), at_snapshot)


def test_a_killed_server_restores_the_last_snapshot_from_its_kept_segments(make_server,
                                                                           tmp_path):
    server = persistent(make_server, tmp_path)
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("k", FIELDS, 600, ram_bytes=30 * ROW_BYTES, priority_exponent=1.0,
                       sampler="prioritized")
        keys = insert_items(c, "k", 0, 600, priorities=np.ones(100))
        wait_written_out(c, "k")
        c.update_priorities("k", keys[:10], np.full(10, 50.0))  # cold rows' priorities
        c.snapshot()
        # After the snapshot: evictions retire its segments in the tier; its links keep them.
        insert_items(c, "k", 600, 600, priorities=np.ones(100))
        wait_written_out(c, "k")
        assert tier_info(c, "k")["segments_deleted"] >= 3
    server.kill()
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        np.testing.assert_array_equal(read_all(c, "k"), np.arange(600))
        batch = c.sample("k", 2000)
        np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
        # The snapshot's priorities: items 0-9 hold 10 x 50 of the 500 + 590 x 1 mass.
        share = np.isin(batch["item"], np.arange(10)).mean()
        assert 0.35 < share < 0.55, share


def test_a_snapshot_without_its_kept_segments_refuses_the_start(make_server, tmp_path):
    server = persistent(make_server, tmp_path)
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("m", FIELDS, 500, ram_bytes=10 * ROW_BYTES)
        insert_items(c, "m", 0, 300)
        wait_written_out(c, "m")
    assert server.stop() == 0
    for kept in (tmp_path / "data").glob("snapshot-*.segments/m/segment-*"):
        kept.unlink()
    with pytest.raises(RuntimeError, match=r"table 'm': its file tier cannot be restored"):
        server.start()


def test_a_file_tier_is_refused_when_snapshots_could_not_keep_its_segments(make_server,
                                                                           tmp_path):
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs /dev/shm on a filesystem other than the test's directory")
    tier_dir = Path(tempfile.mkdtemp(prefix="replayd-tier-", dir=shm))
    try:
        server = make_server(extra_args=["--tier-dir", str(tier_dir), "--data-dir",
                                         str(tmp_path / "data")])
        with replayd.Client(server.unix_address, timeout=30) as c:
            with pytest.raises(replayd.ReplayError, match="different filesystems"):
                c.create_table("s", FIELDS, 100, ram_bytes=1 << 20)
        server.stop()
    finally:
        shutil.rmtree(tier_dir, ignore_errors=True)


def test_a_tier_dir_is_held_by_one_server(make_server, tmp_path):
    make_server(extra_args=["--tier-dir", str(tmp_path / "tier")])
    with pytest.raises(RuntimeError, match="in use by another replayd process"):
        make_server(extra_args=["--tier-dir", str(tmp_path / "tier")])


def test_table_directories_left_by_a_killed_server_are_removed_at_start(make_server,
                                                                       tmp_path):
    server = make_server(extra_args=["--tier-dir", str(tmp_path / "tier")])
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("x", FIELDS, 500, ram_bytes=10 * ROW_BYTES)
        insert_items(c, "x", 0, 100)
        wait_written_out(c, "x")
    server.kill()
    left = list((tmp_path / "tier").glob("x.*"))
    assert left
    unrelated = tmp_path / "tier" / "notes"
    unrelated.mkdir()
    server.start()
    assert not any(d.exists() for d in left)
    assert unrelated.exists()  # only table directories of segments go
    with replayd.Client(server.unix_address, timeout=30) as c:  # the same name works again
        c.create_table("x", FIELDS, 500, ram_bytes=10 * ROW_BYTES)
        insert_items(c, "x", 0, 100)
        wait_written_out(c, "x")
        np.testing.assert_array_equal(read_all(c, "x"), np.arange(100))


@pytest.mark.parametrize("fields, options, expected", [
    # An episodic table's reward stays in RAM: with nothing else, there is nothing to write.
    ({"rew": (np.float32, ())}, {"episodic": True, "bootstrap": []}, "no field to write out"),
])
def test_a_file_tier_refuses_what_it_cannot_hold(tiered, fields, options, expected):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
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
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"limits": {"tier_segment_bytes": 1 << 20}}))
    server = make_server(extra_args=["--tier-dir", str(tmp_path / "tier"), "--metrics",
                                     "127.0.0.1:0", "--config", str(config)])
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("mt", FIELDS, 1000, ram_bytes=10 * ROW_BYTES)
        insert_items(c, "mt", 0, 200)
        wait_written_out(c, "mt")
        c.sample("mt", 100)
        # A min_heap table evicting cold rows: compaction copies rows out of half-live
        # segments.
        c.create_table("mh", FIELDS, 100, remover="min_heap", ram_bytes=10 * ROW_BYTES)
        for i in range(1000):
            c.insert("mh", {"item": np.array([i]), "obs": row_of(i)[None]},
                     priorities=np.array([float((i * 7919) % 1000)]))
        moved = wait_compacted(c, "mh", 1 << 20)["rows_moved"]
        assert moved > 0
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
    assert value(samples, "replayd_tier_rows_moved_total", table="mt") == 0  # fifo
    assert value(samples, "replayd_tier_rows_moved_total", table="mh") >= moved
    promtool = require_tool("promtool")
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                            text=True)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


# --- Episodic tables over both tiers -------------------------------------------------------


def check_episodic_table(client: replayd.Client, table: str, model: Any, rng: Any) -> None:
    """Every n-step and sequence draw, and reading everything, against the reference model
    of test_episodes_model (exactly, by the start key each draw returns)."""
    from test_episodes_model import check_nstep, check_sequences
    for k in (1, 3, 10):
        check_nstep(client, table, model, k, round(rng.random(), 4), 300)
    check_nstep(client, table, model, 3, 1.0, 200)
    for length, stride, burn_in, pad in ((5, 1, 0, False), (5, 1, 0, True), (4, 2, 3, True)):
        check_sequences(client, table, model, length, stride, burn_in, pad, 200)
    stored = [key for key in model.order]
    pages = list(client.read_all(table, page=64))
    assert np.concatenate([p["key"] for p in pages]).tolist() == stored
    for page in pages:
        for i, key in enumerate(page["key"].tolist()):
            row = model.steps[key][2]
            for name in ("obs", "act", "rew", "next_obs"):
                assert np.array_equal(page[name][i], row[name]), (name, key)


def test_episodic_draws_over_both_tiers_match_the_reference_model_exactly(tiered):
    """n-step returns and bootstraps, sequences across hot and cold steps, and reading
    everything, with 20 of 300 steps in RAM (the reward field stays in RAM; the others are
    read back from the segments)."""
    import random

    from test_episodes_model import FIELDS as STEP_FIELDS, Model, write_stream
    rng = random.Random(5)
    capacity, envs = 300, 4
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        c.create_table("e", STEP_FIELDS, capacity, episodic=True, reward="rew", seed=5,
                       ram_bytes=20 * 28)
        model = Model(capacity)
        current: list = [None] * envs
        next_episode = [1]
        with c.episode_writer("e", envs=envs, batch=8, keep_keys=True) as writer:
            for _ in range(3):  # the last phases evict past the capacity
                write_stream(writer, model, rng, 250, envs, current, next_episode)
                tier = wait_written_out(c, "e")
                assert tier["ram_rows"] == 20
                assert tier["cold_rows"] >= len(model.order) - 20 - 8
                check_episodic_table(c, "e", model, rng)
        assert tier_info(c, "e")["cold_reads"] > 1000


def test_an_episodic_table_over_the_tier_survives_a_restart(make_server, tmp_path):
    import random

    from test_episodes_model import FIELDS as STEP_FIELDS, Model, write_stream
    server = persistent(make_server, tmp_path)
    rng = random.Random(9)
    capacity, envs = 400, 3
    model = Model(capacity)
    current: list = [None] * envs
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("er", STEP_FIELDS, capacity, episodic=True, reward="rew", seed=9,
                       ram_bytes=30 * 28)
        with c.episode_writer("er", envs=envs, batch=8, keep_keys=True) as writer:
            write_stream(writer, model, rng, 500, envs, current, [1])
        # The writer closed: its open episodes ended truncated, their steps kept.
        for episode in current:
            if episode is not None and model.length.get(episode):
                model.state[episode] = "truncated"
        assert wait_written_out(c, "er")["cold_rows"] >= 350
    assert server.stop() == 0
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        tier = tier_info(c, "er")
        assert tier["cold_rows"] >= 350 and tier["ram_rows"] == 30
        check_episodic_table(c, "er", model, rng)


@pytest.mark.parametrize("compressed", [True, False], ids=["zstd", "raw"])
def test_frame_tables_over_both_tiers_match_the_pixel_reference_model(tiered, monkeypatch,
                                                                      compressed):
    """Stacked frames with next_of (their field stays in RAM) beside cold steps: the pixel
    model's test (test_pixels_model), run on a table with 10 steps in RAM."""
    from test_pixels_model import (
        test_stacks_and_next_obs_match_the_reference_model_across_starts_ends_and_wrap as check)
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        create = c.create_table
        monkeypatch.setattr(c, "create_table",
                            lambda *args, **kwargs: create(*args, ram_bytes=10 * 23, **kwargs))
        check(c, "px", compressed, "uniform", True)
        tier = tier_info(c, "px")
        assert tier["cold_rows"] > 40 and tier["cold_reads"] > 0


def test_frames_of_cold_draws_are_their_own_while_writers_reuse_the_slots(tiered):
    """A draw's frames are its own steps' though the request waits for its cold reads while
    an explorer keeps appending (evicting the drawn steps and reusing their slots): every
    frame encodes its step's id, and the last of each stack is the drawn step's."""
    import threading

    frame = (2, 3)
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        c.create_table("race", {"obs": (np.uint8, frame), "act": (np.int32, ()),
                                "rew": (np.float32, ())}, 60, episodic=True,
                       next_of=["obs"], stack={"obs": 2}, ram_bytes=8 * 14)
        stop = threading.Event()

        def explorer() -> None:
            with replayd.Client(tiered.unix_address, timeout=30) as w, \
                    w.episode_writer("race", batch=4) as writer:
                step = 0
                while not stop.is_set():
                    writer.append(obs=np.full(frame, step % 251, np.uint8), act=step,
                                  rew=1.0)
                    step += 1
                    if step % 20 == 0:
                        writer.end_episode(obs=np.full(frame, step % 251, np.uint8))
                        step += 1

        thread = threading.Thread(target=explorer)
        thread.start()
        try:
            deadline = time.monotonic() + 10
            while tier_info(c, "race")["cold_rows"] < 20:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            for _ in range(300):
                batch = c.sample("race", 16, nstep=1, beta=0.0)
                act = batch["act"].astype(np.int64)
                # obs: (16, 2 stacked, *frame); the last stacked frame is step t's own.
                np.testing.assert_array_equal(batch["obs"][:, -1, 0, 0], act % 251)
                sequences = c.sample_sequences("race", 4, 3)
                mask = sequences.mask.astype(bool)
                ids = sequences["act"].astype(np.int64)
                np.testing.assert_array_equal(sequences["obs"][:, :, -1, 0, 0][mask],
                                              (ids % 251)[mask])
        finally:
            stop.set()
            thread.join()
        assert tier_info(c, "race")["cold_reads"] > 0
