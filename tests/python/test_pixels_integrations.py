"""Frame fields (stack, next_of, zstd) through the client's other entry points: a
ShardedClient's episode writer and samples, and replayd.torch datasets. Each frame encodes
its episode and position, so every stacked value is checked exactly against the rules of
docs/PIXELS.md."""
from __future__ import annotations

import warnings
from typing import Dict

import numpy as np
import pytest

import replayd

FRAME = (4, 5)
STACK = 3
LENGTHS = [5, 7, 3, 6, 2]  # episode e has LENGTHS[e] steps, then its final observation
FIELDS = {"obs": (np.uint8, FRAME), "rew": (np.float32, ())}
FRAME_OPTIONS: Dict[str, object] = {"episodic": True, "next_of": ["obs"],
                                    "stack": {"obs": STACK}, "compression": {"obs": "zstd"}}


def frame(episode: int, position: int) -> np.ndarray:
    value = np.zeros(FRAME, np.uint8)
    value[0, 0], value[0, 1] = episode, position
    value[1:] = 7  # a body zstd compresses
    return value


def write(writer) -> None:
    for e, length in enumerate(LENGTHS):
        for p in range(length):
            writer.append(obs=frame(e, p), rew=np.float32(p))
        writer.end_episode(obs=frame(e, length))


def check_stack(stack: np.ndarray, episode: int, position: int) -> None:
    """Frames position-STACK+1 .. position of the episode, its first frame before its start."""
    for j in range(STACK):
        np.testing.assert_array_equal(np.asarray(stack[j]),
                                      frame(episode, max(position - (STACK - 1 - j), 0)))


def check_transitions(obs: np.ndarray, next_obs: np.ndarray) -> None:
    assert obs.shape[1:] == next_obs.shape[1:] == (STACK, *FRAME)
    for i in range(len(obs)):
        episode, position = int(obs[i, -1, 0, 0]), int(obs[i, -1, 0, 1])
        assert position < LENGTHS[episode]
        check_stack(obs[i], episode, position)
        check_stack(next_obs[i], episode, position + 1)


@pytest.fixture
def shards(make_server):
    servers = [make_server(tcp=False) for _ in range(2)]
    with replayd.ShardedClient([s.unix_address for s in servers], seed=3, timeout=30) as client:
        yield client


def test_a_sharded_writer_ends_episodes_with_their_final_frame_and_samples_stack(shards):
    shards.create_table("px", FIELDS, 200, **FRAME_OPTIONS)
    with shards.episode_writer("px", batch=4) as writer:
        write(writer)
    # Each episode's steps plus its final observation, on one shard or the other.
    assert sum(s.size("px") for s in shards.shards) == sum(LENGTHS) + len(LENGTHS)
    batch = shards.sample("px", 64, nstep=1)
    check_transitions(batch["obs"], batch["next_obs"])
    assert batch["obs"].shape == (64, STACK, *FRAME)
    sequences = shards.sample_sequences("px", 8, 2)
    assert sequences["obs"].shape == (8, 2, STACK, *FRAME)
    for window in sequences["obs"]:
        episode, start = int(window[0, -1, 0, 0]), int(window[0, -1, 0, 1])
        for t in range(2):
            check_stack(window[t], episode, start + t)
    with shards.sampler("px", 16, nstep=1) as sampler:
        batch = next(iter(sampler))
        check_transitions(batch["obs"], batch["next_obs"])


def test_torch_datasets_yield_stacked_frames_without_warnings(client, table_name):
    torch = pytest.importorskip("torch", reason="torch is not importable (Debian: "
                                                "python3-torch, installed by scripts/setup-deps)")
    import replayd.torch as rt
    client.create_table(table_name, FIELDS, 200, **FRAME_OPTIONS)
    with client.episode_writer(table_name, batch=4) as writer:
        write(writer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. torch's warning about read-only arrays
        dataset = rt.ReplayDataset(client, table_name, 16, nstep=1, num_batches=2)
        for batch in torch.utils.data.DataLoader(dataset, batch_size=None):
            assert batch["obs"].dtype == torch.uint8
            check_transitions(batch["obs"].numpy(), batch["next_obs"].numpy())
        dataset = rt.ReplayDataset(client, table_name, 4, sequence_length=2, num_batches=2)
        for batch in torch.utils.data.DataLoader(dataset, batch_size=None):
            assert batch["obs"].shape == (4, 2, STACK, *FRAME)
            assert batch["mask"].shape == (4, 2)
