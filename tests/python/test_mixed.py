"""Mixed batches (docs/MIXED.md): one sampling call over several tables, a share each,
against the real server over both transports (Unix: the shared-memory plane; TCP: the
socket)."""
from __future__ import annotations

import itertools
import math
import threading
import time

import numpy as np
import pytest

import replayd
from replayd.mixed import Mix, split_counts

FIELDS = {"item": (np.int64, ()), "obs": (np.float32, 4)}
_NAMES = itertools.count()


@pytest.fixture
def make_table(server):
    """Creates tables with unique names (dropped at teardown): items 0..len(priorities)-1,
    obs filled with the item id, inserted with the given priorities."""
    made = []

    def make(client, priorities=None, *, size=None, sampler="uniform", alpha=1.0,
             fields=FIELDS, offset=0, capacity=10_000, **options):
        name = f"mixed-{next(_NAMES)}-{time.monotonic_ns() % 1_000_000}"
        client.create_table(name, fields, capacity, sampler=sampler, priority_exponent=alpha,
                            **options)
        made.append(name)
        count = size if size is not None else (0 if priorities is None else len(priorities))
        if count:
            items = np.arange(count, dtype=np.int64) + offset
            data = {"item": items}
            if "obs" in fields:
                data["obs"] = np.repeat(items[:, None], fields["obs"][1], 1).astype(
                    fields["obs"][0])
            client.insert(name, data, priorities=priorities)
        return name

    yield make
    with replayd.Client(server.unix_address, timeout=30) as c:
        for name in made:
            try:
                c.drop_table(name)
            except replayd.NotFound:
                pass


def chi_square_critical(df: int, p: float = 1e-4) -> float:
    """The upper `p` quantile of the chi-square distribution with `df` degrees of freedom
    (Wilson-Hilferty; within a percent for df >= 10), z from the normal's tail."""
    z = _normal_upper_quantile(p)
    h = 2.0 / (9.0 * df)
    return df * (1.0 - h + z * math.sqrt(h)) ** 3


def _normal_upper_quantile(p: float) -> float:
    lo, hi = 0.0, 10.0
    for _ in range(100):  # bisection on the normal's upper tail, erfc(z / sqrt 2) / 2
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(mid / math.sqrt(2)) > p:
            lo = mid
        else:
            hi = mid
    return lo


