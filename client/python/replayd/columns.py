"""Columns: numpy arrays in and out of frame payloads.

- `prepare_insert` turns a user's dict of arrays into the columns of an insert request,
  converting dtypes only when that cannot lose information.
- `convert_item` does the same for one item, strictly (used by the writer, which must
  reject a bad item before it joins a batch).
- `decode_sample` / `decode_keys` view reply payloads in place (zero copy), except an
  n-step sample's ``steps`` and ``discount`` (see `sample_decoder`).

Pure functions; thread-safe.

Conversion rules (the same everywhere):
- numpy arrays and numpy scalars convert when ``numpy.can_cast(src, dst, "safe")``;
- Python scalars and (nested) lists convert when each value fits the field's kind: bools
  to any type, ints to any integer type whose range holds them or to any float type,
  floats to any float type (rounding allowed, overflow to infinity refused);
- anything else is sent unchanged, so the server rejects it with its own message naming
  the field (insert), or is rejected here (writer).
"""
from __future__ import annotations

import functools
import math
from collections import abc
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .nesting import flatten_values
from .errors import InvalidArgument, ProtocolError
from .pixel_frame_fields import add_nstep_frames, frame_specs, split_frame_columns
from .wire import padded
from .sample import Sample
from .schema import WIRE_DTYPES, Field, TableSchema, wire_dtype

__all__ = ["InsertBatch", "prepare_insert", "convert_item", "convert_value",
           "sample_layout", "sample_nbytes", "decode_sample", "sample_decoder", "decode_keys",
           "SAMPLE_INFO_COLUMNS", "column_plan"]

#: The columns every sample reply starts with, in order, and their dtypes.
SAMPLE_INFO_COLUMNS: Tuple[Tuple[str, str], ...] = (
    ("key", "uint64"), ("probability", "float64"), ("weight", "float64"),
    ("times_sampled", "uint32"))


@dataclass
class InsertBatch:
    """The columns of one insert request.

    Attributes:
        n: items in the batch.
        columns: metadata entries ``{"name", "dtype", "shape"}`` in payload order.
        arrays: the column data, C-contiguous and little-endian, parallel to `columns`.
        priorities: n float64 priorities, or None to let the server assign them.
        version: the policy version of every row (an int, sent as ``"version"``), n
            uint64 versions (an array: a column after the priorities, ``"versions":
            true``), or None (docs/VERSIONS.md).
    """

    n: int
    columns: List[Dict[str, Any]]
    arrays: List[np.ndarray[Any, Any]]
    priorities: Optional[np.ndarray[Any, Any]]
    version: Any = None

    @property
    def payload_bytes(self) -> int:
        total = sum(padded(a.nbytes) for a in self.arrays)
        if self.priorities is not None:
            total += padded(self.priorities.nbytes)
        if isinstance(self.version, np.ndarray):
            total += padded(self.version.nbytes)
        return total

    def buffers(self) -> List[np.ndarray[Any, Any]]:
        """The payload's columns in order (priorities, then per-row versions, if any)."""
        if self.priorities is None and not isinstance(self.version, np.ndarray):
            return list(self.arrays)
        buffers = list(self.arrays)
        if self.priorities is not None:
            buffers.append(self.priorities)
        if isinstance(self.version, np.ndarray):
            buffers.append(self.version)
        return buffers


def _is_numpy(value: Any) -> bool:
    return isinstance(value, (np.ndarray, np.generic))


def _is_wire_dtype(dtype: np.dtype[Any]) -> bool:
    """Whether the protocol carries `dtype` (any byte order). Cheaper than dtype.name."""
    kind = dtype.kind
    if kind in "iu":
        return dtype.itemsize in (1, 2, 4, 8)
    if kind == "f":
        return dtype.itemsize in (2, 4, 8)
    return kind == "b"


_LIMITS: Dict[np.dtype[Any], Tuple[float, float]] = {}


