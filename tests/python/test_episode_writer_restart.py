"""An EpisodeWriter whose connection is lost (a server restart) never stores later steps
under a silently new episode and never turns a termination into a truncation: it raises
ConnectionLost saying which steps were not stored, and its next steps start a new episode
(docs/TRAJECTORIES.md, "Writers and lost connections"). Against the real binary."""
from __future__ import annotations

import numpy as np
import pytest

import replayd

FIELDS = {"obs": (np.float32, (2,)), "rew": (np.float32, ())}


def step(t):
    return {"obs": np.full(2, t, np.float32), "rew": float(t)}


def stored_episodes(client, table):
    """{episode id: its steps' obs[0], in order} of every stored episode."""
    return {int(e["episode"][0]): [float(v) for v in e["obs"][:, 0]]
            for e in client.episodes(table)}


def test_a_restart_mid_episode_raises_connection_lost_naming_what_was_not_stored(
        make_server, tmp_path):
    server = make_server(extra_args=["--data-dir", str(tmp_path / "data")])
    client = replayd.Client(server.unix_address)
    client.create_table("t", FIELDS, 1000, episodic=True, reward="rew")
    writer = client.episode_writer("t", batch=4)
    for t in range(8):  # two batches of 4, sent and confirmed
        writer.append(0, **step(t))
    writer.flush()
    server.restart()  # SIGTERM: the final snapshot keeps the 8 steps
    with pytest.raises(replayd.ConnectionLost) as lost:
        for t in range(8, 24):
            writer.append(0, **step(t))
        writer.end_episode(0, terminated=True)
        writer.flush()
    message = str(lost.value)
    assert "was lost" in message and "not sent" in message
    assert "new episode" in message
    # Nothing after the loss went into the episode of steps 0-7, nor into a new one unsaid.
    episodes = stored_episodes(client, "t")
    assert list(episodes.values()) == [[float(t) for t in range(8)]]
    # The writer goes on: its next steps are a new episode, ended as the user says.
    for t in range(100, 103):
        writer.append(0, **step(t))
    writer.end_episode(0, terminated=True)
    writer.close()
    episodes = stored_episodes(client, "t")
    assert sorted(episodes.values()) == [[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
                                         [100.0, 101.0, 102.0]]
    # The new episode's termination is stored as such: its last step bootstraps nothing.
    sample = client.sample("t", 64, nstep=5, gamma=0.5, timeout=5)
    last = sample["obs"][:, 0] == 102.0
    assert last.any() and (sample["discount"][last] == 0).all()


def test_a_termination_buffered_when_the_connection_dies_is_reported_not_stored(
        make_server, tmp_path):
    server = make_server(extra_args=["--data-dir", str(tmp_path / "data")])
    client = replayd.Client(server.unix_address)
    client.create_table("t", FIELDS, 1000, episodic=True, reward="rew")
    writer = client.episode_writer("t", batch=64)
    for t in range(5):
        writer.append(0, **step(t))
    writer.flush()
    server.restart()
    writer.append(0, **step(5))
    writer.end_episode(0, terminated=True)
    with pytest.raises(replayd.ConnectionLost,
                       match=r"1 steps of episode \d+ were not sent.*\(terminated\) was not "
                             r"sent: the server ends it as truncated"):
        writer.flush()
    writer.close()
