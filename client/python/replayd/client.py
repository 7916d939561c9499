"""Client: the handle to a replayd server.

A Client is an address plus options. It pickles as just that (pickle, cloudpickle), and
connects lazily in whichever process uses it: one connection per (Client, process),
opened at the first call, replaced after a fork (detected by a changed pid) and after the
connection is lost. Every method is thread-safe; threads share the connection and their
requests pipeline (replies are matched by request id).

Timeouts are in seconds. A call's `timeout` defaults to the Client's; None waits forever.
For `sample` and `insert` it is also sent to the server as ``timeout_ms``, the longest the
request may wait for the table's rate limiter; for `fetch`, the longest it may wait for a
newer version of a published value (docs/VALUES.md).

Shared memory (docs/SHM.md): over a Unix socket to a server of the same uid, samples gather
their rows from the table's column block mapped read-only, and writers stage their rows in
shared memory; both give what the socket would. `shm=False` turns that off, `shm=True`
requires it (PermissionDenied with the server's reason otherwise).
"""
from __future__ import annotations

import os
import threading
import weakref
from concurrent.futures import Future
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Tuple, Union)

import numpy as np

from . import requests, values, wait_notice
from .address import Address, parse_address
from .columns import InsertBatch, decode_keys, prepare_insert, sample_decoder, sample_nbytes
from .connection import Connection
from .episode_replies import (decode_sequences, group_episodes, iterate_steps, nest_page,
                              ragged_episodes)
from .episodes import EpisodeWriter
from .errors import (InvalidArgument, NotFound, PermissionDenied, ProtocolError, ReplayError,
                     TimeoutError)
from .insert_parts import gathered_keys, insert_parts, split_insert
from .insert_window import InsertWindow
from .limiter_state import limiter_bounds
from .mixed import Mix, MixedSample, MixLike, Schedule, priority_parts, schedule_of
from .mixed_bounds import MixBound, PerTable, PerValue, asked, mixed_bound, table_bound
from .mixed_draw import DrawKind, MixedDraw, combine, sample_plain_mix
from .policy_versions import row_versions
from .rate_limiters import RateLimiter
from .sample import Sample
from .sampler import Sampler
from .schema import FieldsLike, TableSchema, table_description
from .shm import PlaneTable, StagingArena, keys_request, take_descriptor
from .shm.insert_arena import (ARENA_BYTES, MAX_ARENA_BYTES, ROOM_WAIT_S, InsertArena,
                               insert_plan, stageable)
from .shm.insert_sharing import (FRAME_SLACK, SHARE_ROWS, SharedInserts, ShareRule,
                                 shareable_priorities)
from .shm import sample_into as rows_into_arena
from .shm.staging import ARENA_REFUSED, map_staging
from .shm.sampling import (KeysReply, RedrawBound, allocated_buffer, auto_decoder,
                           decode_keys_reply)
from .tables import queue_options, stack_options
from .wire import Allocator, padded
from .values import Fetched
from .vector_writers import VectorEpisodeWriter, VectorWriter
from .writer import DEFAULT_MAX_DELAY, DEFAULT_MAX_IN_FLIGHT, Writer

__all__ = ["Client"]


class _Default:
    def __repr__(self) -> str:
        return "<client default>"


DEFAULT: Any = _Default()  # "use the Client's timeout"
_UNMAPPED: Any = object()  # plane_table: a table not looked up yet (None: not offered)
_GRACE_S = 2.0  # extra local wait beyond a server-side timeout, for the reply to arrive
_MAX_ASYNC_INSERTS = 32  # insert_async requests in flight per Client and process


def _no_nstep_bound(name: str, nstep: Optional[int]) -> None:
    """InvalidArgument: policy versions and bounds apply to plain samples only."""
    if nstep is not None:
        raise InvalidArgument(f"table '{name}': versions, min_version and max_staleness "
                              "apply to plain samples, not to n-step samples")


