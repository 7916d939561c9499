"""Transition files cross between replayd.cpprb and the real cpprb both ways, in both of
cpprb's layouts (``safe``, and ``safe=False`` with ``next_of`` / ``stack_compress``), and a
prioritized buffer's first priority is cpprb's. The real cpprb runs in a subprocess
(tests/python/real_cpprb.py); those tests skip, saying how to build it, without it."""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np
import pytest

import real_cpprb
from replayd.cpprb import PrioritizedReplayBuffer, ReplayBuffer

# name -> (env_dict, keyword arguments): cpprb's buffer kinds that save differently.
CONFIGS: Dict[str, Any] = {
    "plain": ({"obs": {"shape": 2}, "act": {}, "next_obs": {"shape": 2}}, {}),
    "next_of": ({"obs": {"shape": 2}, "act": {}}, {"next_of": "obs"}),
    "next_of_two": ({"obs": {"shape": 2}, "goal": {"shape": 2}, "act": {}},
                    {"next_of": ["obs", "goal"]}),
    "stack_compress": ({"obs": {"shape": [2, 3]}, "act": {}}, {"stack_compress": "obs"}),
}
EPISODE_ENDS = [4]  # after the 5th add; the second episode (4 steps) is left open


def steps(config: str) -> List[Dict[str, Any]]:
    """One add per step of two episodes whose values follow cpprb's rules: next values
    are the next step's, a stack shifts by one frame a step; the second episode does not
    continue the first."""
    adds = []
    for t in list(range(5)) + list(range(100, 104)):
        frame = lambda k: np.array([k, -k], np.float32)  # noqa: E731
        add: Dict[str, Any] = {"act": float(t % 3)}
        if config == "stack_compress":
            add["obs"] = np.stack([frame(t + j) for j in range(3)], axis=-1)
        else:
            add["obs"] = frame(t)
            add["next_obs"] = frame(t + 1)
        if config == "next_of_two":
            add["goal"], add["next_goal"] = frame(2 * t), frame(2 * t + 2)
        adds.append(add)
    return adds


def write_adds(path, adds: List[Dict[str, Any]]) -> str:
    np.savez(path, count=len(adds), **{f"add{i}": np.array(add, dtype=object)
                                       for i, add in enumerate(adds)})
    return str(path)


def add_all(rb: ReplayBuffer, adds: List[Dict[str, Any]]) -> None:
    for i, add in enumerate(adds):
        rb.add(**add)
        if i in EPISODE_ENDS:
            rb.on_episode_end()


def assert_same_transitions(got: Dict[str, Any], want: Dict[str, Any]) -> None:
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(want[name]),
                                      err_msg=name)


@pytest.fixture
def rb_args(address, table_name):
    return {"address": address, "table": table_name}


@pytest.mark.parametrize("safe", [True, False])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_file_replayd_saves_loads_in_the_real_cpprb_as_its_own(config, safe, rb_args,
                                                                  tmp_path):
    """The real cpprb loads replayd's file of some adds exactly as it loads the file it
    saves itself of the same adds. (Its own loader is the judge: loading a safe file into
    a next_of or stack_compress buffer, cpprb adds every transition at once, so an
    episode's end is lost there, for its own files as for ours.)"""
    real_cpprb.available()
    env, kwargs = CONFIGS[config]
    rb = ReplayBuffer(16, env, **kwargs, **rb_args)
    add_all(rb, steps(config))
    rb.save_transitions(str(tmp_path / "replayd.npz"), safe=safe)
    with np.load(tmp_path / "replayd.npz", allow_pickle=True) as npz:
        assert sorted(npz.files) == ["Nstep", "cache", "data", "next_of", "safe", "version"]
        assert npz["safe"].item() is (safe or config == "plain")  # as cpprb decides
    real_cpprb.run({"env_dict": env, "size": 16, "kwargs": kwargs,
                    "adds": write_adds(tmp_path / "adds.npz", steps(config)),
                    "episode_ends": EPISODE_ENDS, "save": str(tmp_path / "cpprb.npz"),
                    "safe": safe, "dump": str(tmp_path / "added.npz")})
    with np.load(tmp_path / "added.npz") as added:  # what both buffers hold
        assert_same_transitions(rb.get_all_transitions(), dict(added))
    for name in ("replayd", "cpprb"):
        real_cpprb.run({"env_dict": env, "size": 16, "kwargs": kwargs,
                        "load": str(tmp_path / f"{name}.npz"),
                        "dump": str(tmp_path / f"{name}-loaded.npz")})
    with np.load(tmp_path / "replayd-loaded.npz") as ours, \
            np.load(tmp_path / "cpprb-loaded.npz") as theirs:
        assert_same_transitions(dict(ours), dict(theirs))
    if not safe or config == "plain":  # and there, exactly what was added
        with np.load(tmp_path / "replayd-loaded.npz") as ours:
            assert_same_transitions(dict(ours), rb.get_all_transitions())


