"""Episodic tables (docs/TRAJECTORIES.md): an EpisodeWriter that appends steps of one or
more environments' episodes (the decoders of the episodic replies: replayd.episode_replies).

EpisodeWriter batches steps as `Writer` batches items (preallocated columns, `batch` steps
per ``append_steps`` request, up to `max_in_flight` requests awaiting replies), so there is
no round trip per step or per batch; ``end_episode`` goes out in the next batch's request
("end": ended right after its steps), or as a request of its own at `flush`. It opens episodes `envs` ids
at a time (``open_episodes``, one round trip). The server knows the writer by its
connection: a writer whose process dies or whose connection is lost mid-episode leaves its
open episodes ended as *truncated*, their steps kept.

Errors: a step is validated when appended (InvalidArgument naming the field); an error of a
request already sent is raised by the next `append`, `end_episode`, `flush` or `close`.

Threading: one thread uses a writer. It holds a private connection of its own (its
identity as the episodes' writer), and pickles as its Client, table and options: an
unpickled writer opens new episodes in the process that uses it.
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from . import requests
from .batch_limits import writer_batch
from .client_interface import ClientLike
from .columns import InsertBatch, convert_value, decode_keys
from .errors import ConnectionLost, InvalidArgument, ProtocolError
from .nesting import flatten_values
from .pixel_frame_fields import compress_column
from .shm.staging import ARENA_REFUSED, BatchSlots
from .writer import DEFAULT_MAX_DELAY, Writer

if TYPE_CHECKING:
    from .connection import Connection

__all__ = ["EpisodeWriter", "DEFAULT_EPISODE_BATCH"]

#: An EpisodeWriter's steps per request when not told (`batch=None`), at most the
#: server's max_batch_items.
DEFAULT_EPISODE_BATCH = 64


def _no_keys(meta: Mapping[str, Any], payload: Any) -> np.ndarray[Any, Any]:
    """The keys of a request that stores nothing (end_episode), for the writer's in-flight
    bookkeeping."""
    return np.zeros(0, np.uint64)


class _StepBatches(Writer):
    """The Writer machinery of an EpisodeWriter: its batches go out as ``append_steps``
    with the episode id of each row, over the EpisodeWriter's own connection.

    Over the shared-memory plane (a table without frame fields, docs/SHM.md) the batches
    are laid out in a staging arena of that connection (`stage_on`), ids included, and
    each request names its slot; an append that carries final observations goes through
    the socket."""

    def __init__(self, owner: "EpisodeWriter", client: ClientLike, table: str, batch: int,
                 max_in_flight: int, timeout: Optional[float], keep_keys: bool,
                 max_delay: Optional[float]) -> None:
        super().__init__(client, table, batch, max_in_flight=max_in_flight, timeout=timeout,
                         keep_keys=keep_keys, max_delay=max_delay)
        self._owner = owner
        self.row_episodes: List[int] = []  # episode id of each buffered row
        # End requests sent after the buffered rows; with next_of fields, each may carry its
        # final observation (`final`: name -> value), all of them or none.
        self.pending_ends: List[Tuple[Dict[str, Any], Optional[Mapping[str, Any]]]] = []
        fields = self._schema.fields
        self.compressed = [(i, f.compression_level) for i, f in enumerate(fields)
                           if f.compression is not None]
        self.next_of = [f for f in fields if f.next_of]
        # Steps and ends of requests that failed with ConnectionLost, for the loss report.
        self.lost_in_flight = [0, 0]
        self._slots: Optional[BatchSlots] = None  # the staging arena of the connection

    def stage_on(self, conn: "Connection") -> None:
        """The writer's new connection: its batches go to a staging arena on it when the
        plane is offered there and the server grants the arena (else, and for tables with
        frame fields, through the socket). Called with no step buffered."""
        self.unstage()
        if (not conn.shm_offered or any(f.is_frame for f in self._schema.fields)
                or not self._client.shm_enabled()):
            return
        try:
            self._slots = BatchSlots.on_connection(conn, self._schema.fields, self._batch,
                                                   self._max_in_flight + 1, True,
                                                   self._timeout)
        except ARENA_REFUSED:
            return
        self._columns, self._priorities = self._slots.slot(0)
        self._write_row = self._row_writer_of(self._columns)

    def unstage(self) -> None:
        """Back to the writer's own arrays (its connection was lost or closed)."""
        if self._slots is None:
            return
        self._slots.arena.close()  # the server releases it with the connection
        self._slots = None
        self._columns = [np.empty((self._batch, *f.shape), dtype=f.dtype)
                         for f in self._schema.fields]
        self._priorities = np.empty(self._batch, dtype="<f8")
        self._write_row = self._row_writer_of(self._columns)

    def _reap_oldest(self) -> None:
        future, n = self._in_flight[0]
        super()._reap_oldest()
        if future.done() and isinstance(future.exception(), ConnectionLost):
            self.lost_in_flight[0 if n else 1] += n if n else 1

    def _raise_error(self) -> None:
        self._reap_done()
        if isinstance(self._error, ConnectionLost):  # said once, with what was lost
            self._error = None
            self._owner._lost(np.zeros(0, np.uint64), [])
        super()._raise_error()

    def _submit(self, batch: InsertBatch) -> Future[Any]:
        columns, arrays = compressed_columns(batch.columns, batch.arrays, self.compressed)
        meta = requests.insert_meta(self._table, InsertBatch(batch.n, columns, arrays, None,
                                                             batch.version), self._timeout)
        meta["op"] = "append_steps"
        ids = np.array(self.row_episodes[:batch.n], dtype="<u8")
        del self.row_episodes[:batch.n]
        buffers = [*arrays, ids]
        staged = (self._slots is not None and self._slots.conn.alive
                  and not (self.pending_ends and self.pending_ends[0][1] is not None))
        if staged:  # the rows are in the current slot; its ids go beside them
            assert self._slots is not None
            self._slots.episode_ids()[:batch.n] = ids
            meta["staged"] = self._slots.meta()
            buffers = []
        ends = [m for m, _ in self.pending_ends]
        if self.pending_ends:  # ended right after these steps, in the same request
            meta["end"] = [{"episode": m["episode"], "terminated": m["terminated"]}
                           for m in ends]
            if self.pending_ends[0][1] is not None:
                final_meta, final_arrays = self.final_columns(
                    [final for _, final in self.pending_ends])
                meta["final_columns"] = final_meta
                buffers += final_arrays
            self.pending_ends = []
        return self._owner._submit(meta, buffers, decode_keys, ids, ends)

    def final_columns(self, finals: List[Any]) -> Tuple[List[Dict[str, Any]], List[Any]]:
        """The next_of fields' final observations of ended episodes as wire columns (one
        row per end), compressed where the field is."""
        columns: List[Dict[str, Any]] = []
        arrays: List[Any] = []
        for field in self.next_of:
            values = np.stack([self._final_value(field, final[field.name]) for final in finals])
            columns.append({"name": field.name, "dtype": field.dtype.name,
                            "shape": [len(finals), *field.shape]})
            arrays.append(values)
        order = [i for i, f in enumerate(self.next_of) if f.compression is not None]
        return compressed_columns(columns, arrays,
                                  [(i, self.next_of[i].compression_level) for i in order])

    def _final_value(self, field: Any, value: Any) -> np.ndarray[Any, Any]:
        array, converted = convert_value(field.name, value, field.dtype, table=self._table)
        if not converted or array.shape != field.shape:
            raise InvalidArgument(f"table '{self._table}': final value of field "
                                  f"'{field.name}' must be {field.dtype.name}"
                                  f"{list(field.shape)}, got {array.dtype}{list(array.shape)}")
        return array

    def end_after_steps(self, meta: Dict[str, Any],
                        final: Optional[Mapping[str, Any]] = None) -> None:
        """Ends an episode (`meta`: an end_episode request) right after the buffered steps:
        in the next batch's ``append_steps`` ("end"), or as its own request now when no
        step is buffered. Pipelined; its error is raised by a later call."""
        self._check_open()
        if self.pending_ends and (self.pending_ends[0][1] is None) != (final is None):
            self._send()  # one request carries final observations for all its ends or none
        self.pending_ends.append((meta, final))
        if self._count == 0:
            self._send()

    def _send(self) -> None:
        sent = self._count > 0
        super()._send()
        if sent and self._slots is not None:  # the next batch in the next slot
            self._columns, self._priorities = self._slots.advance()
            self._write_row = self._slots.memo(self._row_writer_of)
        while self.pending_ends:  # no batch carried them: their own requests, in order
            meta, final = self.pending_ends.pop(0)
            buffers: List[Any] = []
            if final is not None:
                meta = dict(meta)
                meta["columns"], buffers = self.final_columns([final])
            while len(self._in_flight) >= self._max_in_flight:
                self._reap_oldest()
            future = self._owner._submit(meta, buffers, _no_keys, np.zeros(0, np.uint64), [meta])
            future.add_done_callback(self._note_failure)
            self._in_flight.append((future, 0))


