"""Reverb's table kinds against the real server: queue and stack tables, max_heap and
min_heap selectors, any selector as remover, and what create_table says when a table of
that name exists with another description."""
from __future__ import annotations

import time

import numpy as np
import pytest

import replayd

FIELDS = {"x": (np.int64, ())}


def drain(client, table, n):
    return [int(client.sample(table, 1, timeout=5).data["x"][0]) for _ in range(n)]


def test_a_queue_hands_out_each_item_once_oldest_first(client, table_name):
    info = client.create_queue(table_name, FIELDS, 4)
    description = info["description"]
    assert description["sampler"]["kind"] == "fifo" and description["remover"] == "fifo"
    assert description["max_times_sampled"] == 1 and description["capacity"] == 4
    client.insert(table_name, {"x": [1, 2]})
    client.insert(table_name, {"x": [3]})
    assert drain(client, table_name, 3) == [1, 2, 3]
    assert client.size(table_name) == 0


def test_a_stack_hands_out_each_item_once_newest_first(client, table_name):
    client.create_stack(table_name, FIELDS, 4)
    client.insert(table_name, {"x": [1, 2, 3]})
    assert drain(client, table_name, 2) == [3, 2]
    client.insert(table_name, {"x": [4]})
    assert drain(client, table_name, 2) == [4, 1]


@pytest.mark.parametrize("create", ["create_queue", "create_stack"])
def test_a_full_queue_holds_inserts_and_an_empty_one_holds_samples(client, table_name, create):
    getattr(client, create)(table_name, FIELDS, 2)
    with pytest.raises(replayd.TimeoutError):
        client.sample(table_name, 1, timeout=0.2)  # empty: the sample waits
    client.insert(table_name, {"x": [1, 2]})
    with pytest.raises(replayd.TimeoutError):
        client.insert(table_name, {"x": [3]}, timeout=0.2)  # full: the insert waits
    assert client.size(table_name) == 2  # nothing was evicted
    held = client.insert_async(table_name, {"x": [3]})
    time.sleep(0.1)
    assert not held.done()
    client.sample(table_name, 1, timeout=5)  # frees one place: the held insert goes in
    held.result(timeout=5)
    assert client.size(table_name) == 2
    waiting = client.sample_async(table_name, 1)
    assert waiting.result(timeout=5).data["x"].shape == (1,)
    client.sample(table_name, 1, timeout=5)
    late = client.sample_async(table_name, 1)
    time.sleep(0.1)
    assert not late.done()  # empty again
    client.insert(table_name, {"x": [9]})
    assert late.result(timeout=5).data["x"].tolist() == [9]


def test_queue_and_stack_descriptions_match_what_the_server_resolves(client, table_name):
    for helper, create in [(replayd.queue, client.create_queue),
                           (replayd.stack, client.create_stack)]:
        name = f"{table_name}-{helper.__name__}"
        description = helper(name, FIELDS, 8)
        created = create(name, FIELDS, 8)["description"]
        assert created["sampler"]["kind"] == description["sampler"]["kind"]
        assert created["remover"] == description["remover"]
        assert created["max_times_sampled"] == description["max_times_sampled"] == 1
        # The description creates the same table: exist_ok accepts it.
        client.create_table(name, FIELDS, 8, sampler=description["sampler"],
                            remover=description["remover"], max_times_sampled=1,
                            rate_limiter=description["rate_limiter"], exist_ok=True)
        client.drop_table(name)


