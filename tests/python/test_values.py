"""Published values (docs/VALUES.md): Client.publish / Client.fetch against the real server,
over both transports, with the budgets of the server's config and the torch helpers."""
from __future__ import annotations

import io
import itertools
import json
import tempfile
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest

import replayd
from replayd import cli
from replayd.connection import Connection

_NAMES = itertools.count()


@pytest.fixture
def value_name(request: pytest.FixtureRequest) -> str:
    """A value name unique in the session (values live as long as the server)."""
    base = "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:60]
    return f"{base}.{next(_NAMES)}"


def config_file(config: Dict[str, Any]) -> str:
    path = Path(tempfile.mkdtemp(prefix="replayd-config-")) / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def assert_same_arrays(got: Dict[str, np.ndarray], expected: Dict[str, Any]) -> None:
    assert list(got) == list(expected)
    for key, array in expected.items():
        array = np.asarray(array)
        assert got[key].dtype == array.dtype, key
        assert got[key].shape == array.shape, key
        np.testing.assert_array_equal(got[key], array, err_msg=key)


def several_arrays(seed: int) -> Dict[str, Any]:
    rng = np.random.default_rng(seed)
    return {
        "w": rng.standard_normal((33, 7)).astype(np.float32),
        "b": rng.standard_normal(5),                                   # float64
        "scalar": np.array(3.25, dtype=np.float16),                    # 0-d
        "steps": np.int64(1234567890123),                              # numpy scalar
        "empty": np.zeros((0, 4), dtype=np.int32),                     # no bytes
        "mask": rng.random(13) > 0.5,                                  # bool, odd size
        "odd": np.arange(3, dtype=np.uint8),                           # needs padding
        "strided": np.arange(40, dtype=np.int16).reshape(8, 5)[:, ::2],  # not contiguous
        "big_endian": np.arange(6, dtype=">u4"),
        "u64": np.array([2**64 - 1, 0], dtype=np.uint64),
    }


def expected_of(arrays: Dict[str, Any]) -> Dict[str, np.ndarray]:
    """What a fetch gives back for `arrays`: the same values, little-endian."""
    result = {}
    for key, array in arrays.items():
        array = np.asarray(array)
        result[key] = array.astype(array.dtype.newbyteorder("<"))
    return result


def test_a_published_value_is_fetched_with_its_dtypes_and_shapes(client, value_name):
    arrays = several_arrays(0)
    version = client.publish(value_name, arrays)
    assert version == 1
    fetched_version, fetched = client.fetch(value_name, timeout=0)
    assert fetched_version == 1
    assert fetched is not None
    assert_same_arrays(fetched, expected_of(arrays))
    assert fetched["scalar"].shape == () and fetched["empty"].shape == (0, 4)


def test_fetched_arrays_view_one_writable_payload(client, value_name):
    client.publish(value_name, {"a": np.arange(10.0), "b": np.ones(3, np.int32)})
    _, fetched = client.fetch(value_name)
    assert fetched is not None
    assert all(not a.flags.owndata and a.flags.writeable for a in fetched.values())
    assert root_of(fetched["a"]) is root_of(fetched["b"])


