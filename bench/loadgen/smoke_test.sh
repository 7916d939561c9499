#!/usr/bin/env bash
# Runs replayd_loadgen for about a second with tiny settings (1 explorer + 1 learner, W1,
# prioritized with updates) against a server it starts, and checks that it exits 0 and that
# its JSON report shows nonzero insert, sample and update throughput.
# Usage: smoke_test.sh LOADGEN SERVER
set -euo pipefail
loadgen=$1 server=$2
json=$(mktemp)
trap 'rm -f "$json"' EXIT
"$loadgen" --server "$server" --workload W1 --explorers 1 --learners 1 --prioritized \
  --insert-chunk 16 --sample-batch 16 --depth 2 --prefill 1000 --duration 1 \
  --limits-seconds 0.05 --json "$json"
/usr/bin/python3 - "$json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
ops = report["ops"]
for op in ("insert", "sample", "update"):
    assert op in ops, f"no {op} in the report: {report}"
    assert ops[op]["items_per_s"] > 0, f"{op} throughput is 0: {ops[op]}"
    assert ops[op]["p50_us"] > 0, f"{op} has no latency: {ops[op]}"
assert report["errors"] == 0 and report["failed_workers"] == 0, report
assert report["machine"]["unix_socket_gb_s"] > 0, report
print("loadgen smoke test: ok", {op: round(ops[op]["items_per_s"]) for op in ops})
PY
