"""replayd.cpprb's ``next_of`` and ``stack_compress`` (replayd/cpprb/pixel_frames.py) against a
pure-numpy reference model, on random streams through the real server.

The promise checked: every frame is stored once, and yet every sample, get_all_transitions
and get_stored_size return exactly the transitions given to ``add`` (cpprb's values:
``next_<name>`` and stacks on the last axis), whatever the stream does: episodes that end
with on_episode_end, episodes whose first stack repeats its first frame or not (zeros, as
SB3's VecFrameStack), a stream that jumps without on_episode_end, batch adds, and a ring
that wraps many times.

The model is cpprb's ring: the newest `size` transitions are stored, the one added t-th (from
0) at ring position t % size, however many stored episodes (and so history rows, H = the
largest stack - 1, written whenever a transition does not continue the previous one or
follows on_episode_end) the table holds. Each transition carries a unique ``act``, by which samples are matched to it."""
from __future__ import annotations

import os
import pickle
import random
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest

from conftest import resident_bytes
from replayd.cpprb import PrioritizedReplayBuffer, ReplayBuffer

FRAME = (2, 3)


@pytest.fixture
def rb_args(address, table_name):
    return {"address": address, "table": table_name}


class Model:
    """cpprb's ring of the newest `size` transitions."""

    def __init__(self, size: int, history: int) -> None:
        self.size = size
        self.history = history
        self.transitions: List[Dict[str, Any]] = []
        self.previous: Optional[Dict[str, Any]] = None

    def end(self) -> None:
        self.previous = None

    def add(self, transition: Dict[str, Any], continues: bool) -> None:
        self.transitions = (self.transitions + [transition])[-self.size:]
        self.previous = transition

    def drawable(self) -> List[Dict[str, Any]]:
        return list(self.transitions)

    def stored_size(self) -> int:
        return len(self.transitions)


class Stream:
    """Random transitions of episodes: frames of a few values, unique acts."""

    def __init__(self, rng: random.Random, stack: int, next_of: bool, stacked: bool) -> None:
        self.rng, self.stack, self.next_of, self.stacked = rng, stack, next_of, stacked
        self.act = 0
        self.frames: List[np.ndarray] = []

    def frame(self) -> np.ndarray:
        return np.array([[self.rng.randrange(5) * 50 for _ in range(FRAME[1])]
                         for _ in range(FRAME[0])], np.uint8)

    def reset(self) -> None:
        first = self.frame()
        kind = self.rng.randrange(3)  # repeated first frame, zeros before it, all distinct
        if kind == 0:
            self.frames = [first] * self.stack
        elif kind == 1:
            self.frames = [np.zeros(FRAME, np.uint8)] * (self.stack - 1) + [first]
        else:
            self.frames = [self.frame() for _ in range(self.stack - 1)] + [first]

    def value(self, frames: List[np.ndarray]) -> np.ndarray:
        return np.stack(frames, axis=-1) if self.stacked else frames[-1]

    def step(self) -> Dict[str, Any]:
        obs = self.value(self.frames[-self.stack:])
        self.frames.append(self.frame())
        self.act += 1
        transition = {"obs": obs, "act": np.array([self.act], np.float32),
                      "rew": np.array([self.rng.random()], np.float32),
                      "done": np.array([0.0], np.float32)}
        if self.next_of:
            transition["next_obs"] = self.value(self.frames[-self.stack:])
        return transition


def continues(a: Optional[Dict[str, Any]], b: Dict[str, Any], next_of: bool,
              stacked: bool) -> bool:
    if a is None:
        return False
    if next_of:
        return bool(np.array_equal(b["obs"], a["next_obs"]))
    return bool(np.array_equal(b["obs"][..., :-1], a["obs"][..., 1:]))


def env_dict(stack: int, stacked: bool) -> Dict[str, Any]:
    shape = (*FRAME, stack) if stacked else FRAME
    return {"obs": {"shape": shape, "dtype": np.uint8}, "act": {}, "rew": {}, "done": {}}


def ring_order(drawable: List[Dict[str, Any]], added: int, size: int) -> List[Dict[str, Any]]:
    """cpprb's ring order: insertion order until `added` reaches the size; then the newest
    at position (added - 1) % size and each older one a position before it."""
    if added < size:
        return drawable
    n = len(drawable)
    positions = [(added - n + j) % size for j in range(n)]
    return [t for _, t in sorted(zip(positions, drawable), key=lambda pair: pair[0])]


