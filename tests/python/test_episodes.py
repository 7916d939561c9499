"""Episodic tables over the wire: malformed and hostile requests get clear errors and lose
nothing; a writer that disconnects mid-episode leaves it truncated with its steps; reading
everything pages through every step; snapshots keep episodes; writers pickle."""
from __future__ import annotations

import json
import pickle
import re
import time
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

import replayd
from waiting import wait_until

FIELDS = {"obs": (np.float32, (2,)), "rew": (np.float32, ()), "next_obs": (np.float32, (2,))}


def step(i: int) -> Dict[str, Any]:
    return {"obs": np.array([i, -i], np.float32), "rew": np.float32(i),
            "next_obs": np.array([i + 1, -i - 1], np.float32)}


def make_table(client: replayd.Client, name: str, capacity: int = 64) -> None:
    client.create_table(name, FIELDS, capacity, episodic=True, reward="rew", seed=3)


def test_the_description_keeps_episodic_reward_and_bootstrap(client, table_name):
    make_table(client, table_name)
    description = client.table_info(table_name)["description"]
    assert description["episodic"] is True
    assert description["reward"] == "rew" and description["bootstrap"] == ["next_obs"]
    with pytest.raises(replayd.InvalidArgument, match="reward_field: no field named 'r'"):
        client.create_table(table_name + "x", FIELDS, 8, episodic=True, reward="r")
    with pytest.raises(replayd.InvalidArgument, match="needs \"episodic\": true"):
        client.create_table(table_name + "y", FIELDS, 8, reward="rew")


def test_malformed_episodic_requests_are_refused_and_lose_nothing(client, table_name):
    make_table(client, table_name, capacity=16)
    with client.episode_writer(table_name) as writer:
        for i in range(6):
            writer.append(**step(i))
        writer.end_episode(terminated=True)
    before = client.table_info(table_name)
    bad = [
        (dict(nstep=0), "nstep: must be between 1 and the capacity 16, got 0"),
        (dict(nstep=17), "nstep: must be between 1 and the capacity 16, got 17"),
        (dict(nstep=3, gamma=-0.1), "gamma must be in \\[0, 1\\]"),
        (dict(nstep=3, gamma=1.5), "gamma must be in \\[0, 1\\]"),
    ]
    for kwargs, message in bad:
        with pytest.raises(replayd.InvalidArgument, match=message):
            client.sample(table_name, 4, timeout=0, **kwargs)
    for length, burn_in, stride in ((17, 0, 1), (10, 7, 1), (0, 0, 1), (4, 0, 0)):
        with pytest.raises(replayd.InvalidArgument, match="capacity 16|stride"):
            client.sample_sequences(table_name, 4, length, burn_in=burn_in, stride=stride,
                                    timeout=0)
    with pytest.raises(replayd.InvalidArgument, match="is episodic: write it with"):
        client.insert(table_name, {name: np.stack([step(0)[name]]) for name in FIELDS})
    conn = client.open_connection()
    try:
        def call(meta: Dict[str, Any]) -> Any:
            request_id, future = conn.submit(meta, (), None, caller_waits=True)
            return conn.wait(request_id, future, 30)

        opened = call({"op": "open_episodes", "table": table_name, "n": 1})["episodes"][0]
        with pytest.raises(replayd.InvalidArgument, match="no steps"):
            call({"op": "end_episode", "table": table_name, "episode": opened})
        with pytest.raises(replayd.InvalidArgument, match="not open"):
            call({"op": "end_episode", "table": table_name, "episode": 987654})
        # Another connection cannot end (or append to) this connection's episode.
        other = client.open_connection()
        try:
            request_id, future = other.submit({"op": "end_episode", "table": table_name,
                                               "episode": opened}, (), None, caller_waits=True)
            with pytest.raises(replayd.InvalidArgument, match="not open"):
                other.wait(request_id, future, 30)
        finally:
            other.close()
    finally:
        conn.close()
    with client.episode_writer(table_name) as writer:
        with pytest.raises(replayd.InvalidArgument, match="no open episode"):
            writer.end_episode()
    after = client.table_info(table_name)
    assert after["size"] == before["size"] == 6
    assert after["counters"] == before["counters"]
    sample = client.sample(table_name, 32, nstep=2, gamma=0.5)
    assert set(sample["steps"].tolist()) <= {1, 2}


