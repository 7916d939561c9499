"""Episodic tables (docs/TRAJECTORIES.md): an EpisodeWriter that appends steps of one or
more environments' episodes, and the decoders of the episodic replies.

EpisodeWriter buffers steps and sends them `batch` at a time (``append_steps``), so there
is no round trip per step; it opens episodes as it needs them (``open_episodes``) and ends
them on request (``end_episode``, after sending the episode's buffered steps). The server
knows the writer by its connection: a writer whose process dies or whose connection is
lost mid-episode leaves its open episodes ended as *truncated*, their steps kept.

Threading: one thread uses a writer. It holds a private connection of its own (its
identity as the episodes' writer), and pickles as its Client, table and options: an
unpickled writer opens new episodes in the process that uses it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from . import requests
from .columns import convert_item, decode_keys, prepare_insert
from .errors import InvalidArgument, ProtocolError
from .sample import Sample

if TYPE_CHECKING:
    from .client import Client
    from .connection import Connection

__all__ = ["EpisodeWriter", "decode_columns", "decode_sequences"]


class EpisodeWriter:
    """Appends steps of `envs` concurrent episodes to an episodic table.

    Args:
        client: the server's Client (the writer opens its own connection from it).
        table: an episodic table.
        envs: environments written in parallel (env = 0 .. envs-1).
        batch: steps per ``append_steps`` request.
        timeout: seconds each request may wait (server-side, for the rate limiter).

    ``append(env=i, **step)`` buffers one step of env i's current episode (a new episode
    starts at the first step after `end_episode`); ``end_episode(env=i, terminated=...)``
    sends the buffered steps and ends the episode; ``flush()`` sends what is buffered;
    ``close()`` flushes, ends the episodes still open as truncated and closes the
    connection. Use as a context manager.
    """

    def __init__(self, client: "Client", table: str, envs: int = 1, batch: int = 64, *,
                 timeout: Optional[float] = None) -> None:
        if envs < 1:
            raise InvalidArgument(f"envs must be >= 1, got {envs}")
        if batch < 1:
            raise InvalidArgument(f"batch must be >= 1, got {batch}")
        self._client = client
        self._table = table
        self._envs = int(envs)
        self._batch = int(batch)
        self._timeout = timeout
        self._schema = client.schema(table)
        self._conn: Optional["Connection"] = None
        self._episode: List[Optional[int]] = [None] * self._envs
        self._has_steps = [False] * self._envs
        self._rows: List[List[Any]] = []
        self._row_episodes: List[int] = []
        self.keys: List[int] = []  # keys of the steps sent so far, in append order

    def __getstate__(self) -> Dict[str, Any]:
        return {"client": self._client, "table": self._table, "envs": self._envs,
                "batch": self._batch, "timeout": self._timeout}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.__init__(state["client"], state["table"], state["envs"],  # type: ignore[misc]
                      state["batch"], timeout=state["timeout"])

    def __enter__(self) -> "EpisodeWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _connection(self) -> "Connection":
        if self._conn is None or not self._conn.alive:
            self._conn = self._client.open_connection()
            self._episode = [None] * self._envs
            self._has_steps = [False] * self._envs
        return self._conn

    def _request(self, meta: Dict[str, Any], buffers: Any = (), decode: Any = None) -> Any:
        conn = self._connection()
        request_id, future = conn.submit(meta, buffers, decode, caller_waits=True)
        local = None if self._timeout is None else self._timeout + 2.0
        return conn.wait(request_id, future, local)

    def _check_env(self, env: int) -> int:
        if isinstance(env, bool) or not 0 <= int(env) < self._envs:
            raise InvalidArgument(f"env must be in 0..{self._envs - 1}, got {env!r}")
        return int(env)

    def _open(self, env: int) -> int:
        episode = self._episode[env]
        if episode is None:
            missing = [e for e in range(self._envs) if self._episode[e] is None]
            reply = self._request({"op": "open_episodes", "table": self._table,
                                   "n": len(missing)})
            ids = reply.get("episodes")
            if not isinstance(ids, list) or len(ids) != len(missing):
                raise ProtocolError(f"open_episodes reply without its ids: {reply!r}")
            for e, episode_id in zip(missing, ids):
                self._episode[e] = int(episode_id)
            episode = self._episode[env]
        assert episode is not None
        return episode

    def append(self, env: int = 0, **step: Any) -> None:
        """Buffers one step (every field of the table, without a batch dimension) of env's
        current episode; sends a batch when `batch` steps are buffered."""
        env = self._check_env(env)
        row = convert_item(self._schema, step)  # InvalidArgument naming the field
        self._row_episodes.append(self._open(env))
        self._has_steps[env] = True
        self._rows.append(row)
        if len(self._rows) >= self._batch:
            self.flush()

    def end_episode(self, env: int = 0, terminated: bool = True) -> None:
        """Sends the buffered steps, then ends env's episode: `terminated` (no bootstrap
        past its last step) or truncated (a time limit). Raises InvalidArgument when the
        episode has no steps."""
        env = self._check_env(env)
        episode = self._episode[env]
        if episode is None:
            raise InvalidArgument(f"table '{self._table}': env {env} has no open episode "
                                  "(append a step first)")
        self.flush()
        self._request({"op": "end_episode", "table": self._table, "episode": episode,
                       "terminated": bool(terminated)})
        self._episode[env] = None
        self._has_steps[env] = False

    def flush(self) -> None:
        """Sends the buffered steps and waits for the server to store them."""
        if not self._rows:
            return
        rows, episodes = self._rows, self._row_episodes
        self._rows, self._row_episodes = [], []
        data: Dict[str, np.ndarray[Any, Any]] = {}
        for i, field in enumerate(self._schema.fields):
            column = np.empty((len(rows), *field.shape), dtype=field.dtype)
            for j, row in enumerate(rows):
                column[j] = row[i]
            data[field.name] = column
        batch = prepare_insert(self._schema, data)
        meta = requests.insert_meta(self._table, batch, self._timeout)
        meta["op"] = "append_steps"
        ids = np.asarray(episodes, dtype="<u8")
        keys = self._request(meta, [*batch.buffers(), ids], decode_keys)
        self.keys.extend(int(k) for k in keys)

    def close(self) -> None:
        """Flushes, ends the episodes still open that have steps as truncated (they are
        done when this returns) and closes the connection."""
        try:
            if self._conn is not None and self._conn.alive:
                self.flush()
                for env in range(self._envs):
                    if self._episode[env] is not None and self._has_steps[env]:
                        self.end_episode(env, terminated=False)
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def decode_columns(meta: Mapping[str, Any],
                   payload: np.ndarray[Any, Any]) -> Dict[str, np.ndarray[Any, Any]]:
    """Views every column of a reply (name -> array of its stated shape), without copying."""
    columns = meta.get("columns")
    if not isinstance(columns, list):
        raise ProtocolError(f"reply without its columns: {dict(meta)!r}")
    out: Dict[str, np.ndarray[Any, Any]] = {}
    for column in columns:
        try:
            name = str(column["name"])
            dtype = np.dtype(str(column["dtype"]).replace("bool", "?")).newbyteorder("<")
            shape = tuple(int(d) for d in column["shape"])
            offset = int(column["offset"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"bad column description {column!r}: {exc}") from None
        count = int(np.prod(shape)) if shape else 1
        if offset + count * dtype.itemsize > payload.nbytes:
            raise ProtocolError(f"reply column '{name}' runs past the payload")
        out[name] = np.frombuffer(payload, dtype, count, offset).reshape(shape)
    return out


def decode_sequences(meta: Mapping[str, Any], payload: np.ndarray[Any, Any]) -> Sample:
    """A ``sample_sequences`` reply as a Sample: `data` holds (n, T, ...) arrays of the
    fields, `mask` (n, T) uint8 (1: a real step), keys etc. of the start steps."""
    columns = decode_columns(meta, payload)
    names = [str(c["name"]) for c in meta["columns"]]
    if names[:5] != ["key", "probability", "weight", "times_sampled", "mask"]:
        raise ProtocolError(f"sample_sequences reply with columns {names}")
    return Sample(data={name: columns[name] for name in names[5:]}, keys=columns["key"],
                  probabilities=columns["probability"], weights=columns["weight"],
                  times_sampled=columns["times_sampled"], mask=columns["mask"],
                  state=meta.get("state"))


def decode_page(meta: Mapping[str, Any],
                payload: np.ndarray[Any, Any]) -> Tuple[Dict[str, np.ndarray[Any, Any]], int]:
    """A ``read_steps`` page: its columns (key, episode, position, sequence, the fields)
    and the cursor of the next page."""
    return decode_columns(meta, payload), int(meta["next"])


def iterate_steps(client: "Client", table: str, page: int) -> Iterator[Dict[str, Any]]:
    """Pages of ``read_steps`` from the start until an empty page."""
    after = 0
    while True:
        columns, after = client._call({"op": "read_steps", "table": table, "n": int(page),
                                       "after": after}, decode=decode_page)
        if len(columns["key"]) == 0:
            return
        yield columns



def group_episodes(pages: Iterator[Dict[str, Any]]) -> Iterator[Dict[str, Any]]:
    """Regroups pages of steps by episode: one dict of arrays per episode, in id order,
    its rows in position order."""
    collected = [page for page in pages]
    if not collected:
        return
    steps = {name: np.concatenate([page[name] for page in collected]) for name in collected[0]}
    order = np.lexsort((steps["position"], steps["episode"]))
    episodes = steps["episode"][order]
    bounds = np.flatnonzero(np.diff(episodes)) + 1
    for rows in np.split(order, bounds):
        yield {name: array[rows] for name, array in steps.items()}
