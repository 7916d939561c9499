"""Access control against the real server: the shared token on TCP, the Unix socket's file
mode, and the refusal to listen beyond loopback without a token (docs/SECURITY.md)."""
from __future__ import annotations

import json
import os
import pickle
import stat
import subprocess

import numpy as np
import pytest

import replayd
from conftest import ServerProcess, server_binary
from raw_wire import RawConnection, error_code, frame, padded

TOKEN = "s3cret-token-for-tests"


@pytest.fixture
def config_file(tmp_path):
    def write(document):
        path = tmp_path / f"config-{len(list(tmp_path.glob('config-*')))}.json"
        path.write_text(json.dumps(document))
        return str(path)
    return write


@pytest.fixture
def guarded(make_server, config_file, monkeypatch):
    """A server whose TCP listener requires TOKEN (from the config file)."""
    monkeypatch.delenv("REPLAYD_TOKEN", raising=False)
    return make_server(extra_args=["--config", config_file({"auth": {"token": TOKEN}})])


def assert_refused(raw: RawConnection, request_id: int = 1) -> None:
    reply = raw.read_reply()
    assert reply is not None, "closed without saying why"
    assert reply[0] == request_id and error_code(reply[1]) == "unauthenticated", reply
    assert TOKEN not in json.dumps(reply[1])  # the reply never echoes the token
    assert raw.closed_by_server()


def test_the_right_token_opens_a_tcp_connection_for_everything(guarded):
    with replayd.Client(guarded.tcp_address, timeout=30, token=TOKEN) as client:
        client.create_table("t", {"x": (np.int64, ())}, 10)
        keys = client.insert("t", {"x": np.arange(3)})
        assert sorted(client.sample("t", 8).keys.tolist())[0] in keys.tolist()


@pytest.mark.parametrize("first", [
    {"op": "ping"},
    {"op": "info"},
    {"op": "hello", "protocol": 1},
    {"op": "hello", "token": TOKEN[:-1]},
    {"op": "hello", "token": TOKEN + "x"},
    {"op": "hello", "token": ""},
    {"op": "hello", "token": 12345},
    {"op": "hello", "token": [TOKEN]},
], ids=["ping first", "info first", "hello without token", "token too short",
        "token too long", "empty token", "token a number", "token in a list"])
def test_anything_but_hello_with_the_token_is_refused_and_closed(guarded, first):
    with RawConnection(guarded.tcp_address) as raw:
        raw.send(frame(first) + frame({"op": "ping"}, request_id=2))
        assert_refused(raw)


def test_a_large_frame_from_a_stranger_is_refused_from_its_header(guarded):
    with RawConnection(guarded.tcp_address) as raw:
        meta = {"op": "insert", "table": "t", "n": 1,
                "columns": [{"name": "x", "dtype": "int64", "shape": [1]}]}
        raw.send(frame(meta, padded(bytes(8)) * 100000)[:4096])  # 800 kB announced
        assert_refused(raw)


def test_a_hello_with_the_token_and_a_payload_is_refused(guarded):
    # docs/PROTOCOL.md: no payload before the token is accepted, not even a small one.
    with RawConnection(guarded.tcp_address) as raw:
        raw.send(frame({"op": "hello", "token": TOKEN}, bytes(16))
                 + frame({"op": "ping"}, request_id=2))
        assert_refused(raw)


def test_a_hello_with_the_token_and_an_unknown_key_is_refused(guarded):
    with RawConnection(guarded.tcp_address) as raw:
        raw.send(frame({"op": "hello", "token": TOKEN, "extra": 1})
                 + frame({"op": "ping"}, request_id=2))
        assert_refused(raw)


def test_malformed_json_as_the_first_request_is_refused(guarded):
    with RawConnection(guarded.tcp_address) as raw:
        raw.send(frame("{not json"))
        assert_refused(raw)


def test_after_hello_with_the_token_the_connection_is_normal(guarded):
    with RawConnection(guarded.tcp_address) as raw:
        hello = raw.call({"op": "hello", "protocol": 1, "token": TOKEN})
        assert hello["protocol"] == 1
        assert raw.call({"op": "ping"}, request_id=2) == {}
        assert raw.call({"op": "hello", "protocol": 1}, request_id=3)["protocol"] == 1


def test_the_unix_socket_needs_no_token(guarded):
    with replayd.Client(guarded.unix_address, timeout=30) as client:
        client.ping()