def test_a_writer_disconnecting_mid_episode_leaves_it_truncated_with_its_steps(
        client, table_name):
    make_table(client, table_name)
    writer = client.episode_writer(table_name, batch=2)
    for i in range(5):
        writer.append(**step(i))
    writer.flush()
    # The episode is open with 5 steps: no 10-step window exists yet.
    with pytest.raises(replayd.TimeoutError):
        client.sample(table_name, 1, nstep=10, gamma=0.5, timeout=0)
    writer._conn.close()  # the connection is lost mid-episode, no end_episode sent
    deadline = time.monotonic() + 10
    while True:
        try:
            sample = client.sample(table_name, 200, nstep=10, gamma=0.5, timeout=0)
            break
        except replayd.TimeoutError:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    assert client.size(table_name) == 5
    by_start = {int(o): (float(r), int(h), float(d)) for o, r, h, d in
                zip(sample["obs"][:, 0], sample["rew"], sample["steps"], sample["discount"])}
    for start, (ret, steps, discount) in by_start.items():
        assert steps == 5 - start
        assert discount == 0.5 ** steps  # truncated: bootstraps
        assert ret == pytest.approx(sum(0.5 ** j * (start + j) for j in range(steps)))
    assert set(by_start) == set(range(5))


def test_read_all_pages_through_every_step_and_episodes_groups_them(client, table_name):
    make_table(client, table_name, capacity=40)
    with client.episode_writer(table_name, envs=2, batch=3, keep_keys=True) as writer:
        for i in range(50):  # past the capacity: the 10 oldest steps are evicted
            writer.append(env=i % 2, **step(i))
            if i % 7 == 6:
                writer.end_episode(env=i % 2, terminated=bool(i % 2))
    keys = list(writer.keys)
    pages = list(client.read_all(table_name, page=7))
    assert [len(p["key"]) for p in pages] == [7] * 5 + [5]
    rows = {name: np.concatenate([p[name] for p in pages]) for name in pages[0]}
    assert rows["key"].tolist() == keys[10:]
    assert rows["obs"][:, 0].tolist() == list(range(10, 50))
    assert np.all(np.diff(rows["sequence"].astype(np.int64)) > 0)
    episodes = list(client.episodes(table_name, page=7))
    assert sum(len(e["key"]) for e in episodes) == 40
    for episode in episodes:
        assert len(set(episode["episode"].tolist())) == 1
        assert np.all(np.diff(episode["position"].astype(np.int64)) == 1)
        assert len(set((episode["obs"][:, 0].astype(int) % 2).tolist())) == 1  # one env
    # The same episodes at once, ragged: concatenated rows and offsets.
    ragged = client.read_episodes(table_name, page=7)
    assert len(ragged["offsets"]) == len(episodes) + 1
    assert ragged["offsets"][0] == 0 and ragged["offsets"][-1] == 40
    for i, episode in enumerate(episodes):
        rows = slice(ragged["offsets"][i], ragged["offsets"][i + 1])
        assert ragged["obs"][rows].tolist() == episode["obs"].tolist()
        assert ragged["key"][rows].tolist() == episode["key"].tolist()


def test_a_page_of_read_steps_never_exceeds_max_frame_bytes(make_server, tmp_path):
    config = tmp_path / "limits.json"
    config.write_text(json.dumps({"limits": {"max_frame_bytes": 1 << 20}}))
    server = make_server(extra_args=["--config", str(config)])
    big = {"obs": (np.float32, (4096,)), "rew": (np.float32, ()),
           "next_obs": (np.float32, (1,))}
    with replayd.Client(server.unix_address, timeout=30) as c:
        c.create_table("t", big, 500, episodic=True)
        with c.episode_writer("t", batch=50) as writer:
            for i in range(300):
                writer.append(obs=np.full(4096, i, np.float32), rew=0.0,
                              next_obs=np.zeros(1, np.float32))
        pages = list(c.read_all("t", page=10000))
        assert sum(len(p["key"]) for p in pages) == 300
        assert len(pages) > 1 and all(p["obs"].nbytes < (1 << 20) for p in pages)


