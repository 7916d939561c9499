"""Hostile and broken clients against the real server over raw sockets: every malformed
frame or request gets its documented error code (docs/PROTOCOL.md), the connection is
closed exactly when the frame boundary is lost, other clients keep being served, and the
data already stored is unchanged.

test_errors.py covers mistakes a well-behaved client library can make (wrong dtype, bad
priorities through the API); here the bytes themselves are wrong.
"""
from __future__ import annotations

import json
import math
import struct
from typing import Callable, NamedTuple

import numpy as np
import pytest

import replayd
from raw_wire import RawConnection, error_code, frame, header, padded

MAX_META_BYTES = 65536             # the server's defaults (docs/CONFIG.md, limits)
MAX_FRAME_BYTES = 256 << 20
MAX_BATCH_ITEMS = 65536
STORED = 10


class Case(NamedTuple):
    build: Callable[[str], bytes]  # table name -> bytes to send
    code: str                      # the error code of the one reply
    closes: bool                   # whether the server then closes the connection


def ping_frame(**fields) -> bytes:
    return frame({"op": "ping"}, **fields)


def insert_frame(table: str, n: int, x: bytes, *, priorities: bytes = None, **meta) -> bytes:
    request = {"op": "insert", "table": table, "n": n, "priorities": priorities is not None,
               "timeout_ms": 0, "columns": [{"name": "x", "dtype": "int64", "shape": [n]}]}
    request.update(meta)
    payload = padded(x) + (padded(priorities) if priorities is not None else b"")
    return frame(request, payload)


def xs(*values: int) -> bytes:
    return np.array(values, np.int64).tobytes()


def f64(*values: float) -> bytes:
    return np.array(values, np.float64).tobytes()


def u64(*values: int) -> bytes:
    return np.array(values, np.uint64).tobytes()


def sample(table: str, **fields) -> bytes:
    return frame({"op": "sample", "table": table, "n": 1, "timeout_ms": 0, **fields})


PING_META = b'{"op":"ping"}'