def test_a_client_without_the_token_gets_unauthenticated(guarded):
    with pytest.raises(replayd.Unauthenticated) as info:
        replayd.Client(guarded.tcp_address, timeout=30).ping()
    assert info.value.code == "unauthenticated"
    with pytest.raises(replayd.Unauthenticated, match="wrong token"):
        replayd.Client(guarded.tcp_address, timeout=30, token="guess").ping()


def test_the_client_reads_the_token_from_the_environment(guarded, monkeypatch):
    monkeypatch.setenv("REPLAYD_TOKEN", TOKEN)
    with replayd.Client(guarded.tcp_address, timeout=30) as client:
        client.ping()


def test_the_token_travels_with_a_pickled_handle(guarded, monkeypatch):
    monkeypatch.delenv("REPLAYD_TOKEN", raising=False)
    handle = pickle.loads(pickle.dumps(replayd.Client(guarded.tcp_address, timeout=30,
                                                      token=TOKEN)))
    handle.ping()
    handle.close()
    assert TOKEN not in repr(handle)


def test_the_environment_token_wins_over_the_config_file(make_server, config_file,
                                                         monkeypatch):
    monkeypatch.setenv("REPLAYD_TOKEN", "from-the-environment")
    proc = make_server(extra_args=["--config", config_file({"auth": {"token": TOKEN}})])
    with replayd.Client(proc.tcp_address, timeout=30, token="from-the-environment") as c:
        c.ping()
    with pytest.raises(replayd.ReplayError, match="wrong token"):
        replayd.Client(proc.tcp_address, timeout=30, token=TOKEN).ping()


def test_without_a_token_tcp_on_loopback_needs_none(server):
    with replayd.Client(server.tcp_address, timeout=30) as client:
        client.ping()


def test_the_unix_socket_is_group_accessible_by_default(server):
    mode = stat.S_IMODE(os.stat(server.ready["unix"]).st_mode)
    assert mode == 0o660


def test_the_unix_socket_mode_is_configurable(make_server, config_file):
    proc = make_server(extra_args=["--config", config_file({"listen": {"unix_mode": "0600"}})])
    assert stat.S_IMODE(os.stat(proc.ready["unix"]).st_mode) == 0o600
    with replayd.Client(proc.unix_address, timeout=30) as client:
        client.ping()


def run_binary(*args, env_token=None, timeout=10):
    env = {k: v for k, v in os.environ.items() if k != "REPLAYD_TOKEN"}
    if env_token is not None:
        env["REPLAYD_TOKEN"] = env_token
    return subprocess.run([str(server_binary()), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.mark.parametrize("address", ["0.0.0.0:0", "[::]:0"])
def test_the_server_refuses_to_listen_beyond_loopback_without_a_token(address):
    result = run_binary("--unix", "", "--tcp", address)
    assert result.returncode != 0
    assert "--insecure" in result.stderr and "token" in result.stderr


def test_a_bad_unix_mode_stops_the_server_naming_the_key(config_file):
    result = run_binary("--config", config_file({"listen": {"unix_mode": "0999"}}))
    assert result.returncode == 2 and "listen.unix_mode" in result.stderr


def test_a_token_with_spaces_is_rejected(config_file):
    result = run_binary("--config", config_file({"auth": {"token": "two words"}}))
    assert result.returncode == 2 and "auth.token" in result.stderr
    result = run_binary("--unix", "", "--tcp", "127.0.0.1:0", env_token="two words")
    assert result.returncode == 2 and "REPLAYD_TOKEN" in result.stderr


def test_insecure_allows_any_address_without_a_token(tmp_path, monkeypatch):
    monkeypatch.delenv("REPLAYD_TOKEN", raising=False)
    proc = ServerProcess(tmp_path, unix=False, extra_args=["--insecure"])
    proc.tcp_spec = "0.0.0.0:0"
    proc.start()
    try:
        port = proc.ready["tcp"].rsplit(":", 1)[1]
        with replayd.Client(f"tcp://127.0.0.1:{port}", timeout=30) as client:
            client.ping()
    finally:
        proc.stop()


def test_a_token_allows_any_address(tmp_path, monkeypatch):
    monkeypatch.setenv("REPLAYD_TOKEN", TOKEN)
    proc = ServerProcess(tmp_path, unix=False)
    proc.tcp_spec = "0.0.0.0:0"
    proc.start()
    try:
        port = proc.ready["tcp"].rsplit(":", 1)[1]
        with replayd.Client(f"tcp://127.0.0.1:{port}", timeout=30, token=TOKEN) as client:
            client.ping()
    finally:
        proc.stop()
