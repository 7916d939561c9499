"""Episodic tables over a `ShardedClient`: a writer that keeps each episode on one shard,
n-step and sequence samples drawn from the union of the shards, and reading every shard.

Episodes never span shards: a window (n-step or sequence) is drawn inside one episode on
one shard, so no sample mixes steps of episodes of different shards.

Exactness. A draw is over valid *starts* (docs/TRAJECTORIES.md). Each n-step and sequence
reply carries the state of the shard's window index for that requirement (its valid starts
N_s and their mass M_s: N_s in a uniform table, the sum of priority^alpha in a prioritized
one). The union draw splits the n draws by a multinomial over the shards' masses as the
last replies showed them and reports P = (M_s / M) * p_local and weights (P / min P)^-beta,
as plain sharded samples do with item masses. Until a shard has answered a request of a
requirement, its table's mass (`info`, every stored step, read afresh) stands in for M_s:
the split of that first call is approximate (starts are at most the steps); the reported
probabilities are exact for the split that happened.
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..batch_limits import writer_batch
from ..client import DEFAULT, Client
from ..episodes import DEFAULT_EPISODE_BATCH
from ..errors import InvalidArgument, ProtocolError
from ..sample import Sample
from .client_interface import ShardedClientLike, WindowState
from .union import draw_shares, global_keys, union_sample

if TYPE_CHECKING:
    from ..episodes import EpisodeWriter

__all__ = ["ShardedEpisodeWriter", "sample_windows_async", "read_all"]


class ShardedEpisodeWriter:
    """Appends steps of `envs` concurrent episodes to an episodic table of a ShardedClient.

    Each env's current episode is pinned to one shard, chosen round-robin (the order plain
    inserts follow) when the episode receives its first step; the env's next episode may
    go to another shard. Each shard has an `EpisodeWriter` of its own (its own connection,
    `batch` steps per request; None: EpisodeWriter's default on each shard; a `batch`
    above a shard's ``max_batch_items`` raises InvalidArgument here), so the guarantees
    of EpisodeWriter hold per shard: a lost connection leaves that shard's open episodes
    truncated. Use as a context manager.
    One thread uses a writer; it pickles as its ShardedClient, table and options.
    """

    def __init__(self, client: ShardedClientLike, table: str, envs: int = 1,
                 batch: Optional[int] = None, *, timeout: Any = DEFAULT,
                 keep_keys: bool = False) -> None:
        if envs < 1:
            raise InvalidArgument(f"envs must be >= 1, got {envs}")
        if batch is not None:  # refused now, as EpisodeWriter's, whichever shard is above
            for shard in client.shards:
                batch = writer_batch(shard, table, batch, DEFAULT_EPISODE_BATCH)
        self._client = client
        self._table = table
        self._envs = int(envs)
        self._batch = batch  # None: each shard's EpisodeWriter default
        self._keep_keys = bool(keep_keys)
        # Resolved now (the shards share the options): DEFAULT does not survive pickling.
        self._timeout: Optional[float] = (client.shards[0].timeout if timeout is DEFAULT
                                          else timeout)
        self._writers: List[Optional["EpisodeWriter"]] = [None] * len(client.shards)
        self._shard_of: List[Optional[int]] = [None] * self._envs  # env -> its episode's shard

    def __getstate__(self) -> Dict[str, Any]:
        return {"client": self._client, "table": self._table, "envs": self._envs,
                "batch": self._batch, "timeout": self._timeout, "keep_keys": self._keep_keys}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["client"], state["table"], state["envs"],  # type: ignore[misc]
                      state["batch"], timeout=state["timeout"],
                      keep_keys=state["keep_keys"])

    def __enter__(self) -> "ShardedEpisodeWriter":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
            return
        try:  # keep the original exception (as Writer does); still deliver what it can
            self.close()
        except Exception:
            pass

    def _check_env(self, env: int) -> int:
        if isinstance(env, bool) or not 0 <= int(env) < self._envs:
            raise InvalidArgument(f"env must be in 0..{self._envs - 1}, got {env!r}")
        return int(env)

    def _writer(self, shard: int) -> "EpisodeWriter":
        writer = self._writers[shard]
        if writer is None:  # opened at the first episode pinned to the shard
            writer = self._client.shards[shard].episode_writer(
                self._table, self._envs, self._batch, timeout=self._timeout,
                keep_keys=self._keep_keys)
            self._writers[shard] = writer
        return writer

    def shard_of(self, env: int) -> Optional[int]:
        """The shard holding env's current episode (None before its first step)."""
        return self._shard_of[self._check_env(env)]

    def append(self, env: int = 0, **step: Any) -> None:
        """Buffers one step of env's current episode on its shard (see
        EpisodeWriter.append); the first step of an episode pins it to the next shard."""
        env = self._check_env(env)
        shard = self._shard_of[env]
        if shard is None:
            shard = self._client.pick_shard()
        self._writer(shard).append(env, **step)
        self._shard_of[env] = shard  # only once the step was accepted

    def end_episode(self, env: int = 0, terminated: bool = True, **final: Any) -> None:
        """Ends env's current episode on its shard (see EpisodeWriter.end_episode; `final`
        holds the final value of each next_of field)."""
        env = self._check_env(env)
        shard = self._shard_of[env]
        if shard is None:
            raise InvalidArgument(f"table '{self._table}': env {env} has no open episode "
                                  "(append a step first)")
        self._writer(shard).end_episode(env, terminated, **final)
        self._shard_of[env] = None

    def flush(self) -> None:
        """Sends every shard's buffered steps; raises the first shard's error after
        flushing the others (a lost shard does not keep the live ones' steps back)."""
        error: Optional[BaseException] = None
        for writer in self._writers:
            if writer is None:
                continue
            try:
                writer.flush()
            except BaseException as exc:  # flush the others, then raise the first error
                error = error or exc
        if error is not None:
            raise error

    @property
    def keys(self) -> np.ndarray[Any, Any]:
        """Global keys of the steps sent so far: shard by shard, each in append order
        (needs ``keep_keys=True``: raises ReplayError otherwise)."""
        if not self._keep_keys:
            raise InvalidArgument("create the writer with keep_keys=True to collect keys")
        parts = [global_keys(s, np.asarray(w.keys, np.uint64))
                 for s, w in enumerate(self._writers) if w is not None]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint64)

    def close(self) -> None:
        """Closes every shard's writer (each ends its open episodes as truncated)."""
        error: Optional[BaseException] = None
        for writer in self._writers:
            if writer is None:
                continue
            try:
                writer.close()
            except BaseException as exc:  # close the others, then raise the first error
                error = error or exc
        self._shard_of = [None] * self._envs
        if error is not None:
            raise error


