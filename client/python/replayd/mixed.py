"""Mixed batches: one batch drawn from several tables, a share per table (docs/MIXED.md).

    batch = client.sample({"online": 0.5, "demos": 0.5}, 256)
    batch.tables            # ("online", "demos")
    batch.table             # int64 per row: 0 for online's rows, 1 for demos'
    client.update_mixed_priorities(batch, td_errors)

This module holds what does no I/O: the fractions (`Mix`), their row counts (largest
remainder, the same split every time), the `MixedSample`, the check that the tables carry
the same fields, and the routing of a mixed batch's priority updates by table. The
requests themselves: replayd.mixed_draw (one connection, one round trip for all tables).

Rules (docs/MIXED.md says why):
- Fractions are numbers >= 0 that sum to 1 (within 1e-6); 0 keeps a table in the batch's
  `tables` with no rows (its request is not sent).
- Rows are grouped by table in the order the fractions were given.
- Each table's probabilities and importance weights are its own selector's, as a one-table
  sample of its share would give them: the mix is a chosen training distribution, not a
  bias to correct.

Pure and thread-safe.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence,
                    Tuple, Union)

import numpy as np

from .errors import InvalidArgument
from .sample import Sample

__all__ = ["Mix", "MixedSample", "MixLike", "Schedule", "TOLERANCE", "split_counts",
           "is_mix", "check_fields", "priority_parts", "schedule_of", "scheduled_mix",
           "leaves"]

#: How far from 1 the fractions may sum.
TOLERANCE = 1e-6

#: What a sampling call takes besides a table name: ``{"online": 0.75, "demos": 0.25}``.
MixLike = Mapping[str, float]
#: A schedule: batch index (0, 1, ... in request order) -> that batch's fractions.
Schedule = Callable[[int], MixLike]

# Entries an n-step sample adds to the fields; `fields=` never drops them.
_NSTEP_ENTRIES = ("discount", "steps")


def is_mix(table: Any) -> bool:
    """Whether a sampling call's `table` argument asks for a mixed batch."""
    return isinstance(table, Mapping)


@dataclass(frozen=True)
class Mix:
    """Checked fractions: table names in the order given and a fraction each."""

    tables: Tuple[str, ...]
    fractions: Tuple[float, ...]
    _counts: Dict[int, List[int]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, fractions: Any) -> "Mix":
        """`fractions` (table -> fraction) checked: at least one table, names that are
        strings, numbers that are finite, >= 0 and sum to 1 within TOLERANCE.
        Raises InvalidArgument naming what is wrong. Cached: a learner passes the same
        fractions every batch."""
        if isinstance(fractions, Mix):
            return fractions
        try:
            key = tuple(fractions.items())
            found = _MIXES.get(key)
        except (AttributeError, TypeError):  # not a dict, or unhashable values
            key, found = None, None
        if found is not None:
            return found
        mix = cls._checked(fractions)
        if key is not None:
            if len(_MIXES) >= 256:
                _MIXES.clear()
            _MIXES[key] = mix
        return mix

    @classmethod
    def _checked(cls, fractions: Any) -> "Mix":
        if not isinstance(fractions, Mapping) or not fractions:
            raise InvalidArgument(f"a mixed batch takes a dict of table -> fraction, e.g. "
                                  f"{{'online': 0.5, 'demos': 0.5}}; got {fractions!r}")
        tables: List[str] = []
        values: List[float] = []
        for table, value in fractions.items():
            if not isinstance(table, str):
                raise InvalidArgument(f"mixed batch: table names must be strings, got "
                                      f"{table!r}")
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = math.nan
            if isinstance(value, bool) or not math.isfinite(number) or number < 0:
                raise InvalidArgument(f"mixed batch: the fraction of table '{table}' must be "
                                      f"a finite number >= 0, got {value!r}")
            tables.append(table)
            values.append(number)
        total = math.fsum(values)
        if abs(total - 1.0) > TOLERANCE:
            shown = ", ".join(f"'{t}': {v:g}" for t, v in zip(tables, values))
            raise InvalidArgument(f"mixed batch: fractions must sum to 1 (within "
                                  f"{TOLERANCE:g}), got {total:.9g} ({{{shown}}}); divide "
                                  f"each by their sum to use them as weights")
        return cls(tuple(tables), tuple(values))

    def counts(self, n: int) -> List[int]:
        """Rows per table of a batch of n >= 1: `split_counts` (cached per n)."""
        found = self._counts.get(n) if type(n) is int else None
        if found is not None:
            return found
        if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n < 1:
            raise InvalidArgument(f"mixed batch {self}: batch_size must be >= 1, got {n}")
        counts = split_counts(self.fractions, n)
        if type(n) is int and len(self._counts) < 64:
            self._counts[n] = counts
        return list(counts)

    def __str__(self) -> str:
        return "{" + ", ".join(f"'{t}': {f:g}" for t, f in zip(self.tables, self.fractions)) + "}"


