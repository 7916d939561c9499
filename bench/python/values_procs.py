"""The processes of bench/python/values_bench.py: explorers that fetch a published value
(replayd) or receive it from a PUB socket (pyzmq), and the publisher of both.

Each runs a loop of commands read from its end of a multiprocessing Pipe and answers on
it. They are forked before the parent opens any connection, and each opens its own
(a Client and a zmq Context are not carried across a fork). Times are time.monotonic(),
one clock for every process of the machine.

Contracts with the coordinator:
- Explorers fetch through the shared-memory plane (the value's sealed memfd, mapped) or
  with it turned off (the bytes through the Unix socket, as a fetch over TCP has them).
- A broadcast ends with a stop message: for replayd a version whose arrays hold STOP_KEY,
  for zmq a header of version -1. Explorers answer ("done", {"held": [(version, monotonic
  time the fetch or receive returned)] for every version they held (replayd's stop version
  included), "local_timeouts": fetches that raised replayd.TimeoutError}).
- zmq messages are [header, *arrays]: the header is one int64, the version (-1: stop,
  -2: a sync message, ignored outside a sync).
"""
from __future__ import annotations

import os
import time
from multiprocessing.connection import Connection
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

import replayd

try:
    import zmq
except ImportError:  # Debian: apt-get install python3-zmq
    zmq = None

VALUE = "policy"
BIG_VALUE = "big"
STOP_KEY = "__stop__"
STOP_VERSION, SYNC_VERSION = -1, -2


def header(version: int) -> bytes:
    return np.array([version], dtype=np.int64).tobytes()


def _header_version(frame: Any) -> int:
    return int(np.frombuffer(frame.buffer, dtype=np.int64)[0])


