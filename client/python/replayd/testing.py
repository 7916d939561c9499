"""Throwaway replayd servers for tests and notebooks.

    with replayd.testing.server() as srv:          # a context manager
        client = replayd.Client(srv.address)

    def test_something(replayd_server):            # a pytest fixture (one server per test)
        client = replayd.Client(replayd_server.address)

`server()` starts the replayd binary on a Unix socket in a new temporary directory (no TCP
and no metrics listener unless asked), waits until it listens, and on exit stops it
(SIGTERM, then SIGKILL after `stop_timeout` seconds) and removes the directory. The binary
is `binary=`, else the ``REPLAYD_BIN`` environment variable, else ``replayd`` on PATH.

The fixture is registered as a pytest plugin when the package is installed with pip; from a
checkout, ``from replayd.testing import replayd_server`` in a conftest.py does the same.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any, Dict, Iterator, Optional

__all__ = ["ReplaydServer", "server", "find_binary", "replayd_server"]

_READY_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 10.0


def find_binary(binary: Optional[str] = None) -> str:
    """The server binary: `binary`, else ``$REPLAYD_BIN``, else ``replayd`` on PATH.
    Raises FileNotFoundError saying where it looked."""
    candidate = binary or os.environ.get("REPLAYD_BIN")
    if candidate:
        if not os.path.isfile(candidate) or not os.access(candidate, os.X_OK):
            source = "binary=" if binary else "REPLAYD_BIN"
            raise FileNotFoundError(f"replayd binary not found: {source} is {candidate!r}, "
                                    f"which is not an executable file")
        return candidate
    found = shutil.which("replayd")
    if found is None:
        raise FileNotFoundError("replayd binary not found: set REPLAYD_BIN to its path "
                                "(e.g. build/service/replayd) or put it on PATH "
                                "(`cmake --install build --prefix DIR` installs DIR/bin/replayd)")
    return found


class ReplaydServer:
    """A running server started by `server()`.

    Attributes:
        address: ``unix://...`` of its socket (pass it to replayd.Client).
        tcp_address: ``tcp://127.0.0.1:PORT`` when started with ``tcp=True``, else None.
        workdir: its temporary directory (socket, log, data directory if any).
        process: the subprocess.Popen.
    """

    def __init__(self, process: "subprocess.Popen[bytes]", ready: Dict[str, Any],
                 workdir: Path, log_path: Path) -> None:
        self.process = process
        self.workdir = workdir
        self.log_path = log_path
        self.address = f"unix://{ready['unix']}"
        self.tcp_address: Optional[str] = f"tcp://{ready['tcp']}" if ready.get("tcp") else None
        self.pid = int(ready.get("pid", process.pid))

    def log(self) -> str:
        """What the server wrote to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = _STOP_TIMEOUT_S) -> Optional[int]:
        """SIGTERM, then SIGKILL after `timeout` seconds; returns the exit code. Idempotent."""
        return _stop(self.process, timeout)

    def __repr__(self) -> str:
        state = "running" if self.process.poll() is None else \
            f"exited {self.process.returncode}"
        return f"<replayd server {self.address} pid {self.process.pid} {state}>"


@contextlib.contextmanager
def server(*args: str, binary: Optional[str] = None, config: Optional[str] = None,
           tcp: bool = False, ready_timeout: float = _READY_TIMEOUT_S,
           stop_timeout: float = _STOP_TIMEOUT_S) -> Iterator[ReplaydServer]:
    """Starts a server, yields it once it listens, stops it on exit.

    Args:
        args: more flags for the server (``"--data-dir", path``, ...; see ``replayd --help``).
        binary: the server binary (default: see `find_binary`).
        config: a JSON config file (docs/CONFIG.md); its listen addresses are overridden.
            Without one the server starts with no tables.
        tcp: also listen on an ephemeral TCP port of 127.0.0.1.
        ready_timeout: seconds to wait for the server to listen.
        stop_timeout: seconds between SIGTERM and SIGKILL on exit.
    Raises FileNotFoundError (no binary) or RuntimeError with the server's log when it
    exits or does not listen within `ready_timeout`.
    """
    path = find_binary(binary)
    with tempfile.TemporaryDirectory(prefix="replayd-") as tmp:
        workdir = Path(tmp)
        ready_file = workdir / "ready.json"
        log_path = workdir / "replayd.log"
        command = [path, *(["--config", config] if config else []),
                   "--unix", str(workdir / "replayd.sock"),
                   "--tcp", "127.0.0.1:0" if tcp else "", "--metrics", "",
                   "--ready-file", str(ready_file), *args]
        log: IO[bytes]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL)
        try:
            ready = _wait_ready(process, ready_file, log_path, ready_timeout)
            running = ReplaydServer(process, ready, workdir, log_path)
            yield running
        finally:
            _stop(process, stop_timeout)


def _stop(process: "subprocess.Popen[bytes]", timeout: float) -> Optional[int]:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def _wait_ready(process: "subprocess.Popen[bytes]", ready_file: Path, log_path: Path,
                timeout: float) -> Dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        if ready_file.exists():
            try:
                ready: Dict[str, Any] = json.loads(ready_file.read_text())
                return ready
            except ValueError:
                pass  # being written
        if process.poll() is not None:
            raise RuntimeError(f"replayd exited with code {process.returncode} before it "
                               f"listened; its log:\n{_tail(log_path)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"replayd did not listen within {timeout:g} s; its log:\n"
                               f"{_tail(log_path)}")
        time.sleep(0.01)


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return "(no log)"


def _fixture() -> Any:
    try:
        import pytest
    except ImportError:
        return None

    @pytest.fixture
    def replayd_server() -> Iterator[ReplaydServer]:
        """A replayd server of its own for the test (see replayd.testing.server)."""
        with server() as running:
            yield running

    return replayd_server


replayd_server: Any = _fixture()
