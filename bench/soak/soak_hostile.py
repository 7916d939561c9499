"""The hostile client mix of the long soak, one process, run throughout (kills included):

- slow readers: pipeline sample requests and never read a reply (the server stops reading
  them at max_queued_reply_bytes and closes them after write_timeout_ms);
- half frames: send a header and part of the frame it announces, then stall (closed by
  idle_timeout_ms);
- connect floods: open more idle TCP connections than max_connections, hold, close;
- malformed frames: random bytes, bad header fields, lengths over the limits, bad JSON,
  each on a fresh connection, the reply (or close) read.

Frames come from tests/python/raw_wire.py. Every action is counted; a refused connect (the
server is restarting) is counted too and ignored.
"""
from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))
from raw_wire import RawConnection, frame, header  # noqa: E402

from soak_roles import pin_to  # noqa: E402

SLOW_READERS = 4
SLOW_READER_REQUESTS = 64
HALF_FRAMES = 8
HOLD_S = 30.0            # longest a stalled connection is kept open by us
FLOOD_EVERY_S = 10.0
FLOOD_HOLD_S = 3.0
MALFORMED_EVERY_S = 0.2


def _malformed_frames(table: str, max_meta_bytes: int, max_frame_bytes: int
                      ) -> List[Tuple[str, Callable[[random.Random], bytes]]]:
    ping = b'{"op":"ping"}'
    return [
        ("random bytes", lambda r: r.randbytes(r.randint(1, 512))),
        ("bad magic", lambda r: frame({"op": "ping"}, magic=b"XPLY")),
        ("bad version", lambda r: frame({"op": "ping"}, version=r.choice([0, 2, 255]))),
        ("bad kind", lambda r: frame({"op": "ping"}, kind=r.choice([0, 2, 255]))),
        ("bad flags", lambda r: frame({"op": "ping"}, flags=1 << r.randint(0, 15))),
        ("meta over the limit", lambda r: header(max_meta_bytes + 1)),
        ("frame over the limit",
         lambda r: header(len(ping), max_frame_bytes) + ping),
        ("meta not JSON", lambda r: frame(r.randbytes(r.randint(1, 64)))),
        ("unknown op", lambda r: frame({"op": "format_disk"})),
        ("sample of 2^40", lambda r: frame({"op": "sample", "table": table, "n": 1 << 40,
                                            "timeout_ms": 0})),
        ("insert with short payload",
         lambda r: frame({"op": "insert", "table": table, "n": 1, "priorities": False,
                          "timeout_ms": 0,
                          "columns": [{"name": "x", "dtype": "int64", "shape": [1]}]},
                         b"\0" * 8)),
    ]


