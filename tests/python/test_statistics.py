"""Sampling through the wire follows the exact probabilities (chi-square)."""
from __future__ import annotations

import numpy as np
import pytest

# 99.9% quantiles of the chi-square distribution (scipy.stats.chi2.ppf(0.999, df)).
CHI2_999 = {7: 24.322, 9: 27.877}


def draw_counts(client, table, keys, draws, batch=1000, beta=0.4):
    index = {int(k): i for i, k in enumerate(keys)}
    counts = np.zeros(len(keys))
    reported = {}
    for _ in range(draws // batch):
        sample = client.sample(table, batch, beta=beta)
        for key, p, w in zip(sample.keys.tolist(), sample.probabilities, sample.weights):
            counts[index[key]] += 1
            reported[key] = (p, w)
    return counts, reported


def chi_square(counts, probabilities):
    expected = probabilities * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize("alpha", [0.6, 1.0])
def test_prioritized_sampling_matches_priorities_to_the_alpha(client, table_name, alpha):
    priorities = np.array([0.5, 1, 2, 3, 5, 8, 0.1, 4])
    client.create_table(table_name, {"i": (np.int64, ())}, 100, sampler="prioritized",
                        priority_exponent=alpha, seed=11)
    keys = client.insert(table_name, {"i": np.arange(8)}, priorities=priorities)
    exact = priorities ** alpha / (priorities ** alpha).sum()
    counts, reported = draw_counts(client, table_name, keys, 20_000, beta=0.5)
    assert chi_square(counts, exact) < CHI2_999[7]
    max_weight_base = (8 * exact.min()) ** -0.5
    for i, key in enumerate(keys.tolist()):
        p, w = reported[key]
        assert p == pytest.approx(exact[i], rel=1e-9)
        assert w == pytest.approx((8 * exact[i]) ** -0.5 / max_weight_base, rel=1e-9)


def test_updated_priorities_change_the_distribution(client, table_name):
    client.create_table(table_name, {"i": (np.int64, ())}, 100, sampler="prioritized",
                        priority_exponent=1.0, seed=5)
    keys = client.insert(table_name, {"i": np.arange(8)})  # all get priority 1.0
    new = np.array([1, 1, 1, 1, 1, 1, 1, 9.0])
    assert client.update_priorities(table_name, keys, new) == 0
    counts, _ = draw_counts(client, table_name, keys, 16_000)
    assert chi_square(counts, new / new.sum()) < CHI2_999[7]


def test_uniform_sampling_is_uniform(client, table_name):
    client.create_table(table_name, {"i": (np.int64, ())}, 100, seed=3)
    keys = client.insert(table_name, {"i": np.arange(10)}, priorities=np.arange(1, 11))
    counts, reported = draw_counts(client, table_name, keys, 20_000)
    assert chi_square(counts, np.full(10, 0.1)) < CHI2_999[9]
    assert all(p == pytest.approx(0.1) and w == 1.0 for p, w in reported.values())


def test_new_items_get_the_largest_priority_seen(client, table_name):
    client.create_table(table_name, {"i": (np.int64, ())}, 100, sampler="prioritized",
                        priority_exponent=1.0, seed=9)
    first = client.insert(table_name, {"i": np.arange(2)}, priorities=[2.0, 6.0])
    second = client.insert(table_name, {"i": np.arange(2, 4)})  # both get 6.0
    keys = np.concatenate([first, second])
    counts, _ = draw_counts(client, table_name, keys, 20_000)
    exact = np.array([2, 6, 6, 6]) / 20
    assert chi_square(counts, exact) < 16.266  # chi2.ppf(0.999, 3)
