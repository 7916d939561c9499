"""The examples run, small, against the session's server."""
from __future__ import annotations

import os
import subprocess
import sys

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
