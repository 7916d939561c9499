"""Episodic tables over three real servers through ShardedClient: each episode stays on
one shard, n-step and sequence samples are drawn from the union exactly as one table
would draw them, and reading covers every shard."""
from __future__ import annotations

import pickle
from typing import Dict, List, Tuple

import numpy as np
import pytest

import replayd
from replayd.sharded import SHARD_BITS

FIELDS = {"obs": (np.float32, (2,)), "rew": (np.float32, ()), "next_obs": (np.float32, (2,))}
# Episode j (written one after another by one env) has LENGTHS[j] steps and terminates.
LENGTHS = [2, 5, 9, 3, 1, 4]
# 99.9% quantiles of the chi-square distribution (scipy.stats.chi2.ppf(0.999, df)).
CHI2_999 = {12: 32.909, 23: 49.728}


@pytest.fixture
def shards(make_server):
    servers = [make_server(tcp=False) for _ in range(3)]
    with replayd.ShardedClient([s.unix_address for s in servers], seed=5, timeout=30) as client:
        yield client


def step(episode: int, position: int) -> Dict[str, np.ndarray]:
    return {"obs": np.array([episode, position], np.float32), "rew": np.float32(1),
            "next_obs": np.array([episode, position + 1], np.float32)}


def write(shards: replayd.ShardedClient, table: str) -> List[int]:
    """Writes the LENGTHS episodes with one env; returns each episode's shard."""
    shards.create_table(table, FIELDS, 300, episodic=True, seed=2)
    shard_of = []
    with shards.episode_writer(table, batch=3) as writer:
        for episode, length in enumerate(LENGTHS):
            for position in range(length):
                writer.append(**step(episode, position))
            shard_of.append(writer.shard_of(0))
            writer.end_episode()
        assert writer.shard_of(0) is None
    return shard_of


def shard_of_keys(keys: np.ndarray) -> np.ndarray:
    return (np.asarray(keys, np.uint64) >> np.uint64(64 - SHARD_BITS)).astype(int)


def test_each_episode_stays_on_the_shard_chosen_round_robin_when_it_opened(shards):
    shard_of = write(shards, "ep")
    assert shard_of == [0, 1, 2, 0, 1, 2]
    assert [s.size("ep") for s in shards.shards] == [2 + 3, 5 + 1, 9 + 4]
    episodes = list(shards.episodes("ep"))
    assert len(episodes) == len(LENGTHS)
    for episode in episodes:
        written = {int(e) for e in episode["obs"][:, 0]}
        assert len(written) == 1  # one written episode per stored episode
        j = written.pop()
        assert episode["position"].tolist() == list(range(LENGTHS[j]))
        assert episode["obs"][:, 1].tolist() == list(range(LENGTHS[j]))
        # Keys and episode ids are global: they name the shard the episode went to.
        assert set(shard_of_keys(episode["key"])) == {shard_of[j]}
        assert set(shard_of_keys(episode["episode"])) == {shard_of[j]}
    pages = list(shards.read_all("ep", page=4))
    assert sum(len(page["key"]) for page in pages) == sum(LENGTHS)


def test_envs_each_pin_their_episode_and_writers_pickle(shards):
    shards.create_table("envs", FIELDS, 300, episodic=True)
    writer = shards.episode_writer("envs", envs=2, batch=2, keep_keys=True)
    writer.append(env=0, **step(0, 0))
    writer.append(env=1, **step(1, 0))
    assert (writer.shard_of(0), writer.shard_of(1)) == (0, 1)
    for position in range(1, 4):
        writer.append(env=0, **step(0, position))
        writer.append(env=1, **step(1, position))
    writer.end_episode(env=1)
    writer.append(env=1, **step(2, 0))  # env 1's next episode: the next shard
    assert (writer.shard_of(0), writer.shard_of(1)) == (0, 2)
    with pytest.raises(replayd.InvalidArgument, match="env must be in 0..1"):
        writer.append(env=2, **step(0, 0))
    writer.close()  # env 0's episode and env 1's second one end as truncated
    assert [s.size("envs") for s in shards.shards] == [4, 4, 1]
    assert len(writer.keys) == 9 and set(shard_of_keys(writer.keys)) == {0, 1, 2}
    clone = pickle.loads(pickle.dumps(writer))
    with clone:
        clone.append(**step(3, 0))
    assert shards.size("envs") == 10


def starts_of(shard_of: List[int], length: int, pad: bool) -> List[Tuple[int, int]]:
    """Valid starts (episode, position) of windows of `length` over ended episodes."""
    return [(j, p) for j, n in enumerate(LENGTHS) for p in range(n)
            if pad or p + length <= n]


def draw_union(sample_call, starts: List[Tuple[int, int]], shard_of: List[int],
               calls: int) -> np.ndarray:
    """Counts of each start over `calls` samples; checks every row's probability, weight and
    that its window is one episode on the shard its key names."""
    index = {start: i for i, start in enumerate(starts)}
    counts = np.zeros(len(starts))
    for _ in range(calls):
        sample = sample_call()
        assert len(sample) == 256
        np.testing.assert_allclose(sample.probabilities, 1 / len(starts), rtol=1e-12)
        np.testing.assert_allclose(sample.weights, 1.0, rtol=1e-12)
        obs = sample.data["obs"]
        if obs.ndim == 3:  # sequences: every real row of one episode, starting at row 0
            assert sample.mask is not None and sample.mask.all()
            assert (obs[:, :, 0] == obs[:, :1, 0]).all()
            assert (np.diff(obs[:, :, 1], axis=1) == 1).all()
            obs = obs[:, 0]
        else:  # n-step: the bootstrap comes from the same episode
            assert (sample.data["next_obs"][:, 0] == obs[:, 0]).all()
        episodes = obs[:, 0].astype(int)
        assert (shard_of_keys(sample.keys) == np.array(shard_of)[episodes]).all()
        for episode, position in obs.astype(int).tolist():
            counts[index[(episode, position)]] += 1
    return counts


