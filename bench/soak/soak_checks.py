"""What the long soak checks, separated from running it: the durability model across
kills, the memory bound of docs/OPERATIONS.md and the learner's rate windows.

Durability model. A snapshot holds every item whose insert the server applied before its
fork. An insert whose reply the client received before the snapshot started was applied
before it, so it must be in the snapshot; one acknowledged later may or may not be. The
server logs each completed snapshot (`snapshot PATH: ... in D ms`, at completion), so its
start is the log time minus D. After a restart the log names the file restored. The items
a snapshot must hold are then: those its server process restored at start (the items the
restored file had to hold, recursively) plus those that process acknowledged before the
snapshot started. Nothing is ever evicted (the table's capacity exceeds every insert of the
run) or deleted, so every such key must still be live, and `update_priorities` says exactly
which keys are not (its `stale` count).
"""
from __future__ import annotations

import datetime
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from soak_roles import ACK_RECORD

# Slack between the duration the server measures and its log line's timestamp.
START_MARGIN_S = 0.02
_SNAPSHOT_DONE = re.compile(r"^\[([0-9-]+ [0-9:.]+)\] \[info\] snapshot (\S+): \d+ tables, "
                            r"(\d+) items, \d+ bytes in ([0-9.]+) ms")
_RESTORED = re.compile(r"table '([^']+)': restored (\d+) items from (\S+)")


def _log_time(stamp: str) -> float:
    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp()


@dataclass
class Incarnation:
    """One run of the server between a start and a kill."""
    number: int
    log_path: Path
    restored_from: Optional[str] = None   # snapshot file restored at start
    restored_items: int = 0
    snapshots: Dict[str, float] = field(default_factory=dict)  # completed: path -> start s

    def parse_log(self, table: str) -> None:
        for line in self.log_path.read_text(errors="replace").splitlines():
            done = _SNAPSHOT_DONE.match(line)
            if done:
                stamp, path, _items, duration_ms = done.groups()
                self.snapshots[path] = _log_time(stamp) - float(duration_ms) / 1000
                continue
            restored = _RESTORED.search(line)
            if restored and restored.group(1) == table:
                self.restored_items = int(restored.group(2))
                self.restored_from = restored.group(3)


def read_records(paths: List[Path]) -> List[np.ndarray]:
    """Every explorer's acknowledged items so far (a row cut by a concurrent write is
    left out)."""
    out = []
    for path in paths:
        raw = path.read_bytes() if path.exists() else b""
        raw = raw[:len(raw) - len(raw) % ACK_RECORD.itemsize]
        out.append(np.frombuffer(raw, ACK_RECORD))
    return out


class DurabilityModel:
    """Which keys each completed snapshot must hold. Records are split by incarnation
    with the ack times: an incarnation's acks lie between its ready time and its kill."""

    def __init__(self) -> None:
        self.must_hold: Dict[str, np.ndarray] = {}  # snapshot path -> keys it must hold
        self.anomalies: List[str] = []  # failures of the check
        self.notes: List[str] = []      # worth reporting, not failures

    def required_after_restart(self, killed: Incarnation, started: Incarnation,
                               records: List[np.ndarray], window: Tuple[float, float]
                               ) -> np.ndarray:
        """The keys that must be live after `started` restored its snapshot; also notes
        what each snapshot `killed` completed must hold. `window`: the ready times of
        `killed` and of `started`, which bound the ack times of the items of `killed`."""
        base = self.held_by(killed.restored_from)
        acked = np.concatenate(records) if records else np.zeros(0, ACK_RECORD)
        mine = acked[(acked["ack_s"] >= window[0]) & (acked["ack_s"] <= window[1])]
        for path, start_s in killed.snapshots.items():
            covered = mine["key"][mine["ack_s"] < start_s - START_MARGIN_S]
            self.must_hold[path] = np.union1d(base, covered)
        newest = max(killed.snapshots, key=killed.snapshots.get) if killed.snapshots \
            else killed.restored_from
        restored = started.restored_from
        if restored is not None and restored not in self.must_hold and \
                (newest is None or Path(restored).name > Path(newest).name):
            # Written and renamed by `killed`, which died before it could log the
            # completion: a complete snapshot newer than every logged one.
            self.notes.append(f"start {started.number} restored {restored}, completed but "
                              f"not yet reported when the server was killed")
            self.must_hold[restored] = self.held_by(newest)
        elif restored != newest:
            self.anomalies.append(f"start {started.number} restored {restored}, not the "
                                  f"last snapshot completed before the kill ({newest})")
        return self.held_by(restored)

    def held_by(self, path: Optional[str]) -> np.ndarray:
        """The keys the snapshot file `path` must hold (none for no file)."""
        if path is None:
            return np.zeros(0, np.uint64)
        if path not in self.must_hold:
            self.anomalies.append(f"restored {path}, whose completion no log recorded")
            return np.zeros(0, np.uint64)
        return self.must_hold[path]


def missing_keys(client, table: str, keys: np.ndarray, chunk: int = 16384) -> np.ndarray:
    """The keys of `keys` that are not live in `table`, found with update_priorities's
    `stale` count (bisecting chunks that have any). Sets their priorities to 1."""
    missing: List[np.ndarray] = []

    def probe(part: np.ndarray) -> None:
        stale = client.update_priorities(table, part, np.ones(len(part)))
        if stale == 0:
            return
        if stale == len(part) or len(part) == 1:
            missing.append(part)
            return
        probe(part[:len(part) // 2])
        probe(part[len(part) // 2:])

    for start in range(0, len(keys), chunk):
        probe(keys[start:start + chunk])
    return np.concatenate(missing) if missing else np.zeros(0, np.uint64)


def memory_bound(limits: Dict[str, int], listeners: int) -> Dict[str, int]:
    """docs/OPERATIONS.md, Worst-case memory, with these limits, no token and no metrics
    listener: tables + per connection (64 KiB + M + 4 F + Q) x C per listener + a
    snapshot's copy-on-write (at most the tables again)."""
    tables = limits["max_tables"] * limits["max_table_bytes"]
    per_connection = (64 << 10) + limits["max_meta_bytes"] + 4 * limits["max_frame_bytes"] \
        + limits["max_queued_reply_bytes"]
    connections = per_connection * limits["max_connections"] * listeners
    return {"tables": tables, "connections": connections, "snapshot_copy": tables,
            "total": 2 * tables + connections}


def learner_windows(per_second: Dict[int, int], excluded: List[Tuple[float, float]],
                    first_s: float, last_s: float) -> List[int]:
    """Items sampled in each whole second in [first_s, last_s) that overlaps none of the
    `excluded` intervals (restart windows)."""
    rates = []
    for second in range(int(first_s) + 1, int(last_s)):
        if any(lo < second + 1 and second < hi for lo, hi in excluded):
            continue
        rates.append(per_second.get(second, 0))
    return rates


def summarize_rates(rates: List[int]) -> Tuple[int, float]:
    return (min(rates), statistics.median(rates)) if rates else (0, 0.0)
