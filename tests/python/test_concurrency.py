"""Thread safety (one Client shared by threads) and fork safety (a fresh connection in
the child, the parent's untouched)."""
from __future__ import annotations

import multiprocessing
import os
import threading

import numpy as np
import pytest

import replayd


def make(client, name, capacity=10_000):
    client.create_table(name, {"id": (np.int64, ()), "obs": (np.float32, 8)}, capacity)


def items(ids):
    ids = np.asarray(ids, dtype=np.int64)
    return {"id": ids, "obs": np.repeat(ids.astype(np.float32)[:, None], 8, axis=1)}


def check_consistent(sample, key_to_id=None):
    """Each row's obs encodes its id: a reply matched to the wrong request would show."""
    ids = sample.data["id"]
    np.testing.assert_array_equal(sample.data["obs"], np.repeat(ids[:, None], 8, axis=1))
    if key_to_id is not None:  # keys inserted meanwhile by other threads may be unknown yet
        pairs = [(key_to_id[int(k)], i) for k, i in zip(sample.keys, ids.tolist())
                 if int(k) in key_to_id]
        assert all(known == got for known, got in pairs)


def test_threads_share_one_client(client, table_name):
    make(client, table_name)
    keys = client.insert(table_name, items(range(1000)))
    key_to_id = {int(k): i for i, k in enumerate(keys)}
    errors = []

    def sampler(batch):
        try:
            for _ in range(40):
                sample = client.sample(table_name, batch)
                assert len(sample) == batch
                check_consistent(sample, key_to_id)
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)

    def inserter(start):
        try:
            for i in range(20):
                new = client.insert(table_name, items(range(start + 10 * i, start + 10 * i + 10)))
                for k, j in zip(new.tolist(), range(start + 10 * i, start + 10 * i + 10)):
                    key_to_id[k] = j
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=sampler, args=(b,)) for b in (1, 7, 32, 100, 256, 3)]
    threads += [threading.Thread(target=inserter, args=(s,)) for s in (10_000, 20_000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[0]
    assert client.size(table_name) == 1400
    assert client.connection() is client.connection()  # one connection for all threads


def reader_threads():
    return [t for t in threading.enumerate() if t.name.startswith("replayd-reader")]


def test_synchronous_calls_read_their_own_replies_without_a_reader_thread(server):
    before = len(reader_threads())
    with replayd.Client(server.unix_address, timeout=30) as client:
        make(client, "sync_only")
        client.insert("sync_only", items(range(50)))
        check_consistent(client.sample("sync_only", 20))
        assert client.size("sync_only") == 50
        assert len(reader_threads()) == before  # the callers read their replies themselves
        client.insert_async("sync_only", items([50])).result(timeout=30)
        assert len(reader_threads()) == before + 1  # an async call starts the reader


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")
def test_the_reader_thread_never_preempts_the_callers_thread(server):
    # Woken by a reply, a SCHED_BATCH reader waits for the caller's thread to block or its
    # time slice to end: the caller's own policy is left as it was.
    callers_policy = os.sched_getscheduler(0)
    with replayd.Client(server.unix_address, timeout=30) as client:
        make(client, "batch_reader")
        client.insert_async("batch_reader", items([1])).result(timeout=30)
        reader = client.connection()._reader
        assert reader is not None and reader.native_id is not None
        assert os.sched_getscheduler(reader.native_id) == os.SCHED_BATCH
        assert os.sched_getscheduler(0) == callers_policy
        assert client.size("batch_reader") == 1


def test_waiting_callers_hand_over_to_a_reader_thread_started_meanwhile(server):
    with replayd.Client(server.unix_address, timeout=30) as client:
        make(client, "handover")
        client.insert("handover", items(range(100)))
        errors = []
        started = threading.Barrier(5)

        def sample_a_while():
            try:
                started.wait(10)
                for _ in range(200):
                    check_consistent(client.sample("handover", 16))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=sample_a_while) for _ in range(4)]
        for t in threads:
            t.start()
        started.wait(10)
        # Async inserts start the reader thread while the four callers take turns reading.
        futures = [client.insert_async("handover", items([1000 + i])) for i in range(50)]
        assert len({int(f.result(timeout=30)[0]) for f in futures}) == 50
        for t in threads:
            t.join(60)
        assert not errors, errors[0]
        assert client.size("handover") == 150


def test_many_async_requests_in_flight(client, table_name):
    make(client, table_name)
    futures = [client.insert_async(table_name, items([i])) for i in range(200)]
    keys = [int(f.result(timeout=30)[0]) for f in futures]
    assert len(set(keys)) == 200
    samples = [client.sample_async(table_name, 5) for _ in range(100)]
    for future in samples:
        check_consistent(future.result(timeout=30))
    updates = [client.update_priorities_async(table_name, keys[:10], np.ones(10))
               for _ in range(20)]
    assert all(f.result(timeout=30)["applied"] == 10 for f in updates)


def _child_uses_inherited_client(client, table, parent_conn_id, queue):
    try:
        conn = client.connection()
        fresh = id(conn) != parent_conn_id and conn.pid == os.getpid()
        keys = client.insert(table, items([os.getpid()]))
        queue.put(("ok", fresh, int(keys[0])))
    except BaseException as exc:
        queue.put(("error", repr(exc), 0))


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_client_used_in_a_child_process_opens_its_own_connection(client, table_name,
                                                                   method):
    make(client, table_name)
    client.insert(table_name, items([0]))
    parent_conn = client.connection()
    ctx = multiprocessing.get_context(method)
    queue = ctx.Queue()
    child = ctx.Process(target=_child_uses_inherited_client,
                        args=(client, table_name, id(parent_conn), queue))
    child.start()
    status, fresh, key = queue.get(timeout=60)
    child.join(60)
    assert status == "ok", fresh
    assert fresh and child.exitcode == 0
    # The parent's connection was neither used nor shut down by the child.
    assert client.connection() is parent_conn and parent_conn.alive
    assert client.size(table_name) == 2
    assert client.delete(table_name, [key]) == 1


def test_raw_os_fork_with_busy_threads(client, table_name):
    make(client, table_name)
    client.insert(table_name, items(range(10)))
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            client.sample(table_name, 4)

    thread = threading.Thread(target=busy)
    thread.start()
    try:
        pids = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:  # child: the client must work although a parent thread was busy
                code = 1
                try:
                    client.insert(table_name, items([42]))
                    check_consistent(client.sample(table_name, 8))
                    code = 0
                finally:
                    os._exit(code)
            pids.append(pid)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
    finally:
        stop.set()
        thread.join()
    assert client.size(table_name) == 13
    check_consistent(client.sample(table_name, 50))
