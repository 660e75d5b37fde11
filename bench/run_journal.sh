#!/usr/bin/env bash
# The lock journal's cost, in one run: NLM4 LOCK+UNLOCK against the RPC NULL ceiling of the same
# server, at C = 1, 8, 64 connections x P = 1, 8 calls in flight, one client host and a host per
# connection, for each configuration in turn:
#   base-on   BASE_BUILD's nlockd, SQLite store, persist_locks on (e.g. a build of the commit
#             before the lock log; skipped when BASE_BUILD is "-")
#   on        BUILD's nlockd, SQLite store, persist_locks on (the default)
#   off       BUILD's nlockd, SQLite store, --persist-locks false
# prints one JSON object per measured run (tagged with the configuration) and the load average.
# Usage: bench/run_journal.sh [BUILD_DIR] [BASE_BUILD|-] [SECONDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
base=${2:--}
seconds=${3:-3}

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
  nlockd_stop
}

[[ "$base" != "-" ]] && run_config base-on "$base"
run_config on "$build"
run_config off "$build" --persist-locks false
