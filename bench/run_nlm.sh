#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# NLM4 LOCK+UNLOCK against the RPC NULL ceiling of the same server, in one run: 1, 8 and 64
# connections, 1 and 8 calls in flight each, once from one client host and once with every
# connection a different host (its own 127.1.x.y source address). nlockd runs as configured by
# default: a SQLite store (a fresh file, removed afterwards) with persist_locks on.
# Usage: bench/run_nlm.sh [BUILD_DIR] [SECONDS] [NLOCKD_FLAGS...]   (e.g. --persist-locks false)
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
seconds=${2:-5}
shift $(($# < 2 ? $# : 2))
nlockd_start "$build" --store "sqlite:$bench_scratch/nlockd.db" "$@"
for sources in "" "--distinct-sources"; do
  "$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" --workload nlm4-lock-unlock \
    --against-null --connections 1,8,64 --pipeline 1,8 --duration "$seconds" --warmup 1 $sources
done
