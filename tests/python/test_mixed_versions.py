"""Mixed batches under policy versions (docs/MIXED.md, docs/VERSIONS.md) against the real
server over both transports: ``versions=``, ``min_version=`` and ``max_staleness=`` on a
plain mixed batch go in the one ``sample_mixed`` request, each table's share drawn from its
own eligible items under its own resolved bound, and the request waits until every table
has its share of eligible items."""
from __future__ import annotations

import itertools
import threading
import time
from typing import Dict, List

import numpy as np
import pytest

import replayd

_NAMES = itertools.count()


@pytest.fixture
def tables(server):
    """Makes tables with unique names (dropped at teardown) holding items `ids` (field
    "item", and "obs" filled with the id) of the given versions."""
    made: List[str] = []

    def make(client, ids, item_versions, *, obs=4, **options):
        name = f"mixver-{next(_NAMES)}-{time.monotonic_ns() % 1_000_000}"
        client.create_table(name, {"item": (np.int64, ()), "obs": (np.float32, obs)},
                            10_000, **options)
        made.append(name)
        ids = np.asarray(ids, np.int64)
        client.insert(name, {"item": ids,
                             "obs": np.repeat(ids[:, None], obs, 1).astype(np.float32)},
                      version=np.asarray(item_versions, np.uint64))
        return name

    yield make
    with replayd.Client(server.unix_address, timeout=30) as c:
        for name in made:
            try:
                c.drop_table(name)
            except replayd.NotFound:
                pass


def count_requests(conn, monkeypatch) -> List[str]:
    """Records each request write ("send", or "send k" for k requests in one write) and
    each reply wait on `conn` (as tests/python/test_mixed.py does)."""
    events: List[str] = []
    submit, submit_all, wait = conn.submit, conn.submit_all, conn.wait
    monkeypatch.setattr(conn, "submit", lambda *a, **k: events.append("send") or submit(*a, **k))
    monkeypatch.setattr(conn, "submit_all", lambda requests, **k: events.append(
        f"send {len(requests)}") or submit_all(requests, **k))
    monkeypatch.setattr(conn, "wait", lambda *a, **k: events.append("read") or wait(*a, **k))
    return events


def version_of(ids_versions: Dict[int, int], items: np.ndarray) -> List[int]:
    return [ids_versions[int(i)] for i in items]


def test_a_bounded_mixed_batch_is_one_request_drawing_each_tables_eligible_items(
        client, tables, monkeypatch):
    # An offline table of version 0 that follows a value never published (its bound
    # resolves to 0: every item eligible) and an online table of versions 1..3 following a
    # policy at version 3: max_staleness=0 keeps the online share to version 3.
    policy = f"mixver-policy-{time.monotonic_ns()}"
    never = f"mixver-never-{time.monotonic_ns()}"
    offline = tables(client, np.arange(40), np.zeros(40), versions={"value": never})
    online_ids = np.arange(1000, 1030)
    online_versions = 1 + np.arange(30) % 3
    online = tables(client, online_ids, online_versions, versions={"value": policy})
    client.publish(policy, {"w": np.zeros(1)}, version=3)
    stored = dict(zip(online_ids.tolist(), online_versions.tolist()))
    stored.update({i: 0 for i in range(40)})
    mix = {offline: 0.5, online: 0.5}
    client.sample(mix, 64, max_staleness=0)              # schemas read: warm
    events = count_requests(client.connection(), monkeypatch)
    batch = client.sample(mix, 200, max_staleness=0)
    assert events == ["send", "read"]                     # one sample_mixed, one reply
    assert batch.counts == (100, 100) and batch.min_versions == (0, 3)
    assert batch.versions.dtype == np.uint64
    assert batch.versions.tolist() == version_of(stored, batch["item"])
    offline_rows, online_rows = batch["item"][:100], batch["item"][100:]
    assert set(offline_rows.tolist()) <= set(range(40)) and len(set(offline_rows)) > 20
    assert set(online_rows.tolist()) == {i for i, v in stored.items() if v == 3}
    assert np.all(batch["obs"][:, 0] == batch["item"])
    # Probabilities over the eligible items alone: 10 of the online table's 30.
    np.testing.assert_allclose(batch.probabilities[100:], 1 / 10)
    np.testing.assert_allclose(batch.probabilities[:100], 1 / 40)
    part = batch.part(online)
    assert part.min_version == 3 and set(part.versions.tolist()) == {3}

    events.clear()
    same = client.sample(mix, 50, min_version=0, beta=0.5)  # no bound, as for one table
    assert events == ["send", "read"] and same.min_versions == ()
    assert client.sample(online, 5, min_version=0).min_version is None
    assert same.versions.tolist() == version_of(stored, same["item"])
    events.clear()
    flagged = client.sample(mix, 50, versions=True)        # versions, no bound
    assert events == ["send", "read"] and flagged.min_versions == ()
    assert flagged.versions.tolist() == version_of(stored, flagged["item"])
    plain = client.sample(mix, 50)
    assert plain.versions is None and plain.min_versions == ()


