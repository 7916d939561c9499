"""Writers for vectorized environments: one call appends one transition per environment,
given as arrays whose leading axis is the environment (what ``gymnasium.vector`` envs
return from ``step``).

- `VectorWriter` (a plain table): `append` adds the `envs` rows to the batch being filled
  with one slice copy per field (instead of `envs` calls of `Writer.append`), and sends
  batches as they fill, as the Writer does; over the shared-memory plane they are staged
  (the rows copied once, into the staging slot, docs/SHM.md).
- `VectorEpisodeWriter` (an episodic table): each environment writes its own episode;
  `append(terminated=..., truncated=...)` ends, after this step, the episodes of the
  environments whose flag is set, and the next step of such an environment opens a new
  episode. Built on `EpisodeWriter` (its own connection, its staged steps, its handling
  of lost connections).

Errors: a call is checked whole before any row is buffered (InvalidArgument naming the
field: missing, unknown, not convertible to the field's dtype without loss, or not of
shape ``(envs, *field.shape)``); errors of batches already sent come from later calls, as
with the Writer.

Threading: one thread uses a writer, as with Writer and EpisodeWriter.
"""
from __future__ import annotations

from typing import Any, List, Mapping, Optional

import numpy as np

from .batch_limits import writer_batch
from .client_interface import ClientLike
from .columns import convert_value
from .episodes import EpisodeWriter
from .errors import InvalidArgument
from .nesting import flatten_values
from .schema import TableSchema
from .writer import DEFAULT_MAX_DELAY, DEFAULT_MAX_IN_FLIGHT, Writer, default_batch

__all__ = ["VectorWriter", "VectorEpisodeWriter", "env_rows"]


def env_rows(schema: TableSchema, data: Mapping[str, Any], envs: int) -> List[np.ndarray[Any, Any]]:
    """One array per field of `schema`, in its order, of shape ``(envs, *field.shape)`` and
    of the field's dtype, from `data` (field -> array with the environments first; nested
    fields as dicts). Raises InvalidArgument naming the field otherwise."""
    table = schema.table
    if not isinstance(data, Mapping):
        raise InvalidArgument(f"table '{table}': a step of the environments must be a dict of "
                              f"field -> array (environments first), got {type(data).__name__}")
    if schema.nested:
        data = flatten_values(data, schema.by_name)
    unknown = [name for name in data if schema.get(name) is None]
    if unknown:
        raise InvalidArgument(f"table '{table}': unknown field(s) {', '.join(map(repr, unknown))}"
                              f"; the table's fields are {', '.join(f.name for f in schema.fields)}")
    arrays: List[np.ndarray[Any, Any]] = []
    for field in schema.fields:
        if field.name not in data:
            raise InvalidArgument(f"table '{table}': field '{field.name}' is missing (every "
                                  "field, one row per environment)")
        value = data[field.name]
        wanted = (envs, *field.shape)
        if type(value) is np.ndarray and value.dtype == field.dtype and value.shape == wanted:
            arrays.append(value)
            continue
        array, converted = convert_value(field.name, value, field.dtype, table=table)
        if array.dtype != field.dtype:
            raise InvalidArgument(f"table '{table}': field '{field.name}': dtype "
                                  f"{array.dtype} does not convert to {field.dtype} without "
                                  "loss")
        if array.shape != wanted:
            raise InvalidArgument(f"table '{table}': field '{field.name}': shape "
                                  f"{tuple(array.shape)}, expected {wanted} (one row per "
                                  f"environment, {envs} environments)")
        arrays.append(array)
    return arrays


def _env_priorities(table: str, priorities: Any, envs: int) -> Optional[np.ndarray[Any, Any]]:
    if priorities is None:
        return None
    try:
        array = np.asarray(priorities, dtype="<f8").reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"table '{table}': priorities must be numbers: {exc}") from None
    if array.shape[0] != envs:
        raise InvalidArgument(f"table '{table}': {array.shape[0]} priorities for {envs} "
                              "environments")
    return array


def _env_flags(table: str, name: str, flags: Any, envs: int) -> Optional[np.ndarray[Any, Any]]:
    """`flags` (None, or one truth value per environment) as a bool array."""
    if flags is None:
        return None
    array = np.asarray(flags).reshape(-1)
    if array.shape[0] != envs or array.dtype.kind not in "biuf":
        raise InvalidArgument(f"table '{table}': {name} must hold one flag per environment "
                              f"({envs}), got {np.asarray(flags)!r}")
    return array.astype(bool)


