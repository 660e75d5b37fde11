#!/usr/bin/env bash
# NLM4 TEST against a file holding 100,000 locks, against TEST on a file holding 1 lock and the
# RPC NULL ceiling of the same server, in one run (issue 4). The files are filled over the wire.
# Usage: bench/run_nlm_test.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
build=${1:-build-bench}
seconds=${2:-5}
dir=$(mktemp -d)
"$build/src/cmd/nlockd" --listen 127.0.0.1:0 --rpcbind-register=false --admin-listen off \
  --grace 0 --store "sqlite:$dir/nlockd.db" --log-level warn 2>"$dir/log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
port=""
for _ in $(seq 200); do
  port=$(ss -ltnpH 2>/dev/null | awk -v p="pid=$pid," 'index($0, p) {n=split($4,a,":"); print a[n]; exit}' || true)
  [[ -n "$port" ]] && break
  sleep 0.05
done
[[ -n "$port" ]] || { echo "nlockd did not start"; cat "$dir/log"; exit 1; }
"$build/bench/load/nlockd-load" --target "127.0.0.1:$port" --workload nlm4-test \
  --file-locks 1,100000 --connections 1,8 --pipeline 1,8 --duration "$seconds" --warmup 1
