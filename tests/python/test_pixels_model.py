"""Frame fields (docs/PIXELS.md) against a pure-numpy reference model: random streams of
several interleaved environments (terminations, truncations, ends with and without a final
observation, eviction past the capacity so the ring wraps many times) go through the real
server; every n-step and sequence sample's stacked `obs` and `next_obs`, return, discount
and step count are checked exactly against the model, by the start key each draw returns.

Model rules (the server's, docs/PIXELS.md): with next_of, an ended episode's last row is
its final observation (given to end_episode, or else its last step), never a start; an
n-step window of start p has h = min(k, last - p) steps once ended, k while open, and its
next observation is row p + h; a stack of s holds rows q-s+1 .. q, row 0 standing in for
rows before the episode's start; a start needs its s-1 earlier rows stored. A table with
pad_history=False has no rows before the start: a start also needs p >= s-1 (+ burn_in)."""
from __future__ import annotations

import random
from typing import Any, Dict, List, Optional, Set, Tuple

import numpy as np
import pytest

import replayd

FRAME = (3, 5)
STACK = 3


class Model:
    """The table: rows by (episode, position) in storage order, FIFO eviction."""

    def __init__(self, capacity: int, pad_history: bool = True) -> None:
        self.capacity = capacity
        self.pad_history = pad_history
        self.order: List[Tuple[int, int]] = []          # stored rows, oldest first
        self.rows: Dict[Tuple[int, int], Dict[str, Any]] = {}
        self.length: Dict[int, int] = {}
        self.state: Dict[int, str] = {}                  # open, terminated, truncated
        self.key_of: Dict[Tuple[int, int], int] = {}
        self.row_of: Dict[int, Tuple[int, int]] = {}

    def store(self, episode: int, row: Dict[str, Any]) -> Tuple[int, int]:
        if len(self.order) == self.capacity:
            self.rows.pop(self.order.pop(0))
        position = self.length.setdefault(episode, 0)
        self.state.setdefault(episode, "open")
        self.length[episode] += 1
        self.rows[(episode, position)] = row
        self.order.append((episode, position))
        return episode, position

    def stored(self, episode: int, position: int) -> bool:
        return (episode, position) in self.rows

    def last(self, episode: int) -> int:
        return self.length[episode] - 1

    def valid(self, key: int, forward: int, short: bool, stride: int, backward: int) -> bool:
        """The window rules with next_of: `forward` counts the next observation's row."""
        episode, p = self.row_of[key]
        if not self.stored(episode, p) or p % stride:
            return False
        ended = self.state[episode] != "open"
        if ended and p == self.last(episode):
            return False
        if not self.pad_history and p < backward:
            return False
        if not all(self.stored(episode, q) for q in range(max(0, p - backward), p)):
            return False
        end = p + forward
        if ended and short and self.length[episode] < end:
            end = self.length[episode]
        return all(self.stored(episode, q) for q in range(p, end))

    def valid_starts(self, forward: int, short: bool, stride: int = 1,
                     backward: int = 0) -> Set[int]:
        return {self.key_of[r] for r in self.order
                if r in self.key_of and self.valid(self.key_of[r], forward, short, stride,
                                                   backward)}

    def history_rows(self) -> int:
        """Stored rows that only hold history (pad_history=False)."""
        return 0 if self.pad_history else sum(1 for _, p in self.order if p < STACK - 1)

    def frame(self, episode: int, position: int) -> np.ndarray:
        if position >= self.length[episode]:
            return np.zeros(FRAME, np.uint8)
        return self.rows[(episode, max(position, 0))]["obs"]

    def stack(self, episode: int, position: int) -> np.ndarray:
        return np.stack([self.frame(episode, q) for q in range(position - STACK + 1,
                                                               position + 1)])

    def nstep(self, key: int, k: int, gamma: float) -> Dict[str, Any]:
        episode, p = self.row_of[key]
        ended = self.state[episode] != "open"
        h = min(k, self.last(episode) - p) if ended else k
        total, scale = 0.0, 1.0
        for j in range(h):
            total += scale * float(self.rows[(episode, p + j)]["rew"])
            scale *= gamma
        terminal = ended and p + h == self.last(episode) and self.state[episode] == "terminated"
        return {"obs": self.stack(episode, p), "next_obs": self.stack(episode, p + h),
                "act": self.rows[(episode, p)]["act"], "rew": np.float32(total),
                "discount": np.float32(0.0 if terminal else gamma ** h),  # the reward's dtype
                "steps": h}

    def sequence(self, key: int, length: int, burn_in: int) -> Tuple[np.ndarray, np.ndarray]:
        episode, p = self.row_of[key]
        ended = self.state[episode] != "open"
        frames, mask = [], []
        for q in range(p - burn_in, p + length):
            real = (q >= 0 and self.stored(episode, q)
                    and not (ended and q == self.last(episode)))
            mask.append(1 if real else 0)
            frames.append(self.stack(episode, q))
        return np.stack(frames), np.array(mask, np.uint8)


