"""Client timeouts are honoured once (not twice), and a call that waits on a silent server
says so after replayd.wait_notice.WAIT_NOTICE_S instead of waiting without a word."""
from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time

import numpy as np
import pytest

import replayd
from replayd import wait_notice


def frozen(server):
    """The server stopped (SIGSTOP): connections stay open, nothing answers."""
    os.kill(server.proc.pid, signal.SIGSTOP)
    return server


def test_a_call_on_a_frozen_server_times_out_after_its_timeout_once(make_server):
    server = make_server()
    client = replayd.Client(server.unix_address)
    client.ping()
    frozen(server)
    try:
        started = time.monotonic()
        with pytest.raises(replayd.TimeoutError):
            client.ping(timeout=1.0)
        elapsed = time.monotonic() - started
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert 0.9 <= elapsed < 1.5, elapsed


def test_connecting_to_a_frozen_server_times_out_after_its_timeout_once(make_server):
    server = make_server()
    frozen(server)
    try:
        started = time.monotonic()
        with pytest.raises((replayd.TimeoutError, replayd.ConnectionLost)):
            replayd.Client(server.unix_address, timeout=1.0).ping()
        elapsed = time.monotonic() - started
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert elapsed < 1.5, elapsed


def test_a_call_without_a_timeout_on_a_silent_server_logs_a_notice(make_server, monkeypatch,
                                                                   caplog):
    monkeypatch.setattr(wait_notice, "WAIT_NOTICE_S", 0.3)
    server = make_server()
    client = replayd.Client(server.unix_address)
    client.ping()
    frozen(server)
    caplog.set_level(logging.WARNING, logger="replayd")
    thaw = threading.Timer(0.8, os.kill, (server.proc.pid, signal.SIGCONT))
    thaw.start()
    try:
        client.ping()  # answered once the server runs again
    finally:
        thaw.join()
    notices = [r.getMessage() for r in caplog.records if "no reply to ping" in r.getMessage()]
    assert len(notices) == 1, caplog.text
    assert "the server may be frozen" in notices[0]


def test_a_call_with_a_timeout_logs_no_notice_and_fails_at_its_timeout(make_server,
                                                                        monkeypatch, caplog):
    """A client with timeout=60 does not warn at WAIT_NOTICE_S that it waits without one:
    the call fails at its timeout, saying it had no reply."""
    monkeypatch.setattr(wait_notice, "WAIT_NOTICE_S", 0.2)
    server = make_server()
    client = replayd.Client(server.unix_address, timeout=60)
    client.ping()
    frozen(server)
    caplog.set_level(logging.WARNING, logger="replayd")
    try:
        with pytest.raises(replayd.TimeoutError, match="no reply .* within 0.8 s"):
            client.create_table("t", {"x": (np.float32, ())}, 10, timeout=0.8)
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    assert [r.getMessage() for r in caplog.records if r.name == "replayd"] == []


def test_connecting_where_nothing_listens_says_so_and_how_to_start_a_server(tmp_path):
    missing = tmp_path / "nope.sock"
    with pytest.raises(replayd.ConnectionLost) as failure:
        replayd.Client(f"unix://{missing}").ping()
    message = failure.value.message
    assert f"no server listens there (no socket file {missing})" in message, message
    assert "./scripts/run" in message and "unix:///tmp/replayd.sock" in message
    assert f"--unix {missing}" in message
    stale = tmp_path / "stale.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(stale))
    listener.close()  # the file stays, nothing listens
    with pytest.raises(replayd.ConnectionLost, match="left from one that stopped"):
        replayd.Client(f"unix://{stale}").ping()
    port_holder = socket.socket()
    port_holder.bind(("127.0.0.1", 0))
    port = port_holder.getsockname()[1]  # bound, never listening: connections are refused
    try:
        with pytest.raises(replayd.ConnectionLost,
                           match=f"no server listens on port {port} of 127.0.0.1.*--tcp "
                                 f"127.0.0.1:{port}"):
            replayd.Client(f"tcp://127.0.0.1:{port}").ping()
    finally:
        port_holder.close()