def test_snapshot_and_restart_keep_episodes_and_end_the_open_ones_truncated(
        make_server, tmp_path: Path):
    data_dir = tmp_path / "data"
    server = make_server(extra_args=["--data-dir", str(data_dir)])
    with replayd.Client(server.unix_address, timeout=30) as c:
        make_table(c, "ep")
        writer = c.episode_writer("ep", envs=2, batch=4)
        for i in range(12):
            writer.append(env=0, **step(i))
        writer.end_episode(env=0, terminated=True)
        for i in range(100, 104):
            writer.append(env=1, **step(i))
        writer.flush()  # env 1's episode stays open across the snapshot
        before = [dict(p) for p in c.read_all("ep")]
        c.snapshot()
        server.kill()
    server.start()
    with replayd.Client(server.unix_address, timeout=30) as c:
        after = list(c.read_all("ep"))
        assert len(after) == len(before)
        for a, b in zip(after, before):
            for name in b:
                if name != "end":  # the open episode has ended since (below)
                    np.testing.assert_array_equal(a[name], b[name])
            if "end" in b:  # its last row now says truncated (2)
                np.testing.assert_array_equal(a["end"], np.where(b["obs"][:, 0] == 103, 2,
                                                                 b["end"]))
        # The episode left open ended as truncated: its steps are 4-step windows that
        # bootstrap; the terminated one's last windows do not.
        sample = c.sample("ep", 400, nstep=20, gamma=1.0)
        for start, discount, steps in zip(sample["obs"][:, 0], sample["discount"],
                                          sample["steps"]):
            if start >= 100:
                assert discount == 1.0 and steps == 104 - start
            else:
                assert discount == 0.0 and steps == 12 - start


def test_an_episode_writer_pickles_as_its_client_table_and_options(client, table_name):
    make_table(client, table_name)
    writer = client.episode_writer(table_name, envs=3, batch=5, max_delay=None)
    clone = pickle.loads(pickle.dumps(writer))
    options = {k: v for k, v in clone.__getstate__().items() if k != "client"}
    assert options == {"table": table_name, "envs": 3, "batch": 5, "max_in_flight": 8,
                       "timeout": writer.__getstate__()["timeout"], "keep_keys": False,
                       "max_delay": None}
    with clone:
        clone.append(env=2, **step(1))
        clone.end_episode(env=2, terminated=False)
    assert client.size(table_name) == 1
    writer.close()


def test_an_episode_writer_sends_a_partial_batch_whose_first_step_is_max_delay_old(
        client, table_name):
    """A slow environment's steps become sampleable within about max_delay of being
    appended, however large the batch; with max_delay=None they wait for a full batch,
    end_episode or flush."""
    make_table(client, table_name)
    with client.episode_writer(table_name, envs=2, batch=64, max_delay=0.05) as writer:
        writer.append(env=0, **step(0))
        time.sleep(0.1)
        assert client.size(table_name) == 0  # an append sends it, not a timer
        writer.append(env=1, **step(1))  # finds step 0 older than max_delay: sends both
        assert wait_until(lambda: client.size(table_name) == 2)
    with client.episode_writer(table_name, batch=64, max_delay=None) as writer:
        writer.append(**step(2))
        time.sleep(0.1)
        writer.append(**step(3))
        time.sleep(0.1)
        assert client.size(table_name) == 2
    assert client.size(table_name) == 4  # closing sent them
    with pytest.raises(replayd.InvalidArgument, match="max_delay"):
        client.episode_writer(table_name, max_delay=-1)


def test_an_end_episode_pipelined_behind_held_appends_ends_the_whole_episode(client, table_name):
    client.create_table(table_name, FIELDS, 64, episodic=True, seed=3,
                        rate_limiter=replayd.Custom(samples_per_insert=1.0, min_size_to_sample=1,
                                                    max_diff=3.0))
    writer = client.episode_writer(table_name, batch=1, max_in_flight=16)
    for i in range(6):
        writer.append(**step(i))
    writer.end_episode(terminated=True)  # returns at once, queued behind the held appends
    time.sleep(0.2)
    assert client.size(table_name) < 6  # the rate limiter holds the last appends
    for _ in range(20):  # each sample lets one more append in
        if client.size(table_name) == 6:
            break
        client.sample(table_name, 1, nstep=1, timeout=5)
    writer.flush()  # the end ran after every append: no "episode is not open" error
    (episode,) = list(client.episodes(table_name))
    assert episode["position"].tolist() == list(range(6))
    sample = client.sample(table_name, 64, nstep=2, gamma=0.5, timeout=5)
    last = sample.data["obs"][:, 0] == 5
    assert last.any()
    assert (sample.data["discount"][last] == 0).all()  # it ended terminated, after step 5
    assert (sample.data["steps"][last] == 1).all()
    writer.close()


