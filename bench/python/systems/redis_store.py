"""Redis 7 as the replay store (redis-server on a Unix socket, no persistence), through
redis-py with pipelining and Lua scripts.

Layout: hash `data` maps slot -> one transition packed as a numpy record (bytes);
`cursor` counts items ever inserted (slot = cursor % capacity). Prioritized stores also
keep `mass`, a string of capacity float64 values (priority^0.6 per slot, written with
SETRANGE) and `max_mass`.
- insert: one EVALSHA reserves the slots (INCRBY) and HSETs the items: one round trip per
  call. Writer mode queues one EVALSHA per transition in a pipeline sent every 64.
- uniform sample: one EVALSHA draws the slots server-side (from random numbers the client
  passes) and returns the packed items.
- prioritized sample: numpy proportional sampling in the client: one round trip fetches
  `mass` and `cursor` (O(capacity) bytes), cumsum + searchsorted picks the slots, a second
  round trip HMGETs them. Priority updates are one EVALSHA, sent in the same pipeline as
  the next sample's fetch.
Prefetch mode keeps 4 uniform sample scripts in one pipeline; pipelined inserts send 8
batches per pipeline.
"""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import redis

from systems.arrays import PRIORITY_EXPONENT, importance_weights
from systems.base import Batch, Endpoint, System
from workloads import Workload

__all__ = ["RedisSystem"]

PIPELINE_ITEMS = 64  # writer mode: transitions per pipeline
PIPELINE_BATCHES = 8  # pipelined mode: batches per pipeline

INSERT = """
local n = #ARGV - 2
local cap = tonumber(ARGV[1])
local first = redis.call('INCRBY', KEYS[1], n) - n
local prioritized = ARGV[2] == '1'
local mass = prioritized and redis.call('GET', KEYS[4]) or nil
for i = 1, n do
  local slot = (first + i - 1) % cap
  redis.call('HSET', KEYS[2], slot, ARGV[i + 2])
  if prioritized then redis.call('SETRANGE', KEYS[3], slot * 8, mass) end
end
return first
"""
SAMPLE_UNIFORM = """
local cap = tonumber(ARGV[1])
local size = math.min(tonumber(redis.call('GET', KEYS[1]) or '0'), cap)
local slots = {}
for i = 2, #ARGV do slots[i - 1] = math.floor(tonumber(ARGV[i]) * size) end
local items = redis.call('HMGET', KEYS[2], unpack(slots))
return {slots, items}
"""
UPDATE = """
local slots, masses = ARGV[1], ARGV[2]
local max = tonumber(redis.call('GET', KEYS[2]) and struct.unpack('<d', redis.call('GET', KEYS[2])) or 0)
for i = 0, #slots / 8 - 1 do
  local slot = struct.unpack('<I8', slots, i * 8 + 1)
  local m = string.sub(masses, i * 8 + 1, i * 8 + 8)
  redis.call('SETRANGE', KEYS[1], slot * 8, m)
  local v = struct.unpack('<d', m)
  if v > max then max = v end
end
redis.call('SET', KEYS[2], struct.pack('<d', max))
return 0
"""
KEYS_INSERT = ("cursor", "data", "mass", "max_mass")


