"""Table schemas and descriptions: the fields every item has, and the JSON description
that `create_table` sends.

Plain immutable data and pure functions; thread-safe.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .rate_limiters import RateLimiter, rate_limiter_json

__all__ = ["WIRE_DTYPES", "Field", "TableSchema", "wire_dtype", "normalize_shape",
           "normalize_fields", "table_description"]

#: The element types the protocol carries, by numpy name.
WIRE_DTYPES: Tuple[str, ...] = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                "uint32", "uint64", "float16", "float32", "float64")

ShapeLike = Union[None, int, Sequence[int]]
FieldsLike = Union[Mapping[str, Tuple[Any, ShapeLike]], Iterable[Tuple[str, Any, ShapeLike]]]


def wire_dtype(dtype: Any) -> np.dtype[Any]:
    """The little-endian numpy dtype for anything ``numpy.dtype`` accepts, if the protocol
    carries it; raises TypeError naming the allowed types otherwise."""
    try:
        resolved = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"{dtype!r} is not a dtype: {exc}") from None
    if resolved.name not in WIRE_DTYPES:
        raise TypeError(f"dtype {resolved} is not supported by replayd; expected one of "
                        f"{', '.join(WIRE_DTYPES)}")
    return resolved.newbyteorder("<")


def normalize_shape(shape: ShapeLike) -> Tuple[int, ...]:
    """A per-item shape as a tuple: None or () is a scalar, an int k is (k,)."""
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        return tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"shape must be None, an int or a sequence of ints, got {shape!r}") \
            from None


@dataclass(frozen=True)
class Field:
    """One field of a table: a name, a dtype and a per-item shape (() for a scalar)."""

    name: str
    dtype: np.dtype[Any]
    shape: Tuple[int, ...]

    @property
    def item_elements(self) -> int:
        """Elements per item."""
        return math.prod(self.shape)

    @property
    def item_bytes(self) -> int:
        """Bytes per item."""
        return self.item_elements * self.dtype.itemsize

    def to_json(self) -> Dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype.name, "shape": list(self.shape)}


@dataclass(frozen=True)
class TableSchema:
    """The ordered fields of a table, as the server reported or accepted them."""

    table: str
    fields: Tuple[Field, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {f.name: f for f in self.fields})

    def get(self, name: str) -> Optional[Field]:
        """The named field, or None."""
        by_name: Dict[str, Field] = self._by_name  # type: ignore[attr-defined]
        return by_name.get(name)

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @classmethod
    def from_description(cls, description: Mapping[str, Any]) -> "TableSchema":
        """Builds a schema from a table description (``info``'s ``description``)."""
        fields = tuple(Field(str(f["name"]), wire_dtype(f["dtype"]),
                             normalize_shape(f.get("shape")))
                       for f in description["fields"])
        return cls(str(description["name"]), fields)


def normalize_fields(fields: FieldsLike) -> Tuple[Field, ...]:
    """Accepts ``{"obs": (np.float32, (4,)), "act": ("int64", ())}`` or
    ``[("obs", np.float32, 4), ...]`` (shape None or () means scalar) and returns Fields in
    order. Raises TypeError/ValueError naming the field at fault."""
    items: List[Tuple[Any, Any, Any]] = []
    if isinstance(fields, Mapping):
        for name, spec in fields.items():
            if not isinstance(spec, (tuple, list)) or len(spec) != 2:
                raise TypeError(f"field {name!r}: expected (dtype, shape), got {spec!r}")
            items.append((name, spec[0], spec[1]))
    else:
        for spec in fields:
            if not isinstance(spec, (tuple, list)) or len(spec) != 3:
                raise TypeError(f"expected (name, dtype, shape) for each field, got {spec!r}")
            items.append((spec[0], spec[1], spec[2]))
    result = []
    for name, dtype, shape in items:
        if not isinstance(name, str):
            raise TypeError(f"field name must be a string, got {name!r}")
        try:
            result.append(Field(name, wire_dtype(dtype), normalize_shape(shape)))
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"field {name!r}: {exc}") from None
    if not result:
        raise ValueError("a table needs at least one field")
    return tuple(result)


def table_description(name: str, fields: FieldsLike, capacity: int, *,
                      sampler: Union[str, Mapping[str, Any]] = "uniform",
                      priority_exponent: float = 0.6, remover: str = "fifo",
                      max_times_sampled: int = 0,
                      rate_limiter: Union[None, RateLimiter, Mapping[str, Any]] = None,
                      seed: Optional[int] = None, episodic: bool = False,
                      reward: Optional[str] = None,
                      bootstrap: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """The JSON table description of docs/PROTOCOL.md ``create_table``.

    `episodic`, `reward` and `bootstrap` describe an episodic table (docs/TRAJECTORIES.md):
    steps of episodes, n-step and sequence samples; the server's defaults are ``"rew"`` and
    ``["next_obs"]``.

    `sampler` is a kind name (``"uniform"``, ``"prioritized"``, ``"fifo"``, ``"lifo"``,
    ``"max_heap"``, ``"min_heap"``) or
    a ready JSON object; `priority_exponent` applies to ``"prioritized"`` only. The server
    validates everything else (capacity bounds, remover kinds, rate limiter consistency).
    """
    if isinstance(sampler, str):
        sampler_json: Dict[str, Any] = {"kind": sampler}
        if sampler == "prioritized":
            sampler_json["priority_exponent"] = float(priority_exponent)
    elif isinstance(sampler, Mapping):
        sampler_json = dict(sampler)
    else:
        raise TypeError(f"sampler must be a kind name or a dict, got {sampler!r}")
    description: Dict[str, Any] = {
        "name": name,
        "capacity": int(capacity),
        "fields": [f.to_json() for f in normalize_fields(fields)],
        "sampler": sampler_json,
        "remover": remover,
        "max_times_sampled": int(max_times_sampled),
    }
    limiter = rate_limiter_json(rate_limiter)
    if limiter is not None:
        description["rate_limiter"] = limiter
    if episodic:
        description["episodic"] = True
    if reward is not None:
        description["reward"] = reward
    if bootstrap is not None:
        description["bootstrap"] = list(bootstrap)
    if seed is not None:
        description["seed"] = int(seed)
    return description
