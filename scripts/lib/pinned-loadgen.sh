# Sourced by scripts/bench-scale and scripts/bench-ab: run_pinned BINARY JSON_OUT LOADGEN_ARGS...
# starts BINARY on a temporary Unix socket pinned to CPU 0, runs the load generator pinned to
# CPU 1 against it (so the figures show the server, not the OS scheduler), then stops it.
# Needs: loadgen (path of replayd_loadgen). SERVER_ARGS: more server flags (e.g. --config F).
run_pinned() {
  local binary=$1 json=$2
  shift 2
  local dir pid server_args
  read -r -a server_args <<<"${SERVER_ARGS:-}"
  dir=$(mktemp -d /tmp/replayd-pinned-XXXXXX)
  taskset -c 0 "$binary" --unix "$dir/s.sock" --tcp "" --metrics "" --ready-file "$dir/ready" \
    --log-level warn "${server_args[@]}" &
  pid=$!
  for _ in $(seq 200); do [ -f "$dir/ready" ] && break; sleep 0.05; done
  taskset -c 1 "$loadgen" --address "unix://$dir/s.sock" --limits-seconds 0 --json "$json" "$@" \
    >/dev/null
  kill "$pid"
  wait "$pid" || true
  rm -rf "$dir"
}
