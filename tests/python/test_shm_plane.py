"""The shared-memory data plane (docs/SHM.md) against the real server binary.

What a user relies on: the plane gives exactly what the socket gives (same draws, same
rows) under the same seed; a writer overwriting a small table while learners gather never
yields a torn or stale row; a writer killed with staged batches leaves no arena and no
half-written item behind; a TCP client or a client of another uid never gets the plane;
staged requests that name bytes outside their arena are refused by name; a replaced table
is mapped again; a snapshot taken while its slots are overwritten restores only whole
items.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import replayd
from conftest import REPO, ServerProcess

CTX = mp.get_context("fork")
WIDE = 1024  # float32 values per row of the wide field: 4 KiB


def fields() -> Dict[str, Any]:
    """A row whose every value derives from its id, so a torn or foreign row shows: a
    wide field, a small one and a check."""
    return {"id": ("int64", ()), "wide": ("float32", (WIDE,)), "small": ("float32", (4,)),
            "check": ("uint64", ())}


def rows(ids: np.ndarray) -> Dict[str, np.ndarray]:
    ids = np.asarray(ids, dtype=np.int64)
    wide = (ids[:, None] % 65521 + np.arange(WIDE, dtype=np.int64)).astype(np.float32)
    small = (ids[:, None] * 3 + np.arange(4)).astype(np.float32)
    return {"id": ids, "wide": wide, "small": small,
            "check": (ids.astype(np.uint64) * np.uint64(2654435761)) ^ np.uint64(0x5bd1e995)}


def assert_whole(data: Dict[str, np.ndarray]) -> None:
    """Every row is exactly the item its id names."""
    expected = rows(data["id"])
    for name, values in expected.items():
        np.testing.assert_array_equal(data[name], values, err_msg=f"field {name}")


# The column list of an insert of one row.
COLUMNS_OF_ONE = [{"name": "id", "dtype": "int64", "shape": [1]},
                  {"name": "wide", "dtype": "float32", "shape": [1, WIDE]},
                  {"name": "small", "dtype": "float32", "shape": [1, 4]},
                  {"name": "check", "dtype": "uint64", "shape": [1]}]


def create(client: replayd.Client, name: str, capacity: int, **options: Any) -> None:
    client.create_table(name, fields(), capacity=capacity, remover="fifo",
                        rate_limiter=options.pop("rate_limiter", replayd.MinSize(1)),
                        **options)


def test_the_plane_is_offered_on_the_unix_socket_and_used_by_default(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        create(c, table_name, 100)
        assert c.shm_enabled()
        assert c.plane_table(table_name) is not None
        with c.writer(table_name) as writer:
            assert writer.staged
            for i in range(10):
                writer.append({k: v[0] for k, v in rows([i]).items()})
        assert c.size(table_name) == 10
        info = c.info()["server"]
        assert info["shared_memory"] is True


@pytest.mark.parametrize("sampler", ["uniform", "prioritized"])
def test_plane_and_socket_draw_identical_samples_under_the_same_seed(server, table_name, sampler):
    plane = replayd.Client(server.unix_address, timeout=30, shm=True)
    socket = replayd.Client(server.unix_address, timeout=30, shm=False)
    names = [f"{table_name}-plane", f"{table_name}-socket"]
    for client, name in zip((plane, socket), names):
        create(client, name, 300, sampler=sampler, seed=11)
        for first in (0, 250):  # the first 200 evicted
            client.insert(name, rows(np.arange(first, first + 250)))
    assert plane.plane_table(names[0]) is not None
    assert socket.plane_table(names[1]) is None

    def same(a: replayd.Sample, b: replayd.Sample) -> None:
        for attr in ("keys", "probabilities", "weights", "times_sampled"):
            np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr), err_msg=attr)
        assert a.data.keys() == b.data.keys()
        for name in a.data:
            np.testing.assert_array_equal(a.data[name], b.data[name], err_msg=name)
        assert_whole(a.data)

    for n in (1, 7, 256):
        same(plane.sample(names[0], n), socket.sample(names[1], n))
    for client, name in zip((plane, socket), names):  # the same updates on both
        keys = client.sample(name, 64).keys
        client.update_priorities(name, keys, np.linspace(0.1, 5, 64))
    same(plane.sample(names[0], 32), socket.sample(names[1], 32))
    same(plane.sample_async(names[0], 16).result(), socket.sample_async(names[1], 16).result())
    buffers = [np.zeros(plane.sample_nbytes(names[0], 8), np.uint8) for _ in range(2)]
    a = plane.sample_into(names[0], buffers[0], 8)
    b = socket.sample_into(names[1], buffers[1], 8)
    same(a, b)
    assert np.shares_memory(a.data["wide"], buffers[0])
    np.testing.assert_array_equal(buffers[0], buffers[1])  # laid out as the socket reply
    # Samplers draw ahead by different amounts, so each pair samples tables of its own.
    # Batches of 16 are gathered one by one when taken; batches of 4 (a reply of 8 comes
    # to 130 KiB) a reply at a time, on its arrival (shm/prefetch.py).
    for batch in (16, 4):
        pair = [f"{name}-{batch}" for name in names]
        for client, name in zip((plane, socket), pair):
            create(client, name, 300, sampler=sampler, seed=12)
            client.insert(name, rows(np.arange(300)))
        with plane.sampler(pair[0], batch, prefetch=4) as left, \
                socket.sampler(pair[1], batch, prefetch=4) as right:
            for _ in range(20):
                same(next(left), next(right))
    plane.close()
    socket.close()


def _hammer(address: str, table: str, seconds: float) -> int:
    """An explorer inserting items with increasing ids as fast as it can (staged)."""
    with replayd.Client(address, timeout=60) as c:
        next_id = 1000
        end = time.monotonic() + seconds
        with c.writer(table, batch=8, max_in_flight=4) as writer:
            assert writer.staged
            while time.monotonic() < end:
                item = rows([next_id])
                writer.append({k: v[0] for k, v in item.items()})
                next_id += 1
    return next_id - 1000


def _learn(address: str, table: str, seconds: float) -> Tuple[int, int]:
    """A learner gathering over the plane: (rows checked, rows that changed under the copy
    and were drawn again)."""
    checked = 0
    with replayd.Client(address, timeout=60, shm=True) as c:
        plane = c.plane_table(table)
        assert plane is not None
        end = time.monotonic() + seconds
        # Batches of 32 are gathered when taken, batches of 4 a reply (of 8) at a time.
        with c.sampler(table, 32, prefetch=4) as batches, \
                c.sampler(table, 4, prefetch=4) as small_batches:
            while time.monotonic() < end:
                assert_whole(next(batches).data)
                assert_whole(next(small_batches).data)
                checked += 36
        while time.monotonic() < end + seconds / 4:  # synchronous samples too
            assert_whole(c.sample(table, 32).data)
            checked += 32
        return checked, c.plane_table(table).changed_rows  # type: ignore[union-attr]


def test_a_writer_hammering_a_small_table_never_yields_a_torn_or_stale_row(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        create(c, table_name, 16)
        c.insert(table_name, rows(np.arange(16)))
    with CTX.Pool(3) as pool:
        writer = pool.apply_async(_hammer, (server.unix_address, table_name, 4.0))
        learners = [pool.apply_async(_learn, (server.unix_address, table_name, 3.0))
                    for _ in range(2)]
        inserted = writer.get(timeout=120)
        results = [learner.get(timeout=120) for learner in learners]
    assert inserted > 1000
    assert all(checked > 1000 for checked, _ in results)
    # The race the stamps guard against happened (rows were overwritten while copied) and
    # no such row was accepted (assert_whole above).
    assert sum(changed for _, changed in results) > 0


def _stage_and_die(address: str, table: str, ready: Any) -> None:
    """Stages batches whose inserts the table's rate limiter holds back, then dies by
    SIGKILL, its requests parked and its arena holding rows."""
    c = replayd.Client(address, timeout=60)
    writer = c.writer(table, batch=4, max_in_flight=4)
    assert writer.staged
    for i in range(14):  # three batches sent (parked), two rows written in the next
        writer.append({k: v[0] for k, v in rows([5000 + i]).items()})
    ready.set()
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_writer_killed_with_staged_batches_leaks_no_arena_and_stores_no_part(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        # Four inserts admitted, then inserts wait for samples (one sample per insert).
        create(c, table_name, 64, rate_limiter=replayd.SampleToInsertRatio(
            1.0, min_size_to_sample=1, error_buffer=4))
        c.insert(table_name, rows(np.arange(4)))
        staged_before = c.info()["server"]["staging_bytes"]
        ready = CTX.Event()
        child = CTX.Process(target=_stage_and_die, args=(server.unix_address, table_name, ready))
        child.start()
        assert ready.wait(30)
        child.join(30)
        assert child.exitcode == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while c.info()["server"]["staging_bytes"] != staged_before:
            assert time.monotonic() < deadline, "the dead writer's arena was not released"
            time.sleep(0.05)
        # What was stored is whole; nothing of the dead writer's parked batches arrives.
        size = c.size(table_name)
        assert size >= 4
        assert_whole(c.sample(table_name, 4).data)
        time.sleep(0.3)
        assert c.size(table_name) == size


def test_a_tcp_client_never_gets_the_plane(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        create(c, table_name, 10)
        c.insert(table_name, rows(np.arange(10)))
    with replayd.Client(server.tcp_address, timeout=30) as tcp:
        assert not tcp.shm_enabled()
        assert tcp.plane_table(table_name) is None
        with tcp.writer(table_name) as writer:
            assert not writer.staged
        assert_whole(tcp.sample(table_name, 8).data)
        conn = tcp.connection()
        assert not conn.shm_offered
        with pytest.raises(replayd.PermissionDenied, match="Unix sockets only"):
            conn.call({"op": "map_table", "table": table_name})
        with pytest.raises(replayd.PermissionDenied, match="Unix sockets only"):
            conn.call({"op": "map_staging", "bytes": 4096})
        with pytest.raises(replayd.PermissionDenied, match="data plane"):
            conn.call({"op": "insert", "table": table_name, "n": 1, "columns": COLUMNS_OF_ONE,
                       "staged": {"arena": 1, "offset": 0}})
    with pytest.raises(replayd.PermissionDenied, match="Unix sockets only"):
        replayd.Client(server.tcp_address, timeout=30, shm=True).sample(table_name, 1)


def test_a_client_of_another_uid_never_gets_the_plane(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to run a client as another user")
    import tempfile
    workdir = Path(tempfile.mkdtemp(prefix="replayd-uid-"))  # reachable by any user
    workdir.chmod(0o755)
    config = workdir / "config.json"
    config.write_text(json.dumps({"listen": {"unix_mode": "0666"}}))
    server = ServerProcess(workdir, tcp=False, extra_args=["--config", str(config)]).start()
    try:
        _as_another_user(server)
    finally:
        server.stop()


def _as_another_user(server: ServerProcess) -> None:
    with replayd.Client(server.unix_address, timeout=30) as c:
        create(c, "t", 10)
        c.insert("t", rows(np.arange(10)))
    code = f"""
