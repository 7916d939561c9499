"""Column encoding/decoding and dtype conversion rules (no server)."""
from __future__ import annotations

import numpy as np
import pytest

from replayd import InvalidArgument, ProtocolError
from replayd.columns import convert_item, decode_keys, decode_sample, prepare_insert, \
    sample_layout
from replayd.schema import Field, TableSchema, wire_dtype

SCHEMA = TableSchema("replay", (Field("obs", wire_dtype("float32"), (4,)),
                                Field("act", wire_dtype("int64"), ()),
                                Field("small", wire_dtype("uint8"), (2,))))


def test_sample_layout_matches_the_protocol_example():
    # docs/PROTOCOL.md, sample reply for n=256 with obs float32[4] and act int64.
    fields = SCHEMA.fields[:2]
    layout = sample_layout(fields, 256)
    assert [(name, offset) for name, _, _, offset in layout] == [
        ("key", 0), ("probability", 2048), ("weight", 4096), ("times_sampled", 6144),
        ("obs", 7168), ("act", 11264)]


def test_odd_sizes_are_padded_in_the_layout():
    layout = sample_layout((Field("b", wire_dtype("bool"), (3,)),
                            Field("h", wire_dtype("float16"), ())), 3)
    offsets = [offset for *_, offset in layout]
    # keys 24 B, probability 24, weight 24, times_sampled 12 -> 16, b 9 -> 16, h at 104
    assert offsets == [0, 24, 48, 72, 88, 104]


def build_sample_reply(fields, n, rng):
    layout = sample_layout(fields, n)
    size = layout[-1][3] + int(np.prod(layout[-1][2])) * layout[-1][1].itemsize
    payload = np.zeros(size + (-size % 8), dtype=np.uint8)
    expected = {}
    columns = []
    for name, dtype, shape, offset in layout:
        values = rng.integers(0, 100, shape).astype(dtype)
        payload[offset:offset + values.nbytes] = np.frombuffer(values.tobytes(), np.uint8)
        expected.setdefault(name, values)
        columns.append({"name": name, "dtype": dtype.name, "shape": list(shape),
                        "offset": offset})
    return {"n": n, "columns": columns}, payload, expected


def test_sample_reply_is_viewed_in_place():
    meta, payload, expected = build_sample_reply(SCHEMA.fields, 5, np.random.default_rng(0))
    sample = decode_sample(meta, payload)
    assert list(sample.data) == ["obs", "act", "small"]
    for name in ("obs", "act", "small"):
        np.testing.assert_array_equal(sample.data[name], expected[name])
        assert np.shares_memory(sample.data[name], payload)
    np.testing.assert_array_equal(sample.keys, expected["key"])
    assert sample.keys.dtype == np.uint64 and sample.times_sampled.dtype == np.uint32
    assert np.shares_memory(sample.weights, payload)
    assert len(sample) == 5 and sample["obs"].shape == (5, 4)


def test_a_field_named_key_is_told_apart_by_position():
    fields = (Field("key", wire_dtype("int32"), ()),)
    meta, payload, _ = build_sample_reply(fields, 3, np.random.default_rng(0))
    sample = decode_sample(meta, payload)
    assert sample.data["key"].dtype == np.int32 and sample.keys.dtype == np.uint64


def test_a_column_outside_the_payload_is_a_protocol_error():
    meta, payload, _ = build_sample_reply(SCHEMA.fields, 5, np.random.default_rng(0))
    with pytest.raises(ProtocolError, match="spans"):
        decode_sample(meta, payload[:-16])
    meta["columns"][0]["name"] = "nope"
    with pytest.raises(ProtocolError, match="nope"):
        decode_sample(meta, payload)


def test_insert_reply_keys_are_uint64_views():
    payload = np.frombuffer(np.array([5, 9], "<u8").tobytes(), np.uint8).copy()
    keys = decode_keys({"n": 2}, payload)
    assert keys.dtype == np.uint64 and keys.tolist() == [5, 9]
    with pytest.raises(ProtocolError):
        decode_keys({"n": 3}, payload)


def test_a_single_item_gets_a_batch_dimension():
    batch = prepare_insert(SCHEMA, {"obs": np.zeros(4, np.float32), "act": 3,
                                    "small": np.array([1, 2], np.uint8)})
    assert batch.n == 1
    assert [c["shape"] for c in batch.columns] == [[1, 4], [1], [1, 2]]


def test_a_batch_keeps_its_shape_and_the_table_field_order():
    batch = prepare_insert(SCHEMA, {"small": np.zeros((3, 2), np.uint8),
                                    "act": np.arange(3), "obs": np.zeros((3, 4), np.float32)})
    assert batch.n == 3
    assert [c["name"] for c in batch.columns] == ["obs", "act", "small"]
    assert [c["dtype"] for c in batch.columns] == ["float32", "int64", "uint8"]


def test_safe_numpy_casts_are_applied():
    batch = prepare_insert(SCHEMA, {"obs": np.zeros((2, 4), np.float16),
                                    "act": np.arange(2, dtype=np.int8),
                                    "small": np.zeros((2, 2), np.bool_)})
    assert [a.dtype.name for a in batch.arrays] == ["float32", "int64", "uint8"]


