"""replayd.cpprb's ``Nstep`` option against cpprb's NstepBuffer (cpprb/PyReplayBuffer.pyx):
a transition starting at step s stores ``sum_j r_j prod_{l<j} gamma (1 - done_l)`` over its
window, the ``next`` values of the window's last step and the sum of ``done``; a step is
stored once `size` steps from it on were added, the rest at ``on_episode_end()``; ``add``
returns None while nothing was stored. Expected values are worked out by hand below, with
gamma = 0.5 so that every value is exact in float32. Two places where cpprb is wrong are
checked for the right answer (see replayd/cpprb/nstep.py): the last step of a full window
counts in ``done``, and a flushed tail takes ``next_obs`` of the episode's last step."""
from __future__ import annotations

import pickle
from multiprocessing import ProcessError
from multiprocessing.managers import SyncManager

import numpy as np
import pytest

from replayd.cpprb import (MPPrioritizedReplayBuffer, MPReplayBuffer,
                           PrioritizedReplayBuffer, ReplayBuffer, create_buffer)

ENV = {"obs": {}, "rew": {}, "next_obs": {}, "done": {}}
NSTEP = {"size": 3, "gamma": 0.5, "rew": "rew", "next": "next_obs"}


@pytest.fixture
def rb_args(address, table_name):
    return {"address": address, "table": table_name}


def stored_by_obs(rb, draws=600):
    """obs -> (rew, next_obs, done) of every stored transition, read by sampling (each of
    at most 5 items is missed by 600 uniform draws with probability below 1e-50)."""
    s = rb.sample(draws)
    found = {}
    for obs, rew, nxt, done in zip(s["obs"][:, 0], s["rew"][:, 0], s["next_obs"][:, 0],
                                   s["done"][:, 0]):
        found[float(obs)] = (float(rew), float(nxt), float(done))
    return found


def add_step(rb, t, rew, done, **extra):
    return rb.add(obs=t, rew=rew, next_obs=t + 1, done=done, **extra)


def test_a_terminated_episode_stores_discounted_sums(rb_args):
    rb = ReplayBuffer(16, ENV, Nstep=NSTEP, **rb_args)
    assert rb.is_Nstep()
    # rewards 1..5, the episode terminates at step 4
    assert add_step(rb, 0, 1, 0) is None
    assert add_step(rb, 1, 2, 0) is None
    assert rb.get_stored_size() == 0
    assert add_step(rb, 2, 3, 0) == 0  # completes the window 0..2
    assert add_step(rb, 3, 4, 0) == 1
    assert add_step(rb, 4, 5, 1) == 2
    assert rb.get_current_episode_len() == 3  # stored transitions, as in cpprb
    rb.on_episode_end()
    assert rb.get_stored_size() == 5
    assert rb.get_next_index() == 5
    assert rb.get_current_episode_len() == 0
    assert stored_by_obs(rb) == {
        0.0: (1 + 0.5 * 2 + 0.25 * 3, 3.0, 0.0),
        1.0: (2 + 0.5 * 3 + 0.25 * 4, 4.0, 0.0),
        2.0: (3 + 0.5 * 4 + 0.25 * 5, 5.0, 1.0),  # cpprb says 0.0 (drops the last done)
        3.0: (4 + 0.5 * 5, 5.0, 1.0),             # flushed by on_episode_end
        4.0: (5.0, 5.0, 1.0),
    }


def test_a_truncated_tail_bootstraps_from_the_last_next_obs(rb_args):
    rb = ReplayBuffer(16, ENV, Nstep=NSTEP, **rb_args)
    add_step(rb, 0, 1, 0)
    add_step(rb, 1, 1, 0)
    rb.on_episode_end()  # a time limit: no done
    assert stored_by_obs(rb) == {0.0: (1.5, 2.0, 0.0), 1.0: (1.0, 2.0, 0.0)}


def test_rewards_after_a_done_step_count_zero(rb_args):
    rb = ReplayBuffer(16, ENV, Nstep=NSTEP, **rb_args)
    add_step(rb, 0, 1, 1)
    add_step(rb, 1, 10, 0)
    add_step(rb, 2, 100, 0)
    assert stored_by_obs(rb) == {0.0: (1.0, 3.0, 1.0)}


