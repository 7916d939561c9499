"""Work a request may ask of the server is bounded before it starts, and what one client
asks for cannot make another's well-formed request fail (docs/CONFIG.md, max_nstep and
max_sequence_steps; docs/TRAJECTORIES.md, window indexes). Against the real binary."""
from __future__ import annotations

import os

import numpy as np
import pytest

import replayd

FIELDS = {"obs": (np.float32, (2,)), "rew": (np.float32, ())}


@pytest.fixture
def episodes(client, table_name):
    client.create_table(table_name, FIELDS, 8192, episodic=True, reward="rew")
    with client.episode_writer(table_name, envs=1, batch=256) as writer:
        for t in range(3000):
            writer.append(0, obs=np.full(2, t, np.float32), rew=1.0)
        writer.end_episode(0, terminated=True)
    return table_name


def test_an_nstep_beyond_max_nstep_is_refused_naming_the_limit(client, episodes):
    limit = client.server["limits"]["max_nstep"]
    assert limit == 1024
    with pytest.raises(replayd.InvalidArgument, match=r"nstep.*2000 exceeds max_nstep = 1024"):
        client.sample(episodes, 1, nstep=2000, gamma=0.99, timeout=0)
    # At the limit it is served.
    sample = client.sample(episodes, 4, nstep=limit, gamma=1.0, timeout=5)
    assert sample.keys.shape == (4,)


def test_an_nstep_sample_walking_more_than_max_nstep_walk_steps_is_refused(client, episodes):
    # 65,536 draws of 1,000 steps would walk 65M steps (~100 ms of the server's thread) that
    # the reply does not hold: refused before anything is drawn, naming the limit.
    limit = client.server["limits"]["max_nstep_walk_steps"]
    assert limit == 1 << 22
    with pytest.raises(replayd.InvalidArgument,
                       match=r"n x nstep = 65536 x 1000 = 65536000 steps to walk exceeds "
                             r"max_nstep_walk_steps = 4194304"):
        client.sample(episodes, 65536, nstep=1000, gamma=0.99, timeout=0)
    # Within it, served.
    assert client.sample(episodes, 4096, nstep=1000, timeout=5).keys.shape == (4096,)


def test_a_sequence_beyond_max_sequence_steps_is_refused_naming_the_limit(client, episodes):
    assert client.server["limits"]["max_sequence_steps"] == 4096
    with pytest.raises(replayd.InvalidArgument, match=r"burn_in 4000 \+ length 100 exceeds "
                                                      r"max_sequence_steps = 4096"):
        client.sample_sequences(episodes, 1, 100, burn_in=4000, timeout=0)
    with pytest.raises(replayd.InvalidArgument, match="max_sequence_steps"):
        client.sample_sequences(episodes, 1, 2**63, burn_in=2**63, timeout=0)


def test_a_sequence_sample_reading_more_than_max_sequence_sample_steps_is_refused(client,
                                                                                  episodes):
    # 1,024 sequences of 4,096 steps read 4M steps (90-140 ms of the server's thread):
    # refused before anything is built or drawn, naming the limit.
    assert client.server["limits"]["max_sequence_sample_steps"] == 1 << 19
    with pytest.raises(replayd.InvalidArgument,
                       match=r"n x \(burn_in \+ length\) = 1024 x 4096 = 4194304 steps to read "
                             r"exceeds max_sequence_sample_steps = 524288"):
        client.sample_sequences(episodes, 1024, 4000, burn_in=96, timeout=0)
    # Within it, served.
    assert len(client.sample_sequences(episodes, 256, 8, timeout=5).keys) == 256


def test_requests_that_timed_out_leave_no_window_index_that_blocks_another_learner(
        client, table_name):
    # An empty episodic table: every n-step request times out, each with its own k.
    client.create_table(table_name, FIELDS, 1024, episodic=True, reward="rew")
    for k in range(100, 108):
        with pytest.raises(replayd.TimeoutError):
            client.sample(table_name, 1, nstep=k, timeout=0.01)
    # Another learner's well-formed requests of new requirements are served, not refused.
    with client.episode_writer(table_name, envs=1, batch=64) as writer:
        for t in range(50):
            writer.append(0, obs=np.full(2, t, np.float32), rew=1.0)
        writer.end_episode(0, terminated=True)
    assert client.sample(table_name, 2, nstep=3, timeout=5).keys.shape == (2,)
    assert client.sample_sequences(table_name, 2, 5, timeout=5).keys.shape == (2,)
    for k in range(1, 12):  # more distinct requirements than the table keeps indexes for
        sample = client.sample(table_name, 8, nstep=k, gamma=1.0, timeout=5)
        assert (sample["steps"] <= k).all() and (sample["steps"] >= 1).all()


def test_reset_table_drops_window_indexes_and_serves_new_requirements(client, table_name):
    client.create_table(table_name, FIELDS, 1024, episodic=True, reward="rew")
    for k in range(1, 10):
        with pytest.raises(replayd.TimeoutError):
            client.sample(table_name, 1, nstep=k, timeout=0)
    client.reset(table_name)
    with client.episode_writer(table_name, envs=1, batch=64) as writer:
        for t in range(20):
            writer.append(0, obs=np.full(2, t, np.float32), rew=1.0)
        writer.end_episode(0, terminated=True)
    assert client.sample_sequences(table_name, 3, 4, timeout=5).keys.shape == (3,)


def test_one_connection_cannot_use_up_the_open_episodes_of_a_table(client, address,
                                                                   table_name):
    client.create_table(table_name, FIELDS, 1024, episodic=True, reward="rew")
    quota = client.server["limits"]["max_open_episodes_per_connection"]
    assert quota == 8192
    greedy = replayd.Client(address)
    conn = greedy.open_connection()
    reply = conn.call({"op": "open_episodes", "table": table_name, "n": quota})
    assert len(reply["episodes"]) == quota
    with pytest.raises(replayd.ResourceExhausted,
                       match=r"this connection has 8192 open episodes; opening 1 more would "
                             r"exceed max_open_episodes_per_connection = 8192"):
        conn.call({"op": "open_episodes", "table": table_name, "n": 1})
    # Another writer's well-formed request is served.
    with client.episode_writer(table_name, envs=4) as writer:
        for env in range(4):
            writer.append(env, obs=np.zeros(2, np.float32), rew=1.0)
    conn.close()


@pytest.mark.skipif("ASAN_OPTIONS" in os.environ,
                    reason="sanitizer shadow memory and redzones are not the table's")
def test_what_episodes_hold_is_within_what_the_table_budget_counts(make_server):
    # Episode bookkeeping is counted against max_table_bytes per slot: the step's own 52 bytes
    # and an episode record of 160 (docs/TRAJECTORIES.md), since every stored step may be an
    # episode of its own. One-step episodes filling a table must not take more.
    from conftest import resident_bytes
    server = make_server()
    n = 100_000
    with replayd.Client(server.unix_address) as client:
        client.create_table("one-step", {"rew": (np.float32, ())}, n, episodic=True,
                            reward="rew")
        before = resident_bytes(server.proc.pid)
        with client.episode_writer("one-step", envs=64, batch=64) as writer:
            for i in range(n // 64):
                for env in range(64):
                    writer.append(env, rew=np.float32(i))
                    writer.end_episode(env, terminated=True)
        assert client.table_info("one-step")["size"] == n // 64 * 64
        grown = resident_bytes(server.proc.pid) - before
    per_episode = grown / (n // 64 * 64)
    print(f"{per_episode:.0f} B per one-step episode")
    assert per_episode < 52 + 160, f"{per_episode:.0f} B per one-step episode"
