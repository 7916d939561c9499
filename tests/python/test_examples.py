"""The examples run, small, against the session's server."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import replayd
from conftest import REPO


def run_example(name, *args, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"))
    return subprocess.run([sys.executable, str(REPO / "examples" / name), *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_apex_style_runs_and_prints_rates(server, table_name):
    result = run_example("apex_style.py", "--address", server.unix_address,
                         "--table", table_name, "--explorers", "2", "--steps", "300",
                         "--learner-steps", "30", "--batch-size", "32",
                         "--capacity", "1000")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "inserts/s" in result.stdout and "samples/s" in result.stdout
    assert "inserts 600," in result.stdout


def test_dqn_cartpole_learns_on_a_small_budget_and_plots(server, tmp_path):
    pytest.importorskip("torch", reason="torch is not importable (Debian: python3-torch)")
    result = run_example("dqn_cartpole.py", "--address", server.unix_address,
                         "--table", "dqn_smoke", "--explorers", "2", "--env-steps", "1200",
                         "--min-replay", "200", "--hidden", "32", "--quiet",
                         "--out", str(tmp_path / "out"), timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = next(line for line in result.stdout.splitlines() if "solved" in line)
    assert "after 1200 env steps" in summary and "learner waited for replay" in summary
    learner_steps = int(summary.split(" learner steps")[0].rsplit(" ", 1)[1])
    assert learner_steps > 20  # the learner trained on what the explorers sent
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "out" / "returns.png").stat().st_size > 0
    assert (tmp_path / "out" / "replay_wait.png").stat().st_size > 0


def test_cpprb_apex_runs_with_only_the_import_and_address_changed(server):
    result = run_example("cpprb_apex.py", "--address", server.unix_address,
                         "--explorers", "2", "--explorer-steps", "400",
                         "--local-size", "50", "--train-steps", "50")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "learner steps 50, stored " in result.stdout
    source = (REPO / "examples" / "cpprb_apex.py").read_text()
    code = source.split('"""', 2)[2]
    assert [line.strip() for line in code.splitlines() if "replayd" in line] == [
        "from replayd.cpprb import MPPrioritizedReplayBuffer",
        'parser.add_argument("--address", default="unix:///tmp/replayd.sock")']


@pytest.mark.parametrize("mode,learner_steps", [("nstep", "100"), ("sequences", "300")])
def test_episodic_learner_estimates_the_random_walk_values(server, table_name, mode,
                                                           learner_steps):
    result = run_example("episodic_learner.py", "--address", server.unix_address,
                         "--table", table_name, "--mode", mode, "--env-steps", "1500",
                         "--learner-steps", learner_steps, "--batch-size", "32")
    assert result.returncode == 0, result.stdout + result.stderr
    error = float(result.stdout.split("mean absolute error ")[1].split()[0])
    assert error < 0.08, result.stdout


def test_episodic_learner_modes_run_one_after_another_without_table(make_server):
    server = make_server(tcp=False)
    for mode in ("nstep", "sequences", "nstep"):  # each mode's table, then reused
        result = run_example("episodic_learner.py", "--address", server.unix_address,
                             "--mode", mode, "--env-steps", "600", "--learner-steps", "20",
                             "--batch-size", "16")
        assert result.returncode == 0, mode + result.stdout + result.stderr
        assert "mean absolute error" in result.stdout
    with replayd.Client(server.unix_address) as client:
        assert sorted(client.tables()) == ["episodic_learner_nstep",
                                           "episodic_learner_sequences"]
