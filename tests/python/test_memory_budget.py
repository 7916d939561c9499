"""Memory a client can make the server hold is bounded by the connection's budget, checked
before each frame (docs/ARCHITECTURE.md, "Memory per connection"): replies a client does not
read, payloads of inserts waiting for the rate limiter, and one oversized sample reply. Each
test reads the server's resident memory and asserts a bound derived from the configured
limits; and an allocation failure is answered, not a silent end of the connection."""
import json
import os
import time

import numpy as np
import pytest

import replayd
from conftest import resident_bytes as rss_bytes
from raw_wire import RawConnection, frame

MiB = 1 << 20


def send_without_reading(raw: RawConnection, data: bytes, seconds: float = 5) -> int:
    """Sends as much of `data` as the server takes within `seconds`; returns the bytes sent."""
    raw.sock.setblocking(False)
    view, sent = memoryview(data), 0
    deadline = time.monotonic() + seconds
    while sent < len(view) and time.monotonic() < deadline:
        try:
            sent += raw.sock.send(view[sent:])
        except BlockingIOError:
            time.sleep(0.01)
    return sent


def settle_rss(pid: int, seconds: float = 1.5) -> int:
    """The largest RSS seen over `seconds` (the server keeps working on what it read)."""
    peak, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss_bytes(pid))
        time.sleep(0.05)
    return peak


def write_config(tmp_path, limits):
    path = tmp_path / "limits.json"
    path.write_text(json.dumps({"limits": limits}))
    return ["--config", str(path)]


def create(client, name, item_shape, capacity, rate_limiter=None):
    client.create_table(name, {"x": (np.uint8, tuple(item_shape))}, capacity,
                         rate_limiter=rate_limiter)


def test_replies_a_client_never_reads_are_bounded_by_max_queued_reply_bytes(make_server,
                                                                           tmp_path):
    server = make_server(extra_args=write_config(
        tmp_path, {"max_queued_reply_bytes": 8 * MiB, "socket_send_buffer_bytes": 1 * MiB}))
    with replayd.Client(server.unix_address) as client:
        create(client, "big", (1024,), 4096)
        client.insert("big", {"x": np.zeros((4096, 1024), np.uint8)})
    before = rss_bytes(server.proc.pid)
    # 200 samples of 4096 KiB-rows are 800 MiB of replies; the client reads none of them.
    request = frame({"op": "sample", "table": "big", "n": 4096})
    with RawConnection(server.unix_address) as raw:
        send_without_reading(raw, request * 200)
        grown = settle_rss(server.proc.pid) - before
    # Budget: 8 MiB of queued replies, plus the one reply that crossed it (4 MiB), plus
    # what the socket and the reader hold.
    assert grown < 40 * MiB, f"the server grew by {grown / MiB:.0f} MiB"
    with replayd.Client(server.unix_address) as client:
        assert client.size("big") == 4096  # still serving


