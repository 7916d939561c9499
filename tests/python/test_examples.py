"""The examples run, small, against the session's server; each command that the README
files and the examples' docstrings give runs as written (from the repository root, Debian's
/usr/bin/python3, no PYTHONPATH), with flags for a short run added."""
from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import replayd
from conftest import REPO, server_binary


def example_env() -> Dict[str, str]:
    """The environment a user has: no PYTHONPATH pointing at the client."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run_example(name, *args, timeout=120):
    return subprocess.run([sys.executable, str(REPO / "examples" / name), *args],
                          env=example_env(), cwd=str(REPO), capture_output=True, text=True,
                          timeout=timeout)


# A documented command: optional VAR=value assignments, then Debian's interpreter on an
# example, from the repository root.
COMMAND = re.compile(r"(?:[A-Z_]+=\S+\s+)*/usr/bin/python3\s+examples/\S+\.py\b.*")
# Flags that make each example's run short (appended: argparse keeps the last value).
SHORT_RUN = {
    "apex_style.py": ["--explorers", "2", "--steps", "300", "--learner-steps", "30",
                      "--batch-size", "32", "--capacity", "1000"],
    "cpprb_apex.py": ["--explorers", "2", "--explorer-steps", "400", "--local-size", "50",
                      "--train-steps", "50"],
    "episodic_learner.py": ["--env-steps", "600", "--learner-steps", "20",
                            "--batch-size", "16"],
    "dqn_cartpole.py": ["--env-steps", "1200", "--min-replay", "200", "--hidden", "32",
                        "--quiet", "--no-plots"],
    "offline_to_online.py": ["--smoke", "--no-plots"],
}
# examples/_name.py: code the examples share, not an example.
EXAMPLES = sorted(p.name for p in (REPO / "examples").glob("*.py")
                  if not p.name.startswith("_"))
# Examples that write files: to the test's folder, not examples/out.
WRITES_OUT = ("dqn_cartpole.py", "offline_to_online.py")


def documented_commands() -> List[Tuple[str, str]]:
    """(where, command) for every example command in README.md, client/python/README.md
    and the examples' docstrings; a line ending in a backslash continues on the next."""
    texts = {"README.md": (REPO / "README.md").read_text(),
             "client/python/README.md": (REPO / "client" / "python" / "README.md").read_text()}
    for name in EXAMPLES:
        source = (REPO / "examples" / name).read_text()
        texts[f"examples/{name}"] = ast.get_docstring(ast.parse(source)) or ""
    found = []
    for where, text in texts.items():
        text = re.sub(r"\\\n\s*", " ", text)
        for line in text.splitlines():
            match = COMMAND.search(line.strip().strip("`"))
            if match:
                found.append((where, match.group(0).split("`")[0].strip()))
    return found


COMMANDS = documented_commands()


def example_of(command: str) -> str:
    return command.split("/usr/bin/python3", 1)[1].split()[0].rsplit("/", 1)[1]


def test_every_example_has_a_documented_command():
    documented = {example_of(command) for _, command in COMMANDS}
    missing = [name for name in EXAMPLES if name not in documented]
    assert not missing, f"examples without a `/usr/bin/python3 examples/...` command: {missing}"


@pytest.mark.parametrize("where,command", COMMANDS,
                         ids=[f"{w}:{c.split('examples/')[1][:40]}" for w, c in COMMANDS])
def test_documented_example_command_runs_as_written(where, command, make_server, tmp_path):
    words = shlex.split(command, comments=True)
    env = example_env()
    # Only the command's own REPLAYD_BIN= counts (the sanitizer run exports one for the test
    # servers): a user running the line as written has none.
    env.pop("REPLAYD_BIN", None)
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env[name] = str(server_binary()) if name == "REPLAYD_BIN" else value
    assert words[0] == "/usr/bin/python3", command
    example = Path(words[1]).name
    if "--prometheus" in words and shutil.which("prometheus") is None:
        pytest.skip("prometheus is not on PATH (scripts/setup-deps installs it)")
    extra = list(SHORT_RUN[example])
    if "REPLAYD_BIN" not in env or "--address" in words:  # else it starts its own server
        extra += ["--address", make_server(tcp=False).unix_address]
    if example in WRITES_OUT:
        extra += ["--out", str(tmp_path / "out")]
    result = subprocess.run(words + extra, env=env, cwd=str(REPO), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, f"{where}: {command}\n{result.stdout}{result.stderr}"


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


def test_offline_to_online_smoke_records_loads_and_mixes_demonstrations(server, table_name,
                                                                         tmp_path):
    pytest.importorskip("torch", reason="torch is not importable (Debian: python3-torch)")
    pytest.importorskip("h5py", reason="h5py is not importable (Debian: python3-h5py)")
    out = tmp_path / "out"
    result = run_example("offline_to_online.py", "--smoke", "--address", server.unix_address,
                         "--online-table", f"{table_name}_online",
                         "--demos-table", f"{table_name}_demos", "--out", str(out),
                         timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "demonstrations: 4 episodes, " in result.stdout, result.stdout
    dataset = out / "minari" / "replayd" / "cartpole-scripted-v0" / "data"
    metadata = json.loads((dataset / "metadata.json").read_text())
    assert metadata["total_episodes"] == 4
    assert json.loads(metadata["action_space"])["type"] == "Discrete"
    assert (dataset / "main_data.hdf5").stat().st_size > 0
    runs = json.loads((out / "offline_to_online.json").read_text())["runs"]
    assert [(r["seed"], r["demo_share"]) for r in runs] == [(0, 0.5), (0, 0.0)]
    for run in runs:  # both arms trained on what the explorers (and the demos) gave
        assert run["env_steps"] == 1500 and run["learner_steps"] > 20, run
    for arm in ("with 50 % demonstrations", "without demonstrations"):
        assert f"median env steps to a mean return of 475 {arm}: " in result.stdout
    with replayd.Client(server.unix_address) as client:  # its tables dropped at the end
        assert not {f"{table_name}_online", f"{table_name}_demos"} & set(client.tables())
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (out / "offline_to_online.png").stat().st_size > 0


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