# Checked fractions by their items (see Mix.of). Bounded.
_MIXES: Dict[Tuple[Any, ...], Mix] = {}


def split_counts(fractions: Sequence[float], n: int) -> List[int]:
    """n rows split by `fractions` (summing to 1): each gets floor(f * n), and the rows
    left go one each to the largest remainders, ties to the one given first. The same
    fractions and n always give the same counts; they sum to n."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise InvalidArgument(f"mixed batch: batch_size must be an int >= 0, got {n!r}")
    exact = [f * int(n) for f in fractions]
    counts = [int(math.floor(x)) for x in exact]
    left = int(n) - sum(counts)
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[:max(0, left)]:
        counts[i] += 1
    # Fractions summing a little above 1 may floor to more than n: the excess leaves the
    # smallest remainders first (the reverse order), as the C++ client's mixed_counts.
    excess = -left
    for i in itertools.cycle(reversed(order)):
        if excess <= 0:
            break
        if counts[i] > 0:
            counts[i] -= 1
            excess -= 1
    return counts


def schedule_of(table: Union[MixLike, Schedule]) -> Tuple[Schedule, Tuple[str, ...]]:
    """A sampler's mix as a schedule (a dict is the constant schedule), and its tables: a
    schedule must name the same tables in the same order for every batch (a fraction may
    be 0), so that a row's table index means the same table in every batch. Calls the
    schedule once, for batch 0, to learn them."""
    if callable(table) and not isinstance(table, Mapping):
        schedule: Schedule = table
        first = Mix.of(schedule(0))
    else:
        first = Mix.of(table)
        fixed = dict(table)  # the caller's dict may change later; this mix does not
        schedule = lambda _batch: fixed  # noqa: E731
    return schedule, first.tables


def scheduled_mix(schedule: Schedule, batch: int, tables: Tuple[str, ...]) -> Mix:
    """The checked fractions of batch number `batch`; InvalidArgument when they name
    other tables than batch 0's (see `schedule_of`)."""
    mix = Mix.of(schedule(batch))
    if mix.tables != tables:
        raise InvalidArgument(f"mixed batch schedule: batch {batch} names tables "
                              f"{list(mix.tables)}, batch 0 named {list(tables)}; name every "
                              f"table each time, in the same order (a fraction may be 0)")
    return mix