def test_a_min_version_applies_to_every_table_and_rows_carry_their_versions(
        client, tables, monkeypatch):
    a = tables(client, np.arange(40), np.arange(40) % 4)
    b = tables(client, np.arange(100, 130), 1 + np.arange(30) % 3)
    stored = dict(zip(range(40), (np.arange(40) % 4).tolist()))
    stored.update(zip(range(100, 130), (1 + np.arange(30) % 3).tolist()))
    client.sample({a: 0.5, b: 0.5}, 10, min_version=3)
    events = count_requests(client.connection(), monkeypatch)
    batch = client.sample({a: 0.25, b: 0.75}, 80, min_version=3)
    assert events == ["send", "read"] and batch.counts == (20, 60)
    assert set(batch.versions.tolist()) == {3} and batch.min_versions == (3, 3)
    assert batch.versions.tolist() == version_of(stored, batch["item"])


def test_the_plane_gathers_a_bounded_mixed_batch_over_unix(client, tables, transport,
                                                            monkeypatch):
    # 512 rows of 4 KiB: over a Unix socket the rows are gathered from the mappings.
    a = tables(client, np.arange(20), np.arange(20) % 2, obs=1024)
    b = tables(client, np.arange(100, 120), 2 + np.arange(20) % 2, obs=1024)
    client.sample({a: 0.5, b: 0.5}, 512, min_version=1)
    events = count_requests(client.connection(), monkeypatch)
    batch = client.sample({a: 0.5, b: 0.5}, 512, min_version=1)
    assert events == ["send", "read"]
    assert (client._planes.get(a) is not None) == (transport == "unix")
    assert set(batch["item"][:256].tolist()) == set(range(1, 20, 2))
    assert np.all(batch["obs"][:, 0] == batch["item"])
    expected = np.where(batch["item"] < 100, batch["item"] % 2, 2 + (batch["item"] - 100) % 2)
    assert batch.versions.tolist() == expected.tolist() and batch.min_versions == (1, 1)


def test_a_bounded_mixed_batch_waits_for_an_eligible_item_of_each_table(client, tables):
    a = tables(client, np.arange(10), np.full(10, 5))
    b = tables(client, np.arange(100, 110), np.full(10, 1))
    started = time.monotonic()
    with pytest.raises(replayd.TimeoutError) as refused:
        client.sample({a: 0.5, b: 0.5}, 8, min_version=5, timeout=0.3)
    assert time.monotonic() - started >= 0.25 and f"'{b}'" in str(refused.value)
    assert "version" in str(refused.value)
    assert client.table_info(a)["counters"]["samples"] == 0  # nothing drawn from a either

    def late_item() -> None:
        with replayd.Client(client.address, timeout=30) as writer:
            writer.insert(b, {"item": np.array([199]), "obs": np.full((1, 4), 199, np.float32)},
                          version=5)

    writer = threading.Timer(0.3, late_item)
    writer.start()
    try:
        batch = client.sample({a: 0.5, b: 0.5}, 8, min_version=5, timeout=20)
    finally:
        writer.join()
    assert batch["item"][4:].tolist() == [199] * 4 and batch.versions.tolist() == [5] * 8


