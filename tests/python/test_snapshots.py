"""Snapshots against the real server: the snapshot op, restore at start, SIGTERM and SIGKILL,
corrupted and failed snapshots, periodic snapshots and keep-last-K (docs/SNAPSHOT.md)."""
from __future__ import annotations

import json
import os
import signal
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import replayd
from conftest import ServerProcess, server_binary

FIELDS = {"id": ("int64", ()), "obs": ("float32", (4,))}


def snapshots_in(data_dir: Path) -> List[Path]:
    return sorted(data_dir.glob("snapshot-*.rsnap"))


def items(first_id: int, n: int) -> Dict[str, Any]:
    ids = np.arange(first_id, first_id + n, dtype=np.int64)
    obs = np.repeat(ids.astype(np.float32)[:, None], 4, axis=1) + np.arange(4, dtype=np.float32)
    return {"id": ids, "obs": obs}


def table_state(client: replayd.Client, table: str) -> Dict[str, Any]:
    info = client.table_info(table)
    return {key: info[key] for key in ("size", "counters", "rate_limiter", "description")}


def start(make_server, data_dir: Path, *extra: str) -> ServerProcess:
    return make_server(extra_args=["--data-dir", str(data_dir), "--log-level", "debug", *extra])


def test_snapshot_op_reports_the_file_and_a_restart_restores_items_and_counters(
        make_server, tmp_path):
    data_dir = tmp_path / "data"
    server = start(make_server, data_dir)
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("replay", FIELDS, capacity=1000, sampler="prioritized", seed=5)
        keys = c.insert("replay", items(0, 300), priorities=np.linspace(0.1, 3, 300))
        c.sample("replay", 64)
        c.update_priorities("replay", keys[:10], np.full(10, 7.0))
        c.delete("replay", keys[10:20])
        before = table_state(c, "replay")
        reply = c.snapshot()
    assert Path(reply["file"]).parent == data_dir
    assert Path(reply["file"]).exists()
    assert reply["tables"] == 1 and reply["items"] == 290
    assert reply["bytes"] == Path(reply["file"]).stat().st_size
    assert reply["duration_ms"] >= 0 and reply["stall_ms"] >= 0

    server.kill()  # no final snapshot: what comes back is the op's snapshot
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        assert table_state(c, "replay") == before
        # Keys survive: the updated ones are found, the deleted ones stay stale.
        assert c.update_priorities("replay", keys[:20], np.ones(20)) == 10  # stale
        sample = c.sample("replay", 200)
        np.testing.assert_array_equal(sample["obs"][:, 0], sample["id"].astype(np.float32))
        assert set(sample["id"].tolist()) <= set(range(20, 300)) | set(range(10))
        new_keys = c.insert("replay", items(1000, 5))
        assert not set(new_keys.tolist()) & set(keys.tolist())


def test_restored_table_samples_like_the_original_would_have(make_server, tmp_path):
    data_dir = tmp_path / "data"
    server = start(make_server, data_dir)
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("replay", FIELDS, capacity=64, sampler="uniform", remover="uniform", seed=9)
        for i in range(10):
            c.insert("replay", items(10 * i, 10))  # 100 inserts into 64 slots: evictions
        c.snapshot()
        expected = [c.sample("replay", 16)["id"].tolist() for _ in range(5)]
    server.kill()
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        assert [c.sample("replay", 16)["id"].tolist() for _ in range(5)] == expected


