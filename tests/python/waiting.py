"""Polling for a condition the server reaches asynchronously (a pipelined request landing,
a request parking), for tests that must not assert before it can have happened."""
from __future__ import annotations

import time
from typing import Callable


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Polls `predicate` every 10 ms until it holds (True) or `timeout` seconds pass
    (False)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
