"""A pyzmq replay server holding numpy arrays: the do-it-yourself Ape-X replay server.

The server is one process with a ROUTER socket on an ipc:// (Unix socket) endpoint and a
ColumnStore (numpy columns, FIFO slots, numpy sum tree when prioritized). It serves one
request at a time, in arrival order. Messages are multipart: an op name, a small JSON
header, then raw column buffers (numpy arrays sent and received without pickling, viewed
with numpy.frombuffer).

Clients use a DEALER socket, so they can keep requests in flight: writer mode sends each
transition as its own message without waiting (replies are collected with a window of
64), pipelined mode keeps 8 batches in flight, prefetch mode 4 sample requests, and a
priority update travels without waiting for its reply.
"""
from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import zmq

from systems.arrays import ColumnStore
from systems.base import Batch, Endpoint, System
from workloads import Workload

__all__ = ["ZmqSystem"]

WRITER_WINDOW = 64  # single-transition inserts awaiting replies
PIPELINE_WINDOW = 8  # batches awaiting replies
_CTX = mp.get_context("fork")


def _columns(workload: Workload, header: Dict[str, Any],
             frames: List[Any]) -> Dict[str, np.ndarray]:
    n = header["n"]
    return {name: np.frombuffer(frame, dtype).reshape(n, *shape)
            for (name, dtype, shape), frame in zip(workload.fields, frames)}


def serve(endpoint: str, workload: Workload, prioritized: bool) -> None:
    """The server loop (its own process). Ops: insert, sample, update, stop."""
    store = ColumnStore(workload, prioritized)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.bind(endpoint)
    while True:
        peer, op, header_raw, *frames = sock.recv_multipart(copy=False)
        op = op.bytes
        header = json.loads(header_raw.bytes)
        if op == b"insert":
            store.insert(_columns(workload, header, frames))
            sock.send_multipart([peer, b"ok"])
        elif op == b"sample":
            data, slots, weights = store.sample(header["n"])
            sock.send_multipart([peer, slots.astype(np.int64), weights,
                                 *(data[name] for name, _, _ in workload.fields)], copy=False)
        elif op == b"update":
            store.update_priorities(np.frombuffer(frames[0], np.int64),
                                    np.frombuffer(frames[1], np.float64))
            sock.send_multipart([peer, b"ok"])
        elif op == b"stop":
            sock.send_multipart([peer, b"ok"])
            break
    sock.close(linger=0)
    ctx.term()


class ZmqEndpoint(Endpoint):
    native = frozenset({"writer", "pipelined", "prefetch"})

    def __init__(self, handle: Dict[str, Any]) -> None:
        self.workload: Workload = handle["workload"]
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.connect(handle["endpoint"])
        self.unacked = 0  # requests whose "ok" reply was not read yet

    def _send_insert(self, batch: Dict[str, Any], n: int) -> None:
        header = json.dumps({"n": n}).encode()
        frames = [np.ascontiguousarray(batch[name], dtype) for name, dtype, _ in self.workload.fields]
        self.sock.send_multipart([b"insert", header, *frames], copy=False)
        self.unacked += 1

    def _ack(self, keep: int = 0) -> None:
        while self.unacked > keep:
            self.sock.recv_multipart()
            self.unacked -= 1

    def insert_one(self, item: Dict[str, Any]) -> None:
        self._send_insert(item, 1)
        self._ack()

    def insert(self, batch: Dict[str, np.ndarray]) -> None:
        self._send_insert(batch, len(next(iter(batch.values()))))
        self._ack()

    def append(self, item: Dict[str, Any]) -> None:
        self._ack(WRITER_WINDOW - 1)
        self._send_insert(item, 1)

    def insert_pipelined(self, batch: Dict[str, np.ndarray]) -> None:
        self._ack(PIPELINE_WINDOW - 1)
        self._send_insert(batch, len(next(iter(batch.values()))))

    def _request_sample(self, n: int) -> None:
        self.sock.send_multipart([b"sample", json.dumps({"n": n}).encode()])

    def _receive_sample(self, n: int) -> Batch:
        while True:
            frames = self.sock.recv_multipart(copy=False)
            if len(frames) > 1:
                break
            self.unacked -= 1  # an "ok" of an earlier update or insert
        slots = np.frombuffer(frames[0], np.int64)
        weights = np.frombuffer(frames[1], np.float64)
        data = {name: np.frombuffer(frame, dtype).reshape(n, *shape)
                for (name, dtype, shape), frame in zip(self.workload.fields, frames[2:])}
        return Batch(data, slots, weights)

    def sample(self, n: int) -> Batch:
        self._request_sample(n)
        return self._receive_sample(n)

    def samples(self, n: int, prefetch: int) -> Iterator[Batch]:
        for _ in range(prefetch):
            self._request_sample(n)
        while True:
            batch = self._receive_sample(n)
            self._request_sample(n)
            yield batch

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        self.sock.send_multipart([b"update", b"{}", np.ascontiguousarray(keys, np.int64),
                                  np.ascontiguousarray(priorities, np.float64)], copy=False)
        self.unacked += 1

    def flush(self) -> None:
        self._ack()

    def close(self) -> None:
        self.sock.close(linger=0)
        self.ctx.term()


class ZmqSystem(System):
    name = "zmq"
    endpoint_type = ZmqEndpoint

    def __init__(self) -> None:
        self.proc: Optional[Any] = None
        self.endpoint = ""

    def create_store(self, workload: Workload, prioritized: bool, workdir: Path) -> Any:
        self.endpoint = f"ipc://{workdir / 'zmq.sock'}"
        self.proc = _CTX.Process(target=serve, args=(self.endpoint, workload, prioritized),
                                 daemon=True)
        self.proc.start()
        return {"endpoint": self.endpoint, "workload": workload}

    def destroy_store(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.join(10)
            self.proc = None

    @staticmethod
    def connect(handle: Any) -> Endpoint:
        return ZmqEndpoint(handle)
