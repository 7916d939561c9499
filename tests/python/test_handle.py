"""The handle's pure parts (no server): addresses, pickled state, errors, descriptions."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import replayd
from replayd.errors import error_from_reply
from replayd.schema import normalize_fields, table_description


@pytest.mark.parametrize("text,expected", [
    ("unix:///tmp/replayd.sock", ("unix", "/tmp/replayd.sock", "", 0)),
    ("tcp://127.0.0.1:7700", ("tcp", "", "127.0.0.1", 7700)),
    ("tcp://localhost:1", ("tcp", "", "localhost", 1)),
    ("tcp://[::1]:7700", ("tcp", "", "::1", 7700)),
])
def test_addresses_parse_and_print_back(text, expected):
    address = replayd.parse_address(text)
    assert (address.scheme, address.path, address.host, address.port) == expected
    assert str(address) == text


@pytest.mark.parametrize("text", ["/tmp/x.sock", "unix://", "tcp://host", "tcp://:80",
                                  "tcp://h:99999", "tcp://h:x", "http://h:1"])
def test_bad_addresses_are_rejected_at_construction(text):
    with pytest.raises(ValueError):
        replayd.Client(text)


def test_a_client_pickles_as_address_and_options_only():
    client = replayd.Client("unix:///nonexistent/replayd.sock", timeout=2.5)
    state = client.__getstate__()
    assert state == {"address": "unix:///nonexistent/replayd.sock", "timeout": 2.5,
                     "name": "replayd-python"}
    data = pickle.dumps(client)
    assert len(data) < 300
    copy = pickle.loads(data)
    assert copy.address == client.address and copy.timeout == 2.5
    assert copy._conn is None  # connects lazily, at the first call


def test_an_unreachable_server_raises_connection_lost_naming_the_address():
    client = replayd.Client("unix:///nonexistent/replayd.sock", timeout=1)
    with pytest.raises(replayd.ConnectionLost, match="nonexistent"):
        client.ping()


def test_cloudpickle_round_trips_a_client_when_installed():
    cloudpickle = pytest.importorskip("cloudpickle")
    client = replayd.Client("tcp://127.0.0.1:7700", timeout=1)
    copy = pickle.loads(cloudpickle.dumps(client))
    assert copy.address == client.address


@pytest.mark.parametrize("code,cls", [
    ("invalid_argument", replayd.InvalidArgument), ("not_found", replayd.NotFound),
    ("already_exists", replayd.AlreadyExists), ("timeout", replayd.TimeoutError),
    ("resource_exhausted", replayd.ResourceExhausted),
    ("shutting_down", replayd.ShuttingDown), ("protocol_error", replayd.ProtocolError)])
def test_error_codes_map_to_exception_classes(code, cls):
    error = error_from_reply({"code": code, "message": "table 'x': something"})
    assert type(error) is cls and isinstance(error, replayd.ReplayError)
    assert error.code == code and error.message == "table 'x': something"
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and copy.code == code and copy.message == error.message


def test_unknown_error_codes_keep_code_and_message():
    error = error_from_reply({"code": "brand_new", "message": "m"})
    assert type(error) is replayd.ReplayError and error.code == "brand_new"


def test_errors_are_also_builtin_exception_kinds():
    assert issubclass(replayd.TimeoutError, TimeoutError)
    assert issubclass(replayd.InvalidArgument, ValueError)
    assert issubclass(replayd.NotFound, LookupError)
    assert issubclass(replayd.ConnectionLost, ConnectionError)


def test_fields_accept_a_dict_or_a_list():
    a = normalize_fields({"obs": (np.float32, 4), "act": ("int64", ()), "img": (np.uint8, (2, 3)),
                          "flag": (bool, None)})
    b = normalize_fields([("obs", "float32", [4]), ("act", np.int64, None),
                          ("img", "uint8", (2, 3)), ("flag", "bool", ())])
    assert a == b
    assert [(f.name, f.dtype.name, f.shape) for f in a] == [
        ("obs", "float32", (4,)), ("act", "int64", ()), ("img", "uint8", (2, 3)),
        ("flag", "bool", ())]


@pytest.mark.parametrize("fields,match", [({"x": (np.complex64, ())}, "field 'x'"),
                                          ({"x": np.float32}, "field 'x'"),
                                          ({}, "at least one")])
def test_bad_fields_are_rejected_naming_them(fields, match):
    with pytest.raises((TypeError, ValueError), match=match):
        normalize_fields(fields)


def test_table_description_json():
    description = table_description(
        "replay", {"obs": (np.float32, 4)}, 100, sampler="prioritized", priority_exponent=0.7,
        max_times_sampled=3, rate_limiter=replayd.SampleToInsertRatio(2.0, 10, 5.0), seed=7)
    assert description == {
        "name": "replay", "capacity": 100,
        "fields": [{"name": "obs", "dtype": "float32", "shape": [4]}],
        "sampler": {"kind": "prioritized", "priority_exponent": 0.7},
        "remover": "fifo", "max_times_sampled": 3,
        "rate_limiter": {"kind": "sample_to_insert_ratio", "samples_per_insert": 2.0,
                         "min_size_to_sample": 10, "error_buffer": 5.0},
        "seed": 7}
    assert "rate_limiter" not in table_description("t", {"x": ("int8", ())}, 1)
    assert table_description("t", {"x": ("int8", ())}, 1)["sampler"] == {"kind": "uniform"}


def test_rate_limiter_helpers_render_the_documented_json():
    assert replayd.MinSize(5).to_json() == {"kind": "min_size", "min_size_to_sample": 5}
    assert replayd.Queue(3).to_json() == {"kind": "queue", "size": 3}
    assert replayd.Custom(2.0, 4, None, 8).to_json() == {
        "kind": "custom", "samples_per_insert": 2.0, "min_size_to_sample": 4,
        "min_diff": None, "max_diff": 8.0}
