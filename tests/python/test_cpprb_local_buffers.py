"""cpprb's in-process helpers in replayd.cpprb (replayd/cpprb/local_buffers.py): dict2buffer
lays its arrays out as cpprb's buffers (a stack_compress value is a strided view of single
frames), NstepBuffer turns steps into n-step transitions as the buffers' ``Nstep`` does.
Neither needs a server."""
from __future__ import annotations

import numpy as np
import pytest

from replayd.cpprb import NstepBuffer, dict2buffer


def test_dict2buffer_gives_each_value_size_rows_of_its_shape_and_dtype_filled_with_one():
    env = {"obs": {"shape": (2, 3)}, "act": {"dtype": np.int64}, "rew": {}}
    buffer = dict2buffer(5, env, default_dtype=np.float64)
    assert buffer["obs"].shape == (5, 2, 3) and buffer["obs"].dtype == np.float64
    assert buffer["act"].shape == (5, 1) and buffer["act"].dtype == np.int64
    assert buffer["rew"].dtype == np.float64
    assert all(np.all(array == 1) for array in buffer.values())
    assert env["obs"]["add_shape"].tolist() == [-1, 2, 3]  # as cpprb, for its own adds


def test_dict2buffer_stack_compress_stores_each_frame_once():
    buffer = dict2buffer(4, {"obs": {"shape": (2, 3)}}, stack_compress="obs")
    obs = buffer["obs"]
    assert obs.shape == (4, 2, 3)
    assert obs.strides == (2 * obs.itemsize, obs.itemsize, 2 * obs.itemsize)
    obs[0, :, 2] = [7, 8]  # the newest frame of row 0 is the middle frame of row 1 ...
    assert obs[1, :, 1].tolist() == [7, 8]
    assert obs[2, :, 0].tolist() == [7, 8]  # ... and the oldest of row 2


def test_dict2buffer_mmap_prefix_keeps_the_values_in_files(tmp_path):
    buffer = dict2buffer(3, {"a": {"shape": 2}}, mmap_prefix=str(tmp_path / "rb"))
    buffer["a"][1] = [4, 5]
    buffer["a"].flush()
    assert np.fromfile(tmp_path / "rb_a.dat", np.float32).tolist() == [1, 1, 4, 5, 1, 1]


def test_dict2buffer_refuses_shared_memory_with_a_reason():
    with pytest.raises(ValueError, match="shared"):
        dict2buffer(3, {"a": {}}, shared="SharedMemory")


def test_nstep_buffer_returns_a_transition_once_its_window_is_complete():
    nb = NstepBuffer({"rew": {}, "next_obs": {}, "done": {}},
                     {"size": 3, "gamma": 0.5, "rew": "rew", "next": "next_obs"})
    assert nb.get_Nstep_size() == 3
    assert nb.add(rew=1, next_obs=10, done=0) is None
    assert nb.add(rew=2, next_obs=11, done=0) is None
    out = nb.add(rew=4, next_obs=12, done=0)
    assert out["rew"].tolist() == [[1 + 0.5 * 2 + 0.25 * 4]]
    assert out["next_obs"].tolist() == [[12]] and out["done"].tolist() == [[0]]
    assert out["rew"].dtype == np.float32


def test_nstep_buffer_stops_the_sum_at_done_and_flushes_the_tail_at_episode_end():
    nb = NstepBuffer({"rew": {}, "done": {}}, {"size": 3, "gamma": 0.5, "rew": "rew"})
    out = nb.add(rew=[1, 1, 1, 1], done=[0, 1, 0, 0])
    assert out["rew"][:, 0].tolist() == [1.5, 1.0]
    assert out["done"][:, 0].tolist() == [1, 1]
    tail = nb.on_episode_end()
    assert tail["rew"][:, 0].tolist() == [1.5, 1.0]  # windows of 2 and 1 steps
    assert nb.on_episode_end()["rew"].shape == (0, 1)


def test_nstep_buffer_names_a_missing_value():
    nb = NstepBuffer({"rew": {}, "done": {}}, {"size": 2, "rew": "rew"})
    with pytest.raises(KeyError, match="done"):
        nb.add(rew=1)