@pytest.mark.parametrize("safe", [True, False])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_file_the_real_cpprb_saves_loads_in_replayd(config, safe, rb_args, tmp_path):
    real_cpprb.available()
    env, kwargs = CONFIGS[config]
    real_cpprb.run({"env_dict": env, "size": 16, "kwargs": kwargs,
                    "adds": write_adds(tmp_path / "adds.npz", steps(config)),
                    "episode_ends": EPISODE_ENDS, "save": str(tmp_path / "cpprb.npz"),
                    "safe": safe, "dump": str(tmp_path / "saved.npz")})
    with np.load(tmp_path / "cpprb.npz", allow_pickle=True) as npz:
        assert npz["safe"].item() is (safe or config == "plain")
    rb = ReplayBuffer(16, env, **kwargs, **rb_args)
    rb.load_transitions(str(tmp_path / "cpprb.npz"))
    with np.load(tmp_path / "saved.npz") as saved:
        assert_same_transitions(rb.get_all_transitions(), dict(saved))


def test_replayds_safe_false_file_keeps_each_next_value_once(rb_args, tmp_path):
    """cpprb's unsafe layout without the real cpprb: memory rows without next_obs, the
    next values of episode ends and of the newest row in the cache."""
    env, kwargs = CONFIGS["next_of"]
    rb = ReplayBuffer(16, env, **kwargs, **rb_args)
    add_all(rb, steps("next_of"))
    rb.save_transitions(str(tmp_path / "unsafe.npz"), safe=False)
    with np.load(tmp_path / "unsafe.npz", allow_pickle=True) as npz:
        assert npz["safe"].item() is False
        assert npz["next_of"].tolist() == ["obs"]
        assert sorted(npz["data"].item()) == ["act", "obs"]
        cache = npz["cache"].item()
    assert sorted(cache) == [4, 8]
    assert cache[4]["next_obs"].tolist() == [5, -5] and cache[8]["next_obs"].tolist() == [104, -104]
    other = ReplayBuffer(16, env, **kwargs, address=rb_args["address"])
    other.load_transitions(str(tmp_path / "unsafe.npz"))
    assert_same_transitions(other.get_all_transitions(), rb.get_all_transitions())


def test_a_new_prioritized_buffers_first_priority_is_one_plus_eps(rb_args):
    """cpprb stores (1.0 + eps)^alpha for an add without priorities before any priority
    was given: with eps 0.5 and alpha 1, an item given priority 0 (stored 0.5) is drawn a
    third as often, so its importance weight (beta 1) is 1 and the first item's 1/3."""
    rb = PrioritizedReplayBuffer(4, {"obs": {}}, alpha=1.0, eps=0.5, **rb_args)
    rb.add(obs=0.0)
    rb.add(obs=1.0, priorities=0.0)
    batch = rb.sample(64, beta=1.0)
    weight = {int(i): float(w) for i, w in zip(batch["indexes"], batch["weights"])}
    assert weight == pytest.approx({0: 1 / 3, 1: 1.0}, rel=1e-5)


def test_first_priorities_match_the_real_cpprb(rb_args, tmp_path):
    real_cpprb.available()
    adds = [{"obs": 0.0}, {"obs": 1.0, "priorities": 0.0}, {"obs": 2.0}]
    real = real_cpprb.run({"kind": "PrioritizedReplayBuffer", "env_dict": {"obs": {}},
                           "size": 4, "kwargs": {"alpha": 1.0, "eps": 0.5},
                           "adds": write_adds(tmp_path / "adds.npz", adds),
                           "sample": 64, "beta": 1.0})
    rb = PrioritizedReplayBuffer(4, {"obs": {}}, alpha=1.0, eps=0.5, **rb_args)
    for add in adds:
        rb.add(**add)
    batch = rb.sample(64, beta=1.0)
    ours = {int(i): float(w) for i, w in zip(batch["indexes"], batch["weights"])}
    theirs = dict(zip(real["indexes"], real["weights"]))
    assert ours == pytest.approx(theirs, rel=1e-5)
