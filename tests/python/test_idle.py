"""Slow and stuck clients against the real server (limits.idle_timeout_ms and
limits.write_timeout_ms, docs/CONFIG.md): a connection that sends nothing, or never finishes
a frame, is closed; one that waits for data is not; a client that stops reading its replies
is cut off without affecting anyone else."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

import replayd
from raw_wire import RawConnection, error_code, frame

IDLE_MS = 400
WRITE_MS = 600


@pytest.fixture
def strict(make_server, tmp_path):
    """A server with short idle and write timeouts and a small reply queue."""
    config = tmp_path / "strict.json"
    config.write_text(json.dumps({"limits": {"idle_timeout_ms": IDLE_MS,
                                             "write_timeout_ms": WRITE_MS,
                                             "max_queued_reply_bytes": 4096}}))
    return make_server(extra_args=["--config", str(config)])


def connections(client) -> int:
    return client.info()["server"]["connections"]


def assert_closed_for_idleness(raw: RawConnection, started: float,
                               min_fraction: float = 0.9) -> None:
    reply = raw.read_reply(timeout=30)
    assert reply is not None
    request_id, meta, _ = reply
    assert request_id == 0 and error_code(meta) == "timeout"
    assert "idle_timeout_ms" in meta["error"]["message"]
    assert raw.closed_by_server()
    assert time.monotonic() - started >= IDLE_MS / 1000 * min_fraction


@pytest.mark.parametrize("transport", ["unix", "tcp"])
def test_a_connection_that_sends_nothing_is_closed_after_the_idle_timeout(strict, transport):
    started = time.monotonic()
    with RawConnection(strict.address(transport)) as raw:
        assert_closed_for_idleness(raw, started)


def test_a_connection_that_never_finishes_a_frame_is_closed(strict):
    with RawConnection(strict.unix_address) as raw:
        assert raw.call({"op": "ping"}) == {}
        started = time.monotonic()
        data = frame({"op": "ping"})
        for i in range(3):  # one byte every 100 ms: bytes arrive, no request completes
            raw.send(data[i:i + 1])
            time.sleep(0.1)
        assert_closed_for_idleness(raw, started)


def test_a_connection_that_keeps_sending_requests_stays_open(strict):
    with RawConnection(strict.unix_address) as raw:
        deadline = time.monotonic() + 3 * IDLE_MS / 1000
        request_id = 0
        while time.monotonic() < deadline:
            request_id += 1
            assert raw.call({"op": "ping"}, request_id=request_id) == {}
            time.sleep(IDLE_MS / 1000 / 4)


def test_a_request_waiting_for_data_is_not_idle(strict):
    with replayd.Client(strict.unix_address, timeout=30) as client:
        client.create_table("t", {"x": (np.int64, ())}, 100)
        with RawConnection(strict.unix_address) as raw:
            raw.send(frame({"op": "sample", "table": "t", "n": 1}, request_id=3))
            time.sleep(3 * IDLE_MS / 1000)
            client.insert("t", {"x": np.array([42])})
            request_id, meta, _ = raw.read_reply()
            assert request_id == 3 and meta["n"] == 1
            # Idle again from the moment the reply was sent: closed one timeout later (the
            # reply took part of it to arrive here).
            assert_closed_for_idleness(raw, time.monotonic(), min_fraction=0.5)


def test_a_client_that_stops_reading_is_cut_off_and_others_are_served(strict):
    with replayd.Client(strict.unix_address, timeout=30) as client:
        client.create_table("big", {"x": (np.float32, (16384,))}, 16)
        client.insert("big", {"x": np.ones((16, 16384), np.float32)})
        baseline = connections(client)
        raw = RawConnection(strict.unix_address)
        try:
            request = frame({"op": "sample", "table": "big", "n": 16})  # 1 MiB per reply
            raw.send(request * 32)  # and never read
            # Counted once the server has accepted it, which may come after the next request
            # of another connection.
            deadline = time.monotonic() + 5
            while connections(client) < baseline + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert connections(client) == baseline + 1
            deadline = time.monotonic() + 30
            while connections(client) > baseline and time.monotonic() < deadline:
                client.ping()  # the server stays responsive meanwhile
                time.sleep(0.05)
            assert connections(client) == baseline, "the stuck client was not cut off"
            received = 0
            while True:  # what the kernel had buffered, then the end of the stream
                try:
                    chunk = raw.sock.recv(1 << 20)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                received += len(chunk)
            assert received < 32 << 20  # the rest of the replies were dropped
        finally:
            raw.close()
        assert client.size("big") == 16
        assert "write_timeout_ms" in strict.log_path.read_text()


def test_a_slow_but_steady_reader_is_not_cut_off(strict):
    with replayd.Client(strict.unix_address, timeout=30) as client:
        client.create_table("big", {"x": (np.float32, (16384,))}, 16)
        client.insert("big", {"x": np.ones((16, 16384), np.float32)})
        with RawConnection(strict.unix_address) as raw:
            raw.send(frame({"op": "sample", "table": "big", "n": 16}) * 4)
            for _ in range(4):  # reads each reply after a pause shorter than the timeout
                time.sleep(WRITE_MS / 1000 / 3)
                _, meta, payload = raw.read_reply()
                assert meta["n"] == 16 and len(payload) >= 16 * 16384 * 4
