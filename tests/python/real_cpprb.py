"""The real cpprb, for tests that check replayd.cpprb against it: built from ../shared/cpprb
at /tmp/cpprb-real by ``../shared/cpprb/run-suite`` (scripts/test builds it there when
../shared/cpprb exists; ``FILES=' ' ../shared/cpprb/run-suite`` builds it and runs no test
file). It runs in a subprocess of its own (``PYTHONPATH=/tmp/cpprb-real``), so that its
``cpprb`` never meets this process's modules: `run` hands it a buffer's construction, its
adds, and what to save, load, dump or sample, as the script below does them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

REAL = Path("/tmp/cpprb-real")
SHARED = Path(__file__).resolve().parents[3] / "shared" / "cpprb"

_SCRIPT = r'''
import json, sys
import numpy as np
import cpprb

spec = json.loads(sys.argv[1])
kind = getattr(cpprb, spec.get("kind", "ReplayBuffer"))
env_dict = {name: {k: (tuple(v) if isinstance(v, list) else v) for k, v in entry.items()}
            for name, entry in spec["env_dict"].items()}
rb = kind(spec["size"], env_dict, **spec.get("kwargs", {}))
if "adds" in spec:
    with np.load(spec["adds"], allow_pickle=True) as adds:
        for i in range(int(adds["count"])):
            rb.add(**adds[f"add{i}"].item())
            if i in spec.get("episode_ends", []):
                rb.on_episode_end()
if "load" in spec:
    rb.load_transitions(spec["load"])
if "save" in spec:
    rb.save_transitions(spec["save"], safe=spec.get("safe", True))
out = {}
if "dump" in spec:
    np.savez(spec["dump"], **rb.get_all_transitions())
if "sample" in spec:
    np.random.seed(0)
    batch = rb.sample(spec["sample"], beta=spec.get("beta", 0.4))
    out["indexes"] = batch["indexes"].tolist()
    out["weights"] = batch["weights"].tolist()
print(json.dumps(out))
'''


def available() -> None:
    """Skips the calling test, saying how to build it, when the real cpprb is not built."""
    probe = subprocess.run([sys.executable, "-c", "import cpprb.PyReplayBuffer"],
                           env=dict(os.environ, PYTHONPATH=str(REAL)), capture_output=True,
                           timeout=60)
    if probe.returncode != 0:
        how = (f"FILES=' ' {SHARED}/run-suite builds it (scripts/test does)" if SHARED.exists()
               else f"its sources ({SHARED}) are not in this checkout's neighbourhood")
        pytest.skip(f"the real cpprb is not built at {REAL}: {how}")


def run(spec: Dict[str, Any]) -> Dict[str, Any]:
    """Runs `spec` (see the module docstring) on the real cpprb; its JSON output."""
    result = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(spec)],
                            env=dict(os.environ, PYTHONPATH=str(REAL)), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out: Dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return out
