"""Client.insert and insert_async through the shared-memory plane (docs/SHM.md, "Batched
inserts") against the real server binary.

What a user relies on: a batch inserted over the plane stores exactly the rows, keys and
priorities the socket stores; the errors, the rate limiter's waits and its timeouts are the
socket's; a connection reuses one staging arena for every call (it never maps one per
call); a batch that is not exactly the table's columns, or too large for the arena, still
goes in (through the socket), as does every call of a TCP or shm=False client.
"""
from __future__ import annotations

import threading
import time
from typing import Dict, List

import numpy as np
import pytest

import replayd
import replayd.client as client_module
from replayd.shm.insert_arena import regions_in_use

FIELDS = {"obs": ("float32", (4,)), "act": ("int64", ()), "rew": ("float32", ()),
          "frame": ("uint8", (3, 5)), "done": ("bool", ())}


def batch(n: int, seed: int) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"obs": rng.standard_normal((n, 4)).astype(np.float32),
            "act": rng.integers(-5, 5, n), "rew": rng.standard_normal(n).astype(np.float32),
            "frame": rng.integers(0, 256, (n, 3, 5), dtype=np.uint8),
            "done": rng.integers(0, 2, n).astype(bool)}


def stored(client: replayd.Client, table: str, page: int = 4096) -> Dict[str, np.ndarray]:
    pages = list(client.read_items(table, page=page))
    return {name: np.concatenate([page[name] for page in pages]) for name in pages[0]}


def plane_arenas(client: replayd.Client) -> int:
    return int(client.server_info()["server"]["plane"]["staging_arenas"])


def test_inserts_over_the_plane_store_what_the_socket_stores(server, table_name):
    plane_table, socket_table = table_name + "-plane", table_name + "-socket"
    with replayd.Client(server.unix_address, timeout=30) as plane, \
            replayd.Client(server.unix_address, timeout=30, shm=False) as socket_client:
        keys: Dict[str, List[np.ndarray]] = {}
        for client, table in ((plane, plane_table), (socket_client, socket_table)):
            client.create_table(table, FIELDS, capacity=500, sampler="prioritized")
            keys[table] = [client.insert(table, batch(64, 1)),
                           client.insert(table, batch(7, 2), priorities=np.arange(7) + 0.5),
                           client.insert(table, {k: v[0] for k, v in batch(1, 3).items()})]
            futures = [client.insert_async(table, batch(33, 10 + i),
                                           priorities=None if i % 2 else np.full(33, i + 1.0))
                       for i in range(20)]  # 760 rows in all: the ring wraps the table
            keys[table] += [f.result(30) for f in futures]
        assert plane._insert_arena is not None and socket_client._insert_arena is None
        for mine, theirs in zip(keys[plane_table], keys[socket_table]):
            np.testing.assert_array_equal(mine, theirs)
        got, want = stored(plane, plane_table), stored(plane, socket_table)
        assert len(got["key"]) == 500
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        for table in (plane_table, socket_table):
            plane.drop_table(table)


def test_a_connection_reuses_one_insert_arena_for_every_call(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, FIELDS, capacity=1000)
        c.insert(table_name, batch(8, 0))
        arena = c._insert_arena
        assert arena is not None
        held = plane_arenas(c)
        futures = [c.insert_async(table_name, batch(64, i)) for i in range(300)]
        for i in range(100):
            c.insert(table_name, batch(16, i))
        for future in futures:
            future.result(30)
        assert c._insert_arena is arena and plane_arenas(c) == held
        assert regions_in_use(arena) == []  # every region free once its reply came


