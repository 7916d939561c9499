"""replayd.cpprb's LaBER classes follow cpprb's LaBER.py: probabilities (p + eps) / sum,
indexes into the large batch drawn with replacement, and the three weight normalizations."""
from __future__ import annotations

import numpy as np
import pytest

from replayd.cpprb import LaBERlazy, LaBERmax, LaBERmean, ReplayBuffer


def reference(priorities, batch_size, eps, seed, kind):
    p = np.asarray(priorities, dtype=np.float64) + eps
    p = p / p.sum()
    idx = np.random.default_rng(seed).choice(len(p), batch_size, p=p)
    weights = {"mean": p.mean() / p[idx], "lazy": 1.0 / p[idx],
               "max": (1.0 / p[idx]) / (1.0 / p[idx]).max()}[kind]
    return idx, weights


@pytest.mark.parametrize("cls,kind", [(LaBERmean, "mean"), (LaBERlazy, "lazy"),
                                      (LaBERmax, "max")])
def test_laber_matches_cpprb_formulas(cls, kind):
    laber = cls(8, m=4, eps=1e-3)
    laber.rng = np.random.default_rng(11)
    priorities = np.random.default_rng(3).random(32)
    obs = np.arange(64).reshape(32, 2)
    out = laber(priorities=priorities, obs=obs)
    idx, weights = reference(priorities, 8, 1e-3, 11, kind)
    np.testing.assert_array_equal(out["indexes"], idx)
    np.testing.assert_allclose(out["weights"], weights)
    np.testing.assert_array_equal(out["obs"], obs[idx])
    assert set(out) == {"obs", "weights", "indexes"}


def test_laber_draws_in_proportion_to_priorities():
    laber = LaBERmean(4000, m=1, eps=1e-6)
    laber.rng = np.random.default_rng(1)
    priorities = np.array([1.0, 3.0] * 2000)
    hits = priorities[laber(priorities=priorities)["indexes"]]
    assert abs((hits == 3.0).mean() - 0.75) < 0.03


def test_laber_rejects_bad_arguments():
    for args, kwargs in (((0,), {}), ((4,), {"m": 0}), ((4,), {"eps": -1e-6})):
        with pytest.raises(ValueError):
            LaBERmean(*args, **kwargs)
    with pytest.raises(ValueError):
        LaBERmean(4, m=2)(priorities=np.ones(3))  # not m * batch_size values


def test_laber_with_eps_0_never_draws_a_zero_priority():
    for cls, weight in ((LaBERmean, 0.25), (LaBERlazy, 1.0), (LaBERmax, 1.0)):
        sample = cls(2, 2, eps=0)(priorities=[1, 0, 0, 0])
        assert sample["indexes"].tolist() == [0, 0]
        assert sample["weights"].tolist() == [weight, weight]


def test_laber_on_a_large_uniform_batch(address):
    rb = ReplayBuffer(64, {"obs": {"shape": 2}, "rew": {}}, address=address)
    rb.add(obs=np.ones((64, 2)), rew=np.arange(64))
    laber = LaBERmax(16, m=4)
    large = rb.sample(64)
    out = laber(priorities=np.abs(large["rew"].ravel()), **large)
    assert out["obs"].shape == (16, 2) and out["rew"].shape == (16, 1)
    assert out["weights"].max() == pytest.approx(1.0)
