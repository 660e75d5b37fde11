#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Restart-to-available after kill -9 (1,000 hosts x 10 locks by default, SQLite store), then
# NLM4 LOCK+UNLOCK throughput with --persist-locks true and false against the same kind of store,
# in one run, in a private network namespace (needs root): there every simulated host has its
# own 127.x.y.z address, nlockd and the hosts' status monitors use fixed ports, and nothing
# else sees the traffic.
# Usage: bench/restart/run_restart.sh [BUILD_DIR] [HOSTS] [LOCKS_PER_HOST] [SECONDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
bench_enter_netns "$@"
build=${1:-build-bench}
hosts=${2:-1000}
locks=${3:-10}
seconds=${4:-5}
"$build/bench/restart/nlockd-restart-bench" --nlockd "$build/src/cmd/nlockd" \
  --store "sqlite:$bench_scratch/restart.db" --hosts "$hosts" --locks "$locks"

# LOCK+UNLOCK with the lock table written to the store, and without, one after the other.
for persist in true false; do
  rm -f "$bench_scratch"/throughput.db*
  nlockd_start "$build" --store "sqlite:$bench_scratch/throughput.db" --persist-locks "$persist"
  echo "--persist-locks $persist"
  "$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" --workload nlm4-lock-unlock \
    --connections 1,8 --pipeline 8 --duration "$seconds" --warmup 1
  nlockd_stop
done
