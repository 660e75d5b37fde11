#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What routing NLM through the embedding API costs: NLM4 LOCK+UNLOCK at 8 connections with 8
# calls in flight each, against the daemon's own listener (nlockd) and against
# examples/embedded_server (a host with its own transport that hands each call to
# LockService::HandleCall on its io_context; linked with the shared library, and with the static
# one when the benchmarks built that twin), alternating, ROUNDS times each, in a private
# network namespace. Both run the same store setup: a fresh SQLite file with persist_locks on.
# Each run reports calls/s and the server's CPU time per call (user+sys from /proc/PID/stat
# over the measured seconds, so the warm-up is left out): on a shared machine the CPU per call
# moves far less with other load than calls/s does. Prints each run and the medians;
# overhead = 1 - embedded/daemon (calls/s) and embedded/daemon - 1 (CPU per call).
#
# With BASELINE_DIR, an earlier build runs in the same rounds too, for before/after in one run:
# a directory laid out like a build directory with copies of that build's src/cmd/nlockd,
# examples/embedded_server and src/libnlockd.so.0 (the example finds that library through
# LD_LIBRARY_PATH), e.g.
#   for f in src/cmd/nlockd examples/embedded_server src/libnlockd.so.0; do
#     install -D build-bench/$f /tmp/baseline/$f; done
# Usage: bench/run_embedded.sh [BUILD_DIR] [SECONDS] [ROUNDS] [BASELINE_DIR]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_enter_netns "$@"
build=${1:-build-bench}
seconds=${2:-5}
rounds=${3:-5}
baseline=${4:-}
ticks=$(getconf CLK_TCK)

# The allocator the daemon links (tcmalloc in a Release build), or none: the example host runs
# with the same one preloaded, so that the comparison is of the transports, not of allocators.
daemon_allocator() {  # BUILD_DIR
  ldd "$1/src/cmd/nlockd" | awk '/libtcmalloc/ {print $3; exit}'
}

# embedded_start BINARY STORE_NAME ALLOCATOR: the example host on 127.0.0.1 (a free port), like
# nlockd_start.
embedded_start() {
  LD_PRELOAD="${3:-}" "$1" --listen 127.0.0.1:0 --grace 0 --store "sqlite:$bench_scratch/$2.db" \
    >"$bench_scratch/embedded.log" 2>&1 &
  nlockd_pid=$!
  bench_await_listener embedded_server "$bench_scratch/embedded.log"
}

# measure: "calls/s us-per-call" of the server $nlockd_pid on $nlockd_port.
measure() {
  local json before after calls
  # The warm-up's CPU is not counted: sample the counters once it is over.
  "$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" --workload nlm4-lock-unlock \
    --connections 8 --pipeline 8 --duration 1 --warmup 0 --json >/dev/null
  before=$(awk '{print $14 + $15}' "/proc/$nlockd_pid/stat")
  json=$("$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" \
    --workload nlm4-lock-unlock --connections 8 --pipeline 8 --duration "$seconds" --warmup 0 \
    --json | tail -1)
  after=$(awk '{print $14 + $15}' "/proc/$nlockd_pid/stat")
  calls=$(sed -n 's/.*"calls":\([0-9]*\).*/\1/p' <<<"$json")
  awk -v c="$calls" -v s="$seconds" -v t=$((after - before)) -v hz="$ticks" \
    'BEGIN {printf "%.0f %.2f", c / s, (c > 0 ? t * 1e6 / hz / c : 0)}'
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# Variants: name, then how to start it. embedded-static is the same host linked with the static
# library (built with the benchmarks), when there is one.
variants=(daemon embedded)
[[ -x "$build/examples/embedded_server_static" ]] && variants+=(embedded-static)
[[ -n "$baseline" ]] && variants+=(daemon-baseline embedded-baseline)
declare -A rate cpu
for round in $(seq "$rounds"); do
  line="round $round:"
  # Each round starts with the next variant: a slot's place in the round (what ran just before
  # it, the machine warming) must not favour one variant.
  shift_by=$(((round - 1) % ${#variants[@]}))
  order=("${variants[@]:shift_by}" "${variants[@]:0:shift_by}")
  for variant in "${order[@]}"; do
    case "$variant" in
      daemon) nlockd_start "$build" --store "sqlite:$bench_scratch/$variant-$round.db" ;;
      embedded)
        embedded_start "$build/examples/embedded_server" "$variant-$round" \
          "$(daemon_allocator "$build")" ;;
      embedded-static)
        embedded_start "$build/examples/embedded_server_static" "$variant-$round" \
          "$(daemon_allocator "$build")" ;;
      daemon-baseline)
        nlockd_start "$baseline" --store "sqlite:$bench_scratch/$variant-$round.db" ;;
      embedded-baseline)
        LD_LIBRARY_PATH="$baseline/src" embedded_start "$baseline/examples/embedded_server" \
          "$variant-$round" "$(daemon_allocator "$baseline")" ;;
    esac
    read -r r c <<<"$(measure)"
    nlockd_stop
    rate[$variant]+="$r "
    cpu[$variant]+="$c "
    line+=" $variant $r calls/s $c us/call;"
  done
  echo "$line"
done

summary() {  # DAEMON EMBEDDED LABEL
  local dr er dc ec
  dr=$(tr ' ' '\n' <<<"${rate[$1]}" | grep . | median)
  er=$(tr ' ' '\n' <<<"${rate[$2]}" | grep . | median)
  dc=$(tr ' ' '\n' <<<"${cpu[$1]}" | grep . | median)
  ec=$(tr ' ' '\n' <<<"${cpu[$2]}" | grep . | median)
  awk -v l="$3" -v dr="$dr" -v er="$er" -v dc="$dc" -v ec="$ec" 'BEGIN {
    printf "median%s: daemon %.0f calls/s %.2f us/call, embedded %.0f calls/s %.2f us/call, ", l, dr, dc, er, ec
    printf "overhead %.1f%% calls/s, %.1f%% CPU per call\n", (1 - er / dr) * 100, (ec / dc - 1) * 100
  }'
}
summary daemon embedded ""
[[ -n "${rate[embedded-static]:-}" ]] && summary daemon embedded-static " (static library)"
[[ -n "$baseline" ]] && summary daemon-baseline embedded-baseline " (baseline)"
exit 0
