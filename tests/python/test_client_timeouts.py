"""Client timeouts are honoured once (not twice), and a call that waits on a silent server
says so after replayd.wait_notice.WAIT_NOTICE_S instead of waiting without a word."""
from __future__ import annotations

import logging
import os
import signal
import time

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


def test_a_call_that_waits_on_a_silent_server_logs_a_notice(make_server, monkeypatch, caplog):
    monkeypatch.setattr(wait_notice, "WAIT_NOTICE_S", 0.3)
    server = make_server()
    client = replayd.Client(server.unix_address)
    client.ping()
    frozen(server)
    caplog.set_level(logging.WARNING, logger="replayd")
    try:
        started = time.monotonic()
        with pytest.raises(replayd.TimeoutError):
            client.ping(timeout=0.8)
        assert time.monotonic() - started < 1.3
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    notices = [r.getMessage() for r in caplog.records if "no reply to ping" in r.getMessage()]
    assert len(notices) == 1, caplog.text
    assert "the server may be frozen" in notices[0]
