"""Three real servers used as one table through ShardedClient."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import replayd
from replayd.sharded import SHARD_BITS

# 99.9% quantiles of the chi-square distribution (scipy.stats.chi2.ppf(0.999, df)).
CHI2_999 = {8: 26.124, 11: 31.264}
FIELDS = {"item": (np.int64, ())}


@pytest.fixture
def shards(make_server):
    servers = [make_server(tcp=False) for _ in range(3)]
    with replayd.ShardedClient([s.unix_address for s in servers], seed=5, timeout=30) as client:
        yield client


def fill(shards, priorities_per_shard, *, table="union", sampler="prioritized"):
    """Stores items 0..N-1 spread as given over the shards; returns their exact union
    probabilities (priority^1 / total) in item order."""
    shards.create_table(table, FIELDS, 300, sampler=sampler, priority_exponent=1.0, seed=1)
    item = 0
    for shard, priorities in zip(shards.shards, priorities_per_shard):
        ids = np.arange(item, item + len(priorities))
        shard.insert(table, {"item": ids}, priorities=priorities)
        item += len(priorities)
    flat = np.concatenate([np.asarray(p, float) for p in priorities_per_shard])
    return flat / flat.sum() if sampler == "prioritized" else np.full(item, 1.0 / item)


def draw(shards, table, n_items, calls, batch=512, beta=0.5):
    counts = np.zeros(n_items)
    reported = {}
    for _ in range(calls):
        sample = shards.sample(table, batch, beta=beta)
        assert len(sample) == batch
        for item, p, w in zip(sample.data["item"].tolist(), sample.probabilities, sample.weights):
            counts[item] += 1
            reported[item] = (p, w)
    return counts, reported


def chi_square(counts, probabilities):
    expected = probabilities * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def test_the_union_of_prioritized_shards_samples_like_one_table(shards):
    exact = fill(shards, [[1, 2, 3], [4, 0.5], [1, 1, 1, 6]])
    counts, reported = draw(shards, "union", len(exact), calls=60)
    assert chi_square(counts, exact) < CHI2_999[8]
    # Probabilities and importance weights are those of one table holding every item.
    for item, (p, w) in reported.items():
        assert p == pytest.approx(exact[item], rel=1e-9)
        assert w == pytest.approx((exact[item] / exact.min()) ** -0.5, rel=1e-9)


def test_the_union_of_uniform_shards_is_uniform_over_all_items(shards):
    exact = fill(shards, [[1] * 2, [1] * 4, [1] * 6], sampler="uniform")
    counts, reported = draw(shards, "union", len(exact), calls=40)
    assert chi_square(counts, exact) < CHI2_999[11]
    assert all(p == pytest.approx(1 / 12) and w == pytest.approx(1.0) for p, w in reported.values())


def test_inserts_go_round_robin_and_keys_name_their_shard(shards):
    shards.create_table("rr", FIELDS, 300)
    shard_of = [int(shards.insert("rr", {"item": np.arange(4)})[0]) >> (64 - SHARD_BITS)
                for _ in range(6)]
    assert shard_of == [0, 1, 2, 0, 1, 2]
    assert [s.size("rr") for s in shards.shards] == [8, 8, 8]
    assert shards.size("rr") == 24


def test_priority_updates_and_deletes_reach_the_shard_that_owns_the_key(shards):
    exact = fill(shards, [[1, 1], [1, 1], [1, 1]])
    items = {int(i): int(k) for i, k in zip(*_all_items(shards, "union"))}
    # Item 5 (on shard 2) gets all the mass; items on other shards get none.
    keys = np.array([items[i] for i in range(len(exact))], np.uint64)
    priorities = np.zeros(len(exact))
    priorities[5] = 10.0
    assert shards.update_priorities("union", keys, priorities) == 0
    assert set(shards.sample("union", 64).data["item"].tolist()) == {5}
    assert shards.delete("union", keys[[0, 3]]) == 2
    assert [s.size("union") for s in shards.shards] == [1, 1, 2]
    assert shards.delete("union", keys[[0]]) == 0  # stale now
    assert shards.update_priorities("union", keys[[3, 4]], [1.0, 1.0]) == 1


def test_a_sharded_client_pickles_as_its_addresses(shards):
    shards.create_table("p", FIELDS, 30)
    shards.insert("p", {"item": np.arange(3)})
    clone = pickle.loads(pickle.dumps(shards))
    assert clone.size("p") == 3 and len(clone.shards) == 3


def test_keys_that_name_no_shard_are_refused(shards):
    shards.create_table("bad", FIELDS, 30)
    with pytest.raises(replayd.InvalidArgument, match="shard"):
        shards.delete("bad", [np.uint64(7) << np.uint64(64 - SHARD_BITS)])


def _all_items(shards, table):
    """(item ids, global keys) of every stored item, by sampling until all were seen."""
    seen = {}
    for _ in range(50):
        sample = shards.sample(table, 256)
        seen.update(zip(sample.data["item"].tolist(), sample.keys.tolist()))
        if len(seen) == shards.size(table):
            break
    ids = sorted(seen)
    return ids, [seen[i] for i in ids]
