"""Policy versions (docs/VERSIONS.md): the version each item or step was acted with, and
samples bounded by it.

Pure helpers shared by the client's write and sample paths: checking a ``version=``
argument (one int for every row, or one per row), the table a description says to follow,
and the metadata of a sample that asks for versions or a bound. Thread-safe.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

from .errors import InvalidArgument

__all__ = ["RowVersions", "check_version", "row_versions", "followed_value",
           "sample_version_meta", "MAX_VERSION"]

MAX_VERSION = (1 << 64) - 1

#: What an insert carries: None (no version: the server stores 0, or the client stamps
#: the followed value's), one int for every row, or a uint64 array of one per row.
RowVersions = Union[None, int, np.ndarray]


def check_version(table: str, version: Any, what: str = "version") -> int:
    """`version` as an int in 0..2^64-1; InvalidArgument naming `what` otherwise."""
    if isinstance(version, bool) or not isinstance(version, (int, np.integer)) or \
            not 0 <= int(version) <= MAX_VERSION:
        raise InvalidArgument(f"table '{table}': {what} must be an int in 0..2^64-1, got "
                              f"{version!r}")
    return int(version)


def row_versions(table: str, version: Any, n: int) -> RowVersions:
    """An insert's ``version=``: None, one int for all `n` rows, or a sequence / array of
    `n` ints (a contiguous little-endian uint64 array). InvalidArgument naming the
    problem otherwise."""
    if version is None:
        return None
    if isinstance(version, (int, np.integer)) and not isinstance(version, bool):
        return check_version(table, version)
    try:
        array = np.asarray(version)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"table '{table}': version must be an int or one int per "
                              f"row: {exc}") from None
    if array.ndim == 0:
        return check_version(table, array.item())
    if array.dtype.kind not in "iu" or array.ndim != 1:
        raise InvalidArgument(f"table '{table}': version must be an int or a 1-d sequence "
                              f"of ints (one per row), got {array.dtype}{list(array.shape)}")
    if array.shape[0] != n:
        raise InvalidArgument(f"table '{table}': {array.shape[0]} versions for {n} rows "
                              f"(give one per row, or one int for all)")
    if array.dtype.kind == "i" and array.size and int(array.min()) < 0:
        raise InvalidArgument(f"table '{table}': versions must be >= 0")
    return np.ascontiguousarray(array, dtype="<u8")


def followed_value(description: Mapping[str, Any]) -> Optional[str]:
    """The published value a table follows (its description's ``versions.value``), or
    None."""
    versions = description.get("versions")
    if isinstance(versions, Mapping) and versions.get("value") is not None:
        return str(versions["value"])
    return None


def sample_version_meta(table: str, versions: bool, min_version: Optional[int],
                        max_staleness: Optional[int],
                        value: Optional[str]) -> Optional[Dict[str, Any]]:
    """The members a plain sample request gets for ``versions=``, ``min_version=``,
    ``max_staleness=`` and ``value=`` (None when none is asked for: the request is
    unchanged). A bound implies versions: the sample then carries each row's version.
    InvalidArgument for a bad combination, before anything is sent."""
    if not versions and min_version is None and max_staleness is None:
        if value is not None:
            raise InvalidArgument(f"table '{table}': value= names the published value "
                                  "max_staleness= counts from; give max_staleness too")
        return None
    meta: Dict[str, Any] = {"versions": True}
    if min_version is not None and max_staleness is not None:
        raise InvalidArgument(f"table '{table}': give min_version or max_staleness, not "
                              "both")
    if min_version is not None:
        if value is not None:
            raise InvalidArgument(f"table '{table}': value= goes with max_staleness=, not "
                                  "with min_version=")
        meta["min_version"] = check_version(table, min_version, "min_version")
    if max_staleness is not None:
        meta["max_staleness"] = check_version(table, max_staleness, "max_staleness")
        if value is not None:
            if not isinstance(value, str) or not value:
                raise InvalidArgument(f"table '{table}': value must be a published value's "
                                      f"name, got {value!r}")
            meta["value"] = value
    return meta