class VectorWriter:
    """Appends one item per environment of `envs` to a plain table per call; batches
    and flow control as `Writer` (`batch` rows per request: None for its default; above
    the server's ``max_batch_items``: InvalidArgument here).

    ``append(obs=obs, act=act, ...)`` (or a dict) with arrays of ``envs`` rows, and
    optionally `priorities` (``envs`` floats); `flush`, `close`, `keys`,
    `items_written` and `staged` as the Writer's. Use as a context manager."""

    def __init__(self, client: ClientLike, table: str, envs: int,
                 batch: Optional[int] = None, *, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                 timeout: Optional[float] = None, keep_keys: bool = False,
                 max_delay: Optional[float] = DEFAULT_MAX_DELAY) -> None:
        if isinstance(envs, bool) or not isinstance(envs, int) or envs < 1:
            raise InvalidArgument(f"envs must be an int >= 1, got {envs!r}")
        self.envs = envs
        self._writer = Writer(client, table, batch, max_in_flight=max_in_flight,
                              timeout=timeout, keep_keys=keep_keys, max_delay=max_delay)
        self._schema = self._writer._schema

    def append(self, item: Optional[Mapping[str, Any]] = None, *,
               priorities: Any = None, version: Optional[int] = None,
               **fields: Any) -> None:
        """Adds one item per environment (row i of every array: environment i's);
        `version`: the policy version they were acted with (one int; None as
        `Writer.append`'s)."""
        arrays = env_rows(self._schema, item if item is not None else fields, self.envs)
        self._writer._extend(arrays, _env_priorities(self._schema.table, priorities,
                                                     self.envs), version)

    @property
    def batch(self) -> int:
        return self._writer.batch

    @property
    def staged(self) -> bool:
        return self._writer.staged

    @property
    def keys(self) -> np.ndarray[Any, Any]:
        return self._writer.keys

    @property
    def items_written(self) -> int:
        return self._writer.items_written

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> "VectorWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._writer.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"<replayd.VectorWriter envs={self.envs} {self._writer!r}>"


class VectorEpisodeWriter:
    """Appends one step per environment of `envs` to an episodic table per call, each
    environment writing its own episode (see the module's docstring); options as
    `EpisodeWriter`'s, but for `batch`: None (the default) takes the Writer's default
    (`default_batch`: about 64 KiB of steps, 64 to 1024, at most the server's
    ``max_batch_items``), not 64: a call brings `envs` steps at once, so a request's fixed
    cost is shared by fewer calls otherwise. A `batch` above ``max_batch_items`` raises
    InvalidArgument here.

    ``append(obs=obs, rew=rew, ..., terminated=term, truncated=trunc)``: the step of every
    environment (arrays of ``envs`` rows), then the end, right after it, of each episode
    whose `terminated` (no bootstrap past it) or else `truncated` flag is set (one truth
    value per environment each; None: no end). `end_episode(env, terminated)` ends one
    episode between steps; `flush`, `close` and `keys` as the EpisodeWriter's (`close`
    ends the open episodes as truncated). In a table with ``next_of`` fields, an end
    made here takes the last step as the final observation (see
    `EpisodeWriter.end_episode`)."""

    def __init__(self, client: ClientLike, table: str, envs: int,
                 batch: Optional[int] = None, *,
                 max_in_flight: int = 8, timeout: Optional[float] = None,
                 keep_keys: bool = False,
                 max_delay: Optional[float] = DEFAULT_MAX_DELAY) -> None:
        if isinstance(envs, bool) or not isinstance(envs, int) or envs < 1:
            raise InvalidArgument(f"envs must be an int >= 1, got {envs!r}")
        self.envs = envs
        if batch is None:  # as the Writer's: about 64 KiB of steps, 64 to 1024, within
            schema = client.schema(table)  # the server's max_batch_items
            batch = writer_batch(client, table, None,
                                 default_batch(schema.fields, schema.capacity))
        self._writer = EpisodeWriter(client, table, envs, batch, max_in_flight=max_in_flight,
                                     timeout=timeout, keep_keys=keep_keys, max_delay=max_delay)
        self._schema = self._writer._steps._schema

    def append(self, item: Optional[Mapping[str, Any]] = None, *,
               terminated: Any = None, truncated: Any = None,
               priorities: Any = None, version: Optional[int] = None,
               **fields: Any) -> None:
        """Buffers one step of every environment's episode, then ends the episodes
        flagged (see the class); `version` as `VectorWriter.append`'s."""
        table = self._schema.table
        arrays = env_rows(self._schema, item if item is not None else fields, self.envs)
        prio = _env_priorities(table, priorities, self.envs)
        ends_terminated = _env_flags(table, "terminated", terminated, self.envs)
        ends_truncated = _env_flags(table, "truncated", truncated, self.envs)
        writer, steps = self._writer, self._writer._steps
        if steps._closed or steps._failed:
            steps._check_open()
        if writer._conn is None or not writer._conn.alive:
            writer._connection()  # a lost connection raises here, saying what was lost
        episodes = writer._episode
        ids = [episode if episode is not None else writer._open(env)
               for env, episode in enumerate(episodes)]
        rows = writer._row_episodes
        rows.extend(ids)
        try:
            steps._extend(arrays, prio, version)
        except BaseException:
            del rows[steps._count:]  # the ids of rows not buffered (they follow those that are)
            raise
        has_steps = writer._has_steps
        for env in range(self.envs):
            has_steps[env] = True
        if ends_terminated is None and ends_truncated is None:
            return
        done = np.zeros(self.envs, bool)
        if ends_terminated is not None:
            done |= ends_terminated
        if ends_truncated is not None:
            done |= ends_truncated
        for env in np.flatnonzero(done).tolist():
            writer.end_episode(env, terminated=bool(ends_terminated is not None
                                                    and ends_terminated[env]))

    def end_episode(self, env: int, terminated: bool = True) -> None:
        """Ends environment `env`'s episode after its last step (see
        `EpisodeWriter.end_episode`)."""
        self._writer.end_episode(env, terminated)

    @property
    def keys(self) -> np.ndarray[Any, Any]:
        return self._writer.keys

    @property
    def staged(self) -> bool:
        """Whether the steps go through the writer connection's staging arena."""
        return self._writer._steps._slots is not None

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> "VectorEpisodeWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._writer.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"<replayd.VectorEpisodeWriter envs={self.envs} table={self._schema.table!r}>"
