#!/usr/bin/python3
"""Summarizes scripts/bench-scale: per server binary, medians over repetitions of the
learner's solo rate, its rate beside the explorers (and the ratio, computed per repetition),
the explorers' insert rate, and the server thread's total bytes per second (inserted plus
sampled transition bytes).

Usage: scale_summary.py OUT_DIR "WORKLOAD..." SERVER_BINARY...  (reports are named
server<i>.<workload>.{solo,mixed}.<rep>.json; with several workloads, each one's explorer
inserts are also given against the first's, per repetition)
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


def main(out_dir, workloads, servers):
    print("| server | workload | learner solo (samples/s) | learner beside explorers | ratio | "
          "explorer inserts/s | total MB/s (inserted + sampled) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    inserts_of = {}
    totals_of = {}
    for i, binary in enumerate(servers):
        for workload in workloads:
            tag = f"server{i}.{workload}"
            solo = load(out_dir, tag, "solo")
            mixed = load(out_dir, tag, "mixed")
            solo_rates = [r["ops"]["sample"]["items_per_s"] for r in solo]
            mixed_rates = [r["ops"]["sample"]["items_per_s"] for r in mixed]
            ratios = [m / s for m, s in zip(mixed_rates, solo_rates)]
            inserts = [r["ops"]["insert"]["items_per_s"] for r in mixed]
            inserts_of[(i, workload)] = inserts
            total = [r["ops"]["insert"]["mb_per_s"] + r["ops"]["sample"]["mb_per_s"]
                     for r in mixed]
            totals_of[(i, workload)] = total
            print(f"| {binary} | {workload} | {med(solo_rates):,.0f} | {med(mixed_rates):,.0f} | "
                  f"{med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
                  f"{med(inserts):,.0f} | {med(total):,.0f} |")
    # Each workload's explorer inserts and total bytes against the first one's, per
    # repetition.
    for i, binary in enumerate(servers):
        base = inserts_of.get((i, workloads[0]), [])
        base_total = totals_of.get((i, workloads[0]), [])
        for workload in workloads[1:]:
            ratios = [a / b for a, b in zip(inserts_of[(i, workload)], base) if b]
            if ratios:
                print(f"{binary}: {workload} explorer inserts / {workloads[0]}: "
                      f"{med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
            totals = [a / b for a, b in zip(totals_of[(i, workload)], base_total) if b]
            if totals:
                print(f"{binary}: {workload} total bytes/s / {workloads[0]}: "
                      f"{med(totals):.2f} ({min(totals):.2f}-{max(totals):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2].split(), sys.argv[3:]))
