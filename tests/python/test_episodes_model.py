"""Episodic tables against a pure-numpy reference model: a random stream of steps from
several interleaved environments (random terminations and truncations, eviction past the
capacity) goes through the real server; every n-step and sequence sample is checked
exactly against the model, by the start key it returns; sequence starts are drawn
uniformly over exactly the valid starts (docs/TRAJECTORIES.md, window rules)."""
from __future__ import annotations

import math
import random
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np
import pytest

import replayd

FIELDS = {"obs": (np.float32, (2,)), "act": (np.int64, ()), "rew": (np.float32, ()),
          "next_obs": (np.float32, (2,))}
ZEROS = {"obs": np.zeros(2, np.float32), "act": np.int64(0), "rew": np.float32(0),
         "next_obs": np.zeros(2, np.float32)}


class Model:
    """What the table should hold: steps by key in insertion order (FIFO eviction), and
    per episode its length, state and the key of each stored position."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.order: List[int] = []                       # stored keys, oldest first
        self.steps: Dict[int, Tuple[int, int, Dict[str, Any]]] = {}  # key -> (ep, pos, row)
        self.length: Dict[int, int] = {}
        self.state: Dict[int, str] = {}                  # open, terminated, truncated
        self.slots: Dict[int, Dict[int, int]] = {}       # ep -> position -> key

    def store(self, key: int, episode: int, row: Dict[str, Any]) -> None:
        if len(self.order) == self.capacity:
            old = self.order.pop(0)
            ep, pos, _ = self.steps.pop(old)
            del self.slots[ep][pos]
        position = self.length.setdefault(episode, 0)
        self.state.setdefault(episode, "open")
        self.length[episode] += 1
        self.steps[key] = (episode, position, row)
        self.slots.setdefault(episode, {})[position] = key
        self.order.append(key)

    def stored(self, episode: int, position: int) -> bool:
        return position in self.slots.get(episode, {})

    def valid(self, key: int, forward: int, short: bool, stride: int, backward: int) -> bool:
        episode, p, _ = self.steps[key]
        if p % stride:
            return False
        if not all(self.stored(episode, q) for q in range(max(0, p - backward), p)):
            return False
        n = self.length[episode]
        end = p + forward
        if self.state[episode] != "open" and short and n < end:
            end = n
        return all(self.stored(episode, q) for q in range(p, end))

    def valid_starts(self, forward: int, short: bool, stride: int = 1,
                     backward: int = 0) -> Set[int]:
        return {k for k in self.order if self.valid(k, forward, short, stride, backward)}

    def nstep(self, key: int, k: int, gamma: float) -> Dict[str, Any]:
        episode, p, row = self.steps[key]
        left = self.length[episode] - p
        ended = self.state[episode] != "open"
        h = left if ended and left <= k else k
        total, scale = 0.0, 1.0
        for j in range(h):
            total += scale * float(self.steps[self.slots[episode][p + j]][2]["rew"])
            scale *= gamma
        last = self.steps[self.slots[episode][p + h - 1]][2]
        terminal = ended and left <= k and self.state[episode] == "terminated"
        return {"obs": row["obs"], "act": row["act"], "rew": np.float32(total),
                "next_obs": last["next_obs"],
                "discount": np.float32(0.0 if terminal else gamma ** h),  # the reward's dtype
                "steps": h}

    def sequence(self, key: int, length: int, burn_in: int) -> Tuple[Dict[str, Any], Any]:
        episode, p, _ = self.steps[key]
        rows: Dict[str, List[Any]] = {name: [] for name in FIELDS}
        mask = []
        for q in range(p - burn_in, p + length):
            stored = q >= 0 and self.stored(episode, q)
            row = self.steps[self.slots[episode][q]][2] if stored else ZEROS
            mask.append(1 if stored else 0)
            for name in FIELDS:
                rows[name].append(row[name])
        return {name: np.stack([np.asarray(v) for v in values])
                for name, values in rows.items()}, np.array(mask, np.uint8)


def write_stream(writer: replayd.EpisodeWriter, model: Model, rng: random.Random,
                 steps: int, envs: int, current: List[Optional[int]],
                 next_episode: List[int]) -> None:
    """Appends `steps` random steps of `envs` environments, ending episodes at random;
    records them in the model (episode numbers are the model's own)."""
    pending: List[Tuple[int, Dict[str, Any]]] = []

    def sync() -> None:
        writer.flush()
        keys = writer.keys[len(writer.keys) - len(pending):]
        for key, (episode, row) in zip(keys, pending):
            model.store(key, episode, row)
        pending.clear()

    for _ in range(steps):
        env = rng.randrange(envs)
        if current[env] is None:
            current[env] = next_episode[0]
            next_episode[0] += 1
        row = {"obs": np.array([rng.random(), rng.random()], np.float32),
               "act": np.int64(rng.randrange(5)), "rew": np.float32(rng.uniform(-1, 1)),
               "next_obs": np.array([rng.random(), rng.random()], np.float32)}
        writer.append(env=env, **row)
        pending.append((current[env], row))
        if len(pending) >= 16:
            sync()
        if rng.random() < 0.08:
            terminated = rng.random() < 0.5
            sync()
            writer.end_episode(env=env, terminated=terminated)
            model.state[current[env]] = "terminated" if terminated else "truncated"
            current[env] = None
    sync()


def check_nstep(client: replayd.Client, table: str, model: Model, k: int, gamma: float,
                draws: int) -> None:
    valid = model.valid_starts(k, True)
    sample = client.sample(table, draws, nstep=k, gamma=gamma, beta=0.0)
    assert set(sample.data) == {"obs", "act", "rew", "next_obs", "discount", "steps"}
    assert sample["discount"].dtype == sample["rew"].dtype == np.float32
    assert sample["steps"].dtype == np.int64
    for i, key in enumerate(sample.keys.tolist()):
        assert key in valid, f"k={k}: start {key} is not a valid start"
        want = model.nstep(key, k, gamma)
        for name, value in want.items():
            got = sample.data[name][i]
            assert np.array_equal(got, value), (name, k, gamma, key, got, value)
        assert sample.probabilities[i] == pytest.approx(1.0 / len(valid), rel=1e-12)


def check_sequences(client: replayd.Client, table: str, model: Model, length: int,
                    stride: int, burn_in: int, pad: bool, draws: int) -> None:
    valid = model.valid_starts(length, pad, stride, burn_in)
    if not valid:
        return
    sample = client.sample_sequences(table, draws, length, stride=stride, burn_in=burn_in,
                                     pad=pad, beta=0.0)
    assert sample.mask is not None and sample.mask.shape == (draws, burn_in + length)
    for i, key in enumerate(sample.keys.tolist()):
        assert key in valid, f"sequence start {key} is not a valid start"
        rows, mask = model.sequence(key, length, burn_in)
        assert np.array_equal(sample.mask[i], mask), (key, sample.mask[i], mask)
        for name in FIELDS:
            assert np.array_equal(sample.data[name][i], rows[name]), (name, key)
        assert sample.probabilities[i] == pytest.approx(1.0 / len(valid), rel=1e-12)


@pytest.mark.parametrize("seed", [1, 2])
def test_nstep_and_sequence_samples_match_the_reference_model_exactly(
        client: replayd.Client, table_name: str, seed: int) -> None:
    rng = random.Random(seed)
    capacity, envs = 300, 4
    client.create_table(table_name, FIELDS, capacity, episodic=True, reward="rew", seed=seed)
    model = Model(capacity)
    current: List[Optional[int]] = [None] * envs
    next_episode = [1]
    with client.episode_writer(table_name, envs=envs, batch=8, keep_keys=True) as writer:
        for phase in range(4):  # later phases evict past the capacity
            write_stream(writer, model, rng, 250, envs, current, next_episode)
            for k in (1, 3, 10):
                # Four decimals: the server's JSON parser reads such a number exactly as
                # Python does (longer ones may differ in the last bit, docs/PROTOCOL.md).
                check_nstep(client, table_name, model, k, round(rng.random(), 4), 400)
            check_nstep(client, table_name, model, 3, 1.0, 200)
            check_nstep(client, table_name, model, 3, 0.0, 200)
            for length, stride, burn_in, pad in ((5, 1, 0, False), (5, 1, 0, True),
                                                 (4, 2, 3, True), (6, 3, 2, False)):
                check_sequences(client, table_name, model, length, stride, burn_in, pad, 300)
    # The writer closed: its open episodes ended as truncated, steps kept.
    for env, episode in enumerate(current):
        if episode is not None and model.length.get(episode):
            model.state[episode] = "truncated"
    check_nstep(client, table_name, model, 10, 0.9, 400)
    check_sequences(client, table_name, model, 5, 1, 2, True, 400)


def test_sequence_starts_are_uniform_over_exactly_the_valid_starts(
        client: replayd.Client, table_name: str) -> None:
    rng = random.Random(7)
    capacity, envs = 120, 3
    client.create_table(table_name, FIELDS, capacity, episodic=True, seed=11)
    model = Model(capacity)
    current: List[Optional[int]] = [None] * envs
    with client.episode_writer(table_name, envs=envs, batch=8, keep_keys=True) as writer:
        write_stream(writer, model, rng, 200, envs, current, [1])
        valid = model.valid_starts(4, True, 2, 1)
        assert len(valid) > 10
        counts: Dict[int, int] = {}
        draws = 0
        for _ in range(40):
            sample = client.sample_sequences(table_name, 500, 4, stride=2, burn_in=1,
                                             pad=True, beta=0.0)
            for key in sample.keys.tolist():
                counts[key] = counts.get(key, 0) + 1
            draws += 500
    assert set(counts) == valid  # every valid start drawn, nothing else
    expected = draws / len(valid)
    chi2 = sum((counts[key] - expected) ** 2 / expected for key in valid)
    dof = len(valid) - 1
    # Wilson-Hilferty: the chi-square quantile at p = 1e-4 (z = 3.72).
    bound = dof * (1 - 2 / (9 * dof) + 3.72 * math.sqrt(2 / (9 * dof))) ** 3
    assert chi2 < bound, (chi2, bound, dof)