def test_payloads_of_inserts_waiting_for_the_rate_limiter_are_bounded(make_server, tmp_path):
    server = make_server(extra_args=write_config(tmp_path, {"max_frame_bytes": 16 * MiB}))
    with replayd.Client(server.unix_address) as client:
        # One sample per insert, and nobody samples: after a few inserts the next ones wait.
        create(client, "held", (MiB,), 64, {"kind": "sample_to_insert_ratio",
                                            "samples_per_insert": 1.0,
                                            "min_size_to_sample": 1, "error_buffer": 2.0})
    before = rss_bytes(server.proc.pid)
    meta = {"op": "insert", "table": "held", "n": 1,
            "columns": [{"name": "x", "dtype": "uint8", "shape": [1, MiB]}]}
    request = frame(meta, bytes(MiB))
    with RawConnection(server.unix_address) as raw:
        data = request * 160  # 160 MiB of inserts that cannot all be admitted
        sent = send_without_reading(raw, data)
        grown = settle_rss(server.proc.pid) - before
        assert sent < len(data), "the server kept reading inserts it could not admit"
    # Budget: max_frame_bytes of parked payload, plus the frame being read and the table's
    # admitted rows (a few MiB-items).
    assert grown < 16 * MiB + 48 * MiB, f"the server grew by {grown / MiB:.0f} MiB"
    # The client went away: its waiting inserts are cancelled although it was not being read.
    with replayd.Client(server.unix_address) as client:
        deadline = time.monotonic() + 5
        while client.table_info("held")["waiting"]["inserts"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.table_info("held")["waiting"]["inserts"] == 0


def test_a_sample_whose_reply_exceeds_max_frame_bytes_is_refused(make_server, tmp_path):
    server = make_server(extra_args=write_config(tmp_path, {"max_frame_bytes": 8 * MiB}))
    # Through the socket (over shared memory the reply carries keys only: see below).
    with replayd.Client(server.unix_address, shm=False) as client:
        create(client, "wide", (64 * 1024,), 256)
        for _ in range(2):
            client.insert("wide", {"x": np.ones((100, 64 * 1024), np.uint8)})
        with pytest.raises(replayd.ResourceExhausted, match="max_frame_bytes"):
            client.sample("wide", 200)
        assert client.table_info("wide")["counters"]["samples"] == 0
        assert client.sample("wide", 100).data["x"].shape == (100, 64 * 1024)
    with replayd.Client(server.unix_address, shm=True) as client:
        assert client.sample("wide", 200).data["x"].shape == (200, 64 * 1024)


@pytest.mark.skipif("ASAN_OPTIONS" in os.environ, reason="an address-space limit breaks ASan")
def test_an_allocation_failure_is_answered_and_the_connection_keeps_working(make_server,
                                                                            tmp_path):
    import resource

    def limit_address_space():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))

    server = make_server(extra_args=write_config(
        tmp_path, {"max_frame_bytes": 1 << 40, "max_batch_items": 1 << 24}))
    server.stop()
    import subprocess
    original = subprocess.Popen

    def popen_with_limit(*args, **kwargs):
        kwargs["preexec_fn"] = limit_address_space
        return original(*args, **kwargs)

    subprocess.Popen = popen_with_limit
    try:
        server.start()
    finally:
        subprocess.Popen = original
    # The reply through the socket (over shared memory it would carry keys only).
    with replayd.Client(server.unix_address, timeout=10, shm=False) as client:
        create(client, "t", (1024,), 16)
        client.insert("t", {"x": np.ones((16, 1024), np.uint8)})
        # 4 GiB of reply cannot be allocated under a 2 GiB address space.
        with pytest.raises(replayd.ResourceExhausted, match="out of memory"):
            client.sample("t", 1 << 22)
        assert client.sample("t", 4).data["x"].shape == (4, 1024)


