"""A server started with a small ``max_batch_items`` (docs/CONFIG.md): reading a table back
pages within it whatever `page` asks, writers' default batches stay within it, and a writer
whose explicit `batch` exceeds it is refused when it is made, saying how to fix it."""
from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

import replayd
from conftest import ServerProcess

LIMIT = 16  # items per request on the limited server; far below every default page or batch
PLAIN = {"x": (np.int64, ())}
EPISODIC = {"x": (np.int64, ()), "rew": (np.float32, ())}


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir: Path = tmp_path_factory.mktemp("limited")
    config = workdir / "limits.json"
    config.write_text(json.dumps({"limits": {"max_batch_items": LIMIT}}))
    proc = ServerProcess(workdir, tcp=False, extra_args=["--config", str(config)]).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def client(limited: ServerProcess) -> Iterator[replayd.Client]:
    with replayd.Client(limited.unix_address, timeout=30) as c:
        assert c.server["limits"]["max_batch_items"] == LIMIT
        yield c


_NAMES = itertools.count()


@pytest.fixture
def table_name() -> str:
    """A fresh table name (every table lives on this module's own servers)."""
    return f"t{next(_NAMES)}"


@pytest.fixture
def plain(client: replayd.Client, table_name: str) -> str:
    client.create_table(table_name, PLAIN, 1000)
    return table_name


@pytest.fixture
def episodic(client: replayd.Client, table_name: str) -> str:
    client.create_table(table_name, EPISODIC, 1000, episodic=True)
    return table_name


def test_read_items_pages_within_max_batch_items_whatever_page_asks(client, plain):
    keys = client.insert(plain, {"x": np.arange(100)})  # 7 requests of at most 16
    pages = list(client.read_items(plain))  # default page: 4096
    assert [len(p["key"]) for p in pages] == [16] * 6 + [4]
    assert np.concatenate([p["key"] for p in pages]).tolist() == keys.tolist()
    assert np.concatenate([p["x"] for p in pages]).tolist() == list(range(100))
    assert [len(p["key"]) for p in client.read_items(plain, page=10)] == [10] * 10
    after = list(client.read_items(plain, page=1000, after=int(keys[89])))
    assert np.concatenate([p["x"] for p in after]).tolist() == list(range(90, 100))


def test_read_all_and_episodes_read_every_step_within_max_batch_items(client, episodic):
    with client.episode_writer(episodic, envs=2) as writer:
        for t in range(30):
            writer.append(0, x=t, rew=0.0)
            writer.append(1, x=100 + t, rew=0.0)
        writer.end_episode(0)
    pages = list(client.read_all(episodic))
    assert max(len(p["key"]) for p in pages) <= LIMIT
    assert sorted(np.concatenate([p["x"] for p in pages]).tolist()) == \
        list(range(30)) + list(range(100, 130))
    episodes = client.read_episodes(episodic)
    assert episodes["offsets"].tolist() == [0, 30, 60]
    assert [e["x"].tolist() for e in client.episodes(episodic)] == \
        [list(range(30)), list(range(100, 130))]


def test_a_page_below_one_is_refused_naming_page(client, plain):
    with pytest.raises(replayd.InvalidArgument, match="page must be an int >= 1"):
        list(client.read_items(plain, page=0))


def make_writer(client, kind, table, batch):
    """A writer of `kind` (2 environments, 4 for the vector ones); `batch` None: not
    given, the writer's default."""
    options = {} if batch is None else {"batch": batch}
    if kind == "writer":
        return client.writer(table, **options)
    if kind == "vector_writer":
        return client.vector_writer(table, 4, **options)
    if kind == "episode_writer":
        return client.episode_writer(table, 2, **options)
    return client.vector_episode_writer(table, 4, **options)


WRITERS = ["writer", "vector_writer", "episode_writer", "vector_episode_writer"]


def create(client, table, kind):
    """A table for writer `kind`: episodic for the episode writers."""
    episodic = "episode" in kind
    client.create_table(table, EPISODIC if episodic else PLAIN, 1000, episodic=episodic)


@pytest.mark.parametrize("kind", WRITERS)
def test_an_explicit_batch_above_max_batch_items_is_refused_when_the_writer_is_made(
        client, table_name, kind):
    table = table_name
    create(client, table, kind)
    with pytest.raises(ValueError) as refused:  # InvalidArgument, before any append
        make_writer(client, kind, table, 100)
    assert isinstance(refused.value, replayd.InvalidArgument)
    message = str(refused.value)
    for said in (f"table '{table}'", "batch=100", f"max_batch_items = {LIMIT}",
                 f"pass batch <= {LIMIT}", "batch=None", "limits.max_batch_items"):
        assert said in message, message
    with make_writer(client, kind, table, LIMIT) as at_the_limit:  # accepted
        assert getattr(at_the_limit, "batch", LIMIT) == LIMIT


def append_rows(writer, kind, rows):
    """Appends `rows` rows (x = 0, 1, ...) through any of the WRITERS."""
    if kind == "writer":
        for x in range(rows):
            writer.append(x=x)
    elif kind == "vector_writer":
        for x in range(0, rows, 4):
            writer.append(x=np.arange(x, x + 4))
    elif kind == "episode_writer":
        for x in range(0, rows, 2):
            writer.append(0, x=x, rew=0.0)
            writer.append(1, x=x + 1, rew=0.0)
    else:
        for x in range(0, rows, 4):
            writer.append(x=np.arange(x, x + 4), rew=np.zeros(4, np.float32))


@pytest.mark.parametrize("kind", WRITERS)
def test_default_batches_stay_within_max_batch_items_and_write_everything(
        client, table_name, kind):
    table = table_name
    create(client, table, kind)
    with make_writer(client, kind, table, None) as writer:  # defaults: 64 to 1024 rows
        append_rows(writer, kind, 200)
        writer.flush()
    assert client.size(table) == 200
    read = np.concatenate([p["x"] for p in client.read_items(table)]) if "episode" not in kind \
        else np.concatenate([p["x"] for p in client.read_all(table)])
    assert sorted(read.tolist()) == list(range(200))


def test_a_writer_reports_its_batch_within_the_limit(client, plain):
    with client.writer(plain) as writer:
        assert writer.batch == LIMIT
    with client.vector_writer(plain, 4) as vector:
        assert vector.batch == LIMIT


def test_a_sharded_episode_writer_refuses_a_batch_above_any_shards_limit(
        limited, make_server, table_name):
    roomy = make_server(tcp=False)  # the default limit, 65,536
    with replayd.ShardedClient([roomy.unix_address, limited.unix_address],
                               timeout=30) as sharded:
        sharded.create_table(table_name, EPISODIC, 1000, episodic=True)
        with pytest.raises(replayd.InvalidArgument, match=f"max_batch_items = {LIMIT}"):
            sharded.episode_writer(table_name, batch=100)
        with sharded.episode_writer(table_name, envs=2) as writer:  # defaults per shard
            for t in range(40):
                writer.append(0, x=t, rew=0.0)
                writer.append(1, x=100 + t, rew=0.0)
        assert sum(len(p["key"]) for p in sharded.read_all(table_name)) == 80
