"""Error paths of the Python client against the real binary: a server killed (SIGKILL)
mid-stream surfaces as ConnectionLost from every writer method, never as an error of the
client's own cleanup (an IndexError of an emptied list, a silent close that dropped
steps); an exception raised inside a writer's `with` block is the one the caller sees;
a sharded sampler whose shard is gone raises ConnectionLost call after call and recovers
with the shard."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any, Callable, Dict

import numpy as np
import pytest

import replayd
from conftest import REPO

FIELDS = {"obs": (np.float32, (2,)), "rew": (np.float32, ())}
BATCH = 4


def step(t: int, as_lists: bool = False) -> Dict[str, Any]:
    """One step; `as_lists`: values that need converting (Writer.append's slow path)."""
    if as_lists:
        return {"obs": [float(t), float(t)], "rew": float(t)}
    return {"obs": np.full(2, t, np.float32), "rew": np.float32(t)}


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def killed_mid_episode(make_server: Any, transport: str, *, max_delay: Any = None):
    """A server, its client and an EpisodeWriter of `BATCH` steps per request (staged on
    the Unix socket, through the socket over TCP) with one confirmed step of env 0; the
    server is then killed and the writer's connection seen dead."""
    server = make_server()
    client = replayd.Client(server.address(transport), timeout=10)
    client.create_table("t", FIELDS, 1000, episodic=True, reward="rew")
    writer = client.episode_writer("t", batch=BATCH, max_delay=max_delay)
    writer.append(0, **step(0))
    writer.flush()
    server.kill()
    wait_until(lambda: not writer._conn.alive)
    return server, client, writer


# -- EpisodeWriter --------------------------------------------------------------------


@pytest.mark.parametrize("as_lists", [False, True], ids=["fast", "converted"])
def test_an_episode_writer_append_that_sends_on_a_lost_connection_raises_connection_lost(
        make_server, transport, as_lists):
    _, client, writer = killed_mid_episode(make_server, transport)
    with pytest.raises(replayd.ConnectionLost, match=r"steps of episode \d+ were not sent"):
        for t in range(1, 1 + BATCH):  # the last one fills the batch, which goes out
            writer.append(0, **step(t, as_lists))
    client.close()


def test_an_episode_writer_append_after_a_batch_failed_in_flight_raises_connection_lost(
        make_server, transport):
    server = make_server()
    client = replayd.Client(server.address(transport), timeout=10)
    # Inserts wait for samples once 2 items exist: the next batch stays in flight.
    client.create_table("t", FIELDS, 1000, episodic=True, reward="rew",
                        rate_limiter=replayd.SampleToInsertRatio(1.0, 1, 1.0))
    writer = client.episode_writer("t", batch=BATCH, max_delay=None)
    for t in range(2 * BATCH):
        writer.append(0, **step(t))
    server.kill()
    # The connection is marked dead before its pending requests are failed: wait for both.
    wait_until(lambda: not writer._conn.alive and
               all(future.done() for future, _ in writer._steps._in_flight))
    # The next append finds the batches' failure (the converted path checks first).
    with pytest.raises(replayd.ConnectionLost, match="sent but not confirmed"):
        writer.append(0, **step(2 * BATCH, as_lists=True))
    client.close()


def test_an_episode_writer_end_episode_on_a_lost_connection_raises_connection_lost(
        make_server, transport):
    _, client, writer = killed_mid_episode(make_server, transport)
    with pytest.raises(replayd.ConnectionLost, match=r"\(terminated\) was not sent"):
        writer.end_episode(0, terminated=True)
    client.close()


def test_an_episode_writer_flush_on_a_lost_connection_raises_connection_lost(
        make_server, transport):
    _, client, writer = killed_mid_episode(make_server, transport)
    writer.append(0, **step(1))
    with pytest.raises(replayd.ConnectionLost, match=r"1 steps of episode \d+ were not sent"):
        writer.flush()
    client.close()


def test_an_episode_writer_close_on_a_lost_connection_says_which_steps_were_not_sent(
        make_server, transport):
    _, client, writer = killed_mid_episode(make_server, transport)
    writer.append(0, **step(1))
    writer.append(0, **step(2))
    with pytest.raises(replayd.ConnectionLost, match=r"2 steps of episode \d+ were not sent"):
        writer.close()
    writer.close()  # closed: a second close does nothing
    client.close()


def test_an_episode_writer_whose_every_step_was_confirmed_closes_quietly_after_a_loss(
        make_server, transport):
    _, client, writer = killed_mid_episode(make_server, transport)
    writer.close()  # the server ends the episode as truncated itself: nothing was lost
    client.close()


def test_an_episode_writer_with_block_on_a_lost_connection_raises_connection_lost(
        make_server, transport):
    _, client, writer = killed_mid_episode(make_server, transport)
    with pytest.raises(replayd.ConnectionLost, match="were not sent"):
        with writer:
            writer.append(0, **step(1))
    client.close()


def test_an_error_inside_an_episode_writers_with_block_is_not_hidden_by_its_close(
        server, table_name):
    client = replayd.Client(server.unix_address, timeout=10)
    client.create_table(table_name, FIELDS, 1000, episodic=True, reward="rew")
    with pytest.raises(RuntimeError, match="the caller's own error"):
        with client.episode_writer(table_name, batch=BATCH) as writer:
            writer.append(0, **step(0))
            client.drop_table(table_name)  # the writer's close fails with NotFound
            raise RuntimeError("the caller's own error")
    client.close()


@pytest.mark.parametrize("then", ["append", "close"])
def test_a_connection_lost_after_a_refused_request_does_not_say_every_step_was_stored(
        make_server, transport, then):
    server = make_server()
    client = replayd.Client(server.address(transport), timeout=10)
    client.create_table("t", FIELDS, 1000, episodic=True, reward="rew")
    writer = client.episode_writer("t", envs=2, batch=BATCH, max_delay=None)
    writer.append(0, **step(0))
    writer.flush()
    client.drop_table("t")
    for t in range(1, 1 + BATCH):  # a full batch goes out and is refused (NotFound)
        writer.append(0, **step(t))
    wait_until(lambda: writer._steps._failed)
    server.kill()
    wait_until(lambda: not writer._conn.alive)
    with pytest.raises(replayd.ConnectionLost) as lost:
        if then == "append":  # env 1's first step: a new episode, on a new connection
            writer.append(1, **step(0))
        else:
            writer.close()
    assert "every step appended was stored" not in str(lost.value)
    assert "refused" in str(lost.value) and "not_found" in str(lost.value)
    client.close()


# A process that reads the frames of a ConnectionLost's traceback (a test runner showing
# each frame's arguments, an error reporter capturing locals): the staged batch's arrays
# there view the writer's staging arena, which the loss released.
READ_LOST_BATCH = """
import sys, time, traceback
import numpy as np
import replayd
client = replayd.Client(sys.argv[1], timeout=10)
writer = client.episode_writer("t", batch=4, max_delay=None)
writer.append(0, obs=np.zeros(2, np.float32), rew=np.float32(0))
assert writer._steps._slots is not None  # staged
writer.flush()
print("ready", flush=True)
sys.stdin.readline()  # the server is killed meanwhile
while writer._conn.alive:
    time.sleep(0.01)
try:
    for t in range(1, 5):
        writer.append(0, obs=np.full(2, t, np.float32), rew=np.float32(t))
except replayd.ConnectionLost as exc:
    text = "".join(traceback.TracebackException.from_exception(
        exc, capture_locals=True).format())
    assert "InsertBatch" in text, text
    print("read", flush=True)
"""


def test_the_frames_of_a_staged_episode_writers_connection_lost_can_be_read(make_server):
    server = make_server(tcp=False)
    with replayd.Client(server.unix_address, timeout=10) as client:
        client.create_table("t", FIELDS, 1000, episodic=True, reward="rew")
    env = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"))
    proc = subprocess.Popen([sys.executable, "-c", READ_LOST_BATCH, server.unix_address],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    server.kill()
    out, err = proc.communicate("go\n", timeout=60)
    assert proc.returncode == 0, f"exit {proc.returncode}: {err[-2000:]}"
    assert out.strip() == "read"


# -- Writer -----------------------------------------------------------------------------


def killed_writer(make_server, transport):
    server = make_server()
    client = replayd.Client(server.address(transport), timeout=10)
    client.create_table("t", FIELDS, 1000)
    writer = client.writer("t", batch=BATCH, max_delay=None)
    assert writer.staged == (transport == "unix")
    writer.append(**step(0))
    writer.flush()
    server.kill()
    wait_until(lambda: not client._conn.alive)
    return client, writer


@pytest.mark.parametrize("method", ["append", "flush", "close", "with"])
def test_a_writer_on_a_lost_connection_raises_connection_lost(make_server, transport, method):
    client, writer = killed_writer(make_server, transport)
    with pytest.raises(replayd.ConnectionLost):
        if method == "append":
            for t in range(1, 1 + BATCH):
                writer.append(**step(t))
        elif method == "with":
            with writer:
                writer.append(**step(1))
        else:
            writer.append(**step(1))
            getattr(writer, method)()
    writer.close()  # then closes, whatever it holds
    client.close()


@pytest.mark.parametrize("method", ["add", "on_episode_end"])
def test_a_cpprb_buffer_on_a_lost_connection_raises_connection_lost(make_server, transport,
                                                                    method):
    from replayd.cpprb import ReplayBuffer
    server = make_server()
    buffer = ReplayBuffer(100, {"obs": {"shape": 2}, "rew": {}},
                          address=server.address(transport), table="rb")
    for _ in range(3):
        buffer.add(obs=np.zeros(2), rew=1.0)
    assert buffer.get_stored_size() == 3
    server.kill()
    with pytest.raises(replayd.ConnectionLost):
        if method == "add":
            for _ in range(300):  # more than a batch: one goes out
                buffer.add(obs=np.zeros(2), rew=1.0)
        else:
            buffer.add(obs=np.zeros(2), rew=1.0)
            buffer.on_episode_end()


# -- sharded ------------------------------------------------------------------------------


def sharded_writer_killed(make_server):
    """Two servers, their ShardedClient and a writer with one confirmed step of env 0 on a
    shard that is then killed."""
    servers = [make_server(tcp=False) for _ in range(2)]
    client = replayd.ShardedClient([s.unix_address for s in servers], timeout=10)
    client.create_table("t", FIELDS, 1000, episodic=True, reward="rew")
    writer = client.episode_writer("t", batch=BATCH)
    writer.append(0, **step(0))
    writer.flush()
    servers[writer.shard_of(0)].kill()
    return client, writer


def test_a_sharded_episode_writer_on_a_lost_shard_raises_connection_lost(make_server):
    client, writer = sharded_writer_killed(make_server)
    with pytest.raises(replayd.ConnectionLost, match="were not sent"):
        for t in range(1, 1 + BATCH):
            writer.append(0, **step(t, as_lists=True))
    client.close()


def test_an_error_inside_a_sharded_episode_writers_with_block_is_the_one_raised(make_server):
    client, writer = sharded_writer_killed(make_server)
    with pytest.raises(RuntimeError, match="the caller's own error"):
        with writer:
            writer.append(0, **step(1))  # buffered: the close finds it not sent
            raise RuntimeError("the caller's own error")
    client.close()


def test_a_sharded_episode_writer_flush_sends_the_live_shards_steps_when_one_is_lost(
        make_server):
    servers = [make_server(tcp=False) for _ in range(2)]
    with replayd.ShardedClient([s.unix_address for s in servers], timeout=10) as client:
        client.create_table("t", FIELDS, 1000, episodic=True, reward="rew")
        writer = client.episode_writer("t", envs=2, batch=BATCH)
        writer.append(0, **step(0))  # env 0's episode on shard 0
        writer.append(1, **step(0))  # env 1's on shard 1
        writer.flush()
        assert (writer.shard_of(0), writer.shard_of(1)) == (0, 1)
        servers[0].kill()
        writer.append(1, **step(1))
        writer.append(1, **step(2))
        with pytest.raises(replayd.ConnectionLost):
            writer.append(0, **step(1))
            writer.flush()
        assert client.shards[1].size("t") == 3  # shard 1's steps went out all the same


def test_a_sharded_sampler_whose_shard_died_raises_connection_lost_and_recovers(make_server):
    servers = [make_server(tcp=False) for _ in range(2)]
    with replayd.ShardedClient([s.unix_address for s in servers], timeout=10) as client:
        client.create_table("t", FIELDS, 100)
        for _ in range(2):
            client.insert("t", {"obs": np.zeros((10, 2), np.float32),
                                "rew": np.zeros(10, np.float32)})
        sampler = client.sampler("t", 8, prefetch=2)
        assert len(next(sampler)) == 8
        servers[1].kill()
        errors = 0
        for _ in range(6):  # more calls than requests in flight
            try:
                next(sampler)
            except replayd.ConnectionLost:
                errors += 1
        assert errors >= 4
        servers[1].start()  # a fresh server: the shard's table is made again
        client.shards[1].create_table("t", FIELDS, 50)
        client.shards[1].insert("t", {"obs": np.zeros((10, 2), np.float32),
                                      "rew": np.zeros(10, np.float32)})
        for _ in range(3):  # a request sent before the restart may still fail
            try:
                assert len(next(sampler)) == 8
                break
            except replayd.ConnectionLost:
                continue
        else:
            pytest.fail("the sampler did not recover with its shard")


def test_a_client_whose_socket_is_past_descriptor_1023_still_waits_with_a_timeout(server):
    # select() refuses descriptors past FD_SETSIZE (1024): a learner holding many files
    # (or staging arenas) must still be able to wait on its replies.
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200 and hard >= 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1200, hard))
    elif soft < 1200:
        pytest.skip("the descriptor limit is below 1200")
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        with replayd.Client(server.unix_address, timeout=10) as c:
            conn = c.open_connection(reader_thread=False)
            assert conn._sock.fileno() > 1023
            request_id, future = conn.submit({"op": "ping"}, caller_waits=True)
            conn.wait(request_id, future, 5)
            conn.close()
    finally:
        for fd in held:
            os.close(fd)