def check(rb: ReplayBuffer, model: Model, draws: int, added: int) -> None:
    drawable = model.drawable()
    assert rb.get_stored_size() == model.stored_size()
    assert rb.get_next_index() == added % model.size
    everything = rb.get_all_transitions()
    ring = ring_order(drawable, added, model.size)
    assert everything["act"][:, 0].tolist() == [t["act"][0] for t in ring]
    for name, value in everything.items():
        want = np.stack([t[name] for t in ring]) if ring else value[:0]
        assert value.dtype == want.dtype and np.array_equal(value, want), name
    if not drawable:
        return
    by_act = {int(t["act"][0]): t for t in drawable}
    sample = rb.sample(draws)
    seen = set()
    for i, act in enumerate(sample["act"][:, 0].astype(int).tolist()):
        assert act in by_act, f"transition {act} is not drawable"
        for name, want in by_act[act].items():
            assert np.array_equal(sample[name][i], want), (name, act)
        seen.add(act)
    assert seen == set(by_act), "some drawable transitions were never drawn"


@pytest.mark.parametrize("next_of,stacked", [(True, True), (True, False), (False, True)],
                         ids=["next_of-and-stack", "next_of", "stack"])
@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_samples_and_reads_return_exactly_what_was_added(rb_args, next_of, stacked,
                                                         prioritized):
    rng = random.Random(hash((next_of, stacked, prioritized)) % 997)
    stack = 3 if stacked else 1
    history = (stack if next_of else stack - 1) if stacked else 1
    size = 40
    kwargs = {"next_of": "obs"} if next_of else {}
    if stacked:
        kwargs["stack_compress"] = "obs"
    cls = PrioritizedReplayBuffer if prioritized else ReplayBuffer
    rb = cls(size, env_dict(stack, stacked), **kwargs, **rb_args)
    description = rb.client.table_info(rb.table)["description"]
    assert [f["name"] for f in description["fields"]][:4] == ["act", "rew", "done", "obs"]
    assert "next_obs" not in [f["name"] for f in description["fields"]]
    model = Model(size, history)
    stream = Stream(rng, stack, next_of, stacked)
    stream.reset()
    total = 0
    for round_ in range(8):  # 8 x ~40 transitions: the ring wraps several times
        added = 0
        while added < 40:
            roll = rng.random()
            if roll < 0.08:
                rb.on_episode_end()
                model.end()
                stream.reset()
                continue
            if roll < 0.12:  # a jump without on_episode_end
                stream.reset()
            batch = [stream.step() for _ in range(rng.choice([1, 1, 1, 2, 5]))]
            priorities = [rng.random() + 0.1 for _ in batch] if prioritized else None
            columns = {name: np.stack([t[name] for t in batch]) for name in batch[0]}
            if len(batch) == 1 and rng.random() < 0.5:
                columns = batch[0]
            if priorities is not None:
                rb.add(**columns, priorities=priorities if len(batch) > 1 else priorities[0])
            else:
                rb.add(**columns)
            for t in batch:
                model.add(t, continues(model.previous, t, next_of, stacked))
            added += len(batch)
        total += added
        check(rb, model, 1500, total)


def test_a_sample_right_after_add_sees_the_transition(rb_args):
    rb = ReplayBuffer(16, env_dict(4, True), next_of="obs", stack_compress="obs", **rb_args)
    obs = np.arange(24, dtype=np.uint8).reshape(*FRAME, 4)
    next_obs = np.concatenate([obs[..., 1:], np.full((*FRAME, 1), 99, np.uint8)], axis=-1)
    rb.add(obs=obs, act=7, rew=1.0, next_obs=next_obs, done=1.0)
    sample = rb.sample(3)
    assert np.array_equal(sample["obs"], np.stack([obs] * 3))
    assert np.array_equal(sample["next_obs"], np.stack([next_obs] * 3))
    assert not np.shares_memory(sample["obs"], sample["next_obs"])
    assert rb.get_stored_size() == 1


@pytest.mark.skipif("ASAN_OPTIONS" in os.environ,
                    reason="sanitizer shadow memory and redzones are not the table's")
