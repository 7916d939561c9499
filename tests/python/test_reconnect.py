"""Lost connections: calls in flight fail with ConnectionLost and are not repeated; the
next call reconnects (also to a restarted server)."""
from __future__ import annotations

import signal
import time

import numpy as np
import pytest

import replayd


def make(client, name, **kwargs):
    client.create_table(name, {"x": (np.int64, ())}, 100, **kwargs)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
def test_the_client_reconnects_after_a_server_restart(make_server, transport, sig):
    server = make_server()
    client = replayd.Client(server.address(transport), timeout=10)
    make(client, "t")
    client.insert("t", {"x": [1, 2]})
    make(client, "empty")
    first = client.connection()
    waiting = client.sample_async("empty", 1, timeout=None)
    time.sleep(0.05)
    assert not waiting.done()
    server.stop(sig)
    # SIGTERM: the server answers waiting requests with shutting_down; SIGKILL: the
    # connection just drops.
    expected = replayd.ShuttingDown if sig == signal.SIGTERM else replayd.ConnectionLost
    with pytest.raises(expected):
        waiting.result(timeout=10)
    with pytest.raises(replayd.ConnectionLost):
        client.ping()  # nobody listens: the reconnect attempt fails
    server.start()
    client.ping()  # reconnected
    assert client.connection() is not first
    assert client.tables() == []  # a fresh server (no snapshot configured)
    make(client, "t")
    assert client.insert("t", {"x": [3]}).shape == (1,)
    client.close()


def test_a_request_in_flight_when_the_connection_breaks_is_not_repeated(client, table_name):
    make(client, table_name, sampler="fifo", max_times_sampled=1,
         rate_limiter=replayd.Queue(1))
    client.insert(table_name, {"x": [1]})
    held = client.insert_async(table_name, {"x": [2]})  # waits: the queue is full
    time.sleep(0.05)
    assert client.table_info(table_name)["waiting"]["inserts"] == 1
    conn = client.connection()
    conn._sock.sendall(b"this is not a frame header at all!")  # breaks the framing
    with pytest.raises(replayd.ConnectionLost):
        held.result(timeout=10)
    assert not conn.alive
    # The next call opens a new connection; the held insert was dropped by the server with
    # its connection and the client did not send it again.
    info = client.table_info(table_name)
    assert client.connection() is not conn
    assert info["size"] == 1 and info["counters"]["inserts"] == 1
    assert info["waiting"]["inserts"] == 0
    assert client.sample(table_name, 1, timeout=1).data["x"].tolist() == [1]
    with pytest.raises(replayd.TimeoutError):
        client.sample(table_name, 1, timeout=0.1)


def test_closing_the_client_fails_calls_in_flight(client, table_name):
    make(client, table_name)
    future = client.sample_async(table_name, 1)
    client.close()
    with pytest.raises(replayd.ConnectionLost, match="closed by the client"):
        future.result(timeout=5)
    client.ping()  # a closed client reconnects when used again
    deadline = time.monotonic() + 5
    while client.table_info(table_name)["waiting"]["samples"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.table_info(table_name)["waiting"]["samples"] == 0
