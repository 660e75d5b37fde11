#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# User-space instructions per NLM4 LOCK or UNLOCK call, thread by thread, at one connection with
# one call in flight: what tests/perf/ir_guard.sh counts for the io thread alone, here for every
# thread of the server (the lock log's hand-on thread and the SQLite writer too), with the
# journal on and off. Callgrind runs with --separate-threads=yes and collects everywhere; its
# counters are zeroed after 200 unmeasured calls and dumped after CALLS more. The background
# threads' share depends on how calls bunch in time (fewer calls per wake-up cost more each), so
# read their figures as a C=1 upper bound.
#
# Each thread is named by a function only it runs: Asio's scheduler::run (io thread),
# LoggedStore::RunHandOn (hand-on thread), SqliteStore's writer loop (SQLite writer).
# Allocations are the calls of operator new that callgrind saw in each thread.
# The dumps stay in OUT_DIR for callgrind_annotate (cg.on.PID-NN, cg.off.PID-NN).
#
# Usage: bench/ir_threads.sh BUILD_DIR OUT_DIR [CALLS]
#   BUILD_DIR: a Release build without sanitizers (nlockd, nlockd-load).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
bench_enter_netns "$@"
build=$(cd "${1:?usage: bench/ir_threads.sh BUILD_DIR OUT_DIR [CALLS]}" && pwd)
out=${2:?usage: bench/ir_threads.sh BUILD_DIR OUT_DIR [CALLS]}
calls=${3:-2000}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# thread_name DUMP: which of the server's threads a per-thread dump belongs to.
thread_name() {
  if grep -q 'scheduler::run' "$1"; then
    echo "io thread"
  elif grep -q 'LoggedStore::RunHandOn' "$1"; then
    echo "lock log hand-on thread"
  elif grep -q 'sqlite3' "$1"; then
    echo "SQLite writer"
  else
    echo "other"
  fi
}

# allocations DUMP: calls of operator new (and new[]) in a per-thread dump.
allocations() {
  callgrind_annotate --inclusive=yes --threshold=100 --tree=calling "$1" 2>/dev/null |
    sed -n 's/.*>   ???:operator new\(\[\]\)\?(unsigned long) (\([0-9,]*\)x).*/\2/p' |
    tr -d , | awk '{s += $1} END {print s + 0}'
}

# measure TAG FLAGS...: prints "thread<TAB>instructions per call<TAB>allocations per call" for
# each thread that ran.
measure() {
  local tag=$1
  shift
  rm -f "$out"/cg."$tag".*
  (cd "$bench_scratch" && exec valgrind --tool=callgrind --separate-threads=yes \
    --callgrind-out-file="$out/cg.$tag.%p" "$build/src/cmd/nlockd" --listen 127.0.0.1:0 \
    --rpcbind-register=false --admin-listen off --grace 0 --log-level warn \
    --store "sqlite:$bench_scratch/$tag.db" "$@" 2>"$bench_scratch/$tag.log" >/dev/null) &
  nlockd_pid=$!
  for _ in $(seq 600); do
    nlockd_port=$(ss -ltnpH 2>/dev/null |
      awk -v p="pid=$nlockd_pid," 'index($0, p) {n = split($4, a, ":"); print a[n]; exit}' || true)
    [[ -n "$nlockd_port" ]] && break
    kill -0 "$nlockd_pid" 2>/dev/null || { cat "$bench_scratch/$tag.log" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n "$nlockd_port" ]] || { echo "ir_threads: no listener" >&2; exit 1; }
  local load=("$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port"
    --workload nlm4-lock-unlock --connections 1 --pipeline 1 --warmup 0 --duration 600 --json)
  "${load[@]}" --calls 200 >/dev/null
  # The hand-on thread hands its last bunch on within 10 ms: let it finish before zeroing.
  sleep 0.5
  callgrind_control -z "$nlockd_pid" >/dev/null 2>&1
  "${load[@]}" --calls "$calls" >/dev/null
  sleep 0.5
  callgrind_control -d "$nlockd_pid" >/dev/null 2>&1
  sleep 1
  local dump ir
  for dump in "$out/cg.$tag.$nlockd_pid".1-*; do
    ir=$(awk '/^totals:/ {print $2; exit}' "$dump")
    [[ -n "$ir" ]] && ((ir >= calls)) || continue
    printf '%s\t%d\t%s\n' "$(thread_name "$dump")" $((ir / calls)) \
      "$(awk -v n="$(allocations "$dump")" -v c="$calls" 'BEGIN {printf "%.2f", n / c}')"
  done
  nlockd_stop
}

echo "== journal on ($calls calls; thread, instructions per call, allocations per call)"
measure on
echo "== journal off (--persist-locks false)"
measure off --persist-locks false