def _limits(dtype: np.dtype[Any]) -> Tuple[float, float]:
    """The range of `dtype` as Python numbers (comparisons with numpy scalars are slow)."""
    limits = _LIMITS.get(dtype)
    if limits is None:
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            limits = (int(info.min), int(info.max))
        else:
            finfo = np.finfo(dtype)
            limits = (float(finfo.min), float(finfo.max))
        _LIMITS[dtype] = limits
    return limits


_DTYPE_NAMES: Dict[np.dtype[Any], str] = {}


def _dtype_name(dtype: np.dtype[Any]) -> str:
    """``dtype.name``, cached (numpy builds the string on every access)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


def python_scalar_fits(value: Any, dtype: np.dtype[Any]) -> bool:
    """The Python-value rule for one bool/int/float (fast path of the writer)."""
    kind = dtype.kind
    if type(value) is bool:
        return True
    if type(value) is int:
        if kind == "f":
            return True
        if kind in "iu":
            low, high = _limits(dtype)
            return low <= value <= high
        return False
    if type(value) is float and kind == "f":
        if not math.isfinite(value):
            return True  # inf and nan are representable in every float type
        low, high = _limits(dtype)
        return low <= value <= high  # overflow to infinity is refused
    return False


def _python_value_fits(values: np.ndarray[Any, Any], target: np.dtype[Any]) -> bool:
    """Whether Python values (already an array of their natural dtype) fit `target`."""
    kind, to = values.dtype.kind, target.kind
    if kind == "b":
        return True
    if kind in "iu":
        if to == "f":
            return True
        if to in "iu":
            if values.size == 0:
                return True
            info = np.iinfo(target)
            return bool(values.min() >= info.min and values.max() <= info.max)
        return False
    if kind == "f" and to == "f":
        with np.errstate(over="ignore"):
            converted = values.astype(target)
        return not bool(np.any(np.isinf(converted) & np.isfinite(values)))
    return False


def convert_value(name: str, value: Any, target: Optional[np.dtype[Any]], *,
                  table: str = "") -> Tuple[np.ndarray[Any, Any], bool]:
    """Converts one field's value to an array, to `target` when the rules allow.

    Returns (array, converted): `converted` is False when the array still has a dtype other
    than `target` because no conversion was allowed. The array is little-endian; it may
    share memory with `value`. Raises InvalidArgument for values no dtype on the wire can
    carry (strings, objects, ragged lists, complex numbers).
    """
    prefix = f"table '{table}': " if table else ""
    from_python = not _is_numpy(value)
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"{prefix}field '{name}': cannot make an array of the value: "
                              f"{exc}") from None
    if not _is_wire_dtype(array.dtype):
        raise InvalidArgument(f"{prefix}field '{name}': dtype {array.dtype} cannot be sent "
                              f"(replayd carries {', '.join(WIRE_DTYPES)})")
    if target is not None and array.dtype != target:
        if np.can_cast(array.dtype, target, "safe") or (
                from_python and _python_value_fits(array, target)):
            return array.astype(target), True
        if array.dtype.name != target.name:
            return array.astype(array.dtype.newbyteorder("<"), copy=False), False
        return array.astype(target), True  # same type, other byte order
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return array, True


_PY_SCALARS = (bool, int, float)


def prepare_insert(schema: TableSchema, data: Mapping[str, Any],
                   priorities: Any = None) -> InsertBatch:
    """Builds the columns of an insert of `data` into the table of `schema`.

    `data` maps field names to arrays whose leading dimension is the batch, or to single
    items without that dimension (told apart by the field's number of dimensions). Fields
    are sent in the schema's order. Structural mistakes (a missing or unknown field, a
    wrong shape, a dtype that may not be converted) are sent as they are, so that the
    server rejects the request with its message; only values that cannot be encoded at
    all, and a priority count that does not match, are rejected here (InvalidArgument).
    """
    if not isinstance(data, Mapping):
        raise InvalidArgument(f"table '{schema.table}': insert data must be a dict of field "
                              f"name -> array, got {type(data).__name__}")
    if not data:
        raise InvalidArgument(f"table '{schema.table}': insert data has no fields")
    if schema.nested:  # nested fields given as dicts/tuples: their leaves by path
        data = flatten_values(data, schema.by_name)
    known = [f.name for f in schema.fields if f.name in data]
    unknown = [name for name in data if schema.get(name) is None]
    columns: List[Dict[str, Any]] = []
    arrays: List[np.ndarray[Any, Any]] = []
    n: Optional[int] = None
    for name in known + unknown:
        field = schema.get(name)
        value = data[name]
        if field is None:
            array, _ = convert_value(name, value, None, table=schema.table)
        elif type(value) is np.ndarray and value.dtype == field.dtype:
            array = value  # what convert_value returns for it, without its checks
        elif not field.shape and type(value) in _PY_SCALARS and \
                python_scalar_fits(value, field.dtype):
            array = np.array(value, dtype=field.dtype)
        else:
            array, _ = convert_value(name, value, field.dtype, table=schema.table)
        if field is not None and array.ndim == len(field.shape):
            array = array[np.newaxis]
        if n is None and array.ndim > 0:
            n = int(array.shape[0])
        array = np.ascontiguousarray(array)
        columns.append({"name": name, "dtype": _dtype_name(array.dtype),
                        "shape": list(array.shape)})
        arrays.append(array)
    n = 1 if n is None else n
    prio = None
    if priorities is not None:
        try:
            prio = np.ascontiguousarray(np.asarray(priorities, dtype="<f8").reshape(-1))
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"table '{schema.table}': priorities must be numbers: "
                                  f"{exc}") from None
        if prio.shape[0] != n:
            raise InvalidArgument(f"table '{schema.table}': {prio.shape[0]} priorities for "
                                  f"{n} items")
    return InsertBatch(n, columns, arrays, prio)


def convert_item(schema: TableSchema, item: Mapping[str, Any]) -> List[Any]:
    """Validates and converts ONE item (no batch dimension) for the writer.

    Returns one value per schema field, in order: an array of the field's dtype and shape,
    or a Python scalar that fits the field (numpy converts it on assignment). Raises
    InvalidArgument naming the field for anything the server would reject.
    Cost: a few microseconds per field; arrays already of the right dtype and shape are
    passed through without a check of their values.
    """
    if not isinstance(item, abc.Mapping):
        raise InvalidArgument(f"table '{schema.table}': an item must be a dict of field "
                              f"name -> value, got {type(item).__name__}")
    if schema.nested:  # nested fields given as dicts/tuples: their leaves by path
        item = flatten_values(item, schema.by_name)
    out: List[Any] = []
    for field in schema.fields:
        try:
            value = item[field.name]
        except KeyError:
            raise InvalidArgument(f"table '{schema.table}': field '{field.name}' is "
                                  f"missing") from None
        if (type(value) is np.ndarray and value.dtype == field.dtype
                and value.shape == field.shape):
            out.append(value)  # fast path: nothing to check or convert
            continue
        if not field.shape and type(value) in (bool, int, float):
            if python_scalar_fits(value, field.dtype):
                out.append(value)
                continue
            raise InvalidArgument(f"table '{schema.table}': field '{field.name}': "
                                  f"{type(value).__name__} {value!r} does not fit the "
                                  f"table's {field.dtype}")
        array, converted = convert_value(field.name, value, field.dtype, table=schema.table)
        if not converted:
            raise InvalidArgument(f"table '{schema.table}': field '{field.name}': dtype "
                                  f"{array.dtype} cannot be converted safely to the table's "
                                  f"{field.dtype}")
        if array.shape != field.shape:
            raise InvalidArgument(f"table '{schema.table}': field '{field.name}': item shape "
                                  f"{list(array.shape)} does not match the table's "
                                  f"{list(field.shape)}")
        out.append(array)
    if len(item) != len(out):
        unknown = [name for name in item if schema.get(name) is None]
        raise InvalidArgument(f"table '{schema.table}': unknown field '{unknown[0]}' (the "
                              f"table has {', '.join(schema.names)})")
    return out


def sample_layout(fields: Tuple[Field, ...],
                  n: int) -> List[Tuple[str, np.dtype[Any], Tuple[int, ...], int]]:
    """The columns of a sample reply of n items, with their offsets, per PROTOCOL.md:
    key, probability, weight, times_sampled, then the fields; each column 8-aligned."""
    layout: List[Tuple[str, np.dtype[Any], Tuple[int, ...], int]] = []
    offset = 0
    specs: List[Tuple[str, np.dtype[Any], Tuple[int, ...]]] = [
        (name, np.dtype(dtype).newbyteorder("<"), (n,)) for name, dtype in SAMPLE_INFO_COLUMNS]
    specs += [(f.name, f.dtype, (n, *f.shape)) for f in fields]
    for name, dtype, shape in specs:
        layout.append((name, dtype, shape, offset))
        offset += padded(int(np.prod(shape)) * dtype.itemsize)
    return layout


def sample_nbytes(fields: Tuple[Field, ...], n: int) -> int:
    """Bytes of the payload of a sample reply of n items (columns of `sample_layout`)."""
    _, dtype, shape, offset = sample_layout(fields, n)[-1]
    return offset + padded(int(np.prod(shape)) * dtype.itemsize)


def column_plan(column: Any) -> Tuple[str, np.dtype[Any], Tuple[int, ...], int, int, int]:
    """(name, dtype, shape, element count, offset, end) of one sample reply column."""
    try:
        name = str(column["name"])
        dtype = wire_dtype(column["dtype"])
        shape = tuple(int(d) for d in column["shape"])
        offset = int(column["offset"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"malformed column in sample reply: {column!r} ({exc})") from None
    count = math.prod(shape)
    return name, dtype, shape, count, offset, offset + count * dtype.itemsize


_SamplePlan = Tuple[Tuple[str, np.dtype, Tuple[int, ...], int, int, int], ...]
# The plans of recent sample reply layouts, newest first: a learner sees the same
# `columns` metadata on every reply, so decoding it is done once. Replaced whole (never
# mutated), so reader threads share it without a lock.
_PLANS: Tuple[Tuple[List[Any], _SamplePlan], ...] = ()
_MAX_PLANS = 16


def _sample_plan(columns: List[Any]) -> _SamplePlan:
    """The checked plan of a sample reply's `columns`. Cost: a comparison of `columns` with
    the cached layouts (microseconds), or building and checking the plan."""
    global _PLANS
    for cached, plan in _PLANS:
        if cached == columns:
            return plan
    plan = tuple(column_plan(c) for c in columns)
    for (name, *_), (expected, _) in zip(plan, SAMPLE_INFO_COLUMNS):
        if name != expected:
            raise ProtocolError(f"sample reply column '{name}' where '{expected}' belongs")
    for name, _, _, _, offset, end in plan:
        if offset < 0:
            raise ProtocolError(f"sample reply column '{name}' starts at offset {offset}")
    snapshot = [{k: list(v) if isinstance(v, list) else v for k, v in c.items()}
                for c in columns]  # the caller may change its metadata later
    _PLANS = ((snapshot, plan),) + _PLANS[:_MAX_PLANS - 1]
    return plan


def decode_sample(meta: Mapping[str, Any], payload: np.ndarray[Any, Any], *,
                  discount_dtype: Optional[np.dtype[Any]] = None,
                  versions: bool = False) -> Sample:
    """Views a sample reply's payload as a Sample, without copying.

    The first four columns are key, probability, weight and times_sampled (by position, so
    a field may itself be called "key"); the table's fields follow. An n-step reply ends
    with ``discount`` and ``steps``, which are converted (see `finish_nstep_columns`).
    `versions`: the request asked for versions: the last column is ``version`` (uint64),
    kept apart as the Sample's `versions` (docs/VERSIONS.md).
    Raises ProtocolError when the metadata does not describe the payload.
    """
    columns = meta.get("columns")
    if not isinstance(columns, list) or len(columns) < len(SAMPLE_INFO_COLUMNS):
        raise ProtocolError(f"sample reply without its columns: {dict(meta)!r}")
    specs = frame_specs(meta)
    if specs:  # frame fields (docs/PIXELS.md): their columns end the list
        columns, frame_columns = split_frame_columns(columns, specs)
    nbytes = payload.nbytes
    views = []
    for name, dtype, shape, count, offset, end in _sample_plan(columns):
        if end > nbytes:
            raise ProtocolError(f"sample reply column '{name}' spans bytes {offset}..{end} "
                                f"of a {nbytes}-byte payload")
        views.append((name, np.frombuffer(payload, dtype, count, offset).reshape(shape)))
    version_column = None
    if versions:
        if len(views) <= len(SAMPLE_INFO_COLUMNS) or views[-1][0] != "version" or \
                views[-1][1].dtype != np.uint64:
            raise ProtocolError("a sample reply without the uint64 'version' column its "
                                "request asked for (a server without policy versions?)")
        version_column = views.pop()[1]
    info = [array for _, array in views[:len(SAMPLE_INFO_COLUMNS)]]
    data = {name: array for name, array in views[len(SAMPLE_INFO_COLUMNS):]}
    if specs:
        add_nstep_frames(data, meta, payload, specs, frame_columns, info[0])
    if meta.get("nstep") is not None:
        finish_nstep_columns(data, discount_dtype)
    bound = meta.get("min_version")
    return Sample(data=data, keys=info[0], probabilities=info[1], weights=info[2],
                  times_sampled=info[3], state=meta.get("state"), versions=version_column,
                  min_version=None if bound is None else int(bound))


def finish_nstep_columns(data: Dict[str, np.ndarray[Any, Any]],
                         discount_dtype: Optional[np.dtype[Any]]) -> None:
    """An n-step sample's trailing columns in the dtypes a learner computes with: ``steps``
    (uint32 on the wire) as int64, which ``torch.from_numpy`` and index arithmetic take;
    ``discount`` (float64 on the wire) in the reward field's dtype, so that
    ``rew + discount * value`` stays float32 for a float32 reward (gamma^h rounded to
    float32, as the return already is). `discount_dtype` None: the dtype of the sample's
    scalar float fields when they share one (the reward is one of them), else float64.
    Each a copy of n values."""
    steps, discount = data.get("steps"), data.get("discount")
    if steps is None or discount is None:
        raise ProtocolError("an n-step reply without its 'discount' and 'steps' columns")
    if discount_dtype is None:
        scalar_floats = {array.dtype for name, array in data.items()
                         if name not in ("discount", "steps") and array.ndim == 1
                         and array.dtype.kind == "f" and array.dtype.itemsize >= 4}
        discount_dtype = (scalar_floats.pop() if len(scalar_floats) == 1
                          else np.dtype(np.float64))
    data["steps"] = steps.astype(np.int64)
    data["discount"] = discount.astype(discount_dtype)


def sample_decoder(schema: Optional[TableSchema], versions: bool = False
                   ) -> Callable[[Mapping[str, Any], np.ndarray[Any, Any]], Sample]:
    """`decode_sample` for replies of the table of `schema` (None: not known yet): an
    n-step reply's ``discount`` in the dtype of its reward field; `versions`: replies
    that end with the ``version`` column."""
    dtype = None if schema is None else schema.discount_dtype
    if versions:
        return functools.partial(decode_sample, discount_dtype=dtype, versions=True)
    if dtype is None:
        return decode_sample
    return functools.partial(decode_sample, discount_dtype=dtype)


def decode_keys(meta: Mapping[str, Any], payload: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The uint64 keys of an insert reply, viewing the payload."""
    try:
        n = int(meta["n"])
    except (KeyError, TypeError, ValueError):
        raise ProtocolError(f"insert reply without 'n': {dict(meta)!r}") from None
    if payload.nbytes < 8 * n:
        raise ProtocolError(f"insert reply of {n} keys carries only {payload.nbytes} bytes")
    return np.frombuffer(payload, "<u8", n)
