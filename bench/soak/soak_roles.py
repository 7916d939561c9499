"""Client processes of the long soak (bench/soak/soak.py): explorers and learners.

Each runs until `stop` (a multiprocessing Event) is set, pinned to the client CPU, and puts
one report dict on `results` when it ends. Errors are recorded with their wall-clock time so
the driver can tell connection losses at a kill from anything else; a role never dies of an
error, it records it and carries on (a new writer, a new call).
"""
from __future__ import annotations

import os
import threading
import time
import traceback
from typing import Any, Dict, List, Tuple

import numpy as np

import replayd
from replayd.errors import ConnectionLost
from replayd.writer import Writer

TABLE_FIELDS = {"obs": (np.float32, (4,)), "act": (np.int64, ()), "rew": (np.float32, ()),
                "next_obs": (np.float32, (4,)), "done": (np.uint8, ()),
                "explorer": (np.int32, ()), "seq": (np.int64, ())}
# One acknowledged item as an explorer records it (its records file is an array of these).
ACK_RECORD = np.dtype([("seq", "<i8"), ("key", "<u8"), ("ack_s", "<f8")])
BATCH_ITEMS = 64
LEARNER_BATCH = 256


def is_connection_error(exc: BaseException) -> bool:
    """A failure a kill of the server explains: the connection closed or was refused."""
    return isinstance(exc, (ConnectionLost, ConnectionError, OSError, EOFError))


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def pin_to(cpu: int) -> None:
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        pass  # fewer CPUs than asked for: run unpinned


class AckTimedWriter(Writer):
    """A Writer that notes, for every batch the server confirms, the wall-clock time its
    reply arrived, its keys and the `seq` values of its items (copied at send: the batch
    arrays are reused right after). Acks are appended by the connection's reader thread
    to `acks`, a list the owner drains."""

    def __init__(self, client: replayd.Client, table: str, acks: List[Any], **kw: Any) -> None:
        super().__init__(client, table, **kw)
        self._acks = acks
        self._seq_column = [c["name"] for c in self._full_columns].index("seq")

    def _submit(self, batch: Any) -> Any:
        seqs = np.array(batch.arrays[self._seq_column][:batch.n], dtype=np.int64)
        future = super()._submit(batch)
        acks = self._acks

        def note(done: Any) -> None:
            if done.exception() is None:
                acks.append((time.time(), seqs, np.asarray(done.result(), np.uint64)))

        future.add_done_callback(note)
        return future


def _drain(acks: List[Any], out: Any) -> int:
    """Writes the acks noted so far to the records file; returns how many items."""
    n = 0
    while acks:
        ack_s, seqs, keys = acks.pop(0)
        rows = np.empty(len(seqs), ACK_RECORD)
        rows["seq"], rows["key"], rows["ack_s"] = seqs, keys, ack_s
        out.write(rows.tobytes())
        n += len(seqs)
    out.flush()
    return n


def explorer(address: str, table: str, index: int, records_path: str, rate: float,
             cpu: int, stop: Any, results: Any) -> None:
    """Appends W1-sized items at `rate` items/s through an AckTimedWriter, each carrying
    its explorer index and a per-explorer sequence number that only grows (`seq`, also in
    `act`), and records every acknowledged item in `records_path`. After an error the
    writer is dropped (its unconfirmed batches are lost, never counted) and a new one made."""
    pin_to(cpu)
    report: Dict[str, Any] = {"role": "explorer", "index": index, "appended": 0, "acked": 0,
                              "writers": 0, "errors": []}
    acks: List[Any] = []
    obs = np.zeros(4, np.float32)
    seq = 0
    started = time.monotonic()
    try:
        client = replayd.Client(address, timeout=10, name=f"soak-explorer-{index}")
        with open(records_path, "ab") as out:
            while not stop.is_set():
                try:
                    writer = AckTimedWriter(client, table, acks, batch=BATCH_ITEMS,
                                            max_in_flight=4, timeout=5.0)
                    report["writers"] += 1
                    while not stop.is_set():
                        for _ in range(BATCH_ITEMS):
                            obs[0] = seq
                            writer.append({"obs": obs, "act": seq, "rew": float(index),
                                           "next_obs": obs, "done": 0, "explorer": index,
                                           "seq": seq})
                            seq += 1
                        report["appended"] += BATCH_ITEMS
                        report["acked"] += _drain(acks, out)
                        ahead_s = seq / rate - (time.monotonic() - started)
                        if ahead_s > 0:
                            time.sleep(ahead_s)
                    writer.close()
                except Exception as exc:  # noqa: BLE001 - every error is recorded
                    report["errors"].append((time.time(), is_connection_error(exc),
                                             describe(exc)))
                    time.sleep(0.1)
                report["acked"] += _drain(acks, out)
            report["acked"] += _drain(acks, out)
    except Exception:  # noqa: BLE001
        report["errors"].append((time.time(), False, traceback.format_exc()))
    results.put(report)


def learner(address: str, table: str, index: int, cpu: int, stop: Any, results: Any) -> None:
    """Samples LEARNER_BATCH items and updates their priorities, over and over; counts the
    items sampled in each wall-clock second and checks every sampled item's data against
    its `seq` and `explorer` fields (act == seq, rew == explorer, obs[0] == float32(seq))."""
    pin_to(cpu)
    report: Dict[str, Any] = {"role": "learner", "index": index, "sampled": 0, "updates": 0,
                              "per_second": {}, "errors": [], "corrupt": 0}
    per_second: Dict[int, int] = report["per_second"]
    rng = np.random.default_rng(index)
    try:
        client = replayd.Client(address, timeout=10, name=f"soak-learner-{index}")
        while not stop.is_set():
            try:
                sample = client.sample(table, LEARNER_BATCH, timeout=5.0)
                data = sample.data
                bad = ((data["act"] != data["seq"])
                       | (data["rew"] != data["explorer"].astype(np.float32))
                       | (data["obs"][:, 0] != data["seq"].astype(np.float32)))
                report["corrupt"] += int(bad.sum())
                client.update_priorities(table, sample.keys, rng.random(len(sample.keys)) + 0.01)
                second = int(time.time())
                per_second[second] = per_second.get(second, 0) + len(sample.keys)
                report["sampled"] += len(sample.keys)
                report["updates"] += 1
            except Exception as exc:  # noqa: BLE001 - every error is recorded
                report["errors"].append((time.time(), is_connection_error(exc), describe(exc)))
                time.sleep(0.1)
    except Exception:  # noqa: BLE001
        report["errors"].append((time.time(), False, traceback.format_exc()))
    results.put(report)


def rss_sampler(pid_of: Any, samples: List[Tuple[float, int]], stop: threading.Event) -> None:
    """Every second, appends (time, VmRSS bytes) of the process `pid_of()` names (the
    current server; None while it is restarting)."""
    while not stop.wait(1.0):
        pid = pid_of()
        if pid is None:
            continue
        try:
            with open(f"/proc/{pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        samples.append((time.time(), int(line.split()[1]) * 1024))
                        break
        except OSError:
            pass  # it was just killed