def test_max_heap_samples_the_largest_priority_and_min_heap_the_smallest(client, table_name):
    for kind, expected in [("max_heap", [3, 1, 1]), ("min_heap", [0, 3, 3])]:
        name = f"{table_name}-{kind}"
        client.create_table(name, FIELDS, 10, sampler=kind)
        assert client.table_info(name)["description"]["sampler"] == {"kind": kind}
        keys = client.insert(name, {"x": [0, 1, 2, 3]}, priorities=[0.5, 2.0, 1.0, 7.0])
        got = [int(client.sample(name, 1).data["x"][0])]
        client.update_priorities(name, [keys[3]], [0.1])  # 3 falls to the bottom
        client.update_priorities(name, [keys[0]], [1.5])  # 0 rises to the middle
        got += [int(client.sample(name, 1).data["x"][0])]
        batch = client.sample(name, 1)
        assert batch.probabilities.tolist() == [1.0] and batch.weights.tolist() == [1.0]
        got += batch.data["x"].tolist()
        assert got == expected, kind
        client.drop_table(name)


def test_a_min_heap_remover_evicts_the_lowest_priority(client, table_name):
    client.create_table(table_name, FIELDS, 3, remover="min_heap")
    client.insert(table_name, {"x": [1, 2, 3]}, priorities=[5.0, 0.5, 2.0])
    client.insert(table_name, {"x": [4]}, priorities=[1.0])
    assert set(client.sample(table_name, 200).data["x"].tolist()) == {1, 3, 4}
    assert client.table_info(table_name)["counters"]["evictions"] == 1


def test_a_prioritized_remover_never_evicts_a_zero_priority_item(client, table_name):
    client.create_table(table_name, FIELDS, 2, remover="prioritized", sampler="fifo")
    client.insert(table_name, {"x": [0]}, priorities=[0.0])
    for x in range(1, 30):
        client.insert(table_name, {"x": [x]}, priorities=[1.0])
    assert client.sample(table_name, 1).data["x"].tolist() == [0]  # the oldest is still there
    assert client.table_info(table_name)["description"]["remover"] == "prioritized"


def test_an_existing_table_with_another_description_names_each_difference(client, table_name):
    client.create_table(table_name, {"obs": (np.float32, 4), "act": (np.int64, ())}, 1000)
    with pytest.raises(replayd.AlreadyExists) as info:
        client.create_table(table_name, {"obs": (np.float32, 8), "act": (np.int64, ())}, 2000,
                            exist_ok=True)
    message = info.value.message
    assert f"table '{table_name}' already exists with a different description" in message
    assert "capacity 1000 vs 2000" in message
    assert "field 'obs' shape [4] vs [8]" in message
    assert "act" not in message  # what is equal is not named

    with pytest.raises(replayd.AlreadyExists) as info:
        client.create_table(table_name, {"obs": (np.float64, 4), "rew": (np.float32, ())},
                            1000, sampler="prioritized", remover="lifo", max_times_sampled=2,
                            rate_limiter=replayd.MinSize(10), exist_ok=True)
    message = info.value.message
    for part in ["field 'obs' dtype float32 vs float64", "field 'act' only in the existing table",
                 "field 'rew' only in the request", "sampler uniform vs prioritized",
                 "remover fifo vs lifo", "max_times_sampled 0 vs 2",
                 "rate_limiter min_size_to_sample 1 vs 10"]:
        assert part in message, (part, message)
    assert "capacity" not in message

    # Without exist_ok the name alone is the conflict.
    with pytest.raises(replayd.AlreadyExists) as info:
        client.create_table(table_name, {"obs": (np.float32, 4), "act": (np.int64, ())}, 1000)
    assert info.value.message == f"table '{table_name}' already exists"


def test_prioritized_samplers_with_other_exponents_differ_by_exponent(client, table_name):
    client.create_table(table_name, FIELDS, 10, sampler="prioritized", priority_exponent=0.6)
    with pytest.raises(replayd.AlreadyExists, match=r"sampler priority_exponent 0\.6 vs 0\.5"):
        client.create_table(table_name, FIELDS, 10, sampler="prioritized",
                            priority_exponent=0.5, exist_ok=True)
    client.create_table(table_name, FIELDS, 10, sampler="prioritized", priority_exponent=0.6,
                        exist_ok=True)
