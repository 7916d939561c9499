#!/usr/bin/python3
"""Summarizes scripts/bench-scale: per server binary, medians over repetitions of the
learner's solo rate, its rate beside the explorers (and the ratio, computed per repetition),
the explorers' insert rate, and the server thread's total bytes per second (inserted plus
sampled transition bytes).

Usage: scale_summary.py OUT_DIR SERVER_BINARY...
"""
import glob
import json
import os
import statistics
import sys


def load(out_dir, tag, label):
    reports = []
    for path in sorted(glob.glob(os.path.join(out_dir, f"{tag}.{label}.*.json"))):
        with open(path) as f:
            reports.append(json.load(f))
    return reports


def med(values):
    return statistics.median(values) if values else float("nan")


def main(out_dir, servers):
    print("| server | learner solo (samples/s) | learner beside explorers | ratio | "
          "explorer inserts/s | total MB/s (inserted + sampled) |")
    print("|---|---:|---:|---:|---:|---:|")
    for i, binary in enumerate(servers):
        solo = load(out_dir, f"server{i}", "solo")
        mixed = load(out_dir, f"server{i}", "mixed")
        solo_rates = [r["ops"]["sample"]["items_per_s"] for r in solo]
        mixed_rates = [r["ops"]["sample"]["items_per_s"] for r in mixed]
        ratios = [m / s for m, s in zip(mixed_rates, solo_rates)]
        inserts = [r["ops"]["insert"]["items_per_s"] for r in mixed]
        total = [r["ops"]["insert"]["mb_per_s"] + r["ops"]["sample"]["mb_per_s"] for r in mixed]
        print(f"| {binary} | {med(solo_rates):,.0f} | {med(mixed_rates):,.0f} | "
              f"{med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {med(inserts):,.0f} | "
              f"{med(total):,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
