"""The seed scenario: a handle pickled into spawned explorer processes that insert while
a learner samples with priority updates; every inserted transition is accounted for."""
from __future__ import annotations

import multiprocessing
import pickle
import time

import numpy as np

import replayd
import workers

EXPLORERS = 4
ITEMS_PER_EXPLORER = 2000


def test_spawned_explorers_and_a_prioritized_learner(server, table_name):
    address = server.unix_address
    client = replayd.Client(address, timeout=60)
    client.create_table(table_name, {"id": (np.int64, ()), "explorer": (np.int8, ()),
                                     "obs": (np.float32, 4)},
                        capacity=EXPLORERS * ITEMS_PER_EXPLORER, sampler="prioritized",
                        priority_exponent=0.6, rate_limiter=replayd.MinSize(100))
    handle = pickle.loads(pickle.dumps(client))  # what the children receive
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=workers.explorer,
                         args=(handle, table_name, e, ITEMS_PER_EXPLORER, 64, results))
             for e in range(EXPLORERS)]
    for p in procs:
        p.start()

    rng = np.random.default_rng(0)
    seen = {}  # key -> id, as sampled by the learner
    updates = stale = 0
    reports = []
    deadline = time.monotonic() + 90
    with client.sampler(table_name, 128, prefetch=4) as sampler:
        for sample in sampler:
            ids = sample.data["id"]
            np.testing.assert_array_equal(sample.data["obs"][:, 0], ids % 1000)
            np.testing.assert_array_equal(sample.data["explorer"], ids // workers.ID_STRIDE)
            seen.update(zip(sample.keys.tolist(), ids.tolist()))
            stale += client.update_priorities(table_name, sample.keys,
                                              rng.uniform(0.1, 2.0, len(sample)))
            updates += len(sample)
            while not results.empty():
                reports.append(results.get())
            if len(reports) == EXPLORERS and updates >= 20 * 128:
                break
            assert time.monotonic() < deadline, f"explorers reported {len(reports)}"
    for p in procs:
        p.join(60)
        assert p.exitcode == 0

    total = EXPLORERS * ITEMS_PER_EXPLORER
    key_to_id = {}
    for explorer_id, ids, keys in reports:
        assert len(ids) == len(keys) == ITEMS_PER_EXPLORER
        key_to_id.update(zip(keys, ids))
    assert len(key_to_id) == total  # keys unique across explorers
    assert all(key_to_id[k] == i for k, i in seen.items())  # sampled data matches its key
    info = client.table_info(table_name)
    assert info["size"] == total and info["counters"]["inserts"] == total
    assert info["counters"]["evictions"] == 0 and stale == 0
    assert info["counters"]["priority_updates"] == updates
    # Every reported key names exactly one stored item: deleting them all empties the table.
    assert client.delete(table_name, list(key_to_id)) == total
    assert client.size(table_name) == 0
    client.close()
