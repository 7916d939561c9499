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
