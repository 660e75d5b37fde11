#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Server CPU per call and calls/s, NLM4 LOCK+UNLOCK against RPC NULL, for one or more nlockd
# binaries in one session (before/after comparisons on a shared machine): each round starts each
# binary afresh and runs NULL, then LOCK+UNLOCK, with the same connections and pipeline; the CPU
# is nlockd's user+sys time from /proc/PID/stat over each run (no warm-up, so it covers exactly
# the calls counted).
# Usage: bench/cpu_per_call.sh LOAD_BIN ROUNDS CONNECTIONS PIPELINE SECONDS NLOCKD_BIN...
set -euo pipefail
load=$1 rounds=$2 connections=$3 pipeline=$4 seconds=$5
shift 5
ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
run_one() {  # PID PORT WORKLOAD -> "calls/s us-per-call"
  local before after json calls
  before=$(cpu_ticks "$1")
  json=$("$load" --target "127.0.0.1:$2" --workload "$3" --connections "$connections" \
    --pipeline "$pipeline" --duration "$seconds" --warmup 0 --json)
  after=$(cpu_ticks "$1")
  calls=$(sed -n 's/.*"calls":\([0-9]*\).*/\1/p' <<<"$json")
  awk -v c="$calls" -v s="$seconds" -v t=$((after - before)) -v hz="$ticks" \
    'BEGIN {printf "%.0f %.2f", c / s, (c > 0 ? t * 1e6 / hz / c : 0)}'
}
for round in $(seq "$rounds"); do
  for bin in "$@"; do
    dir=$(mktemp -d)
    "$bin" --listen 127.0.0.1:0 --rpcbind-register=false --admin-listen off --grace 0 \
      --store "sqlite:$dir/db" --log-level warn 2>"$dir/log" &
    pid=$!
    port=""
    for _ in $(seq 200); do
      port=$(ss -ltnpH 2>/dev/null | awk -v p="pid=$pid," 'index($0, p) {n=split($4,a,":"); print a[n]; exit}' || true)
      [[ -n "$port" ]] && break
      sleep 0.05
    done
    read -r null_rate null_cpu <<<"$(run_one "$pid" "$port" fixed)"
    read -r nlm_rate nlm_cpu <<<"$(run_one "$pid" "$port" nlm4-lock-unlock)"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
    awk -v b="$bin" -v r="$round" -v nr="$null_rate" -v nc="$null_cpu" -v lr="$nlm_rate" \
      -v lc="$nlm_cpu" -v C="$connections" -v P="$pipeline" 'BEGIN {
      printf "round %d C=%d P=%d %s\n", r, C, P, b
      printf "  NULL        %7d calls/s  %6.2f us/call\n", nr, nc
      printf "  LOCK+UNLOCK %7d calls/s  %6.2f us/call\n", lr, lc
      printf "  ratios: calls/s %.2f  CPU per call %.2f\n", (nr > 0 ? lr / nr : 0),
        (nc > 0 ? lc / nc : 0) }'
  done
done
