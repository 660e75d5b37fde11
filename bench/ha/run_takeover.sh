#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# HA takeover with 1,000 simulated client hosts x 10 locks (by default) after kill -9, SIGTERM
# (planned move) and a partition of the active from PostgreSQL, then NLM4 LOCK+UNLOCK throughput
# with the PostgreSQL store (without and with --ha) against SQLite, in one run, in a private
# network namespace with a PostgreSQL of its own (scripts/with-postgres.sh; needs root).
# Usage: bench/ha/run_takeover.sh [BUILD_DIR] [HOSTS] [LOCKS_PER_HOST] [LEASE] [SECONDS] [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/../lib.sh"
bench_enter_netns "$@"
if [[ -z "${NLOCKD_TEST_PG_URI:-}" ]]; then
  "$here/../../scripts/with-postgres.sh" "$0" "$@"
  exit
fi
build=${1:-build-bench}
hosts=${2:-1000}
locks=${3:-10}
lease=${4:-5}
seconds=${5:-5}
rounds=${6:-1}
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/bench/ha/nlockd-takeover-bench" --nlockd "$build/src/cmd/nlockd" \
  --store "$NLOCKD_TEST_PG_URI" --hosts "$hosts" --locks "$locks" --lease "$lease" \
  --rounds "$rounds" ${NLOCKD_TAKEOVER_FAULTS:+--faults ${NLOCKD_TAKEOVER_FAULTS//,/ --faults }}

# LOCK+UNLOCK on each store, one after the other.
for store in sqlite postgresql postgresql-ha; do
  case $store in
    sqlite) flags=(--store "sqlite:$bench_scratch/throughput.db") ;;
    postgresql) flags=(--store "$NLOCKD_TEST_PG_URI" --name "throughput-$$") ;;
    postgresql-ha) flags=(--store "$NLOCKD_TEST_PG_URI" --name "throughput-ha-$$" --ha=true) ;;
  esac
  nlockd_start "$build" "${flags[@]}"
  echo "store $store"
  "$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" --workload nlm4-lock-unlock \
    --connections 1,8 --pipeline 8 --duration "$seconds" --warmup 1
  nlockd_stop
done
echo "machine: load average after $(cut -d' ' -f1-3 /proc/loadavg)"