import json, sys
sys.path.insert(0, {str(REPO / 'client' / 'python')!r})
import replayd
c = replayd.Client({server.unix_address!r}, timeout=30)
conn = c.connection()
out = {{"uid_offered": conn.shm_offered, "reason": conn.shm_reason,
        "plane": c.plane_table("t") is not None, "rows": int(len(c.sample("t", 4)))}}
try:
    conn.call({{"op": "map_table", "table": "t"}})
    out["map"] = "mapped"
except replayd.PermissionDenied as exc:
    out["map"] = str(exc)
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", code], user=65534, group=65534,
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["uid_offered"] is False
    assert "server's uid (0)" in out["reason"] and "65534" in out["reason"]
    assert out["plane"] is False and out["rows"] == 4
    assert "server's uid" in out["map"]


def test_staged_requests_naming_bytes_outside_their_arena_are_refused_by_name(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        create(c, table_name, 10)
        conn, arena = c.staging_arena(8192)

        def insert(staged: Dict[str, Any], *buffers: Any) -> Any:
            meta = {"op": "insert", "table": table_name, "n": 1, "columns": COLUMNS_OF_ONE,
                    "staged": staged}
            request_id, future = conn.submit(meta, buffers, caller_waits=True)
            return conn.wait(request_id, future, 30)

        # One row takes 8 + 4096 + 16 + 8 = 4128 bytes: it fits up to offset 4064.
        assert insert({"arena": arena.id, "offset": 0})["n"] == 1
        assert insert({"arena": arena.id, "offset": 4064})["n"] == 1
        with pytest.raises(replayd.InvalidArgument, match="past the end of the arena's 8192"):
            insert({"arena": arena.id, "offset": 4072})
        with pytest.raises(replayd.InvalidArgument, match="multiple of 8"):
            insert({"arena": arena.id, "offset": 4})
        with pytest.raises(replayd.InvalidArgument, match="no staging arena 99"):
            insert({"arena": 99, "offset": 0})
        with pytest.raises(replayd.InvalidArgument, match="rows: must be between n"):
            insert({"arena": arena.id, "offset": 0, "rows": 0})
        with pytest.raises(replayd.InvalidArgument, match="carries no payload"):
            insert({"arena": arena.id, "offset": 0}, np.zeros(8, np.uint8))
        with pytest.raises(replayd.InvalidArgument, match="unknown key"):
            insert({"arena": arena.id, "offset": 0, "length": 3})
        with pytest.raises(replayd.InvalidArgument, match="between 1 and"):
            conn.call({"op": "map_staging", "bytes": 1 << 40})
        c.unmap_staging(conn, arena)
        with pytest.raises(replayd.InvalidArgument, match="no staging arena"):
            conn.call({"op": "unmap_staging", "arena": arena.id})
        assert c.size(table_name) == 2


def test_staging_arenas_are_bounded_per_connection_and_sealed(make_server):
    server = make_server(extra_args=["--config", _config(make_server, {
        "limits": {"max_staging_bytes_per_connection": 1 << 20}})])
    with replayd.Client(server.unix_address, timeout=30) as c:
        conn, arena = c.staging_arena(600_000)
        with pytest.raises(replayd.ResourceExhausted, match="max_staging_bytes_per_connection"):
            c.staging_arena(600_000)
        request_id, future = conn.submit({"op": "map_staging", "bytes": 4096}, caller_waits=True)
        meta = conn.wait(request_id, future, 30)
        fd = meta["descriptors"][0]
        try:  # the server sealed it: nobody can shrink it under the server's mapping
            with pytest.raises(PermissionError):
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)
        c.unmap_staging(conn, arena)
        c.staging_arena(600_000)  # room again


