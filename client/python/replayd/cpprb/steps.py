"""How a replayd.cpprb buffer stores its transitions: as the steps of an episodic table
(docs/TRAJECTORIES.md), because only an episodic table can be read back in insertion order
(``read_steps``), which get_all_transitions, save_transitions and _encode_sample need.

- Each buffer object appends, per process, to one open episode of its own; on_episode_end
  ends it (a new one opens at the next add). The server knows the episode's writer by the
  connection, which is the Client's connection of that process.
- An episodic table needs a scalar float reward field: a float value of shape (1,) of the
  buffer (stored as a scalar) serves, ``rew`` or ``reward`` first; a buffer without one has
  one more field, HIDDEN_REWARD (float32, always 0), that is never shown.
- A sample draws the stored steps as items. A table with frame fields takes the server's
  1-step sample instead, whose extra columns (``discount``, ``steps``, the return in
  HIDDEN_REWARD) are dropped.

Used by replayd.cpprb only.
"""
from __future__ import annotations

import collections
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Deque, Dict, List, Optional

import numpy as np

from .. import requests
from ..columns import InsertBatch, decode_keys
from ..writer import Writer

if TYPE_CHECKING:
    from ..client import Client

HIDDEN_REWARD = "_cpprb_unused_reward"
SAMPLE_EXTRAS = (HIDDEN_REWARD, "discount", "steps")  # columns a 1-step sample adds
READ_EXTRAS = (HIDDEN_REWARD, "key", "episode", "position", "sequence", "end",
               "version")  # read_steps adds
RESERVED = ("discount", "steps", "key", "episode", "position", "sequence", HIDDEN_REWARD)


def send_steps(client: "Client", table: str, batch: InsertBatch, episode: int
               ) -> "Future[np.ndarray[Any, Any]]":
    """Sends ``append_steps`` of `batch` to `episode` on the process's connection without
    waiting (staged over the shared-memory plane when it can be: `Client.send_steps`);
    the future holds the steps' keys."""
    return client.send_steps(table, batch, np.full(batch.n, episode, dtype="<u8"))


class Episode:
    """The episode a buffer object appends to in this process: opened on first use (one
    round trip), ended by `end` (one round trip, after what was sent before it). The
    server ends a connection's episodes when it closes, so after a reconnect the next
    append opens a new episode on the new connection."""

    def __init__(self, client: "Client", table: str) -> None:
        self.client = client
        self.table = table
        self.id: Optional[int] = None
        self.has_steps = False
        self._conn: Any = None  # the connection that opened `id`
        # The last transition given to the writer for this episode (its frame values;
        # replayd.cpprb.pixel_frames), None before the first: whether the next one continues it.
        self.previous: Optional[Dict[str, "np.ndarray[Any, Any]"]] = None

    def current(self) -> int:
        conn = self.client.connection()
        if self.id is None or self._conn is not conn:
            reply = self.client._call({"op": "open_episodes", "table": self.table, "n": 1})
            self.id = int(reply["episodes"][0])
            self.has_steps = False
            self._conn = conn
        return self.id

    def end(self) -> None:
        """Ends the episode (terminated) if it has steps; the next add opens a new one."""
        self.previous = None
        if self.id is None or not self.has_steps:
            return  # an empty episode stays open for the next add
        if self._conn is self.client.connection():  # else the server ended it already
            self.client._call({"op": "end_episode", "table": self.table,
                               "episode": self.id, "terminated": True})
        self.id = None