def test_frames_are_stored_once(make_server):
    """A next_of + stack_compress buffer of u8[84, 84, 4] stacks takes about one frame of
    server memory per transition where the plain layout takes eight (obs and next_obs of
    four frames each), also after its ring has gone round three times. (The table's
    capacity has room for the history rows of an episode per transition, but slots freed
    by deletes are reused first, so only that many rows' pages are ever touched.)"""
    server = make_server(tcp=False)
    size, frame_bytes = 2000, 84 * 84
    shape = (84, 84, 4)
    env = {"obs": {"shape": shape, "dtype": np.uint8}, "act": {"dtype": np.int32},
           "rew": {}, "done": {}}
    framed = ReplayBuffer(size, env, next_of="obs", stack_compress="obs",
                          address=server.unix_address)
    fields = framed.client.table_info(framed.table)["description"]["fields"]
    assert [(f["name"], f["shape"], f.get("stack")) for f in fields if f["name"] == "obs"] == \
        [("obs", [84, 84], 5)]
    frames = np.random.default_rng(5).integers(0, 255, (504, 84, 84), dtype=np.uint8)
    stacks = np.stack([np.moveaxis(frames[t:t + 4], 0, -1) for t in range(501)])
    before = resident_bytes(server.proc.pid)
    for i in range(3 * size):  # episodes of 500 steps
        t = i % 500
        framed.add(obs=stacks[t], act=i, rew=0.5, next_obs=stacks[t + 1], done=0)
        if t == 499:
            framed.on_episode_end()
    assert framed.get_stored_size() == size
    framed.client.table_info(framed.table)  # every add stored
    grown = resident_bytes(server.proc.pid) - before
    assert grown < size * frame_bytes * 1.5, grown  # the plain layout: 8 frames each
    assert framed._encode_sample([0])["act"].tolist() == [[2 * size]]


def test_a_pickled_copy_starts_its_own_stored_episode(rb_args):
    rb = ReplayBuffer(32, env_dict(1, False), next_of="obs", **rb_args)
    rng = random.Random(4)
    stream = Stream(rng, 1, True, False)
    stream.reset()
    first = [stream.step() for _ in range(3)]
    for t in first:
        rb.add(**t)
    copy = pickle.loads(pickle.dumps(rb))
    second = [stream.step() for _ in range(3)]  # continues the stream, from another object
    for t in second:
        copy.add(**t)
    got = copy.get_all_transitions()
    assert got["act"][:, 0].tolist() == [1, 2, 3, 4, 5, 6]
    for i, t in enumerate(first + second):
        assert np.array_equal(got["obs"][i], t["obs"]) and \
            np.array_equal(got["next_obs"][i], t["next_obs"])
    assert copy.get_stored_size() == 6


def test_saved_transitions_hold_cpprb_values_and_load_back(rb_args, tmp_path):
    rb = ReplayBuffer(32, env_dict(3, True), next_of="obs", stack_compress="obs", **rb_args)
    stream = Stream(random.Random(9), 3, True, True)
    stream.reset()
    added = [stream.step() for _ in range(5)]
    for t in added:
        rb.add(**t)
    rb.on_episode_end()
    path = tmp_path / "frames.npz"
    rb.save_transitions(str(path))
    with np.load(path, allow_pickle=True) as f:
        data = f["data"].item()
    assert data["obs"].shape == (5, *FRAME, 3) and data["next_obs"].shape == (5, *FRAME, 3)
    assert np.array_equal(data["next_obs"], np.stack([t["next_obs"] for t in added]))
    other = ReplayBuffer(32, env_dict(3, True), next_of="obs", stack_compress="obs",
                         address=rb_args["address"])
    other.load_transitions(str(path))
    got = other.get_all_transitions()
    for name in ("obs", "next_obs", "act"):
        assert np.array_equal(got[name], data[name]), name


def test_stacks_of_an_ended_episode_are_not_overwritten_by_the_next(rb_args):
    """The case of cpprb's issue 97: an episode of three stacked values ended with
    on_episode_end, then a new one. cpprb's get_all_transitions gives the second value as
    [1, 2, 1] (the next episode's frame overwrote it); it must stay [1, 2, 3]."""
    rb = PrioritizedReplayBuffer(32, env_dict={"done": {"dtype": "bool"}, "a": {"shape": 3}},
                                 stack_compress="a", **rb_args)
    a = np.array([0, 1, 2])
    for i in range(3):
        done = i == 2
        rb.add(a=a, done=done)
        if done:
            rb.on_episode_end()
        a += 1
    rb.add(a=np.ones(3), done=False)
    got = rb.get_all_transitions()
    assert got["a"].tolist() == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [1, 1, 1]]
    assert got["a"].dtype == np.float32
    assert got["done"].tolist() == [[False], [False], [True], [False]]


