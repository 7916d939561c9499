"""A replayd server for a benchmark: started pinned to CPU 0 (taskset), listening on a Unix
socket in a temporary directory, and stopped when the block ends.

    with pinned_server(binary) as address:
        client = replayd.Client(address)
    with pinned_server(binary, limits={"learner_share": 0}) as address:  # a --config file
        ...
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import time
from typing import Any, Iterator, List, Mapping, Optional, Sequence, Tuple


@contextlib.contextmanager
def pinned_server(binary: str, limits: Optional[Mapping[str, Any]] = None,
                  extra_args: Sequence[str] = (), log_level: str = "warn") -> Iterator[str]:
    """Yields the server's address (``unix://...``) once it is ready. `limits`: the config
    file's "limits" (docs/CONFIG.md), e.g. {"learner_share": 0}; `extra_args`: more of the
    server's flags (``--tier-dir DIR``); `log_level`: what the server logs (to this
    process's stdout)."""
    with pinned_server_process(binary, limits, extra_args, log_level) as (address, _pid):
        yield address


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far, all its threads."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def pinned_server_process(binary: str, limits: Optional[Mapping[str, Any]] = None,
                          extra_args: Sequence[str] = (),
                          log_level: str = "warn") -> Iterator[Tuple[str, int]]:
    """`pinned_server`, yielding the server's process id too (address, pid)."""
    with tempfile.TemporaryDirectory() as tmp:
        socket, ready = f"{tmp}/s.sock", f"{tmp}/ready"
        config: List[str] = []
        if limits:
            with open(f"{tmp}/config.json", "w") as out:
                json.dump({"limits": dict(limits)}, out)
            config = ["--config", f"{tmp}/config.json"]
        server = subprocess.Popen(["taskset", "-c", "0", binary, "--unix", socket, "--tcp", "",
                                   "--metrics", "", "--ready-file", ready, "--log-level",
                                   log_level, *config, *extra_args])
        try:
            while not os.path.exists(ready):
                time.sleep(0.05)
            yield f"unix://{socket}", server.pid
        finally:
            server.terminate()
            server.wait()
