#!/usr/bin/python3
"""Summarizes scripts/bench-ab: per row and server binary, the median items/s over
repetitions and the ratio to the first binary, computed within each repetition (the runs of
one repetition are adjacent in time) before taking the median.

Usage: ab_summary.py OUT_DIR SERVER_BINARY...
"""
import glob
import json
import os
import re
import statistics
import sys
from collections import defaultdict


def main(out_dir, servers):
    rates = defaultdict(dict)  # (row, server index) -> {rep: items/s}
    for path in glob.glob(os.path.join(out_dir, "*.json")):
        row, server, rep = re.match(r"(.+)\.server(\d+)\.(\d+)\.json", os.path.basename(path)).groups()
        with open(path) as f:
            report = json.load(f)
        op = "insert" if "insert" in row else "sample"
        rates[(row, int(server))][int(rep)] = report["ops"][op]["items_per_s"]
    rows = sorted({row for row, _ in rates})
    print("| row | server | items/s, median | ratio to the first, median (min-max) |")
    print("|---|---|---:|---:|")
    for row in rows:
        base = rates[(row, 0)]
        for i, binary in enumerate(servers):
            mine = rates[(row, i)]
            ratios = [mine[rep] / base[rep] for rep in mine if rep in base]
            print(f"| {row} | {binary} | {statistics.median(mine.values()):,.0f} | "
                  f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