def test_a_batch_add_equals_single_adds(rb_args, table_name):
    rb = ReplayBuffer(16, ENV, Nstep=NSTEP, **rb_args)
    t = np.arange(5, dtype=np.float32)
    assert rb.add(obs=t, rew=t + 1, next_obs=t + 1, done=[0, 0, 0, 0, 1]) == 0
    assert rb.get_stored_size() == 3
    rb.on_episode_end()
    assert stored_by_obs(rb)[2.0] == (6.25, 5.0, 1.0)
    assert stored_by_obs(rb)[3.0] == (6.5, 5.0, 1.0)


def test_without_rew_and_next_only_done_is_summed(rb_args):
    rb = ReplayBuffer(16, ENV, Nstep={"size": 2}, **rb_args)
    add_step(rb, 0, 7, 0)
    add_step(rb, 1, 9, 1)
    assert stored_by_obs(rb) == {0.0: (7.0, 1.0, 1.0)}


def test_clear_forgets_cached_steps(rb_args):
    rb = ReplayBuffer(16, ENV, Nstep=NSTEP, **rb_args)
    add_step(rb, 0, 1, 0)
    add_step(rb, 1, 1, 0)
    rb.clear()
    add_step(rb, 5, 2, 1)
    rb.on_episode_end()
    assert stored_by_obs(rb) == {5.0: (2.0, 6.0, 1.0)}


def test_a_pickled_copy_does_not_carry_the_cached_steps(rb_args):
    rb = ReplayBuffer(16, ENV, Nstep=NSTEP, **rb_args)
    add_step(rb, 0, 1, 0)
    copy = pickle.loads(pickle.dumps(rb))
    copy.on_episode_end()
    assert copy.get_stored_size() == 0
    rb.on_episode_end()
    assert rb.get_stored_size() == 1


def test_priorities_travel_with_their_step(rb_args):
    rb = PrioritizedReplayBuffer(16, ENV, alpha=1.0, eps=1e-6, Nstep=NSTEP, **rb_args)
    assert rb.is_Nstep()
    for t, p in enumerate([1e6, 1e-3, 1e-3, 1e-3]):
        assert add_step(rb, t, 1, 0, priorities=p) == (None if t < 2 else t - 2)
    assert rb.get_max_priority() == 1e6
    s = rb.sample(200)
    assert np.mean(s["obs"][:, 0] == 0) > 0.95  # obs 0 carries the large priority
    with pytest.raises(ValueError, match="priorities"):
        rb.add(obs=[1, 2], rew=[1, 2], next_obs=[2, 3], done=[0, 0], priorities=[1.0])


def test_bad_nstep_settings_are_refused(rb_args):
    with pytest.raises(KeyError, match="done"):
        ReplayBuffer(4, {"obs": {}, "rew": {}}, Nstep={"size": 2}, **rb_args)
    with pytest.raises(KeyError, match="reward"):
        ReplayBuffer(4, ENV, Nstep={"size": 2, "rew": "reward"}, **rb_args)
    with pytest.raises(ValueError, match="size"):
        ReplayBuffer(4, ENV, Nstep={"gamma": 0.9}, **rb_args)


def test_create_buffer_passes_nstep_on(rb_args):
    rb = create_buffer(8, ENV, prioritized=True, Nstep=NSTEP, **rb_args)
    assert isinstance(rb, PrioritizedReplayBuffer) and rb.is_Nstep()
    assert not create_buffer(8, ENV, address=rb_args["address"]).is_Nstep()


def test_mp_buffers_raise_cpprb_errors_for_ctx_and_backend(address):
    for cls in (MPReplayBuffer, MPPrioritizedReplayBuffer):
        with pytest.raises(ValueError, match="Unknown backend: UNKNOWN"):
            cls(1, {"done": {}}, backend="UNKNOWN", address=address)
        with SyncManager() as manager:
            pass
        with pytest.raises(ProcessError, match="shut down"):
            cls(10, {"done": {}}, ctx=manager, address=address)
        cls(10, {"done": {}}, ctx=SyncManager(), backend="SharedMemory", address=address)