def test_errors_over_the_plane_are_the_sockets(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as plane, \
            replayd.Client(server.unix_address, timeout=30, shm=False) as socket_client:
        plane.create_table(table_name, FIELDS, capacity=100, sampler="prioritized")
        messages = []
        for client in (plane, socket_client):
            client.schema(table_name)
            errors = []
            for data, priorities in (
                    (batch(4, 0), [1.0, -1.0, 1.0, 1.0]),  # staged, refused by the server
                    (batch(4, 0), [1.0, float("nan"), 1.0, 1.0]),
                    ({**batch(4, 0), "act": np.zeros(4, np.float64)}, None),  # not staged
                    ({**batch(4, 0), "obs": np.zeros((4, 5), np.float32)}, None),
                    ({k: v for k, v in batch(4, 0).items() if k != "rew"}, None)):
                for call in (client.insert,
                             lambda *a, **k: client.insert_async(*a, **k).result(30)):
                    with pytest.raises(replayd.ReplayError) as info:
                        call(table_name, data, priorities)
                    errors.append((type(info.value), info.value.code, info.value.message))
            messages.append(errors)
        assert messages[0] == messages[1]
        assert plane.size(table_name) == 0  # nothing stored by any of them
        # A table dropped under a cached schema: the staged request's not_found.
        plane.drop_table(table_name)
        with pytest.raises(replayd.NotFound, match=table_name):
            plane.insert(table_name, batch(4, 0))
        with pytest.raises(replayd.NotFound, match=table_name):
            plane.insert_async(table_name, batch(4, 0)).result(30)


@pytest.mark.parametrize("shm", [None, False], ids=["plane", "socket"])
def test_the_rate_limiter_holds_staged_inserts_as_it_holds_socket_ones(server, table_name, shm):
    with replayd.Client(server.unix_address, timeout=30, shm=shm) as c:
        # Inserts wait for samples once 2 items exist (1 sample per insert, buffer 1).
        c.create_table(table_name, FIELDS, capacity=1000,
                       rate_limiter=replayd.SampleToInsertRatio(1.0, 1, 1.0))
        c.insert(table_name, batch(2, 0))
        with pytest.raises(replayd.TimeoutError, match="rate limiter|sample"):
            c.insert(table_name, batch(4, 1), timeout=0.2)
        with pytest.raises(replayd.TimeoutError, match="rate limiter|sample"):
            c.insert_async(table_name, batch(4, 1), timeout=0.2).result(30)
        assert c.size(table_name) == 2
        parked = c.insert_async(table_name, batch(1, 2), timeout=None)
        time.sleep(0.3)
        assert not parked.done()  # held by the rate limiter (over the plane: in the arena)
        for _ in range(3):  # admitted once samples came
            c.sample(table_name, 1, timeout=5)
            if parked.done():
                break
        assert len(parked.result(30)) == 1 and c.size(table_name) == 3
        assert (c._insert_arena is not None) == (shm is None)
        got = stored(c, table_name)
        np.testing.assert_array_equal(got["frame"][2:], batch(1, 2)["frame"])


def test_a_part_too_large_for_any_arena_goes_through_the_socket(server, table_name,
                                                                monkeypatch):
    monkeypatch.setattr(client_module, "ARENA_BYTES", 64 << 10)
    monkeypatch.setattr(client_module, "MAX_ARENA_BYTES", 128 << 10)
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, FIELDS, capacity=5000)
        small = c.insert(table_name, batch(100, 0))  # 100 rows, 11 KB: staged
        assert c._insert_arena is not None and c._insert_arena.nbytes == 64 << 10
        first = c._insert_arena
        c.insert(table_name, batch(800, 1))  # 85 KB: a larger arena replaces the first
        assert c._insert_arena is not first and c._insert_arena.nbytes == 128 << 10
        large = c.insert(table_name, batch(2000, 2))  # 213 KB: through the socket
        assert len(small) == 100 and len(large) == 2000
        got = stored(c, table_name)
        np.testing.assert_array_equal(got["frame"][900:], batch(2000, 2)["frame"])


def test_tcp_clients_insert_through_the_socket_with_the_same_keys(server, table_name):
    with replayd.Client(server.tcp_address, timeout=30) as tcp:
        tcp.create_table(table_name, FIELDS, capacity=100)
        keys = tcp.insert(table_name, batch(64, 0))
        more = tcp.insert_async(table_name, batch(10, 1)).result(30)
        assert tcp._insert_arena is None and len(keys) == 64 and len(more) == 10
        got = stored(tcp, table_name)
        np.testing.assert_array_equal(got["key"], np.concatenate([keys, more]))
        np.testing.assert_array_equal(got["frame"][64:], batch(10, 1)["frame"])


def test_threads_inserting_at_once_over_the_plane_lose_and_mix_no_row(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, {"id": ("int64", ()), "wide": ("int64", (512,))},
                       capacity=100_000)

        def work(thread: int) -> None:
            for call in range(40):
                ids = thread * 10_000 + call * 50 + np.arange(50)
                data = {"id": ids, "wide": np.repeat(ids[:, None], 512, 1)}
                if call % 2:
                    c.insert(table_name, data)
                else:
                    c.insert_async(table_name, data)
        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        c.insert(table_name, {"id": np.array([-1]), "wide": np.full((1, 512), -1)})
        got = stored(c, table_name)
        assert len(got["id"]) == 4 * 40 * 50 + 1
        np.testing.assert_array_equal(got["wide"], np.repeat(got["id"][:, None], 512, 1))
        assert sorted(got["id"][:-1].tolist()) == sorted(
            t * 10_000 + i for t in range(4) for i in range(2000))