class Client:
    """Handle to a replayd server at ``unix:///path`` or ``tcp://host:port``.

    Args:
        address: where the server listens.
        timeout: default timeout of every call, in seconds (None: wait forever). Also
            bounds connecting.
        name: a label sent in ``hello`` (shows up in server logs).
        token: the server's shared token (docs/SECURITY.md), sent in ``hello``; required
            on TCP when the server has one. Default: the ``REPLAYD_TOKEN`` environment
            variable, when set. It travels with the handle when pickled.
        shm: the shared-memory data plane (docs/SHM.md): None (default) uses it when the
            server offers it (a Unix socket, the server's uid), False never, True requires
            it (calls that would use it raise PermissionDenied naming why it is not
            offered).

    Use as a context manager, or call `close`; a closed Client reconnects if used again.
    """

    def __init__(self, address: Union[str, Address], *, timeout: Optional[float] = None,
                 name: str = "replayd-python", token: Optional[str] = None,
                 shm: Optional[bool] = None) -> None:
        self._address = parse_address(address)
        self._timeout = timeout
        self._name = name
        self._shm = shm
        self._token = token if token is not None else (os.environ.get("REPLAYD_TOKEN") or None)
        # The version of each published value this client last fetched or published:
        # what its writes to a table following that value are stamped with
        # (docs/VERSIONS.md). Kept across fork; a pickled client starts with none.
        self._value_versions: Dict[str, int] = {}
        self._init_process_state()

    def _init_process_state(self) -> None:
        """State that belongs to one process: rebuilt after unpickling and after fork."""
        self._lock = threading.Lock()
        self._conn: Optional[Connection] = None
        self._schemas: Dict[str, TableSchema] = {}
        # Tables sampled over the plane, by name (None: through the socket), for this
        # process's current connection (a new one may be another server's).
        self._planes: Dict[str, Optional[PlaneTable]] = {}
        self._insert_window = InsertWindow(_MAX_ASYNC_INSERTS)
        # The staging arena of insert and insert_async (shm/insert_arena.py), for this
        # process's current connection; the connection whose server refused one.
        self._insert_arena: Optional[InsertArena] = None
        self._insert_arena_refused: Optional[Connection] = None
        self._insert_arena_lock = threading.Lock()
        # insert_async calls sharing requests (shm/insert_sharing.py), for this process's
        # current connection; per table, whether and how its calls may share (None: never).
        self._sharing: Optional[SharedInserts] = None
        self._share_rules: Dict[str, Optional[ShareRule]] = {}
        _LIVE_CLIENTS.add(self)

    # -- handle ------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return str(self._address)

    @property
    def timeout(self) -> Optional[float]:
        return self._timeout

    def __getstate__(self) -> Dict[str, Any]:
        state = {"address": str(self._address), "timeout": self._timeout, "name": self._name}
        if self._token is not None:
            state["token"] = self._token
        if self._shm is not None:
            state["shm"] = self._shm
        return state

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self._address = parse_address(state["address"])
        self._timeout = state.get("timeout")
        self._name = state.get("name", "replayd-python")
        self._token = state.get("token")
        self._shm = state.get("shm")
        self._value_versions = {}
        self._init_process_state()

    def __repr__(self) -> str:
        return f"replayd.Client({str(self._address)!r}, timeout={self._timeout!r})"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Closes this process's connection; calls in flight fail with ConnectionLost.
        `insert_async` calls waiting to share a request are sent first."""
        sharing = self._sharing
        if sharing is not None and sharing.conn is self._conn:
            sharing.flush()
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _after_fork_in_child(self) -> None:
        conn = self._conn
        self._init_process_state()
        if conn is not None:
            conn.abandon()

    def connection(self) -> Connection:
        """This process's live connection, opened (with ``hello``) if needed.
        Raises ConnectionLost when the server cannot be reached."""
        conn = self._conn
        if conn is not None and conn.alive and conn.pid == _PID[0]:
            conn.notice_close()  # a server that closed an idle connection: reconnect below
            if conn.alive:
                return conn
        with self._lock:
            conn = self._conn
            if conn is not None and conn.pid != os.getpid():
                conn.abandon()
                conn = None
            elif conn is not None and not conn.alive:
                conn.close()
                conn = None
            if conn is None:
                conn = Connection.open(self._address, timeout=self._timeout,
                                       client_name=self._name, token=self._token,
                                       shm=self._shm is not False)
                self._conn = conn
                self._planes = {}  # possibly another server: map its tables again
            return conn

    def open_connection(self, *, reader_thread: bool = True, shm: bool = False) -> Connection:
        """A new private connection to the same server (the caller closes it). Without a
        reader thread, one thread at a time may use it (see Connection). `shm`: it may
        receive descriptors (staging arenas of its own), when the plane is offered."""
        return Connection.open(self._address, timeout=self._timeout, client_name=self._name,
                               token=self._token, reader_thread=reader_thread,
                               shm=shm and self._shm is not False)

    @property
    def server(self) -> Dict[str, Any]:
        """The server's ``hello`` reply: protocol, server version, tables, limits."""
        return self.connection().server

    # -- helpers -----------------------------------------------------------------------

    def _timeout_of(self, timeout: Any) -> Optional[float]:
        return self._timeout if timeout is DEFAULT else timeout

    def _call(self, meta: Dict[str, Any], buffers: Sequence[Any] = (),
              decode: Optional[Callable[..., Any]] = None, *, timeout: Any = DEFAULT,
              server_timeout: bool = False, allocate: Optional[Allocator] = None) -> Any:
        seconds = self._timeout_of(timeout)
        if server_timeout:
            meta["timeout_ms"] = requests.timeout_ms(seconds)
        conn = self.connection()
        request_id, future = conn.submit(meta, buffers, decode, caller_waits=True,
                                         allocate=allocate)
        local = None if seconds is None else (seconds + _GRACE_S if server_timeout else seconds)
        if not server_timeout:
            if wait_notice.notices(local) and \
                    not conn.wait_done(future, wait_notice.WAIT_NOTICE_S):  # say so when long
                wait_notice.log_silence(str(conn.address), meta["op"], wait_notice.WAIT_NOTICE_S)
            return conn.wait(request_id, future, local)
        # May wait for the rate limiter: without a timeout, say why when it is long; with
        # one, the server's TimeoutError says why.
        op, table, n = meta["op"], str(meta.get("table")), int(meta.get("n", 0))
        self._notice_wait(conn, future, local, op, table, n)
        try:
            return conn.wait(request_id, future, local)
        except TimeoutError as exc:
            raise wait_notice.with_reason(self, op, table, n, exc) from None

    def _notice_wait(self, conn: Connection, future: "Future[Any]", local: Optional[float],
                     op: str, table: str, n: int) -> None:
        """Without a timeout (`local` None): waits up to WAIT_NOTICE_S for `future` and, if
        it is still pending, logs why (see replayd.wait_notice). With one: returns at once."""
        if wait_notice.notices(local) and not conn.wait_done(future, wait_notice.WAIT_NOTICE_S):
            wait_notice.log_wait(self, op, table, n, wait_notice.WAIT_NOTICE_S)

    def schema(self, table: str, *, refresh: bool = False) -> TableSchema:
        """The fields of `table` (cached after the first ``info`` round trip).
        Raises NotFound with the server's message when the table does not exist."""
        schema = None if refresh else self._schemas.get(table)
        if schema is None:
            info = self.table_info(table)
            schema = TableSchema.from_description(info["description"])
            self._schemas[table] = schema
        return schema

    # -- tables ------------------------------------------------------------------------

    def ping(self, *, timeout: Any = DEFAULT) -> None:
        """One round trip; raises if the server does not answer."""
        self._call({"op": "ping"}, timeout=timeout)

    def create_table(self, name: str, fields: FieldsLike, capacity: int, *,
                     sampler: Union[str, Mapping[str, Any]] = "uniform",
                     priority_exponent: float = 0.6, remover: str = "fifo",
                     max_times_sampled: int = 0,
                     rate_limiter: Union[None, RateLimiter, Mapping[str, Any]] = None,
                     seed: Optional[int] = None, exist_ok: bool = False,
                     episodic: bool = False, reward: Optional[str] = None,
                     bootstrap: Optional[Sequence[str]] = None,
                     next_of: Sequence[str] = (), stack: Optional[Mapping[str, int]] = None,
                     compression: Optional[Mapping[str, Any]] = None,
                     max_compressed_bytes: Optional[int] = None,
                     pad_history: bool = True, metadata: Any = None,
                     versions: Optional[Mapping[str, Any]] = None,
                     ram_bytes: Optional[int] = None,
                     timeout: Any = DEFAULT) -> Dict[str, Any]:
        """Creates a table and returns its INFO object.

        Args:
            name: 1-64 characters of letters, digits, ``_``, ``.``, ``-``.
            fields: ``{"obs": (np.float32, (4,)), "act": (np.int64, ())}`` or a list of
                ``(name, dtype, shape)``; shape None or () is a scalar, an int k is (k,).
            capacity: items kept; when full the remover evicts one per insert.
            sampler: ``"uniform"`` (default), ``"prioritized"``, ``"fifo"``, ``"lifo"``,
                ``"max_heap"`` (largest priority first), ``"min_heap"`` (smallest first).
            priority_exponent: alpha of the prioritized sampler (mass = priority^alpha).
            remover: which item is evicted when full, any sampler kind: ``"fifo"``
                (default), ``"lifo"``, ``"uniform"``, ``"prioritized"`` (in proportion to
                priority), ``"max_heap"``, ``"min_heap"`` (the lowest priority).
            max_times_sampled: remove an item after this many samples (0: never).
            rate_limiter: MinSize, SampleToInsertRatio, Queue, Custom, a JSON dict, or
                None for the server's default (sample once 1 item exists).
            seed: RNG seed (server-chosen when None).
            exist_ok: an existing table with the same description (seed aside) is fine.
            episodic: a table of episodes' steps (docs/TRAJECTORIES.md): write it with
                `episode_writer`, sample it with ``sample(..., nstep=k)`` or
                `sample_sequences`, read it with `read_all` / `episodes`.
            reward: the episodic table's scalar float reward field (server default "rew").
            bootstrap: fields an n-step sample takes h steps on (default ["next_obs"]).
            next_of, stack, compression, max_compressed_bytes: frame options of an
                episodic table's fields (docs/PIXELS.md), e.g. ``next_of=["obs"],
                stack={"obs": 4}, compression={"obs": "zstd"}``: each frame stored once,
                compressed by the writer; samples return ``obs`` and ``next_obs`` stacked.
            pad_history: False: no window looks back before its episode's first step (an
                episode's first stack - 1 steps hold history only, never drawn).
            metadata: any JSON value (at most 1 MiB serialized), kept with the table (and
                in snapshots) and returned unchanged by ``table_info(name)["description"]
                ["metadata"]``; replayd.datasets keeps a dataset's spaces there.
            versions: ``{"value": NAME}`` or ``{"value": NAME, "drop_behind": k}``: the
                table follows the published value NAME (its version is the table's
                policy version; items written by this client without ``version=`` carry
                the version of NAME it last fetched or published), and with k drops the
                items more than k versions behind at each publish (docs/VERSIONS.md).
            ram_bytes: a file tier (docs/FILE_TIER.md; a server started with
                ``--tier-dir``): only this many bytes of the rows stay in RAM, older rows
                on disk, read back when drawn (episodic tables too). Sampled with rows copied.
        Fields may be nested: ``{"obs": {"camera": (np.uint8, (32, 32, 3)), "state":
        (np.float32, 7)}}`` makes the leaves ``obs/camera`` and ``obs/state``, and inserts,
        writers, samples and read-backs take and give ``obs`` as a dict (a tuple of specs:
        a tuple, leaves ``obs/0``, ...; replayd.nesting). Frame options and `bootstrap`
        naming a nested field apply to each of its leaves.
        Raises AlreadyExists, InvalidArgument (with the server's message).
        """
        description = table_description(name, fields, capacity, sampler=sampler,
                                         priority_exponent=priority_exponent,
                                         remover=remover,
                                         max_times_sampled=max_times_sampled,
                                         rate_limiter=rate_limiter, seed=seed,
                                         episodic=episodic, reward=reward,
                                         bootstrap=bootstrap, next_of=next_of, stack=stack,
                                         compression=compression,
                                         max_compressed_bytes=max_compressed_bytes,
                                         pad_history=pad_history, metadata=metadata,
                                         versions=versions, ram_bytes=ram_bytes)
        reply = self._call({"op": "create_table", "table": description,
                            "exist_ok": bool(exist_ok)}, timeout=timeout)
        info = reply.get("table")
        if not isinstance(info, dict):
            raise ProtocolError(f"create_table reply without 'table': {reply!r}")
        self._schemas[name] = TableSchema.from_description(info["description"])
        return info

    def create_queue(self, name: str, fields: FieldsLike, size: int, *,
                     seed: Optional[int] = None, exist_ok: bool = False,
                     timeout: Any = DEFAULT) -> Dict[str, Any]:
        """Creates Reverb's queue table: every item sampled exactly once, oldest first; at
        most `size` items, an insert into a full queue waits for a sample and a sample from
        an empty one waits for an insert (`replayd.tables`). Returns its INFO object."""
        return self.create_table(name, fields, size, seed=seed, exist_ok=exist_ok,
                                 timeout=timeout, **queue_options(size))

    def create_stack(self, name: str, fields: FieldsLike, size: int, *,
                     seed: Optional[int] = None, exist_ok: bool = False,
                     timeout: Any = DEFAULT) -> Dict[str, Any]:
        """Like `create_queue`, newest item first (Reverb's stack table)."""
        return self.create_table(name, fields, size, seed=seed, exist_ok=exist_ok,
                                 timeout=timeout, **stack_options(size))

    def tables(self, *, timeout: Any = DEFAULT) -> List[str]:
        """Names of the server's tables."""
        reply = self._call({"op": "list_tables"}, timeout=timeout)
        return [str(t["name"]) for t in reply.get("tables", [])]

    def info(self, table: Optional[str] = None, *, timeout: Any = DEFAULT) -> Dict[str, Any]:
        """``info(table)``: that table's INFO dict, as `table_info` (``["size"]``,
        ``["capacity"]``, ...). ``info()``: the server's, as `server_info`
        (``{"server": {...}, "tables": [INFO, ...]}``). NotFound if `table` does not exist."""
        if table is None:
            return self.server_info(timeout=timeout)
        return self.table_info(table, timeout=timeout)

    def server_info(self, *, timeout: Any = DEFAULT) -> Dict[str, Any]:
        """The server's ``info`` reply: ``{"server": {version, uptime, connections,
        limits, ...}, "tables": [the INFO dict of every table]}``."""
        reply: Dict[str, Any] = self._call({"op": "info"}, timeout=timeout)
        return reply

    def table_info(self, table: str, *, timeout: Any = DEFAULT) -> Dict[str, Any]:
        """The INFO dict of one table: name, size, capacity, description, counters, rate
        limiter counts, ... (docs/PROTOCOL.md, ``info``). NotFound if it does not exist."""
        reply = self._call({"op": "info", "table": table}, timeout=timeout)
        tables = reply.get("tables") or []
        if len(tables) != 1:
            raise ProtocolError(f"info of table '{table}' returned {len(tables)} tables")
        info: Dict[str, Any] = tables[0]
        return info

    def size(self, table: str, *, timeout: Any = DEFAULT) -> int:
        """Items currently stored in `table`."""
        return int(self.table_info(table, timeout=timeout)["size"])

    def reset(self, table: str, *, timeout: Any = DEFAULT) -> None:
        """Removes every item of `table` and resets its rate limiter. Old keys stay stale."""
        self._call({"op": "reset_table", "table": table}, timeout=timeout)

    def drop_table(self, table: str, *, timeout: Any = DEFAULT) -> None:
        """Removes `table`; its waiting requests fail with NotFound."""
        self._schemas.pop(table, None)
        self._call({"op": "drop_table", "table": table}, timeout=timeout)

    def configure_table(self, table: str, *,
                        rate_limiter: Union[None, RateLimiter, Mapping[str, Any]] = None,
                        priority_exponent: Optional[float] = None,
                        timeout: Any = DEFAULT) -> Dict[str, Any]:
        """Changes `table`'s rate limiter and/or its prioritized sampler's exponent at run
        time and returns its INFO object: e.g. load a dataset with no limiter, then turn a
        samples-per-insert ratio on. The new limiter governs from the change on; the items
        already stored are not charged to it (docs/PROTOCOL.md, ``configure_table``).
        Requests waiting on the table are judged by the new settings at once. Snapshots
        keep them. Raises InvalidArgument naming the problem (nothing changed; also for an
        exponent on a table whose sampler is not prioritized)."""
        meta: Dict[str, Any] = {"op": "configure_table", "table": table}
        if rate_limiter is not None:
            meta["rate_limiter"] = (rate_limiter.to_json()
                                    if isinstance(rate_limiter, RateLimiter)
                                    else dict(rate_limiter))
        if priority_exponent is not None:
            meta["priority_exponent"] = float(priority_exponent)
        return dict(self._call(meta, timeout=timeout)["table"])

    def snapshot(self, *, timeout: Any = DEFAULT) -> Dict[str, Any]:
        """Writes a snapshot of every table to the server's data directory and returns,
        once it is durable, ``{"file", "tables", "items", "bytes", "duration_ms",
        "stall_ms"}``. The snapshot holds every change acknowledged before the call.
        Raises InvalidArgument when the server has no data directory, and
        ResourceExhausted when the write failed (disk full, ...)."""
        reply: Dict[str, Any] = self._call({"op": "snapshot"}, timeout=timeout)
        return reply

    # -- published values (docs/VALUES.md) ---------------------------------------------

    def publish(self, name: str, arrays: Mapping[str, Any], *, version: Optional[int] = None,
                timeout: Any = DEFAULT) -> int:
        """Publishes `arrays` (name -> numpy array or torch tensor, e.g. a state_dict) as
        the next version of value `name` and returns that version; fetchers waiting for it
        are woken. `version`: None for the current one + 1 (1 for a new name), or an
        explicit higher one.

        The arrays are sent in parts of at most 4 MiB, all written before any reply is
        read, straight from the arrays' memory (non-contiguous ones are copied once);
        other clients are served between the parts. `timeout` bounds each wait for the
        server's replies, not the writing of the bytes.
        Raises ResourceExhausted naming the server budget a value would exceed
        (max_value_bytes, max_values_bytes, max_values), InvalidArgument for a version not
        above the current one, a bad name or a dtype replayd cannot carry (object arrays,
        ...). A failure after the upload began closes this connection, which frees the
        unfinished upload on the server (calls in flight on it fail with ConnectionLost).
        """
        published = values.publish(self.connection(), name, arrays, version=version,
                                   seconds=self._timeout_of(timeout),
                                   shared=self.shm_enabled())
        self._value_versions[name] = published
        return published

    def fetch(self, name: str, *, newer_than: Optional[int] = None,
              timeout: Any = DEFAULT) -> Fetched:
        """``(version, arrays)`` of value `name` once its version is above `newer_than`
        (None: any version, the first publish of a name not published yet included).

        Until then the request waits on the server, at most `timeout` seconds (sent as
        ``timeout_ms``, as `sample` does; 0: answer at once, None: without limit), and
        returns ``(current version, None)`` when the wait ends without a newer version
        (the current version is None when the name was never published): such a reply
        carries no value bytes, so an explorer may ask between episodes for nothing.
        `arrays` maps each name to an array viewing the reply's payload (no copy;
        writable, and owned by this result alone); over the shared-memory plane, the
        value's block in the server's shared memory, mapped copy-on-write. Raises
        replayd.TimeoutError only when no reply arrives within `timeout` plus a grace of
        2 s.
        """
        fetched = values.fetch(self.connection(), name, newer_than=newer_than,
                               seconds=self._timeout_of(timeout), grace=_GRACE_S,
                               shared=self.shm_enabled())
        if fetched.arrays is not None and fetched.version is not None:
            self._value_versions[name] = fetched.version
        return fetched

    def policy_version(self, name: str) -> Optional[int]:
        """The version of published value `name` this client last published, or fetched
        with its arrays (None: neither yet; a fetch that ended without a newer version
        does not count). Items written without ``version=`` to a table that follows
        `name` carry it (docs/VERSIONS.md)."""
        return self._value_versions.get(name)

    def _stamp(self, table: str, schema: TableSchema, version: Any, n: int) -> Any:
        """The version an insert of `n` rows carries: `version` checked (an int, or one
        per row), or when None the followed value's `policy_version` (None: no version)."""
        if version is None:
            follows = schema.follows
            return None if follows is None else self._value_versions.get(follows)
        return row_versions(table, version, n)

    # -- items -------------------------------------------------------------------------

    def insert(self, table: str, data: Mapping[str, Any], priorities: Any = None, *,
               version: Any = None, timeout: Any = DEFAULT) -> np.ndarray[Any, Any]:
        """Inserts a batch and returns its n uint64 keys, in item order.

        `data` maps every field to an array whose leading dimension is the batch, or to a
        single item without it. dtypes convert only when safe (see replayd.columns);
        otherwise the server's InvalidArgument names the field. `priorities`: n floats
        (finite, >= 0), or None for the largest priority the table has seen. `version`:
        the policy version the items were acted with, one int for all or one per item;
        None: the `policy_version` of the value the table follows, if any, else 0
        (docs/VERSIONS.md).

        A batch larger than one request may be (the server's ``max_batch_items`` and
        ``max_frame_bytes``, from its hello) goes in several requests, pipelined on one
        connection, each waiting at most `timeout` for the rate limiter; the keys come
        back in item order. If one fails, its error says how many items were stored.

        Over the shared-memory plane (docs/SHM.md, "Batched inserts") the rows are copied
        once into the connection's staging arena and the request names them; keys, rows,
        errors and waits are those of the socket path, which serves everything else.
        """
        schema = self.schema(table)
        batch = prepare_insert(schema, data, priorities)
        batch.version = self._stamp(table, schema, version, batch.n)
        if schema.capacity is not None and batch.n > schema.capacity:
            raise InvalidArgument(f"table '{table}': insert of {batch.n} items exceeds "
                                  f"capacity {schema.capacity}")
        seconds = self._timeout_of(timeout)
        local = None if seconds is None else seconds + _GRACE_S
        conn = self.connection()
        meta = requests.insert_meta(table, batch, seconds)
        parts = split_insert(batch, table, meta, conn.limits)
        stager = self._insert_stager(conn, table, schema, batch, parts, seconds)

        def send(part: InsertBatch) -> Tuple[int, "Future[Any]"]:
            _, request_id, future = self._send_insert(table, part, seconds, window=False,
                                                      caller_waits=True, conn=conn,
                                                      stager=stager, schema=schema)
            return request_id, future

        def wait(request_id: int, future: "Future[Any]", part: InsertBatch) -> Any:
            self._notice_wait(conn, future, local, "insert", table, part.n)
            try:
                return conn.wait(request_id, future, local)
            except TimeoutError as exc:
                if stager is not None and not future.done():  # forgotten: its region too
                    self._drop_insert_arena(stager)
                raise wait_notice.with_reason(self, "insert", table, part.n, exc) from None

        return insert_parts(parts, table, send, wait)

    def insert_async(self, table: str, data: Mapping[str, Any], priorities: Any = None, *,
                     version: Any = None,
                     timeout: Any = DEFAULT) -> "Future[np.ndarray[Any, Any]]":
        """Like `insert` but returns at once with a Future of the keys.

        The data has been copied (into the staging arena, over the plane) or handed to the
        kernel when this returns, so the caller may reuse its arrays. At most 32 of these
        are in flight per Client and process; beyond that this call waits for the oldest
        to complete. A batch larger than one request may be goes in several, as with
        `insert` (each counts towards the 32).

        Over the plane, consecutive calls of small batches share requests while one is in
        flight (docs/SHM.md, "Batched inserts"; shm/insert_sharing.py): each Future holds
        its own keys; a shared request's error fails every call in it (same class, code
        and message). Only calls that could not fail alone share, and only into tables
        whose rate limiter never holds inserts back. Held calls go out when the request
        in flight is done, on any other request of this client, on `result()` of one of
        them, and on `close`.
        """
        schema = self.schema(table)
        seconds = self._timeout_of(timeout)
        conn = self.connection()
        if self._shm is not False and conn.shm_offered:
            shared = self._share_insert(conn, table, schema, data, priorities, version,
                                        seconds)
            if shared is not None:
                return shared
        batch = prepare_insert(schema, data, priorities)
        batch.version = self._stamp(table, schema, version, batch.n)
        parts = split_insert(batch, table, requests.insert_meta(table, batch, seconds),
                             conn.limits)
        stager = self._insert_stager(conn, table, schema, batch, parts, seconds)
        return gathered_keys([self._send_insert(table, part, seconds, window=True,
                                                conn=conn, stager=stager, schema=schema)[2]
                              for part in parts])

    def _share_insert(self, conn: Connection, table: str, schema: TableSchema, data: Any,
                      priorities: Any, version: Any, seconds: Optional[float]
                      ) -> Optional["Future[np.ndarray[Any, Any]]"]:
        """The Future of an insert_async call that shares a request with its neighbours
        (shm/insert_sharing.py), or None when it may not: it then goes alone."""
        rule = self._share_rules.get(table, _UNMAPPED)
        if rule is _UNMAPPED or (rule is not None and rule.schema is not schema):
            rule = self._share_rule(conn, table, schema)
        if rule is None:
            return None
        exact = rule.exact_arrays(data)
        if exact is None:
            return None
        columns, n = exact
        prio = None
        if priorities is not None:
            prio = shareable_priorities(priorities, n)
            if prio is None:
                return None  # alone: the server's error, if any, is this call's
        stamp = self._stamp(table, schema, version, n)
        if stamp is not None and type(stamp) is not int:
            return None  # one version per row: alone
        sharing = self._sharing
        if sharing is None or sharing.conn is not conn:
            with self._insert_arena_lock:
                sharing = self._sharing
                if sharing is None or sharing.conn is not conn:
                    sharing = self._sharing = SharedInserts(conn, self._send_shared,
                                                            self._release_insert_slots,
                                                            self._forget_schema_after)
        window = self._insert_window
        if not window.acquire(blocking=False):
            sharing.flush()  # the calls holding the window may be waiting in the group
            window.acquire()
        try:  # the window's slot is released once the call's Future is done
            return sharing.add(table, rule, columns, n, prio, stamp, seconds,
                               requests.timeout_ms(seconds))
        except BaseException:
            window.release()
            raise

    def _release_insert_slots(self, count: int) -> None:
        """Gives back `count` slots of the insert_async window."""
        self._insert_window.release(count)

    def _share_rule(self, conn: Connection, table: str,
                    schema: TableSchema) -> Optional[ShareRule]:
        """Whether calls into `table` may share requests (its limiter never holds inserts
        back, no frame fields) and how many rows one may carry (the server's limits, the
        capacity); one ``info`` round trip per table and schema."""
        rule: Optional[ShareRule] = None
        if not any(f.is_frame for f in schema.fields):
            info = self.table_info(table)
            if limiter_bounds(info)[3] is None:
                cap = SHARE_ROWS
                limits = conn.limits
                if limits.get("max_batch_items"):
                    cap = min(cap, int(limits["max_batch_items"]))
                if schema.capacity is not None:
                    cap = min(cap, schema.capacity)
                candidate = ShareRule(schema, cap)
                if limits.get("max_frame_bytes"):
                    row = sum(candidate.row_bytes) + 8
                    cap = min(candidate.cap, (int(limits["max_frame_bytes"]) -
                                              FRAME_SLACK) // max(1, row))
                    candidate = ShareRule(schema, cap)
                rule = candidate if candidate.cap > 0 else None
        self._share_rules[table] = rule
        return rule

    def _send_shared(self, conn: Connection, table: str, schema: TableSchema,
                     part: InsertBatch, seconds: Optional[float],
                     from_callback: bool) -> "Future[Any]":
        """Sends a shared insert request on `conn` (SharedInserts' send): staged in the
        insert arena when it has room, else through the socket. `from_callback`: without
        waiting (no new arena, no wait for room)."""
        plan = insert_plan(table, schema, part, requests.timeout_ms(seconds))
        arena = self._insert_arena
        if arena is None or arena.conn is not conn or arena.retired or \
                not arena.fits_bytes(plan.nbytes):
            arena = None if from_callback else self._insert_arena_for(conn, plan.nbytes)
        sent = None if arena is None else arena.send(
            plan, part, caller_waits=False, room_wait=0.0 if from_callback else ROOM_WAIT_S)
        if sent is None:
            sent = conn.submit(requests.insert_meta(table, part, seconds), part.buffers(),
                               decode_keys)
        return sent[1]  # its error reaches _forget_schema_after through SharedInserts

    def send_insert(self, table: str, batch: InsertBatch, *,
                    timeout: Optional[float] = None) -> "Future[np.ndarray[Any, Any]]":
        """Sends a prepared InsertBatch (columns exactly as the table wants them) and
        returns the Future of its keys without waiting. Used by Writer."""
        return self._send_insert(table, batch, timeout, window=False)[2]

    def _send_insert(self, table: str, batch: InsertBatch, seconds: Optional[float], *,
                     window: bool, caller_waits: bool = False,
                     conn: Optional[Connection] = None, stager: Optional[InsertArena] = None,
                     schema: Optional[TableSchema] = None
                     ) -> Tuple[Connection, int, Future[Any]]:
        """Sends one insert request: staged in `stager` when given and it has room (its
        `schema`: the one the batch was checked against), else through the socket."""
        conn = self.connection() if conn is None else conn
        if window:
            self._insert_window.acquire()
        try:
            sent = None
            if stager is not None and schema is not None:
                plan = insert_plan(table, schema, batch, requests.timeout_ms(seconds))
                sent = stager.send(plan, batch, caller_waits=caller_waits)
            if sent is None:
                meta = requests.insert_meta(table, batch, seconds)
                sent = conn.submit(meta, batch.buffers(), decode_keys,
                                   caller_waits=caller_waits)
            request_id, future = sent
        except BaseException:
            if window:
                self._insert_window.release()
            raise
        if window:
            window_slots = self._insert_window
            future.add_done_callback(lambda _f: window_slots.release())
        future.add_done_callback(self._schema_check(table))
        return conn, request_id, future

    def _insert_stager(self, conn: Connection, table: str, schema: TableSchema,
                       batch: InsertBatch, parts: List[InsertBatch],
                       seconds: Optional[float]) -> Optional[InsertArena]:
        """The staging arena that `parts` (of `batch`) go through, or None for the socket:
        shm off or not offered, a batch not exactly the table's columns, a part too
        large, the arena refused (see replayd.shm.insert_arena)."""
        if self._shm is False or not conn.shm_offered or not stageable(schema, batch):
            return None
        plan = insert_plan(table, schema, parts[0], requests.timeout_ms(seconds))
        return self._insert_arena_for(conn, plan.nbytes)

    def _insert_arena_for(self, conn: Connection, nbytes: int) -> Optional[InsertArena]:
        """This process's insert arena on `conn` if regions of `nbytes` fit in it, else a
        larger one replacing it; None when they are too large for any, or the server
        refuses it (the connection's inserts then keep the socket)."""
        arena = self._insert_arena
        if arena is not None and arena.conn is conn and not arena.retired and \
                arena.fits_bytes(nbytes):
            return arena
        with self._insert_arena_lock:
            arena = self._insert_arena
            if arena is not None and arena.conn is conn and not arena.retired and \
                    arena.fits_bytes(nbytes):
                return arena  # another thread made it meanwhile
            if self._insert_arena_refused is conn:
                return None
            size = ARENA_BYTES
            if arena is not None and arena.conn is conn:
                size = max(size, arena.nbytes)
            while 2 * nbytes > size and size < MAX_ARENA_BYTES:
                size *= 2
            if 2 * nbytes > size:
                return None
            try:
                staging = map_staging(conn, size, self._timeout)
            except ARENA_REFUSED:
                self._insert_arena_refused = conn
                return None
            self._insert_arena = InsertArena(conn, staging)
        if arena is not None:
            self._drop_insert_arena(arena)
        return self._insert_arena

    def send_steps(self, table: str, batch: InsertBatch, episode_ids: Any
                   ) -> "Future[np.ndarray[Any, Any]]":
        """Sends ``append_steps`` of `batch` (columns exactly as the table wants them) to
        `episode_ids` (n uint64: episodes opened on this process's connection) without
        waiting; the Future holds the steps' keys. Staged in the connection's insert arena
        when it can be, as `insert_async` (docs/SHM.md, "Batched inserts")."""
        conn = self.connection()
        meta = requests.insert_meta(table, batch, None)
        meta["op"] = "append_steps"
        ids = np.ascontiguousarray(episode_ids, dtype="<u8")
        columns = [*batch.arrays, ids] + ([] if batch.priorities is None
                                          else [batch.priorities])
        if isinstance(batch.version, np.ndarray):
            columns.append(batch.version)  # after the ids and priorities
        if self._shm is not False and conn.shm_offered and \
                stageable(self.schema(table), batch):
            arena = self._insert_arena_for(conn, sum(padded(c.nbytes) for c in columns))
            sent = None if arena is None else arena.send_columns(meta, columns, batch.n)
            if sent is not None:
                return sent[1]
        return conn.submit(meta, columns, decode_keys)[1]

    def _drop_insert_arena(self, arena: InsertArena) -> None:
        """Takes no more regions from `arena` and releases it (on the server, when its
        connection lives: requests still reading it keep the server's mapping)."""
        arena.retire()
        try:
            self.unmap_staging(arena.conn, arena.arena)
        except ReplayError:
            pass

    def writer(self, table: str, batch: Optional[int] = None, *,
               max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, timeout: Any = DEFAULT,
               keep_keys: bool = False,
               max_delay: Optional[float] = DEFAULT_MAX_DELAY) -> "Writer":
        """A Writer that buffers single items and inserts them `batch` at a time (None:
        about 64 KiB, 64 to 1024 items, at most the server's ``max_batch_items``; above
        it: InvalidArgument), keeping up to `max_in_flight` batches awaiting
        replies, and sends a partial batch whose first item is `max_delay` seconds old
        (see Writer)."""
        return Writer(self, table, batch, max_in_flight=max_in_flight,
                      timeout=self._timeout_of(timeout), keep_keys=keep_keys,
                      max_delay=max_delay)

    def sample(self, table: Union[str, MixLike], batch_size: int, *, beta: float = 0.4,
               nstep: Optional[int] = None, gamma: float = 1.0,
               timeout: Any = DEFAULT, allocate: Optional[Allocator] = None,
               fields: Optional[Sequence[str]] = None, versions: bool = False,
               min_version: PerTable = None, max_staleness: PerTable = None,
               value: PerValue = None) -> Sample:
        """Samples `batch_size` items (with replacement), waiting for the rate limiter at
        most `timeout` seconds (server-side; TimeoutError after that).

        `table` may be a dict of table -> fraction (``{"online": 0.5, "demos": 0.5}``): a
        mixed batch (docs/MIXED.md), a MixedSample whose rows are grouped by table, each
        table's share requested at once (one round trip) and drawn by its own selector
        and rate limiter. `fields` names the fields it carries (None: every field, which
        the tables must then share).

        `allocate(nbytes)`, when given, returns the writable contiguous buffer (at least
        `nbytes`, see `sample_nbytes`) that the reply is received into, so the Sample's
        arrays view the caller's memory (a pinned staging buffer, say). It is called in the
        thread that reads the reply; a buffer that does not fit is ignored. After a local
        timeout the buffer may still be written until the late reply has arrived.

        `nstep` (episodic tables): draw n-step transitions of k = nstep steps discounted
        by `gamma` in [0, 1]; the Sample's data then holds the return in place of the
        reward field, the bootstrap fields h steps on, ``discount`` (gamma^h, 0 when the
        episode terminated in the window; in the reward field's dtype) and ``steps`` (h,
        int64) (see Sample and docs/TRAJECTORIES.md for which steps are drawn). The server
        samples a table with frame fields (docs/PIXELS.md) as n-step transitions, k = 1
        unless given.

        Policy versions (plain samples, docs/VERSIONS.md): ``versions=True`` gives each
        row's version (the Sample's `versions`); ``min_version=v`` draws only items of
        version >= v, by the table's selector restricted to them (probabilities and
        weights over them alone), waiting like the rate limiter while none is eligible;
        ``max_staleness=k`` means min_version = the current version of published value
        `value` (default: the one the table follows) - k. A bound implies versions. On a
        mixed batch each of them is one value for every table, or a dict of table -> value
        for the tables it names (the others unbounded; docs/MIXED.md)."""
        if not isinstance(table, str):
            kind = self._mix_kind(table, nstep, gamma, versions, min_version, max_staleness,
                                  value)
            return self._mixed_sample(table, batch_size, kind, beta, timeout, fields, allocate)
        bound = None
        if asked(versions, min_version, max_staleness, value):
            bound = self._version_bound(table, nstep, versions, min_version, max_staleness,
                                        value)
        if fields is not None:
            raise InvalidArgument(f"table '{table}': fields= selects the fields of a mixed "
                                  "batch (a dict of table -> fraction)")
        if nstep is None and self.shm_enabled():
            return self._plane_sample(table, batch_size, beta, timeout, allocate, bound)
        meta = (requests.sample_meta(table, batch_size, beta, None) if nstep is None else
                requests.nstep_meta(table, batch_size, nstep, gamma, beta, None))
        decode = self._sample_decoder(table, nstep)
        if bound is not None:
            meta.update(bound)
            decode = sample_decoder(self._schemas.get(table), versions=True)
        sample: Sample = self._call(meta, decode=decode,
                                    timeout=timeout, server_timeout=True, allocate=allocate)
        return sample

    @staticmethod
    def _version_bound(table: str, nstep: Optional[int], versions: bool,
                       min_version: PerTable, max_staleness: PerTable,
                       value: PerValue) -> Tuple[Tuple[str, Any], ...]:
        """A one-table sample's policy version members (replayd.policy_versions) as sorted
        pairs (a dict bound read as for a mix of that one table, replayd.mixed_bounds);
        InvalidArgument, before anything is sent, for a bad combination or an n-step
        sample."""
        _no_nstep_bound(table, nstep)
        meta = table_bound(table, versions, min_version, max_staleness, value)
        return tuple(sorted((meta or {}).items()))

    @classmethod
    def _mix_kind(cls, mix: MixLike, nstep: Optional[int], gamma: float, versions: bool,
                  min_version: PerTable, max_staleness: PerTable,
                  value: PerValue) -> DrawKind:
        """What `sample` and `sample_async` draw from a mix: n-step or not, and the policy
        version bound of each table when one is asked for (_mixed_version_bound)."""
        mixed = None
        if asked(versions, min_version, max_staleness, value):
            mixed = cls._mixed_version_bound(Mix.of(mix).tables, nstep, versions, min_version,
                                             max_staleness, value)
        return DrawKind(nstep, gamma, None, mixed)

    @staticmethod
    def _mixed_version_bound(tables: Sequence[str], nstep: Optional[int], versions: bool,
                             min_version: PerTable, max_staleness: PerTable,
                             value: PerValue) -> Optional[MixBound]:
        """A mixed batch's policy version members, each table's bound (a scalar: every
        table's; a dict: the tables it names, replayd.mixed_bounds); InvalidArgument,
        before anything is sent, for a dict naming a table not in `tables`, a bad
        combination or an n-step sample."""
        name = "+".join(map(str, tables))
        _no_nstep_bound(name, nstep)
        return mixed_bound(name, tables, versions, min_version, max_staleness, value)

    # -- shared memory (docs/SHM.md) ---------------------------------------------------

    def plane_table(self, table: str, *, refresh: bool = False) -> Optional[PlaneTable]:
        """`table` mapped for sampling over the shared-memory plane, or None when its
        samples go through the socket (shm=False, the plane not offered, a table with
        frame fields, one whose items retire when sampled, or one the server keeps in
        private memory). Maps the table the first time (one round trip, then cached for
        this process's connection); `refresh` maps it again. Samples use the plane on
        their own; this is for callers that gather rows themselves.
        Raises PermissionDenied (shm=True and the plane is not offered) and NotFound."""
        if not self.shm_enabled():
            return None
        # One lookup: a reconnect in another thread replaces the dict between two.
        cached = self._planes.get(table, _UNMAPPED)
        if not refresh and cached is not _UNMAPPED:
            return cached
        plane: Optional[PlaneTable] = None
        try:
            meta = self._call({"op": "map_table", "table": table})
            plane = PlaneTable.from_map_reply(meta, take_descriptor(meta))
        except InvalidArgument:  # the server says why this table is not offered
            pass
        self._planes[table] = plane
        return plane

    def _plane_of(self, table: str, region: int) -> PlaneTable:
        """The mapping of `table` whose block is `region` (the one a keys reply names):
        cached, or mapped (again, when the table was replaced since). Raises NotFound when
        the table was dropped or replaced again between the reply and the mapping, as the
        C++ PlaneSampler does: its draws name rows of a table that is gone."""
        plane = self._planes.get(table)
        if plane is None or plane.region != region:
            plane = self.plane_table(table, refresh=True)
        if plane is None:
            raise NotFound(f"table '{table}' was dropped or replaced while it was sampled "
                           "(the table of that name is no longer sampled over the plane): "
                           "sample it again")
        plane.check_region(region)
        return plane

    def shm_enabled(self) -> bool:
        """Whether this client uses the shared-memory plane: not shm=False, and offered on
        this process's connection. Raises PermissionDenied when shm=True and the plane is
        not offered."""
        if self._shm is False:
            return False
        return self._shm_on(self.connection())

    def _shm_on(self, conn: Connection) -> bool:
        """shm_enabled for this process's connection `conn` (already looked up)."""
        if self._shm is False:
            return False
        if not conn.shm_offered and self._shm:
            raise PermissionDenied(f"shared memory is not offered by {self._address}: "
                                   f"{conn.shm_reason}")
        return conn.shm_offered

    def staging_arena(self, nbytes: int) -> Tuple[Connection, StagingArena]:
        """A new staging arena of `nbytes` on this process's connection (the connection
        is returned too: only requests sent on it may name the arena). The caller releases
        it with `unmap_staging` (closing the connection releases every arena).
        Raises PermissionDenied when the plane is not offered, ResourceExhausted over
        the server's staging limits."""
        conn = self.connection()
        return conn, map_staging(conn, nbytes, self._timeout)

    def unmap_staging(self, conn: Connection, arena: StagingArena) -> None:
        """Releases `arena` on the server (when `conn` is still alive) and unmaps it."""
        try:
            if conn.alive:
                request_id, future = conn.submit({"op": "unmap_staging", "arena": arena.id},
                                                 caller_waits=True)
                conn.wait(request_id, future, self._timeout)
        finally:
            arena.close()

    def _plane_sample(self, table: str, n: int, beta: float, timeout: Any,
                      allocate: Optional[Allocator],
                      bound: Optional[Tuple[Tuple[str, Any], ...]] = None) -> Sample:
        """`sample` with the plane: the server leaves the rows to the table's mapping when
        it can (``"rows": "auto"``) and copies them otherwise; rows that changed under the
        copy are drawn again, within the call's timeout (RedrawBound). With `allocate`,
        the keys arrive in the caller's buffer and the rows are gathered into it, laid out
        as a socket reply would be."""
        if bound is None and self._planes.get(table, _UNMAPPED) is None:  # known: not mapped
            into = self._sample_into_wait(table, n, beta, timeout, allocate)
            if into is not None:
                return into
        redraws = RedrawBound(table, self._timeout_of(timeout))
        members = None if bound is None else dict(bound)
        received = _ReceivedInto(allocate, self.sample_nbytes(table, n)) if allocate else None
        copy_decoder = (self._sample_decoder(table, None) if bound is None
                        else sample_decoder(self._schemas.get(table), versions=True))
        reply = self._call(keys_request(table, n, beta, None, rows="auto", bound=members),
                           decode=auto_decoder(copy_decoder),
                           timeout=timeout, server_timeout=True,
                           allocate=None if received is None else received.allocate)
        if isinstance(reply, Sample):
            if bound is None and table not in self._planes:
                self._learn_unmapped(table)
            return reply
        plane = self._plane_of(table, reply.region)
        sample, bad = plane.complete(
            reply.draws, None if received is None else received.buffer(), reply.slots)
        while bad.size:
            left = redraws.next_round(len(bad))
            more: KeysReply = self._call(keys_request(table, len(bad), beta, None,
                                                      bound=members),
                                         decode=decode_keys_reply, timeout=left,
                                         server_timeout=True)
            plane.check_region(more.region)  # the rows gathered are of this mapping's table
            bad = plane.repair(sample, bad, more.draws)
        return sample

    def _plane_sample_async(self, plane: PlaneTable, table: str, n: int, beta: float,
                            seconds: Optional[float], allocate: Optional[Allocator],
                            bound: Optional[Tuple[Tuple[str, Any], ...]] = None
                            ) -> "Future[Sample]":
        """`sample_async` over the plane of an already mapped table. The rows are
        gathered by whichever thread handles the reply; a redraw is sent from there and
        never waited for there. A table replaced meanwhile is sampled through the socket."""
        conn = self.connection()
        outcome: "Future[Sample]" = Future()
        outcome.set_running_or_notify_cancel()
        received = _ReceivedInto(allocate, self.sample_nbytes(table, n)) if allocate else None
        members = None if bound is None else dict(bound)
        copy_decoder = (self._sample_decoder(table, None) if bound is None
                        else sample_decoder(self._schemas.get(table), versions=True))
        state: Dict[str, Any] = {}
        redraws = RedrawBound(table, seconds)

        def settle(future: "Future[Any]", then: Callable[[Any], None]) -> None:
            try:
                then(future.result())
            except BaseException as exc:
                if not outcome.done():
                    outcome.set_exception(exc)

        def redraw(count: int) -> None:
            left = redraws.next_round(count)
            conn.submit(keys_request(table, count, beta, left, bound=members), (),
                        decode_keys_reply)[1] \
                .add_done_callback(lambda f: settle(f, on_redrawn))

        def on_reply(reply: Any) -> None:
            if isinstance(reply, Sample):
                outcome.set_result(reply)
            elif reply.region != plane.region:  # replaced: copy the rows instead
                conn.submit({**requests.sample_meta(table, n, beta, seconds), **(members or {})},
                            (), copy_decoder, allocate=allocate)[1] \
                    .add_done_callback(lambda f: settle(f, outcome.set_result))
            else:
                state["sample"], state["bad"] = plane.complete(
                    reply.draws, None if received is None else received.buffer(), reply.slots)
                on_redrawn(None)

        def on_redrawn(reply: Optional[KeysReply]) -> None:
            if reply is not None:
                plane.check_region(reply.region)  # the table replaced since: NotFound
                state["bad"] = plane.repair(state["sample"], state["bad"], reply.draws)
            if state["bad"].size:
                redraw(len(state["bad"]))
            else:
                outcome.set_result(state["sample"])

        conn.submit(keys_request(table, n, beta, seconds, rows="auto", bound=members), (),
                    auto_decoder(copy_decoder),
                    allocate=None if received is None else received.allocate)[1] \
            .add_done_callback(lambda f: settle(f, on_reply))
        return outcome

    def _sample_decoder(self, table: str, nstep: Optional[int]
                        ) -> Callable[[Mapping[str, Any], np.ndarray[Any, Any]], Sample]:
        """The decoder of `table`'s sample replies. An n-step request needs the table's
        reward dtype (`schema`: one ``info`` round trip, the first time); a plain one uses
        the schema when it is known already (a table with frame fields answers it with
        n-step columns)."""
        return sample_decoder(self.schema(table) if nstep is not None
                              else self._schemas.get(table))

    def sample_into(self, table: str, out: Any, batch_size: int, *, beta: float = 0.4,
                    timeout: Any = DEFAULT) -> Sample:
        """`sample` received straight into `out`, a writable C-contiguous buffer (numpy
        array, bytearray, ``tensor.numpy()`` of a pinned torch tensor) of at least
        ``sample_nbytes(table, batch_size)`` bytes: no allocation, no extra copy. The
        Sample's arrays view `out`; they change when `out` is reused.
        Raises InvalidArgument when `out` is too small or not writable and contiguous."""
        if not isinstance(table, str):
            raise InvalidArgument("sample_into takes one table: a mixed batch is assembled "
                                  "from several replies (use sample)")
        need = self.sample_nbytes(table, batch_size)
        try:
            view = memoryview(out).cast("B")
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"sample_into: out must be a contiguous buffer: {exc}") \
                from None
        if view.readonly or view.nbytes < need:
            raise InvalidArgument(f"sample_into: out holds {view.nbytes} "
                                  f"{'read-only ' if view.readonly else ''}bytes; a sample "
                                  f"of {batch_size} items of table '{table}' needs {need}")
        return self.sample(table, batch_size, beta=beta, timeout=timeout,
                           allocate=lambda _nbytes: view)

    def sample_nbytes(self, table: str, batch_size: int) -> int:
        """Bytes of the payload of a sample of `batch_size` items of `table` (its columns
        and their padding, docs/PROTOCOL.md): the size of a buffer for `sample_into`."""
        return sample_nbytes(self.schema(table).fields, int(batch_size))

    def sample_async(self, table: Union[str, MixLike], batch_size: int, *, beta: float = 0.4,
                     nstep: Optional[int] = None, gamma: float = 1.0,
                     timeout: Any = DEFAULT,
                     allocate: Optional[Allocator] = None,
                     fields: Optional[Sequence[str]] = None, versions: bool = False,
                     min_version: PerTable = None, max_staleness: PerTable = None,
                     value: PerValue = None) -> "Future[Sample]":
        """Like `sample` (also with `nstep`, policy versions, and mixed batches) but
        returns a Future at once (with `nstep`, after reading the table's schema the first
        time: one ``info`` round trip)."""
        if not isinstance(table, str):
            kind = self._mix_kind(table, nstep, gamma, versions, min_version, max_staleness,
                                  value)
            return self._mixed_async(table, batch_size, kind,
                                     beta, timeout, fields, allocate)
        bound = None
        if asked(versions, min_version, max_staleness, value):
            bound = self._version_bound(table, nstep, versions, min_version, max_staleness,
                                        value)
        return self._sample_async(table, batch_size, beta, nstep, gamma, timeout, allocate,
                                  bound)

    def _sample_async(self, table: str, batch_size: int, beta: float, nstep: Optional[int],
                      gamma: float, timeout: Any, allocate: Optional[Allocator],
                      bound: Optional[Tuple[Tuple[str, Any], ...]]) -> "Future[Sample]":
        """One table's `sample_async` (`bound`: its policy version members, or None)."""
        seconds = self._timeout_of(timeout)
        shm = nstep is None and self.shm_enabled()
        plane = self.plane_table(table) if shm else None
        if plane is not None:
            return self._plane_sample_async(plane, table, batch_size, beta, seconds, allocate,
                                            bound)
        meta = (requests.sample_meta(table, batch_size, beta, seconds) if nstep is None else
                requests.nstep_meta(table, batch_size, nstep, gamma, beta, seconds))
        decode = self._sample_decoder(table, nstep)
        if bound is not None:
            meta.update(bound)
            decode = sample_decoder(self._schemas.get(table), versions=True)
        elif shm:
            into = self._sample_into(table, batch_size, meta, decode, allocate)
            if into is not None:
                return into[2]
        return self.connection().submit(meta, (), decode, allocate=allocate)[1]

    def _sample_into(self, table: str, batch_size: int, meta: Dict[str, Any],
                     decode: Any, allocate: Optional[Allocator], *, caller_waits: bool = False
                     ) -> Optional[Tuple[InsertArena, int, "Future[Sample]"]]:
        """Sends a plain sample of a table not sampled over the plane, its rows written by
        the server into a region of this process's insert arena (shm/sample_into.py): the
        arena, request id and future; None where it goes through the socket: a reply under
        INTO_MIN_BYTES, a table with frame fields (sampled as n-step transitions), no
        arena, or no room in it now."""
        nbytes = rows_into_arena.into_bytes(self.schema(table), batch_size)
        if nbytes is None:
            return None
        arena = self._insert_arena_for(self.connection(), nbytes)
        if arena is None:
            return None
        sent = arena.send_sample(meta, nbytes, decode, allocate, caller_waits=caller_waits)
        return None if sent is None else (arena, sent[0], sent[1])

    def _learn_unmapped(self, table: str) -> None:
        """After a plane sample of `table` came back with its rows copied: asks once
        whether it is mapped (`plane_table`), so that its next samples have their rows
        written into the arena when it is not. A table gone meanwhile is left unknown."""
        try:
            self.plane_table(table)
        except ReplayError:
            pass

    def _sample_into_wait(self, table: str, n: int, beta: float, timeout: Any,
                          allocate: Optional[Allocator]) -> Optional[Sample]:
        """`sample` of a table the client cannot map, its rows written into a region of the
        insert arena (`_sample_into`), or None (then through the socket). A local timeout
        leaves the region's fate unknown: the arena is given up, as for inserts."""
        seconds = self._timeout_of(timeout)
        meta = requests.sample_meta(table, n, beta, seconds)
        sent = self._sample_into(table, n, meta, self._sample_decoder(table, None), allocate,
                                 caller_waits=True)
        if sent is None:
            return None
        arena, request_id, future = sent
        local = None if seconds is None else seconds + _GRACE_S
        self._notice_wait(arena.conn, future, local, "sample", table, n)
        try:
            sample: Sample = arena.conn.wait(request_id, future, local)
            return sample
        except TimeoutError as exc:
            if not future.done():  # forgotten: its region too
                self._drop_insert_arena(arena)
            raise wait_notice.with_reason(self, "sample", table, n, exc) from None

    def sampler(self, table: Union[str, MixLike, Schedule], batch_size: int, *,
                prefetch: int = 4, beta: float = 0.4,
                nstep: Optional[int] = None, gamma: float = 1.0,
                timeout: Optional[float] = None,
                transform: Optional[Callable[[Sample], Any]] = None,
                allocate: Optional[Allocator] = None,
                fields: Optional[Sequence[str]] = None, versions: bool = False,
                min_version: PerTable = None, max_staleness: PerTable = None,
                value: PerValue = None) -> "Sampler":
        """An iterator over samples that keeps `prefetch` requests in flight (see Sampler);
        with `nstep`, over n-step samples of an episodic table (see `sample`). `table`
        may be a dict of table -> fraction or a schedule (batch index -> such a dict):
        mixed batches (docs/MIXED.md). `versions`, `min_version`, `max_staleness`,
        `value`: as `sample`'s (a dict per table for mixed batches), for every batch (a
        max_staleness bound is resolved by the server at each request)."""
        bound: Union[None, Dict[str, Any], MixBound] = None
        if asked(versions, min_version, max_staleness, value):
            if isinstance(table, str):
                bound = dict(self._version_bound(table, nstep, versions, min_version,
                                                 max_staleness, value))
            else:
                bound = self._mixed_version_bound(schedule_of(table)[1], nstep, versions,
                                                  min_version, max_staleness, value)
        return Sampler(self, table, batch_size, prefetch=prefetch, beta=beta, nstep=nstep,
                       gamma=gamma, timeout=timeout, transform=transform, allocate=allocate,
                       fields=fields, bound=bound)

    # -- episodes ----------------------------------------------------------------------

    def episode_writer(self, table: str, envs: int = 1, batch: Optional[int] = None, *,
                       max_in_flight: int = 8, timeout: Any = DEFAULT,
                       keep_keys: bool = False,
                       max_delay: Optional[float] = DEFAULT_MAX_DELAY) -> "EpisodeWriter":
        """An EpisodeWriter that appends steps of `envs` concurrent episodes of an episodic
        table, `batch` steps per request (None: 64, at most the server's
        ``max_batch_items``; above it: InvalidArgument), up to `max_in_flight` requests
        unacknowledged (see replayd.episodes). ``keep_keys=True`` collects the written
        steps' keys (`EpisodeWriter.keys`); off by default, as they would grow without
        bound.
        `max_delay`: as the Writer's, seconds a step may wait in a partial batch."""
        return EpisodeWriter(self, table, envs, batch, max_in_flight=max_in_flight,
                             timeout=self._timeout_of(timeout), keep_keys=keep_keys,
                             max_delay=max_delay)

    def vector_writer(self, table: str, envs: int, batch: Optional[int] = None, *,
                      max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, timeout: Any = DEFAULT,
                      keep_keys: bool = False,
                      max_delay: Optional[float] = DEFAULT_MAX_DELAY) -> VectorWriter:
        """A VectorWriter: each `append` adds one item per environment of a vectorized
        environment (arrays of `envs` rows) to a plain table; batches as `writer`'s (see
        replayd.vector_writers)."""
        return VectorWriter(self, table, envs, batch, max_in_flight=max_in_flight,
                            timeout=self._timeout_of(timeout), keep_keys=keep_keys,
                            max_delay=max_delay)

    def vector_episode_writer(self, table: str, envs: int, batch: Optional[int] = None, *,
                              max_in_flight: int = 8, timeout: Any = DEFAULT,
                              keep_keys: bool = False,
                              max_delay: Optional[float] = DEFAULT_MAX_DELAY
                              ) -> VectorEpisodeWriter:
        """A VectorEpisodeWriter: each `append` adds one step per environment (arrays of
        `envs` rows) to an episodic table, each environment its own episode, and ends the
        episodes its `terminated` / `truncated` flags name; `batch` None: as `writer`'s
        (see replayd.vector_writers)."""
        return VectorEpisodeWriter(self, table, envs, batch, max_in_flight=max_in_flight,
                                   timeout=self._timeout_of(timeout), keep_keys=keep_keys,
                                   max_delay=max_delay)

    def sample_sequences(self, table: Union[str, MixLike], batch: int, length: int, *,
                         stride: int = 1, burn_in: int = 0, pad: bool = False,
                         beta: float = 0.4, timeout: Any = DEFAULT,
                         fields: Optional[Sequence[str]] = None) -> Sample:
        """Samples `batch` sequences of ``burn_in + length`` consecutive steps of one
        episode each. The Sample's data holds (batch, T, ...) arrays and its `mask` (batch,
        T) marks real steps; keys, probabilities and weights are those of the start steps
        (the first of the `length` steps). Starts are positions that are multiples of
        `stride`; burn-in rows before the episode's first step are masked out; with `pad`
        an ended episode may end a sequence early (the rest masked, zero-filled). Which
        starts are drawn: docs/TRAJECTORIES.md. `table` may be a dict of table ->
        fraction: a mixed batch of sequences (docs/MIXED.md)."""
        if not isinstance(table, str):
            shape = requests.SequenceShape(length, stride, burn_in, pad)
            return self._mixed_sample(table, batch, DrawKind(sequence=shape), beta, timeout,
                                      fields, None)
        meta = requests.sequence_meta(table, batch, length, stride, burn_in, pad, beta, None)
        sample: Sample = self._call(meta, decode=decode_sequences, timeout=timeout,
                                    server_timeout=True)
        return sample

    def sample_sequences_async(self, table: Union[str, MixLike], batch: int, length: int,
                               *, stride: int = 1, burn_in: int = 0, pad: bool = False,
                               beta: float = 0.4, timeout: Any = DEFAULT,
                               allocate: Optional[Allocator] = None,
                               fields: Optional[Sequence[str]] = None) -> "Future[Sample]":
        """Like `sample_sequences` (also mixed) but returns a Future at once."""
        if not isinstance(table, str):
            shape = requests.SequenceShape(length, stride, burn_in, pad)
            return self._mixed_async(table, batch, DrawKind(sequence=shape), beta, timeout,
                                     fields, allocate)
        meta = requests.sequence_meta(table, batch, length, stride, burn_in, pad, beta,
                                      self._timeout_of(timeout))
        return self.connection().submit(meta, (), decode_sequences, allocate=allocate)[1]

    def sequence_sampler(self, table: Union[str, MixLike, Schedule], batch: int, length: int,
                         *, stride: int = 1, burn_in: int = 0, pad: bool = False,
                         beta: float = 0.4, prefetch: int = 4,
                         timeout: Optional[float] = None,
                         transform: Optional[Callable[[Sample], Any]] = None,
                         allocate: Optional[Allocator] = None,
                         fields: Optional[Sequence[str]] = None) -> "Sampler":
        """An iterator over `sample_sequences` samples that keeps `prefetch` requests in
        flight (see Sampler); `table` as `sampler`'s (mixed batches too)."""
        return Sampler(self, table, batch, prefetch=prefetch, beta=beta, timeout=timeout,
                       transform=transform, allocate=allocate, fields=fields,
                       sequence=requests.SequenceShape(length, stride, burn_in, pad))

    def read_all(self, table: str, *, page: int = 4096) -> Iterator[Dict[str, Any]]:
        """Every stored step of an episodic table in insertion order, as pages (dicts of
        arrays: key, episode, position, sequence, ``end`` (uint8: 1 on the last row of an
        episode that ended terminated, 2 truncated, 0 otherwise; from servers that send
        it) and the fields, nested ones as dicts) of at most `page` steps, each one
        ``read_steps`` round trip (the server also bounds a page by max_frame_bytes).
        Steps stored meanwhile appear in later pages."""
        return (nest_page(columns) for columns in iterate_steps(self, table, page))

    def read_items(self, table: str, *, page: int = 4096,
                   after: int = 0) -> Iterator[Dict[str, Any]]:
        """The items of a plain (non-episodic) table in key order (insertion order under
        the fifo remover; docs/PROTOCOL.md, read_steps), as pages of
        at most `page` items: dicts of arrays ``key`` (uint64), ``priority`` (float64)
        and the fields (nested ones as dicts); each page one ``read_steps`` round trip,
        bounded in memory whatever the table's size. Items inserted meanwhile appear in
        later pages (under fifo); `after` starts after that key. The server keeps serving
        meanwhile."""
        return (nest_page(columns) for columns in iterate_steps(self, table, page, after))

    def episodes(self, table: str, *, page: int = 4096) -> Iterator[Dict[str, Any]]:
        """The stored episodes of an episodic table in id order, each a dict of arrays
        (its steps in position order: key, episode, position, sequence, end, fields).
        Reads the whole table first (`read_all`), so it holds all of it in memory; see
        replayd.datasets.ended_episodes for a bounded reader."""
        return (nest_page(episode) for episode in
                group_episodes(iterate_steps(self, table, page)))

    def read_episodes(self, table: str, *, page: int = 4096) -> Dict[str, Any]:
        """Every stored episode of an episodic table at once, ragged: each field's steps
        concatenated in (episode id, position) order, with ``key``, ``episode``,
        ``position``, ``sequence`` and ``offsets`` (episode i is rows
        ``offsets[i]:offsets[i + 1]``); from servers that send ``end``, also
        ``terminated`` and ``truncated``: one bool per episode, how it ended (both False:
        still open). Reads the whole table (`read_all`)."""
        return nest_page(ragged_episodes(iterate_steps(self, table, page)))

    def update_priorities(self, table: str, keys: Any, priorities: Any, *,
                          timeout: Any = DEFAULT) -> int:
        """Sets the priorities of the items with `keys`; returns how many keys were stale
        (no longer stored, ignored). One bad priority rejects the whole call."""
        request = requests.keyed_request("update_priorities", table, keys, priorities)
        if request is None:
            return 0
        reply = self._call(*request, timeout=timeout)
        return int(reply.get("stale", 0))

    def update_priorities_async(self, table: str, keys: Any,
                                priorities: Any) -> "Future[Dict[str, Any]]":
        """Like `update_priorities`; the Future holds the reply ``{"applied", "stale"}``."""
        request = requests.keyed_request("update_priorities", table, keys, priorities)
        if request is None:
            done: Future[Any] = Future()
            done.set_result({"applied": 0, "stale": 0})
            return done
        return self.connection().submit(*request)[1]

    def update_mixed_priorities(self, batch: Any, priorities: Any, *,
                                tables: Optional[Sequence[str]] = None,
                                timeout: Any = DEFAULT) -> int:
        """Sets the priorities of a mixed batch's rows (docs/MIXED.md), each on its own
        table's item: `batch` is the MixedSample (or a dict with "keys" and "table", e.g.
        a replayd.torch batch, with `tables` naming the tables its "table" indexes) and
        `priorities` one per row. One request per table, all sent before any reply is
        read (one round trip). Returns how many keys were stale over all tables; a
        table's error is raised after every reply arrived (the other tables' updates are
        applied)."""
        parts = priority_parts(batch, priorities, tables)
        conn = self.connection()
        wanted = [requests.keyed_request("update_priorities", table, keys, prio)
                  for table, keys, prio in parts]
        sent = conn.submit_all([(meta, buffers, None) for meta, buffers in filter(None, wanted)],
                               caller_waits=True)
        seconds = self._timeout_of(timeout)
        stale, error = 0, None
        for request_id, future in sent:
            try:
                stale += int(conn.wait(request_id, future, seconds).get("stale", 0))
            except ReplayError as exc:  # the others' replies are still read
                error = error or exc
        if error is not None:
            raise error
        return stale

    # -- mixed batches (docs/MIXED.md) -------------------------------------------------

    def _mixed_sample(self, table: Any, n: int, kind: DrawKind, beta: float, timeout: Any,
                      fields: Optional[Sequence[str]],
                      allocate: Optional[Allocator]) -> MixedSample:
        """A mixed batch on this process's connection: every table's request written
        before any reply is read (replayd.mixed_draw)."""
        if allocate is not None:
            raise InvalidArgument("allocate= receives one table's reply; a mixed batch is "
                                  "assembled from several (leave it out)")
        seconds = self._timeout_of(timeout)
        local = None if seconds is None else seconds + _GRACE_S
        conn = self.connection()
        plane = kind.plain and self._shm_on(conn)
        if kind.plain:
            done = sample_plain_mix(self, conn, table, n, beta, seconds, plane, fields, local,
                                    self._mixed_notice, kind.bound)
            if done is not None:
                return done
        draw = MixedDraw(self, conn, Mix.of(table), n, kind, beta, seconds, fields,
                         plane=plane)
        return draw.result(local, notice=self._mixed_notice)

    def _mixed_notice(self, conn: Connection, future: "Future[Any]", table: str,
                      n: int) -> None:
        """A mixed batch's wait notice: a table's share still pending after WAIT_NOTICE_S
        is logged with why its table holds it (replayd.wait_notice)."""
        if not conn.wait_done(future, wait_notice.WAIT_NOTICE_S):
            wait_notice.log_wait(self, "sample", table, n, wait_notice.WAIT_NOTICE_S)

    def _mixed_async(self, table: Any, n: int, kind: DrawKind, beta: float, timeout: Any,
                     fields: Optional[Sequence[str]],
                     allocate: Optional[Allocator]) -> "Future[Sample]":
        """A mixed batch's Future: the tables' one-table _async requests, combined."""
        if allocate is not None:
            raise InvalidArgument("allocate= receives one table's reply; a mixed batch is "
                                  "assembled from several (leave it out)")
        mix = Mix.of(table)

        def request(name: str, count: int) -> "Future[Sample]":
            if kind.sequence is not None:
                shape = kind.sequence
                return self.sample_sequences_async(name, count, shape.length,
                                                   stride=shape.stride, burn_in=shape.burn_in,
                                                   pad=shape.pad, beta=beta, timeout=timeout)
            members = None if kind.bound is None else \
                tuple(sorted(kind.bound.members(name).items()))
            return self._sample_async(name, count, beta, kind.nstep, kind.gamma, timeout, None,
                                      members)

        future: "Future[Any]" = combine(self, mix, mix.counts(n), request, fields)
        return future

    def delete(self, table: str, keys: Any, *, timeout: Any = DEFAULT) -> int:
        """Deletes the items with `keys`; returns how many were deleted (stale keys are
        ignored)."""
        request = requests.keyed_request("delete", table, keys, None)
        if request is None:
            return 0
        reply = self._call(*request, timeout=timeout)
        return int(reply.get("deleted", 0))

    # -- internals ---------------------------------------------------------------------

    def _schema_check(self, table: str) -> Callable[[Future[Any]], None]:
        """A done-callback that drops the cached schema when the server rejected an insert
        in a way a stale schema could explain."""
        def check(future: Future[Any]) -> None:
            exc = future.exception()
            if exc is not None:
                self._forget_schema_after(table, exc)
        return check

    def _forget_schema_after(self, table: str, error: BaseException) -> None:
        """Drops `table`'s cached schema (and share rule) when an insert's `error` could
        come from it being stale."""
        if isinstance(error, (InvalidArgument, NotFound)):
            self._schemas.pop(table, None)
            self._share_rules.pop(table, None)


