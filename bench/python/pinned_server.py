"""A replayd server for a benchmark: started pinned to CPU 0 (taskset), listening on a Unix
socket in a temporary directory, and stopped when the block ends.

    with pinned_server(binary) as address:
        client = replayd.Client(address)
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import time
from typing import Iterator


@contextlib.contextmanager
def pinned_server(binary: str) -> Iterator[str]:
    """Yields the server's address (``unix://...``) once it is ready."""
    with tempfile.TemporaryDirectory() as tmp:
        socket, ready = f"{tmp}/s.sock", f"{tmp}/ready"
        server = subprocess.Popen(["taskset", "-c", "0", binary, "--unix", socket, "--tcp", "",
                                   "--metrics", "", "--ready-file", ready, "--log-level",
                                   "warn"])
        try:
            while not os.path.exists(ready):
                time.sleep(0.05)
            yield f"unix://{socket}"
        finally:
            server.terminate()
            server.wait()