def frame(rng: random.Random) -> np.ndarray:
    # A few distinct values, so zstd has something to compress.
    return np.array([[rng.randrange(4) * 60 for _ in range(FRAME[1])] for _ in range(FRAME[0])],
                    np.uint8)


def write_stream(writer: replayd.EpisodeWriter, model: Model, rng: random.Random, steps: int,
                 envs: int, current: List[Optional[int]], next_episode: List[int],
                 appended: List[Tuple[int, int]]) -> None:
    """Appends random steps; ends episodes at random, with a final observation or without.
    Flushes before each end, so the model stores rows in the server's order."""
    buffered: List[Tuple[int, Dict[str, Any]]] = []

    def sync() -> None:
        writer.flush()
        for episode, row in buffered:
            appended.append(model.store(episode, row))
        buffered.clear()

    for _ in range(steps):
        env = rng.randrange(envs)
        if current[env] is None:
            current[env] = next_episode[0]
            next_episode[0] += 1
        row = {"obs": frame(rng), "act": np.int32(rng.randrange(6)),
               "rew": np.float32(rng.randrange(-4, 5) / 4)}
        writer.append(env=env, **row)
        buffered.append((current[env], row))
        if len(buffered) >= 16:
            sync()
        if rng.random() < 0.1:
            episode = current[env]
            sync()
            terminated = rng.random() < 0.5
            if rng.random() < 0.8:
                final = frame(rng)
                writer.end_episode(env=env, terminated=terminated, obs=final)
                writer.flush()
                model.store(episode, {"obs": final, "act": np.int32(0), "rew": np.float32(0)})
            else:  # no final observation: the last step serves as one
                writer.end_episode(env=env, terminated=terminated)
                writer.flush()
            model.state[episode] = "terminated" if terminated else "truncated"
            current[env] = None
    sync()


def learn_keys(writer: replayd.EpisodeWriter, model: Model,
               appended: List[Tuple[int, int]]) -> None:
    for key, row in zip(writer.keys.tolist(), appended):
        model.key_of[row] = key
        model.row_of[key] = row


def check_nstep(client: replayd.Client, table: str, model: Model, k: int, gamma: float,
                draws: int) -> None:
    valid = model.valid_starts(k + 1, True, 1, STACK - 1)
    if not valid:
        return
    sample = client.sample(table, draws, nstep=k, gamma=gamma, beta=0.0)
    assert sample.state is not None and sample.state["size"] == len(valid)
    assert sample["obs"].shape == (draws, STACK, *FRAME)
    assert sample["next_obs"].shape == (draws, STACK, *FRAME)
    for i, key in enumerate(sample.keys.tolist()):
        assert key in valid, f"k={k}: start {key} is not a valid start"
        want = model.nstep(key, k, gamma)
        for name, value in want.items():
            got = sample.data[name][i]
            assert np.array_equal(got, value), (name, k, key, model.row_of[key], got, value)


