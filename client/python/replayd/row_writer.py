"""The fast path of `Writer.append`, compiled once per batch's columns: a function
``write(values, row) -> bool`` that writes one item into `row` when no value needs a
conversion, and returns False (the row may be half written: it is not counted) when one
does, so that the caller takes the general path (`columns.convert_item`, which raises
naming the field).

What it accepts, per field: an ndarray of the field's exact dtype and shape (for a scalar
field, a 0-d array); for a scalar field also a bool, an int or float in the range the
dtype holds (as `columns.python_scalar_fits`; a float only for a float field, an int not
for a bool field), or a numpy scalar of the field's dtype.

The function is generated with each field's checks written out (no loop over fields, no
tuple unpacking): for a 5-field transition it costs about half of the loop it replaces.
Only integers and the names of its own parameters appear in the generated source; field
names, dtypes and columns are bound as closure variables, so one compiled source serves
every set of columns of the same layout (compiled once per process, bound per batch).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np

from .columns import _limits
from .schema import Field

__all__ = ["compile_row_writer", "RowWriter"]

#: write(values, row) -> bool
RowWriter = Callable[[Any, int], bool]

_MISSING = object()

# Compiled sources -> their `make`: the source depends only on the fields and the columns'
# layout, so a writer's staging slots (and writers of one schema) compile it once and bind
# their own columns (about 1 ms a compile against 10 us a bind). Threads may race to fill
# it; either result is the same function.
_COMPILED: Dict[str, Callable[..., RowWriter]] = {}
_SMALL_ITEM_BYTES = 1024  # array fields up to this size are copied via bytes

# struct format of each scalar dtype a memoryview can set items of (native byte order:
# the wire is little-endian, and so are the hosts replayd runs on). Not float16: struct
# knows "e", but memoryview.cast refuses it (such columns are set through numpy).
_ITEM_FORMATS = {"b": "?", "i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I",
                 "i8": "q", "u8": "Q", "f4": "f", "f8": "d"}


class _NumpyItems:
    """Item assignment into a numpy column, for a scalar dtype a memoryview lacks."""

    def __init__(self, column: np.ndarray[Any, Any]) -> None:
        self._column = column

    def __setitem__(self, row: int, value: Any) -> None:
        self._column[row] = value


def _scalar_items(column: np.ndarray[Any, Any]) -> Any:
    """The column of a scalar field as something whose items are set fastest: a typed
    memoryview (half of numpy's cost: no dtype machinery), else the numpy column."""
    code = column.dtype.kind + ("" if column.dtype.kind == "b" else str(column.dtype.itemsize))
    fmt = _ITEM_FORMATS.get(code)
    if fmt is None or column.dtype.byteorder == ">" or not column.flags.c_contiguous:
        return _NumpyItems(column)
    return memoryview(column).cast("B").cast(fmt)  # type: ignore[arg-type]


def _array_field(i: int, field: Field, column: np.ndarray[Any, Any],
                 bound: List[Tuple[str, Any]]) -> List[str]:
    """Source lines writing array field `i` (its value must be an exact ndarray)."""
    bound += [(f"shape{i}", field.shape), (f"dtype{i}", column.dtype)]
    lines = [f"if t is not ndarray or v.shape != shape{i} or "
             f"(v.dtype is not dtype{i} and v.dtype != dtype{i}):",
             "    return False"]
    nbytes = int(field.item_bytes)
    if 0 < nbytes <= _SMALL_ITEM_BYTES and column.flags.c_contiguous:
        # small: a bytes copy beats numpy's assignment
        bound.append((f"raw{i}", memoryview(column).cast("B")))  # type: ignore[arg-type]
        lines.append(f"raw{i}[row * {nbytes}:(row + 1) * {nbytes}] = v.tobytes()")
    else:
        bound.append((f"column{i}", column))
        lines.append(f"column{i}[row] = v")
    return lines


def _scalar_field(i: int, column: np.ndarray[Any, Any],
                  bound: List[Tuple[str, Any]]) -> List[str]:
    """Source lines writing scalar field `i`."""
    dtype = column.dtype
    bound += [(f"dtype{i}", dtype), (f"column{i}", column), (f"scalar{i}", dtype.type),
              (f"items{i}", _scalar_items(column))]
    lines = ["if t is ndarray:",
             f"    if v.shape != () or (v.dtype is not dtype{i} and v.dtype != dtype{i}):",
             "        return False",
             f"    column{i}[row] = v",
             "else:",
             "    if t is bool:",
             "        pass"]
    if dtype.kind in "fiu":  # Python numbers: comparing with numpy scalars is slow
        low, high = _limits(dtype)
        kind_is_float = dtype.kind == "f"
        bound += [(f"low{i}", float(low) if kind_is_float else int(low)),
                  (f"high{i}", float(high) if kind_is_float else int(high))]
        lines += ["    elif t is int:",
                  f"        if not low{i} <= v <= high{i}:",
                  "            return False",
                  "    elif t is float:"]
        # inf and nan fit a float field too, by the general path
        lines += ([f"        if not low{i} <= v <= high{i}:", "            return False"]
                  if kind_is_float else ["        return False"])
    else:  # bool: only bools and its own numpy scalars
        lines += ["    elif t is int or t is float:", "        return False"]
    lines += [f"    elif t is scalar{i}:",
              "        v = v.item()  # exact, and so is setting it back",
              "    else:",
              "        return False",
              f"    items{i}[row] = v"]
    return lines


def compile_row_writer(fields: Sequence[Field],
                       columns: Sequence[np.ndarray[Any, Any]]) -> RowWriter:
    """The fast path's function for `columns` (one array of the batch's rows per field, in
    the schema's order). It refers to the columns: compile again for other arrays."""
    bound: List[Tuple[str, Any]] = [("ndarray", np.ndarray), ("MISSING", _MISSING)]
    body = [f"if type(values) is not dict or len(values) != {len(fields)}:",
            "    return False",
            "get = values.get"]
    for i, (field, column) in enumerate(zip(fields, columns)):
        bound.append((f"name{i}", field.name))
        body += [f"v = get(name{i}, MISSING)", "t = type(v)"]
        body += (_array_field(i, field, column, bound) if field.shape
                 else _scalar_field(i, column, bound))
    body.append("return True")
    names = [name for name, _ in bound]
    source = (f"def make({', '.join(names)}):\n"
              "    def write(values, row):\n"
              + "".join(f"        {line}\n" for line in body)
              + "    return write\n")
    make = _COMPILED.get(source)
    if make is None:
        namespace: Dict[str, Any] = {}
        exec(compile(source, "<replayd row writer>", "exec"), namespace)
        make = namespace["make"]
        if len(_COMPILED) >= 64:  # a few schemas per process; never grows without bound
            _COMPILED.clear()
        _COMPILED[source] = make
    write: RowWriter = make(*[value for _, value in bound])
    return write
