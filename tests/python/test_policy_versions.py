"""Policy versions from Python (docs/VERSIONS.md) against the real server: every write
path stamps the version (given, or the followed value's as the client last fetched or
published it), samples and read-backs return it, bounded samples draw exactly from the
eligible items, tables drop items behind the followed value, and restarts keep versions."""
from __future__ import annotations

import json
import pickle
import threading
import time
from typing import Dict

import numpy as np
import pytest

import replayd
import replayd.datasets as datasets
from replayd.cli import main as cli_main


def stored_versions(client: replayd.Client, table: str, page: int = 4096) -> Dict[int, int]:
    """key -> version of every stored item (read_items) or step (read_all)."""
    out: Dict[int, int] = {}
    episodic = bool(client.table_info(table)["description"].get("episodic"))
    pages = (client.read_all(table, page=page) if episodic
             else client.read_items(table, page=page))
    for page in pages:
        out.update(zip(page["key"].tolist(), page["version"].tolist()))
    return out


def x_items(n: int, start: int = 0) -> Dict[str, np.ndarray]:
    return {"x": np.arange(start, start + n, dtype=np.float32)}


# -- writes and read-backs ---------------------------------------------------------------


def test_every_write_path_stores_the_version_it_was_given(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 1000)
    k0 = client.insert(table_name, x_items(3))                             # none: 0
    k1 = client.insert(table_name, x_items(3), version=7)                  # one for all
    k2 = client.insert(table_name, x_items(3), version=[4, 5, 6])          # one per row
    k3 = client.insert(table_name, x_items(2), priorities=[1.0, 2.0],
                       version=np.array([8, 9], np.int64))                 # after priorities
    k4 = client.insert_async(table_name, x_items(2), version=11).result()
    with client.writer(table_name, batch=4, keep_keys=True) as writer:
        writer.append(x=1.0, version=12)
        writer.append(x=2.0, version=12)
        writer.append(x=3.0, version=13)  # a new version: the partial batch goes first
        writer.append(x=4.0, priority=2.0, version=13)
        writer.append(x=5.0)
        writer.flush()
        k5 = writer.keys
    with client.vector_writer(table_name, 3, keep_keys=True) as vector:
        vector.append(x=np.ones(3, np.float32), version=14)
        vector.flush()
        k6 = vector.keys
    versions = stored_versions(client, table_name)
    expect = {**dict.fromkeys(k0.tolist(), 0), **dict.fromkeys(k1.tolist(), 7),
              **dict(zip(k2.tolist(), [4, 5, 6])), **dict(zip(k3.tolist(), [8, 9])),
              **dict.fromkeys(k4.tolist(), 11),
              **dict(zip(k5.tolist(), [12, 12, 13, 13, 0])),
              **dict.fromkeys(k6.tolist(), 14)}
    assert versions == expect
    info = client.table_info(table_name)["versions"]
    assert (info["oldest"], info["newest"], info["policy_version"]) == (0, 14, None)
    # Samples carry the same versions, row by row.
    sample = client.sample(table_name, 200, versions=True)
    assert sample.versions.dtype == np.uint64
    assert sample.versions.tolist() == [versions[k] for k in sample.keys.tolist()]
    assert sample["version"] is sample.versions
    assert client.sample(table_name, 4).versions is None  # not asked: not sent


def test_large_inserts_split_into_requests_keep_each_rows_version(make_server, tmp_path):
    config = tmp_path / "limits.json"
    config.write_text(json.dumps({"limits": {"max_batch_items": 100}}))
    server = make_server(extra_args=["--config", str(config)])
    for address in (server.unix_address, server.tcp_address):
        with replayd.Client(address, timeout=30) as c:
            c.create_table("t", {"x": (np.float32, ())}, 1000)
            keys = c.insert("t", x_items(350), version=np.arange(350))
            more = c.insert_async("t", x_items(250), version=7).result()
            assert stored_versions(c, "t", page=100) == {**dict(zip(keys.tolist(), range(350))),
                                               **dict.fromkeys(more.tolist(), 7)}
            c.drop_table("t")


