"""Table schemas and descriptions: the fields every item has, and the JSON description
that `create_table` sends.

Plain immutable data and pure functions; thread-safe.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .nesting import flatten_spec
from .policy_versions import followed_value
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
    """One field of a table: a name, a dtype and a per-item shape (() for a scalar); in an
    episodic table also its frame options (docs/PIXELS.md): `stack` (samples return the
    last `stack` values), `next_of` (samples also return ``next_<name>``), `compression`
    (None or ``"zstd"``) and the `compression_level` writers use."""

    name: str
    dtype: np.dtype[Any]
    shape: Tuple[int, ...]
    stack: int = 1
    next_of: bool = False
    compression: Optional[str] = None
    compression_level: int = 3

    @property
    def is_frame(self) -> bool:
        """Whether samples carry this field as frames (stacked, next_of or compressed)."""
        return self.stack > 1 or self.next_of or self.compression is not None

    @property
    def item_elements(self) -> int:
        """Elements per item."""
        return math.prod(self.shape)

    @property
    def item_bytes(self) -> int:
        """Bytes per item."""
        return self.item_elements * self.dtype.itemsize

    def to_json(self) -> Dict[str, Any]:
        described: Dict[str, Any] = {"name": self.name, "dtype": self.dtype.name,
                                     "shape": list(self.shape)}
        if self.is_frame:
            described.update(stack=self.stack, next_of=self.next_of,
                             compression=self.compression or "none",
                             compression_level=self.compression_level)
        return described


@dataclass(frozen=True)
class TableSchema:
    """The ordered fields of a table, as the server reported or accepted them; `reward`
    names an episodic table's reward field (None for a table of items); `capacity` the
    items (steps) it holds, when known."""

    table: str
    fields: Tuple[Field, ...]
    reward: Optional[str] = None
    capacity: Optional[int] = None
    metadata: Any = None  # the table's metadata (any JSON value), None when it has none
    # The published value whose version the table follows (docs/VERSIONS.md), or None.
    follows: Optional[str] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {f.name: f for f in self.fields})
        object.__setattr__(self, "_nested", any("/" in f.name for f in self.fields))

    @property
    def by_name(self) -> Dict[str, Field]:
        """The fields by name."""
        by_name: Dict[str, Field] = self._by_name  # type: ignore[attr-defined]
        return by_name

    @property
    def nested(self) -> bool:
        """Whether some field is a leaf of a nested one (its name holds '/')."""
        nested: bool = self._nested  # type: ignore[attr-defined]
        return nested

    def get(self, name: str) -> Optional[Field]:
        """The named field, or None."""
        by_name: Dict[str, Field] = self._by_name  # type: ignore[attr-defined]
        return by_name.get(name)

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def discount_dtype(self) -> Optional[np.dtype[Any]]:
        """The dtype of an n-step sample's ``discount``: the reward field's (float32 or
        float64); None for a table without one."""
        field = None if self.reward is None else self.get(self.reward)
        return None if field is None else field.dtype

    @classmethod
    def from_description(cls, description: Mapping[str, Any]) -> "TableSchema":
        """Builds a schema from a table description (``info``'s ``description``)."""
        fields = tuple(Field(str(f["name"]), wire_dtype(f["dtype"]),
                             normalize_shape(f.get("shape")), int(f.get("stack", 1)),
                             bool(f.get("next_of", False)),
                             None if f.get("compression", "none") == "none"
                             else str(f["compression"]),
                             int(f.get("compression_level", 3)))
                       for f in description["fields"])
        reward = description.get("reward") if description.get("episodic") else None
        capacity = description.get("capacity")
        return cls(str(description["name"]), fields, None if reward is None else str(reward),
                   None if capacity is None else int(capacity), description.get("metadata"),
                   followed_value(description))


def normalize_fields(fields: FieldsLike) -> Tuple[Field, ...]:
    """Accepts ``{"obs": (np.float32, (4,)), "act": ("int64", ())}`` or
    ``[("obs", np.float32, 4), ...]`` (shape None or () means scalar) and returns Fields in
    order. A dict's value may also be a dict or tuple of such specs (a nested field, e.g.
    ``{"obs": {"camera": (np.uint8, (32, 32, 3)), "state": (np.float32, 7)}}``): its leaves
    become fields named by their path (``obs/camera``; replayd.nesting). Raises
    TypeError/ValueError naming the field at fault."""
    items: List[Tuple[Any, Any, Any]] = []
    if isinstance(fields, Mapping):
        for name, spec in fields.items():
            if not isinstance(name, str):
                raise TypeError(f"field name must be a string, got {name!r}")
            # a dict or tuple of specs is a nested field: one leaf per path (replayd.nesting)
            for path, leaf in flatten_spec(name, spec):
                items.append((path, leaf[0], leaf[1]))
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
                      bootstrap: Optional[Sequence[str]] = None,
                      next_of: Sequence[str] = (),
                      stack: Optional[Mapping[str, int]] = None,
                      compression: Optional[Mapping[str, Any]] = None,
                      max_compressed_bytes: Optional[int] = None,
                      pad_history: bool = True,
                      metadata: Any = None,
                      versions: Optional[Mapping[str, Any]] = None,
                      ram_bytes: Optional[int] = None) -> Dict[str, Any]:
    """The JSON table description of docs/PROTOCOL.md ``create_table``.

    `episodic`, `reward` and `bootstrap` describe an episodic table (docs/TRAJECTORIES.md):
    steps of episodes, n-step and sequence samples; the server's defaults are ``"rew"`` and
    ``["next_obs"]`` (none when there is no such field).

    Frame options of an episodic table's fields (docs/PIXELS.md): `next_of` names fields
    whose next step's value samples return as ``next_<name>`` (stored once per step, the
    final one given to ``end_episode``); `stack` maps a field to k, the values of steps
    t-k+1..t that samples return as (k, *shape); `compression` maps a field to ``"zstd"``
    or ``("zstd", level)``: writers compress each value, the server stores and sends it
    compressed, samples decompress it. `max_compressed_bytes` bounds the compressed
    values' bytes (default: their uncompressed size). ``pad_history=False``: no window looks
    back before its episode's first step, so an episode's first (largest stack - 1) steps
    only hold the history of later ones and are never drawn (docs/PIXELS.md).

    `metadata`: any JSON value (at most 1 MiB serialized) the server keeps with the table
    and returns in its description (``table_info(name)["description"]["metadata"]``), in
    snapshots too; None sends none.

    `versions`: ``{"value": NAME, "drop_behind": k}`` (drop_behind optional): the table
    follows the published value NAME, whose version is its policy version; with k, each
    publish of version V drops the items of versions below V - k (docs/VERSIONS.md).

    `ram_bytes`: a file tier (docs/FILE_TIER.md): only this many bytes of rows stay in the
    server's RAM, older ones on disk in its ``--tier-dir`` (plain tables only).

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
        "fields": [f.to_json() for f in
                   with_frame_options(normalize_fields(fields), next_of, stack, compression)],
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
        leaves = [f["name"] for f in description["fields"]]
        description["bootstrap"] = [leaf for name in bootstrap
                                    for leaf in ([name] if name in leaves else
                                                 [x for x in leaves if x.startswith(name + "/")]
                                                 or [name])]
    if seed is not None:
        description["seed"] = int(seed)
    if max_compressed_bytes is not None:
        description["max_compressed_bytes"] = int(max_compressed_bytes)
    if not pad_history:
        description["pad_history"] = False
    if metadata is not None:
        description["metadata"] = metadata
    if versions is not None:
        if not isinstance(versions, Mapping):
            raise TypeError(f"versions must be a dict like {{'value': NAME, 'drop_behind': "
                            f"k}}, got {versions!r}")
        description["versions"] = dict(versions)
    if ram_bytes is not None:
        if isinstance(ram_bytes, bool) or not isinstance(ram_bytes, int) or ram_bytes < 1:
            raise ValueError(f"ram_bytes must be an int >= 1 (bytes of rows kept in RAM), "
                             f"got {ram_bytes!r}")
        description["file_tier"] = {"ram_bytes": int(ram_bytes)}
    return description


def with_frame_options(fields: Tuple[Field, ...], next_of: Sequence[str],
                       stack: Optional[Mapping[str, int]],
                       compression: Optional[Mapping[str, Any]]) -> Tuple[Field, ...]:
    """`fields` with the frame options of `table_description` applied; ValueError naming an
    option for a field the table does not have, or a compression it does not know."""
    if isinstance(next_of, str):
        next_of = [next_of]
    names = {f.name for f in fields}

    def leaves(name: str) -> List[str]:
        """`name`, or the leaves under it when it names a nested field."""
        if name in names:
            return [name]
        under = [f.name for f in fields if f.name.startswith(name + "/")]
        return under or [name]

    options: Dict[str, Dict[str, Any]] = {}
    for name in next_of:
        for leaf in leaves(name):
            options.setdefault(leaf, {})["next_of"] = True
    for name, k in (stack or {}).items():
        for leaf in leaves(name):
            options.setdefault(leaf, {})["stack"] = int(k)
    for name, codec in (compression or {}).items():
        level = 3
        if isinstance(codec, (tuple, list)):
            codec, level = codec
        if codec not in ("zstd", None, "none"):
            raise ValueError(f"field {name!r}: unknown compression {codec!r} (expected 'zstd')")
        for leaf in leaves(name):
            options.setdefault(leaf, {}).update(
                compression=None if codec in (None, "none") else "zstd",
                compression_level=int(level))
    unknown = sorted(set(options) - names)
    if unknown:
        raise ValueError(f"frame options name field {unknown[0]!r}, which the table does not "
                         f"have ({', '.join(sorted(names))})")
    return tuple(replace(f, **options[f.name]) if f.name in options else f for f in fields)
