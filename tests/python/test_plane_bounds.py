"""The shared-memory plane's trust boundary (docs/SECURITY.md), against the real binary, as a
hostile or buggy client of the server's own uid would try it.

What a user relies on: one client looping map_staging or unread map_table requests is
refused by name while the server's descriptors stay bounded and every other client is
served (hello within 100 ms, snapshots, new tables on the plane); a table's mapping cannot be
made writable by anyone but the server, through any descriptor of it; a snapshot reply says
how many items it saved and how many it dropped; memory held through arenas and through
mappings of dropped tables is counted in info and the metrics.
"""
from __future__ import annotations

import json
import mmap
import os
import socket
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import replayd
from replayd.shm.insert_arena import ARENA_BYTES
from conftest import ServerProcess

FIELDS = {"x": ("float32", (4,)), "id": ("int64", ())}
METRICS = ["--metrics", "127.0.0.1:0"]


def descriptors_of(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def config_file(config: Dict[str, Any]) -> str:
    path = Path(tempfile.mkdtemp(prefix="replayd-config-")) / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def hello_ms(address: str) -> float:
    """A new client's first round trip (connect, hello, ping), in milliseconds."""
    started = time.perf_counter()
    with replayd.Client(address, timeout=5) as c:
        c.ping()
    return (time.perf_counter() - started) * 1e3


def submit(conn: Any, meta: Dict[str, Any]) -> Any:
    return conn.submit(meta, caller_waits=True)


def test_one_client_looping_map_staging_is_refused_and_locks_nobody_out(make_server, tmp_path):
    server = make_server(extra_args=["--data-dir", str(tmp_path / "data")])
    pid = server.proc.pid
    before = descriptors_of(pid)
    with replayd.Client(server.unix_address, timeout=30) as hostile:
        conn = hostile.open_connection(shm=True)
        received: List[int] = []
        refusal = None
        hello_times: List[float] = []
        for i in range(20_000):
            request_id, future = submit(conn, {"op": "map_staging", "bytes": 1})
            try:
                meta = conn.wait(request_id, future, 30)
            except replayd.ResourceExhausted as error:
                refusal = error
                break
            received.extend(meta["descriptors"])
            if i % 16 == 0:
                hello_times.append(hello_ms(server.unix_address))
        try:
            assert refusal is not None, "20,000 one-byte arenas were all granted"
            assert "max_staging_arenas_per_connection" in str(refusal)
            # The server keeps no descriptor per arena: its count did not grow with them.
            assert descriptors_of(pid) < before + 16
            assert max(hello_times) < 100, f"a new client's hello took {max(hello_times):.1f} ms"
            with replayd.Client(server.unix_address, timeout=30) as other:
                other.create_table("fresh", FIELDS, 64)
                assert other.table_info("fresh")["shared_memory"] is True
                other.insert("fresh", {"x": np.ones((8, 4), np.float32),
                                       "id": np.arange(8)})
                assert other.snapshot()["items"] == 8
                plane = other.info()["server"]["plane"]
                page = os.sysconf("SC_PAGE_SIZE")
                # Arenas count in whole pages, however few bytes they asked for; the
                # other client's insert went through its one insert arena.
                assert plane["staging_arenas"] == len(received) + 1
                assert plane["staging_bytes"] == len(received) * page + ARENA_BYTES
        finally:
            for fd in received:
                os.close(fd)
            conn.close()
    with replayd.Client(server.unix_address, timeout=30) as after:
        assert after.info()["server"]["plane"]["staging_arenas"] == 0


def test_unread_map_table_replies_are_bounded_and_others_are_served(make_server):
    server = make_server(extra_args=["--config", config_file(
        {"limits": {"max_unread_descriptors_per_connection": 32}})])
    pid = server.proc.pid
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("t", FIELDS, 64)
    before = descriptors_of(pid)
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(server.ready["unix"])
    try:
        from raw_wire import frame
        raw.sendall(frame({"op": "hello"}))
        # 60,000 map_table requests whose replies are never read.
        batch = b"".join(frame({"op": "map_table", "table": "t"}, request_id=i + 2)
                         for i in range(1000))
        raw.setblocking(False)
        sent = 0
        deadline = time.monotonic() + 20
        while sent < 60 and time.monotonic() < deadline:
            try:
                raw.sendall(batch)
                sent += 1
            except BlockingIOError:
                break  # the server stopped reading: its budget holds
            assert hello_ms(server.unix_address) < 100
        time.sleep(0.5)
        assert descriptors_of(pid) < before + 64, "queued replies hold the server's descriptors"
        assert hello_ms(server.unix_address) < 100
        with replayd.Client(server.unix_address, timeout=30) as other:
            other.create_table("fresh", FIELDS, 64)
            assert other.table_info("fresh")["shared_memory"] is True
            assert other.info()["server"]["plane"]["queued_descriptors"] <= 32
    finally:
        raw.close()


def test_a_table_mapping_cannot_be_made_writable_through_any_descriptor(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, FIELDS, 16)
        c.insert(table_name, {"x": np.ones((16, 4), np.float32), "id": np.arange(16)})
        meta = c.connection().call({"op": "map_table", "table": table_name})
        fd = meta["descriptors"][0]
        size = meta["bytes"]
        paths = [f"/proc/self/fd/{fd}"]
        # The server's own descriptor of the block (its memfd), as any process of the uid sees it.
        server_fds = f"/proc/{server.proc.pid}/fd"
        for name in os.listdir(server_fds):
            try:
                target = os.readlink(f"{server_fds}/{name}")
            except OSError:
                continue
            if target.startswith(f"/memfd:replayd table {table_name}"):
                paths.append(f"{server_fds}/{name}")
        # The server may still hold the descriptor it reopened for the reply a moment after the
        # reply arrived (it closes it once written): one or two server paths, each tested.
        assert len(paths) >= 2, "the server's memfd of the table was not found"
        tested = 0
        try:
            for path in paths:
                try:
                    writable = os.open(path, os.O_RDWR)
                except FileNotFoundError:
                    continue  # the reply's reopened descriptor closed meanwhile
                tested += 1
                try:
                    with pytest.raises(PermissionError):
                        mmap.mmap(writable, size, flags=mmap.MAP_SHARED,
                                  prot=mmap.PROT_READ | mmap.PROT_WRITE)
                    with pytest.raises(PermissionError):
                        os.pwrite(writable, b"\0" * 8, 0)
                finally:
                    os.close(writable)
        finally:
            os.close(fd)
        assert tested >= 2, "neither the client's nor the server's descriptor was tested"
        sample = c.sample(table_name, 64)
        np.testing.assert_array_equal(sample.data["x"], np.ones((64, 4), np.float32))


def test_a_snapshot_reply_gives_items_saved_and_dropped(make_server, tmp_path):
    data_dir = tmp_path / "data"
    server = make_server(extra_args=["--data-dir", str(data_dir), "--snapshot-test-pause-ms",
                                     "800"] + METRICS)
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("t", FIELDS, 100, remover="fifo")
        c.insert("t", {"x": np.ones((100, 4), np.float32), "id": np.arange(100)})
        done: List[Any] = []
        snap = threading.Thread(target=lambda: done.append(c.snapshot()), daemon=True)
        snap.start()
        time.sleep(0.3)  # the child is paused after the header: overwrite every slot now
        with replayd.Client(server.unix_address, timeout=30) as writer:
            writer.insert("t", {"x": np.zeros((100, 4), np.float32),
                                "id": np.arange(1000, 1100)})
        snap.join(30)
        assert done, "the snapshot did not finish"
        assert done[0]["items"] == 0
        assert done[0]["items_dropped"] == 100
        metrics = urllib.request.urlopen(
            f"http://{server.ready['metrics']}/metrics", timeout=10).read().decode()
        assert "replayd_last_snapshot_items_saved 0" in metrics
        assert "replayd_last_snapshot_items_dropped 100" in metrics
    assert "0 items saved, 100 dropped" in server.log_path.read_text()
    server.kill()
    server.extra_args = ["--data-dir", str(data_dir)] + METRICS
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        assert c.size("t") == 0


def test_memory_held_through_dropped_tables_mappings_is_counted(make_server):
    server = make_server(extra_args=["--config", config_file({"limits": {"max_tables": 2}})]
                         + METRICS)
    with replayd.Client(server.unix_address, timeout=30) as holder:
        blocks = 0
        for i in range(5):
            name = f"big{i}"
            holder.create_table(name, {"x": ("float32", (1024,))}, 1024)
            meta = holder.connection().call({"op": "map_table", "table": name})
            os.close(meta["descriptors"][0])  # a client that keeps it mapped holds the memory
            blocks += meta["bytes"]
            holder.drop_table(name)
        info = holder.info()
        assert info["tables"] == []
        assert info["server"]["plane"]["dropped_table_bytes_mapped"] == blocks
        metrics = urllib.request.urlopen(
            f"http://{server.ready['metrics']}/metrics", timeout=10).read().decode()
        assert f"replayd_plane_dropped_table_bytes_mapped {blocks}" in metrics
    with replayd.Client(server.unix_address, timeout=30) as after:
        assert after.info()["server"]["plane"]["dropped_table_bytes_mapped"] == 0
