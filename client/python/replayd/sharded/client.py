"""`ShardedClient`: one logical table spread over several replayd servers (shards).

    shards = replayd.ShardedClient(["tcp://node1:7700", "tcp://node2:7700"])
    shards.create_table("replay", fields, capacity=1_000_000, sampler="prioritized")
    keys = shards.insert("replay", batch)              # whole batches, round-robin
    batch = shards.sample("replay", 256)               # drawn from the union
    shards.update_priorities("replay", batch.keys, td) # routed to the owning shard

What is exact and what is approximate:
- A sample of n splits its draws among shards with a multinomial over each shard's sampling
  mass (its item count for uniform tables, the sum of priority^alpha for prioritized ones),
  using the masses the shards reported with their previous replies (or `info` the first
  time). When no shard changed since, the union is drawn exactly as one table holding every
  item would be. Inserts and priority updates on other connections make those masses one
  call stale: the split is then slightly off, but `probabilities` and `weights` stay exact
  for the draw that happened: P = q_s * p_local, w = (P / min P)^-beta over the union.
- Rate limiters, capacity and eviction act per shard: `capacity` is divided evenly, each
  shard evicts its own oldest item, and each shard's limiter admits its own share.
- FIFO and LIFO samplers are per-shard orders; the union is not one global order.

Mixed batches (docs/MIXED.md): a sampling call given a dict of table -> fraction draws each
table's share from that table's union over the shards, as above, all tables' requests sent
at once; `update_mixed_priorities` routes each row to its table and shard.

Episodic tables (replayd.sharded.episodes): `episode_writer` keeps each episode on one
shard; ``sample(..., nstep=k)`` and `sample_sequences` draw windows from the union of a
uniform episodic table's shards by the same split; `read_all` / `episodes` read every shard.

Published values (`publish`, `fetch`, docs/VALUES.md) live on shard 0 only.

Keys are global: the shard's index sits in the top 8 bits (at most 256 shards) above the
shard's own key (< 2^56). Like Client, a ShardedClient pickles as its addresses.
Thread-safe: every method may be called from several threads.
"""
from __future__ import annotations

import itertools
import math
import threading
from concurrent.futures import Future
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional,
                    Sequence, Set, Tuple, Union)

import numpy as np

from ..client import DEFAULT, Client
from ..episode_replies import group_episodes
from ..errors import InvalidArgument, ReplayError
from ..mixed import Mix, MixLike, Schedule, priority_parts, schedule_of, scheduled_mix
from ..mixed_draw import combine
from ..sample import Sample
from ..values import Fetched
from .episodes import ShardedEpisodeWriter, read_all, sample_windows_async
from .union import (LOCAL_MASK, MAX_SHARDS, SHARD_BITS, draw_shares, global_keys, split_keys,
                    union_sample)

__all__ = ["ShardedClient", "SHARD_BITS"]