@pytest.mark.parametrize("limits", [
    {"max_staging_bytes_per_connection": 256},  # no arena fits: every writer is refused
    {"max_staging_bytes": 256 << 10},  # the first writer's arena fits, the next ones not
])
def test_writers_whose_arena_the_server_refuses_write_through_the_socket(make_server, limits):
    server = make_server(extra_args=["--config", _config(make_server, {"limits": limits})])
    name = "refused"
    with replayd.Client(server.unix_address, timeout=30) as c:
        create(c, name, 1000)
        c.create_table("steps", {"obs": ("float32", (3,)), "rew": ("float32", ())}, 1000,
                       episodic=True, reward="rew")
        first = c.writer(name, batch=8, max_in_flight=2)  # 3 slots of 8 rows: about 100 KB
        episodes = c.episode_writer("steps", batch=64, max_in_flight=1024)  # about 2 MB
        second = c.writer(name, batch=512, max_in_flight=64)  # about 140 MB
        assert first.staged == ("max_staging_bytes" in limits)
        assert not second.staged and episodes._steps._slots is None
        for writer, ids in ((first, range(0, 30)), (second, range(100, 130))):
            with writer:
                for i in ids:
                    writer.append({k: v[0] for k, v in rows(np.array([i])).items()})
        with episodes:
            for t in range(70):
                episodes.append(0, obs=np.full(3, t, np.float32), rew=float(t))
        stored = c.sample(name, 2000)
        assert_whole(stored.data)
        assert set(stored.data["id"].tolist()) == set(range(0, 30)) | set(range(100, 130))
        steps = c.read_episodes("steps")
        assert steps["rew"].tolist() == [float(t) for t in range(70)]
        np.testing.assert_array_equal(steps["obs"], np.repeat(steps["rew"][:, None], 3, 1))