def test_episode_writers_store_each_steps_version(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ()), "rew": (np.float32, ())}, 1000,
                        episodic=True)
    with client.episode_writer(table_name, envs=2, batch=4, keep_keys=True) as writer:
        for t in range(3):
            writer.append(0, x=float(t), rew=0.0, version=3 + t)
            writer.append(1, x=float(t), rew=0.0)
        writer.end_episode(0)
        writer.flush()
        keys = writer.keys
    with client.vector_episode_writer(table_name, 2, keep_keys=True) as vector:
        vector.append(x=np.zeros(2, np.float32), rew=np.zeros(2, np.float32), version=9,
                      terminated=[True, True])
        vector.flush()
        vector_keys = vector.keys
    versions = stored_versions(client, table_name)
    assert [versions[k] for k in keys.tolist()] == [3, 0, 4, 0, 5, 0]
    assert [versions[k] for k in vector_keys.tolist()] == [9, 9]
    episodes = client.read_episodes(table_name)
    assert episodes["version"].dtype == np.uint64 and len(episodes["version"]) == 8


def test_writes_without_a_version_carry_the_followed_values_last_fetched_version(
        server, transport, table_name):
    value = f"{table_name}-policy"
    with replayd.Client(server.address(transport), timeout=30) as learner, \
            replayd.Client(server.address(transport), timeout=30) as actor:
        learner.create_table(table_name, {"x": (np.float32, ())}, 1000,
                             versions={"value": value})
        before = actor.insert(table_name, x_items(2))            # nothing fetched yet: 0
        assert learner.publish(value, {"w": np.zeros(3)}) == 1
        by_publisher = learner.insert(table_name, x_items(2))    # its own publish: 1
        learner.publish(value, {"w": np.ones(3)})                # version 2
        assert actor.policy_version(value) is None
        assert actor.fetch(value).version == 2
        fetched = actor.insert(table_name, x_items(2))           # fetched: 2
        explicit = actor.insert(table_name, x_items(2), version=1)  # given: wins
        learner.publish(value, {"w": np.ones(3)})                # version 3, not fetched
        stale = actor.insert(table_name, x_items(2))             # still 2
        nothing_new = actor.fetch(value, newer_than=3, timeout=0)
        assert nothing_new.arrays is None and actor.policy_version(value) == 2
        with actor.writer(table_name, batch=8, keep_keys=True) as writer:
            writer.append(x=1.0)
            actor.fetch(value)                                   # version 3
            writer.append(x=2.0)                                 # a new batch of version 3
            writer.flush()
            written = writer.keys
        unpickled = pickle.loads(pickle.dumps(actor))            # starts with none
        try:
            assert unpickled.policy_version(value) is None
            fresh = unpickled.insert(table_name, x_items(1))
        finally:
            unpickled.close()
        versions = stored_versions(learner, table_name)
    got = [versions[k] for keys in (before, by_publisher, fetched, explicit, stale, written,
                                    fresh) for k in keys.tolist()]
    assert got == [0, 0, 1, 1, 2, 2, 1, 1, 2, 2, 2, 3, 0]
    assert learner.table_info(table_name)["versions"]["policy_version"] == 3


def test_episode_writers_stamp_the_followed_value(client, table_name):
    value = f"{table_name}-policy"
    client.create_table(table_name, {"x": (np.float32, ()), "rew": (np.float32, ())}, 100,
                        episodic=True, versions={"value": value})
    client.publish(value, {"w": np.zeros(1)}, version=5)
    with client.episode_writer(table_name, keep_keys=True) as writer:
        writer.append(x=0.0, rew=0.0)
        writer.append(x=1.0, rew=0.0, version=4)
        writer.end_episode()
        writer.flush()
        keys = writer.keys
    versions = stored_versions(client, table_name)
    assert [versions[k] for k in keys.tolist()] == [5, 4]


def test_bad_versions_are_refused_before_anything_is_sent(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 100)
    with pytest.raises(replayd.InvalidArgument, match="2 versions for 3 rows"):
        client.insert(table_name, x_items(3), version=[1, 2])
    with pytest.raises(replayd.InvalidArgument, match="versions must be >= 0"):
        client.insert(table_name, x_items(2), version=[1, -2])
    with pytest.raises(replayd.InvalidArgument, match="version must be an int"):
        client.insert(table_name, x_items(1), version=-1)
    with pytest.raises(replayd.InvalidArgument, match="version must be an int"):
        client.insert(table_name, x_items(1), version=1.5)
    with client.writer(table_name) as writer:
        with pytest.raises(replayd.InvalidArgument, match="version must be an int"):
            writer.append(x=1.0, version=-3)
    assert client.size(table_name) == 0