class RingKeys:
    """The key of the item at each ring position, as far as this process has seen it (from
    its adds' replies and its samples): what update_priorities sends for a ring position.
    A ring position is the key's slot (``key & mask``, Storage's key layout: the table's
    FIFO fills its slots in ring order); 0 marks a position whose key is not known (no key
    is 0). With `sampled_only` (cpprb's check_for_update and MP buffers) an add forgets its
    positions' keys instead: only a sample makes a position updatable again. Used by the
    buffer's thread only (adds' keys are taken from their futures by `absorb`)."""

    def __init__(self, capacity: int, sampled_only: bool = False) -> None:
        self.mask = np.uint64((1 << max(1, (capacity - 1).bit_length())) - 1)
        self.keys = np.zeros(capacity, np.uint64)
        self.sampled_only = sampled_only
        self.batches: Deque["Future[Any]"] = collections.deque()  # adds' keys to come

    def __getstate__(self) -> Dict[str, Any]:
        self.absorb()
        state = dict(self.__dict__)
        state["batches"] = collections.deque()
        return state

    def absorb(self) -> None:
        """Notes the keys of the adds whose replies came."""
        while self.batches and self.batches[0].done():
            future = self.batches.popleft()
            if future.exception() is None:
                self.note_added(future.result())

    def positions(self, keys: "np.ndarray[Any, Any]") -> "np.ndarray[Any, Any]":
        """The ring positions of `keys` (uint64, as cpprb's indexes)."""
        positions: "np.ndarray[Any, Any]" = np.asarray(keys, np.uint64) & self.mask
        return positions

    def note(self, keys: "np.ndarray[Any, Any]") -> None:
        """Keys sampled (or read): their positions take priority updates."""
        self.absorb()
        keys = np.asarray(keys, np.uint64)
        self.keys[keys & self.mask] = keys

    def note_added(self, keys: "np.ndarray[Any, Any]") -> None:
        """Keys of steps just stored."""
        keys = np.asarray(keys, np.uint64)
        self.keys[keys & self.mask] = 0 if self.sampled_only else keys

    def watch(self, n: int, future: "Future[Any]") -> None:
        """The writer sent `n` steps; `future` holds their keys."""
        self.absorb()
        self.batches.append(future)

    def clear(self) -> None:
        self.keys[:] = 0


class StepWriter(Writer):
    """A Writer whose batches are appended to the buffer's current episode; `ring`
    (RingKeys or FrameRing), when given, watches each batch sent for its keys."""

    # Over the shared-memory plane (docs/SHM.md) its batches are staged appends.
    _STAGES_APPENDS = True

    def __init__(self, client: "Client", table: str, batch: int, episode: Episode,
                 ring: Any = None) -> None:
        self._episode = episode
        self._ring = ring
        super().__init__(client, table, batch)

    def _submit(self, batch: InsertBatch) -> "Future[Any]":
        future = send_steps(self._client, self._table, batch, self._episode.current())
        return self._sent(batch, future)

    def _submit_staged(self, batch: InsertBatch, staging: Any) -> "Future[Any]":
        """An append whose rows (and the episode's id beside each) are in the current
        staging slot, on the connection that holds the arena."""
        episode = self._episode.current()
        if staging.conn is not self._client.connection():  # reconnected: the socket
            return self._submit(batch)
        meta = requests.insert_meta(self._table, batch, None)
        meta["op"] = "append_steps"
        meta["staged"] = staging.meta()
        staging.episode_ids()[:batch.n] = episode
        return self._sent(batch, staging.conn.submit(meta, (), decode_keys)[1])

    def _sent(self, batch: InsertBatch, future: "Future[Any]") -> "Future[Any]":
        self._episode.has_steps = True
        if self._ring is not None:
            self._ring.watch(batch.n, future)
        return future


def with_hidden(columns: Dict[str, "np.ndarray[Any, Any]"], n: int, hidden: Optional[str]
                ) -> Dict[str, "np.ndarray[Any, Any]"]:
    """`columns` and, when the table has one, its hidden reward field's n zeros."""
    if hidden is None:
        return columns
    out = dict(columns)
    out[hidden] = np.zeros(n, dtype=np.float32)
    return out


def read_ordered(client: "Client", table: str) -> Dict[str, "np.ndarray[Any, Any]"]:
    """Every stored step, oldest first: the fields and each step's ``key``, ``episode`` and
    ``position`` (copied out of the replies)."""
    pages: List[Dict[str, "np.ndarray[Any, Any]"]] = list(client.read_all(table))
    schema = client.schema(table)
    names = [f.name for f in schema.fields if f.name != HIDDEN_REWARD]
    if not pages:
        empty = {f.name: np.zeros((0, *f.shape), dtype=f.dtype)
                 for f in schema.fields if f.name != HIDDEN_REWARD}
        empty["key"] = np.zeros(0, np.uint64)
        empty["episode"] = np.zeros(0, np.uint64)
        empty["position"] = np.zeros(0, np.uint64)
        return empty
    return {name: np.concatenate([page[name] for page in pages])
            for name in [*names, "key", "episode", "position"]}
