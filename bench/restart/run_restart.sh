#!/usr/bin/env bash
# Restart-to-available after kill -9 (1,000 hosts x 10 locks by default, SQLite store), then
# NLM4 LOCK+UNLOCK throughput with --persist-locks true and false against the same kind of store,
# in one run, in a private network namespace (needs root): there every simulated host has its
# own 127.x.y.z address, nlockd and the hosts' status monitors use fixed ports, and nothing
# else sees the traffic.
# Usage: bench/restart/run_restart.sh [BUILD_DIR] [HOSTS] [LOCKS_PER_HOST] [SECONDS]
set -euo pipefail
build=$(realpath "${1:-build-bench}")
hosts=${2:-1000}
locks=${3:-10}
seconds=${4:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
unshare --net bash -euo pipefail -c '
  build=$1 dir=$2 hosts=$3 locks=$4 seconds=$5
  ip link set lo up
  "$build/bench/restart/nlockd-restart-bench" --nlockd "$build/src/cmd/nlockd" \
    --store "sqlite:$dir/restart.db" --hosts "$hosts" --locks "$locks"

  # LOCK+UNLOCK with the lock table written to the store, and without, one after the other.
  for persist in true false; do
    rm -f "$dir"/throughput.db*
    "$build/src/cmd/nlockd" --listen 127.0.0.1:4045 --rpcbind-register=false --grace 0 \
      --admin-listen off --store "sqlite:$dir/throughput.db" --persist-locks "$persist" \
      --log-level warn 2>"$dir/log" &
    pid=$!
    for _ in $(seq 200); do
      ss -ltnH | grep -q ":4045 " && break
      sleep 0.05
    done
    echo "--persist-locks $persist"
    "$build/bench/load/nlockd-load" --target 127.0.0.1:4045 --workload nlm4-lock-unlock \
      --connections 1,8 --pipeline 8 --duration "$seconds" --warmup 1
    kill $pid
    wait $pid || true
  done
' run_restart "$build" "$dir" "$hosts" "$locks" "$seconds"