def set_process_cpus(cpus: set) -> None:
    """Pins every thread of this process (zmq's I/O thread and the Client's reader too)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass  # a thread that ended meanwhile


# --- explorers -------------------------------------------------------------------------

def explorer_main(pipe: Connection, address: str, endpoint: Optional[str]) -> None:
    clients = {True: replayd.Client(address, timeout=60),             # the plane's memfd
               False: replayd.Client(address, timeout=60, shm=False)}  # bytes on the socket
    sub = None
    if endpoint is not None and zmq is not None:
        sub = zmq.Context().socket(zmq.SUB)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(endpoint)
    holding: Optional[int] = None
    pipe.send(("started",))
    while True:
        command = pipe.recv()
        if command[0] == "replayd":
            pipe.send(("ready",))
            pipe.send(("done", _fetch_loop(clients[command[2]], newer_than=command[1])))
        elif command[0] == "zmq":
            pipe.send(("ready",))
            pipe.send(("done", _receive_loop(sub)))
        elif command[0] == "zmq_sync":
            pipe.send(("synced", _wait_for_sync(sub)))
        elif command[0] == "hold":  # the current version, through the socket
            holding = clients[False].fetch(VALUE, timeout=5).version
            pipe.send(("holding", holding))
        elif command[0] == "unchanged":
            pipe.send(("done", _unchanged_fetches(clients[False], command[1], command[2],
                                                  holding)))
        else:
            return


def _fetch_loop(client: replayd.Client, newer_than: int) -> Dict[str, Any]:
    """The explorer's loop: fetch(newer_than=mine, timeout=5) until the stop version.
    held: [(version, time)]; local_timeouts: fetches that raised replayd.TimeoutError (no
    reply within timeout + the Client's 2 s grace), after which the loop goes on."""
    held: List[Tuple[int, float]] = []
    mine, local_timeouts = newer_than, 0
    while True:
        try:
            version, arrays = client.fetch(VALUE, newer_than=mine, timeout=5)
        except replayd.TimeoutError:
            local_timeouts += 1
            continue
        now = time.monotonic()
        if arrays is None:
            continue  # the wait ended without a newer version
        assert version is not None
        mine = version
        held.append((version, now))  # the stop version too: an explorer that skipped
        if STOP_KEY in arrays:         # the last data versions holds a newer one from then
            return {"held": held, "local_timeouts": local_timeouts}
        del arrays


def _receive_loop(sub: Any) -> Dict[str, Any]:
    held: List[Tuple[int, float]] = []
    while sub.poll(20_000):
        frames = sub.recv_multipart(copy=False)
        version = _header_version(frames[0])
        if version == STOP_VERSION:
            return {"held": held, "local_timeouts": 0}
        if version == SYNC_VERSION:
            continue
        arrays = [np.frombuffer(f.buffer, dtype=np.float32) for f in frames[1:]]
        held.append((version, time.monotonic()))  # the arrays in hand, as fetch returns them
        del arrays, frames
    raise RuntimeError("no zmq stop message within 20 s")


def _wait_for_sync(sub: Any) -> bool:
    while sub.poll(10_000):
        if _header_version(sub.recv_multipart(copy=False)[0]) == SYNC_VERSION:
            return True
    return False


def _unchanged_fetches(client: replayd.Client, count: int, wait_s: float,
                       version: Optional[int]) -> Dict[str, int]:
    """`count` fetches of the version this explorer holds (timeout=0), then one that waits
    `wait_s` on the server: each should end without arrays."""
    without = 0
    for i in range(count + 1):
        _, got = client.fetch(VALUE, newer_than=version, timeout=wait_s if i == count else 0)
        without += got is None
    return {"fetches": count + 1, "without_arrays": without}


# --- the publisher ---------------------------------------------------------------------

def publisher_main(pipe: Connection, address: str, endpoint: Optional[str],
                   value_bytes: int, n_arrays: int) -> None:
    client = replayd.Client(address, timeout=120)
    state = _state_dict(value_bytes, n_arrays)
    pub = None
    if endpoint is not None and zmq is not None:
        pub = zmq.Context().socket(zmq.PUB)
        pub.bind(endpoint)
    own_cpus = os.sched_getaffinity(0)
    big: Dict[str, np.ndarray] = {}
    zmq_version = 0
    pipe.send(("started",))
    while True:
        command = pipe.recv()
        if command[0] == "replayd":
            pipe.send(("done", _publish_replayd(client, state, command[1], command[2])))
        elif command[0] == "zmq":
            set_process_cpus(command[3])
            records, zmq_version = _publish_zmq(pub, state, command[1], command[2], zmq_version)
            set_process_cpus(own_cpus)
            pipe.send(("done", records))
        elif command[0] == "publish_once":
            pipe.send(("done", client.publish(VALUE, state)))
        elif command[0] == "zmq_sync":
            while not pipe.poll(0.05):
                pub.send_multipart([header(SYNC_VERSION)])
            pipe.recv()
            pipe.send(("synced",))
        elif command[0] == "big_prepare":
            big = _state_dict(command[1], 16, fill=1.0)
            pipe.send(("ready",))
        elif command[0] == "big":
            pipe.send(("done", _publish_big(client, big, command[1])))
        elif command[0] == "big_free":
            big = {}
            pipe.send(("freed",))
        else:
            return


def _state_dict(total_bytes: int, n_arrays: int, fill: Optional[float] = None
                ) -> Dict[str, np.ndarray]:
    """n_arrays float32 arrays of total_bytes together, their pages touched."""
    per_array = total_bytes // 4 // n_arrays
    rng = np.random.default_rng(0)
    return {f"layer{i}.weight": (np.full(per_array, fill, dtype=np.float32) if fill is not None
                                 else rng.standard_normal(per_array, dtype=np.float32))
            for i in range(n_arrays)}


def _ticks(duration: float, period: float) -> List[float]:
    start = time.monotonic() + 0.1
    return [start + k * period for k in range(max(1, int(duration / period)))]


def _sleep_until(when: float) -> None:
    delay = when - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _publish_replayd(client: replayd.Client, state: Dict[str, np.ndarray], duration: float,
                     period: float) -> List[Tuple[int, float, float]]:
    """[(version, publish called, publish returned)], one publish every `period` s, then
    the stop version."""
    records = []
    for tick in _ticks(duration, period):
        _sleep_until(tick)
        called = time.monotonic()
        version = client.publish(VALUE, state)
        records.append((version, called, time.monotonic()))
    client.publish(VALUE, {STOP_KEY: np.zeros(1, dtype=np.float32)})
    return records


def _publish_zmq(pub: Any, state: Dict[str, np.ndarray], duration: float, period: float,
                 version: int) -> Tuple[List[Tuple[int, float, float]], int]:
    """As _publish_replayd through the PUB socket: the arrays as frames of one multipart
    message, not copied (copy=False)."""
    records = []
    arrays = list(state.values())
    for tick in _ticks(duration, period):
        _sleep_until(tick)
        version += 1
        called = time.monotonic()
        pub.send_multipart([header(version), *arrays], copy=False)
        records.append((version, called, time.monotonic()))
    pub.send_multipart([header(STOP_VERSION)])
    return records, version


def _publish_big(client: replayd.Client, big: Dict[str, np.ndarray], duration: float
                 ) -> List[Tuple[float, float]]:
    """Publishes `big` back to back for `duration` s (at least once): [(called, returned)]."""
    records = []
    end = time.monotonic() + duration
    while not records or time.monotonic() < end:
        called = time.monotonic()
        client.publish(BIG_VALUE, big)
        records.append((called, time.monotonic()))
    return records
