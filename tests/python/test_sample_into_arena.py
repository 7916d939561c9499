"""Plain samples whose rows the server writes into the learner's staging arena ("into",
docs/SHM.md, "Rows into the learner's arena") against the real server: a table the client
cannot map (a file tier, a queue) is sampled by `sample`, `sample_async` and the `Sampler`
through a region of an arena, with exactly the rows the socket gives; the reply frame then
carries no rows; every way to misuse "into" is refused with a message naming it."""
from __future__ import annotations

import threading
from typing import Any, List

import numpy as np
import pytest

import replayd
from replayd.shm import insert_arena
from test_file_tier import FIELDS, ROW_BYTES, rows_of, wait_written_out

BATCH = 64  # 64 rows of 8 KB: 512 KiB a reply, over INTO_MIN_BYTES


def region_column(region: np.ndarray, reply: Any, name: str) -> np.ndarray:
    """Column `name` of a sample laid out in `region` as its reply's metadata lists it."""
    column = next(col for col in reply["columns"] if col["name"] == name)
    shape = tuple(column["shape"])
    return np.frombuffer(region, np.dtype(column["dtype"]), int(np.prod(shape)),
                         column["offset"]).reshape(shape)


@pytest.fixture
def sent_into(monkeypatch) -> List[bool]:
    """Records each InsertArena.send_sample: whether it took a region (else: the socket)."""
    taken: List[bool] = []
    original = insert_arena.InsertArena.send_sample

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        sent = original(self, *args, **kwargs)
        taken.append(sent is not None)
        return sent

    monkeypatch.setattr(insert_arena.InsertArena, "send_sample", spy)
    return taken


def fill_tiered(c: replayd.Client, items: int = 600) -> None:
    c.create_table("t", FIELDS, 1000, ram_bytes=40 * ROW_BYTES)
    for start in range(0, items, 100):
        ids = np.arange(start, start + 100, dtype=np.int64)
        c.insert("t", {"item": ids, "obs": rows_of(ids)})
    wait_written_out(c, "t")


def test_sample_async_of_a_tiered_table_reads_its_rows_from_the_arena(tiered, sent_into):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        fill_tiered(c)
        # Many in flight: more than the arena's ring holds, so some take the socket.
        futures = [c.sample_async("t", BATCH) for _ in range(40)]
        drawn = set()
        for future in futures:
            batch = future.result()
            assert len(batch) == BATCH
            np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
            assert np.all(batch.probabilities == pytest.approx(1 / 600))
            drawn.update(int(i) for i in batch["item"])
        assert len(drawn) > 500  # hot and cold rows alike
        assert sent_into.count(True) >= 8, sent_into
        # Each later call finds the regions of the earlier ones free again.
        for _ in range(10):
            batch = c.sample_async("t", BATCH).result()
            np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
        assert all(sent_into[-10:]), sent_into[-10:]


def test_sample_of_a_tiered_table_reads_its_rows_from_the_arena(tiered, sent_into):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        fill_tiered(c)
        # The first reply brings its rows through the socket: the client learns then that
        # the table is not mapped.
        batch = c.sample("t", BATCH)
        np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
        assert sent_into == []
        for _ in range(12):  # more than the ring holds at once: each region freed in time
            batch = c.sample("t", BATCH)
            np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
        assert sent_into == [True] * 12
        # Small replies keep the socket.
        batch = c.sample("t", 4)
        np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
        assert len(sent_into) == 12


def test_the_reply_frame_carries_no_rows_and_the_arena_holds_the_socket_payload(tiered):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        fill_tiered(c, 200)
        conn, arena = c.staging_arena(1 << 20)
        try:
            meta = {"op": "sample", "table": "t", "n": 16,
                    "into": {"arena": arena.id, "offset": 4096, "bytes": 1 << 19}}
            request_id, future = conn.submit(
                meta, (), lambda reply, payload: (dict(reply), payload.nbytes),
                caller_waits=True)
            reply, frame_bytes = conn.wait(request_id, future, 30)
            assert frame_bytes == 0
            into = reply["into"]
            assert into["arena"] == arena.id and into["offset"] == 4096
            assert into["bytes"] == c.sample_nbytes("t", 16)
            # The region is laid out as the socket's payload: the same columns, offsets.
            region = np.frombuffer(arena.memoryview(), np.uint8, into["bytes"], 4096)
            item = region_column(region, reply, "item")
            obs = region_column(region, reply, "obs")
            np.testing.assert_array_equal(obs, rows_of(item))
            assert np.all(region_column(region, reply, "key") > 0)
        finally:
            c.unmap_staging(conn, arena)


def test_the_sampler_of_a_tiered_table_reads_its_rows_from_its_arena(tiered, sent_into):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        fill_tiered(c)
        with c.sampler("t", BATCH, prefetch=4) as sampler:
            for _, batch in zip(range(30), sampler):
                np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
        assert len(sent_into) >= 30 and sent_into.count(True) >= 25, sent_into


def test_a_caller_buffer_receives_the_rows_copied_out_of_the_region(tiered, sent_into):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        fill_tiered(c, 200)
        buffer = np.empty(c.sample_nbytes("t", BATCH), np.uint8)
        batch = c.sample_async("t", BATCH, allocate=lambda nbytes: buffer).result()
        assert sent_into == [True]
        assert np.shares_memory(batch["obs"], buffer)
        np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))