class EpisodeWriter:
    """Appends steps of `envs` concurrent episodes to an episodic table.

    Args:
        client: the server's Client (the writer opens its own connection from it).
        table: an episodic table.
        envs: environments written in parallel (env = 0 .. envs-1).
        batch: steps per ``append_steps`` request; None: 64, or the server's
            ``max_batch_items`` when that is lower. A `batch` above ``max_batch_items``
            raises InvalidArgument here (the server would refuse every request).
        max_in_flight: requests sent but not yet acknowledged before `append` waits.
        timeout: seconds each request may wait (server-side, for the rate limiter).
        keep_keys: collect the keys of the written steps (`keys`, 8 bytes per step, never
            freed while the writer lives). Off by default: a long-lived explorer writing
            without end would hold every key it ever wrote.
        max_delay: seconds a step may wait in a partial batch, as the Writer's: an `append`
            (of any env) that finds the batch's first step older than this sends the batch,
            so a slow environment's steps are sampleable within about this long. None: only
            full batches, `end_episode` and `flush` send.

    ``append(env=i, **step)`` buffers one step of env i's current episode (a new episode
    starts at the first step after `end_episode`); ``end_episode(env=i, terminated=...)``
    ends the episode (sent with the next batch, pipelined); ``flush()`` sends what is
    buffered and waits for every reply; ``close()`` flushes, ends the episodes still open
    as truncated and closes the connection. Use as a context manager.
    """

    def __init__(self, client: ClientLike, table: str, envs: int = 1,
                 batch: Optional[int] = None, *,
                 max_in_flight: int = 8, timeout: Optional[float] = None,
                 keep_keys: bool = False,
                 max_delay: Optional[float] = DEFAULT_MAX_DELAY) -> None:
        if envs < 1:
            raise InvalidArgument(f"envs must be >= 1, got {envs}")
        self._client = client
        self._table = table
        self._envs = int(envs)
        # batch as given (None stays None): an unpickled writer may meet another server.
        self._options = {"batch": batch, "max_in_flight": int(max_in_flight),
                         "timeout": timeout, "keep_keys": bool(keep_keys),
                         "max_delay": max_delay}
        self._conn: Optional["Connection"] = None
        steps = writer_batch(client, table, batch, DEFAULT_EPISODE_BATCH)
        self._steps = _StepBatches(self, client, table, steps, int(max_in_flight),
                                   timeout, bool(keep_keys), max_delay)
        self._episode: List[Optional[int]] = [None] * self._envs
        self._has_steps = [False] * self._envs
        self._spare_episodes: List[int] = []  # opened, not yet given to an env
        self._row_episodes = self._steps.row_episodes
        # Bound once: append is the hot path (one call per environment step).
        self._add_row_episode = self._row_episodes.append
        self._add_step = self._steps.append

    def __getstate__(self) -> Dict[str, Any]:
        return {"client": self._client, "table": self._table, "envs": self._envs,
                **self._options}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.__init__(state["client"], state["table"], state["envs"],  # type: ignore[misc]
                      state["batch"], max_in_flight=state["max_in_flight"],
                      timeout=state["timeout"], keep_keys=state["keep_keys"],
                      max_delay=state.get("max_delay", DEFAULT_MAX_DELAY))

    def __enter__(self) -> "EpisodeWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
            return
        try:  # keep the original exception (as Writer does); still deliver what it can
            self.close()
        except Exception:
            pass

    @property
    def keys(self) -> np.ndarray[Any, Any]:
        """uint64 keys of the steps whose appends the server confirmed, in append order
        (after `flush`, every step sent). Needs ``keep_keys=True``: raises ReplayError
        otherwise."""
        return self._steps.keys

    def _connection(self) -> "Connection":
        if self._conn is not None and not self._conn.alive:
            self._lost(np.zeros(0, np.uint64), [])  # raises ConnectionLost
        if self._conn is None:
            # A new connection is a new writer: episodes start anew on it.
            self._conn = self._client.open_connection(shm=True)
            self._episode = [None] * self._envs
            self._has_steps = [False] * self._envs
            self._spare_episodes = []
            self._steps.stage_on(self._conn)
        return self._conn

    def _submit(self, meta: Dict[str, Any], buffers: List[Any], decode: Any,
                rows: np.ndarray[Any, Any], ends: List[Dict[str, Any]]) -> Future[Any]:
        """Sends one request of the writer's (its `rows`' episode ids and the `ends` it
        carries, for the loss report) on the writer's connection."""
        if self._conn is not None and not self._conn.alive:
            self._lost(rows, ends)
        conn = self._connection()
        try:
            return conn.submit(meta, buffers, decode)[1]
        except ConnectionLost:
            self._lost(rows, ends)
            raise  # not reached: _lost raises

    def _lost(self, rows: np.ndarray[Any, Any], ends: List[Dict[str, Any]]) -> None:
        """The connection died: says exactly what the server did not get, forgets it, and
        raises ConnectionLost. The server ends the writer's open episodes as truncated with
        the steps it stored (on a restart, the restored ones). Nothing is sent again and no
        later step goes into those episodes: the next append of an env starts a new
        episode on a new connection (docs/TRAJECTORIES.md, "Writers and lost
        connections")."""
        steps = self._steps
        steps._reap_done()  # replies that came before the loss are confirmed, not lost
        unsent = list(rows.tolist()) + list(self._row_episodes[:steps._count])
        unsent_ends = list(ends) + [m for m, _ in steps.pending_ends]
        unconfirmed = sum(n for _, n in steps._in_flight) + steps.lost_in_flight[0]
        unconfirmed_ends = (sum(1 for _, n in steps._in_flight if n == 0)
                            + steps.lost_in_flight[1])
        parts = []
        for episode in sorted(set(unsent)):
            parts.append(f"{unsent.count(episode)} steps of episode {episode} were not sent")
        for end in unsent_ends:
            how = "terminated" if end["terminated"] else "truncated"
            parts.append(f"the end of episode {end['episode']} ({how}) was not sent: the "
                         "server ends it as truncated")
        if unconfirmed or unconfirmed_ends:
            parts.append(f"{unconfirmed} steps (and {unconfirmed_ends} episode ends) were sent "
                         "but not confirmed: the server may or may not have stored them")
        refused = steps._error  # not raised yet, and cleared below: said here
        if refused is not None and not isinstance(refused, ConnectionLost):
            parts.append(f"an earlier request was refused and not stored ({refused})")
        address = self._conn.address if self._conn is not None else "the server"
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        steps.unstage()
        self._episode = [None] * self._envs
        self._has_steps = [False] * self._envs
        self._spare_episodes = []
        self._row_episodes.clear()
        steps._count = 0
        steps.pending_ends = []
        steps._in_flight.clear()
        steps._error = None
        steps._failed = False
        steps.lost_in_flight = [0, 0]
        raise ConnectionLost(
            f"table '{self._table}': the connection to {address} was lost; "
            + ("; ".join(parts) if parts else "every step appended was stored")
            + ". The server ends this writer's open episodes as truncated with the steps it "
            "stored; the next append of an env starts a new episode")

    def _unconfirmed(self) -> bool:
        """Whether a step or an end appended is not confirmed by the server yet, or a
        request's refusal not raised yet."""
        steps = self._steps
        steps._reap_done()
        return bool(steps._count or steps.pending_ends or steps._in_flight
                    or any(steps.lost_in_flight) or steps._error is not None)

    def _request(self, meta: Dict[str, Any]) -> Any:
        conn = self._connection()
        try:
            request_id, future = conn.submit(meta, (), None, caller_waits=True)
        except ConnectionLost:
            self._lost(np.zeros(0, np.uint64), [])
            raise  # not reached: _lost raises
        timeout = self._options["timeout"]
        local = None if timeout is None else float(timeout) + 2.0
        return conn.wait(request_id, future, local)

    def _check_env(self, env: int) -> int:
        if isinstance(env, bool) or not 0 <= int(env) < self._envs:
            raise InvalidArgument(f"env must be in 0..{self._envs - 1}, got {env!r}")
        return int(env)

    def _open(self, env: int) -> int:
        self._connection()  # a lost connection forgets its episodes first
        episode = self._episode[env]
        if episode is None:
            if not self._spare_episodes:
                reply = self._request({"op": "open_episodes", "table": self._table,
                                       "n": self._envs})
                ids = reply.get("episodes")
                if not isinstance(ids, list) or len(ids) != self._envs:
                    raise ProtocolError(f"open_episodes reply without its ids: {reply!r}")
                self._spare_episodes = [int(i) for i in reversed(ids)]
            episode = self._spare_episodes.pop()
            self._episode[env] = episode
        return episode

    def append(self, env: int = 0, item: Optional[Mapping[str, Any]] = None, *,
               version: Optional[int] = None, **step: Any) -> None:
        """Buffers one step of env's current episode, given as keyword arguments or as a
        dict `item` (every field of the table, without a batch dimension; fields named
        `env` or `item` go in the dict); sends a batch when `batch` steps are buffered, or
        when the batch's first step is `max_delay` old (waiting only while `max_in_flight`
        requests await their replies). `version`: the policy version the step was acted
        with (None: as `Writer.append`'s; a new version sends the partial batch first).
        Cost: well under 1 us over Writer.append (see there)."""
        if type(env) is not int or not 0 <= env < self._envs:
            env = self._check_env(env)
        episode = self._episode[env]
        opened = False
        if episode is None or self._conn is None:
            episode = self._open(env)
            opened = self._has_steps[env] = True
        self._add_row_episode(episode)
        values = step if item is None else item
        steps = self._steps
        row = steps._count
        # Writer.append's fast path for an item without priority or version, inlined (the
        # hot path: one call per environment step); anything else goes through
        # Writer.append.
        if (steps._with_priorities is False and not steps._failed and not steps._closed
                and version is None and not steps._versioned
                and steps._write_row(values, row)):
            steps._commit(row, None)  # counts it; sends a full or max_delay-old batch
            return
        try:
            self._add_step(values, version=version)  # InvalidArgument naming the field
        except BaseException:
            # Undo the id only if the step was not buffered: one id more than buffered
            # rows. A step that went out in a failed batch took its id along, and a lost
            # connection (_lost) cleared every id already.
            if len(self._row_episodes) > steps._count:
                self._row_episodes.pop()
                if opened:  # its first step was refused: the episode has none yet
                    self._has_steps[env] = False
            raise

    def end_episode(self, env: int = 0, terminated: bool = True, **final: Any) -> None:
        """Ends env's episode: `terminated` (no bootstrap past its last step) or truncated
        (a time limit). Pipelined, no round trip: the end goes out right after the buffered
        steps, with the next batch (or `flush`), so batches stay full. Raises
        InvalidArgument when the episode has no steps.

        In a table with next_of fields, `final` gives each next_of field's value after the
        last step (``end_episode(env, obs=final_obs)``): the ``next_obs`` of the last step.
        Without it the last step appended serves as the final observation (it is then no
        transition of its own)."""
        env = self._check_env(env)
        episode = self._episode[env]
        if episode is None or not self._has_steps[env]:
            raise InvalidArgument(f"table '{self._table}': env {env} has no open episode "
                                  "(append a step first)")
        if final and self._steps._schema.nested:  # a nested final observation's leaves
            final = flatten_values(final, self._steps._schema.by_name)
        if final:
            wanted = sorted(f.name for f in self._steps.next_of)
            if sorted(final) != wanted:
                raise InvalidArgument(f"table '{self._table}': end_episode takes the final "
                                      f"value of each next_of field ({', '.join(wanted) or 'none'}"
                                      f"), got {', '.join(sorted(final))}")
            final = {f.name: self._steps._final_value(f, final[f.name])
                     for f in self._steps.next_of}
        self._steps.end_after_steps({"op": "end_episode", "table": self._table,
                                     "episode": episode, "terminated": bool(terminated)},
                                    final or None)
        self._episode[env] = None
        self._has_steps[env] = False

    def flush(self) -> None:
        """Sends the buffered steps and waits until the server confirmed every request;
        raises the first error of a request sent earlier."""
        self._steps.flush()

    def close(self) -> None:
        """Flushes, ends the episodes still open that have steps as truncated (they are
        done when this returns) and closes the connection. Raises ConnectionLost, saying
        what the server did not get, when the connection was lost with steps or ends not
        confirmed (a loss that cost nothing closes quietly)."""
        try:
            if self._conn is not None and not self._conn.alive and self._unconfirmed():
                self._lost(np.zeros(0, np.uint64), [])  # raises ConnectionLost
            if self._conn is not None and self._conn.alive:
                for env in range(self._envs):
                    if self._episode[env] is not None and self._has_steps[env]:
                        self.end_episode(env, terminated=False)
                self._steps.close()
        finally:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._steps.unstage()


def compressed_columns(columns: List[Dict[str, Any]], arrays: List[Any],
                       compressed: List[Tuple[int, int]]
                       ) -> Tuple[List[Dict[str, Any]], List[Any]]:
    """`columns` and their `arrays` with the columns `compressed` lists ((index, level))
    replaced by their wire form: one zstd frame per row, sizes then frames."""
    if not compressed:
        return columns, arrays
    levels = dict(compressed)
    out_columns: List[Dict[str, Any]] = []
    out_arrays: List[Any] = []
    for i, (column, array) in enumerate(zip(columns, arrays)):
        if i not in levels:
            out_columns.append(column)
            out_arrays.append(array)
            continue
        sizes, frames = compress_column(array, levels[i])
        out_columns.append({**column, "compression": "zstd", "bytes": int(frames.nbytes)})
        out_arrays += [sizes, frames]
    return out_columns, out_arrays
