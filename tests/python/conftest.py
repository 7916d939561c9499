"""Fixtures for the replayd Python client tests.

The server binary is REPLAYD_BIN (default <repo>/build/service/replayd). One server runs
for the whole session on a temporary Unix socket and an ephemeral TCP port; tests that
stop or restart a server get their own (`make_server`).
"""
from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "client" / "python"))

import replayd  # noqa: E402

READY_TIMEOUT_S = 10.0
TRANSPORTS = ("unix", "tcp")


def server_binary() -> Path:
    return Path(os.environ.get("REPLAYD_BIN", REPO / "build" / "service" / "replayd"))


class ServerProcess:
    """A replayd server process on a Unix socket and/or a TCP port.

    `start` waits for the ready file; `stop` sends SIGTERM (SIGKILL after 10 s);
    `restart` starts again on the same socket path and TCP port. `cpus`: a CPU list for
    taskset (e.g. "0") to pin the server to, for tests of its scheduling.
    """

    def __init__(self, workdir: Path, *, unix: bool = True, tcp: bool = True,
                 extra_args: Optional[List[str]] = None, cpus: Optional[str] = None) -> None:
        self.workdir = workdir
        self.cpus = cpus
        self.unix_path = str(workdir / "replayd.sock") if unix else ""
        self.tcp_spec = "127.0.0.1:0" if tcp else ""
        self.extra_args = list(extra_args or [])
        self.proc: Optional[subprocess.Popen] = None
        self.ready: Dict[str, Any] = {}
        self.log_path = workdir / "replayd.log"
        self._starts = 0

    @property
    def unix_address(self) -> str:
        return f"unix://{self.ready['unix']}"

    @property
    def tcp_address(self) -> str:
        return f"tcp://{self.ready['tcp']}"

    def address(self, transport: str) -> str:
        return self.unix_address if transport == "unix" else self.tcp_address

    def start(self) -> "ServerProcess":
        binary = server_binary()
        if not binary.exists():
            pytest.fail(f"replayd binary not found at {binary}: build it (scripts/build) or "
                        f"set REPLAYD_BIN", pytrace=False)
        self._starts += 1
        ready_file = self.workdir / f"ready-{self._starts}.json"
        args = [str(binary), "--unix", self.unix_path, "--tcp", self.tcp_spec,
                "--ready-file", str(ready_file), *self.extra_args]
        if self.cpus is not None:
            args = ["taskset", "-c", self.cpus, *args]
        if "--metrics" not in self.extra_args and _supports_metrics_flag(binary):
            args += ["--metrics", ""]  # no metrics listener unless a test asks for one
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready_file.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"replayd exited with {self.proc.returncode} before it was "
                                   f"ready; log:\n{self.log_path.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"replayd not ready after {READY_TIMEOUT_S} s; log:\n"
                                   f"{self.log_path.read_text()[-3000:]}")
            time.sleep(0.02)
        self.ready = json.loads(ready_file.read_text())
        if self.tcp_spec:
            self.tcp_spec = self.ready["tcp"]  # keep the port across restarts
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> Optional[int]:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        return code

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self) -> "ServerProcess":
        self.stop()
        return self.start()


def resident_bytes(pid: int) -> int:
    """The resident memory (VmRSS) of process `pid`, in bytes."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


_METRICS_FLAG: Dict[str, bool] = {}


def _supports_metrics_flag(binary: Path) -> bool:
    key = str(binary)
    if key not in _METRICS_FLAG:
        out = subprocess.run([key, "--help"], capture_output=True, text=True, timeout=10)
        _METRICS_FLAG[key] = "--metrics" in (out.stdout + out.stderr)
    return _METRICS_FLAG[key]


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    """The shared server of the session."""
    with tempfile.TemporaryDirectory(prefix="replayd-test-") as tmp:
        proc = ServerProcess(Path(tmp)).start()
        try:
            yield proc
        finally:
            proc.stop()


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Starts private servers (for stop/restart tests); all are stopped at teardown."""
    started: List[ServerProcess] = []
    counter = itertools.count()

    def make(**kwargs: Any) -> ServerProcess:
        workdir = tmp_path / f"server{next(counter)}"
        workdir.mkdir()
        proc = ServerProcess(workdir, **kwargs).start()
        started.append(proc)
        return proc

    yield make
    for proc in started:
        proc.stop()


@pytest.fixture
def tiered(make_server: Callable[..., ServerProcess], tmp_path: Path) -> ServerProcess:
    """A server with a tier directory (docs/FILE_TIER.md) and 1 MiB segments, so that a test
    fills several."""
    config = tmp_path / "tier-config.json"
    config.write_text(json.dumps({"limits": {"tier_segment_bytes": 1 << 20}}))
    return make_server(extra_args=["--tier-dir", str(tmp_path / "tier"), "--config",
                                   str(config)])


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def address(server: ServerProcess, transport: str) -> str:
    """The shared server's address, once per transport."""
    return server.address(transport)


@pytest.fixture
def client(address: str) -> Iterator[replayd.Client]:
    with replayd.Client(address, timeout=30) as c:
        yield c


_TABLE_COUNTER = itertools.count()


@pytest.fixture
def table_name(request: pytest.FixtureRequest, server: ServerProcess) -> Iterator[str]:
    """A table name unique in the session; the table is dropped at teardown if it exists."""
    base = "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:40]
    name = f"{base}-{next(_TABLE_COUNTER)}"
    yield name
    with replayd.Client(server.unix_address, timeout=30) as c:
        try:
            c.drop_table(name)
        except replayd.NotFound:
            pass
