#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The lock journal's cost, in one run: NLM4 LOCK+UNLOCK against the RPC NULL ceiling of the same
# server, at C = 1, 8, 64 connections x P = 1, 8 calls in flight, one client host and a host per
# connection, for each configuration in turn:
#   base-on   BASE_BUILD's nlockd, SQLite store, persist_locks on (e.g. a build of the commit
#             before the lock log; skipped when BASE_BUILD is "-")
#   on        BUILD's nlockd, SQLite store, persist_locks on (the default)
#   off       BUILD's nlockd, SQLite store, --persist-locks false
# prints one JSON object per measured run (tagged with the configuration) and the load average.
# With LONG_SECONDS, each configuration then runs C=8 P=8, one host, for that long (stalls: see
# max_us), and the largest lock log (all PATH.journal.* together) and WAL seen, sampled every
# 0.5 s, are printed after it.
# Usage: bench/run_journal.sh [BUILD_DIR] [BASE_BUILD|-] [SECONDS] [LONG_SECONDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
base=${2:--}
seconds=${3:-3}
long_seconds=${4:-0}

# sample_sizes FILE: until killed, writes "largest log bytes, largest WAL bytes" seen to FILE.
sample_sizes() {
  local log_max=0 wal_max=0 log wal
  while :; do
    # No segment exists between a removal and the next one: count that as 0, not as an error.
    log=$({ cat "$bench_scratch"/nlockd.db.journal.* 2>/dev/null || true; } | wc -c)
    wal=$(stat -c %s "$bench_scratch/nlockd.db-wal" 2>/dev/null || echo 0)
    ((log > log_max)) && log_max=$log
    ((wal > wal_max)) && wal_max=$wal
    echo "$log_max $wal_max" >"$1"
    sleep 0.5
  done
}

run_config() {
  local tag=$1 dir=$2
  shift 2
  rm -f "$bench_scratch"/nlockd.db*
  nlockd_start "$dir" --store "sqlite:$bench_scratch/nlockd.db" "$@"
  echo "# $tag: $(cut -d' ' -f1-3 /proc/loadavg) (load average)"
  for sources in "" "--distinct-sources"; do
    "$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" \
      --workload nlm4-lock-unlock --against-null --connections 1,8,64 --pipeline 1,8 \
      --duration "$seconds" --warmup 1 --json $sources | sed "s/^{/{\"config\":\"$tag\",/"
  done
  if ((long_seconds > 0)); then
    sample_sizes "$bench_scratch/sizes" &
    local sampler=$!
    "$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" \
      --workload nlm4-lock-unlock --connections 8 --pipeline 8 --duration "$long_seconds" \
      --warmup 1 --json | sed "s/^{/{\"config\":\"$tag-long\",/"
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
    read -r log_max wal_max <"$bench_scratch/sizes"
    echo "# $tag-long: largest lock log $log_max bytes, largest WAL $wal_max bytes"
  fi
  nlockd_stop
}

[[ "$base" != "-" ]] && run_config base-on "$base"
run_config on "$build"
run_config off "$build" --persist-locks false
