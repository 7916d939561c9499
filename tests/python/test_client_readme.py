"""Every snippet of the client README runs as written against a server on the default
config (what ./scripts/run starts): the python blocks in order in one interpreter, as a
reader pasting them into one session would, and the replayd-cli blocks in a shell.
A python block that imports a module this machine lacks (jax) is skipped."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from conftest import REPO, server_binary

README = REPO / "client" / "python" / "README.md"
DEFAULT_ADDRESS = "unix:///tmp/replayd.sock"

RUNNER = r"""
import importlib.util, json, re, sys
namespace = {"__name__": "__readme__"}
for number, block in enumerate(json.loads(sys.argv[1])):
    modules = re.findall(r"^\s*(?:import|from)\s+(\w+)", block, re.M)
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        print(f"-- block {number} skipped: no module {missing[0]}", flush=True)
        continue
    print(f"-- block {number}", flush=True)
    exec(compile(block, f"README block {number}", "exec"), namespace)
"""


def blocks(language: str):
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), re.S)


def readme_server(make_server):
    return make_server(tcp=False, extra_args=["--config", str(REPO / "config" / "replayd.json")])


def test_client_readme_python_blocks_run_as_written(make_server):
    server = readme_server(make_server)
    code = [b.replace(DEFAULT_ADDRESS, server.unix_address) for b in blocks("python")]
    assert len(code) >= 5 and all(DEFAULT_ADDRESS not in b for b in code)
    env = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"),
               REPLAYD_BIN=str(server_binary()))
    result = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(code)], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "<replayd.Sample n=256 {obs: float32[4], act: int64[]" in out
    assert "(256, 4)" in out
    ran = re.findall(r"^-- block (\d+)$", out, re.M)
    skipped = re.findall(r"^-- block (\d+) skipped", out, re.M)  # only for missing modules
    assert len(ran) + len(skipped) == len(code) and "0" in ran, out
    assert "has waited" not in result.stderr, result.stderr  # nothing held by a limiter


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
