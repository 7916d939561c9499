"""The client processes of bench/python/plane_soak.py: writers that stage rows through the
shared-memory plane and learners that sample them over it, both reconnecting after the
server is killed.

Every value of a row derives from its id (`rows`), so a learner or the driver tells a torn
row (values of two items) or a foreign one (an id nobody wrote yet) from a whole one.
Writer w writes ids w * ID_SPAN, w * ID_SPAN + 1, ... and never skips one: after a lost
connection it goes on from its last acknowledged id + 1.

Each process publishes its counters in a shared array (`WriterSlots`, `LearnerSlots`)
that the driver reads while it runs; a role never dies of an error the kill explains
(ConnectionLost, a refused connect), it counts it and reconnects. Any other error is
counted by name and the role reconnects too; the driver reports it.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

import replayd
from replayd.errors import ConnectionLost, ReplayError

WIDE = 256  # float32 values of the wide field: 1 KiB a row
ID_SPAN = 1 << 40  # writer w's ids are w * ID_SPAN + 0, 1, 2, ...
RECONNECT_PAUSE_S = 0.02


def fields() -> Dict[str, Any]:
    return {"id": ("int64", ()), "wide": ("float32", (WIDE,)), "check": ("uint64", ())}


def rows(ids: Any) -> Dict[str, np.ndarray]:
    """The rows of `ids`: every value derives from the id (exact in float32: below 2^24)."""
    ids = np.asarray(ids, dtype=np.int64)
    wide = (ids[:, None] % 65521 + np.arange(WIDE, dtype=np.int64)).astype(np.float32)
    check = (ids.astype(np.uint64) * np.uint64(2654435761)) ^ np.uint64(0x5bd1e995)
    return {"id": ids, "wide": wide, "check": check}


def torn_rows(data: Dict[str, np.ndarray]) -> int:
    """How many rows of `data` differ anywhere from the row their id names."""
    expected = rows(data["id"])
    bad = data["check"] != expected["check"]
    bad |= (data["wide"] != expected["wide"]).any(axis=1)
    return int(bad.sum())


def foreign_rows(ids: np.ndarray, sent: Sequence[int]) -> int:
    """How many `ids` no writer has written: outside every writer's range, or past the
    last id writer w had handed to its Writer (`sent[w]`)."""
    writer = ids // ID_SPAN
    known = (ids >= 0) & (writer < len(sent))
    last = np.asarray(sent, dtype=np.int64)[np.where(known, writer, 0)]
    return int((~known | (ids > last)).sum())


class WriterSlots:
    """A writer's counters in shared memory. `segment_start`, `acked` and `incarnation` are
    updated together under the array's lock: the writer's current connection was made to
    the server of `incarnation` and every id in [segment_start, acked] was acknowledged
    on it (acked < segment_start: none yet)."""
    SEGMENT_START, ACKED, INCARNATION, SENT, APPENDED, ACK_COUNT, RECONNECTS, \
        NOT_STAGED, OTHER_ERRORS, BUDGET_REACHED = range(10)
    SIZE = 10


class LearnerSlots:
    CHECKED, TORN, FOREIGN, SAMPLES, UPDATES, RECONNECTS, CHANGED_ROWS, NOT_ON_PLANE, \
        OTHER_ERRORS = range(9)
    SIZE = 9


def _close_quietly(client: Optional[replayd.Client]) -> None:
    if client is not None:
        try:
            client.close()
        except Exception:
            pass


class Reconnected(Exception):
    """The writer's connection died between flushes, or changed during one (the client
    reconnects by itself): its batches may have gone to two servers, so none of them
    counts as acknowledged, and the writer waits for the driver before it reconnects."""


def run_writer(w: int, address: str, table: str, flush_every: int, rate: float,
               budget: int, slots: Any, incarnation: Any, may_connect: Any, stop: Any,
               errors: Any) -> None:
    """Appends ids w * ID_SPAN, ... through a staged Writer, `flush_every` at a time, at
    about `rate` rows/s (0: as fast as it can); publishes the last id of each flush that
    returned as acknowledged. Stops appending after `budget` ids (so that the table never
    evicts). Connects only while `may_connect` is set."""
    first = w * ID_SPAN
    acked = first - 1
    next_due = time.monotonic()
    while not stop.is_set():
        if not may_connect.wait(0.1):
            continue
        client: Optional[replayd.Client] = None
        try:
            client = replayd.Client(address, timeout=10, shm=True)
            conn = client.connection()
            writer = client.writer(table, max_in_flight=4)
            if not writer.staged:
                with slots.get_lock():
                    slots[WriterSlots.NOT_STAGED] += 1
            with slots.get_lock():
                slots[WriterSlots.SEGMENT_START] = acked + 1
                slots[WriterSlots.ACKED] = acked
                slots[WriterSlots.INCARNATION] = incarnation.value  # read once connected
            while not stop.is_set():
                start = acked + 1
                if start - first + flush_every > budget:
                    slots[WriterSlots.BUDGET_REACHED] = 1
                    stop.wait(0.5)
                    continue
                if not conn.alive:  # else a send would open a connection to a new server
                    raise Reconnected()
                ids = np.arange(start, start + flush_every, dtype=np.int64)
                chunk = rows(ids)
                slots[WriterSlots.SENT] = max(slots[WriterSlots.SENT], int(ids[-1]))
                for i in range(flush_every):
                    writer.append({"id": chunk["id"][i], "wide": chunk["wide"][i],
                                   "check": chunk["check"][i]})
                slots[WriterSlots.APPENDED] += flush_every
                writer.flush()
                if client.connection() is not conn:
                    raise Reconnected()
                acked = int(ids[-1])
                with slots.get_lock():
                    slots[WriterSlots.ACKED] = acked
                    slots[WriterSlots.ACK_COUNT] += flush_every
                if rate > 0:
                    next_due += flush_every / rate
                    now = time.monotonic()
                    if next_due > now:
                        time.sleep(next_due - now)
                    elif now - next_due > 1.0:
                        next_due = now  # behind after a restart: no burst to catch up
        except (ConnectionLost, OSError, Reconnected):
            slots[WriterSlots.RECONNECTS] += 1
            time.sleep(RECONNECT_PAUSE_S)
        except ReplayError as exc:
            slots[WriterSlots.OTHER_ERRORS] += 1
            errors.put(f"writer {w}: {type(exc).__name__}: {exc}")
            time.sleep(RECONNECT_PAUSE_S)
        finally:
            _close_quietly(client)


def run_learner(index: int, address: str, table: str, batch: int, slots: Any,
                writer_slots: List[Any], stop: Any, errors: Any) -> None:
    """Samples `table` over the plane `batch` rows at a time (a Sampler keeping requests
    in flight), checks each row whole and written by a writer, and sets new priorities for
    the batch's keys."""
    rng = np.random.default_rng(index)
    while not stop.is_set():
        client: Optional[replayd.Client] = None
        try:
            client = replayd.Client(address, timeout=10, shm=True)
            plane = client.plane_table(table)
            if plane is None:
                slots[LearnerSlots.NOT_ON_PLANE] += 1
            changed_before = slots[LearnerSlots.CHANGED_ROWS]  # of earlier connections
            with client.sampler(table, batch, prefetch=4) as sampler:
                while not stop.is_set():
                    sample = next(sampler)
                    sent = [s[WriterSlots.SENT] for s in writer_slots]  # after the draw
                    torn = torn_rows(sample.data)
                    foreign = foreign_rows(sample.data["id"], sent)
                    client.update_priorities(table, sample.keys,
                                             rng.uniform(0.1, 10.0, len(sample.keys)))
                    with slots.get_lock():
                        slots[LearnerSlots.CHECKED] += len(sample.keys)
                        slots[LearnerSlots.TORN] += torn
                        slots[LearnerSlots.FOREIGN] += foreign
                        slots[LearnerSlots.SAMPLES] += 1
                        slots[LearnerSlots.UPDATES] += len(sample.keys)
                        if plane is not None:
                            slots[LearnerSlots.CHANGED_ROWS] = changed_before + plane.changed_rows
        except (ConnectionLost, OSError):
            slots[LearnerSlots.RECONNECTS] += 1
            time.sleep(RECONNECT_PAUSE_S)
        except ReplayError as exc:
            slots[LearnerSlots.OTHER_ERRORS] += 1
            errors.put(f"learner {index}: {type(exc).__name__}: {exc}")
            time.sleep(RECONNECT_PAUSE_S)
        finally:
            _close_quietly(client)
