#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Blocking LOCK+CANCEL (every LOCK waits behind a holder, so the deadlock check runs on each)
# against nlockd with nlm.deadlock_detection on and off, alternated ROUNDS times in one run so
# that both see the same machine: 8 connections with 8 calls in flight, and 1 with 1.
# Usage: bench/run_deadlock_load.sh [BUILD_DIR] [SECONDS] [ROUNDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
seconds=${2:-5}
rounds=${3:-3}
for round in $(seq "$rounds"); do
  for detection in true false; do
    nlockd_start "$build" --store "sqlite:$bench_scratch/nlockd-$round-$detection.db" \
      --deadlock-detection "$detection"
    for shape in "8 8" "1 1"; do
      read -r connections pipeline <<<"$shape"
      echo -n "round=$round detection=$detection "
      "$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" \
        --workload nlm4-block-cancel --connections "$connections" --pipeline "$pipeline" \
        --duration "$seconds" --warmup 1
    done
    nlockd_stop
  done
done
