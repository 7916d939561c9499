"""The README's quickstart runs as written against a server on the default config."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO


def readme_python_blocks() -> list:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "README.md has no python block"
    return blocks


def readme_python_block() -> str:
    return readme_python_blocks()[0]


def test_readme_quickstart_runs_on_the_default_config(make_server):
    server = make_server(tcp=False, extra_args=["--config", str(REPO / "config" / "replayd.json")])
    code = readme_python_block().replace("unix:///tmp/replayd.sock", server.unix_address)
    env = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    size, shape, _ = result.stdout.split(" ", 2)
    assert size == "1000" and shape.startswith("(256,")


def run_block(code: str, server) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter, the README's address replaced by `server`'s."""
    code = code.replace("unix:///tmp/replayd.sock", server.unix_address)
    env = dict(os.environ, PYTHONPATH=str(REPO / "client" / "python"))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)


def test_readme_torch_section_runs_on_its_own_in_a_fresh_interpreter(make_server):
    pytest.importorskip("torch", reason="torch is not importable (Debian: python3-torch)")
    server = make_server(tcp=False, extra_args=["--config", str(REPO / "config" / "replayd.json")])
    blocks = readme_python_blocks()
    assert len(blocks) >= 2 and "replayd.torch" in blocks[1]
    result = run_block(blocks[1], server)  # no quickstart before it: nothing defined, no data
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("loss ") and "s for replay in 100 steps" in last, last


def test_readme_python_blocks_run_one_after_another_on_one_server(make_server):
    pytest.importorskip("torch", reason="torch is not importable (Debian: python3-torch)")
    server = make_server(tcp=False, extra_args=["--config", str(REPO / "config" / "replayd.json")])
    for block in readme_python_blocks():
        result = run_block(block, server)
        assert result.returncode == 0, block + result.stdout + result.stderr