CASES = {
    # -- the header: the frame boundary is lost, one reply, then the connection closes
    "bad magic": Case(lambda t: ping_frame(magic=b"XPLY"), "protocol_error", True),
    "magic of another protocol": Case(lambda t: b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(8),
                                      "protocol_error", True),
    "version 2": Case(lambda t: ping_frame(version=2), "protocol_error", True),
    "version 0": Case(lambda t: ping_frame(version=0), "protocol_error", True),
    "kind reply sent to the server": Case(lambda t: ping_frame(kind=2), "protocol_error", True),
    "kind 0": Case(lambda t: ping_frame(kind=0), "protocol_error", True),
    "kind 255": Case(lambda t: ping_frame(kind=255), "protocol_error", True),
    "flags low bit": Case(lambda t: ping_frame(flags=1), "protocol_error", True),
    "flags high bit": Case(lambda t: ping_frame(flags=0x8000), "protocol_error", True),
    "reserved field": Case(lambda t: ping_frame(reserved=1), "protocol_error", True),
    "zero-length meta": Case(lambda t: header(0), "protocol_error", True),
    "zero-length meta with a payload": Case(lambda t: header(0, 8) + bytes(8),
                                            "protocol_error", True),
    # -- lengths beyond the limits: refused from the header, before any allocation
    "meta_bytes one over max_meta_bytes": Case(lambda t: header(MAX_META_BYTES + 1),
                                               "resource_exhausted", True),
    "meta_bytes 4 GiB": Case(lambda t: header(0xFFFFFFFF), "resource_exhausted", True),
    "frame one byte over max_frame_bytes": Case(
        lambda t: header(len(PING_META), MAX_FRAME_BYTES - 32 - len(PING_META) + 1) + PING_META,
        "resource_exhausted", True),
    "payload_bytes 2^64-1": Case(lambda t: header(len(PING_META), 2**64 - 1) + PING_META,
                                 "resource_exhausted", True),
    # -- JSON of the wrong shape: well framed, so the connection stays open
    "meta not JSON": Case(lambda t: frame("{op: ping"), "invalid_argument", False),
    "meta invalid UTF-8": Case(lambda t: frame(b'{"op":"ping\xff\xfe"}'), "invalid_argument",
                               False),
    "meta a JSON array": Case(lambda t: frame('["op", "ping"]'), "invalid_argument", False),
    "meta a JSON string": Case(lambda t: frame('"ping"'), "invalid_argument", False),
    "meta JSON null": Case(lambda t: frame("null"), "invalid_argument", False),
    "meta two JSON objects": Case(lambda t: frame('{"op":"ping"}{"op":"ping"}'),
                                  "invalid_argument", False),
    "meta deeply nested": Case(lambda t: frame('{"op":"ping","x":' + "[" * 5000 + "]" * 5000
                                               + "}"), "invalid_argument", False),
    "op missing": Case(lambda t: frame({"table": t}), "invalid_argument", False),
    "op a number": Case(lambda t: frame({"op": 42}), "invalid_argument", False),
    "op null": Case(lambda t: frame({"op": None}), "invalid_argument", False),
    "op an object": Case(lambda t: frame({"op": {"name": "ping"}}), "invalid_argument", False),
    "unknown op": Case(lambda t: frame({"op": "format_disk"}), "invalid_argument", False),
    "op with different case": Case(lambda t: frame({"op": "PING"}), "invalid_argument", False),
    "unknown key": Case(lambda t: frame({"op": "ping", "please": True}), "invalid_argument",
                        False),
    "hello of protocol 2": Case(lambda t: frame({"op": "hello", "protocol": 2}),
                                "invalid_argument", False),
    "table a number": Case(lambda t: frame({"op": "info", "table": 7}), "invalid_argument",
                           False),
    "unknown table": Case(lambda t: sample(t + "-nope"), "not_found", False),
    # -- wrong types and values per key
    "n a string": Case(lambda t: sample(t, n="1"), "invalid_argument", False),
    "n negative": Case(lambda t: sample(t, n=-1), "invalid_argument", False),
    "n fractional": Case(lambda t: sample(t, n=1.5), "invalid_argument", False),
    "n zero": Case(lambda t: sample(t, n=0), "invalid_argument", False),
    "n above max_batch_items": Case(lambda t: sample(t, n=MAX_BATCH_ITEMS + 1),
                                    "resource_exhausted", False),
    "n 2^64-1": Case(lambda t: sample(t, n=2**64 - 1), "resource_exhausted", False),
    "n beyond 64 bits": Case(lambda t: sample(t, n=2**70), "invalid_argument", False),
    "beta negative": Case(lambda t: sample(t, beta=-0.5), "invalid_argument", False),
    "beta infinite (1e999)": Case(lambda t: frame('{"op":"sample","table":"' + t
                                                  + '","n":1,"beta":1e999}'),
                                  "invalid_argument", False),
    "beta NaN": Case(lambda t: frame('{"op":"sample","table":"' + t + '","n":1,"beta":NaN}'),
                     "invalid_argument", False),
    "timeout_ms negative": Case(lambda t: sample(t, timeout_ms=-5), "invalid_argument", False),
    "timeout_ms a string": Case(lambda t: sample(t, timeout_ms="soon"), "invalid_argument",
                                False),
    "insert of a huge batch": Case(lambda t: insert_frame(t, 2**40, xs(1)),
                                   "resource_exhausted", False),
    "columns not an array": Case(lambda t: insert_frame(t, 1, xs(1), columns={"x": 1}),
                                 "invalid_argument", False),
    "column of an unknown dtype": Case(
        lambda t: insert_frame(t, 1, xs(1), columns=[{"name": "x", "dtype": "float128",
                                                       "shape": [1]}]),
        "invalid_argument", False),
    "column shape disagrees with n": Case(
        lambda t: insert_frame(t, 2, xs(1, 2), columns=[{"name": "x", "dtype": "int64",
                                                          "shape": [3]}]),
        "invalid_argument", False),
    "column with an unknown key": Case(
        lambda t: insert_frame(t, 1, xs(1), columns=[{"name": "x", "dtype": "int64",
                                                       "shape": [1], "stride": 8}]),
        "invalid_argument", False),
    # -- payloads shorter or longer than the request implies
    "insert payload short": Case(lambda t: insert_frame(t, 3, xs(1, 2)), "invalid_argument",
                                 False),
    "insert payload long": Case(lambda t: insert_frame(t, 1, xs(1, 2, 3)), "invalid_argument",
                                False),
    "insert payload missing": Case(lambda t: frame({"op": "insert", "table": t, "n": 1,
                                                    "columns": [{"name": "x", "dtype": "int64",
                                                                 "shape": [1]}]}),
                                   "invalid_argument", False),
    "insert priority NaN": Case(lambda t: insert_frame(t, 2, xs(1, 2), priorities=f64(1, math.nan)),
                                "invalid_argument", False),
    "insert priority negative": Case(lambda t: insert_frame(t, 2, xs(1, 2),
                                                            priorities=f64(-1, 1)),
                                     "invalid_argument", False),
    "insert priority infinite": Case(lambda t: insert_frame(t, 2, xs(1, 2),
                                                            priorities=f64(math.inf, 1)),
                                     "invalid_argument", False),
    "update_priorities payload short": Case(
        lambda t: frame({"op": "update_priorities", "table": t, "n": 2}, u64(1, 2) + f64(1)),
        "invalid_argument", False),
    "update_priorities NaN": Case(
        lambda t: frame({"op": "update_priorities", "table": t, "n": 2},
                        u64(1, 2) + f64(1, math.nan)), "invalid_argument", False),
    "update_priorities negative infinity": Case(
        lambda t: frame({"op": "update_priorities", "table": t, "n": 1},
                        u64(1) + f64(-math.inf)), "invalid_argument", False),
    "delete payload long": Case(lambda t: frame({"op": "delete", "table": t, "n": 1}, u64(1, 2)),
                                "invalid_argument", False),
    "delete n above max_batch_items": Case(
        lambda t: frame({"op": "delete", "table": t, "n": MAX_BATCH_ITEMS + 1}, u64(1)),
        "resource_exhausted", False),
    "create_table of an absurd capacity": Case(
        lambda t: frame({"op": "create_table", "table": {
            "name": t + "-big", "capacity": 2**31,
            "fields": [{"name": "x", "dtype": "float64", "shape": [1 << 20]}]}}),
        "resource_exhausted", False),
    "create_table with a field of a million dimensions": Case(
        lambda t: frame({"op": "create_table", "table": {
            "name": t + "-dims", "capacity": 1,
            "fields": [{"name": "x", "dtype": "uint8", "shape": [1] * 1000}]}}),
        "invalid_argument", False),
}


