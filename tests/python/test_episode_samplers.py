"""Prefetching iterators and Futures over n-step and sequence samples of episodic tables:
`Client.sampler(..., nstep=k)`, `Client.sequence_sampler`, `sample_async(..., nstep=k)`
and `sample_sequences_async`, against the real server."""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import pytest

import replayd
from waiting import wait_until

FIELDS = {"obs": (np.float32, (2,)), "rew": (np.float32, ()), "next_obs": (np.float32, (2,))}
LENGTHS = [5, 3, 7]  # episode e has LENGTHS[e] steps; episode 1 is truncated, the others end


def step(episode: int, position: int) -> Dict[str, np.ndarray]:
    """obs names the step (episode, position); the reward is position + 1."""
    return {"obs": np.array([episode, position], np.float32),
            "rew": np.float32(position + 1),
            "next_obs": np.array([episode, position + 1], np.float32)}


def write_episodes(client: replayd.Client, table: str) -> None:
    with client.episode_writer(table, envs=len(LENGTHS), batch=4) as writer:
        for position in range(max(LENGTHS)):
            for episode, length in enumerate(LENGTHS):
                if position < length:
                    writer.append(env=episode, **step(episode, position))
                if position == length - 1:
                    writer.end_episode(env=episode, terminated=episode != 1)


def check_nstep(sample: replayd.Sample, k: int, gamma: float, ended: bool = True) -> None:
    """Each row against the episodes written: return, bootstrap, discount and steps. Not
    `ended`: the sample may have been drawn before an episode ended, when a window reaching
    its last step still bootstraps."""
    for row in range(len(sample)):
        episode, position = (int(v) for v in sample.data["obs"][row])
        length = LENGTHS[episode]
        h = min(k, length - position)
        assert sample.data["steps"][row] == h
        expected = sum(gamma ** i * (position + i + 1) for i in range(h))
        assert sample.data["rew"][row] == pytest.approx(expected, rel=1e-6)
        assert sample.data["next_obs"][row].tolist() == [episode, position + h]
        ends_terminated = position + h == length and episode != 1
        expected_discounts = {0.0 if ends_terminated else gamma ** h}
        if not ended and position + h == length:
            expected_discounts.add(gamma ** h)
        discount = sample.data["discount"]  # gamma^h rounded to the reward's dtype, float32
        assert discount.dtype == sample.data["rew"].dtype == np.float32
        assert sample.data["steps"].dtype == np.int64
        assert discount[row] in {np.float32(d) for d in expected_discounts}


def check_sequences(sample: replayd.Sample, length: int, burn_in: int) -> None:
    """Each row: consecutive steps of one episode around the start, padding masked."""
    assert sample.mask is not None
    assert sample.data["obs"].shape == (len(sample), burn_in + length, 2)
    for row in range(len(sample)):
        mask = sample.mask[row]
        obs = sample.data["obs"][row]
        real = np.flatnonzero(mask)
        episode = int(obs[real[0], 0])
        start = int(obs[burn_in, 1])
        assert mask[burn_in] == 1
        for t in range(burn_in + length):
            position = start - burn_in + t
            if 0 <= position < LENGTHS[episode]:
                assert mask[t] == 1 and obs[t].tolist() == [episode, position]
            else:
                assert mask[t] == 0 and obs[t].tolist() == [0, 0]


@pytest.fixture
def episodic(client, table_name):
    client.create_table(table_name, FIELDS, 64, episodic=True, seed=4)
    return table_name


def test_an_nstep_sampler_waits_for_steps_then_yields_exact_nstep_samples(client, episodic):
    with client.sampler(episodic, 8, nstep=3, gamma=0.5, prefetch=4) as sampler:
        # Nothing stored: all 4 requests wait at the server, ahead of the consumer.
        assert wait_until(lambda: client.table_info(episodic)["waiting"]["samples"] == 4)
        write_episodes(client, episodic)
        # At most 8 requests (4 ready, 4 fetched or in flight) were drawn while episodes
        # were still open; the ones after them see every episode ended.
        early: List[replayd.Sample] = [next(sampler) for _ in range(8)]
        samples: List[replayd.Sample] = [next(sampler) for _ in range(6)]
    for sample in early:
        assert len(sample) == 8 and sample.mask is None
        check_nstep(sample, 3, 0.5, ended=False)
    for sample in samples:
        check_nstep(sample, 3, 0.5)
    assert repr(sampler).endswith("closed>")


def test_a_sequence_sampler_yields_masked_sequences_of_one_episode(client, episodic):
    write_episodes(client, episodic)
    with client.sequence_sampler(episodic, 6, 3, burn_in=2, pad=True, prefetch=2) as sampler:
        for _ in range(5):
            check_sequences(next(sampler), 3, 2)
    # The same sequences through the Sampler's transform, which sees the mask too.
    with client.sequence_sampler(episodic, 4, 2, stride=2,
                                 transform=lambda s: s.data["obs"][:, 0, 1]) as sampler:
        starts = np.concatenate([next(sampler) for _ in range(5)])
    assert (starts % 2 == 0).all()


def test_samplers_refuse_bad_requests_with_the_servers_message(client, episodic):
    write_episodes(client, episodic)
    with client.sampler(episodic, 4, nstep=0) as sampler:
        with pytest.raises(replayd.InvalidArgument, match="nstep: must be between 1"):
            next(sampler)
        with pytest.raises(StopIteration):
            next(sampler)
    with client.sequence_sampler(episodic, 4, 65) as sampler:
        with pytest.raises(replayd.InvalidArgument, match="capacity 64"):
            next(sampler)
    with pytest.raises(replayd.InvalidArgument, match="stride must be an int >= 0"):
        client.sequence_sampler(episodic, 4, 2, stride=-1)
    with pytest.raises(replayd.InvalidArgument, match="not both"):
        replayd.Sampler(client, episodic, 4, nstep=2,
                        sequence=replayd.requests.SequenceShape(2))


def test_async_nstep_and_sequence_samples_arrive_as_futures(client, episodic):
    write_episodes(client, episodic)
    nstep = [client.sample_async(episodic, 16, nstep=2, gamma=0.9) for _ in range(4)]
    sequences = [client.sample_sequences_async(episodic, 8, 2, burn_in=1) for _ in range(4)]
    for future in nstep:
        check_nstep(future.result(timeout=10), 2, 0.9)
    for future in sequences:
        check_sequences(future.result(timeout=10), 2, 1)
    # Without steps enough for any window, a zero timeout fails at the server.
    late = client.sample_sequences_async(episodic, 1, 8, timeout=0)
    with pytest.raises(replayd.TimeoutError):
        late.result(timeout=10)
