#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The lock journal's cost before and after a change, interleaved so that the shared machine's
# load falls on every configuration alike: for each round, each load (C=1 P=1, C=8 P=8, C=64 P=1)
# and each of one client host and a host per connection, each configuration runs in turn on a
# fresh SQLite store: BASE_BUILD's nlockd with persist_locks on and off, then BUILD's. Prints one
# line per run (pairs/s is calls/s / 2) and, at the end, the medians and the ratios journal
# on / off and after / before per load.
# Usage: bench/run_journal_ab.sh BUILD_DIR BASE_BUILD [SECONDS] [ROUNDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_enter_netns "$@"
build=$1 base=$2 seconds=${3:-2} rounds=${4:-3}
results=$bench_scratch/results
for round in $(seq "$rounds"); do
  for load in "1 1" "8 8" "64 1"; do
    read -r c p <<<"$load"
    for sources in one per-conn; do
      flag=""
      [[ $sources == per-conn ]] && flag=--distinct-sources
      for cfg in before-on before-off after-on after-off; do
        dir=$build
        [[ $cfg == before-* ]] && dir=$base
        extra=()
        [[ $cfg == *-off ]] && extra=(--persist-locks false)
        rm -f "$bench_scratch"/nlockd.db*
        nlockd_start "$dir" --store "sqlite:$bench_scratch/nlockd.db" "${extra[@]}"
        json=$("$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" \
          --workload nlm4-lock-unlock --connections "$c" --pipeline "$p" --duration "$seconds" \
          --warmup 0.5 --json $flag)
        nlockd_stop
        rate=$(sed -n 's/.*"calls_per_second":\([0-9.]*\).*/\1/p' <<<"$json")
        p50=$(sed -n 's/.*"p50_us":\([0-9]*\).*/\1/p' <<<"$json")
        echo "round $round C=$c P=$p hosts=$sources $cfg calls/s $rate p50_us $p50"
        echo "C=$c/P=$p/$sources $cfg $rate" >>"$results"
      done
    done
  done
done
echo "# medians of calls/s; on/off = journal on over off (same build); after/before = journal on"
awk "$bench_awk_median"'{k = $1; v[k, $2] = v[k, $2] " " $3; keys[k] = 1}
  END {
    for (k in keys) {
      bon = median(v[k, "before-on"]); boff = median(v[k, "before-off"])
      aon = median(v[k, "after-on"]); aoff = median(v[k, "after-off"])
      printf "%-22s before on %8.0f off %8.0f on/off %.2f | after on %8.0f off %8.0f on/off %.2f | after/before (on) %.2f\n", k, bon, boff, bon / boff, aon, aoff, aon / aoff, aon / bon
    }
  }' "$results" | sort
