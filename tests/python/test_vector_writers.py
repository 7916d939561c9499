"""VectorWriter and VectorEpisodeWriter (replayd.vector_writers) against the real server.

What a user relies on: one call stores one row per environment, exactly what as many
single appends in environment order would store (over the plane and through the socket);
batches fill across calls; a malformed call is refused naming the field and buffers
nothing; in an episodic table each environment writes its own episodes, ended after the
step whose terminated / truncated flag is set.
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import pytest

import replayd

FIELDS = {"obs": ("float32", (3,)), "act": ("int64", ()), "rew": ("float32", ()),
          "done": ("bool", ())}
ENVS = 16


def step(t: int, envs: int = ENVS) -> Dict[str, np.ndarray]:
    """Step t of every environment; env e's values derive from (t, e)."""
    ids = 1000 * np.arange(envs) + t
    return {"obs": np.repeat(ids[:, None], 3, 1).astype(np.float32), "act": ids,
            "rew": ids.astype(np.float32), "done": ids % 3 == 0}


def stored(client: replayd.Client, table: str) -> Dict[str, np.ndarray]:
    pages = list(client.read_items(table))
    return {name: np.concatenate([page[name] for page in pages]) for name in pages[0]}


@pytest.mark.parametrize("shm", [None, False], ids=["plane", "socket"])
def test_a_vector_writer_stores_what_single_appends_in_env_order_store(server, table_name, shm):
    single, vector = table_name + "-single", table_name + "-vector"
    with replayd.Client(server.unix_address, timeout=30, shm=shm) as c:
        for table in (single, vector):
            c.create_table(table, FIELDS, capacity=10_000, sampler="prioritized")
        # batch 24: a call's 16 rows fall in one batch or across two
        with c.writer(single, batch=24) as writer:
            for t in range(50):
                data = step(t)
                for env in range(ENVS):
                    writer.append({k: v[env] for k, v in data.items()},
                                  priority=None if t % 2 else float(env + 1))
        with c.vector_writer(vector, ENVS, batch=24, keep_keys=True) as writer:
            assert writer.staged == (shm is None)
            for t in range(50):
                writer.append(step(t), priorities=None if t % 2 else np.arange(ENVS) + 1.0)
        assert writer.items_written == 50 * ENVS and len(writer.keys) == 50 * ENVS
        want, got = stored(c, single), stored(c, vector)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_a_malformed_vector_call_is_refused_by_name_and_buffers_nothing(server, table_name):
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table(table_name, FIELDS, capacity=1000)
        with c.vector_writer(table_name, 4) as writer:
            good = step(0, 4)
            cases = [({**good, "obs": good["obs"][:3]}, r"'obs'.*\(4, 3\).*4 environments"),
                     ({k: v for k, v in good.items() if k != "act"}, "'act' is missing"),
                     ({**good, "extra": np.zeros(4)}, "unknown field.*'extra'"),
                     ({**good, "act": np.full(4, 0.5)}, "'act'.*float64.*int64"),
                     ({**good, "rew": ["a"] * 4}, "'rew'")]
            for data, message in cases:
                with pytest.raises(replayd.InvalidArgument, match=message):
                    writer.append(data)
            with pytest.raises(replayd.InvalidArgument, match="3 priorities for 4"):
                writer.append(good, priorities=[1, 2, 3])
            writer.append(step(1, 4))
        assert c.size(table_name) == 4
        np.testing.assert_array_equal(stored(c, table_name)["act"], step(1, 4)["act"])
        with pytest.raises(replayd.InvalidArgument, match="envs"):
            c.vector_writer(table_name, 0)


@pytest.mark.parametrize("shm", [None, False], ids=["plane", "socket"])
def test_each_environment_writes_its_own_episodes_ended_by_its_flags(server, table_name, shm):
    envs, steps = 6, 120
    rng = np.random.default_rng(5)
    with replayd.Client(server.unix_address, timeout=30, shm=shm) as c:
        c.create_table(table_name, FIELDS, capacity=10_000, episodic=True, reward="rew")
        # The model: each env's episodes as (the act of each step, how it ended).
        current: List[List[int]] = [[] for _ in range(envs)]
        finished: List[Tuple[Tuple[int, ...], int]] = []
        with c.vector_episode_writer(table_name, envs, batch=16) as writer:
            for t in range(steps):
                terminated = rng.random(envs) < 0.05
                truncated = rng.random(envs) < 0.05
                data = step(t, envs)
                writer.append(data, terminated=terminated, truncated=truncated)
                for env in range(envs):
                    current[env].append(int(data["act"][env]))
                    if terminated[env] or truncated[env]:
                        finished.append((tuple(current[env]), 1 if terminated[env] else 2))
                        current[env] = []
            assert writer.staged == (shm is None)  # (it connects at its first step)
            if current[0]:
                writer.end_episode(0, terminated=True)
                finished.append((tuple(current[0]), 1))
                current[0] = []
        finished += [(tuple(acts), 2) for acts in current if acts]  # close truncates
        episodes = list(c.episodes(table_name))
        got = sorted((tuple(e["act"].tolist()), int(e["end"][-1])) for e in episodes)
        assert got == sorted(finished)
        assert sum(len(acts) for acts, _ in got) == envs * steps