def root_of(array: np.ndarray) -> Any:
    """The object whose memory `array` views, through any chain of views."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def test_versions_increase_by_one_and_shapes_may_change(client, value_name):
    first = {"w": np.ones((2, 3), np.float32)}
    second = {"w": np.arange(12, dtype=np.float64).reshape(4, 3), "extra": np.int8(7)}
    third = {"only": np.arange(5, dtype=np.uint16)}
    assert [client.publish(value_name, v) for v in (first, second, third)] == [1, 2, 3]
    for newer_than, expected in ((None, third), (0, third), (2, third)):
        version, fetched = client.fetch(value_name, newer_than=newer_than, timeout=0)
        assert version == 3 and fetched is not None
        assert_same_arrays(fetched, expected)


def test_an_explicit_version_may_skip_ahead_but_never_go_back(client, value_name):
    assert client.publish(value_name, {"x": np.zeros(1)}, version=10) == 10
    assert client.publish(value_name, {"x": np.ones(1)}) == 11
    for stale in (11, 5):
        with pytest.raises(replayd.InvalidArgument) as refused:
            client.publish(value_name, {"x": np.full(1, 2.0)}, version=stale)
        assert str(stale) in refused.value.message and "11" in refused.value.message
    version, fetched = client.fetch(value_name, timeout=0)
    assert version == 11 and fetched is not None and fetched["x"][0] == 1.0
    assert client.publish(value_name, {"x": np.zeros(1)}, version=12) == 12


def test_fetch_of_an_older_version_returns_at_once(client, value_name):
    client.publish(value_name, {"x": np.arange(4)})
    client.publish(value_name, {"x": np.arange(5)})
    started = time.monotonic()
    version, fetched = client.fetch(value_name, newer_than=1, timeout=20)
    assert time.monotonic() - started < 5
    assert version == 2 and fetched is not None and fetched["x"].shape == (5,)


def test_fetch_waits_on_the_server_until_a_newer_version_is_published(client, address,
                                                                      value_name):
    client.publish(value_name, {"x": np.zeros(3)})
    result: List[Any] = []
    waiter = threading.Thread(target=lambda: result.append(
        client.fetch(value_name, newer_than=1, timeout=30)))
    waiter.start()
    time.sleep(0.3)
    assert not result, "fetch returned before a newer version existed"
    with replayd.Client(address, timeout=30) as publisher:
        publisher.publish(value_name, {"x": np.full(3, 7.0)})
    waiter.join(10)
    assert not waiter.is_alive()
    version, fetched = result[0]
    assert version == 2 and fetched is not None and list(fetched["x"]) == [7.0] * 3


def test_fetch_without_a_newer_version_returns_the_current_one_without_bytes(
        client, value_name):
    client.publish(value_name, {"x": np.zeros(1 << 16)})
    started = time.monotonic()
    assert client.fetch(value_name, newer_than=1, timeout=0.3) == (1, None)
    waited = time.monotonic() - started
    assert 0.25 <= waited < 2.5, waited
    assert client.fetch(value_name, newer_than=1, timeout=0) == (1, None)
    # On the wire: the unchanged reply carries no payload at all.
    conn = client.connection()
    meta, payload = conn.call({"op": "fetch", "name": value_name, "newer_than": 1,
                               "timeout_ms": 0},
                              decode=lambda m, p: (m, p), timeout=10)
    assert meta["changed"] is False and meta["version"] == 1 and payload.nbytes == 0


def test_a_fetch_waiting_before_the_first_publish_gets_it(client, address, value_name):
    assert client.fetch(value_name, timeout=0) == (None, None)
    result: List[Any] = []
    waiter = threading.Thread(target=lambda: result.append(
        client.fetch(value_name, timeout=30)))
    waiter.start()
    time.sleep(0.3)
    assert not result
    with replayd.Client(address, timeout=30) as publisher:
        assert publisher.publish(value_name, {"first": np.arange(3, dtype=np.int32)}) == 1
    waiter.join(10)
    version, fetched = result[0]
    assert version == 1 and fetched is not None and list(fetched["first"]) == [0, 1, 2]


def test_a_large_value_is_sent_in_parts_and_arrives_whole(client, value_name):
    rng = np.random.default_rng(1)
    arrays = {"a": rng.integers(0, 2**31, size=(4, 1 << 22), dtype=np.int32),  # 64 MiB
              "tail": rng.standard_normal(1001).astype(np.float32)}
    assert client.publish(value_name, arrays) == 1
    version, fetched = client.fetch(value_name, timeout=0)
    assert version == 1 and fetched is not None
    assert_same_arrays(fetched, arrays)
    del fetched
    assert client.publish(value_name, {"a": np.zeros(1)}) == 2  # the server frees the 64 MiB


def test_parts_fit_a_small_max_frame_bytes(make_server):
    server = make_server(extra_args=["--config", config_file(
        {"limits": {"max_frame_bytes": 256 << 10}})])
    arrays = {"a": np.arange(1 << 20, dtype=np.float32),  # 4 MiB: 22 parts of 192 KiB
              "b": np.arange(7, dtype=np.int8)}
    with replayd.Client(server.tcp_address, timeout=30) as c:
        assert c.server["limits"]["max_frame_bytes"] == 256 << 10
        assert c.publish("big", arrays) == 1
        version, fetched = c.fetch("big", timeout=0)
    assert version == 1 and fetched is not None
    assert_same_arrays(fetched, arrays)


def test_other_clients_are_served_while_a_large_value_is_published(make_server, value_name):
    server = make_server()
    arrays = {"w": np.ones(1 << 26, dtype=np.float32)}  # 256 MiB
    errors: List[BaseException] = []

    def publish() -> None:
        try:
            with replayd.Client(server.unix_address, timeout=60) as publisher:
                publisher.publish(value_name, arrays)
        except BaseException as exc:  # reported below
            errors.append(exc)

    with replayd.Client(server.tcp_address, timeout=30) as other:
        other.ping()
        publisher = threading.Thread(target=publish)
        publisher.start()
        latencies = []
        while publisher.is_alive():
            started = time.monotonic()
            other.ping()
            latencies.append(time.monotonic() - started)
        publisher.join()
        assert not errors, errors
        assert latencies, "the publish ended before a single ping"
        # Served between the parts, not after the whole value: most pings come back at once
        # (a loaded machine may delay a few; a server held by the publish delays them all).
        assert len(latencies) >= 5, latencies
        assert sorted(latencies)[len(latencies) // 2] < 0.1, sorted(latencies)[-5:]
        assert other.fetch(value_name, newer_than=1, timeout=0) == (1, None)


def test_refused_arrays_name_the_problem(client, value_name):
    with pytest.raises(replayd.InvalidArgument, match="'objects' has dtype object"):
        client.publish(value_name, {"objects": np.array([{}, None], dtype=object)})
    with pytest.raises(replayd.InvalidArgument, match="array names must be str"):
        client.publish(value_name, {1: np.zeros(1)})  # type: ignore[dict-item]
    with pytest.raises(replayd.InvalidArgument, match="mapping"):
        client.publish(value_name, [np.zeros(1)])  # type: ignore[arg-type]
    with pytest.raises(replayd.InvalidArgument, match="version must be an int"):
        client.publish(value_name, {"x": np.zeros(1)}, version=1.5)  # type: ignore[arg-type]
    with pytest.raises(replayd.InvalidArgument, match="1 to 4096 arrays"):
        client.publish(value_name, {})  # the server's words
    with pytest.raises(replayd.InvalidArgument, match="not a value name"):
        client.publish("no spaces here", {"x": np.zeros(1)})
    assert client.fetch(value_name, timeout=0) == (None, None)
    client.ping()  # refused before anything was sent: the connection is fine


def test_budgets_are_refused_with_the_servers_message(make_server):
    server = make_server(extra_args=["--config", config_file(
        {"limits": {"max_value_bytes": 4096, "max_values": 2}})])
    with replayd.Client(server.unix_address, timeout=30) as c:
        with pytest.raises(replayd.ResourceExhausted, match="max_value_bytes"):
            c.publish("too_big", {"w": np.zeros(513, np.float64)})
        assert c.publish("a", {"w": np.zeros(512, np.float64)}) == 1  # 4096 bytes: fits
        assert c.publish("b", {"w": np.zeros(8, np.float64)}) == 1
        with pytest.raises(replayd.ResourceExhausted, match="max_values"):
            c.publish("c", {"w": np.zeros(8, np.float64)})
        assert c.publish("a", {"w": np.ones(8, np.float64)}) == 2  # a held name may go on
        conn = c.connection()
        c.ping()
        assert c.connection() is conn  # a refused publish_begin keeps the connection


def value_bytes(c: replayd.Client) -> Any:
    """The bytes of every value the server reports, or None when it reports none."""
    values = c.info()["server"].get("values")
    return None if values is None else sum(v["bytes"] for v in values)


def publish_once_freed(c: replayd.Client, name: str, arrays: Dict[str, Any]) -> int:
    """Publishes, retrying for up to 10 s while the budget is exhausted: the server frees a
    closed connection's upload when it reads the close, which may come after a request
    on another connection."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return c.publish(name, arrays)
        except replayd.ResourceExhausted:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_an_unfinished_upload_is_dropped_when_its_connection_closes(make_server):
    server = make_server(extra_args=["--config", config_file(
        {"limits": {"max_values_bytes": 1 << 20}})])
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.publish("held", {"w": np.zeros(1 << 15, np.uint8)})  # 32 KiB
        held = value_bytes(c)
        conn = Connection.open(replayd.parse_address(server.unix_address), timeout=30)
        try:
            reply = conn.call({"op": "publish_begin", "name": "big", "version": None,
                               "arrays": [{"name": "w", "dtype": "uint8",
                                           "shape": [800 << 10]}]}, timeout=30)
            conn.call({"op": "publish_part", "upload": reply["upload"], "offset": 0},
                      [np.zeros(1 << 16, np.uint8)], timeout=30)
            with pytest.raises(replayd.ResourceExhausted, match="max_values_bytes"):
                c.publish("other", {"w": np.zeros(400 << 10, np.uint8)})
        finally:
            conn.close()
        assert publish_once_freed(c, "other", {"w": np.zeros(400 << 10, np.uint8)}) == 1
        assert c.fetch("big", timeout=0) == (None, None)
        if held is None:
            pytest.skip("the server's info() reports no values yet: their bytes unchecked")
        assert value_bytes(c) == held + (400 << 10)