def _config(make_server: Any, config: Dict[str, Any]) -> str:
    import tempfile
    path = Path(tempfile.mkdtemp(prefix="replayd-config-")) / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def test_a_table_mapping_is_read_only(server, table_name):
    import mmap
    with replayd.Client(server.unix_address, timeout=30) as c:
        create(c, table_name, 10)
        meta = c.connection().call({"op": "map_table", "table": table_name})
        fd = meta["descriptors"][0]
        try:
            with pytest.raises(PermissionError):
                mmap.mmap(fd, meta["bytes"], flags=mmap.MAP_SHARED,
                          prot=mmap.PROT_READ | mmap.PROT_WRITE)
            with pytest.raises(OSError):
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)


def test_a_key_naming_a_slot_beyond_the_capacity_is_refused_not_read(server, table_name):
    # The learner trusts no slot it is told: a corrupt reply must not read another
    # column's bytes (or past the block) as this one's rows.
    with replayd.Client(server.unix_address, timeout=30) as c:
        create(c, table_name, 10)
        c.insert(table_name, rows(np.arange(10)))
        mapping = c.plane_table(table_name).mapping
        sample = c.sample(table_name, 4)
        out = {name: np.zeros((4, *column.shape[1:]), column.dtype)
               for name, column in mapping.columns.items()}
        assert mapping.gather(sample.keys, out).size == 0
        assert_whole(out)
        forged = sample.keys.copy()
        forged[1] = (forged[1] & ~mapping.slot_mask) | np.uint64(10)
        with pytest.raises(replayd.ProtocolError, match="beyond its capacity 10"):
            mapping.gather(forged, out)