@pytest.fixture
def stored(client, table_name):
    """A uniform table holding STORED known items; returns (name, key -> value)."""
    client.create_table(table_name, {"x": (np.int64, ())}, 1000)
    values = np.arange(100, 100 + STORED, dtype=np.int64)
    keys = client.insert(table_name, {"x": values})
    return table_name, dict(zip(keys.tolist(), values.tolist()))


def assert_unchanged(client, table, contents):
    info = client.table_info(table)
    assert info["size"] == STORED
    counters = info["counters"]
    assert (counters["inserts"], counters["deletes"], counters["priority_updates"]) == \
        (STORED, 0, 0)
    batch = client.sample(table, 64)
    assert all(contents[k] == v for k, v in zip(batch.keys.tolist(), batch["x"].tolist()))


@pytest.mark.parametrize("case", CASES.values(), ids=list(CASES))
def test_malformed_input_gets_its_error_code_and_harms_no_one(address, client, stored, case):
    table, contents = stored
    with RawConnection(address) as raw:
        raw.send(case.build(table))
        reply = raw.read_reply()
        assert reply is not None, "the server closed the connection without a reply"
        _, meta, payload = reply
        assert error_code(meta) == case.code, meta
        assert meta["error"]["message"] and payload == b""
        if case.closes:
            assert raw.closed_by_server()
        else:
            assert raw.call({"op": "ping"}, request_id=99) == {}
    client.ping()  # other connections are served
    assert_unchanged(client, table, contents)


def test_the_header_of_a_broken_frame_gives_the_reply_its_request_id(server):
    with RawConnection(server.unix_address) as raw:
        raw.send(ping_frame(flags=3, request_id=77))
        request_id, meta, _ = raw.read_reply()
        assert (request_id, error_code(meta)) == (77, "protocol_error")


def test_requests_after_a_framing_error_are_never_executed(server, client, stored):
    table, contents = stored
    with RawConnection(server.unix_address) as raw:
        raw.send(ping_frame(request_id=1) + ping_frame(version=9, request_id=2)
                 + insert_frame(table, 1, xs(5)) + ping_frame(request_id=3))
        assert raw.read_reply()[:2] == (1, {})
        request_id, meta, _ = raw.read_reply()
        assert (request_id, error_code(meta)) == (2, "protocol_error")
        assert raw.closed_by_server()
        with pytest.raises(OSError):  # EPIPE or ECONNRESET once the close is seen
            for _ in range(100):
                raw.send(ping_frame())
    assert_unchanged(client, table, contents)


@pytest.mark.parametrize("cut", ["header", "meta", "payload"])
def test_a_truncated_frame_is_dropped_when_the_client_goes_away(server, client, stored, cut):
    table, contents = stored
    data = insert_frame(table, 2, xs(7, 8))
    meta_bytes = struct.unpack_from("<I", data, 16)[0]
    end = {"header": 20, "meta": 32 + meta_bytes // 2, "payload": len(data) - 3}[cut]
    with RawConnection(server.unix_address) as raw:
        raw.send(data[:end])
        raw.sock.shutdown(2 - 1)  # SHUT_WR: the client sends nothing more
        assert raw.read_reply() is None  # no reply to half a request, then the close
    assert_unchanged(client, table, contents)


def test_a_good_request_pipelined_before_a_bad_one_is_answered(server, stored):
    table, _ = stored
    with RawConnection(server.unix_address) as raw:
        raw.send(frame({"op": "info", "table": table}, request_id=5) + header(0xFFFFFFFF))
        request_id, meta, _ = raw.read_reply()
        assert request_id == 5 and meta["tables"][0]["size"] == STORED
        assert error_code(raw.read_reply()[1]) == "resource_exhausted"
        assert raw.closed_by_server()


def test_a_frame_sent_one_byte_at_a_time_is_accepted(server, stored):
    table, _ = stored
    data = frame({"op": "info", "table": table}, request_id=6)
    with RawConnection(server.unix_address) as raw:
        for i in range(len(data)):
            raw.send(data[i:i + 1])
        assert raw.read_reply()[0] == 6


def test_many_broken_clients_at_once_leave_the_server_serving(server, client, stored):
    table, contents = stored
    connections = [RawConnection(server.unix_address) for _ in range(50)]
    try:
        for i, raw in enumerate(connections):
            raw.send([ping_frame(magic=b"JUNK"), header(0xFFFFFFFF), frame("[]"),
                      ping_frame()[:10]][i % 4])
        client.ping()
    finally:
        for raw in connections:
            raw.close()
    assert_unchanged(client, table, contents)
    assert json.dumps(client.info()["server"])  # still answers info
