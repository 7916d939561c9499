"""Nested fields (dicts and tuples of arrays, Gymnasium's Dict and Tuple spaces): stored as
leaves named by their path, given and returned nested by every call of the client."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest

import replayd
from replayd.nesting import flatten_spec, nest

OBS = {"camera": (np.uint8, (4, 4, 3)), "state": (np.float32, (7,))}


@pytest.fixture
def uclient(server) -> Iterator[replayd.Client]:
    with replayd.Client(server.unix_address, timeout=30) as c:
        yield c


def obs_of(i: int) -> dict:
    return {"camera": np.full((4, 4, 3), i % 256, np.uint8),
            "state": np.full(7, i, np.float32)}


def test_a_dict_field_spec_makes_one_field_per_leaf(uclient, table_name):
    info = uclient.create_table(table_name, {"obs": OBS, "act": (np.int64, ())}, 100)
    names = [f["name"] for f in info["description"]["fields"]]
    assert names == ["obs/camera", "obs/state", "act"]


def test_insert_and_sample_take_and_give_nested_dicts(uclient, table_name):
    uclient.create_table(table_name, {"obs": OBS, "pair": ((np.int32, ()), (np.float64, 2)),
                                      "act": (np.int64, ())}, 100)
    n = 8
    uclient.insert(table_name, {
        "obs": {"camera": np.stack([obs_of(i)["camera"] for i in range(n)]),
                "state": np.stack([obs_of(i)["state"] for i in range(n)])},
        "pair": (np.arange(n, dtype=np.int32), np.ones((n, 2))),
        "act": np.arange(n)})
    sample = uclient.sample(table_name, 16)
    assert set(sample.data) == {"obs", "pair", "act"}
    assert isinstance(sample.data["pair"], tuple) and len(sample.data["pair"]) == 2
    camera, state = sample.data["obs"]["camera"], sample.data["obs"]["state"]
    assert camera.shape == (16, 4, 4, 3) and state.shape == (16, 7)
    # each drawn item's leaves belong together
    np.testing.assert_array_equal(state[:, 0].astype(np.int64), sample.data["act"])
    np.testing.assert_array_equal(camera[:, 0, 0, 0], sample.data["act"])
    np.testing.assert_array_equal(sample.data["pair"][0], sample.data["act"])
    assert sample["obs/state"] is state
    assert sorted(sample.flat) == ["act", "obs/camera", "obs/state", "pair/0", "pair/1"]


def test_writer_takes_nested_items(uclient, table_name):
    uclient.create_table(table_name, {"obs": OBS, "act": (np.int64, ())}, 100)
    with uclient.writer(table_name) as writer:
        for i in range(5):
            writer.append(obs=obs_of(i), act=i)
    pages = list(uclient.read_items(table_name))
    assert len(pages) == 1
    page = pages[0]
    np.testing.assert_array_equal(page["act"], np.arange(5))
    np.testing.assert_array_equal(page["obs"]["state"][:, 3], np.arange(5, dtype=np.float32))
    assert page["obs"]["camera"].shape == (5, 4, 4, 3)


def test_episode_writer_final_observation_is_nested_and_samples_give_next_obs_nested(
        uclient, table_name):
    uclient.create_table(table_name, {"obs": OBS, "act": (np.int64, ()),
                                      "rew": (np.float32, ())}, 100, episodic=True,
                         next_of=["obs"])
    with uclient.episode_writer(table_name) as writer:
        for t in range(3):
            writer.append(obs=obs_of(t), act=t, rew=1.0)
        writer.end_episode(terminated=False, obs=obs_of(3))
    sample = uclient.sample(table_name, 32, nstep=1)
    act = sample.data["act"]
    np.testing.assert_array_equal(sample.data["next_obs"]["state"][:, 0], act + 1)
    np.testing.assert_array_equal(sample.data["obs"]["camera"][:, 0, 0, 0], act)
    sequences = uclient.sample_sequences(table_name, 4, 2)
    assert sequences.data["obs"]["state"].shape == (4, 2, 7)
    episodes = uclient.read_episodes(table_name)
    np.testing.assert_array_equal(episodes["obs"]["state"][:, 0], [0, 1, 2, 3])
    if "end" in episodes:
        assert episodes["truncated"].tolist() == [True]
        assert episodes["terminated"].tolist() == [False]


def test_a_dict_whose_keys_read_back_as_a_tuple_is_refused_by_name():
    with pytest.raises(ValueError, match="field 'obs'.*read back as a tuple"):
        flatten_spec("obs", {"0": (np.float32, ()), "1": (np.float32, ())})


def test_nesting_round_trips_dicts_and_tuples():
    leaves = dict(flatten_spec("o", {"a": ((np.int8, ()), {"b": (np.int8, ())}),
                                     "c": (np.int8, 2)}))
    assert list(leaves) == ["o/a/0", "o/a/1/b", "o/c"]
    assert nest({name: name for name in leaves}) == {"o": {"a": ("o/a/0", {"b": "o/a/1/b"}),
                                                            "c": "o/c"}}


def test_torch_batches_of_nested_fields_are_nested_dicts_of_tensors(uclient, table_name):
    torch_module = pytest.importorskip("replayd.torch")
    uclient.create_table(table_name, {"obs": OBS, "act": (np.int64, ())}, 100)
    uclient.insert(table_name, {"obs": obs_of(3), "act": 3})
    batch = torch_module.as_tensors(uclient.sample(table_name, 4))
    assert batch["obs"]["state"].shape == (4, 7)
    assert batch["obs"]["camera"].dtype == torch_module.torch.uint8
    assert batch["act"].tolist() == [3, 3, 3, 3]