def test_unix_and_tcp_give_identical_values(server, value_name):
    arrays = several_arrays(2)
    with replayd.Client(server.unix_address, timeout=30) as unix, \
            replayd.Client(server.tcp_address, timeout=30) as tcp:
        assert unix.publish(value_name, arrays) == 1
        assert tcp.publish(value_name + "-tcp", arrays) == 1
        results = [c.fetch(n, timeout=0) for c in (unix, tcp)
                   for n in (value_name, value_name + "-tcp")]
    for version, fetched in results:
        assert version == 1 and fetched is not None
        assert_same_arrays(fetched, expected_of(arrays))
        assert fetched.keys() == results[0][1].keys()  # type: ignore[union-attr]
        for key in fetched:
            assert fetched[key].tobytes() == results[0][1][key].tobytes()  # type: ignore[index]


def test_sharded_client_publishes_and_fetches_on_shard_zero(make_server):
    first, second = make_server(), make_server()
    with replayd.ShardedClient([first.unix_address, second.unix_address], timeout=30) as sc:
        assert sc.publish("policy", {"w": np.arange(3.0)}) == 1
        version, fetched = sc.fetch("policy", timeout=0)
        assert version == 1 and fetched is not None and list(fetched["w"]) == [0.0, 1.0, 2.0]
    with replayd.Client(first.unix_address, timeout=30) as c:
        assert c.fetch("policy", timeout=0)[0] == 1
    with replayd.Client(second.unix_address, timeout=30) as c:
        assert c.fetch("policy", timeout=0) == (None, None)


