"""A progress line for long loads and exports: steps done, steps/s and time left, redrawn
at most 5 times a second on a terminal; nothing at all when stderr is not a terminal (a
pipe, a log file) unless asked. Used by one thread."""
from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

__all__ = ["Progress"]


class Progress:
    """`update(done)` with the steps done so far; `close()` ends the line."""

    def __init__(self, total: Optional[int], what: str = "steps",
                 enabled: Optional[bool] = None, stream: Optional[TextIO] = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = (self.stream.isatty() if enabled is None else enabled)
        self.total = total
        self.what = what
        self.start = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def update(self, done: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < 0.2:
            return
        self._last = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        line = f"{done:,}"
        if self.total:
            line += f"/{self.total:,}"
        line += f" {self.what}  {rate:,.0f} {self.what}/s"
        if self.total and rate > 0:
            left = max(self.total - done, 0) / rate
            line += f"  {int(left // 60)}:{int(left % 60):02d} left"
        self.stream.write("\r" + line.ljust(72))
        self.stream.flush()
        self._drawn = True

    def close(self, done: Optional[int] = None) -> None:
        if done is not None:
            self.update(done, force=True)
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