def test_append_steps_ends_the_episodes_it_lists_after_storing_its_steps(client, table_name):
    from replayd.columns import decode_keys, prepare_insert
    from replayd.requests import insert_meta
    make_table(client, table_name)
    conn = client.open_connection()  # the writer
    first, second = conn.wait(*conn.submit({"op": "open_episodes", "table": table_name,
                                            "n": 2}, (), None, caller_waits=True),
                              10)["episodes"]

    def append(episodes, end):
        rows = [step(i) for i in range(len(episodes))]
        batch = prepare_insert(client.schema(table_name),
                               {k: np.stack([r[k] for r in rows]) for k in FIELDS})
        meta = insert_meta(table_name, batch, None)
        meta.update({"op": "append_steps", "end": end})
        ids = np.asarray(episodes, "<u8")
        return conn.wait(*conn.submit(meta, [*batch.buffers(), ids], decode_keys,
                                      caller_waits=True), 10)

    keys = append([first, first, second], [{"episode": first, "terminated": False}])
    with pytest.raises(replayd.InvalidArgument, match="is not open"):  # it ended
        append([first], [])
    with pytest.raises(replayd.InvalidArgument, match="the 1 steps were stored, but ending"):
        append([second], [{"episode": first}])
    for bad, why in [("x", "expected an array"), ([{"episode": second, "what": 1}], "what"),
                     ([{"terminated": True}], "episode")]:
        with pytest.raises(replayd.InvalidArgument, match=why):
            append([second], bad)
    assert client.size(table_name) == 4  # refused ends store nothing
    # Only the ended (truncated) episode has 3-step windows: h = 2 and 1, bootstrapped.
    sample = client.sample(table_name, 64, nstep=3, gamma=0.5, timeout=5)
    assert set(sample.keys.tolist()) == set(keys[:2].tolist())
    assert sorted(set(sample.data["steps"].tolist())) == [1, 2]
    np.testing.assert_array_equal(sample.data["discount"], 0.5 ** sample.data["steps"])
    conn.close()


@pytest.mark.parametrize("frames", [False, True], ids=["plain", "with-frame-field"])
def test_nstep_samples_of_large_steps_return_every_value_exactly(client, table_name, frames):
    """Step fields of 4 KB and more are sent from the table's rows, not copied into the
    reply (sample_nstep.cpp): every draw's values still are its start step's, the bootstrap
    field the step h on, beside small fields, computed returns and (with a frame field) the
    frame columns that follow them."""
    big = (4, 84, 84)
    fields: Dict[str, Any] = {"obs": (np.uint8, big), "act": (np.int64, ()),
                              "rew": (np.float32, ()), "next_obs": (np.uint8, big)}
    options: Dict[str, Any] = {}
    if frames:
        fields["pixels"] = (np.uint8, (6, 7))
        options = {"next_of": ["pixels"], "stack": {"pixels": 2}}
    client.create_table(table_name, fields, 64, episodic=True, **options)
    rng = np.random.default_rng(5)
    steps: Dict[int, Dict[str, Any]] = {}
    with client.episode_writer(table_name, batch=8) as writer:
        for episode in range(3):
            for t in range(10):
                act = episode * 100 + t
                step = {"obs": rng.integers(0, 256, big, dtype=np.uint8), "act": act,
                        "rew": float(t), "next_obs": rng.integers(0, 256, big, dtype=np.uint8)}
                if frames:
                    step["pixels"] = np.full((6, 7), act % 256, np.uint8)
                steps[act] = step
                writer.append(**step)
            final = {"pixels": np.zeros((6, 7), np.uint8)} if frames else {}
            writer.end_episode(terminated=False, **final)
    for k in (1, 3):
        sample = client.sample(table_name, 64, nstep=k, gamma=0.5)
        for i, act in enumerate(sample["act"].tolist()):
            h = int(sample["steps"][i])
            assert np.array_equal(sample["obs"][i], steps[act]["obs"]), (k, act)
            if not frames:
                assert np.array_equal(sample["next_obs"][i], steps[act + h - 1]["next_obs"])
            else:
                assert np.array_equal(sample["pixels"][i][-1], steps[act]["pixels"])
            want = sum(0.5 ** j * steps[act + j]["rew"] for j in range(h))
            assert sample["rew"][i] == np.float32(want)


