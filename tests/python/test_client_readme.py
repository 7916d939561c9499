"""Every snippet of the client README runs as written against a server on the default
config (what ./scripts/run starts): each python block on its own, in a fresh interpreter,
as a reader pasting just that block would run it (a block defining pytest tests runs under
pytest), and the replayd-cli blocks in a shell. A python block that imports a module this
machine lacks (jax) is skipped."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

from conftest import REPO, server_binary

README = REPO / "client" / "python" / "README.md"
DEFAULT_ADDRESS = "unix:///tmp/replayd.sock"


def blocks(language: str):
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), re.S)


def readme_server(make_server):
    return make_server(tcp=False, extra_args=["--config", str(REPO / "config" / "replayd.json")])


def missing_module(block: str):
    modules = re.findall(r"^\s*(?:import|from)\s+(\w+)", block, re.M)
    return next((m for m in modules if importlib.util.find_spec(m) is None), None)


def run_alone(block: str, address: str, tmp_path, number: int) -> subprocess.CompletedProcess:
    """`block` in a new interpreter (under pytest when it defines tests), nothing run before."""
    code = block.replace(DEFAULT_ADDRESS, address)
    env = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"),
               REPLAYD_BIN=str(server_binary()))
    if re.search(r"^def test_", code, re.M):
        test_file = tmp_path / f"test_readme_block_{number}.py"
        test_file.write_text(code)
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]
    else:
        args = [sys.executable, "-c", code]
    return subprocess.run(args, env=env, cwd=str(tmp_path), capture_output=True, text=True,
                          timeout=120)


def test_client_readme_python_blocks_each_run_alone_as_written(make_server, tmp_path):
    server = readme_server(make_server)
    code = blocks("python")
    assert len(code) >= 7
    ran = []
    for number, block in enumerate(code):
        if missing_module(block) is not None:
            continue
        result = run_alone(block, server.unix_address, tmp_path, number)
        assert result.returncode == 0, f"block {number}:\n{block}\n{result.stdout}{result.stderr}"
        assert "has waited" not in result.stderr, result.stderr  # nothing held by a limiter
        ran.append((number, result.stdout))
    out = dict(ran)
    assert 0 in out, "the quick start did not run"
    assert "<replayd.Sample n=256 {obs: float32[4], act: int64[]" in out[0]
    assert "(256, 4)" in out[0]
    assert any("1 passed" in text for text in out.values())  # the replayd_server fixture
    if importlib.util.find_spec("torch") is not None:  # the PyTorch block, without a client
        assert any("'rew', 'times_sampled', 'weights']" in text for text in out.values())


def test_client_readme_cli_blocks_run_as_written(make_server, tmp_path):
    server = readme_server(make_server)
    shim = tmp_path / "replayd-cli"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m replayd \"$@\"\n")
    shim.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"),
               PATH=f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    cli_blocks = [b for b in blocks("sh") if b.startswith("replayd-cli")]
    assert cli_blocks
    for block in cli_blocks:
        script = block.replace(DEFAULT_ADDRESS, server.unix_address)
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env,
                                capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, script + result.stdout + result.stderr
        assert "replay: 0 / 100,000 items" in result.stdout
