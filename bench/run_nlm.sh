#!/usr/bin/env bash
# NLM4 LOCK+UNLOCK against the RPC NULL ceiling of the same server, in one run: 1, 8 and 64
# connections, 1 and 8 calls in flight each, once from one client host and once with every
# connection a different host (its own 127.1.x.y source address).
# Usage: bench/run_nlm.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
build=${1:-build-bench}
seconds=${2:-5}
log=$(mktemp)
"$build/src/cmd/nlockd" --listen 127.0.0.1:0 --rpcbind-register=false --admin-listen off \
  --grace 0 --log-level warn 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 200); do
  port=$(ss -ltnpH 2>/dev/null | awk -v p="pid=$pid," 'index($0, p) {n=split($4,a,":"); print a[n]; exit}' || true)
  [[ -n "$port" ]] && break
  sleep 0.05
done
[[ -n "$port" ]] || { echo "nlockd did not start"; cat "$log"; exit 1; }
for sources in "" "--distinct-sources"; do
  "$build/bench/load/nlockd-load" --target "127.0.0.1:$port" --workload nlm4-lock-unlock \
    --against-null --connections 1,8,64 --pipeline 1,8 --duration "$seconds" --warmup 1 $sources
done
