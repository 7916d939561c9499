"""The Python comparison benchmark (bench/python) runs end to end and reports a number for
every measure: tiny tables and durations, so this proves the harness works, not speed."""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, server_binary

COMPARE = REPO / "bench" / "python" / "compare.py"
MEASURES = ["insert1_sync", "insert1_writer", "insert64_sync", "insert64_pipelined",
            "sample_sync", "sample_prefetch", "prioritized", "mixed_explorer",
            "mixed_learner"]


def run_compare(tmp_path: Path, systems: str, measures: str = "") -> dict:
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(COMPARE), "--systems", systems, "--workloads", "W1",
         *(["--measures", measures] if measures else []),
         "--capacity", "300", "--reps", "1", "--duration", "0.05", "--warmup", "0.01",
         "--mixed-duration", "0.1", "--json", str(out), "--quiet"],
        capture_output=True, text=True, timeout=180,
        env={"REPLAYD_BIN": str(server_binary()), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("transitions/s, median of 1 (min-max)")
    return json.loads(out.read_text())


def rates(doc: dict) -> dict:
    return {(r["workload"], r["measure"], r["system"]): r["transitions_per_s"]
            for r in doc["results"]}


def test_benchmark_reports_every_measure_for_replayd_and_shared_memory(tmp_path):
    got = rates(run_compare(tmp_path, "replayd,shm"))  # prints the table with the ratio
    for measure in MEASURES:
        for system in ("replayd", "shm"):
            rate = got[("W1", measure, system)]
            assert rate["median"] > 0, (measure, system)
            assert rate["min"] <= rate["median"] <= rate["max"]


@pytest.mark.skipif(importlib.util.find_spec("redis") is None
                    or importlib.util.find_spec("zmq") is None
                    or shutil.which("redis-server") is None,
                    reason="redis, zmq or redis-server missing (scripts/bench-python "
                           "installs them)")
def test_benchmark_runs_the_networked_alternatives(tmp_path):
    got = rates(run_compare(tmp_path, "manager,redis,zmq",
                            "insert1_writer,sample_prefetch,prioritized,mixed"))
    for measure in ("insert1_writer", "sample_prefetch", "prioritized", "mixed_explorer",
                    "mixed_learner"):
        for system in ("manager", "redis", "zmq"):
            assert got[("W1", measure, system)]["median"] > 0, (measure, system)


def test_torch_learner_bench_reports_its_replay_wait(tmp_path):
    pytest.importorskip("torch", reason="torch is not importable (Debian: python3-torch)")
    out = tmp_path / "torch.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "torch_learner.py"), "--steps", "30",
         "--warmup", "5", "--fill", "2000", "--capacity", "10000", "--hidden", "32",
         "--explorers", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=180,
        env={"REPLAYD_BIN": str(server_binary()), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "% of step time" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["steps"] == 30 and doc["step_ms"] > 0 and 0 <= doc["wait_share"] < 1
    assert doc["inserts_per_s"] > 0  # the explorer inserted while the learner ran


def test_mixed_batch_bench_reports_a_ratio_for_each_case(tmp_path):
    out = tmp_path / "mixed.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "python" / "mixed.py"), "--binary",
         str(server_binary()), "--workloads", "W1", "--reps", "1", "--duration", "0.05",
         "--json", str(out)],
        capture_output=True, text=True, timeout=180, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| mixed / single |" in proc.stdout
    results = json.loads(out.read_text())["results"]
    assert sorted(results) == ["tcp W1", "unix W1"]
    assert all(case["ratio"] > 0 for case in results.values())


def test_episodic_file_tier_bench_reports_cold_cached_and_ram_rates(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "python" / "file_tier_episodes.py"), "--binary",
         str(server_binary()), "--gib", "0.02", "--ram-mib", "2", "--seconds", "0.2",
         "--repeats", "1", "--tier-dir", str(tmp_path / "tier")],
        capture_output=True, text=True, timeout=180, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "n-step (k=3) transitions/s: cold" in proc.stdout
    assert "sequence steps/s (T=8): cold" in proc.stdout
    results = json.loads(proc.stdout[:proc.stdout.rindex("}") + 1])
    assert results["tier"]["cold_rows"] > 0 and results["cold_reads"] > 0
    assert all(run["nstep_per_s"] > 0 for run in results["cold"] + results["in_ram"])
