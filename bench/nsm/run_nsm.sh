#!/usr/bin/env bash
# SM_MON throughput (1 and 64 clients, durable on SQLite) against the RPC NULL ceiling, and SM_MON
# latency with no registrations and with 10,000 present, against a fresh nlockd on a fresh
# SQLite file. Usage: bench/nsm/run_nsm.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
build=${1:-build-bench}
seconds=${2:-3}
dir=$(mktemp -d)
"$build/src/cmd/nlockd" --listen 127.0.0.1:0 --rpcbind-register=false --grace 0 \
  --store "sqlite:$dir/nlockd.db" --nsm-max-registrations 10000000 --log-level warn \
  2>"$dir/log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
port=""
for _ in $(seq 200); do
  port=$(ss -ltnpH 2>/dev/null | awk -v p="pid=$pid," 'index($0, p) {n=split($4,a,":"); print a[n]; exit}' || true)
  [[ -n "$port" ]] && break
  sleep 0.05
done
[[ -n "$port" ]] || { echo "nlockd did not start"; cat "$dir/log"; exit 1; }
"$build/bench/nsm/nlockd-nsm-bench" --target "127.0.0.1:$port" --duration "$seconds"
