"""Reliability against the real server: values, sizes and connections that once broke it
(priorities whose mass overflows, table sizes that ignored metadata, snapshots lost or
failed at restart and shutdown, slow HTTP clients, unauthenticated connection floods)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import replayd

FIELDS = {"x": ("float32", ())}


def rows(n: int):
    return {"x": np.arange(n, dtype=np.float32)}


# --- Priorities whose sampling mass is not finite -------------------------------------------

@pytest.mark.parametrize("priorities, exponent", [([1e160], 2.0), ([1e308, 1e308], 1.0)])
def test_a_priority_whose_mass_overflows_is_rejected_and_the_table_is_unchanged(
        client, table_name, priorities, exponent):
    client.create_table(table_name, FIELDS, 100, sampler="prioritized",
                        priority_exponent=exponent)
    client.insert(table_name, rows(3), priorities=[1.0, 2.0, 3.0])
    with pytest.raises(replayd.InvalidArgument, match="priorit"):
        client.insert(table_name, rows(len(priorities)), priorities=priorities)
    keys = client.sample(table_name, 3).keys
    with pytest.raises(replayd.InvalidArgument, match="priorit"):
        client.update_priorities(table_name, keys[: len(priorities)], priorities)
    info = client.table_info(table_name)
    assert info["size"] == 3
    assert math.isfinite(info["mass"]) and info["mass"] == pytest.approx(
        sum(p ** exponent for p in (1.0, 2.0, 3.0)))
    sample = client.sample(table_name, 50)
    assert math.isfinite(sample.state["mass"])
    assert np.all(np.isfinite(sample.probabilities)) and np.all(sample.probabilities > 0)


def test_the_largest_priorities_accepted_keep_every_reply_finite(client, table_name):
    client.create_table(table_name, FIELDS, 4, sampler="prioritized", priority_exponent=1.0)
    big = 1e290  # below the documented per-item bound for capacity 4
    client.insert(table_name, rows(4), priorities=[big] * 4)
    sample = client.sample(table_name, 8)
    assert math.isfinite(sample.state["mass"])
    assert np.all(np.isfinite(sample.probabilities)) and np.all(sample.probabilities > 0)
    assert math.isfinite(client.table_info(table_name)["mass"])