def test_a_replaced_table_is_mapped_again(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        create(c, table_name, 10)
        c.insert(table_name, rows(np.arange(10)))
        first = c.plane_table(table_name)
        assert_whole(c.sample(table_name, 8).data)
        c.drop_table(table_name)
        create(c, table_name, 20)
        c.insert(table_name, rows(np.arange(100, 120)))
        data = c.sample(table_name, 64).data
        assert_whole(data)
        assert data["id"].min() >= 100
        assert c.plane_table(table_name) is not first


def test_a_snapshot_taken_while_slots_are_overwritten_restores_only_whole_items(make_server,
                                                                                tmp_path):
    data_dir = tmp_path / "data"
    server = make_server(extra_args=["--data-dir", str(data_dir), "--snapshot-test-pause-ms",
                                     "800"])
    with replayd.Client(server.unix_address, timeout=30) as c:
        create(c, "t", 200)
        c.insert("t", rows(np.arange(200)))
        done: List[Any] = []
        import threading
        snap = threading.Thread(target=lambda: done.append(c.snapshot()), daemon=True)
        snap.start()
        time.sleep(0.3)  # the child is paused after the header: overwrite 50 slots now
        with replayd.Client(server.unix_address, timeout=30) as writer:
            writer.insert("t", rows(np.arange(1000, 1050)))
        snap.join(30)
        assert done, "the snapshot did not finish"
    server.kill()  # no final snapshot: the one taken under the overwrites is restored
    server.extra_args = ["--data-dir", str(data_dir)]
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        ids = np.sort(c.sample("t", 4000).data["id"])
        assert_whole(c.sample("t", 256).data)
        # The 50 oldest were overwritten after the fork: dropped, not restored torn.
        assert c.size("t") == 150
        assert set(np.unique(ids)) <= set(range(50, 200))


def test_a_keys_sample_of_several_batches_draws_only_what_the_rate_limiter_admits(server,
                                                                                  table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        # 10 inserts allow 10 + 6 samples at one sample per insert (error buffer 12).
        create(c, table_name, 64, rate_limiter=replayd.SampleToInsertRatio(
            1.0, min_size_to_sample=1, error_buffer=12))
        c.insert(table_name, rows(np.arange(10)))
        conn = c.connection()
        reply = conn.call({"op": "sample", "table": table_name, "n": 4, "rows": "keys",
                           "batches": 8, "timeout_ms": 0})
        # Fewer than 8 batches: only as many as the limiter admits now, at least one.
        batches = reply["batches"]
        assert reply["rows"] == "keys" and 1 <= batches < 8 and reply["n"] == 4 * batches
        assert [column["name"] for column in reply["columns"]] == [
            "key", "probability", "weight", "times_sampled", "slot"]
        assert isinstance(reply["region"], int)
        assert c.table_info(table_name)["counters"]["samples"] == 4 * batches
        with pytest.raises(replayd.TimeoutError):  # the limiter admits no further batch
            conn.call({"op": "sample", "table": table_name, "n": 4, "rows": "keys",
                       "batches": 8, "timeout_ms": 0})
        with pytest.raises(replayd.InvalidArgument, match="needs a plain sample"):
            conn.call({"op": "sample", "table": table_name, "n": 4, "rows": "keys",
                       "nstep": 2})
        with pytest.raises(replayd.InvalidArgument, match="rows"):
            conn.call({"op": "sample", "table": table_name, "n": 4, "rows": "all"})
        with pytest.raises(replayd.ResourceExhausted, match="max_batch_items"):
            conn.call({"op": "sample", "table": table_name, "n": 4, "batches": 1 << 20})


def test_a_queue_is_sampled_through_the_socket(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_queue(table_name, fields(), 8)
        assert c.plane_table(table_name) is None  # a redraw would take another item
        c.insert(table_name, rows(np.arange(4)))
        assert c.sample(table_name, 2).data["id"].tolist() == [0, 1]
        conn = c.connection()
        with pytest.raises(replayd.InvalidArgument, match="max_times_sampled"):
            conn.call({"op": "sample", "table": table_name, "n": 1, "rows": "keys"})
        with pytest.raises(replayd.InvalidArgument, match="retires its items"):
            conn.call({"op": "map_table", "table": table_name})


def test_an_episode_writer_stages_its_steps_and_they_read_back_exactly(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, {"obs": ("float32", (3,)), "rew": ("float32", ())}, 1000,
                       episodic=True, reward="rew")
        with c.episode_writer(table_name, envs=2, batch=8, max_in_flight=2) as writer:
            for t in range(50):
                for env in (0, 1):
                    step = 1000 * env + t
                    writer.append(env, obs=np.full(3, step, np.float32), rew=float(step))
                if t % 20 == 19:
                    writer.end_episode(0, terminated=True)
            assert writer._steps._slots is not None  # the steps went through the arena
        episodes = c.read_episodes(table_name)
        assert len(episodes["rew"]) == 100
        for i in range(len(episodes["offsets"]) - 1):
            rows = slice(episodes["offsets"][i], episodes["offsets"][i + 1])
            rew = episodes["rew"][rows]
            np.testing.assert_array_equal(episodes["obs"][rows], np.repeat(rew[:, None], 3, 1))
            assert (np.diff(rew) == 1).all()  # each episode's steps in order
        assert sorted(np.diff(episodes["offsets"]).tolist()) == [10, 20, 20, 50]


def test_cpprb_adds_are_staged_and_its_samples_gathered(server):
    from replayd.cpprb import ReplayBuffer
    rb = ReplayBuffer(100, {"obs": {"shape": 4}, "act": {}, "next_obs": {"shape": 4}},
                      address=server.unix_address)
    for i in range(150):  # the ring wraps
        rb.add(obs=np.full(4, i), act=i, next_obs=np.full(4, i + 1))
    writers = [value for value in vars(rb).values() if isinstance(value, replayd.Writer)]
    assert writers and all(writer.staged for writer in writers)
    assert rb.get_stored_size() == 100
    sample = rb.sample(64)
    act = sample["act"].ravel()
    assert act.min() >= 50
    np.testing.assert_array_equal(sample["obs"], np.repeat(act[:, None], 4, 1))
    np.testing.assert_array_equal(sample["next_obs"], np.repeat(act[:, None] + 1, 4, 1))