class Hostile:
    def __init__(self, unix: str, tcp: str, table: str, limits: Dict[str, int]) -> None:
        self.unix, self.tcp, self.table = unix, tcp, table
        self.limits = limits
        self.rng = random.Random(1)
        self.counts: Dict[str, int] = {"slow_readers": 0, "half_frames": 0,
                                       "flood_connections": 0, "floods": 0,
                                       "malformed_frames": 0, "malformed_replies": 0,
                                       "malformed_closed": 0, "slow_readers_closed_by_server": 0,
                                       "half_frames_closed_by_server": 0,
                                       "refused": 0}
        self.stalled: List[Tuple[float, str, RawConnection]] = []  # (opened at, kind, conn)
        self.malformed = _malformed_frames(table, limits["max_meta_bytes"],
                                           limits["max_frame_bytes"])

    def connect(self, address: str) -> Any:
        try:
            return RawConnection(address, timeout=2.0)
        except OSError:
            self.counts["refused"] += 1
            return None

    def open_slow_reader(self) -> None:
        conn = self.connect(self.unix)
        if conn is None:
            return
        request = frame({"op": "sample", "table": self.table, "n": 256, "timeout_ms": 0})
        try:
            conn.sock.setblocking(False)
            try:  # as much as the socket takes; a full send buffer is the point
                for _ in range(SLOW_READER_REQUESTS):
                    conn.sock.send(request)
            except (BlockingIOError, InterruptedError):
                pass
            self.stalled.append((time.monotonic(), "slow_reader", conn))
            self.counts["slow_readers"] += 1
        except OSError:
            conn.close()

    def open_half_frame(self) -> None:
        address = self.unix if self.rng.random() < 0.5 else self.tcp
        conn = self.connect(address)
        if conn is None:
            return
        whole = frame({"op": "ping", "pad": "x" * 100})
        try:
            conn.send(whole[:self.rng.randint(1, len(whole) - 1)])
            self.stalled.append((time.monotonic(), "half_frame", conn))
            self.counts["half_frames"] += 1
        except OSError:
            conn.close()

    def reap_stalled(self) -> None:
        """Closes our stalled connections older than HOLD_S; counts those the server
        closed first (its timeouts at work)."""
        keep = []
        for opened, kind, conn in self.stalled:
            if time.monotonic() - opened < HOLD_S:
                keep.append((opened, kind, conn))
                continue
            if self.closed_by_server(conn):
                self.counts[f"{kind}s_closed_by_server"] += 1
            conn.close()
        self.stalled = keep

    @staticmethod
    def closed_by_server(conn: RawConnection) -> bool:
        """Reads whatever the server sent (replies, a timeout notice) up to EOF: True if
        the server has closed the connection, False if it is still open."""
        try:
            conn.sock.setblocking(True)
            conn.sock.settimeout(0.05)
            for _ in range(1024):
                if not conn.sock.recv(1 << 20):
                    return True
        except OSError:  # a timeout (still open) or a reset
            return False
        return False

    def flood(self) -> None:
        conns = []
        for _ in range(self.limits["max_connections"] + 16):
            conn = self.connect(self.tcp)
            if conn is not None:
                conns.append(conn)
        self.counts["flood_connections"] += len(conns)
        self.counts["floods"] += 1
        time.sleep(FLOOD_HOLD_S)
        for conn in conns:
            conn.close()

    def send_malformed(self) -> None:
        name, build = self.rng.choice(self.malformed)
        conn = self.connect(self.unix if self.rng.random() < 0.5 else self.tcp)
        if conn is None:
            return
        self.counts["malformed_frames"] += 1
        self.counts[f"malformed: {name}"] = self.counts.get(f"malformed: {name}", 0) + 1
        try:
            conn.send(build(self.rng))
            reply = conn.read_reply(timeout=2.0)
            self.counts["malformed_replies" if reply is not None else "malformed_closed"] += 1
        except Exception:  # noqa: BLE001 - a random prefix may never complete a frame
            pass
        finally:
            conn.close()

    def run(self, stop: Any) -> None:
        next_flood = time.monotonic() + FLOOD_EVERY_S
        while not stop.is_set():
            self.reap_stalled()
            kinds = [kind for _, kind, _ in self.stalled]
            if kinds.count("slow_reader") < SLOW_READERS:
                self.open_slow_reader()
            if kinds.count("half_frame") < HALF_FRAMES:
                self.open_half_frame()
            if time.monotonic() >= next_flood:
                self.flood()
                next_flood = time.monotonic() + FLOOD_EVERY_S
            self.send_malformed()
            time.sleep(MALFORMED_EVERY_S)
        for _, _, conn in self.stalled:
            conn.close()


def hostile(unix: str, tcp: str, table: str, limits: Dict[str, int], cpu: int, stop: Any,
            results: Any) -> None:
    pin_to(cpu)
    mix = Hostile(unix, tcp, table, limits)
    report: Dict[str, Any] = {"role": "hostile", "errors": []}
    try:
        mix.run(stop)
    except Exception as exc:  # noqa: BLE001
        report["errors"].append((time.time(), False, f"{type(exc).__name__}: {exc}"))
    report["counts"] = mix.counts
    results.put(json.loads(json.dumps(report)))

