# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by the bench scripts (bench/run_*.sh, bench/nsm/run_*.sh): a scratch directory and an
# nlockd on a free loopback port, both gone when the script exits however it ends.
#
#   $bench_scratch                    a fresh directory (mktemp -d) for stores and logs
#   bench_enter_netns "$@"            runs the calling script again in a private network namespace
#   bench_enter_netns_private_run "$@"   the same, with a private /run too (rpcbind, rpc.statd)
#   nlockd_start BUILD_DIR FLAGS...   starts nlockd, sets $nlockd_pid and $nlockd_port
#   nlockd_stop                       stops it (before starting another)
#   $bench_awk_median                 awk's median(s) of the numbers in string s, to prefix a program

bench_scratch=$(mktemp -d)
# shellcheck disable=SC2016,SC2034  # awk's program text, for the scripts that source this
bench_awk_median='
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) {t = a[i]; a[i] = a[j]; a[j] = t}
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
'
nlockd_pid=""
nlockd_port=""

# Stops the nlockd that nlockd_start started, if it still runs.
nlockd_stop() {
  [[ -n "$nlockd_pid" ]] || return 0
  kill "$nlockd_pid" 2>/dev/null || true
  wait "$nlockd_pid" 2>/dev/null || true
  nlockd_pid=""
}

bench_cleanup() {
  nlockd_stop
  rm -rf "$bench_scratch"
}
trap bench_cleanup EXIT

# Runs the calling script again, with the same arguments, in a network namespace of its own
# (needs root) with loopback up, and exits with its status: there fixed ports and 127.x.y.z
# addresses meet nothing else on the machine. Call it before starting anything.
bench_enter_netns() {
  if [[ -z "${NLOCKD_BENCH_IN_NETNS:-}" ]]; then
    NLOCKD_BENCH_IN_NETNS=1 unshare --net bash "$0" "$@"
    exit
  fi
  ip link set lo up
}

# Like bench_enter_netns, in a mount namespace of its own too, with a fresh tmpfs on /run: the
# daemons that keep their sockets and pid files there (rpcbind, rpc.statd) are then the script's
# own and never meet the machine's.
bench_enter_netns_private_run() {
  if [[ -z "${NLOCKD_BENCH_IN_NETNS:-}" ]]; then
    NLOCKD_BENCH_IN_NETNS=1 unshare --net --mount --propagation private bash "$0" "$@"
    exit
  fi
  ip link set lo up
  mount -t tmpfs -o mode=0755 tmpfs /run
}

# nlockd_start BUILD_DIR FLAGS...: starts BUILD_DIR/src/cmd/nlockd on 127.0.0.1 (TCP and UDP on
# the same free port) without rpcbind registration, admin server or grace period, logging
# warnings to $bench_scratch/nlockd.log, and returns once it listens. FLAGS must name the store:
# the default, sqlite:./var/nlockd.db, would leave a database in the working directory.
nlockd_start() {
  local build=$1
  shift
  local flag has_store=""
  for flag in "$@"; do
    [[ "$flag" == --store || "$flag" == --store=* ]] && has_store=1
  done
  if [[ -z "$has_store" ]]; then
    echo "nlockd_start: name the store (--store memory: or --store sqlite:\$bench_scratch/...)" >&2
    exit 2
  fi
  "$build/src/cmd/nlockd" --listen 127.0.0.1:0 --rpcbind-register=false --admin-listen off \
    --grace 0 --log-level warn "$@" 2>"$bench_scratch/nlockd.log" &
  nlockd_pid=$!
  bench_await_listener nlockd "$bench_scratch/nlockd.log"
}

# bench_await_listener NAME LOG: waits until process $nlockd_pid listens on TCP and sets
# nlockd_port to that port; if it exits first, prints LOG and exits.
bench_await_listener() {
  for _ in $(seq 200); do
    nlockd_port=$(ss -ltnpH 2>/dev/null |
      awk -v p="pid=$nlockd_pid," 'index($0, p) {n = split($4, a, ":"); print a[n]; exit}' || true)
    [[ -n "$nlockd_port" ]] && return 0
    kill -0 "$nlockd_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "$1 did not start" >&2
  cat "$2" >&2
  exit 1
}