@dataclass(frozen=True, repr=False)
class MixedSample(Sample):
    """A Sample drawn from several tables: rows grouped by table in the order given.

    Attributes (besides Sample's):
        tables: the table names, in the order given (a table with 0 rows included).
        table: int64 per row, the index in `tables` of the table the row came from.
        counts: rows per table, in `tables` order.
        min_versions: per table, in `tables` order, the bound its share was drawn under
            as the server resolved it (docs/VERSIONS.md; None: unbounded, or no rows);
            empty when the batch asked for no bound. `part(name)` carries its table's.

    `keys` are each table's own keys: update priorities with
    `Client.update_mixed_priorities`, which routes each key to its table. `probabilities`
    and `weights` are each table's own (see the module docstring); `state` is None.
    """

    tables: Tuple[str, ...] = ()
    table: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros(0, np.int64))
    counts: Tuple[int, ...] = ()
    min_versions: Tuple[Optional[int], ...] = ()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}: {array.dtype}{list(array.shape[1:])}"
                           for name, array in leaves(self).items())
        shares = ", ".join(f"{t}: {c}" for t, c in zip(self.tables, self.counts))
        return f"<replayd.MixedSample n={len(self)} {{{shares}}} {{{fields}}}>"

    def rows(self, table: str) -> slice:
        """The rows of `table` (a slice: rows are grouped by table)."""
        if table not in self.tables:
            raise InvalidArgument(f"mixed sample of tables {list(self.tables)} has no "
                                  f"table '{table}'")
        index = self.tables.index(table)
        begin = sum(self.counts[:index])
        return slice(begin, begin + self.counts[index])

    def part(self, table: str) -> Sample:
        """The rows of `table` as a Sample (views)."""
        rows = self.rows(table)
        bound = self.min_versions[self.tables.index(table)] if self.min_versions else None
        return Sample({name: array[rows] for name, array in leaves(self).items()},
                      self.keys[rows], self.probabilities[rows], self.weights[rows],
                      self.times_sampled[rows], None,
                      None if self.mask is None else self.mask[rows],
                      None if self.versions is None else self.versions[rows], bound)


def leaves(sample: Sample) -> Mapping[str, np.ndarray[Any, Any]]:
    """A sample's arrays by field name (by leaf path where fields nest)."""
    flat: Mapping[str, np.ndarray[Any, Any]] = getattr(sample, "flat", sample.data)
    return flat


def table_index(counts: Sequence[int]) -> np.ndarray[Any, Any]:
    """The int64 table index of each row of a batch of `counts` rows per table (a new
    array each time, copied from one cached per counts: a learner repeats its counts)."""
    key = tuple(counts)
    found = _TABLE_INDEX.get(key)
    if found is None:
        found = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        if len(_TABLE_INDEX) >= 256:
            _TABLE_INDEX.clear()
        _TABLE_INDEX[key] = found
    return found.copy()


_TABLE_INDEX: Dict[Tuple[int, ...], np.ndarray[Any, Any]] = {}


# -- fields ------------------------------------------------------------------------------

FieldSpec = Tuple[np.dtype[Any], Tuple[int, ...]]  # dtype, item shape


def check_fields(specs: Sequence[Tuple[str, Mapping[str, FieldSpec]]],
                 fields: Optional[Sequence[str]]) -> List[str]:
    """The names a mixed batch carries, in the first table's order: every field of the
    tables (which must then have the same ones), or `fields` (each of which every table
    must have). Each name must have one dtype and item shape in every table. `specs`: per
    table, its name and its fields (name -> (dtype, item shape)).
    Raises InvalidArgument naming the field and two tables that disagree."""
    first_table, first = specs[0]
    names = list(first) if fields is None else list(fields)
    if fields is not None:
        for name in names:
            if not isinstance(name, str):
                raise InvalidArgument(f"mixed batch: fields must be field names, got "
                                      f"{name!r}")
    for table, spec in specs:
        for name in names:
            if name not in spec:
                holder = first_table if name in first else None
                where = (f"table '{holder}' has it" if holder is not None else
                         f"fields of '{table}': {list(spec)}")
                raise InvalidArgument(f"mixed batch: field '{name}' is not in table "
                                      f"'{table}' ({where}); name the fields the tables "
                                      f"share with fields=[...]")
            if spec[name] != first[name]:
                raise InvalidArgument(
                    f"mixed batch: field '{name}' is {_shown(first[name])} in table "
                    f"'{first_table}' but {_shown(spec[name])} in table '{table}'; the "
                    f"tables must agree on every field the batch carries (leave it out "
                    f"with fields=[...])")
        if fields is None:
            extra = [name for name in spec if name not in first]
            if extra:
                raise InvalidArgument(f"mixed batch: field '{extra[0]}' is in table "
                                      f"'{table}' but not in table '{first_table}'; name "
                                      f"the fields the tables share with fields=[...]")
    return names


