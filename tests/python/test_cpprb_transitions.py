"""replayd.cpprb's get_all_transitions, _encode_sample, save_transitions and
load_transitions against cpprb's source (cpprb/PyReplayBuffer.pyx): get_all_transitions is
``_encode_sample(np.arange(get_stored_size()))`` (ring positions 0 .. size-1, so once the
ring wrapped the oldest is at get_next_index()), shuffled by ``np.random.shuffle``;
save_transitions writes ``np.savez_compressed(file, safe=True, version=1,
data=get_all_transitions(), Nstep=is_Nstep(), cache=None)``; load_transitions checks
``Nstep`` and ``version`` and adds ``data`` (as stored n-step transitions when Nstep)."""
from __future__ import annotations

import io
import json
import time

import numpy as np
import pytest

from replayd.cpprb import PrioritizedReplayBuffer, ReplayBuffer

ENV = {"obs": {"dtype": np.int64}, "v": {"shape": 2}}
NSTEP_ENV = {"obs": {}, "rew": {}, "next_obs": {}, "done": {}}
NSTEP = {"size": 3, "gamma": 0.5, "rew": "rew", "next": "next_obs"}


@pytest.fixture
def rb_args(address, table_name):
    return {"address": address, "table": table_name}


def add_range(rb, values):
    for i in values:
        rb.add(obs=i, v=[i, -i])


def test_get_all_transitions_follows_the_ring(rb_args):
    rb = ReplayBuffer(4, ENV, **rb_args)
    add_range(rb, range(3))
    got = rb.get_all_transitions()
    assert got["obs"].dtype == np.int64 and got["obs"].shape == (3, 1)
    assert got["v"].dtype == np.float32 and got["v"].shape == (3, 2)
    assert got["obs"].ravel().tolist() == [0, 1, 2]
    add_range(rb, range(3, 6))  # 4 and 5 overwrite positions 0 and 1
    got = rb.get_all_transitions()
    assert got["obs"].ravel().tolist() == [4, 5, 2, 3]
    assert got["v"].tolist() == [[4, -4], [5, -5], [2, -2], [3, -3]]


def test_a_batch_larger_than_the_ring_lands_where_cpprb_puts_it(rb_args):
    rb = ReplayBuffer(4, ENV, **rb_args)
    rb.add(obs=np.arange(6), v=np.zeros((6, 2)))
    assert rb.get_next_index() == 2
    assert rb.get_all_transitions()["obs"].ravel().tolist() == [4, 5, 2, 3]


def test_shuffle_uses_numpy_global_random_state(rb_args):
    rb = ReplayBuffer(8, ENV, **rb_args)
    add_range(rb, range(6))
    np.random.seed(3)
    got = rb.get_all_transitions(shuffle=True)["obs"].ravel()
    np.random.seed(3)
    idx = np.arange(6)
    np.random.shuffle(idx)
    assert got.tolist() == idx.tolist()


def test_get_all_transitions_of_an_empty_buffer(rb_args):
    rb = PrioritizedReplayBuffer(4, ENV, **rb_args)
    add_range(rb, range(2))
    rb.clear()
    got = rb.get_all_transitions()
    assert got["obs"].shape == (0, 1) and got["v"].shape == (0, 2)


def test_encode_sample_reads_ring_positions(rb_args):
    rb = ReplayBuffer(4, ENV, **rb_args)
    add_range(rb, range(3))
    assert rb._encode_sample([2, 0])["obs"].ravel().tolist() == [2, 0]
    # never written: what cpprb's memory starts with, 1 in every value
    assert rb._encode_sample([3, 1])["obs"].ravel().tolist() == [1, 1]
    assert rb._encode_sample([3])["v"].tolist() == [[1, 1]]
    with pytest.raises(IndexError, match="outside"):
        rb._encode_sample([4])
    add_range(rb, range(3, 5))
    assert rb._encode_sample(0)["obs"].ravel().tolist() == [4]


def test_save_transitions_writes_cpprb_layout(rb_args, tmp_path):
    rb = ReplayBuffer(4, ENV, **rb_args)
    add_range(rb, range(6))
    rb.save_transitions(str(tmp_path / "rb"))  # numpy adds .npz, as for cpprb
    with np.load(tmp_path / "rb.npz", allow_pickle=True) as npz:
        assert sorted(npz.files) == ["Nstep", "cache", "data", "next_of", "safe", "version"]
        assert npz["safe"].item() is True and npz["version"].item() == 1
        assert npz["Nstep"].item() is False and npz["cache"].item() is None
        assert npz["next_of"].item() is None
        data = npz["data"].item()
    assert sorted(data) == ["obs", "v"]
    assert data["obs"].ravel().tolist() == [4, 5, 2, 3]
    assert data["obs"].dtype == np.int64 and data["v"].shape == (4, 2)


def test_a_file_written_as_cpprb_writes_it_loads(rb_args, tmp_path):
    path = tmp_path / "cpprb.npz"
    np.savez_compressed(path, safe=True, version=1,
                        data={"obs": np.array([[7], [8]]), "v": np.ones((2, 2)),
                              "extra": np.zeros(2)},  # values the buffer lacks are ignored
                        Nstep=False, cache=None)
    rb = ReplayBuffer(4, ENV, **rb_args)
    add_range(rb, [1])
    rb.load_transitions(str(path))
    assert rb.get_next_index() == 3
    got = rb.get_all_transitions()
    assert got["obs"].ravel().tolist() == [1, 7, 8]
    assert got["v"][1:].tolist() == [[1, 1], [1, 1]]


