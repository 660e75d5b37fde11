#!/usr/bin/env bash
# The RPC NULL ceiling: starts nlockd from BUILD_DIR on a free loopback port and drives NULL
# (NLM v4 procedure 0) at 1, 8 and 64 connections with 1 and 8 calls in flight each.
# Usage: bench/run_null.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
build=${1:-build-bench}
seconds=${2:-5}
log=$(mktemp)
"$build/src/cmd/nlockd" --listen 127.0.0.1:0 --rpcbind-register=false 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$log"' EXIT
port=""
for _ in $(seq 200); do
  port=$(grep -o 'nlockd listening address=[^ ]* port=[0-9]*' "$log" | sed 's/.*port=//' || true)
  [[ -n "$port" ]] && break
  sleep 0.05
done
[[ -n "$port" ]] || { echo "nlockd did not start"; cat "$log"; exit 1; }
"$build/bench/load/nlockd-load" --target "127.0.0.1:$port" --connections 1,8,64 \
  --pipeline 1,8 --duration "$seconds" --warmup 1
