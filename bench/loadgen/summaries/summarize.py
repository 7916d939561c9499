#!/usr/bin/python3
"""Summarizes replayd_loadgen JSON reports (scripts/bench-loadgen): for each run label, the
median and spread (min-max) over repetitions of throughput and latency per op, the machine
limits, and ratios computed within each run before taking medians.

Usage: summarize.py REPORT.json...
"""
import json
import statistics
import sys
from collections import defaultdict


def spread(values, fmt):
    med = statistics.median(values)
    return f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main(paths):
    runs = defaultdict(list)
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        runs[report["config"]["label"]].append(report)

    print("Medians over repetitions, (min-max) in brackets. MB = 1e6 bytes of transition fields.\n")
    print("| run | op | items/s | MB/s | p50 us | p99 us | p999 us | server transitions per CPU-s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for label, reports in runs.items():
        for op in reports[0]["ops"]:
            rows = [r["ops"][op] for r in reports]
            cpu = [r.get("server_transitions_per_cpu_s", 0) for r in reports]
            print(f"| {label} | {op} | {spread([r['items_per_s'] for r in rows], '{:,.0f}')} "
                  f"| {spread([r['mb_per_s'] for r in rows], '{:.1f}')} "
                  f"| {spread([r['p50_us'] for r in rows], '{:.0f}')} "
                  f"| {spread([r['p99_us'] for r in rows], '{:.0f}')} "
                  f"| {spread([r['p999_us'] for r in rows], '{:.0f}')} "
                  f"| {spread(cpu, '{:,.0f}') if op != 'update' else ''} |")

    machines = [r["machine"] for reports in runs.values() for r in reports if "machine" in r]
    if machines:
        print(f"\nMachine limits, every run ({len(machines)}), median (min-max):\n")
        print(f"- memcpy: {spread([m['memcpy_gb_s'] for m in machines], '{:.2f}')} GB/s")
        print(f"- Unix socket, process to process: "
              f"{spread([m['unix_socket_gb_s'] for m in machines], '{:.2f}')} GB/s")
        print(f"- TCP loopback, process to process: "
              f"{spread([m['tcp_loopback_gb_s'] for m in machines], '{:.2f}')} GB/s")
        print(f"- Unix socket 64 B round trip: p50 "
              f"{spread([m['unix_rtt_us_p50'] for m in machines], '{:.1f}')} us, p99 "
              f"{spread([m['unix_rtt_us_p99'] for m in machines], '{:.1f}')} us")

    print("\nRatios, each computed within one run, median (min-max) over repetitions:\n")
    for label, reports in runs.items():
        for op in ("sample", "insert"):
            ratios = [r["ops"][op]["mb_per_s"] / (r["machine"]["unix_socket_gb_s"] * 1e3)
                      for r in reports if op in r["ops"] and "machine" in r]
            if ratios and reports[0]["config"]["item_bytes"] > 1000:
                print(f"- {label}: {op} MB/s / Unix socket bandwidth = {spread(ratios, '{:.2f}')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