def test_a_sample_without_nstep_draws_steps_as_items_unless_max_times_sampled(client,
                                                                              table_name):
    """Without nstep, an episodic table's stored steps are drawn as items: each its own
    fields, no return or discount. With max_times_sampled (retired per window) it is
    refused, naming nstep."""
    make_table(client, table_name)
    with client.episode_writer(table_name) as writer:
        for i in range(6):
            writer.append(**step(i))
    sample = client.sample(table_name, 64, timeout=0)
    assert set(sample.data) == set(FIELDS)
    for obs, rew, nxt in zip(sample["obs"], sample["rew"], sample["next_obs"]):
        assert obs.tolist() == step(int(rew))["obs"].tolist()
        assert nxt.tolist() == step(int(rew))["next_obs"].tolist()
    assert set(sample["rew"].tolist()) == set(range(6))
    client.create_table(table_name + "-once", FIELDS, 8, episodic=True, max_times_sampled=1)
    try:
        with pytest.raises(replayd.InvalidArgument, match="max_times_sampled: sample it with"):
            client.sample(table_name + "-once", 1, timeout=0)
    finally:
        client.drop_table(table_name + "-once")


def test_the_error_codes_trajectories_md_names_are_those_clients_get(client, table_name):
    """TRAJECTORIES.md's error codes are wire codes (docs/PROTOCOL.md's table), and an
    insert into an episodic table gets the one it names."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    protocol = (docs / "PROTOCOL.md").read_text()
    table = protocol[protocol.index("| code "):].split("\n\n", 1)[0]  # the error codes
    wire = set(re.findall(r"^\| `(\w+)` +\|", table, re.M))
    assert {"invalid_argument", "not_found", "resource_exhausted"} <= wire
    text = (docs / "TRAJECTORIES.md").read_text()
    named = re.findall(r"\(`([a-z_]+)`[,;)]", text)
    assert "invalid_argument" in named and set(named) <= wire, set(named) - wire
    refusal = re.search(r"`insert` is refused\s+on an episodic table \(`(\w+)`", text)
    assert refusal is not None
    make_table(client, table_name)
    with pytest.raises(replayd.ReplayError) as info:
        client.insert(table_name, {name: np.stack([step(0)[name]]) for name in FIELDS})
    assert info.value.code == refusal.group(1) == "invalid_argument"


@pytest.mark.parametrize("reward_dtype", [np.float32, np.float64])
def test_nstep_steps_are_int64_and_discount_has_the_reward_dtype(client, table_name,
                                                                 reward_dtype):
    """A hand-written n-step target ``rew + discount * v`` stays in the reward's dtype
    (float32 stays float32), and ``steps`` goes into torch.from_numpy and index arithmetic
    as int64, on every way of sampling."""
    fields = {"obs": (np.float32, (2,)), "rew": (reward_dtype, ()),
              "next_obs": (np.float32, (2,))}
    client.create_table(table_name, fields, 64, episodic=True)
    with client.episode_writer(table_name) as writer:
        for i in range(6):
            writer.append(obs=[i, 0], rew=1.0, next_obs=[i + 1, 0])
        writer.end_episode(terminated=True)
    fresh = replayd.Client(client.address, timeout=30)  # no schema cached yet
    with fresh, fresh.sampler(table_name, 8, nstep=3, gamma=0.9) as sampler:
        samples = [client.sample(table_name, 8, nstep=3, gamma=0.9),
                   fresh.sample_async(table_name, 8, nstep=3, gamma=0.9).result(timeout=30),
                   next(sampler)]
    for sample in samples:
        assert sample["steps"].dtype == np.int64
        assert sample["discount"].dtype == sample["rew"].dtype == reward_dtype
        target = sample["rew"] + sample["discount"] * np.ones(8, reward_dtype)
        assert target.dtype == reward_dtype
        for obs, steps, discount in zip(sample["obs"], sample["steps"], sample["discount"]):
            h = min(3, 6 - int(obs[0]))
            assert steps == h
            assert discount == reward_dtype(0.0 if int(obs[0]) + h == 6 else 0.9 ** h)
    try:
        import torch
    except ImportError:
        return
    assert torch.from_numpy(samples[0]["steps"]).dtype == torch.int64


def test_an_episode_writer_keeps_no_keys_unless_asked(client, table_name):
    """A long-lived explorer's writer does not hold every key it wrote: `keys` needs
    keep_keys=True, which collects them in append order."""
    make_table(client, table_name)
    with client.episode_writer(table_name, batch=4) as writer:
        for i in range(10):
            writer.append(**step(i))
        writer.flush()
        with pytest.raises(replayd.ReplayError, match="keep_keys=True"):
            writer.keys
    clone = pickle.loads(pickle.dumps(client.episode_writer(table_name, keep_keys=True)))
    with clone:
        for i in range(3):
            clone.append(**step(i))
        clone.flush()
        assert len(clone.keys) == 3 and clone.keys.dtype == np.uint64
    stored = np.concatenate([page["key"] for page in client.read_all(table_name)])
    assert stored[-3:].tolist() == clone.keys.tolist()