def test_buffers_of_all_connections_together_are_bounded_by_max_buffered_bytes(make_server,
                                                                               tmp_path):
    # Each connection alone could queue 64 MiB of replies; together they may hold 16 MiB.
    server = make_server(extra_args=write_config(
        tmp_path, {"max_queued_reply_bytes": 64 * MiB, "max_buffered_bytes": 16 * MiB,
                   "socket_send_buffer_bytes": 1 * MiB}))
    with replayd.Client(server.unix_address) as client:
        create(client, "big", (1024,), 4096)
        client.insert("big", {"x": np.zeros((4096, 1024), np.uint8)})
    before = rss_bytes(server.proc.pid)
    request = frame({"op": "sample", "table": "big", "n": 4096})  # a 4 MiB reply
    connections = [RawConnection(server.unix_address) for _ in range(6)]
    try:
        sent = [send_without_reading(raw, request * 40, seconds=2) for raw in connections]
        grown = settle_rss(server.proc.pid) - before
        # Budget: 16 MiB, plus per connection the reply that crossed it (4 MiB) and what
        # its socket and reader hold. Without the server-wide budget: 6 x 68 MiB.
        assert grown < 90 * MiB, f"the server grew by {grown / MiB:.0f} MiB"
        # A connection that holds nothing is still read: a learner is not locked out.
        with replayd.Client(server.unix_address) as client:
            assert len(client.sample("big", 16)) == 16
        # Readers drain the replies; every request sent is answered.
        for raw, nbytes in zip(connections, sent):
            raw.sock.setblocking(True)
            for _ in range(nbytes // len(request)):
                reply = raw.read_reply(timeout=30)
                assert reply is not None and "error" not in reply[1], reply and reply[1]
    finally:
        for raw in connections:
            raw.close()


def park_small_inserts(client, address: str, connections: int, per_connection: int):
    """Creates table "held", whose rate limiter admits no more inserts after the first few,
    opens `connections` raw connections and sends each `per_connection` inserts of one
    40-byte item into it, without reading. Returns the connections (the caller closes them)."""
    create(client, "held", (40,), 64, {"kind": "sample_to_insert_ratio",
                                        "samples_per_insert": 1.0,
                                        "min_size_to_sample": 1, "error_buffer": 2.0})
    meta = {"op": "insert", "table": "held", "n": 1,
            "columns": [{"name": "x", "dtype": "uint8", "shape": [1, 40]}]}
    request = frame(meta, bytes(40))
    raws = [RawConnection(address) for _ in range(connections)]
    for raw in raws:
        send_without_reading(raw, request * per_connection, seconds=2)
    return raws


def test_many_small_parked_requests_are_bounded_by_max_buffered_bytes(make_server, tmp_path):
    # A parked request holds far more than its 40 bytes of payload (its coroutine frames, its
    # parsed metadata, its waiter): counted per request (Parking::kBytesPerParkedRequest)
    # against the budget, 32 connections x 1024 parked inserts cannot take more than the
    # 8 MiB budget plus a frame per connection. Counted by payload alone they would all be
    # parked: 32 x 1024 x 40 B of payload is 1.3 MiB, ~100 MiB of the server's memory.
    server = make_server(extra_args=write_config(tmp_path, {"max_buffered_bytes": 8 * MiB}))
    with replayd.Client(server.unix_address) as client:
        before = rss_bytes(server.proc.pid)
        raws = park_small_inserts(client, server.unix_address, 32, 1024)
        try:
            grown = settle_rss(server.proc.pid) - before
            waiting = client.table_info("held")["waiting"]["inserts"]
            # The budget pauses reading after about 8 MiB / 8 KiB = 1,024 parked requests.
            assert waiting < 2000, f"{waiting} inserts parked"
            if "ASAN_OPTIONS" not in os.environ:  # shadow memory and redzones are not counted
                assert grown < 8 * MiB + 16 * MiB, f"the server grew by {grown / MiB:.0f} MiB"
            # A learner's connection, which holds nothing, is still served.
            assert client.table_info("held")["size"] >= 1
        finally:
            for raw in raws:
                raw.close()


@pytest.mark.skipif("ASAN_OPTIONS" in os.environ,
                    reason="sanitizer shadow memory and redzones are not the request's")
def test_what_a_parked_request_holds_is_within_what_the_budget_counts(make_server, tmp_path):
    # Parking::kBytesPerParkedRequest must not undercount: with a budget that admits every
    # request, the server's growth per parked insert stays below the count.
    server = make_server()
    with replayd.Client(server.unix_address) as client:
        before = rss_bytes(server.proc.pid)
        raws = park_small_inserts(client, server.unix_address, 16, 1000)
        try:
            deadline = time.monotonic() + 10
            while (client.table_info("held")["waiting"]["inserts"] < 16 * 1000 - 64
                   and time.monotonic() < deadline):
                time.sleep(0.1)
            waiting = client.table_info("held")["waiting"]["inserts"]
            grown = settle_rss(server.proc.pid) - before
            per_request = grown / waiting
            print(f"{waiting} parked inserts, {grown / MiB:.1f} MiB, "
                  f"{per_request:.0f} B per parked request")
            assert waiting > 15000
            assert per_request < 8 * 1024  # Parking::kBytesPerParkedRequest
        finally:
            for raw in raws:
                raw.close()