def _check_episodic(client: ShardedClientLike, table: str) -> None:
    """Raises InvalidArgument unless `table` is an episodic table."""
    if table not in client.episodic_tables:
        description = client.shards[0].table_info(table)["description"]
        if not description.get("episodic"):
            raise InvalidArgument(f"table '{table}' is not episodic (create it with "
                                  "episodic=True)")
        client.episodic_tables.add(table)


def _known_states(client: ShardedClientLike, table: str,
                  requirement: Tuple[Any, ...]) -> List[WindowState]:
    """Each shard's window state for `requirement`: from its last reply, else its table's
    size and mass (`info`, read afresh)."""
    with client._lock:
        known = list(client.window_states.get(table, {}).get(requirement)
                     or [None] * len(client.shards))
    states: List[WindowState] = []
    for s, state in enumerate(known):
        if state is None:
            info = client.shards[s].table_info(table)
            state = (int(info["size"]), float(info["mass"]), float(info["min_mass"]))
        states.append(state)
    return states


def _remember_state(client: ShardedClientLike, table: str, requirement: Tuple[Any, ...],
                    shard: int, state: WindowState) -> None:
    with client._lock:
        per_table = client.window_states.setdefault(table, {})
        per_table.setdefault(requirement, [None] * len(client.shards))[shard] = state


def sample_windows_async(client: ShardedClientLike, table: str, batch: int,
                         requirement: Tuple[Any, ...], beta: float,
                         request: Callable[[Client, int], "Future[Sample]"]
                         ) -> "Future[Sample]":
    """A union draw of `batch` windows of `requirement` (the module docstring): `request`
    sends one shard's part."""
    _check_episodic(client, table)
    masses = _known_states(client, table, requirement)
    shares = draw_shares(masses)

    def combine(samples: List[Tuple[int, Sample]]) -> Sample:
        states = {}
        for s, sample in samples:
            if not sample.state:
                raise ProtocolError(f"table '{table}': shard {s} sent a window sample "
                                    "without its state")
            state = (int(sample.state["size"]), float(sample.state["mass"]),
                     float(sample.state["min_mass"]))
            _remember_state(client, table, requirement, s, state)
            states[s] = state
        return union_sample(samples, shares, masses, states, beta)

    return client._gather(batch, shares, combine, request)


def read_all(client: ShardedClientLike, table: str, page: int) -> Iterator[Dict[str, Any]]:
    """Each shard's `read_all` pages in turn, keys and episode ids made global."""
    for s, shard in enumerate(client.shards):
        for columns in shard.read_all(table, page=page):
            out = dict(columns)
            out["key"] = global_keys(s, columns["key"])
            out["episode"] = global_keys(s, columns["episode"])
            yield out