def chi_square(counts: np.ndarray) -> float:
    expected = counts.sum() / len(counts)
    return float(((counts - expected) ** 2 / expected).sum())


def test_sharded_nstep_samples_draw_every_valid_start_of_the_union_uniformly(shards):
    shard_of = write(shards, "ns")
    starts = starts_of(shard_of, 3, pad=True)  # n-step windows may end with the episode
    assert len(starts) == 24

    def call():
        return shards.sample("ns", 256, nstep=3, gamma=0.9)

    call()  # the first call splits by step counts; later ones by the shards' own replies
    counts = draw_union(call, starts, shard_of, calls=40)
    assert chi_square(counts) < CHI2_999[23]


def test_sharded_sequences_draw_every_valid_start_of_the_union_uniformly(shards):
    shard_of = write(shards, "seq")
    # Starts of 3 whole steps: 1, 3 and 9 on the shards, not in proportion to their steps.
    starts = starts_of(shard_of, 3, pad=False)
    assert len(starts) == 13

    def call():
        return shards.sample_sequences("seq", 256, 3)

    call()
    counts = draw_union(call, starts, shard_of, calls=40)
    assert chi_square(counts) < CHI2_999[12]
    # The prefetching iterator draws the same way.
    with shards.sequence_sampler("seq", 256, 3, prefetch=2) as sampler:
        counts = draw_union(lambda: next(sampler), starts, shard_of, calls=10)
    assert counts.min() > 0


def test_sharded_prioritized_sequences_draw_each_start_by_its_priority(shards):
    shards.create_table("prio", FIELDS, 300, episodic=True, sampler="prioritized",
                        priority_exponent=1.0, seed=2)
    shard_of = []
    with shards.episode_writer("prio", batch=3) as writer:
        for episode, length in enumerate(LENGTHS):
            for position in range(length):
                writer.append(**step(episode, position))
            shard_of.append(writer.shard_of(0))
            writer.end_episode()
    # Priority of step (episode j, position p): 1 + p + 3 j, so shards' masses differ from
    # their step counts and valid starts.
    for page in shards.read_all("prio"):
        episodes, positions = page["obs"][:, 0], page["obs"][:, 1]
        shards.update_priorities("prio", page["key"], 1 + positions + 3 * episodes)
    # Whole windows of 3 steps: each shard's starts hold only part of its mass.
    starts = starts_of(shard_of, 3, pad=False)
    priority = np.array([1 + p + 3 * j for j, p in starts], np.float64)
    expected = priority / priority.sum()
    index = {start: i for i, start in enumerate(starts)}

    def call():
        return shards.sample_sequences("prio", 256, 3, beta=1.0)

    call()  # splits by the tables' masses; the replies then give the windows' masses
    counts = np.zeros(len(starts))
    for _ in range(40):
        sample = call()
        rows = [index[(j, p)] for j, p in sample.data["obs"][:, 0].astype(int).tolist()]
        np.testing.assert_allclose(sample.probabilities, expected[rows], rtol=1e-9)
        np.testing.assert_allclose(sample.weights, (expected[rows] / expected.min()) ** -1.0,
                                   rtol=1e-9)
        np.add.at(counts, rows, 1)
    statistic = float(((counts - counts.sum() * expected) ** 2 /
                       (counts.sum() * expected)).sum())
    assert statistic < CHI2_999[12]


def test_sharded_window_samples_refuse_tables_that_are_not_episodic(shards):
    shards.create_table("plain", FIELDS, 30)
    with pytest.raises(replayd.InvalidArgument, match="'plain' is not episodic"):
        shards.sample_sequences("plain", 4, 2)


def test_a_sharded_nstep_sampler_yields_union_nstep_samples(shards):
    shard_of = write(shards, "it")
    with shards.sampler("it", 64, nstep=2, gamma=0.5, prefetch=3) as sampler:
        for _ in range(5):
            sample = next(sampler)
            assert len(sample) == 64 and "discount" in sample.data
            episodes = sample.data["obs"][:, 0].astype(int)
            assert (shard_of_keys(sample.keys) == np.array(shard_of)[episodes]).all()


def test_a_sharded_episode_writer_keeps_no_keys_unless_asked(shards):
    write(shards, "quiet")  # keep_keys off: nothing collected
    with shards.episode_writer("quiet") as writer:
        writer.append(**step(0, 0))
        with pytest.raises(replayd.ReplayError, match="keep_keys=True"):
            writer.keys
    with shards.episode_writer("quiet", keep_keys=True) as writer:
        writer.append(**step(0, 0))
        writer.flush()
        assert len(writer.keys) == 1


def test_sharded_nstep_samples_have_int64_steps_and_the_reward_dtype_discount(shards):
    write(shards, "dtypes")
    sample = shards.sample("dtypes", 32, nstep=3, gamma=0.9)
    assert sample["steps"].dtype == np.int64
    assert sample["discount"].dtype == sample["rew"].dtype == np.float32
