"""Datasets in and out (replayd.datasets, replayd-cli load/export), judged by the real
Minari (../shared/minari: its describe.py prints a line per episode with a hash of every
array) and, for D4RL-style files, array for array."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, Iterator, List

import numpy as np
import pytest

import replayd
import replayd.datasets as datasets
from replayd import cli
from replayd.datasets.step_sender import StepSender

h5py = pytest.importorskip("h5py")

REPO = Path(__file__).resolve().parents[2]
MINARI = REPO.parent / "shared" / "minari"
FIXTURES = MINARI / "datasets"
needs_minari = pytest.mark.skipif(not (MINARI / "python").exists(),
                                  reason="../shared/minari (the real Minari) is absent")


@pytest.fixture
def uclient(server) -> Iterator[replayd.Client]:
    with replayd.Client(server.unix_address, timeout=60) as c:
        yield c


_SERVER_SENDS_END: Dict[str, bool] = {}


@pytest.fixture
def ends(server, uclient) -> None:
    """Skips unless the server's read_steps replies carry each step's ``end`` (how its
    episode ended), which exports and read_episodes' terminated/truncated need."""
    if "sends" not in _SERVER_SENDS_END:
        name = "probe_end_column"
        uclient.create_table(name, {"x": (np.float32, ()), "rew": (np.float32, ())}, 4,
                             episodic=True, exist_ok=True)
        with uclient.episode_writer(name) as writer:
            writer.append(x=1.0, rew=0.0)
            writer.end_episode(terminated=True)
        page = next(iter(uclient.read_all(name)))
        uclient.drop_table(name)
        _SERVER_SENDS_END["sends"] = "end" in page
    if not _SERVER_SENDS_END["sends"]:
        pytest.skip("this server's read_steps sends no 'end' column yet")