def test_save_then_load_into_another_buffer_through_a_file_object(rb_args, address):
    a = PrioritizedReplayBuffer(8, ENV, **rb_args)
    add_range(a, range(5))
    f = io.BytesIO()
    a.save_transitions(f)
    f.seek(0)
    b = PrioritizedReplayBuffer(8, ENV, address=address)
    b.load_transitions(f)
    assert b.get_all_transitions()["obs"].ravel().tolist() == [0, 1, 2, 3, 4]
    assert b.sample(4)["weights"].shape == (4,)


def test_load_refuses_what_cpprb_refuses(rb_args, tmp_path):
    rb = ReplayBuffer(4, ENV, **rb_args)
    data = {"obs": np.array([[1]]), "v": np.ones((1, 2))}
    cases = [({"safe": True, "version": 2, "Nstep": False}, "Unknown Format Version: 2"),
             ({"safe": True, "version": 1, "Nstep": True}, "mismatch for Nstep")]
    for i, (keys, message) in enumerate(cases):
        path = tmp_path / f"bad{i}.npz"
        np.savez_compressed(path, data=data, cache=None, **keys)
        with pytest.raises(ValueError, match=message):
            rb.load_transitions(path)
    assert rb.get_stored_size() == 0


def test_a_file_cpprb_saved_with_safe_false_loads(rb_args, tmp_path):
    # cpprb's next_of memory: rows of obs without next_obs; an episode ended at row 1
    # (its next_obs in the cache), row 3 is the newest (cached too)
    path = tmp_path / "unsafe.npz"
    np.savez_compressed(path, safe=False, version=1, Nstep=False, next_of=np.array(["obs"]),
                        data={"obs": np.array([[0], [1], [5], [6]]), "v": np.ones((4, 2))},
                        cache={1: {"next_obs": np.array([2])}, 3: {"next_obs": np.array([7])}})
    rb = ReplayBuffer(8, {"obs": {}, "v": {"shape": 2}}, next_of="obs", **rb_args)
    rb.load_transitions(path)
    got = rb.get_all_transitions()
    assert got["obs"].ravel().tolist() == [0, 1, 5, 6]
    assert got["next_obs"].ravel().tolist() == [1, 2, 6, 7]
    plain = ReplayBuffer(8, {"obs": {}, "next_obs": {}, "v": {"shape": 2}},
                         address=rb_args["address"])  # a buffer without next_of reads it too
    plain.load_transitions(path)
    assert plain.get_all_transitions()["next_obs"].ravel().tolist() == [1, 2, 6, 7]


def test_nstep_files_hold_finished_transitions(rb_args, address, tmp_path):
    rb = ReplayBuffer(8, NSTEP_ENV, Nstep=NSTEP, **rb_args)
    for t in range(3):
        rb.add(obs=t, rew=1, next_obs=t + 1, done=0)
    rb.on_episode_end()
    rb.save_transitions(tmp_path / "n.npz")
    with np.load(tmp_path / "n.npz", allow_pickle=True) as npz:
        assert npz["Nstep"].item() is True
        rew = npz["data"].item()["rew"].ravel().tolist()
    assert rew == [1.75, 1.5, 1.0]
    other = ReplayBuffer(8, NSTEP_ENV, Nstep=NSTEP, address=address)
    other.load_transitions(tmp_path / "n.npz")  # stored as they are, not summed again
    assert other.get_stored_size() == 3
    assert other.get_all_transitions()["rew"].ravel().tolist() == rew
    with pytest.raises(ValueError, match="mismatch for Nstep"):
        ReplayBuffer(8, NSTEP_ENV, address=address).load_transitions(tmp_path / "n.npz")


def test_adds_go_on_after_the_server_closed_an_idle_connection(make_server, tmp_path):
    """The server ends a closed connection's episodes; the next add opens a new one."""
    config = tmp_path / "idle.json"
    config.write_text(json.dumps({"limits": {"idle_timeout_ms": 300}}))
    server = make_server(extra_args=["--config", str(config)])
    rb = ReplayBuffer(8, ENV, address=server.unix_address)
    add_range(rb, range(2))
    rb.on_episode_end()
    add_range(rb, [2])
    assert rb.get_stored_size() == 3
    time.sleep(1.0)  # idle: the server closes the connection, ending the open episode
    add_range(rb, [3, 4])
    rb.on_episode_end()
    add_range(rb, [5])
    assert rb.get_all_transitions()["obs"].ravel().tolist() == [0, 1, 2, 3, 4, 5]


def test_dtypes_the_wire_lacks_are_stored_as_their_bytes(rb_args):
    env = {"a": {"dtype": np.longdouble}, "c": {"dtype": np.complex128, "shape": 2},
           "f": {}}
    rb = PrioritizedReplayBuffer(4, env, **rb_args)
    third = np.longdouble(1) / 3  # more digits than a float64 holds
    rb.add(a=third, c=[1 + 2j, 3 - 4j], f=0.5)
    rb.add(a=np.full(2, third), c=np.ones((2, 2)) * 1j, f=[1, 2])
    got = rb.get_all_transitions()
    assert got["a"].dtype == np.longdouble and got["a"].shape == (3, 1)
    assert (got["a"] == third).all()
    assert got["c"].dtype == np.complex128 and got["c"][0].tolist() == [1 + 2j, 3 - 4j]
    s = rb.sample(8)
    assert s["c"].shape == (8, 2) and s["c"].dtype == np.complex128
    assert (s["a"] == third).all()
    with pytest.raises(TypeError, match="env_dict\\['s'\\]"):
        ReplayBuffer(4, {"s": {"dtype": np.str_}}, address=rb_args["address"])