# Clients alive in this process, reset in a forked child (their locks may have been held
# by parent threads that do not exist in the child).
_LIVE_CLIENTS: "weakref.WeakSet[Client]" = weakref.WeakSet()

# This process's id, renewed in a forked child: os.getpid() is a system call, and the
# fast path of `connection` runs on every request.
_PID = [os.getpid()]


class _ReceivedInto:
    """A caller's `allocate` for a sample over the plane: the reply (keys, or the whole
    sample when the server copied the rows) is received into a buffer of the whole
    sample's size, which `buffer` then hands to the gather."""

    def __init__(self, allocate: Allocator, nbytes: int) -> None:
        self._allocate = allocate
        self._nbytes = nbytes
        self._buffer: Any = None

    def allocate(self, nbytes: int) -> Any:
        self._buffer = self._allocate(max(nbytes, self._nbytes))
        return self._buffer

    def buffer(self) -> Any:
        """The buffer the reply arrived in, when it holds the whole sample (else None)."""
        buffer = self._buffer
        return None if buffer is None else allocated_buffer(lambda _: buffer, self._nbytes)


def _reset_clients_after_fork() -> None:
    _PID[0] = os.getpid()
    clients = list(_LIVE_CLIENTS)
    _LIVE_CLIENTS.clear()
    for client in clients:
        client._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_clients_after_fork)
