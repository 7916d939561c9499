"""The `sample_mixed` request on the wire (docs/PROTOCOL.md): what it refuses and why, the
keys-only reply a same-host client gathers from, and its wait across tables (the real
server binary)."""
from __future__ import annotations

import threading
import time
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

import replayd

FIELDS = {"item": (np.int64, ()), "obs": (np.float32, 4)}


@pytest.fixture
def tables(server) -> Iterator[List[str]]:
    names = [f"op-mixed-{i}-{time.monotonic_ns() % 1_000_000}" for i in range(2)]
    with replayd.Client(server.unix_address, timeout=30) as c:
        for offset, name in zip((0, 1000), names):
            c.create_table(name, FIELDS, 100)
            items = np.arange(10) + offset
            c.insert(name, {"item": items, "obs": np.repeat(items[:, None], 4, 1).astype(np.float32)})
    yield names
    with replayd.Client(server.unix_address, timeout=30) as c:
        for name in c.tables():
            if name.startswith("op-mixed-"):
                c.drop_table(name)


def call(client: replayd.Client, **meta: Any) -> Dict[str, Any]:
    reply: Dict[str, Any] = client.connection().call({"op": "sample_mixed", **meta})
    return reply


def test_the_reply_is_one_batch_with_each_tables_rows_in_request_order(server, tables):
    with replayd.Client(server.tcp_address, timeout=30) as c:
        reply = call(c, tables=tables, counts=[3, 5], n=8)
        assert reply["parts"] == [{"table": tables[0], "n": 3}, {"table": tables[1], "n": 5}]
        assert [col["name"] for col in reply["columns"]] == \
            ["key", "probability", "weight", "times_sampled", "item", "obs"]
        batch = c.sample({tables[0]: 0.375, tables[1]: 0.625}, 8)
        assert np.all(batch["item"][:3] < 1000) and np.all(batch["item"][3:] >= 1000)


@pytest.mark.parametrize("meta, message", [
    ({"counts": [1, 1], "n": 2}, "tables: expected a non-empty list"),
    ({"tables": [], "counts": [], "n": 1}, "tables: expected a non-empty list"),
    ({"tables": ["A", "B"], "counts": [1], "n": 1}, "give one count per table"),
    ({"tables": ["A", "B"], "counts": [1, 0], "n": 1}, "leave out a table of 0 rows"),
    ({"tables": ["A", "B"], "counts": [1, -2], "n": 1}, "integers >= 1"),
    ({"tables": ["A", "B"], "counts": [1, 1], "n": 3}, "sum to 2 rows, not n = 3"),
    ({"tables": ["A", "A"], "counts": [1, 1], "n": 2}, "twice"),
    ({"tables": ["A", 7], "counts": [1, 1], "n": 2}, "table names"),
    ({"tables": ["A", "B"], "counts": [1, 1], "n": 2, "rows": "all"}, "rows"),
    ({"tables": ["A", "B"], "counts": [1, 1], "n": 2, "beta": -1}, "beta"),
    ({"tables": ["A", "B"], "counts": [1, 1], "n": 2, "table": "A"}, "unknown key"),
])
def test_malformed_requests_are_refused_naming_the_problem(server, tables, meta, message):
    names = {"A": tables[0], "B": tables[1]}
    if "tables" in meta:
        meta = dict(meta, tables=[names.get(t, t) for t in meta["tables"]])
    with replayd.Client(server.unix_address, timeout=30) as c:
        before = [c.table_info(t)["counters"]["samples"] for t in tables]
        with pytest.raises(replayd.InvalidArgument, match=message):
            call(c, **meta)
        assert [c.table_info(t)["counters"]["samples"] for t in tables] == before


def test_too_many_tables_and_missing_ones_are_refused(server, tables):
    with replayd.Client(server.unix_address, timeout=30) as c:
        with pytest.raises(replayd.InvalidArgument, match="at most 16"):
            call(c, tables=[f"t{i}" for i in range(17)], counts=[1] * 17, n=17)
        with pytest.raises(replayd.NotFound, match="'op-mixed-none' does not exist"):
            call(c, tables=[tables[0], "op-mixed-none"], counts=[1, 1], n=2)


