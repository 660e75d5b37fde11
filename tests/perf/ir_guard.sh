#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The per-call cost guard: user-space instructions the server's io thread executes per call,
# counted by valgrind's callgrind, against the baseline in tests/perf/ir_baseline.txt. A case
# that costs more than 10 % over its baseline fails the check.
#
# Each case starts the server afresh under callgrind (collecting only inside Asio's
# scheduler::run, i.e. the thread that serves calls: the lock log's hand-on thread and the
# SQLite writer run in the background, and their work per call depends on how calls bunch in
# time), makes 200 unmeasured calls (the first LOCK monitors its host), zeroes the counters,
# makes a fixed number of calls with one connection and one call in flight, and dumps the
# counters. Nothing here batches, so the count does not depend on timing: repeated runs agree
# within about 0.5 %.
#
#   null                   RPC NULL (NLM v4), nlockd, memory store
#   lock-unlock-journal    NLM4 LOCK+UNLOCK, nlockd, SQLite store, persist_locks on (default)
#   lock-unlock-no-journal NLM4 LOCK+UNLOCK, nlockd, SQLite store, --persist-locks false
#   embedded-lock-unlock   NLM4 LOCK+UNLOCK, examples/embedded_server (LockService::HandleCall
#                          on the host's io_context), SQLite store, persist_locks on
#
# BUILD_DIR must be a build without sanitizers (ASan does not run under valgrind), Release for
# numbers that mean something: the baseline was counted in one, built with
#   cmake -S . -B build-perf -G Ninja -DCMAKE_BUILD_TYPE=Release -DNLOCKD_BUILD_TESTS=OFF
#   cmake --build build-perf --target nlockd nlockd-load embedded_server
# Needs root (a private network namespace) and valgrind.
#
# Usage: tests/perf/ir_guard.sh BUILD_DIR [--update]
#   --update  writes the counts measured now as the new baseline (after a change that costs
#             more on purpose, or saves): commit the file with the reason.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
source "$here/../../bench/lib.sh"
bench_enter_netns "$@"
build=$(cd "${1:?usage: tests/perf/ir_guard.sh BUILD_DIR [--update]}" && pwd)
update=${2:-}
baseline_file=$here/ir_baseline.txt
calls=${NLOCKD_IR_GUARD_CALLS:-2000}
# A regression past this fraction over the baseline fails.
tolerance=0.10

for bin in src/cmd/nlockd bench/load/nlockd-load examples/embedded_server; do
  if [[ ! -x "$build/$bin" ]]; then
    echo "ir_guard: $build/$bin is missing (build nlockd nlockd-load embedded_server)" >&2
    exit 2
  fi
done
if ldd "$build/src/cmd/nlockd" | grep -q libasan; then
  echo "ir_guard: $build is built with ASan, which does not run under valgrind;" \
    "use a build without -DNLOCKD_SANITIZE" >&2
  exit 2
fi
command -v valgrind >/dev/null || { echo "ir_guard: valgrind is not installed" >&2; exit 2; }

# measure CASE WORKLOAD SERVER_ARGS...: prints the instructions per call of one case.
measure() {
  local name=$1 workload=$2
  shift 2
  local out="$bench_scratch/$name"
  mkdir -p "$out"
  (cd "$out" && exec valgrind --tool=callgrind --toggle-collect='asio::detail::scheduler::run*' \
    --callgrind-out-file="$out/cg.%p" "$@" 2>"$out/server.log" >"$out/server.out") &
  nlockd_pid=$!
  # valgrind starts slowly: wait up to a minute for the listener (bench_await_listener waits 10 s).
  # The subshell execs valgrind, so $nlockd_pid is the server's pid.
  for _ in $(seq 600); do
    nlockd_port=$(ss -ltnpH 2>/dev/null |
      awk -v p="pid=$nlockd_pid," 'index($0, p) {n = split($4, a, ":"); print a[n]; exit}' || true)
    [[ -n "$nlockd_port" ]] && break
    if ! kill -0 "$nlockd_pid" 2>/dev/null; then
      echo "ir_guard: $name: the server exited" >&2
      cat "$out/server.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  [[ -n "$nlockd_port" ]] || { echo "ir_guard: $name: no listener" >&2; exit 1; }
  local load=("$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port"
    --workload "$workload" --connections 1 --pipeline 1 --warmup 0 --duration 600 --json)
  "${load[@]}" --calls 200 >/dev/null
  callgrind_control -z "$nlockd_pid" >/dev/null 2>&1
  local json made
  json=$("${load[@]}" --calls "$calls")
  callgrind_control -d "$nlockd_pid" >/dev/null 2>&1
  made=$(sed -n 's/.*"calls":\([0-9]*\).*"errors":\([0-9]*\).*/\1 \2/p' <<<"$json")
  if [[ "$made" != "$calls 0" ]]; then
    echo "ir_guard: $name: expected $calls calls without errors, got (calls errors) $made" >&2
    exit 1
  fi
  local dump="$out/cg.$nlockd_pid.1"
  for _ in $(seq 100); do
    grep -q "^totals:" "$dump" 2>/dev/null && break
    sleep 0.1
  done
  local ir
  ir=$(awk '/^totals:/ {print $2; exit}' "$dump")
  nlockd_stop
  echo $((ir / calls))
}

