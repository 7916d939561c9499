"""replayd.testing: a throwaway server as a context manager and as a pytest fixture."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import replayd
import replayd.testing
from replayd.testing import replayd_server  # noqa: F401  (the fixture, as a user imports it)

from conftest import server_binary


@pytest.fixture(autouse=True)
def binary_in_environment(monkeypatch):
    monkeypatch.setenv("REPLAYD_BIN", str(server_binary()))


def test_server_serves_on_a_temporary_unix_socket_and_stops_on_exit():
    with replayd.testing.server() as srv:
        assert srv.address.startswith("unix://") and srv.tcp_address is None
        socket_path = Path(srv.address[len("unix://"):])
        with replayd.Client(srv.address, timeout=10) as client:
            client.create_table("t", {"x": (np.float32, 2)}, 10)
            client.insert("t", {"x": np.ones((3, 2), np.float32)})
            assert client.size("t") == 3
        assert socket_path.exists()
    assert srv.process.poll() == 0  # stopped cleanly by SIGTERM
    assert not socket_path.parent.exists()


def test_server_loads_a_config_and_listens_on_tcp_when_asked():
    config = Path(__file__).resolve().parents[2] / "config" / "replayd.json"
    with replayd.testing.server(config=str(config), tcp=True) as srv:
        assert srv.tcp_address is not None and not srv.tcp_address.endswith(":7700")
        with replayd.Client(srv.tcp_address, timeout=10) as client:
            assert client.tables() == ["replay"]


def test_server_binary_is_found_on_path(monkeypatch, tmp_path):
    link = tmp_path / "replayd"
    link.symlink_to(server_binary())
    monkeypatch.delenv("REPLAYD_BIN")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert replayd.testing.find_binary() == str(link)
    with replayd.testing.server() as srv:
        replayd.Client(srv.address, timeout=10).ping()


def test_missing_binary_names_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setenv("REPLAYD_BIN", str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match="REPLAYD_BIN"):
        with replayd.testing.server():
            pass
    monkeypatch.delenv("REPLAYD_BIN")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError,  # and where an installed one comes from
                       match=r"on PATH \(`cmake --install build --prefix DIR` installs "
                             r"DIR/bin/replayd\)"):
        replayd.testing.find_binary()


def test_a_server_that_cannot_start_raises_with_its_log():
    with pytest.raises(RuntimeError, match="exited with code") as info:
        with replayd.testing.server("--log-level", "no-such-level"):
            pass
    assert "no-such-level" in str(info.value) or "log-level" in str(info.value)


def test_fixture_gives_each_test_a_running_server(replayd_server):  # noqa: F811
    with replayd.Client(replayd_server.address, timeout=10) as client:
        assert client.tables() == []
    assert replayd_server.process.poll() is None