def test_unsafe_numpy_casts_are_left_for_the_server_to_reject():
    batch = prepare_insert(SCHEMA, {"obs": np.zeros((2, 4), np.float64),
                                    "act": np.zeros(2, np.float32),
                                    "small": np.zeros((2, 2), np.int64)})
    assert [c["dtype"] for c in batch.columns] == ["float64", "float32", "int64"]


def test_python_values_convert_when_they_fit():
    batch = prepare_insert(SCHEMA, {"obs": [[0.5, 1, 2, 3]], "act": [7], "small": [[1, 255]]})
    assert [a.dtype.name for a in batch.arrays] == ["float32", "int64", "uint8"]
    assert batch.arrays[2].tolist() == [[1, 255]]


@pytest.mark.parametrize("value,kept", [([[1, 256]], "int64"), ([[1.5, 2.0]], "float64"),
                                        ([[-1, 0]], "int64")])
def test_python_values_that_do_not_fit_are_left_unconverted(value, kept):
    batch = prepare_insert(SCHEMA, {"obs": np.zeros(4, np.float32), "act": 1, "small": value})
    assert batch.columns[2]["dtype"] == kept


def test_python_floats_that_overflow_float16_are_not_converted():
    schema = TableSchema("t", (Field("h", wire_dtype("float16"), ()),))
    assert prepare_insert(schema, {"h": [1.0, 2.5]}).arrays[0].dtype == np.float16
    assert prepare_insert(schema, {"h": [1e10]}).arrays[0].dtype == np.float64


def test_big_endian_data_is_sent_little_endian():
    obs = np.arange(8, dtype=">f4").reshape(2, 4)
    batch = prepare_insert(SCHEMA, {"obs": obs, "act": np.arange(2), "small": [[1, 2]] * 2})
    assert batch.arrays[0].dtype == np.dtype("<f4")
    np.testing.assert_array_equal(batch.arrays[0], obs)


def test_unknown_fields_are_sent_after_the_known_ones():
    batch = prepare_insert(SCHEMA, {"extra": [1.0], "obs": np.zeros(4, np.float32)})
    assert [c["name"] for c in batch.columns] == ["obs", "extra"]


@pytest.mark.parametrize("value", [["a", "b"], np.zeros(2, np.complex64), [[1], [1, 2]],
                                   object()])
def test_values_no_wire_dtype_can_carry_are_rejected_naming_the_field(value):
    with pytest.raises(InvalidArgument, match="field 'act'"):
        prepare_insert(SCHEMA, {"obs": np.zeros(4, np.float32), "act": value,
                                "small": [1, 2]})


def test_priorities_must_match_the_batch():
    data = {"obs": np.zeros((3, 4), np.float32), "act": np.arange(3), "small": [[1, 2]] * 3}
    batch = prepare_insert(SCHEMA, data, priorities=[1, 2, 3])
    assert batch.priorities.dtype == np.float64 and batch.priorities.tolist() == [1, 2, 3]
    assert batch.buffers()[-1] is batch.priorities
    with pytest.raises(InvalidArgument, match="2 priorities for 3 items"):
        prepare_insert(SCHEMA, data, priorities=[1, 2])


def test_insert_data_must_be_a_non_empty_dict():
    with pytest.raises(InvalidArgument):
        prepare_insert(SCHEMA, [1, 2])
    with pytest.raises(InvalidArgument, match="no fields"):
        prepare_insert(SCHEMA, {})


def test_writer_items_are_checked_strictly():
    ok = convert_item(SCHEMA, {"obs": [0, 1, 2, 3], "act": 5, "small": [1, 2]})
    assert ok[0].dtype == np.float32 and ok[1] == 5 and ok[2].dtype == np.uint8
    with pytest.raises(InvalidArgument, match="does not fit the table's int64"):
        convert_item(SCHEMA, {"obs": [0, 1, 2, 3], "act": 2 ** 63, "small": [1, 2]})
    small = TableSchema("t", (Field("b", wire_dtype("uint8"), ()),
                              Field("h", wire_dtype("float16"), ())))
    assert convert_item(small, {"b": True, "h": 1e4}) == [True, 1e4]
    with pytest.raises(InvalidArgument, match="int 300 does not fit the table's uint8"):
        convert_item(small, {"b": 300, "h": 1.0})
    with pytest.raises(InvalidArgument, match="float 10000000000.0 does not fit"):
        convert_item(small, {"b": 1, "h": 1e10})
    with pytest.raises(InvalidArgument, match="float 0.5 does not fit"):
        convert_item(small, {"b": 0.5, "h": 1.0})
    good = {"obs": np.zeros(4, np.float32), "act": 1, "small": [1, 2]}
    with pytest.raises(InvalidArgument, match="unknown field 'x'"):
        convert_item(SCHEMA, {**good, "x": 1})
    with pytest.raises(InvalidArgument, match="field 'act' is missing"):
        convert_item(SCHEMA, {"obs": good["obs"], "small": [1, 2]})
    with pytest.raises(InvalidArgument, match="field 'obs': dtype float64"):
        convert_item(SCHEMA, {**good, "obs": np.zeros(4)})
    with pytest.raises(InvalidArgument, match=r"field 'obs': item shape \[5\]"):
        convert_item(SCHEMA, {**good, "obs": np.zeros(5, np.float32)})