def test_a_queue_in_ram_is_sampled_through_the_arena_each_item_once(server, table_name,
                                                                    sent_into):
    """A table whose items retire when sampled is not mapped: its rows are copied, into
    the arena; every item is taken exactly once, as through the socket."""
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, FIELDS, 1000, sampler="fifo", max_times_sampled=1)
        for start in range(0, 640, 160):
            ids = np.arange(start, start + 160, dtype=np.int64)
            c.insert(table_name, {"item": ids, "obs": rows_of(ids)})
        taken = []
        for _ in range(10):
            batch = c.sample_async(table_name, BATCH).result()
            np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
            taken.extend(int(i) for i in batch["item"])
        assert sorted(taken) == list(range(640))
        assert sent_into == [True] * 10


def test_tcp_and_shm_false_keep_the_socket_with_the_same_rows(tiered, sent_into):
    for address, shm in ((tiered.tcp_address, None), (tiered.unix_address, False)):
        with replayd.Client(address, timeout=30, shm=shm) as c:
            if address == tiered.tcp_address:
                fill_tiered(c, 200)
            batch = c.sample_async("t", BATCH).result()
            np.testing.assert_array_equal(batch["obs"], rows_of(batch["item"]))
    assert sent_into == []


def raw_sample(c: replayd.Client, meta: Any, conn: Any = None) -> Any:
    conn = conn or c.connection()
    request_id, future = conn.submit({"op": "sample", "table": "t", "n": 16, **meta}, (),
                                     lambda reply, payload: reply, caller_waits=True)
    return conn.wait(request_id, future, 30)


def test_every_misuse_of_into_is_refused_with_what_to_change(tiered):
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        fill_tiered(c, 200)
        conn, arena = c.staging_arena(1 << 16)
        try:
            whole = {"arena": arena.id, "offset": 0, "bytes": 1 << 16}
            with pytest.raises(replayd.InvalidArgument, match="into.arena.*no staging arena"):
                raw_sample(c, {"into": {**whole, "arena": arena.id + 100}}, conn)
            with pytest.raises(replayd.InvalidArgument, match="offset.*multiple of 8"):
                raw_sample(c, {"into": {**whole, "offset": 12}}, conn)
            with pytest.raises(replayd.InvalidArgument,
                               match="65536 bytes from offset 8 ends past the arena's 65536"):
                raw_sample(c, {"into": {**whole, "offset": 8}}, conn)
            with pytest.raises(replayd.InvalidArgument, match="into.*plain sample"):
                raw_sample(c, {"into": whole, "rows": "keys"}, conn)
            with pytest.raises(replayd.InvalidArgument, match="into.*plain sample"):
                raw_sample(c, {"into": whole, "nstep": 2}, conn)
            with pytest.raises(replayd.InvalidArgument, match="into.size: unknown key"):
                raw_sample(c, {"into": {**whole, "size": 8}}, conn)
            with pytest.raises(replayd.InvalidArgument, match="into.bytes"):
                raw_sample(c, {"into": {"arena": arena.id, "offset": 0}}, conn)
        finally:
            c.unmap_staging(conn, arena)
    with replayd.Client(tiered.tcp_address, timeout=30) as c:
        with pytest.raises(replayd.PermissionDenied, match="into.*data plane"):
            raw_sample(c, {"into": {"arena": 1, "offset": 0, "bytes": 64}})


def test_a_region_too_small_for_the_rows_gets_them_in_the_frame(tiered):
    """A region laid out for another schema (a table replaced meanwhile): the server does
    not write past it; the rows come in the frame, and the client decodes them from there."""
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        fill_tiered(c, 200)
        conn, arena = c.staging_arena(1 << 20)
        try:
            need = c.sample_nbytes("t", 16)
            arena.memoryview()[:] = b"\xee" * (1 << 20)
            request_id, future = conn.submit(
                {"op": "sample", "table": "t", "n": 16,
                 "into": {"arena": arena.id, "offset": 0, "bytes": need - 8}}, (),
                lambda reply, payload: (dict(reply), payload.copy()), caller_waits=True)
            reply, payload = conn.wait(request_id, future, 30)
            assert "into" not in reply and payload.nbytes == need
            assert bytes(arena.memoryview()[:need]) == b"\xee" * need  # untouched
            item = region_column(payload, reply, "item")
            np.testing.assert_array_equal(region_column(payload, reply, "obs"), rows_of(item))
        finally:
            c.unmap_staging(conn, arena)


def test_a_sample_into_a_released_arena_still_completes(tiered):
    """unmap_staging while a sample waits for the rate limiter: the request keeps the
    server's mapping and the client's, and its rows arrive intact."""
    with replayd.Client(tiered.unix_address, timeout=30) as c:
        fill_tiered(c, 200)
        c.create_table("slow", FIELDS, 1000, rate_limiter=replayd.MinSize(10))
        arena_conn, arena = c.staging_arena(1 << 20)
        result: List[Any] = []

        def sample() -> None:
            meta = {"op": "sample", "table": "slow", "n": 8, "timeout_ms": 20_000,
                    "into": {"arena": arena.id, "offset": 0, "bytes": 1 << 20}}
            request_id, future = arena_conn.submit(meta, (), lambda reply, _p: dict(reply),
                                                   caller_waits=True)
            result.append(arena_conn.wait(request_id, future, 30))

        waiter = threading.Thread(target=sample)
        waiter.start()
        view = arena.memoryview()  # keeps the client's mapping as the request's does
        arena_conn.submit({"op": "unmap_staging", "arena": arena.id})[1].result(10)
        ids = np.arange(10, dtype=np.int64)
        c.insert("slow", {"item": ids, "obs": rows_of(ids)})
        waiter.join(30)
        reply = result[0]
        region = np.frombuffer(view, np.uint8, reply["into"]["bytes"], 0)
        item = region_column(region, reply, "item")
        obs = region_column(region, reply, "obs")
        np.testing.assert_array_equal(obs, rows_of(item))
