"""Policy version bounds of a mixed batch, table by table (docs/MIXED.md, docs/VERSIONS.md).

A mixed call's ``min_version=``, ``max_staleness=`` and ``value=`` are each either one value
for every table of the mix, or a dict of table -> value for the tables it names (the others
unbounded): ``client.sample({"demos": 0.5, "online": 0.5}, 256, max_staleness={"online":
0})`` draws the demonstrations whatever their version and the online share from the latest
policy only. A dict naming a table that is not in the mix is InvalidArgument (before
anything is sent). Each table gets what a one-table sample would: min_version, or
max_staleness and maybe value, never both. A bound implies versions: every row carries
its version.

Pure and thread-safe.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from .errors import InvalidArgument
from .policy_versions import sample_version_meta

__all__ = ["MixBound", "Limit", "PerTable", "PerValue", "mixed_bound", "table_bound", "asked"]

#: One table's bound as sorted (name, value) members (min_version, or max_staleness and
#: maybe value); () for none.
Limit = Tuple[Tuple[str, Any], ...]

#: What ``min_version=`` / ``max_staleness=`` take: one int for every table, or a dict of
#: table -> int.
PerTable = Union[None, int, Mapping[str, int]]
#: What ``value=`` takes: one published value's name, or a dict of table -> name.
PerValue = Union[None, str, Mapping[str, str]]


class MixBound(NamedTuple):
    """A mixed batch's policy version members: each row's version is asked for, and each
    table named in `limits` has its share drawn under its own bound (tables not named are
    unbounded). Hashable: it keys the prepared requests."""

    limits: Tuple[Tuple[str, Limit], ...] = ()

    @classmethod
    def every(cls, tables: Sequence[str], members: Mapping[str, Any]) -> "MixBound":
        """One table's members (replayd.policy_versions.sample_version_meta) for each of
        `tables`."""
        limit = tuple(sorted((k, v) for k, v in members.items() if k != "versions"))
        return cls(tuple((table, limit) for table in tables) if limit else ())

    def limit(self, table: str) -> Optional[Dict[str, Any]]:
        """`table`'s bound as request members, or None (unbounded)."""
        for name, limit in self.limits:
            if name == table:
                return dict(limit)
        return None

    def members(self, table: str) -> Dict[str, Any]:
        """The members of a one-table sample request of `table`'s share."""
        return {"versions": True, **(self.limit(table) or {})}

    def bounds(self, tables: Sequence[str]) -> List[Optional[Dict[str, Any]]]:
        """A ``sample_mixed``'s ``"bounds"``: one entry per table (None: unbounded)."""
        return [self.limit(table) for table in tables]


def asked(versions: bool, min_version: Any, max_staleness: Any, value: Any) -> bool:
    """Whether a sampling call asks for versions or a bound at all."""
    return bool(versions) or min_version is not None or max_staleness is not None or \
        value is not None


def mixed_bound(name: str, tables: Sequence[str], versions: bool, min_version: PerTable,
                max_staleness: PerTable, value: PerValue) -> Optional[MixBound]:
    """The MixBound of a mixed call over `tables` (None when it asks for neither versions
    nor a bound); `name` names the call in errors about a bound given for every table.
    InvalidArgument, before anything is sent, for a dict naming a table not in `tables`,
    a table given both min_version and max_staleness, a value= without max_staleness, or
    a bad number."""
    if not isinstance(min_version, Mapping) and not isinstance(max_staleness, Mapping) and \
            not isinstance(value, Mapping):  # one bound for every table
        meta = sample_version_meta(name, versions, min_version, max_staleness, value)
        return None if meta is None else MixBound.every(tables, meta)
    for given, what in ((min_version, "min_version"), (max_staleness, "max_staleness"),
                        (value, "value")):
        if isinstance(given, Mapping):
            for table in given:
                if table not in tables:
                    raise InvalidArgument(f"{what}= names table {table!r}, which is not in "
                                          f"the mixed batch (tables {list(tables)}); name "
                                          f"only tables of the mix")
    limits: List[Tuple[str, Limit]] = []
    staleness_tables = 0
    for table in tables:
        low = _of(min_version, table)
        stale = _of(max_staleness, table)
        named = _of(value, table)
        if named is not None and stale is None:
            if isinstance(value, Mapping):
                raise InvalidArgument(f"table '{table}': value= names the published value "
                                      f"max_staleness= counts from; give table '{table}' a "
                                      f"max_staleness too")
            named = None  # one value for every table: for those with a max_staleness
        staleness_tables += stale is not None
        meta = sample_version_meta(table, True, low, stale, named) or {}
        limit = tuple(sorted((k, v) for k, v in meta.items() if k != "versions"))
        if limit:
            limits.append((table, limit))
    if isinstance(value, str) and not staleness_tables:
        raise InvalidArgument(f"table '{name}': value= names the published value "
                              "max_staleness= counts from; give max_staleness too")
    return MixBound(tuple(limits))


def table_bound(table: str, versions: bool, min_version: PerTable, max_staleness: PerTable,
                value: PerValue) -> Optional[Dict[str, Any]]:
    """A one-table sample's version members (None: none asked for). A dict bound is read
    as for a mix of that one table: it may name only `table` (InvalidArgument otherwise);
    ``{}`` or a dict without it leaves the sample unbounded (with versions)."""
    if not isinstance(min_version, Mapping) and not isinstance(max_staleness, Mapping) and \
            not isinstance(value, Mapping):
        return sample_version_meta(table, versions, min_version, max_staleness, value)
    bound = mixed_bound(table, (table,), versions, min_version, max_staleness, value)
    return None if bound is None else bound.members(table)


def _of(given: Any, table: str) -> Any:
    """A per-table argument's value for `table` (a scalar is every table's)."""
    if isinstance(given, Mapping):
        return given.get(table)
    return given
