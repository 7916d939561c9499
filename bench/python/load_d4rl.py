"""Loading a D4RL-style file into an episodic table: steps/s and the client's peak memory.

Writes a D4RL-style file of STEPS steps (obs f32[17], act f32[6], episodes of 1000 steps,
one in five ending at a timeout, the others terminal), starts a server pinned to CPU 0,
and loads the file with replayd.datasets.load_d4rl in a fresh client process pinned to
CPU 1 (so each process's peak RSS, ru_maxrss, is its own), REPEAT times; prints the median
rate and the peak RSS for each size. The memory of a load is bounded: the peak RSS does
not grow with the file.

    PYTHONPATH=client/python /usr/bin/python3 bench/python/load_d4rl.py \\
        [--binary build/service/replayd] [--steps 1000000 250000] [--repeat 3] [--profile]
Run it when nothing else is compiling (pgrep cc1plus empty): the figures are of two cores.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pinned_server import pinned_server  # noqa: E402

CLIENT = r"""
import json, resource, sys, time
import replayd, replayd.datasets
address, path, table, profile = sys.argv[1:5]
client = replayd.Client(address, timeout=120)
if profile == "1":
    import cProfile, pstats
    prof = cProfile.Profile()
    prof.enable()
result = replayd.datasets.load_d4rl(client, table, path, progress=False)
if profile == "1":
    prof.disable()
    pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(18)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"steps": result.steps, "episodes": result.episodes,
                  "seconds": result.seconds, "rate": result.steps_per_second,
                  "peak_rss_kib": rss}))
client.drop_table(table)
"""


def make_file(path: str, steps: int, seed: int = 0) -> None:
    import h5py
    rng = np.random.default_rng(seed)
    terminals = np.zeros(steps, bool)
    timeouts = np.zeros(steps, bool)
    ends = np.arange(999, steps, 1000)
    timeouts[ends[::5]] = True
    terminals[ends[np.arange(len(ends)) % 5 != 0]] = True
    with h5py.File(path, "w") as f:
        chunk = 100_000
        obs = f.create_dataset("observations", (steps, 17), np.float32)
        act = f.create_dataset("actions", (steps, 6), np.float32)
        for begin in range(0, steps, chunk):
            end = min(begin + chunk, steps)
            obs[begin:end] = rng.normal(size=(end - begin, 17))
            act[begin:end] = rng.uniform(-1, 1, (end - begin, 6))
        f["rewards"] = rng.normal(size=steps).astype(np.float32)
        f["terminals"] = terminals
        f["timeouts"] = timeouts
        f["metadata/algorithm"] = "random"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default="build/service/replayd")
    parser.add_argument("--steps", type=int, nargs="+", default=[1_000_000, 250_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true",
                        help="one more run under cProfile (its figures not counted)")
    args = parser.parse_args()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath("client/python")
    with tempfile.TemporaryDirectory() as tmp, pinned_server(args.binary) as address:
        for steps in args.steps:
            path = os.path.join(tmp, f"d4rl-{steps}.hdf5")
            make_file(path, steps)
            runs = []
            for i in range(args.repeat + (1 if args.profile else 0)):
                profile = args.profile and i == args.repeat
                out = subprocess.run(["taskset", "-c", "1", sys.executable, "-c", CLIENT,
                                      address, path, f"load{steps}_{i}", "1" if profile else "0"],
                                     env=env, capture_output=True, text=True)
                if out.returncode != 0:
                    sys.exit(f"the load failed:\n{out.stderr}")
                if profile:
                    print(out.stderr)
                    continue
                runs.append(json.loads(out.stdout))
            rates = [r["rate"] for r in runs]
            print(json.dumps({"steps": steps, "episodes": runs[0]["episodes"],
                              "median_steps_per_s": round(statistics.median(rates)),
                              "rates": [round(r) for r in rates],
                              "peak_rss_mib": round(max(r["peak_rss_kib"] for r in runs) / 1024,
                                                    1)}))


if __name__ == "__main__":
    main()