def _shown(spec: FieldSpec) -> str:
    return f"{spec[0].name}{list(spec[1])}"


def selected(names: Sequence[str], data: Mapping[str, Any]) -> Iterator[str]:
    """`names` and then the n-step entries a sample carries besides its fields."""
    yield from names
    for extra in _NSTEP_ENTRIES:
        if extra in data and extra not in names:
            yield extra


# -- priority updates ----------------------------------------------------------------------

def priority_parts(batch: Any, priorities: Any, tables: Optional[Sequence[str]] = None
                   ) -> List[Tuple[str, np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    """A mixed batch's priority update split by table: (table, keys, priorities) for each
    table with rows, in `tables` order. `batch`: a MixedSample, or a mapping with "keys"
    and "table" (the row's index into `tables`, which must then be given).
    Raises InvalidArgument for a batch that is not a mixed one, a wrong count of
    priorities, or a table index out of range."""
    if isinstance(batch, MixedSample):
        keys, index = batch.keys, batch.table
        names = tuple(batch.tables if tables is None else tables)
    elif isinstance(batch, Mapping) and "keys" in batch and "table" in batch:
        if tables is None:
            raise InvalidArgument("update_mixed_priorities: a batch dict needs tables=[...] "
                                  "(the names its 'table' entry indexes)")
        keys, index, names = batch["keys"], batch["table"], tuple(tables)
    else:
        raise InvalidArgument(f"update_mixed_priorities takes a mixed sample (sampled with "
                              f"a dict of table -> fraction) or a dict with 'keys' and "
                              f"'table'; got {type(batch).__name__}. For one table use "
                              f"update_priorities(table, keys, priorities)")
    key_array = np.asarray(keys).reshape(-1)
    if key_array.dtype == np.int64:
        key_array = key_array.view(np.uint64)  # the int64 view of replayd.torch, undone
    index = np.asarray(index).reshape(-1)
    try:
        prio = np.asarray(priorities, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"update_mixed_priorities: priorities must be numbers: "
                              f"{exc}") from None
    if prio.shape[0] != key_array.shape[0] or index.shape[0] != key_array.shape[0]:
        raise InvalidArgument(f"update_mixed_priorities: {key_array.shape[0]} keys, "
                              f"{index.shape[0]} table indexes and {prio.shape[0]} "
                              f"priorities; give one priority per row of the batch")
    if index.size and (index.dtype.kind not in "iu" or int(index.min()) < 0
                       or int(index.max()) >= len(names)):
        raise InvalidArgument(f"update_mixed_priorities: table indexes must be 0..."
                              f"{len(names) - 1} (tables {list(names)})")
    parts = []
    for i, name in enumerate(names):
        rows = np.flatnonzero(index == i)
        if rows.size:
            parts.append((name, key_array[rows], prio[rows]))
    return parts


def mixed_sample(tables: Tuple[str, ...], counts: Sequence[int], data: Dict[str, Any],
                 keys: Any, probabilities: Any, weights: Any, times_sampled: Any,
                 mask: Any = None, versions: Any = None,
                 min_versions: Sequence[Optional[int]] = ()) -> MixedSample:
    """A MixedSample of assembled arrays (rows grouped by table, `counts` each);
    `versions`: each row's policy version, when asked for; `min_versions`: each table's
    resolved bound (empty, or all None, when none was asked for)."""
    bounds = tuple(min_versions) if any(b is not None for b in min_versions) else ()
    return MixedSample(data=data, keys=keys, probabilities=probabilities, weights=weights,
                       times_sampled=times_sampled, state=None, mask=mask,
                       versions=versions, tables=tables,
                       table=table_index(counts), counts=tuple(int(c) for c in counts),
                       min_versions=bounds)