def test_tables_of_different_fields_or_with_frames_are_refused(server, tables):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("op-mixed-wide", {"item": (np.int64, ()), "obs": (np.float32, 5)}, 10)
        c.insert("op-mixed-wide", {"item": [1], "obs": np.zeros((1, 5), np.float32)})
        with pytest.raises(replayd.InvalidArgument,
                           match=f"field 'obs' differs between table '{tables[0]}' and table "
                                 "'op-mixed-wide'"):
            call(c, tables=[tables[0], "op-mixed-wide"], counts=[1, 1], n=2)
        # The client sends such tables one request each when the fields asked for agree.
        batch = c.sample({tables[0]: 0.5, "op-mixed-wide": 0.5}, 4, fields=["item"])
        assert batch.counts == (2, 2) and set(batch.data) == {"item"}


def test_keys_only_replies_name_each_tables_block_and_slots(server, tables):
    with replayd.Client(server.unix_address, timeout=30, shm=True) as c:
        reply = call(c, tables=tables, counts=[2, 2], n=4, rows="keys")
        assert reply["rows"] == "keys"
        assert [col["name"] for col in reply["columns"]] == \
            ["key", "probability", "weight", "times_sampled", "slot"]
        regions = [part["region"] for part in reply["parts"]]
        assert all(isinstance(r, int) for r in regions) and regions[0] != regions[1]
        # The client gathers each table's rows from its own mapping.
        c.plane_table(tables[0])
        batch = c.sample({tables[0]: 0.5, tables[1]: 0.5}, 4096)      # 128 KiB: the plane
        assert c._planes.get(tables[0]) is not None
        assert np.all(batch["obs"][:, 0] == batch["item"])
        assert np.all(batch["item"][:2048] < 1000) and np.all(batch["item"][2048:] >= 1000)
    with replayd.Client(server.tcp_address, timeout=30) as c:     # no plane over TCP
        with pytest.raises(replayd.InvalidArgument, match="every table in shared memory"):
            call(c, tables=tables, counts=[2, 2], n=4, rows="keys")
        reply = call(c, tables=tables, counts=[2, 2], n=4, rows="auto")
        assert "rows" not in reply and "region" not in reply["parts"][0]


def test_a_wait_ends_when_every_table_admits_and_a_dropped_table_ends_it(server, tables):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("op-mixed-late", FIELDS, 100, rate_limiter=replayd.MinSize(3))
        result: Dict[str, Any] = {}
        waiter = threading.Thread(target=lambda: result.update(
            batch=c.sample({tables[0]: 0.5, "op-mixed-late": 0.5}, 8, timeout=30)))
        waiter.start()
        with replayd.Client(server.unix_address, timeout=30) as other:
            other.insert("op-mixed-late", {"item": [7, 8], "obs": np.zeros((2, 4), np.float32)})
            time.sleep(0.3)
            assert "batch" not in result          # 2 of the 3 items min_size asks for
            assert other.table_info(tables[0])["counters"]["samples"] == 0
            other.insert("op-mixed-late", {"item": [9], "obs": np.zeros((1, 4), np.float32)})
            waiter.join(30)
            assert set(result["batch"]["item"][4:]) <= {7, 8, 9}
            assert other.table_info(tables[0])["counters"]["samples"] == 4

            dropped: Dict[str, Any] = {}

            def wait_on_dropped() -> None:
                try:
                    c.sample({tables[0]: 0.5, "op-mixed-never": 0.5}, 8, timeout=30)
                except replayd.ReplayError as exc:
                    dropped["error"] = exc

            other.create_table("op-mixed-never", FIELDS, 100)
            waiter = threading.Thread(target=wait_on_dropped)
            waiter.start()
            time.sleep(0.3)
            other.drop_table("op-mixed-never")
            waiter.join(30)
            assert isinstance(dropped["error"], replayd.NotFound)
            assert "op-mixed-never' was dropped while the sample_mixed waited" in \
                str(dropped["error"])