def chi_square(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = probabilities * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def reference(priorities, alpha: float, beta: float):
    """p_i = prio_i^alpha / sum, w_i = (N p_i)^-beta / max_j (N p_j)^-beta."""
    mass = np.asarray(priorities, float) ** alpha
    p = mass / mass.sum()
    w = (len(p) * p) ** -beta
    return p, w / w.max()


# -- the split ---------------------------------------------------------------------------

def test_fractions_become_counts_by_largest_remainder_ties_in_the_order_given():
    assert split_counts([0.25, 0.75], 256) == [64, 192]
    assert split_counts([0.5, 0.5], 255) == [128, 127]       # a tie: the first given
    assert split_counts([0.5, 0.5], 1) == [1, 0]
    assert split_counts([1 / 3] * 3, 10) == [4, 3, 3]
    assert split_counts([0.1, 0.9], 256) == [26, 230]        # 25.6 / 230.4
    assert split_counts([0.7, 0.3], 10) == [7, 3]            # float error does not flip
    for n in range(0, 300, 7):
        counts = split_counts([0.2, 0.3, 0.5, 0.0], n)
        assert sum(counts) == n and counts[3] == 0


@pytest.mark.parametrize("bad, words", [
    ({}, "dict of table -> fraction"),
    ({"a": 0.5}, "sum to 1"),
    ({"a": 0.5, "b": 0.6}, "sum to 1"),
    ({"a": -0.5, "b": 1.5}, "'a' must be a finite number >= 0"),
    ({"a": float("nan"), "b": 1.0}, "finite"),
    ({"a": "half", "b": 0.5}, "finite"),
    (["a", "b"], "dict of table -> fraction"),
])
def test_bad_fractions_are_refused_naming_the_problem(client, make_table, bad, words):
    with pytest.raises(replayd.InvalidArgument, match=words):
        client.sample(bad, 8)
    with pytest.raises(replayd.InvalidArgument, match=words):
        Mix.of(bad)


# -- counts and distributions ---------------------------------------------------------------

@pytest.mark.parametrize("fractions", [(0.25, 0.75), (0.5, 0.5)])
def test_counts_are_exact_and_each_table_draws_by_its_own_distribution(client, make_table,
                                                                       fractions):
    uniform = make_table(client, size=50)
    priorities = np.linspace(0.5, 5.0, 40)
    prioritized = make_table(client, priorities, sampler="prioritized", alpha=1.0)
    mix = {uniform: fractions[0], prioritized: fractions[1]}
    expected_counts = split_counts(list(fractions), 256)
    counts = [np.zeros(50), np.zeros(40)]
    batches = 400                                            # 102,400 draws
    for _ in range(batches):
        batch = client.sample(mix, 256, beta=0.4)
        assert isinstance(batch, replayd.MixedSample)
        assert batch.tables == (uniform, prioritized)
        assert list(np.bincount(batch.table, minlength=2)) == expected_counts
        assert list(batch.counts) == expected_counts
        assert np.all(np.diff(batch.table) >= 0)             # rows grouped, in order given
        assert np.all(batch["obs"][:, 0] == batch["item"])   # rows and their own fields
        for index in range(2):
            counts[index] += np.bincount(batch["item"][batch.table == index],
                                         minlength=len(counts[index]))
    assert counts[0].sum() + counts[1].sum() == batches * 256
    assert chi_square(counts[0], np.full(50, 1 / 50)) < chi_square_critical(49)
    p, _ = reference(priorities, 1.0, 0.4)
    assert chi_square(counts[1], p) < chi_square_critical(39)


def test_probabilities_and_weights_are_each_tables_own(client, make_table):
    priorities = np.array([1.0, 2.0, 4.0, 8.0, 0.5, 3.0])
    alpha, beta = 0.6, 0.4
    prioritized = make_table(client, priorities, sampler="prioritized", alpha=alpha)
    uniform = make_table(client, size=10)
    p, w = reference(priorities, alpha, beta)
    for _ in range(20):
        batch = client.sample({prioritized: 0.5, uniform: 0.5}, 64, beta=beta)
        rows = batch.rows(prioritized)
        items = batch["item"][rows]
        np.testing.assert_allclose(batch.probabilities[rows], p[items], rtol=1e-9)
        np.testing.assert_allclose(batch.weights[rows], w[items], rtol=1e-9)
        demos = batch.rows(uniform)
        np.testing.assert_allclose(batch.probabilities[demos], 1 / 10, rtol=1e-12)
        assert np.all(batch.weights[demos] == 1.0)


def test_a_table_with_no_rows_is_not_requested(client, make_table):
    online = make_table(client, size=5)
    missing = f"mixed-absent-{next(_NAMES)}"
    client.create_table(missing, FIELDS, 10)     # empty: a request of it would wait
    try:
        batch = client.sample({online: 1.0, missing: 0.0}, 16, timeout=2)
        assert batch.counts == (16, 0) and batch.tables == (online, missing)
        assert np.all(batch.table == 0)
        assert client.table_info(missing)["counters"]["samples"] == 0
    finally:
        client.drop_table(missing)


# -- priority updates ------------------------------------------------------------------------

def test_one_call_updates_each_rows_priority_on_its_own_table(client, make_table):
    first_priorities = np.ones(20)
    second_priorities = np.ones(30)
    first = make_table(client, first_priorities, sampler="prioritized", alpha=1.0)
    second = make_table(client, second_priorities, sampler="prioritized", alpha=1.0)
    batch = client.sample({first: 0.5, second: 0.5}, 64)
    # A priority per row, its value telling which table and item it is meant for.
    new = np.where(batch.table == 0, 100.0 + batch["item"], 1000.0 + batch["item"])
    assert client.update_mixed_priorities(batch, new) == 0
    for index, (table, stored) in enumerate(((first, first_priorities),
                                             (second, second_priorities))):
        items = batch["item"][batch.table == index]
        stored[items] = (100.0 if index == 0 else 1000.0) + items
        exact = stored / stored.sum()
        check = client.sample(table, 512)
        np.testing.assert_allclose(check.probabilities, exact[check["item"]], rtol=1e-9)


def test_updates_of_a_batch_dict_route_by_its_table_entry(client, make_table):
    first = make_table(client, np.ones(4), sampler="prioritized")
    second = make_table(client, np.ones(4), sampler="prioritized")
    batch = client.sample({first: 0.5, second: 0.5}, 8)
    as_dict = {"keys": batch.keys.view(np.int64), "table": batch.table}
    assert client.update_mixed_priorities(as_dict, np.full(8, 2.0),
                                          tables=batch.tables) == 0
    with pytest.raises(replayd.InvalidArgument, match="tables="):
        client.update_mixed_priorities(as_dict, np.ones(8))
    with pytest.raises(replayd.InvalidArgument, match="one priority per row"):
        client.update_mixed_priorities(batch, np.ones(7))
    with pytest.raises(replayd.InvalidArgument, match="mixed sample"):
        client.update_mixed_priorities(client.sample(first, 4), np.ones(4))


# -- fields ---------------------------------------------------------------------------------

def test_tables_that_disagree_on_a_field_are_refused_naming_it_and_both(client, make_table):
    online = make_table(client, size=4)
    wide = make_table(client, size=4, fields={"item": (np.int64, ()), "obs": (np.float32, 8)})
    narrow = make_table(client, size=4, fields={"item": (np.int64, ())})
    with pytest.raises(replayd.InvalidArgument,
                       match=rf"field 'obs' is float32\[4\] in table '{online}' but "
                             rf"float32\[8\] in table '{wide}'"):
        client.sample({online: 0.5, wide: 0.5}, 8)
    with pytest.raises(replayd.InvalidArgument,
                       match=rf"field 'obs' is not in table '{narrow}'.*fields="):
        client.sample({online: 0.5, narrow: 0.5}, 8)
    with pytest.raises(replayd.InvalidArgument, match="field 'obs' is in table"):
        client.sample({narrow: 0.5, online: 0.5}, 8)
    with pytest.raises(replayd.InvalidArgument, match="field 'obs' is not in table"):
        client.sampler({online: 0.5, narrow: 0.5}, 8)
    before = client.table_info(online)["counters"]["samples"]
    batch = client.sample({online: 0.5, wide: 0.25, narrow: 0.25}, 8, fields=["item"])
    assert list(batch.data) == ["item"] and len(batch) == 8
    assert client.table_info(online)["counters"]["samples"] > before
    with pytest.raises(replayd.InvalidArgument, match="field 'act' is not in table"):
        client.sample({online: 0.5, wide: 0.5}, 8, fields=["act"])


def _reply(n, dim, base=0, fields=("item", "obs")):
    data = {"item": np.arange(n) + base, "obs": np.zeros((n, dim), np.float32)}
    return replayd.Sample({k: v for k, v in data.items() if k in fields},
                          np.arange(n, dtype=np.uint64), np.full(n, 0.1), np.ones(n),
                          np.ones(n, np.uint32))


def test_replies_that_disagree_on_a_field_are_refused_when_assembled():
    # Tables with frame fields are checked here, on their replies, not up front.
    from replayd.mixed_draw import assemble
    with pytest.raises(replayd.InvalidArgument,
                       match=r"field 'obs' is float32\[4\] in table 'a' but float32\[8\] in "
                             r"table 'b'"):
        assemble(None, ("a", "b"), [3, 2], [("a", 3, _reply(3, 4)), ("b", 2, _reply(2, 8))],
                 None, None)
    with pytest.raises(replayd.InvalidArgument,
                       match=r"field 'obs' is not in table 'a' \(table 'b' has it\)"):
        assemble(None, ("a", "b"), [3, 2], [("a", 3, _reply(3, 4, fields=("item",))),
                                            ("b", 2, _reply(2, 4))], None, None)
    batch = assemble(None, ("a", "b"), [3, 2], [("a", 3, _reply(3, 4)),
                                                ("b", 2, _reply(2, 8, base=10))], ["item"], None)
    assert batch["item"].tolist() == [0, 1, 2, 10, 11] and list(batch.data) == ["item"]


# -- waiting and failures -------------------------------------------------------------------

def test_the_call_returns_when_every_tables_share_arrived(client, make_table):
    online = make_table(client, size=8)
    demos = make_table(client, rate_limiter=replayd.MinSize(4))    # empty: its share waits
    result = {}
    thread = threading.Thread(target=lambda: result.update(
        batch=client.sample({online: 0.5, demos: 0.5}, 16, timeout=20)))
    thread.start()
    time.sleep(0.3)
    assert "batch" not in result
    client.insert(demos, {"item": np.arange(4) + 100, "obs": np.zeros((4, 4), np.float32)})
    thread.join(20)
    batch = result["batch"]
    assert batch.counts == (8, 8) and np.all(batch["item"][batch.rows(demos)] >= 100)


def test_a_failed_plain_batch_fails_the_call_and_draws_nothing(client, make_table):
    online = make_table(client, size=8)
    demos = make_table(client, rate_limiter=replayd.MinSize(4))    # never fills
    before = client.table_info(online)["counters"]["samples"]
    with pytest.raises(replayd.TimeoutError, match=f"table '{demos}'"):
        client.sample({online: 0.5, demos: 0.5}, 16, timeout=0.3)
    assert client.table_info(online)["counters"]["samples"] == before   # one request
    with pytest.raises(replayd.NotFound):
        client.sample({online: 0.5, "mixed-no-such-table": 0.5}, 16)
    assert client.sample(online, 4).keys.size == 4          # the connection is fine


# -- async, samplers, schedules ---------------------------------------------------------------

def test_sample_async_and_sampler_give_mixed_batches(client, make_table):
    online = make_table(client, size=30)
    demos = make_table(client, size=10, offset=1000)
    batch = client.sample_async({online: 0.75, demos: 0.25}, 32).result(30)
    assert batch.counts == (24, 8) and np.all(batch["item"][batch.rows(demos)] >= 1000)
    with client.sampler({online: 0.75, demos: 0.25}, 32, prefetch=3) as batches:
        for batch in itertools.islice(batches, 10):
            assert batch.counts == (24, 8)
            assert np.all(batch["item"][batch.rows(demos)] >= 1000)
            assert np.all(batch["item"][batch.rows(online)] < 1000)


def test_a_schedule_changes_the_counts_from_one_batch_to_the_next(client, make_table):
    online = make_table(client, size=30)
    demos = make_table(client, size=10, offset=1000)

    def anneal(batch: int):
        fraction = max(0.1, 0.5 - 0.1 * batch)
        return {online: 1 - fraction, demos: fraction}

    with client.sampler(anneal, 100, prefetch=2) as batches:
        seen = [batch.counts for batch in itertools.islice(batches, 7)]
    assert seen == [(50, 50), (60, 40), (70, 30), (80, 20), (90, 10), (90, 10), (90, 10)]
    with pytest.raises(replayd.InvalidArgument, match="same order"):
        with client.sampler(lambda i: {online: 1.0} if i else {online: 0.5, demos: 0.5},
                            4) as batches:
            next(batches)
            next(batches)


def test_the_plane_gathers_each_share_over_unix_and_the_socket_carries_it_over_tcp(
        client, make_table, transport):
    wide = {"item": (np.int64, ()), "obs": (np.float32, 1024)}     # 64 rows: 256 KiB
    online = make_table(client, size=30, fields=wide)
    demos = make_table(client, size=10, offset=1000, fields=wide)
    batch = client.sample({online: 0.5, demos: 0.5}, 64)
    assert np.all(batch["obs"][:, 0] == batch["item"])
    mapped = [client._planes.get(t) is not None for t in (online, demos)]
    assert mapped == ([True, True] if transport == "unix" else [False, False])
    # A batch of few bytes is copied through the socket: one gather per table costs more.
    small_online = make_table(client, size=30)
    small_demos = make_table(client, size=10, offset=1000)
    batch = client.sample({small_online: 0.5, small_demos: 0.5}, 64)
    assert np.all(batch["obs"][:, 0] == batch["item"]) and batch.counts == (32, 32)
    assert [client._planes.get(t) for t in (small_online, small_demos)] == [None, None]


# -- episodic tables: n-step, sequences, pixels ----------------------------------------------

STEP_FIELDS = {"obs": (np.float32, 2), "rew": (np.float32, ()), "next_obs": (np.float32, 2)}


def episodic(client, make_table, marker: float, episodes: int = 3, length: int = 12):
    name = make_table(client, fields=STEP_FIELDS, episodic=True)
    with client.episode_writer(name, envs=1, batch=16) as writer:
        for _ in range(episodes):
            for t in range(length):
                writer.append(obs=[marker, t], rew=1.0, next_obs=[marker, t + 1])
            writer.end_episode(terminated=True)
    return name


def test_nstep_samples_mix(client, make_table):
    first = episodic(client, make_table, 1.0)
    second = episodic(client, make_table, 2.0)
    batch = client.sample({first: 0.25, second: 0.75}, 64, nstep=3, gamma=0.5)
    assert batch.counts == (16, 48)
    assert set(batch.data) >= {"obs", "rew", "next_obs", "discount", "steps"}
    np.testing.assert_array_equal(batch["obs"][:, 0], np.where(batch.table == 0, 1.0, 2.0))
    assert batch["discount"].dtype == np.float32 and batch["steps"].dtype == np.int64
    with client.sampler({first: 0.5, second: 0.5}, 8, nstep=2) as nsteps:
        assert next(nsteps).counts == (4, 4)
    batch = client.sample({first: 0.5, second: 0.5}, 8, nstep=2, fields=["obs"])
    assert list(batch.data) == ["obs", "discount", "steps"]


def test_sequences_mix(client, make_table):
    first = episodic(client, make_table, 1.0)
    second = episodic(client, make_table, 2.0)
    batch = client.sample_sequences({first: 0.5, second: 0.5}, 8, 4, burn_in=2)
    assert batch.counts == (4, 4) and batch["obs"].shape == (8, 6, 2)
    assert batch.mask.shape == (8, 6)
    real = batch.mask.astype(bool)
    markers = np.where(batch.table == 0, 1.0, 2.0)[:, None].repeat(6, 1)
    np.testing.assert_array_equal(batch["obs"][..., 0][real], markers[real])
    batch = client.sample_sequences_async({first: 0.25, second: 0.75}, 8, 3).result(30)
    assert batch.counts == (2, 6)
    with client.sequence_sampler({first: 0.5, second: 0.5}, 4, 3) as sequences:
        assert next(sequences).counts == (2, 2)


def test_pixel_frame_tables_mix(client, make_table):
    pytest.importorskip("zstandard")
    fields = {"obs": (np.uint8, (8, 8)), "rew": (np.float32, ())}
    names = []
    for marker in (10, 20):
        name = make_table(client, fields=fields, episodic=True, next_of=["obs"],
                          stack={"obs": 4}, compression={"obs": ("zstd", 3)})
        with client.episode_writer(name) as writer:
            for t in range(10):
                writer.append(obs=np.full((8, 8), marker + t, np.uint8), rew=1.0)
            writer.end_episode(terminated=True, obs=np.full((8, 8), marker + 10, np.uint8))
        names.append(name)
    batch = client.sample({names[0]: 0.5, names[1]: 0.5}, 16)
    assert batch.counts == (8, 8)
    assert batch["obs"].shape == (16, 4, 8, 8) and batch["next_obs"].shape == (16, 4, 8, 8)
    newest = batch["obs"][:, -1, 0, 0].astype(int)
    assert np.all((newest >= 20) == (batch.table == 1))


# -- shards ---------------------------------------------------------------------------------

def test_sharded_client_draws_each_share_from_its_tables_union(make_server):
    servers = [make_server(tcp=False) for _ in range(2)]
    with replayd.ShardedClient([s.unix_address for s in servers], seed=3,
                               timeout=30) as shards:
        shards.create_table("online", FIELDS, 100, sampler="prioritized", priority_exponent=1.0)
        shards.create_table("demos", FIELDS, 100)
        for shard, base in zip(shards.shards, (0, 50)):
            items = np.arange(10) + base
            obs = np.repeat(items[:, None], 4, 1).astype(np.float32)
            shard.insert("online", {"item": items, "obs": obs}, priorities=np.ones(10))
            shard.insert("demos", {"item": items + 1000, "obs": obs + 1000})
        seen_shards = set()
        for _ in range(20):
            batch = shards.sample({"online": 0.75, "demos": 0.25}, 64)
            assert batch.counts == (48, 16)
            assert np.all(batch["item"][batch.rows("demos")] >= 1000)
            assert np.all(batch["item"][batch.rows("online")] < 1000)
            seen_shards |= set((batch.keys >> np.uint64(56)).tolist())
        assert seen_shards == {0, 1}
        with pytest.raises(replayd.InvalidArgument, match="fields= selects"):
            shards.sample("online", 4, fields=["item"])
        # Priorities routed by table and by shard: online's drawn items get 9.
        assert shards.update_mixed_priorities(batch, np.full(64, 9.0)) == 0
        online_items = set(batch["item"][batch.rows("online")].tolist())
        for shard, base in zip(shards.shards, (0, 50)):
            stored = np.array([9.0 if base + i in online_items else 1.0 for i in range(10)])
            check = shard.sample("online", 256)
            np.testing.assert_allclose(check.probabilities,
                                       (stored / stored.sum())[check["item"] - base])
        with shards.sampler(lambda i: {"online": 0.5, "demos": 0.5} if i == 0 else
                            {"online": 0.25, "demos": 0.75}, 8, prefetch=2) as batches:
            assert [b.counts for b in itertools.islice(batches, 3)] == [(4, 4), (2, 6), (2, 6)]


# -- torch ----------------------------------------------------------------------------------

def test_replay_dataset_mixes_with_a_schedule_and_routes_its_updates(client, make_table):
    torch = pytest.importorskip("torch")
    import replayd.torch
    first = make_table(client, np.ones(10), sampler="prioritized")
    second = make_table(client, np.ones(10), sampler="prioritized", offset=100)
    dataset = replayd.torch.ReplayDataset(
        client, lambda i: {first: 0.5, second: 0.5} if i < 2 else {first: 0.25, second: 0.75},
        8, prefetch=1, num_batches=4)
    batches = list(dataset)
    assert [torch.bincount(b["table"], minlength=2).tolist() for b in batches] == \
        [[4, 4], [4, 4], [2, 6], [2, 6]]
    batch = batches[-1]
    assert dataset.tables == (first, second)
    assert torch.all((batch["item"] >= 100) == (batch["table"] == 1))
    assert dataset.update_priorities(batch["keys"], torch.full((8,), 3.0),
                                     table=batch["table"]) == 0
    with pytest.raises(replayd.InvalidArgument, match="table=batch"):
        dataset.update_priorities(batch["keys"], torch.ones(8))
    items = set(batch["item"][batch["table"] == 1].tolist())
    check = client.sample(second, 256)
    stored = np.array([3.0 if 100 + i in items else 1.0 for i in range(10)])
    np.testing.assert_allclose(check.probabilities, (stored / stored.sum())[check["item"] - 100])


# -- one round trip ---------------------------------------------------------------------------

def test_a_plain_batch_is_one_request_and_priorities_one_write(
        client, make_table, monkeypatch):
    tables = [make_table(client, np.ones(20), sampler="prioritized") for _ in range(3)]
    mix = dict(zip(tables, (0.5, 0.25, 0.25)))
    batch = client.sample(mix, 64)                  # schemas read, tables mapped: warm
    conn = client.connection()
    events = []
    submit, submit_all, wait = conn.submit, conn.submit_all, conn.wait
    monkeypatch.setattr(conn, "submit", lambda *a, **k: events.append("send") or submit(*a, **k))
    monkeypatch.setattr(conn, "submit_all", lambda requests, **k: events.append(
        f"send {len(requests)}") or submit_all(requests, **k))
    monkeypatch.setattr(conn, "wait", lambda *a, **k: events.append("read") or wait(*a, **k))
    batch = client.sample(mix, 64)
    assert events == ["send", "read"] and batch.counts == (32, 16, 16)   # sample_mixed
    events.clear()
    client.update_mixed_priorities(batch, np.full(64, 2.0))
    assert events == ["send 3"] + ["read"] * 3


# -- rows overwritten under the copy ----------------------------------------------------------

def _hammer(address: str, table: str, seconds: float) -> int:
    """An explorer overwriting a small table's items as fast as it can (ids from 1000)."""
    with replayd.Client(address, timeout=60) as c:
        next_id, end = 1000, time.monotonic() + seconds
        with c.writer(table, batch=8, max_in_flight=4) as writer:
            while time.monotonic() < end:
                writer.append({"item": next_id, "obs": np.full(4, next_id, np.float32)})
                next_id += 1
    return next_id - 1000


def test_rows_overwritten_under_the_copy_are_drawn_again_from_their_own_table(
        server, make_table, monkeypatch):
    import multiprocessing
    monkeypatch.setattr(replayd.mixed_request, "PLANE_MIN_BATCH_BYTES", 0)  # small rows too
    with replayd.Client(server.unix_address, timeout=60, shm=True) as c:
        hammered = make_table(c, size=16, offset=1000, capacity=16)
        steady = make_table(c, size=50)
        writer = multiprocessing.get_context("fork").Process(
            target=_hammer, args=(server.unix_address, hammered, 3.0))
        writer.start()
        try:
            end = time.monotonic() + 2.5
            while time.monotonic() < end:
                batch = c.sample({hammered: 0.5, steady: 0.5}, 64)
                assert np.all(batch["obs"][:, 0] == batch["item"])      # whole rows
                assert np.all((batch["item"] >= 1000) == (batch.table == 0))
        finally:
            writer.join(30)
        assert c.plane_table(hammered).changed_rows > 0   # the race happened, was repaired


def test_fractions_summing_a_little_above_one_still_give_exactly_n_rows():
    from replayd.mixed import split_counts
    # Within the 1e-6 tolerance, the floors can add up to more than n: the excess leaves
    # the smallest remainders, as the C++ client's mixed_counts does.
    assert split_counts([0.5000004, 0.5000004], 10_000_000) == [5_000_000, 5_000_000]
    for n in range(0, 2000, 7):
        assert sum(split_counts([0.3333336, 0.3333336, 0.3333336], n)) == n
