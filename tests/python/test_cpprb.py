"""replayd.cpprb against ports of cpprb's documented usage examples (written from cpprb's
README, docstrings and example/apex.py)."""
from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest

import cpprb_workers
import replayd
import replayd.cpprb
from replayd.cpprb import (MPPrioritizedReplayBuffer, MPReplayBuffer,
                           PrioritizedReplayBuffer, ReplayBuffer)

ENV_DICT = {"obs": {"shape": 3}, "act": {"shape": 1}, "rew": {}, "next_obs": {"shape": 3},
            "done": {}}


@pytest.fixture
def rb_args(address, table_name):
    return {"address": address, "table": table_name}


def test_readme_basic_usage(rb_args):
    buffer_size = 256
    obs_shape = 3
    act_dim = 1
    rb = ReplayBuffer(buffer_size, env_dict={"obs": {"shape": obs_shape},
                                             "act": {"shape": act_dim}, "rew": {},
                                             "next_obs": {"shape": obs_shape}, "done": {}},
                      **rb_args)
    obs = np.ones(shape=(obs_shape))
    act = np.ones(shape=(act_dim))
    rew = 0
    next_obs = np.ones(shape=(obs_shape))
    done = 0
    for i in range(500):
        rb.add(obs=obs, act=act, rew=rew, next_obs=next_obs, done=done)
        if done:
            rb.on_episode_end()
    sample = rb.sample(32)
    assert set(sample) == {"obs", "act", "rew", "next_obs", "done"}
    assert {k: v.shape for k, v in sample.items()} == {
        "obs": (32, 3), "act": (32, 1), "rew": (32, 1), "next_obs": (32, 3), "done": (32, 1)}
    assert all(v.dtype == np.float32 for v in sample.values())
    assert rb.get_stored_size() == 256 and rb.get_buffer_size() == 256


