"""The compiled fast path of Writer.append (replayd.row_writer) against the general path
(convert_item, then numpy's assignment), on random items of every dtype: whenever the fast
path takes an item it writes exactly the bytes the general path would, it never takes an
item the general path refuses, and it takes the values environments hand out."""
from __future__ import annotations

import numpy as np
import pytest

from replayd.columns import convert_item
from replayd.errors import InvalidArgument
from replayd.row_writer import compile_row_writer
from replayd.schema import TableSchema, normalize_fields

SCALARS = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
           "float16", "float32", "float64"]
SCHEMA = TableSchema("t", normalize_fields(
    [(f"s_{name}", name, ()) for name in SCALARS]
    + [("small", "float32", (4,)), ("pixels", "uint8", (3, 20, 20)), ("flags", "bool", (5,))]))
ROWS = 8


def columns():
    return [np.zeros((ROWS, *f.shape), f.dtype) for f in SCHEMA.fields]


def scalar_value(rng, dtype):
    """A value for a scalar field: mostly what environments hand out, sometimes not."""
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    choice = rng.integers(12)
    if choice == 0:
        return bool(rng.integers(2))
    if choice in (1, 2):
        if info is None:
            return int(rng.integers(-1000, 1000))
        edge = [int(info.min), int(info.max), int(info.min) - 1, int(info.max) + 1]
        if choice == 2:
            return edge[rng.integers(4)]
        return int(rng.integers(info.min, info.max, endpoint=True, dtype=dtype.type))
    if choice == 3:
        return [float(rng.normal()), float("inf"), float("nan"), 1e300, 2.5][rng.integers(5)]
    if choice in (4, 5):  # a numpy scalar of the field's dtype, or of another
        other = dtype if choice == 4 else np.dtype(SCALARS[rng.integers(len(SCALARS))])
        return np.array(rng.integers(0, 100)).astype(other)[()]
    if choice == 6:  # a 0-d array, of the field's dtype or not
        return np.array(rng.integers(0, 100)).astype(dtype if rng.integers(2) else "f8")
    if choice == 7:
        return [1]
    if choice == 8:
        return "1"
    return np.array(rng.integers(0, 2)).astype(dtype)[()]  # the common case again


def array_value(rng, field):
    choice = rng.integers(8)
    exact = (rng.normal(size=field.shape) * 100).astype(field.dtype)
    if choice == 0:
        return exact.astype("f8" if field.dtype != np.float64 else "f4")
    if choice == 1:
        return exact.reshape(-1)[:-1]
    if choice == 2:
        return exact.tolist()
    if choice == 3:  # not C-contiguous: same dtype and shape
        return np.asfortranarray(exact) if exact.ndim > 1 else np.repeat(exact, 2)[::2]
    return exact


def random_item(rng):
    """Half the items with every value drawn at random, half with all values of kinds the
    fast path takes (one of them then sometimes replaced), so that both paths are walked."""
    def any_value(f):
        return array_value(rng, f) if f.shape else scalar_value(rng, f.dtype)

    def good_value(f):
        for _ in range(1000):
            value = any_value(f)
            if f.shape and type(value) is np.ndarray and value.dtype == f.dtype \
                    and value.shape == f.shape:
                return value
            if not f.shape and (type(value) in (bool, np.ndarray, f.dtype.type)
                                or (type(value) is int and f.dtype.kind in "iuf")
                                or (type(value) is float and f.dtype.kind == "f")):
                return value
        raise AssertionError(f"no value for {f.name}")

    if rng.integers(2):
        item = {f.name: any_value(f) for f in SCHEMA.fields}
    else:
        item = {f.name: good_value(f) for f in SCHEMA.fields}
        if rng.integers(3) == 0:
            field = SCHEMA.fields[rng.integers(len(SCHEMA.fields))]
            item[field.name] = any_value(field)
    damage = rng.integers(20)
    if damage == 0:
        del item[SCHEMA.fields[rng.integers(len(SCHEMA.fields))].name]
    elif damage == 1:
        item["extra"] = 1
    return item


def general_path(item, row, out):
    """True and the row written if convert_item accepts the item, else False."""
    try:
        values = convert_item(SCHEMA, item)
    except InvalidArgument:
        return False
    for column, value in zip(out, values):
        column[row] = value
    return True


def test_the_fast_path_writes_what_the_general_path_writes_and_refuses_nothing_less():
    rng = np.random.default_rng(7)
    fast, general = columns(), columns()
    write = compile_row_writer(SCHEMA.fields, fast)
    taken = 0
    for step in range(6000):
        item = random_item(rng)
        row = step % ROWS
        accepted = general_path(item, row, general)
        if write(item, row):
            taken += 1
            assert accepted, f"the fast path took an item the general path refuses: {item}"
            for field, a, b in zip(SCHEMA.fields, fast, general):
                assert a[row].tobytes() == b[row].tobytes(), (field.name, item[field.name])
        elif accepted:  # the general path wrote it: the fast row must hold it for the next
            for a, b in zip(fast, general):
                a[row] = b[row]
    assert taken > 300  # of the items of good values (ints and floats out of range are not)


def test_the_fast_path_takes_the_values_environments_hand_out():
    fast, general = columns(), columns()
    write = compile_row_writer(SCHEMA.fields, fast)
    item = {f.name: (np.ones(f.shape, f.dtype) if f.shape
                     else True if f.dtype.kind == "b" else 1.5 if f.dtype.kind == "f" else 7)
            for f in SCHEMA.fields}
    item["s_float32"] = np.float32(0.1)  # numpy scalars of the field's dtype, as they are
    item["s_int64"] = np.int64(-2**63)
    item["s_uint64"] = np.uint64(2**64 - 1)
    assert write(item, 3)
    assert general_path(item, 3, general)
    for field, a, b in zip(SCHEMA.fields, fast, general):
        assert a[3].tobytes() == b[3].tobytes(), field.name
    assert fast[SCHEMA.fields.index(SCHEMA.get("s_uint64"))][3] == 2**64 - 1


@pytest.mark.parametrize("value", [1.5, 2**8, -1, "x", np.float32(1), np.array([1])])
def test_the_fast_path_refuses_what_an_int_field_cannot_take_as_is(value):
    schema = TableSchema("t", normalize_fields([("a", "uint8", ())]))
    column = np.zeros(2, np.uint8)
    write = compile_row_writer(schema.fields, [column])
    assert not write({"a": value}, 0)
    assert write({"a": 255}, 1) and column[1] == 255


def test_writers_of_one_layout_write_only_into_their_own_columns():
    """A Writer's staging slots share one compiled source, each bound to its own columns:
    a row written through one slot's function lands in that slot's columns alone."""
    slots = [columns() for _ in range(3)]
    writers = [compile_row_writer(SCHEMA.fields, slot) for slot in slots]
    item = {f.name: (np.full(f.shape, 1, f.dtype) if f.shape
                     else True if f.dtype.kind == "b" else 1) for f in SCHEMA.fields}
    assert writers[1](item, 5)
    for k, slot in enumerate(slots):
        written = [bool(column[5].any()) for column in slot]
        assert written == [k == 1] * len(slot), f"slot {k}"