def test_samplers_async_calls_and_datasets_keep_the_bound_of_a_mixed_batch(client, tables):
    a = tables(client, np.arange(40), np.arange(40) % 4)
    b = tables(client, np.arange(100, 130), 1 + np.arange(30) % 3)
    mix = {a: 0.5, b: 0.5}
    with client.sampler(mix, 20, prefetch=3, min_version=2) as sampler:
        for _ in range(5):
            batch = next(sampler)
            assert batch.versions.min() >= 2 and batch.min_versions == (2, 2)
            assert batch.part(b).min_version == 2
    later = client.sample_async(mix, 40, min_version=3).result()   # one request per table
    assert set(later.versions.tolist()) == {3} and later.min_versions == (3, 3)
    torch = pytest.importorskip("torch")
    from replayd.torch import ReplayDataset
    for batch in list(ReplayDataset(client, mix, 16, min_version=3, num_batches=2)):
        assert isinstance(batch["versions"], torch.Tensor)
        assert set(batch["versions"].tolist()) == {3}
        assert batch["table"].tolist() == [0] * 8 + [1] * 8


# -- a bound per table (demonstrations of version 0 mixed with bounded online replay) --

def demos_and_online(client, tables, **online_options):
    """A demonstration table of 20 items of version 0 and an online table of 30 items of
    versions 1..3; their items' versions by id."""
    demos = tables(client, np.arange(20), np.zeros(20))
    online_ids = np.arange(1000, 1030)
    online_versions = 1 + np.arange(30) % 3
    online = tables(client, online_ids, online_versions, **online_options)
    stored = dict(zip(online_ids.tolist(), online_versions.tolist()))
    stored.update({i: 0 for i in range(20)})
    return demos, online, stored


def assert_demos_whole_online_latest(batch, demos, online, stored):
    demo_rows, online_rows = batch.part(demos), batch.part(online)
    assert set(demo_rows["item"].tolist()) == set(range(20))   # every demo item drawn
    assert set(online_rows["item"].tolist()) == {i for i, v in stored.items() if v == 3}
    assert batch.versions.tolist() == version_of(stored, batch["item"])
    assert batch.min_versions == (None, 3)
    assert demo_rows.min_version is None and online_rows.min_version == 3
    np.testing.assert_allclose(demo_rows.probabilities, 1 / 20)    # all 20 demo items
    np.testing.assert_allclose(online_rows.probabilities, 1 / 10)  # the 10 of version 3


def test_a_min_version_per_table_bounds_only_the_tables_it_names_in_one_request(
        client, tables, monkeypatch):
    demos, online, stored = demos_and_online(client, tables)
    mix = {demos: 0.5, online: 0.5}
    client.sample(mix, 10, min_version={online: 3})           # schemas read: warm
    events = count_requests(client.connection(), monkeypatch)
    batch = client.sample(mix, 1000, min_version={online: 3})
    assert events == ["send", "read"]                          # one sample_mixed
    assert_demos_whole_online_latest(batch, demos, online, stored)
    # The scalar form still bounds every table: no demonstration is of version 3.
    with pytest.raises(replayd.TimeoutError):
        client.sample(mix, 10, min_version=3, timeout=0.2)


