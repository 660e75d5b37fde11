#!/usr/bin/env bash
# What routing NLM through the embedding API costs: NLM4 LOCK+UNLOCK at 8 connections with 8
# calls in flight each, against the daemon's own listener (nlockd) and against
# examples/embedded_server (a host with its own transport that hands each call to
# LockService::HandleCall on its io_context), alternating, ROUNDS times each, in a private
# network namespace. Both run the same store setup: a fresh SQLite file with persist_locks on.
# Prints each run and the medians; overhead = 1 - embedded/daemon.
# Usage: bench/run_embedded.sh [BUILD_DIR] [SECONDS] [ROUNDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_enter_netns "$@"
build=${1:-build-bench}
seconds=${2:-5}
rounds=${3:-5}

# embedded_start: the example host on 127.0.0.1 (a free port), like nlockd_start.
embedded_start() {
  "$build/examples/embedded_server" --listen 127.0.0.1:0 --grace 0 \
    --store "sqlite:$bench_scratch/embedded-$1.db" >"$bench_scratch/embedded.log" 2>&1 &
  nlockd_pid=$!
  bench_await_listener embedded_server "$bench_scratch/embedded.log"
}

measure() {
  "$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" --workload nlm4-lock-unlock \
    --connections 8 --pipeline 8 --duration "$seconds" --warmup 1 --json |
    sed -n 's/.*"calls_per_second":\([0-9.]*\).*/\1/p' | tail -1
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

daemon=()
embedded=()
for round in $(seq "$rounds"); do
  nlockd_start "$build" --store "sqlite:$bench_scratch/daemon-$round.db"
  daemon+=("$(measure)")
  nlockd_stop
  embedded_start "$round"
  embedded+=("$(measure)")
  nlockd_stop
  echo "round $round: daemon ${daemon[-1]} calls/s, embedded ${embedded[-1]} calls/s"
done
d=$(printf '%s\n' "${daemon[@]}" | median)
e=$(printf '%s\n' "${embedded[@]}" | median)
awk -v d="$d" -v e="$e" 'BEGIN {
  printf "median: daemon %.0f calls/s, embedded %.0f calls/s, overhead %.1f%%\n", d, e, (1 - e / d) * 100
}'
