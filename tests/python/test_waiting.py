"""Timeouts, waiting requests and pipelining on one connection."""
from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

import replayd


def make(client, name, **kwargs):
    client.create_table(name, {"x": (np.int64, ())}, 100, **kwargs)


def test_sample_on_an_empty_table_times_out_on_the_server(client, table_name):
    make(client, table_name)
    start = time.monotonic()
    with pytest.raises(replayd.TimeoutError) as info:
        client.sample(table_name, 1, timeout=0.3)
    elapsed = time.monotonic() - start
    assert info.value.code == "timeout" and 0.25 <= elapsed < 2.0
    with pytest.raises(replayd.TimeoutError):
        client.sample(table_name, 1, timeout=0)
    assert client.table_info(table_name)["waiting"]["samples"] == 0
    client.insert(table_name, {"x": [1]})
    assert client.sample(table_name, 1, timeout=0).data["x"].tolist() == [1]


def test_the_client_timeout_is_the_default_for_calls(address, table_name):
    with replayd.Client(address, timeout=0.3) as client:
        make(client, table_name)
        with pytest.raises(replayd.TimeoutError):
            client.sample(table_name, 1)
        with pytest.raises(replayd.TimeoutError):
            client.sample(table_name, 1, timeout=0.05)


def test_insert_held_by_the_rate_limiter_times_out(client, table_name):
    make(client, table_name, sampler="fifo", max_times_sampled=1,
         rate_limiter=replayd.Queue(2))
    client.insert(table_name, {"x": [1, 2]})
    with pytest.raises(replayd.TimeoutError):
        client.insert(table_name, {"x": [3]}, timeout=0.2)
    assert client.size(table_name) == 2


def test_a_waiting_sample_does_not_block_later_requests(client, table_name):
    make(client, table_name)
    future = client.sample_async(table_name, 2)
    time.sleep(0.05)
    assert not future.done()
    client.ping()  # later requests on the same connection are served meanwhile
    client.insert(table_name, {"x": [7]})
    sample = future.result(timeout=5)
    assert sample.data["x"].tolist() == [7, 7]


def test_queue_rate_limiter_hands_items_over_in_order(client, table_name):
    make(client, table_name, sampler="fifo", max_times_sampled=1,
         rate_limiter=replayd.Queue(4))
    samples = [client.sample_async(table_name, 1) for _ in range(6)]
    inserts = [client.insert_async(table_name, {"x": [i]}) for i in range(6)]
    assert [f.result(timeout=5).data["x"][0] for f in samples] == list(range(6))
    assert all(f.result(timeout=5).shape == (1,) for f in inserts)


def test_dropping_a_table_fails_its_waiting_requests(client, table_name):
    make(client, table_name)
    future = client.sample_async(table_name, 1)
    time.sleep(0.05)
    client.drop_table(table_name)
    with pytest.raises(replayd.NotFound):
        future.result(timeout=5)


def test_reset_keeps_waiting_requests_waiting(client, table_name):
    make(client, table_name)
    future = client.sample_async(table_name, 1)
    client.reset(table_name)
    time.sleep(0.05)
    assert not future.done()
    client.insert(table_name, {"x": [3]})
    assert future.result(timeout=5).data["x"].tolist() == [3]


def test_a_silent_server_makes_calls_time_out_in_the_client():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        client = replayd.Client(f"tcp://127.0.0.1:{port}", timeout=0.3)
        start = time.monotonic()
        with pytest.raises(replayd.TimeoutError, match="no reply"):
            client.ping()
        assert time.monotonic() - start < 2
    finally:
        listener.close()


def test_a_peer_that_is_not_replayd_is_a_protocol_error():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def answer():
        conn, _ = listener.accept()
        conn.recv(1024)
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" + bytes(64))
        time.sleep(0.5)
        conn.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        client = replayd.Client(f"tcp://127.0.0.1:{port}", timeout=5)
        with pytest.raises(replayd.ConnectionLost, match="magic"):
            client.ping()
    finally:
        thread.join()
        listener.close()