def test_cpprb_adds_of_many_rows_go_through_the_insert_arena(server):
    from replayd.cpprb import PrioritizedReplayBuffer
    rb = PrioritizedReplayBuffer(100, {"obs": {"shape": 4}, "act": {}},
                                 address=server.unix_address)
    for start in range(0, 150, 30):  # batches of 30; the ring wraps
        ids = np.arange(start, start + 30)
        rb.add(obs=np.repeat(ids[:, None], 4, 1), act=ids, priorities=ids + 1.0)
    assert rb._client._insert_arena is not None  # the appends were staged
    assert rb.get_stored_size() == 100
    stored_rows = rb.get_all_transitions()
    act = stored_rows["act"].ravel()
    assert sorted(act.tolist()) == list(range(50, 150))
    np.testing.assert_array_equal(stored_rows["obs"], np.repeat(act[:, None], 4, 1))


@pytest.mark.parametrize("shm", [None, False], ids=["plane", "socket"])
def test_a_dataset_load_stages_its_chunks_and_stores_what_the_socket_stores(server, table_name,
                                                                            shm):
    from replayd.datasets.step_sender import StepSender
    with replayd.Client(server.unix_address, timeout=30, shm=shm) as c:
        c.create_table(table_name, {"obs": ("float32", (3,)), "rew": ("float32", ())}, 10_000,
                       episodic=True, reward="rew")
        sender = StepSender(c, table_name)
        episodes = sender.open_episodes(3)
        for chunk in range(4):  # 3 episodes of 40 steps, 10 per chunk, interleaved
            ids = np.repeat(np.array(episodes, np.uint64), 10)
            t = chunk * 10 + np.tile(np.arange(10), 3)
            value = (1000 * np.repeat(np.arange(3), 10) + t).astype(np.float32)
            ends = [(e, i % 2 == 0, None) for i, e in enumerate(episodes)] if chunk == 3 else []
            sender.send({"obs": np.repeat(value[:, None], 3, 1), "rew": value}, ids, ends)
        sender.flush()
        assert (sender._arena is not None) == (shm is None)
        sender.close()
        got = list(c.episodes(table_name))
        assert [len(e["rew"]) for e in got] == [40, 40, 40]
        for i, e in enumerate(got):
            np.testing.assert_array_equal(e["rew"], 1000 * i + np.arange(40, dtype=np.float32))
            np.testing.assert_array_equal(e["obs"], np.repeat(e["rew"][:, None], 3, 1))
            assert int(e["end"][-1]) == (1 if i % 2 == 0 else 2)


def _config(limits: Dict[str, int]) -> str:
    import json
    import tempfile
    from pathlib import Path
    path = Path(tempfile.mkdtemp(prefix="replayd-config-")) / "config.json"
    path.write_text(json.dumps({"limits": limits}))
    return str(path)


def test_a_batch_over_max_batch_items_is_split_over_the_plane_as_through_the_socket(
        make_server):
    server = make_server(extra_args=["--config", _config({"max_batch_items": 100})])
    with replayd.Client(server.unix_address, timeout=30) as plane, \
            replayd.Client(server.unix_address, timeout=30, shm=False) as socket_client:
        for client, table in ((plane, "plane"), (socket_client, "socket")):
            client.create_table(table, FIELDS, capacity=1000)
            keys = client.insert(table, batch(250, 1))  # 3 requests of at most 100
            more = client.insert_async(table, batch(150, 2)).result(30)
            assert len(keys) == 250 and len(more) == 150
        assert plane._insert_arena is not None
        got, want = stored(plane, "plane", 100), stored(plane, "socket", 100)
        for name in want:  # keys too: both tables fill their slots in the same order
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_inserts_go_through_the_socket_when_the_server_grants_no_arena(make_server):
    server = make_server(extra_args=["--config",
                                     _config({"max_staging_arenas_per_connection": 0})])
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("t", FIELDS, capacity=1000)
        keys = c.insert("t", batch(64, 0))
        more = c.insert_async("t", batch(64, 1)).result(30)
        assert c._insert_arena is None and c._insert_arena_refused is c.connection()
        assert len(keys) == 64 and len(more) == 64
        np.testing.assert_array_equal(stored(c, "t")["obs"][64:], batch(64, 1)["obs"])
