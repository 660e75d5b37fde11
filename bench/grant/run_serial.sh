#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Grant after unlock, one waiter released N times in a row: each time nlockd calls the waiter
# back with NLM4_GRANTED at the port the waiter's portmapper (played by the bench on
# 127.2.0.1:111) names. Reports UNLOCK -> GRANTED p50/p99 and how many GETPORTs nlockd asked.
# Every nlockd binary given runs in turn, round by round, in one private network namespace
# (needs root), so that the figures compare.
# Usage: bench/grant/run_serial.sh BUILD_DIR [RELEASES] [ROUNDS] [NLOCKD...]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
bench_enter_netns "$@"
build=${1:?usage: run_serial.sh BUILD_DIR [RELEASES] [ROUNDS] [NLOCKD...]}
releases=${2:-500}
rounds=${3:-3}
shift $(($# < 3 ? $# : 3))
binaries=("$@")
[[ ${#binaries[@]} -gt 0 ]] || binaries=("$build/src/cmd/nlockd")
for round in $(seq "$rounds"); do
  for i in "${!binaries[@]}"; do
    # nlockd_start runs BUILD/src/cmd/nlockd: give it a directory of that shape per binary.
    dir=$bench_scratch/b$i
    mkdir -p "$dir/src/cmd"
    ln -sf "$(realpath "${binaries[$i]}")" "$dir/src/cmd/nlockd"
    nlockd_start "$dir" --store memory:
    echo -n "round $round nlockd$i: "
    "$build/bench/grant/nlockd-grant-bench" --target "127.0.0.1:$nlockd_port" \
      --serial "$releases"
    nlockd_stop
  done
done