daemon=("$build/src/cmd/nlockd" --listen 127.0.0.1:0 --rpcbind-register=false --admin-listen off
  --grace 0 --log-level warn)
declare -A measured
measured[null]=$(measure null fixed "${daemon[@]}" --store memory:)
measured[lock-unlock-journal]=$(measure lock-unlock-journal nlm4-lock-unlock "${daemon[@]}" \
  --store "sqlite:$bench_scratch/journal.db")
measured[lock-unlock-no-journal]=$(measure lock-unlock-no-journal nlm4-lock-unlock \
  "${daemon[@]}" --store "sqlite:$bench_scratch/no-journal.db" --persist-locks false)
measured[embedded-lock-unlock]=$(measure embedded-lock-unlock nlm4-lock-unlock \
  "$build/examples/embedded_server" --listen 127.0.0.1:0 --grace 0 \
  --store "sqlite:$bench_scratch/embedded.db")
cases=(null lock-unlock-journal lock-unlock-no-journal embedded-lock-unlock)

if [[ "$update" == "--update" ]]; then
  {
    echo "# Instructions per call of the server's io thread (tests/perf/ir_guard.sh), C=1 P=1,"
    echo "# $calls calls, Release build. Update with: tests/perf/ir_guard.sh BUILD_DIR --update"
    for c in "${cases[@]}"; do echo "$c ${measured[$c]}"; done
  } >"$baseline_file"
  echo "ir_guard: baseline written to $baseline_file:"
  grep -v '^#' "$baseline_file"
  exit 0
fi

failed=0 cheaper=0
for c in "${cases[@]}"; do
  base=$(awk -v c="$c" '$1 == c {print $2}' "$baseline_file")
  if [[ -z "$base" ]]; then
    echo "ir_guard: $c has no baseline in $baseline_file" >&2
    failed=1
    continue
  fi
  verdict=$(awk -v m="${measured[$c]}" -v b="$base" -v t="$tolerance" 'BEGIN {
    r = m / b
    printf "%+.1f%% ", (r - 1) * 100
    if (r > 1 + t) print "REGRESSION"; else if (r < 1 - t) print "cheaper"; else print "ok" }')
  printf 'ir_guard: %-24s %8d instructions per call (baseline %d) %s\n' "$c" "${measured[$c]}" \
    "$base" "$verdict"
  [[ "$verdict" == *REGRESSION ]] && failed=1
  [[ "$verdict" == *cheaper ]] && cheaper=1
done
if ((failed)); then
  cat >&2 <<EOF
ir_guard: FAILED: a case costs more than $(awk -v t="$tolerance" 'BEGIN {print t * 100}') % over its baseline.
  Find where with: valgrind --tool=callgrind on the case above, callgrind_annotate.
  If the cost is intended, update the baseline and commit it with the reason:
    tests/perf/ir_guard.sh $1 --update
EOF
  exit 1
fi
if ((cheaper)); then
  # A saving left in the baseline would hide a later regression of the same size.
  echo "ir_guard: a case is more than 10 % cheaper than its baseline: lower it with" \
    "tests/perf/ir_guard.sh $1 --update"
fi
echo "ir_guard: passed"