# -- sampling ----------------------------------------------------------------------------


def test_plane_and_tcp_give_the_same_bounded_samples(server, table_name):
    """The same table (seed, items, versions) sampled over the Unix socket's plane (keys
    only, rows gathered here) and over TCP (rows in the reply): the same draws."""
    drawn = []
    for address in (server.unix_address, server.tcp_address):
        with replayd.Client(address, timeout=30) as c:
            c.create_table(table_name, {"x": (np.float32, ())}, 1000, sampler="prioritized",
                           seed=7)
            c.insert(table_name, x_items(300), priorities=np.linspace(0.1, 3, 300),
                     version=np.repeat(np.arange(10), 30))
            assert (c.plane_table(table_name) is not None) == address.startswith("unix")
            sample = c.sample(table_name, 500, min_version=6)
            drawn.append((sample["x"].copy(), sample.versions.copy(),
                          sample.probabilities.copy(), sample.weights.copy()))
            c.drop_table(table_name)
    (x_a, v_a, p_a, w_a), (x_b, v_b, p_b, w_b) = drawn
    assert np.array_equal(x_a, x_b) and np.array_equal(v_a, v_b)
    assert np.array_equal(p_a, p_b) and np.array_equal(w_a, w_b)
    assert v_a.min() >= 6 and np.array_equal(v_a, (x_a // 30).astype(np.uint64))


# Wilson-Hilferty: (X/k)^(1/3) is about normal with mean 1 - 2/(9k) and variance 2/(9k)
# for X chi-square with k degrees of freedom; z > 4.75 has probability about 1e-6. numpy
# only (no scipy), so the survival function is approximated this way.
CHI2_Z_LIMIT = 4.75


def chi_square_z(observed: np.ndarray, expected: np.ndarray) -> float:
    statistic = float(((observed - expected) ** 2 / expected).sum())
    k = len(observed) - 1
    return ((statistic / k) ** (1 / 3) - (1 - 2 / (9 * k))) / np.sqrt(2 / (9 * k))


def draws(client: replayd.Client, table: str, batches: int, n: int, **options):
    keys, probabilities, weights, versions = [], [], [], []
    for _ in range(batches):
        sample = client.sample(table, n, **options)
        keys.append(sample.keys.copy())
        probabilities.append(sample.probabilities.copy())
        weights.append(sample.weights.copy())
        versions.append(sample.versions.copy())
    return (np.concatenate(keys), np.concatenate(probabilities), np.concatenate(weights),
            np.concatenate(versions))


def test_min_version_draws_uniformly_from_the_eligible_items_only(server, table_name):
    with replayd.Client(server.unix_address, timeout=60) as c:
        c.create_table(table_name, {"x": (np.float32, ())}, 1000, seed=11)
        keys = c.insert(table_name, x_items(60), version=np.arange(60) % 10)
        eligible = keys[(np.arange(60) % 10) >= 7]  # versions 7, 8, 9: 18 items
        drawn, probabilities, weights, versions = draws(c, table_name, 100, 1000,
                                                        min_version=7)
    assert len(drawn) == 100_000
    assert versions.min() >= 7 and set(drawn.tolist()) <= set(eligible.tolist())
    counts = np.array([np.count_nonzero(drawn == k) for k in eligible], float)
    assert counts.sum() == len(drawn)
    assert chi_square_z(counts, np.full(len(eligible), len(drawn) / len(eligible))) \
        < CHI2_Z_LIMIT
    assert np.allclose(probabilities, 1 / len(eligible)) and np.all(weights == 1.0)


def test_min_version_draws_prioritized_over_the_eligible_items_only(server, table_name):
    alpha, beta = 0.7, 0.5
    rng = np.random.default_rng(3)
    priorities = rng.uniform(0.2, 5.0, 80)
    item_versions = rng.integers(0, 8, 80)
    with replayd.Client(server.unix_address, timeout=60) as c:
        c.create_table(table_name, {"x": (np.float32, ())}, 1000, sampler="prioritized",
                       priority_exponent=alpha, seed=5)
        keys = c.insert(table_name, x_items(80), priorities=priorities, version=item_versions)
        drawn, probabilities, weights, versions = draws(c, table_name, 100, 1000,
                                                        min_version=5, beta=beta)
        unbounded = c.sample(table_name, 1000, versions=True)
    eligible = item_versions >= 5
    mass = priorities[eligible] ** alpha
    expected_p = dict(zip(keys[eligible].tolist(), mass / mass.sum()))
    assert versions.min() >= 5 and set(drawn.tolist()) <= set(expected_p)
    counts = np.array([np.count_nonzero(drawn == k) for k in expected_p], float)
    p = np.array(list(expected_p.values()))
    assert chi_square_z(counts, p * len(drawn)) < CHI2_Z_LIMIT
    # The reported probability and weight of each draw: over the eligible items alone.
    want_p = np.array([expected_p[k] for k in drawn.tolist()])
    assert np.allclose(probabilities, want_p, rtol=1e-9)
    n_e = int(eligible.sum())
    want_w = (n_e * want_p) ** -beta / ((n_e * p.min()) ** -beta)
    assert np.allclose(weights, want_w, rtol=1e-9)
    # Unbounded, the same table draws every version (the bound made the difference).
    assert unbounded.versions.min() < 5


def test_max_staleness_counts_back_from_the_published_version(client, table_name):
    value, other = f"{table_name}-policy", f"{table_name}-other"
    client.create_table(table_name, {"x": (np.float32, ())}, 1000, versions={"value": value})
    client.insert(table_name, x_items(60), version=np.arange(60) % 6)  # versions 0..5
    unbounded = client.sample(table_name, 200, max_staleness=2)  # nothing published: no bound
    assert unbounded.min_version == 0 and unbounded.versions.min() == 0
    client.publish(value, {"w": np.zeros(1)}, version=3)
    sample = client.sample(table_name, 200, max_staleness=2)
    assert sample.min_version == 1 and sample.versions.min() >= 1
    client.publish(value, {"w": np.zeros(1)}, version=5)  # the bound moves with it
    sample = client.sample(table_name, 200, max_staleness=1)
    assert sample.min_version == 4 and set(sample.versions.tolist()) <= {4, 5}
    client.publish(other, {"w": np.zeros(1)}, version=4)  # relative to another value
    sample = client.sample(table_name, 200, max_staleness=0, value=other)
    assert sample.min_version == 4 and set(sample.versions.tolist()) <= {4, 5}
    assert client.sample_async(table_name, 50, max_staleness=0).result().min_version == 5
    staleness = client.table_info(table_name)["replay"]["sample_staleness_versions"]
    assert staleness["count"] > 0


def test_samplers_and_async_samples_keep_the_bound(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 1000)
    client.insert(table_name, x_items(100), version=np.arange(100) % 10)
    future = client.sample_async(table_name, 64, min_version=8)
    assert future.result().versions.min() >= 8
    with client.sampler(table_name, 32, prefetch=3, min_version=9) as sampler:
        for _ in range(10):
            batch = next(sampler)
            assert len(batch) == 32 and set(batch.versions.tolist()) == {9}
    with client.sampler(table_name, 16, versions=True) as sampler:
        assert next(sampler).versions is not None


def test_a_mixed_batch_with_a_bound_draws_each_table_within_it(client, table_name):
    a, b = table_name + "-a", table_name + "-b"
    for name in (a, b):
        client.create_table(name, {"x": (np.float32, ())}, 100)
        client.insert(name, x_items(40), version=np.arange(40) % 4)
    try:
        batch = client.sample({a: 0.5, b: 0.5}, 100, min_version=3)
        assert len(batch.versions) == 100 and set(batch.versions.tolist()) == {3}
        plain = client.sample({a: 0.5, b: 0.5}, 100)
        assert plain.versions is None
        later = client.sample_async({a: 0.25, b: 0.75}, 40, versions=True).result()
        assert set(later.versions.tolist()) <= {0, 1, 2, 3}
        with client.sampler({a: 0.5, b: 0.5}, 20, min_version=2) as sampler:
            assert next(sampler).versions.min() >= 2
    finally:
        for name in (a, b):
            client.drop_table(name)


def test_a_bounded_sample_waits_for_an_eligible_item(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 100)
    client.insert(table_name, x_items(10), version=1)
    started = time.monotonic()
    with pytest.raises(replayd.TimeoutError):
        client.sample(table_name, 4, min_version=5, timeout=0.3)
    assert time.monotonic() - started >= 0.25
    writer = threading.Timer(0.3, lambda: client.insert(table_name, x_items(1, 99),
                                                        version=5))
    writer.start()
    try:
        sample = client.sample(table_name, 4, min_version=5, timeout=20)
    finally:
        writer.join()
    assert sample["x"].tolist() == [99.0] * 4 and sample.versions.tolist() == [5] * 4


def test_bad_bounds_are_refused_with_clear_errors(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 100)
    client.insert(table_name, x_items(4))
    with pytest.raises(replayd.InvalidArgument, match="not both"):
        client.sample(table_name, 1, min_version=1, max_staleness=1)
    with pytest.raises(replayd.InvalidArgument, match="give max_staleness too"):
        client.sample(table_name, 1, value="policy")
    with pytest.raises(replayd.InvalidArgument, match="min_version must be an int"):
        client.sample(table_name, 1, min_version=-1)
    with pytest.raises(replayd.InvalidArgument, match="not to n-step"):
        client.sample(table_name, 1, nstep=2, min_version=1)
    with pytest.raises(replayd.InvalidArgument, match="not to n-step"):
        client.sampler(table_name, 1, nstep=2, versions=True)


def test_the_server_refuses_bounds_where_they_cannot_be_exact(client, table_name):
    retiring, episodic = table_name + "-once", table_name + "-steps"
    client.create_table(retiring, {"x": (np.float32, ())}, 100, max_times_sampled=1)
    client.create_table(episodic, {"x": (np.float32, ()), "rew": (np.float32, ())}, 100,
                        episodic=True)
    try:
        client.insert(retiring, x_items(4), version=3)
        with pytest.raises(replayd.ReplayError, match="max_times_sampled"):
            client.sample(retiring, 1, min_version=1, timeout=1)
        assert client.size(retiring) == 4  # nothing drawn, nothing retired
        with client.episode_writer(episodic) as writer:
            for t in range(3):
                writer.append(x=float(t), rew=1.0)
            writer.end_episode()
        with pytest.raises(replayd.InvalidArgument, match="not to n-step"):
            client.sample(episodic, 1, nstep=1, min_version=1)  # refused here
        with pytest.raises(replayd.InvalidArgument, match="version"):  # and by the server
            client._call({"op": "sample", "table": episodic, "n": 1, "nstep": 1,
                          "gamma": 1.0, "min_version": 1, "timeout_ms": 1000})
    finally:
        client.drop_table(retiring)
        client.drop_table(episodic)


def test_a_bound_on_a_table_with_max_times_sampled_is_refused_naming_it(client, table_name):
    client.create_table(table_name, {"x": (np.float32, ())}, 100, max_times_sampled=1)
    client.insert(table_name, x_items(4), version=3)
    with pytest.raises(replayd.InvalidArgument, match="max_times_sampled"):
        client.sample(table_name, 1, min_version=1, timeout=1)
    assert client.sample(table_name, 1, timeout=1).keys.shape == (1,)  # unbounded: drawn


# -- tables that follow a value ------------------------------------------------------------


def test_drop_behind_removes_items_once_the_version_passes(client, table_name):
    value = f"{table_name}-policy"
    client.create_table(table_name, {"x": (np.float32, ())}, 1000,
                        versions={"value": value, "drop_behind": 1})
    client.insert(table_name, x_items(20), version=np.repeat([1, 2, 3, 4], 5))
    client.publish(value, {"w": np.zeros(1)}, version=2)  # drops < 1: nothing
    assert client.size(table_name) == 20
    client.publish(value, {"w": np.zeros(1)}, version=4)  # drops < 3
    info = client.table_info(table_name)
    assert info["size"] == 10
    assert info["versions"] == {"policy_version": 4, "oldest": 3, "newest": 4, "distinct": 2,
                                "dropped": 10}
    assert sorted(set(stored_versions(client, table_name).values())) == [3, 4]


def test_a_restart_from_the_data_dir_keeps_every_items_version(make_server, tmp_path):
    server = make_server(extra_args=["--data-dir", str(tmp_path / "data")])
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("t", {"x": (np.float32, ())}, 100, versions={"value": "policy"})
        c.create_table("e", {"x": (np.float32, ()), "rew": (np.float32, ())}, 100,
                       episodic=True)
        c.insert("t", x_items(6), version=[1, 2, 3, 4, 5, 6])
        with c.episode_writer("e") as writer:
            writer.append(x=0.0, rew=0.0, version=8)
            writer.append(x=1.0, rew=0.0, version=9)
            writer.end_episode()
        c.publish("policy", {"w": np.zeros(1)}, version=6)
        before = stored_versions(c, "t"), stored_versions(c, "e")
    server.stop()
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        assert (stored_versions(c, "t"), stored_versions(c, "e")) == before
        assert sorted(before[0].values()) == [1, 2, 3, 4, 5, 6]
        assert c.sample("t", 50, min_version=5).versions.min() >= 5


def test_status_shows_the_policy_version_and_staleness(capsys, server, client, table_name):
    value = f"{table_name}-policy"
    assert cli_main(["create-table", server.unix_address, table_name, "--field", "x:float32",
                     "--capacity", "100", "--follow-value", value, "--drop-behind", "3"]) == 0
    with pytest.raises(SystemExit) as usage:
        cli_main(["create-table", server.unix_address, table_name + "-x", "--field",
                  "x:float32", "--capacity", "100", "--drop-behind", "3"])
    assert usage.value.code == 2
    assert "give --follow-value too" in capsys.readouterr().err
    assert client.table_info(table_name)["description"]["versions"] == {
        "value": value, "drop_behind": 3}
    client.insert(table_name, x_items(10), version=np.arange(10) % 5 + 1)
    client.publish(value, {"w": np.zeros(1)}, version=5)
    client.sample(table_name, 64)
    code = cli_main(["status", server.unix_address, "--interval", "0"])
    out = capsys.readouterr().out
    assert code == 0
    assert (f"policy version: 5 (follows '{value}', drops items more than 3 behind); "
            "stored versions 2..5 (4 distinct), 2 items dropped behind") in out
    assert "sample staleness: p50 " in out


# -- datasets ------------------------------------------------------------------------------


def test_exports_keep_each_steps_version_and_loads_read_it_back(server, table_name, tmp_path):
    pytest.importorskip("h5py")
    with replayd.Client(server.unix_address, timeout=60) as c:
        c.create_table(table_name, {"obs": (np.float32, (2,)), "act": (np.int64, ()),
                                    "rew": (np.float32, ())}, 1000, episodic=True,
                       next_of=["obs"])
        with c.episode_writer(table_name) as writer:
            for episode, length in enumerate((4, 3)):
                for t in range(length):
                    writer.append(obs=np.full(2, t, np.float32), act=t, rew=1.0,
                                  version=10 * episode + t)
                writer.end_episode(terminated=True, obs=np.zeros(2, np.float32))
        wanted = [0, 1, 2, 3, 10, 11, 12]
        for fmt, path in (("d4rl", tmp_path / "out.hdf5"), ("minari", tmp_path / "minari")):
            datasets.export(c, table_name, str(path), format=fmt)
            loaded = f"{table_name}-{fmt}"
            datasets.load(c, loaded, str(path))
            try:
                ragged = c.read_episodes(loaded)
                versions, offsets = ragged["version"], ragged["offsets"]
                # the steps' versions (each episode's final row, its last step's, left out)
                got = [int(v) for i in range(len(offsets) - 1)
                       for v in versions[offsets[i]:offsets[i + 1] - 1]]
                assert got == wanted, fmt
                assert "version" not in c.schema(loaded).names
            finally:
                c.drop_table(loaded)


def test_a_sharded_insert_stores_its_version_on_the_shard_it_goes_to(make_server):
    servers = [make_server(tcp=False) for _ in range(2)]
    with replayd.ShardedClient([s.unix_address for s in servers], timeout=30) as shards:
        shards.create_table("t", {"x": (np.float32, ())}, 100)
        shards.insert("t", x_items(3), version=4)
        shards.insert_async("t", x_items(2), version=[6, 7]).result()
        found = sorted(v for shard in shards.shards
                       for v in stored_versions(shard, "t").values())
    assert found == [4, 4, 4, 6, 7]