class ShardedClient:
    """Several replayd servers used as one. `options` go to each shard's `Client`."""

    def __init__(self, addresses: Sequence[str], *, seed: Optional[int] = None,
                 **options: Any) -> None:
        addresses = list(addresses)
        if not 1 <= len(addresses) <= MAX_SHARDS:
            raise InvalidArgument(f"a ShardedClient needs 1 to {MAX_SHARDS} addresses, "
                                  f"got {len(addresses)}")
        self._addresses = addresses
        self._options = dict(options)
        self._seed = seed
        self.shards: List[Client] = [Client(a, **options) for a in addresses]
        self._init_state()

    def _init_state(self) -> None:
        self._lock = threading.Lock()
        self._rng = np.random.default_rng(self._seed)
        self._next_shard = itertools.count()
        self._masses: Dict[str, List[Optional[Tuple[int, float, float]]]] = {}
        # Episodic tables: per table, per window requirement, each shard's window state
        # (valid starts, mass, min mass) as its last reply showed it (None: not known yet);
        # see replayd.sharded.episodes. Kept across our own priority updates, which a window's
        # info cannot show; dropped with the table.
        self.window_states: Dict[str, Dict[Tuple[Any, ...],
                                           List[Optional[Tuple[int, float, float]]]]] = {}
        self.episodic_tables: Set[str] = set()

    def __getstate__(self) -> Dict[str, Any]:
        return {"addresses": self._addresses, "options": self._options, "seed": self._seed}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        ShardedClient.__init__(self, state["addresses"], seed=state["seed"],
                               **state["options"])

    def __repr__(self) -> str:
        return f"replayd.ShardedClient({self._addresses!r})"

    def __enter__(self) -> "ShardedClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        for shard in self.shards:
            shard.close()

    # -- tables ------------------------------------------------------------------------

    def create_table(self, name: str, fields: Any, capacity: int, **kwargs: Any) -> List[Dict[str, Any]]:
        """Creates the table on every shard with capacity ceil(capacity / shards) each.
        Seeds, when given, differ per shard (seed + shard index). Returns each shard's INFO."""
        per_shard = max(1, math.ceil(capacity / len(self.shards)))
        seed = kwargs.pop("seed", None)
        return [shard.create_table(name, fields, per_shard,
                                   seed=None if seed is None else seed + i, **kwargs)
                for i, shard in enumerate(self.shards)]

    def drop_table(self, table: str) -> None:
        for shard in self.shards:
            shard.drop_table(table)
        self._forget(table, windows=True)

    def reset(self, table: str) -> None:
        for shard in self.shards:
            shard.reset(table)
        self._forget(table, windows=True)

    def size(self, table: str) -> int:
        """Items stored over all shards."""
        return sum(shard.size(table) for shard in self.shards)

    def table_info(self, table: str) -> List[Dict[str, Any]]:
        """Each shard's INFO of `table`, in shard order."""
        return [shard.table_info(table) for shard in self.shards]

    # -- published values (docs/VALUES.md) ---------------------------------------------

    def publish(self, name: str, arrays: Mapping[str, Any], *, version: Optional[int] = None,
                timeout: Any = DEFAULT) -> int:
        """`Client.publish` on shard 0: published values are not sharded (a value is
        small beside a table, and one version of it must be in one place), so every
        publisher and fetcher of a ShardedClient meets on the first shard."""
        return self.shards[0].publish(name, arrays, version=version, timeout=timeout)

    def fetch(self, name: str, *, newer_than: Optional[int] = None,
              timeout: Any = DEFAULT) -> Fetched:
        """`Client.fetch` on shard 0 (see `publish`)."""
        return self.shards[0].fetch(name, newer_than=newer_than, timeout=timeout)

    # -- items -------------------------------------------------------------------------

    def pick_shard(self) -> int:
        """The next shard of the round-robin that inserts and new episodes follow."""
        return self._pick_shard()

    def _pick_shard(self) -> int:
        with self._lock:
            return next(self._next_shard) % len(self.shards)

    def insert(self, table: str, data: Mapping[str, Any], priorities: Any = None, *,
               version: Any = None, timeout: Any = DEFAULT) -> np.ndarray[Any, Any]:
        """Inserts the whole batch into the next shard (round-robin); returns global keys.
        `version`: the items' policy version(s), as Client.insert's (docs/VERSIONS.md)."""
        shard = self._pick_shard()
        return global_keys(shard, self.shards[shard].insert(table, data, priorities,
                                                             version=version,
                                                             timeout=timeout))

    def insert_async(self, table: str, data: Mapping[str, Any],
                     priorities: Any = None, *,
                     version: Any = None) -> "Future[np.ndarray[Any, Any]]":
        """Like `insert`, returning a Future of the global keys."""
        shard = self._pick_shard()
        local = self.shards[shard].insert_async(table, data, priorities, version=version)
        return _chain(local, lambda keys: global_keys(shard, keys))

    def update_priorities(self, table: str, keys: Any, priorities: Any) -> int:
        """Routes each key to its shard; returns how many keys were stale."""
        priorities = np.asarray(priorities, dtype=np.float64).reshape(-1)
        futures = [self.shards[s].update_priorities_async(
                       table, np.asarray(keys, np.uint64).reshape(-1)[at] & LOCAL_MASK,
                       priorities[at])
                   for s, at in split_keys(keys, len(self.shards)).items()]
        stale = sum(int(f.result().get("stale", 0)) for f in futures)
        self._forget(table)
        return stale

    def update_mixed_priorities(self, batch: Any, priorities: Any, *,
                                tables: Optional[Sequence[str]] = None) -> int:
        """A mixed batch's priorities (see Client.update_mixed_priorities), each row's on
        its table's item on its shard, all requests sent before any reply is awaited;
        returns how many keys were stale."""
        futures = []
        for table, keys, prio in priority_parts(batch, priorities, tables):
            for s, at in split_keys(keys, len(self.shards)).items():
                futures.append(self.shards[s].update_priorities_async(
                    table, keys[at] & LOCAL_MASK, prio[at]))
        stale = sum(int(f.result().get("stale", 0)) for f in futures)
        for table in set(table for table, _, _ in priority_parts(batch, priorities, tables)):
            self._forget(table)
        return stale

    def delete(self, table: str, keys: Any) -> int:
        """Routes each key to its shard; returns how many items were deleted."""
        keys = np.asarray(keys, np.uint64).reshape(-1)
        deleted = sum(self.shards[s].delete(table, keys[at] & LOCAL_MASK)
                      for s, at in split_keys(keys, len(self.shards)).items())
        self._forget(table)
        return deleted

    # -- sampling ----------------------------------------------------------------------

    def _known_masses(self, table: str) -> List[Tuple[int, float, float]]:
        """(size, mass, min_mass) per shard: from the last replies, else from `info`."""
        with self._lock:
            known = self._masses.get(table)
        if known is None or any(m is None for m in known):
            infos = [shard.table_info(table) for shard in self.shards]
            known = [(int(i["size"]), float(i["mass"]), float(i["min_mass"])) for i in infos]
            with self._lock:
                self._masses[table] = list(known)
        return known  # type: ignore[return-value]

    def _forget(self, table: str, *, windows: bool = False) -> None:
        """Our own update or delete changed the masses: read them afresh next time
        (`windows`: the table was dropped or reset, forget its window states too)."""
        with self._lock:
            self._masses.pop(table, None)
            if windows:
                self.window_states.pop(table, None)
                self.episodic_tables.discard(table)

    def _remember(self, table: str, shard: int, state: Optional[Mapping[str, Any]]) -> None:
        if not state:
            return
        with self._lock:
            known = self._masses.setdefault(table, [None] * len(self.shards))
            known[shard] = (int(state["size"]), float(state["mass"]), float(state["min_mass"]))

    def _mixed(self, table: Any, batch_size: int,
                request: Callable[[str, int], "Future[Sample]"],
                fields: Optional[Sequence[str]]) -> "Future[Sample]":
        """A mixed batch: each table's share drawn from its union by `request`."""
        mix = Mix.of(table)
        future: "Future[Any]" = combine(self.shards[0], mix, mix.counts(batch_size), request,
                                        fields)
        return future

    def sample_async(self, table: Union[str, MixLike], batch_size: int, *, beta: float = 0.4,
                     nstep: Optional[int] = None, gamma: float = 1.0,
                     timeout: Any = DEFAULT,
                     fields: Optional[Sequence[str]] = None) -> "Future[Sample]":
        """Draws `batch_size` items from the union (see the module docstring): the draws are
        split among shards in proportion to their sampling mass and requested from all of
        them at once. The Future's Sample has global keys and union-wide probabilities and
        importance weights; its items are grouped by shard. With `nstep`: n-step samples
        of a uniform episodic table (see replayd.sharded.episodes). `table` may be a dict
        of table -> fraction: a mixed batch (docs/MIXED.md), `fields` as Client.sample's."""
        if not isinstance(table, str):
            return self._mixed(table, batch_size,
                               lambda name, n: self.sample_async(name, n, beta=beta,
                                                                 nstep=nstep, gamma=gamma,
                                                                 timeout=timeout), fields)
        name: str = table  # narrowed for the closures below
        _no_fields(name, fields)
        if nstep is not None:
            return sample_windows_async(
                self, name, batch_size, ("nstep", int(nstep)), beta,
                lambda shard, n: shard.sample_async(table, n, beta=beta, nstep=nstep,
                                                    gamma=gamma, timeout=timeout))
        masses = self._known_masses(table)
        shares = draw_shares(masses)

        def combine(samples: List[Tuple[int, Sample]]) -> Sample:
            states = {}
            for s, sample in samples:
                self._remember(name, s, sample.state)
                if sample.state:
                    states[s] = (int(sample.state["size"]), float(sample.state["mass"]),
                                 float(sample.state["min_mass"]))
            return union_sample(samples, shares, masses, states, beta)

        return self._gather(batch_size, shares, combine,
                            lambda shard, n: shard.sample_async(table, n, beta=beta,
                                                                timeout=timeout))

    def sample(self, table: Union[str, MixLike], batch_size: int, *, beta: float = 0.4,
               nstep: Optional[int] = None, gamma: float = 1.0,
               timeout: Any = DEFAULT, fields: Optional[Sequence[str]] = None) -> Sample:
        """`sample_async(...).result()`."""
        return self.sample_async(table, batch_size, beta=beta, nstep=nstep, gamma=gamma,
                                 timeout=timeout, fields=fields).result()

    def _gather(self, batch_size: int, shares: np.ndarray[Any, Any],
                combine: Callable[[List[Tuple[int, Sample]]], Sample],
                request: Callable[[Client, int], "Future[Sample]"]) -> "Future[Sample]":
        """Splits `batch_size` draws among shards by a multinomial over `shares`, sends
        ``request(shard, count)`` to each shard drawn, and returns a Future of
        ``combine([(shard index, its Sample), ...])`` once every part has arrived (or of the
        first part's error)."""
        with self._lock:
            counts = self._rng.multinomial(int(batch_size), shares)
        parts = [(s, request(self.shards[s], int(c))) for s, c in enumerate(counts) if c > 0]
        result: Future[Any] = Future()
        remaining = [len(parts)]
        guard = threading.Lock()

        def one_done(_future: Future[Any]) -> None:
            with guard:
                remaining[0] -= 1
                if remaining[0]:
                    return
            try:
                result.set_result(combine([(s, future.result()) for s, future in parts]))
            except BaseException as exc:  # the shard's error, or a combining error
                result.set_exception(exc)

        for _, future in parts:
            future.add_done_callback(one_done)
        return result

    def sampler(self, table: Union[str, MixLike, Schedule], batch_size: int, *,
                prefetch: int = 4, beta: float = 0.4,
                nstep: Optional[int] = None, gamma: float = 1.0,
                transform: Any = None,
                fields: Optional[Sequence[str]] = None) -> "ShardedSampler":
        """An iterator over union samples (n-step ones with `nstep`) keeping `prefetch`
        requests in flight; `table` may be a dict of table -> fraction or a schedule
        (batch index -> such a dict), as Client.sampler's."""
        tables = _tables_of(table)
        return ShardedSampler(lambda: self.sample_async(tables(), batch_size, beta=beta,
                                                        nstep=nstep, gamma=gamma,
                                                        fields=fields),
                              prefetch=prefetch, transform=transform)


    # -- episodic tables (replayd.sharded.episodes) --------------------------------------

    def episode_writer(self, table: str, envs: int = 1, batch: Optional[int] = None, *,
                       timeout: Any = DEFAULT, keep_keys: bool = False
                       ) -> "ShardedEpisodeWriter":
        """A writer of `envs` concurrent episodes of an episodic table whose episodes each
        stay on one shard (see ShardedEpisodeWriter; ``keep_keys=True`` collects the global
        keys of the written steps)."""
        return ShardedEpisodeWriter(self, table, envs, batch, timeout=timeout,
                                    keep_keys=keep_keys)

    def sample_sequences_async(self, table: Union[str, MixLike], batch: int, length: int,
                               *, stride: int = 1, burn_in: int = 0, pad: bool = False,
                               beta: float = 0.4, timeout: Any = DEFAULT,
                               fields: Optional[Sequence[str]] = None) -> "Future[Sample]":
        """`batch` sequences drawn from the union of a uniform episodic table's shards, as
        `Client.sample_sequences` draws them from one (see replayd.sharded.episodes); of
        several tables for a dict of table -> fraction (docs/MIXED.md)."""
        if not isinstance(table, str):
            return self._mixed(
                table, batch,
                lambda name, n: self.sample_sequences_async(name, n, length, stride=stride,
                                                            burn_in=burn_in, pad=pad,
                                                            beta=beta, timeout=timeout),
                fields)
        _no_fields(table, fields)
        requirement = ("sequence", int(length), int(stride), int(burn_in), bool(pad))
        return sample_windows_async(
            self, table, batch, requirement, beta,
            lambda shard, n: shard.sample_sequences_async(table, n, length, stride=stride,
                                                          burn_in=burn_in, pad=pad,
                                                          beta=beta, timeout=timeout))

    def sample_sequences(self, table: Union[str, MixLike], batch: int, length: int, *,
                         stride: int = 1, burn_in: int = 0, pad: bool = False,
                         beta: float = 0.4, timeout: Any = DEFAULT,
                         fields: Optional[Sequence[str]] = None) -> Sample:
        """`sample_sequences_async(...).result()`."""
        return self.sample_sequences_async(table, batch, length, stride=stride,
                                           burn_in=burn_in, pad=pad, beta=beta,
                                           timeout=timeout, fields=fields).result()

    def sequence_sampler(self, table: Union[str, MixLike, Schedule], batch: int, length: int,
                         *, stride: int = 1, burn_in: int = 0, pad: bool = False,
                         beta: float = 0.4, prefetch: int = 4, transform: Any = None,
                         fields: Optional[Sequence[str]] = None) -> "ShardedSampler":
        """An iterator over union sequence samples keeping `prefetch` requests in flight
        (`table` as `sampler`'s)."""
        tables = _tables_of(table)
        return ShardedSampler(
            lambda: self.sample_sequences_async(tables(), batch, length, stride=stride,
                                                burn_in=burn_in, pad=pad, beta=beta,
                                                fields=fields),
            prefetch=prefetch, transform=transform)

    def read_all(self, table: str, *, page: int = 4096) -> Iterator[Dict[str, Any]]:
        """Every stored step of every shard, shard after shard, as `Client.read_all` pages
        with global keys and global episode ids (the shard in the top bits of both)."""
        return read_all(self, table, page)

    def episodes(self, table: str, *, page: int = 4096) -> Iterator[Dict[str, Any]]:
        """The stored episodes of every shard (global episode ids, see `read_all`), each a
        dict of arrays as `Client.episodes` gives it; holds the whole table in memory."""
        return group_episodes(self.read_all(table, page=page))