class RedisEndpoint(Endpoint):
    native = frozenset({"writer", "pipelined", "prefetch"})

    def __init__(self, handle: Dict[str, Any]) -> None:
        self.r = redis.Redis(unix_socket_path=handle["socket"])
        self.workload: Workload = handle["workload"]
        self.record = self.workload.record_dtype
        self.capacity = self.workload.capacity
        self.prioritized = handle["prioritized"]
        self.insert_sha = self.r.script_load(INSERT)
        self.sample_sha = self.r.script_load(SAMPLE_UNIFORM)
        self.update_sha = self.r.script_load(UPDATE)
        self.rng = np.random.default_rng()
        self.writes = self.r.pipeline(transaction=False)
        self.queued = 0
        self.pending_update: Optional[List[bytes]] = None

    def _pack(self, batch: Dict[str, Any], n: int) -> List[bytes]:
        records = np.empty(n, self.record)
        for name in self.record.names:
            records[name] = batch[name]
        raw = records.tobytes()
        size = self.record.itemsize
        return [raw[i * size:(i + 1) * size] for i in range(n)]

    def _insert_args(self, packed: List[bytes]) -> List[Any]:
        return [self.insert_sha, 4, *KEYS_INSERT, self.capacity,
                1 if self.prioritized else 0, *packed]

    def insert_one(self, item: Dict[str, Any]) -> None:
        self.r.execute_command("EVALSHA", *self._insert_args(self._pack(item, 1)))

    def insert(self, batch: Dict[str, np.ndarray]) -> None:
        n = len(next(iter(batch.values())))
        self.r.execute_command("EVALSHA", *self._insert_args(self._pack(batch, n)))

    def append(self, item: Dict[str, Any]) -> None:
        self.writes.execute_command("EVALSHA", *self._insert_args(self._pack(item, 1)))
        self.queued += 1
        if self.queued >= PIPELINE_ITEMS:
            self.flush()

    def insert_pipelined(self, batch: Dict[str, np.ndarray]) -> None:
        n = len(next(iter(batch.values())))
        self.writes.execute_command("EVALSHA", *self._insert_args(self._pack(batch, n)))
        self.queued += PIPELINE_ITEMS
        if self.queued >= PIPELINE_ITEMS * PIPELINE_BATCHES:
            self.flush()

    def flush(self) -> None:
        if self.queued:
            self.writes.execute()
            self.queued = 0
        if self.pending_update is not None:
            self.r.execute_command("EVALSHA", *self.pending_update)
            self.pending_update = None

    def _unpack(self, slots: Any, items: List[bytes]) -> Batch:
        records = np.frombuffer(b"".join(items), self.record)
        data = {name: records[name] for name in self.record.names}
        return Batch(data, np.asarray(slots, dtype=np.int64), np.ones(len(items)))

    def _uniform_args(self, n: int) -> List[Any]:
        return [self.sample_sha, 2, "cursor", "data", self.capacity,
                *self.rng.random(n).tolist()]

    def sample(self, n: int) -> Batch:
        if self.prioritized:
            return self._sample_prioritized(n)
        slots, items = self.r.execute_command("EVALSHA", *self._uniform_args(n))
        return self._unpack(slots, items)

    def samples(self, n: int, prefetch: int) -> Iterator[Batch]:
        if self.prioritized:
            while True:
                yield self._sample_prioritized(n)
        pipe = self.r.pipeline(transaction=False)
        while True:
            for _ in range(prefetch):
                pipe.execute_command("EVALSHA", *self._uniform_args(n))
            for slots, items in pipe.execute():
                yield self._unpack(slots, items)

    def _sample_prioritized(self, n: int) -> Batch:
        pipe = self.r.pipeline(transaction=False)
        if self.pending_update is not None:
            pipe.execute_command("EVALSHA", *self.pending_update)
            self.pending_update = None
        pipe.get("mass")
        pipe.get("cursor")
        mass_raw, cursor = pipe.execute()[-2:]
        size = min(int(cursor), self.capacity)
        mass = np.frombuffer(mass_raw, np.float64, size)
        cumulative = np.cumsum(mass)
        total = cumulative[-1]
        slots = np.searchsorted(cumulative, self.rng.random(n) * total, side="right")
        np.minimum(slots, size - 1, out=slots)
        items = self.r.hmget("data", slots.tolist())
        batch = self._unpack(slots, items)
        batch.weights = importance_weights(mass[slots] / total, size)
        return batch

    def update_priorities(self, keys: np.ndarray, priorities: np.ndarray) -> None:
        masses = np.asarray(priorities, dtype="<f8") ** PRIORITY_EXPONENT
        if self.pending_update is not None:
            self.r.execute_command("EVALSHA", *self.pending_update)
        self.pending_update = [self.update_sha, 2, "mass", "max_mass",
                               np.asarray(keys, "<u8").tobytes(), masses.tobytes()]

    def close(self) -> None:
        self.flush()
        self.r.close()


class RedisSystem(System):
    name = "redis"
    endpoint_type = RedisEndpoint

    def __init__(self) -> None:
        self.proc: Optional[subprocess.Popen] = None

    def create_store(self, workload: Workload, prioritized: bool, workdir: Path) -> Any:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server not found: scripts/bench-python installs it")
        sock = workdir / "redis.sock"
        self.proc = subprocess.Popen(
            [binary, "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", str(workdir),
             "--maxmemory", "0", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        client = redis.Redis(unix_socket_path=str(sock))
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except (redis.ConnectionError, FileNotFoundError):
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.destroy_store()
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)
        if prioritized:
            client.set("mass", bytes(8 * workload.capacity))
            client.set("max_mass", np.float64(1.0).tobytes())
        client.close()
        return {"socket": str(sock), "workload": workload, "prioritized": prioritized}

    def destroy_store(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    @staticmethod
    def connect(handle: Any) -> Endpoint:
        return RedisEndpoint(handle)
