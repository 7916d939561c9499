"""replayd.cpprb of two trees against each other in one run: each tree's own
bench/python/cpprb_bench.py (so its own client) with a server binary of its own, run
alternately, and per round the ratio of the two trees' replayd.cpprb times on every row.

    git worktree add /tmp/cpprb-base <commit>
    taskset -c 1 /usr/bin/python3 bench/python/cpprb_ab.py \\
        --before-tree /tmp/cpprb-base --before-binary /work/bin/replayd-before \\
        --after-tree . --after-binary build/service/replayd [--rounds 5] [--reps 1]

A round runs cpprb_bench.py of both trees (``--reps`` repetitions each; which goes first
alternates between rounds), each starting its own server, which cpprb_bench.py pins to CPU
0; the benchmarks inherit this process's CPUs, so run it under ``taskset -c 1``. Both trees'
cpprb_bench.py must take ``--reps`` and ``--binary`` and print their markdown table.

Prints, per row and call of the table: the medians over the rounds of both trees'
replayd.cpprb and plain-client times (us), and of ``before / after`` of the replayd.cpprb
times taken within each round (above 1: after is faster), with its min-max. On a shared
machine the ratio within a round is the figure to read: both sides of a round saw about
the same load.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

Key = Tuple[str, str]  # (row, call)


def run_bench(tree: Path, binary: str, reps: int) -> Dict[Key, Tuple[float, float]]:
    """One cpprb_bench.py run of `tree` on `binary`: (plain us, replayd.cpprb us) per row."""
    script = tree / "bench" / "python" / "cpprb_bench.py"
    out = subprocess.run([sys.executable, str(script), "--reps", str(reps), "--binary",
                          binary], check=True, capture_output=True, text=True, cwd=tree).stdout
    rows: Dict[Key, Tuple[float, float]] = {}
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] in ("row", "") or cells[0].startswith("---"):
            continue
        try:
            rows[(cells[0], cells[1])] = (float(cells[2]), float(cells[3]))
        except ValueError:
            continue
    if not rows:
        raise RuntimeError(f"{script} printed no table:\n{out}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before-tree", required=True, type=Path)
    parser.add_argument("--before-binary", required=True)
    parser.add_argument("--after-tree", default=str(Path(__file__).resolve().parents[2]),
                        type=Path)
    parser.add_argument("--after-binary", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=1, help="cpprb_bench.py --reps per run")
    args = parser.parse_args()
    sides = {"before": (args.before_tree.resolve(), os.path.abspath(args.before_binary)),
             "after": (args.after_tree.resolve(), os.path.abspath(args.after_binary))}
    print(f"client CPUs {sorted(os.sched_getaffinity(0))}; server CPU 0 (cpprb_bench.py)",
          file=sys.stderr)
    runs: Dict[str, List[Dict[Key, Tuple[float, float]]]] = {"before": [], "after": []}
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for side in order:
            tree, binary = sides[side]
            runs[side].append(run_bench(tree, binary, args.reps))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    keys = [key for key in runs["after"][0] if all(key in run for run in runs["before"])]
    print("| row | call | plain before (us) | plain after (us) | replayd.cpprb before (us) | "
          "replayd.cpprb after (us) | before / after, median (min-max) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for key in keys:
        ratios = [b[key][1] / a[key][1] for b, a in zip(runs["before"], runs["after"])]
        cols = [statistics.median(run[key][i] for run in runs[side])
                for side, i in (("before", 0), ("after", 0), ("before", 1), ("after", 1))]
        print(f"| {key[0]} | {key[1]} | " + " | ".join(f"{c:.1f}" for c in cols) +
              f" | {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |")


if __name__ == "__main__":
    main()