def test_a_max_staleness_per_table_follows_the_online_tables_published_value(
        client, tables, monkeypatch):
    policy = f"mixver-policy-{time.monotonic_ns()}"
    demos, online, stored = demos_and_online(client, tables, versions={"value": policy})
    client.publish(policy, {"w": np.zeros(1)}, version=3)
    mix = {demos: 0.5, online: 0.5}
    client.sample(mix, 10, max_staleness={online: 0})
    events = count_requests(client.connection(), monkeypatch)
    batch = client.sample(mix, 1000, max_staleness={online: 0})
    assert events == ["send", "read"]
    assert_demos_whole_online_latest(batch, demos, online, stored)
    # value= per table: the online table counts from the value named for it.
    named = client.sample(mix, 1000, max_staleness={online: 0}, value={online: policy})
    assert_demos_whole_online_latest(named, demos, online, stored)
    with pytest.raises(replayd.InvalidArgument, match=f"table '{demos}'.*max_staleness"):
        client.sample(mix, 10, max_staleness={online: 0}, value={demos: policy})
    with pytest.raises(replayd.InvalidArgument, match="not both"):
        client.sample(mix, 10, min_version=1, max_staleness={online: 0})


def test_per_table_bounds_hold_on_samplers_async_calls_and_datasets(client, tables):
    demos, online, stored = demos_and_online(client, tables)
    mix = {demos: 0.5, online: 0.5}
    with client.sampler(mix, 1000, prefetch=2, min_version={online: 3}) as sampler:
        for _ in range(3):
            assert_demos_whole_online_latest(next(sampler), demos, online, stored)
    later = client.sample_async(mix, 1000, min_version={online: 3}).result()  # per table
    assert_demos_whole_online_latest(later, demos, online, stored)
    # One table given a dict: read as a mix of that table alone.
    alone = client.sample(online, 50, min_version={online: 3})
    assert alone.min_version == 3 and set(alone.versions.tolist()) == {3}
    empty = client.sample(demos, 5, min_version={})               # unbounded, with versions
    assert empty.versions.tolist() == [0] * 5 and empty.min_version is None
    torch = pytest.importorskip("torch")
    from replayd.torch import ReplayDataset
    for batch in list(ReplayDataset(client, mix, 200, min_version={online: 3},
                                    num_batches=2)):
        assert set(batch["versions"][:100].tolist()) == {0}
        assert set(batch["versions"][100:].tolist()) == {3}
        assert isinstance(batch["versions"], torch.Tensor)


def test_a_per_table_bound_naming_a_table_outside_the_mix_is_refused_before_sending(
        client, tables, monkeypatch):
    demos, online, _ = demos_and_online(client, tables)
    mix = {demos: 0.5, online: 0.5}
    client.sample(mix, 10)
    events = count_requests(client.connection(), monkeypatch)
    for call in (lambda: client.sample(mix, 10, min_version={"onlnie": 3}),
                 lambda: client.sample_async(mix, 10, max_staleness={"onlnie": 0}),
                 lambda: client.sampler(mix, 10, min_version={online: 3, "onlnie": 3}),
                 lambda: client.sample(online, 10, min_version={demos: 3})):
        with pytest.raises(replayd.InvalidArgument, match="'onlnie'|not in the mixed"):
            call()
    assert events == []
    with pytest.raises(replayd.InvalidArgument) as refused:
        client.sample(mix, 10, min_version={"onlnie": 3})
    assert "'onlnie'" in str(refused.value) and online in str(refused.value)
    assert events == []


def test_the_plane_gathers_a_mixed_batch_bounded_per_table_over_unix(client, tables,
                                                                     transport, monkeypatch):
    a = tables(client, np.arange(20), np.zeros(20), obs=1024)
    b = tables(client, np.arange(100, 120), 2 + np.arange(20) % 2, obs=1024)
    client.sample({a: 0.5, b: 0.5}, 512, min_version={b: 3})
    events = count_requests(client.connection(), monkeypatch)
    batch = client.sample({a: 0.5, b: 0.5}, 512, min_version={b: 3})
    assert events == ["send", "read"]
    assert (client._planes.get(a) is not None) == (transport == "unix")
    assert set(batch["item"][:256].tolist()) == set(range(20))
    assert set(batch["item"][256:].tolist()) == set(range(101, 120, 2))
    assert np.all(batch["obs"][:, 0] == batch["item"])
    assert batch.versions.tolist() == [0] * 256 + [3] * 256
    assert batch.min_versions == (None, 3)