def test_docstring_multistep_add_and_sample(rb_args):
    rb = ReplayBuffer(1e+6, {"obs": {"shape": 3}}, **rb_args)
    rb.add(obs=[1, 2, 3])
    rb.add(obs=[[1, 2, 3], [1, 2, 3]])
    assert rb.get_stored_size() == 3
    sample = rb.sample(4)
    np.testing.assert_array_equal(sample["obs"], np.array([[1., 2., 3.]] * 4, np.float32))
    assert sample["obs"].dtype == np.float32
    rb.add(obs=[[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    assert rb.get_stored_size() == 6


def test_docstring_dtypes_and_default_dtype(rb_args):
    rb = ReplayBuffer(1e+6, {"obs": {"shape": 3}, "act": {"dtype": np.int8}, "rew": {},
                             "next_obs": {"shape": 3}, "done": {}},
                      default_dtype=np.float64, **rb_args)
    rb.add(obs=[1, 2, 3], act=2, rew=0.5, next_obs=[4, 5, 6], done=0)
    sample = rb.sample(2)
    assert sample["obs"].dtype == np.float64 and sample["act"].dtype == np.int8
    assert sample["act"].shape == (2, 1) and sample["act"].tolist() == [[2], [2]]


def test_docstring_clear(rb_args):
    rb = ReplayBuffer(5, {"done": {}}, **rb_args)
    rb.add(done=1)
    assert rb.get_stored_size() == 1
    rb.clear()
    assert rb.get_stored_size() == 0
    with pytest.raises(ValueError, match="empty"):
        rb.sample(1)


def test_ring_buffer_keeps_the_newest(rb_args):
    rb = ReplayBuffer(4, {"i": {"dtype": np.int64}}, **rb_args)
    rb.add(i=np.arange(10))
    assert rb.get_stored_size() == 4
    assert set(rb.sample(100)["i"].ravel().tolist()) == {6, 7, 8, 9}


def test_scalar_shapes_follow_cpprb(rb_args):
    rb = ReplayBuffer(10, {"a": {}, "b": {"shape": ()}, "c": {"shape": (2, 2)}}, **rb_args)
    rb.add(a=1, b=2, c=np.eye(2))
    sample = rb.sample(3)
    assert sample["a"].shape == (3, 1) and sample["b"].shape == (3,)
    assert sample["c"].shape == (3, 2, 2)


def test_next_of_is_accepted_uncompressed(rb_args):
    rb = ReplayBuffer(32, {"obs": {"shape": 3}, "act": {}, "rew": {}, "done": {}},
                      next_of="obs", **rb_args)
    rb.add(obs=[1, 2, 3], act=1, rew=0, next_obs=[4, 5, 6], done=0)
    sample = rb.sample(2)
    assert sample["next_obs"].tolist() == [[4, 5, 6]] * 2


def test_stack_compress_is_accepted_uncompressed(rb_args):
    rb = ReplayBuffer(32, {"obs": {"shape": (3, 2)}}, stack_compress="obs", **rb_args)
    rb.add(obs=[[1, 2], [1, 2], [1, 2]])
    rb.add(obs=[[2, 3], [2, 3], [2, 3]])
    assert rb.get_stored_size() == 2 and rb.sample(5)["obs"].shape == (5, 3, 2)


def test_missing_values_raise_key_error_like_cpprb(rb_args):
    rb = ReplayBuffer(8, ENV_DICT, **rb_args)
    with pytest.raises(KeyError, match="next_obs"):
        rb.add(obs=[1, 2, 3], act=1, rew=0, done=0)


def test_per_usage(rb_args):
    rb = PrioritizedReplayBuffer(256, {"obs": {"shape": 3}, "i": {"dtype": np.int64}},
                                 alpha=0.5, eps=1e-4, **rb_args)
    priorities = np.array([0.2, 1.0, 3.0, 0.0])
    rb.add(obs=np.zeros((4, 3)), i=np.arange(4), priorities=priorities)
    sample = rb.sample(32, beta=0.4)
    assert set(sample) == {"obs", "i", "indexes", "weights"}
    assert sample["weights"].dtype == np.float32 and sample["weights"].shape == (32,)
    assert sample["indexes"].dtype == np.uint64 and sample["indexes"].shape == (32,)
    assert sample["weights"].max() <= 1.0
    # P(i) ~ (p + eps)^alpha
    counts = np.zeros(4)
    for _ in range(20):
        counts += np.bincount(rb.sample(1000)["i"].ravel(), minlength=4)
    exact = (priorities + 1e-4) ** 0.5 / ((priorities + 1e-4) ** 0.5).sum()
    chi2 = (((counts - exact * counts.sum()) ** 2) / (exact * counts.sum())).sum()
    assert chi2 < 16.266  # chi2.ppf(0.999, 3)
    # update_priorities with the sampled indexes: make item 0 dominate
    index_of = {int(k): int(i) for k, i in zip(sample["indexes"], sample["i"].ravel())}
    keys = np.array(list(index_of), dtype=np.uint64)
    rb.update_priorities(keys, [100.0 if index_of[int(k)] == 0 else 0.0 for k in keys])
    hits = rb.sample(1000)["i"].ravel()
    assert (hits == 0).mean() > 0.8
    with pytest.raises(TypeError):
        rb.update_priorities(keys, None)
    with pytest.raises(ValueError, match="priorities"):
        rb.add(obs=np.zeros((2, 3)), i=[1, 2], priorities=[1.0])


def test_new_items_get_the_max_priority(rb_args):
    rb = PrioritizedReplayBuffer(16, {"i": {"dtype": np.int64}}, alpha=1.0, eps=0.0,
                                 **rb_args)
    rb.add(i=0, priorities=9.0)
    rb.add(i=1)  # the max priority so far: 9
    counts = np.bincount(rb.sample(4000)["i"].ravel(), minlength=2)
    assert abs(counts[0] / 4000 - 0.5) < 0.05


def test_unknown_options_are_ignored_with_a_warning(rb_args):
    with pytest.warns(UserWarning, match="unexpected keyword arguments \\['frobnicate'\\]"):
        rb = ReplayBuffer(8, ENV_DICT, frobnicate=True, **rb_args)  # cpprb ignores them
    assert rb.get_buffer_size() == 8
    assert PrioritizedReplayBuffer(8, ENV_DICT, address=rb_args["address"]).is_Nstep() is False


def test_buffers_pickle_and_share_the_table(rb_args):
    rb = MPPrioritizedReplayBuffer(64, ENV_DICT, alpha=0.7, ctx=None, backend="SharedMemory",
                                   **rb_args)
    copy = pickle.loads(pickle.dumps(rb))
    copy.add(obs=[1, 2, 3], act=1, rew=1, next_obs=[1, 2, 3], done=0)
    copy.on_episode_end()  # single adds reach other holders at episode ends (or 64 items)
    assert rb.get_stored_size() == 1
    again = MPPrioritizedReplayBuffer(64, ENV_DICT, alpha=0.7, **rb_args)  # exist_ok
    assert again.get_stored_size() == 1
    with pytest.raises(replayd.AlreadyExists):
        MPPrioritizedReplayBuffer(64, ENV_DICT, alpha=0.5, **rb_args)


def test_address_from_the_environment(monkeypatch, address, table_name):
    monkeypatch.setenv("REPLAYD_ADDRESS", address)
    rb = MPReplayBuffer(8, {"x": {}}, table=table_name)
    assert rb.client.address == address and rb.table == table_name
    rb.add(x=1)
    assert rb.get_stored_size() == 1


def test_apex_example_with_spawned_explorers(server, table_name):
    env_dict = {"obs": {"shape": 4}, "act": {}, "rew": {}, "next_obs": {"shape": 4},
                "done": {}}
    global_rb = MPPrioritizedReplayBuffer(10_000, env_dict, address=server.unix_address,
                                          table=table_name)
    ctx = multiprocessing.get_context("spawn")
    explorers = [ctx.Process(target=cpprb_workers.apex_explorer,
                             args=(global_rb, e, 500, 100)) for e in range(3)]
    for p in explorers:
        p.start()
    n_warmup = 100
    while global_rb.get_stored_size() < n_warmup:
        pass
    for _ in range(50):
        sample = global_rb.sample(32)
        abs_td = np.abs(sample["rew"].ravel() - 0.5)
        global_rb.update_priorities(sample["indexes"], abs_td)
    for p in explorers:
        p.join(60)
        assert p.exitcode == 0
    assert global_rb.get_stored_size() == 1500
    acts = global_rb.sample(2000)["act"].ravel()
    assert set(acts.tolist()) == {0.0, 1.0, 2.0}