def check_sequences(client: replayd.Client, table: str, model: Model, length: int,
                    burn_in: int, pad: bool, draws: int) -> None:
    valid = model.valid_starts(length, pad, 1, burn_in + STACK - 1)
    if not valid:
        return
    sample = client.sample_sequences(table, draws, length, burn_in=burn_in, pad=pad, beta=0.0)
    steps = burn_in + length
    assert sample["obs"].shape == (draws, steps, STACK, *FRAME)
    for i, key in enumerate(sample.keys.tolist()):
        assert key in valid, f"sequence start {key} is not a valid start"
        frames, mask = model.sequence(key, length, burn_in)
        assert sample.mask is not None and np.array_equal(sample.mask[i], mask), key
        assert np.array_equal(sample["obs"][i], frames), (key, model.row_of[key])


@pytest.mark.parametrize("compressed,sampler,padded", [
    (True, "uniform", True), (True, "prioritized", True), (False, "uniform", True),
    (False, "prioritized", True), (True, "prioritized", False), (False, "uniform", False)],
    ids=["zstd-uniform", "zstd-prioritized", "raw-uniform", "raw-prioritized",
         "zstd-prioritized-stored-history", "raw-uniform-stored-history"])
def test_stacks_and_next_obs_match_the_reference_model_across_starts_ends_and_wrap(
        client: replayd.Client, table_name: str, compressed: bool, sampler: str,
        padded: bool) -> None:
    rng = random.Random(hash((compressed, sampler, padded)) % 1000)
    capacity, envs = 90, 3
    client.create_table(table_name, {"obs": (np.uint8, FRAME), "act": (np.int32, ()),
                                     "rew": (np.float32, ())}, capacity, episodic=True,
                        sampler=sampler, seed=5, next_of=["obs"], stack={"obs": STACK},
                        compression={"obs": "zstd"} if compressed else None,
                        pad_history=padded)
    model = Model(capacity, padded)
    current: List[Optional[int]] = [None] * envs
    appended: List[Tuple[int, int]] = []
    with client.episode_writer(table_name, envs=envs, batch=8, keep_keys=True) as writer:
        for phase in range(4):  # the ring wraps several times
            write_stream(writer, model, rng, 120, envs, current, [phase * 1000 + 1], appended)
            learn_keys(writer, model, appended)
            info = client.table_info(table_name)
            assert info["description"]["pad_history"] is padded
            assert info.get("history_steps", 0) == model.history_rows()
            for k in (1, 3, 5):
                check_nstep(client, table_name, model, k, round(rng.random(), 4), 200)
            for length, burn_in, pad in ((4, 0, False), (4, 2, True), (6, 0, True)):
                check_sequences(client, table_name, model, length, burn_in, pad, 100)
    # Closing ended the open episodes as truncated, without final observations.
    for episode in current:
        if episode is not None and model.length.get(episode):
            model.state[episode] = "truncated"
    check_nstep(client, table_name, model, 3, 0.5, 300)
    check_sequences(client, table_name, model, 5, 1, True, 200)


def test_read_all_returns_every_stored_row_decompressed(client: replayd.Client,
                                                        table_name: str) -> None:
    client.create_table(table_name, {"obs": (np.uint8, FRAME), "rew": (np.float32, ())}, 50,
                        episodic=True, next_of=["obs"], stack={"obs": 2},
                        compression={"obs": ("zstd", 7)})
    rng = random.Random(3)
    written = []
    with client.episode_writer(table_name, batch=4) as writer:
        for _ in range(3):
            for _ in range(6):
                obs = frame(rng)
                writer.append(obs=obs, rew=1.0)
                written.append(obs)
            final = frame(rng)
            writer.end_episode(obs=final)  # sent with the next batch ("final_columns")
            written.append(final)
    rows = [page["obs"] for page in client.read_all(table_name)]
    got = np.concatenate(rows)
    assert got.shape == (len(written), *FRAME)
    assert {bytes(r) for r in got} == {bytes(r) for r in written}