def test_status_lists_published_values(server, value_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.publish(value_name, {"w": np.zeros(10, np.float32), "b": np.zeros(2)})
        if c.info()["server"].get("values") is None:
            pytest.skip("the server's info() reports no values yet")
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["status", server.unix_address, "--interval", "0"]) == 0
    line = next(line for line in out.getvalue().splitlines() if value_name in line)
    assert "version 1" in line and "56 bytes in 2 arrays" in line, line


def test_torch_helpers_load_a_published_module(client, value_name):
    torch = pytest.importorskip("torch")
    from replayd.torch import load_latest, publish_module

    torch.manual_seed(0)
    learner = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8),
                                  torch.nn.Linear(8, 2))
    learner(torch.randn(16, 4))  # BatchNorm statistics and its 0-d step count change
    explorer = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8),
                                   torch.nn.Linear(8, 2))
    assert load_latest(client, value_name, explorer) is None  # nothing published yet
    version = publish_module(client, value_name, learner)
    assert load_latest(client, value_name, explorer) == version == 1
    for (key, want), got in zip(learner.state_dict().items(), explorer.state_dict().values()):
        assert torch.equal(want, got), key
    assert load_latest(client, value_name, explorer, newer_than=version) is None

    with pytest.raises(replayd.InvalidArgument, match="'half' .*bfloat16"):
        client.publish(value_name, {"half": torch.zeros(2, dtype=torch.bfloat16)})

    other = torch.nn.Linear(4, 3)
    before = {k: v.clone() for k, v in other.state_dict().items()}
    with pytest.raises(replayd.InvalidArgument, match="does not fit the module"):
        load_latest(client, value_name, other)
    assert all(torch.equal(before[k], v) for k, v in other.state_dict().items())


def test_a_publish_failing_after_it_began_frees_its_upload(make_server, monkeypatch):
    """A refused part leaves the upload held on the server; the client closes the connection
    so that the server drops it, and the budget is free again for the next publish."""
    from replayd import values

    server = make_server(extra_args=["--config", config_file(
        {"limits": {"max_values_bytes": 1 << 20}})])
    cut = values._parts

    def misplaced(arrays: Any, size: int) -> Any:
        parts = cut(arrays, size)
        return parts[:1] + [(offset + 8, pieces) for offset, pieces in parts[1:]]

    with replayd.Client(server.unix_address, timeout=30) as c:
        conn = c.connection()
        monkeypatch.setattr(values, "_parts", misplaced)
        monkeypatch.setattr(values, "part_bytes", lambda limits: 64 << 10)  # 10 parts
        with pytest.raises(replayd.InvalidArgument, match="offset"):
            c.publish("w", {"w": np.zeros(600 << 10, np.uint8)})
        monkeypatch.undo()
        assert not conn.alive
        assert publish_once_freed(c, "w", {"w": np.ones(600 << 10, np.uint8)}) == 1
        version, fetched = c.fetch("w", timeout=0)
        assert version == 1 and fetched is not None and int(fetched["w"].sum()) == 600 << 10