def _no_fields(table: str, fields: Optional[Sequence[str]]) -> None:
    """InvalidArgument for `fields` given with one table (it selects a mixed batch's)."""
    if fields is not None:
        raise InvalidArgument(f"table '{table}': fields= selects the fields of a mixed "
                              "batch (a dict of table -> fraction)")


def _tables_of(table: Any) -> Callable[[], Any]:
    """A sampler's next table argument: the table name, or the next batch's Mix of a dict
    of fractions or a schedule (called in request order, batch 0 first)."""
    if isinstance(table, str):
        return lambda: table
    schedule, tables = schedule_of(table)
    batches = itertools.count()
    return lambda: scheduled_mix(schedule, next(batches), tables)


def _chain(future: Future[Any], convert: Any) -> Future[Any]:
    """A Future of convert(future.result())."""
    out: Future[Any] = Future()

    def done(f: Future[Any]) -> None:
        try:
            out.set_result(convert(f.result()))
        except BaseException as exc:
            out.set_exception(exc)

    future.add_done_callback(done)
    return out


class ShardedSampler:
    """Keeps `prefetch` union samples in flight, each from ``request()``; iterating yields
    them in request order (after `transform`, which runs in the consuming thread)."""

    def __init__(self, request: Callable[[], "Future[Any]"], *, prefetch: int,
                 transform: Any) -> None:
        if prefetch < 1:
            raise InvalidArgument("prefetch must be >= 1")
        self._request = request
        self._transform = transform
        self._prefetch = int(prefetch)
        self._in_flight = [self._request() for _ in range(prefetch)]
        self._closed = False

    def __iter__(self) -> "ShardedSampler":
        return self

    def __next__(self) -> Any:
        if self._closed:
            raise StopIteration
        # A request that could not go out (a shard unreachable: ConnectionLost) left no
        # future behind: send the missing ones first, so that the error raised is the
        # request's (never an empty list's) and the sampler recovers with the shard.
        while len(self._in_flight) < self._prefetch:
            self._in_flight.append(self._request())
        sample = self._in_flight.pop(0).result()
        try:
            self._in_flight.append(self._request())
        except ReplayError:
            pass  # this sample is still the caller's; the next call sends it again
        return self._transform(sample) if self._transform else sample

    def close(self) -> None:
        self._closed = True
        self._in_flight.clear()

    def __enter__(self) -> "ShardedSampler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
