#!/usr/bin/env bash
# Runs replayd_episode_writer_bench with tiny settings against a server it starts on a Unix
# socket, and checks that it exits 0 and reports both paths (the bench itself exits 1 when
# a writer asked for the plane is not staged).
# Usage: smoke_test.sh BENCH SERVER
set -euo pipefail
bench=$1 server=$2
dir=$(mktemp -d)
"$server" --unix "$dir/s.sock" --tcp "" --metrics "" --ready-file "$dir/ready" --log-level warn &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 200); do [ -f "$dir/ready" ] && break; sleep 0.05; done
out=$("$bench" --address "unix://$dir/s.sock" --steps 300 --reps 2)
echo "$out"
grep -q "staged / socket per repetition" <<<"$out"