def describe(path: Path) -> List[str]:
    """describe.py's lines for the dataset folder `path`, by the real Minari."""
    result = subprocess.run([str(MINARI / "python"), str(MINARI / "describe.py"), str(path)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@needs_minari
@pytest.mark.parametrize("fixture", ["cartpole/random-v0", "dictbot/mixed-v0"])
def test_a_minari_dataset_exported_again_describes_as_the_original(uclient, ends, table_name,
                                                                    tmp_path, fixture):
    original = FIXTURES / fixture / "data"
    loaded = datasets.load(uclient, table_name, str(original.parent))
    meta = json.loads((original / "metadata.json").read_text())
    assert (loaded.episodes, loaded.steps) == (meta["total_episodes"], meta["total_steps"])
    out = tmp_path / "data"
    exported = datasets.export(uclient, table_name, str(out), format="minari")
    assert exported.episodes == meta["total_episodes"] and exported.skipped == 0
    assert describe(out) == describe(original)


@needs_minari
def test_a_minari_export_loads_with_minari_load_dataset(uclient, ends, table_name, tmp_path):
    datasets.load(uclient, table_name, str(FIXTURES / "cartpole" / "random-v0"))
    datasets.export(uclient, table_name, str(tmp_path / "cartpole" / "random-v0" / "data"))
    code = ("import minari; d = minari.load_dataset('cartpole/random-v0'); "
            "e = next(d.iterate_episodes()); print(d.total_episodes, d.total_steps, len(e))")
    result = subprocess.run([str(MINARI / "python"), "-c", code], capture_output=True,
                            text=True, timeout=300,
                            env={**os.environ, "MINARI_DATASETS_PATH": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[:2] == ["200", "4193"]


def test_the_dictbot_camera_is_stored_as_its_jpeg_bytes_and_infos_kept(uclient, ends,
                                                                       table_name):
    if not FIXTURES.exists():
        pytest.skip("../shared/minari is absent")
    datasets.load(uclient, table_name, str(FIXTURES / "dictbot" / "mixed-v0"))
    schema = uclient.schema(table_name)
    # one episode ends terminated and truncated at once (the time limit's step): the
    # per-step flags are kept for it
    assert [f.name for f in schema.fields] == ["obs/camera", "obs/state", "act", "rew",
                                               "info/success", "terminations", "truncations"]
    assert schema.by_name["obs/camera"].dtype == np.uint8
    with h5py.File(FIXTURES / "dictbot" / "mixed-v0" / "data" / "main_data.hdf5") as f:
        first = bytes(f["episode_0/observations/camera"][0])
        success = f["episode_0/infos/success"][()]
    episode = next(iter(datasets.ended_episodes(uclient, table_name)))
    row = episode.rows["obs/camera"][0]
    size = int(row[:4].view("<u4")[0])
    assert bytes(row[4:4 + size]) == first
    np.testing.assert_array_equal(episode.rows["info/success"], success)
    pil = pytest.importorskip("PIL.Image")
    import io
    from replayd.datasets import jpeg_fields
    pixels = jpeg_fields.decode(episode.rows["obs/camera"][:2])
    assert pixels.shape == (2, 32, 32, 3)
    np.testing.assert_array_equal(pixels[0], np.array(pil.open(io.BytesIO(first))))


@needs_minari
def test_a_minari_04_layout_with_metadata_in_root_attributes_loads(uclient, ends, table_name,
                                                                   tmp_path):
    source = FIXTURES / "cartpole" / "random-v0" / "data"
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(source / "main_data.hdf5", old / "main_data.hdf5")
    meta = json.loads((source / "metadata.json").read_text())
    meta["minari_version"] = "0.4.3"
    with h5py.File(old / "main_data.hdf5", "a") as f:
        for key, value in meta.items():
            f.attrs[key] = value
    loaded = datasets.load(uclient, table_name, str(old))
    assert loaded.episodes == 200
    out = tmp_path / "data"
    datasets.export(uclient, table_name, str(out))
    assert describe(out) == describe(source)


def make_d4rl(path: Path, n: int = 500, *, next_obs: bool, seed: int = 0,
              column_rewards: bool = False) -> None:
    rng = np.random.default_rng(seed)
    terminals = rng.random(n) < 0.03
    timeouts = np.zeros(n, bool)
    timeouts[49::50] = True
    timeouts &= ~terminals
    terminals[-1], timeouts[-1] = False, True  # the file ends at a timeout
    obs = rng.normal(size=(n, 5)).astype(np.float32)
    with h5py.File(path, "w") as f:
        f["observations"] = obs
        f["actions"] = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
        rewards = rng.normal(size=n).astype(np.float32)
        f["rewards"] = rewards.reshape(n, 1) if column_rewards else rewards
        f["terminals"] = terminals.astype(np.float32)
        f["timeouts"] = timeouts
        if next_obs:
            following = np.concatenate([obs[1:], rng.normal(size=(1, 5)).astype(np.float32)])
            ends = np.flatnonzero(terminals | timeouts)
            following[ends] = rng.normal(size=(len(ends), 5))
            f["next_observations"] = following
        f["infos/qpos"] = rng.normal(size=(n, 3))
        f["metadata/algorithm"] = "sac"
        f["metadata/iterations"] = np.int64(7)


def assert_same_files(a: Path, b: Path) -> None:
    with h5py.File(a) as fa, h5py.File(b) as fb:
        names_a: List[str] = []
        names_b: List[str] = []
        fa.visititems(lambda n, o: names_a.append(n) if hasattr(o, "dtype") else None)
        fb.visititems(lambda n, o: names_b.append(n) if hasattr(o, "dtype") else None)
        assert sorted(names_a) == sorted(names_b)
        for name in names_a:
            x, y = fa[name][()], fb[name][()]
            assert fa[name].dtype == fb[name].dtype or fa[name].dtype.kind == "O", name
            assert np.shape(x) == np.shape(y), name
            assert np.array_equal(x, y), name


@pytest.mark.parametrize("next_obs,column_rewards", [(True, True), (False, False)])
def test_a_d4rl_file_round_trips_array_for_array(uclient, ends, table_name, tmp_path,
                                                 next_obs, column_rewards):
    source = tmp_path / "in.hdf5"
    make_d4rl(source, next_obs=next_obs, column_rewards=column_rewards)
    datasets.load(uclient, table_name, str(source), chunk_steps=64)  # episodes span chunks
    out = tmp_path / "out.hdf5"
    datasets.export(uclient, table_name, str(out), format="d4rl")
    assert_same_files(source, out)


def test_the_d4rl_fixture_round_trips_array_for_array(uclient, ends, table_name, tmp_path):
    source = FIXTURES / "d4rl-style" / "hopper-like.hdf5"
    if not source.exists():
        pytest.skip("../shared/minari is absent")
    datasets.load(uclient, table_name, str(source))
    out = tmp_path / "out.hdf5"
    datasets.export(uclient, table_name, str(out), format="d4rl")
    assert_same_files(source, out)


def test_terminated_and_truncated_episodes_stay_apart(uclient, ends, table_name, tmp_path):
    source = tmp_path / "in.hdf5"
    make_d4rl(source, next_obs=True)
    datasets.load(uclient, table_name, str(source))
    with h5py.File(source) as f:
        terminals = f["terminals"][()].astype(bool)
        timeouts = f["timeouts"][()]
        next_obs = f["next_observations"][()]
    episodes = uclient.read_episodes(table_name)
    assert int(episodes["terminated"].sum()) == int(terminals.sum())
    assert int(episodes["truncated"].sum()) == int(timeouts.sum())
    # n-step samples: no bootstrap after a termination, the final observation after a
    # truncation
    sample = uclient.sample(table_name, 2000, nstep=1, gamma=0.5)
    rows = {int(k): i for i, k in enumerate(episodes["key"].tolist())}
    steps = np.array([rows[int(k)] for k in sample.keys])
    step_index = np.concatenate([np.arange(b, e - 1) for b, e in
                                 zip(episodes["offsets"][:-1], episodes["offsets"][1:])])
    file_row = {int(r): i for i, r in enumerate(step_index.tolist())}
    source_rows = np.array([file_row[int(s)] for s in steps])
    discount = sample.data["discount"]
    np.testing.assert_array_equal(discount == 0, terminals[source_rows])
    np.testing.assert_array_equal(sample.data["next_obs"], next_obs[source_rows])


def test_the_cli_loads_and_exports(server, ends, table_name, tmp_path, capsys):
    source = tmp_path / "in.hdf5"
    make_d4rl(source, next_obs=False)
    address = server.unix_address
    assert cli.main(["load", address, table_name, str(source)]) == 0
    assert capsys.readouterr().out.startswith("loaded ")
    out = tmp_path / "out.hdf5"
    assert cli.main(["export", address, table_name, str(out), "--format", "d4rl"]) == 0
    printed = capsys.readouterr()
    assert f"of table '{table_name}' to {out}" in printed.out
    assert printed.err == ""  # no progress line when stderr is not a terminal
    assert_same_files(source, out)
    assert cli.main(["load", address, table_name + "x", str(tmp_path / "missing")]) == 2


def test_an_interrupted_load_says_how_many_episodes_are_stored(uclient, ends, table_name,
                                                               tmp_path, monkeypatch, capsys):
    source = tmp_path / "in.hdf5"
    make_d4rl(source, n=1000, next_obs=True)
    real_send = StepSender.send
    calls = []

    def send_then_stop(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_send(self, *args, **kwargs)

    monkeypatch.setattr(StepSender, "send", send_then_stop)
    with pytest.raises(KeyboardInterrupt):
        datasets.load(uclient, table_name, str(source), chunk_steps=200)
    err = capsys.readouterr().err
    stored = uclient.read_episodes(table_name)
    ended = int(stored["terminated"].sum() + stored["truncated"].sum())
    with h5py.File(source) as f:
        done = (f["terminals"][()].astype(bool) | f["timeouts"][()])[:400]
    assert f"{int(done.sum())} episodes" in err
    assert ended >= int(done.sum())  # the episode left open ends truncated with the connection


def test_read_items_pages_a_plain_table_in_insertion_order(uclient, table_name):
    uclient.create_table(table_name, {"x": (np.int64, ())}, 1000)
    uclient.insert(table_name, {"x": np.arange(250)}, priorities=np.arange(250) + 1.0)
    try:
        pages = list(uclient.read_items(table_name, page=100))
    except replayd.InvalidArgument as exc:
        pytest.skip(f"this server reads no plain table's items yet: {exc}")
    assert [len(p["key"]) for p in pages] == [100, 100, 50]
    x = np.concatenate([p["x"] for p in pages])
    np.testing.assert_array_equal(x, np.arange(250))
    np.testing.assert_array_equal(np.concatenate([p["priority"] for p in pages]),
                                  np.arange(250) + 1.0)
    keys = np.concatenate([p["key"] for p in pages])
    assert np.all(np.diff(keys.astype(np.int64)) > 0)


def test_table_metadata_comes_back_unchanged(uclient, table_name):
    metadata = {"a": [1, 2.5, None, "x"], "b": {"c": True}}
    uclient.create_table(table_name, {"x": (np.int64, ())}, 10, metadata=metadata)
    assert uclient.table_info(table_name)["description"]["metadata"] == metadata


def test_progress_shows_rate_and_time_left_on_a_terminal_only():
    import io
    from replayd.datasets.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown = Terminal()
    bar = Progress(1000, stream=shown)
    bar.update(250, force=True)
    bar.close(1000)
    assert "250/1,000 steps" in shown.getvalue() and "steps/s" in shown.getvalue()
    assert "left" in shown.getvalue() and shown.getvalue().endswith("\n")
    piped = io.StringIO()
    quiet = Progress(1000, stream=piped)
    quiet.update(250, force=True)
    quiet.close(1000)
    assert piped.getvalue() == ""


def test_a_chunk_larger_than_a_request_may_carry_goes_in_several(uclient, ends, table_name,
                                                                 tmp_path):
    source = tmp_path / "in.hdf5"
    make_d4rl(source, n=70_000, next_obs=False)  # over max_batch_items (65,536) in a chunk
    loaded = datasets.load(uclient, table_name, str(source))
    with h5py.File(source) as f:
        ended = int((f["terminals"][()].astype(bool) | f["timeouts"][()]).sum())
    assert (loaded.steps, loaded.episodes) == (70_000, ended)
    assert uclient.read_episodes(table_name)["terminated"].sum() == int(
        h5py.File(source)["terminals"][()].sum())


def test_a_load_that_fails_part_way_says_how_many_episodes_are_stored(uclient, ends,
                                                                       table_name, tmp_path,
                                                                       monkeypatch):
    source = tmp_path / "in.hdf5"
    make_d4rl(source, n=1000, next_obs=True)
    real_send = StepSender.send
    calls = []

    def send_then_fail(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk went away")
        return real_send(self, *args, **kwargs)

    monkeypatch.setattr(StepSender, "send", send_then_fail)
    with pytest.raises(datasets.LoadInterrupted, match="disk went away") as caught:
        datasets.load(uclient, table_name, str(source), chunk_steps=300)
    with h5py.File(source) as f:
        done = int((f["terminals"][()].astype(bool) | f["timeouts"][()])[:300].sum())
    assert caught.value.episodes == done
    assert f"{done} episodes" in str(caught.value)


def test_loading_into_a_table_of_other_fields_is_refused_naming_the_difference(
        uclient, table_name, tmp_path):
    source = tmp_path / "in.hdf5"
    make_d4rl(source, n=100, next_obs=False)
    uclient.create_table(table_name, {"obs": (np.float32, (4,)), "rew": (np.float32, ())}, 10,
                         episodic=True)
    with pytest.raises(replayd.InvalidArgument, match="exists with other fields"):
        datasets.load(uclient, table_name, str(source))
    assert uclient.size(table_name) == 0


@needs_minari
def test_a_table_written_by_a_writer_exports_as_a_minari_dataset(uclient, ends, table_name,
                                                                  tmp_path):
    obs_spec = {"a": (np.float32, (3,)), "b": ((np.int64, ()), (np.float32, (2,)))}
    uclient.create_table(table_name, {"obs": obs_spec, "act": (np.int64, ()),
                                      "rew": (np.float32, ())}, 1000, episodic=True,
                         next_of=["obs"])

    def obs(t: int) -> dict:
        return {"a": np.full(3, t, np.float32), "b": (t, np.full(2, -t, np.float32))}

    with uclient.episode_writer(table_name) as writer:
        for length, terminated in ((5, True), (3, False)):
            for t in range(length):
                writer.append(obs=obs(t), act=t, rew=float(t))
            writer.end_episode(terminated=terminated, obs=obs(length))
        writer.append(obs=obs(0), act=0, rew=0.0)  # an open episode: not exported
        writer.flush()
        out = tmp_path / "data"
        result = datasets.export(uclient, table_name, str(out))
    assert (result.episodes, result.steps, result.skipped) == (2, 8, 1)
    lines = [json.loads(line) for line in describe(out)]
    assert [row["steps"] for row in lines[:-1]] == [5, 3]
    assert lines[0]["observations/b/1"].startswith("<f4[6, 2]")
    assert "Dict('a': Box" in lines[-1]["observation_space"]
    assert "Tuple(Box" in lines[-1]["observation_space"]