def test_sigterm_under_load_keeps_every_acknowledged_insert(make_server, tmp_path):
    data_dir = tmp_path / "data"
    server = start(make_server, data_dir)
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("replay", FIELDS, capacity=1_000_000)
    acknowledged: List[np.ndarray] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer(worker: int) -> None:
        with replayd.Client(server.unix_address, timeout=30) as wc:
            futures = []
            next_id = worker * 10_000_000
            while not stop.is_set():
                try:
                    futures.append(wc.insert_async("replay", items(next_id, 16)))
                except replayd.ReplayError:
                    break  # the server is gone
                next_id += 16
                if len(futures) >= 16:  # keep 16 inserts in flight
                    try:
                        keys = futures.pop(0).result(timeout=30)
                    except replayd.ReplayError:
                        break
                    with lock:
                        acknowledged.append(keys)
            for future in futures:
                try:
                    keys = future.result(timeout=30)
                except replayd.ReplayError:
                    continue
                with lock:
                    acknowledged.append(keys)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    assert server.stop(signal.SIGTERM) == 0
    stop.set()
    for t in threads:
        t.join(timeout=60)
    keys = np.concatenate(acknowledged)
    assert len(keys) > 100

    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        # update_priorities counts keys no longer stored: every acknowledged key is there.
        stale = 0
        for chunk in np.array_split(keys, len(keys) // 50_000 + 1):
            stale += c.update_priorities("replay", chunk, np.ones(len(chunk)))
        assert stale == 0
        assert c.size("replay") >= len(keys)


def test_sigkill_during_a_snapshot_restores_the_previous_complete_one(make_server, tmp_path):
    data_dir = tmp_path / "data"
    server = start(make_server, data_dir, "--snapshot-test-pause-ms", "1500")
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("replay", FIELDS, capacity=1000)
        c.insert("replay", items(0, 100))
        c.snapshot()  # complete (after its 1.5 s pause)
        before = table_state(c, "replay")
        c.insert("replay", items(100, 100))
        second = threading.Thread(target=lambda: _ignore_errors(c.snapshot), daemon=True)
        second.start()
        deadline = time.monotonic() + 10
        while not list(data_dir.glob("*.tmp")):
            assert time.monotonic() < deadline, "the second snapshot never started"
            time.sleep(0.01)
        server.kill()  # mid-write: the temporary file is incomplete
    assert len(snapshots_in(data_dir)) == 1
    server.extra_args = ["--data-dir", str(data_dir)]
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        assert table_state(c, "replay") == before
    assert not list(data_dir.glob("*.tmp")), "leftover temporary files are removed at start"


def _ignore_errors(call) -> None:
    try:
        call()
    except replayd.ReplayError:
        pass


def test_a_corrupted_newest_snapshot_falls_back_to_the_previous_one(make_server, tmp_path):
    data_dir = tmp_path / "data"
    server = start(make_server, data_dir)
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("replay", FIELDS, capacity=1000)
        c.insert("replay", items(0, 100))
        c.snapshot()
        before = table_state(c, "replay")
        c.insert("replay", items(100, 100))
        newest = Path(c.snapshot()["file"])
    server.kill()
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0x40
    newest.write_bytes(bytes(data))

    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        assert table_state(c, "replay") == before
    log = server.log_path.read_text()
    assert "snapshot rejected" in log and "checksum mismatch" in log and newest.name in log


def test_a_truncated_only_snapshot_refuses_the_start_unless_empty_tables_are_allowed(
        make_server, tmp_path):
    data_dir = tmp_path / "data"
    server = start(make_server, data_dir)
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("replay", FIELDS, capacity=1000)
        c.insert("replay", items(0, 100))
        only = Path(c.snapshot()["file"])
    server.kill()
    only.write_bytes(only.read_bytes()[: only.stat().st_size // 3])
    with pytest.raises(RuntimeError, match="exited with 1"):
        server.start()
    assert "refusing to start" in server.log_path.read_text()
    server.extra_args.append("--allow-empty-start")
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        assert c.tables() == []
        c.ping()
    assert "truncated" in server.log_path.read_text()
    server.stop()
    assert only.exists()  # kept: the empty tables' snapshots never replace it


def _limited_binary(tmp_path: Path, max_file_bytes: int) -> Path:
    """A wrapper that starts replayd with a file-size limit: writes past it fail (EFBIG),
    as on a full disk."""
    wrapper = tmp_path / "replayd-limited"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import os, resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({max_file_bytes}, {max_file_bytes}))\n"
        f"os.execv({str(server_binary())!r}, [{str(server_binary())!r}] + sys.argv[1:])\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def test_a_failed_snapshot_is_reported_and_serving_continues(make_server, tmp_path, monkeypatch):
    data_dir = tmp_path / "data"
    monkeypatch.setenv("REPLAYD_BIN", str(_limited_binary(tmp_path, 1 << 20)))
    server = start(make_server, data_dir)
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("replay", {"obs": ("float32", (1024,))}, capacity=2000)
        c.insert("replay", {"obs": np.ones((10, 1024), np.float32)})
        first = Path(c.snapshot()["file"])  # 40 KiB: fits
        c.insert("replay", {"obs": np.ones((1000, 1024), np.float32)})  # now 4 MiB
        with pytest.raises(replayd.ResourceExhausted, match="File too large"):
            c.snapshot()
        c.ping()
        keys = c.insert("replay", {"obs": np.zeros((2, 1024), np.float32)})
        assert len(keys) == 2 and c.sample("replay", 8) is not None
        assert c.size("replay") == 1012
    assert snapshots_in(data_dir) == [first]
    assert not list(data_dir.glob("*.tmp"))
    assert "snapshot failed" in server.log_path.read_text()


def test_snapshot_without_a_data_dir_is_a_clear_error(server):
    with replayd.Client(server.unix_address, timeout=30) as c:
        with pytest.raises(replayd.InvalidArgument, match="snapshots are disabled.*data_dir"):
            c.snapshot()


def test_other_requests_are_served_while_a_snapshot_is_written(make_server, tmp_path):
    server = start(make_server, tmp_path / "data", "--snapshot-test-pause-ms", "1500")
    with replayd.Client(server.unix_address, timeout=30) as c, \
            replayd.Client(server.unix_address, timeout=30) as other:
        c.create_table("replay", FIELDS, capacity=100)
        done = threading.Event()
        thread = threading.Thread(target=lambda: (c.snapshot(), done.set()))
        thread.start()
        time.sleep(0.2)
        other.insert("replay", items(0, 10))
        other.sample("replay", 4)
        c.ping()  # the same connection too: the snapshot waits without blocking it
        assert not done.is_set(), "the snapshot reply came before its write finished"
        thread.join(timeout=30)
        assert done.is_set()


def test_concurrent_snapshot_requests_share_runs_and_all_get_replies(make_server, tmp_path):
    data_dir = tmp_path / "data"
    server = start(make_server, data_dir, "--snapshot-test-pause-ms", "300")
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("replay", FIELDS, capacity=100)
        futures = [c.connection().submit({"op": "snapshot"}, (), None)[1] for _ in range(6)]
        files = [f.result(timeout=30)["file"] for f in futures]
    # The first starts a run; the five that arrive while it runs share the next one.
    assert len(set(files)) == 2


def _config(tmp_path: Path, **keys: Any) -> Path:
    path = tmp_path / "replayd.json"
    path.write_text(json.dumps(keys))
    return path


def test_periodic_snapshots_appear_and_keep_last_k_prunes(make_server, tmp_path):
    data_dir = tmp_path / "data"
    config = _config(tmp_path, data_dir=str(data_dir), snapshot_interval_s=1, snapshot_keep=2)
    server = make_server(extra_args=["--config", str(config)])
    deadline = time.monotonic() + 15
    while len(snapshots_in(data_dir)) < 2:
        assert time.monotonic() < deadline, "no periodic snapshots"
        time.sleep(0.1)
    with replayd.Client(server.unix_address, timeout=30) as c:
        last = [c.snapshot()["file"] for _ in range(3)][-1]
    files = snapshots_in(data_dir)
    assert len(files) <= 2 and str(files[-1]) >= last


def test_keep_last_k_keeps_exactly_the_newest_k(make_server, tmp_path):
    data_dir = tmp_path / "data"
    config = _config(tmp_path, data_dir=str(data_dir), snapshot_keep=3)
    server = make_server(extra_args=["--config", str(config)])
    with replayd.Client(server.unix_address, timeout=30) as c:
        written = [Path(c.snapshot()["file"]) for _ in range(5)]
    assert snapshots_in(data_dir) == written[-3:]


def test_a_table_whose_config_changed_starts_empty_and_runtime_tables_are_restored(
        make_server, tmp_path):
    data_dir = tmp_path / "data"
    table = {"name": "configured", "capacity": 100,
             "fields": [{"name": "x", "dtype": "float32", "shape": [2]}]}
    config = _config(tmp_path, data_dir=str(data_dir), tables=[table])
    server = make_server(extra_args=["--config", str(config)])
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.insert("configured", {"x": np.ones((5, 2), np.float32)})
        c.create_table("runtime", FIELDS, capacity=50)
        c.insert("runtime", items(0, 7))
        c.snapshot()
    server.kill()
    table["capacity"] = 200
    _config(tmp_path, data_dir=str(data_dir), tables=[table])
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        assert c.size("configured") == 0
        assert c.table_info("configured")["capacity"] == 200
        assert c.size("runtime") == 7
    log = server.log_path.read_text()
    assert "capacity: 100 in the snapshot, 200 in the config" in log