def test_a_next_obs_that_is_no_shifted_stack_is_refused_with_nothing_stored(rb_args):
    """The case of cpprb's issue 108: obs all ones, next_obs all twos, which no stack of
    single frames holds (cpprb then samples an obs of [1, 2, 2, 2] rows). Refused, naming
    the values, before anything is stored; a batch holding one such transition stores
    none of its transitions."""
    rb = ReplayBuffer(32, {"obs": {"shape": (16, 16, 4)}, "rew": {}, "done": {}},
                      next_of="obs", stack_compress="obs", **rb_args)
    with pytest.raises(ValueError, match=r"next_obs must be obs shifted by one frame"):
        rb.add(obs=np.ones((16, 16, 4)), next_obs=np.ones((16, 16, 4)) + 1, rew=1, done=0)
    good = np.stack([np.full((16, 16), i, np.float32) for i in range(5)], axis=-1)
    batch = {"obs": np.stack([good[..., :4], np.ones((16, 16, 4))]),
             "next_obs": np.stack([good[..., 1:], np.ones((16, 16, 4)) + 1]),
             "rew": [1, 1], "done": [0, 0]}
    with pytest.raises(ValueError, match="shifted"):
        rb.add(**batch)
    assert rb.get_stored_size() == 0 and rb.get_next_index() == 0
    rb.add(obs=good[..., :4], next_obs=good[..., 1:], rew=1, done=0)
    sample = rb.sample(2)
    assert np.array_equal(sample["next_obs"][0], good[..., 1:])


def test_a_next_of_buffer_of_size_n_holds_n_transitions(rb_args):
    rb = ReplayBuffer(4, {"obs": {}}, next_of="obs", **rb_args)
    for i in range(4):
        rb.add(obs=float(i), next_obs=float(i + 1))
    got = rb.get_all_transitions()
    assert got["obs"][:, 0].tolist() == [0, 1, 2, 3]
    assert got["next_obs"][:, 0].tolist() == [1, 2, 3, 4]
    assert rb.get_stored_size() == 4


def test_encode_sample_reads_ring_positions_across_episodes(rb_args):
    rb = ReplayBuffer(4, {"obs": {"shape": (2, 3)}}, next_of="obs", stack_compress="obs",
                      **rb_args)
    frames = [np.full((2, 1), i, np.float32) for i in range(20)]

    def stack(t: int) -> np.ndarray:
        return np.concatenate(frames[t:t + 3], axis=-1)

    for episode in range(3):  # each a new stored episode with history rows
        for t in range(2):
            rb.add(obs=stack(5 * episode + t), next_obs=stack(5 * episode + t + 1))
        rb.on_episode_end()
    # cpprb's ring after 6 adds: positions 0, 1 hold the 5th and 6th transitions
    got = rb._encode_sample([0, 1])
    assert got["obs"][:, 0, 0].tolist() == [10, 11]
    assert got["next_obs"][:, 0, -1].tolist() == [13, 14]
    assert rb.get_all_transitions()["obs"][:, 0, 0].tolist() == [10, 11, 5, 6]
    s = rb.sample(200)
    assert set(s["obs"][:, 0, 0].tolist()) == {5.0, 6.0, 10.0, 11.0}


def test_prioritized_frame_buffer_indexes_are_ring_positions(rb_args):
    rb = PrioritizedReplayBuffer(3, {"obs": {}}, next_of="obs", **rb_args)
    for i in range(5):
        rb.add(obs=float(i), next_obs=float(i + 1))
        if i == 1:
            rb.on_episode_end()
    s = rb.sample(100)
    assert {int(i): float(o) for i, o in zip(s["indexes"], s["obs"][:, 0])} == \
        {0: 3.0, 1: 4.0, 2: 2.0}
    rb.update_priorities([2], [1e6])
    assert (rb.sample(100)["obs"][:, 0] == 2.0).mean() > 0.95


def stack_layouts(stack: np.ndarray) -> List[np.ndarray]:
    """The same (..., S) stack in the memory layouts a caller may hand over: frames
    interleaved (np.stack(axis=-1)), frame planes (np.moveaxis of (S, ...) frames, as in
    the benchmark), Fortran order, and a strided view into a larger array."""
    planes = np.moveaxis(np.ascontiguousarray(np.moveaxis(stack, -1, 0)), 0, -1)
    larger = np.zeros((stack.shape[0] * 2, *stack.shape[1:]), stack.dtype)
    larger[::2] = stack
    return [np.ascontiguousarray(stack), planes, np.asfortranarray(stack), larger[::2]]


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_a_stream_in_any_memory_layout_is_one_stored_episode_of_exact_values(rb_args, dtype):
    """Each add hands obs and next_obs over in a layout drawn at random: the stream still
    continues (the table holds its transitions' rows and the history rows of one stored
    episode, no more), every value comes back exactly, and a next_obs that is not the
    shifted obs is refused in every layout."""
    rb = ReplayBuffer(64, {"obs": {"shape": (5, 6, 4), "dtype": dtype}, "act": {}},
                      next_of="obs", stack_compress="obs", **rb_args)
    rng = np.random.default_rng(11)
    frames = (rng.integers(0, 4, (44, 5, 6)) * 60).astype(dtype)
    if dtype == np.float32:
        frames[frames == 0] = -0.0  # negative zeros stay negative
    stacks = [np.moveaxis(frames[t:t + 4], 0, -1) for t in range(41)]
    for t in range(40):
        obs, next_obs = (stack_layouts(stacks[t])[rng.integers(4)],
                         stack_layouts(stacks[t + 1])[rng.integers(4)])
        rb.add(obs=obs, act=float(t), next_obs=next_obs)
    got = rb.get_all_transitions()
    assert got["act"][:, 0].tolist() == list(range(40))
    for t in range(40):
        assert got["obs"][t].tobytes() == np.ascontiguousarray(stacks[t]).tobytes()
        assert got["next_obs"][t].tobytes() == np.ascontiguousarray(stacks[t + 1]).tobytes()
    assert int(rb.client.table_info(rb.table)["size"]) == 40 + 4  # one episode's H rows
    wrong = np.array(stacks[41 - 1])
    wrong[2, 3, 1] += 1  # frame 1 of next_obs is not frame 2 of obs
    for bad in stack_layouts(wrong):
        for obs in stack_layouts(stacks[39]):
            with pytest.raises(ValueError, match="shifted by one frame"):
                rb.add(obs=obs, act=99.0, next_obs=bad)
    assert rb.get_stored_size() == 40


def test_python_numbers_are_stored_as_numpy_casts_them(rb_args):
    """A frame buffer's other values given as Python numbers (passed to the writer as they
    are) come back as ``np.asarray(value, dtype)``, as when given as arrays: bools, ints
    for floats, floats for ints (truncated), -0.0, ints beyond 2**53 for floats."""
    env = {"obs": {"shape": (2, 2, 2), "dtype": np.uint8}, "act": {"dtype": np.int32},
           "rew": {}, "done": {"dtype": np.uint8}, "flag": {"dtype": np.bool_}}
    rb = ReplayBuffer(16, env, next_of="obs", stack_compress="obs", **rb_args)
    values = [{"act": 1, "rew": 0.1, "done": 0, "flag": True},
              {"act": -5, "rew": 1, "done": 255, "flag": False},
              {"act": 1.7, "rew": True, "done": True, "flag": 1},
              {"act": True, "rew": -0.0, "done": 1.0, "flag": 0},
              {"act": 2 ** 31 - 1, "rew": 2 ** 60 + 1, "done": np.uint8(7), "flag": 2.0},
              {"act": np.int64(3), "rew": 1e-50, "done": 3, "flag": np.bool_(True)}]
    frames = np.arange(len(values) + 2, dtype=np.uint8)
    for t, numbers in enumerate(values):
        stack = np.broadcast_to(frames[t:t + 3], (2, 2, 3))
        rb.add(obs=np.array(stack[..., :2]), next_obs=np.array(stack[..., 1:]), **numbers)
    got = rb.get_all_transitions()
    for name in ("act", "rew", "done", "flag"):
        want = np.stack([np.asarray(numbers[name], dtype=got[name].dtype).reshape(1)
                         for numbers in values])
        assert got[name].dtype == np.dtype(env[name].get("dtype", np.float32)), name
        assert got[name].tobytes() == want.tobytes(), (name, got[name], want)
