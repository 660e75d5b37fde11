#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SM_NOTIFY received -> status callback sent (1 and 10,000 registrations) and SM_SIMU_CRASH with
# 10,000 monitored hosts, in a private network namespace (needs root): there the bench can play
# rpcbind on :111 for this host and for every peer on 127.a.b.c, and nlockd asks it.
#
# With REAL=real the namespace gets its own /run and Debian's rpcbind on :111 instead: the
# bench registers its callback server there and nlockd looks the callback's port up through
# it, as on a real host; then Debian's rpc.statd is measured the same way in the same run
# (SM_SIMU_CRASH is left out). Needs rpcbind and rpc.statd (nfs-common).
# Usage: bench/nsm/run_status.sh [BUILD_DIR] [STORE: sqlite|memory] [REGISTRATIONS] [REAL] [ROUNDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
real=${4:-}
if [[ "$real" == real && -z "${NLOCKD_BENCH_IN_NETNS:-}" ]]; then
  # As bench_enter_netns, with a mount namespace too: a private /run for rpcbind's socket.
  NLOCKD_BENCH_IN_NETNS=1 unshare --net --mount --propagation private bash "$0" "$@"
  exit
fi
bench_enter_netns "$@"
build=${1:-build-bench}
store_kind=${2:-sqlite}
registrations=${3:-10000}
rounds=${5:-200}
store="memory:"
[[ "$store_kind" == sqlite ]] && store="sqlite:$bench_scratch/nlockd.db"
bench=$build/bench/nsm/nlockd-nsm-status-bench
if [[ "$real" != real ]]; then
  nlockd_start "$build" --store "$store" --rpcbind-port 111 --nsm-max-registrations 10000000
  "$bench" --port "$nlockd_port" --registrations "$registrations" --rounds "$rounds"
  exit
fi

mount -t tmpfs tmpfs /run
rpcbind -f &
rpcbind_pid=$!
statd_pid=""
stop_helpers() {
  [[ -n "$statd_pid" ]] && kill "$statd_pid" 2>/dev/null || true
  kill "$rpcbind_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  bench_cleanup
}
trap stop_helpers EXIT
for _ in $(seq 100); do rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.05; done

# nlockd: not registered with rpcbind (the bench calls its port), callbacks through rpcbind.
nlockd_start "$build" --store "$store" --rpcbind-port 111 --nsm-max-registrations 10000000
"$bench" --real-rpcbind --label "nlockd: " --port "$nlockd_port" \
  --registrations "$registrations" --rounds "$rounds"
nlockd_stop

# rpc.statd with its state on the same file system as nlockd's store; found through rpcbind.
statd_dir=$bench_scratch/statd
mkdir -p "$statd_dir/sm" "$statd_dir/sm.bak"
rpc.statd -F -L -P "$statd_dir" 2>"$bench_scratch/statd.log" &
statd_pid=$!
for _ in $(seq 200); do rpcinfo -p 127.0.0.1 2>/dev/null | grep -q " 100024 " && break; sleep 0.05; done
"$bench" --real-rpcbind --label "rpc.statd: " --port 0 \
  --registrations "$registrations" --rounds "$rounds"
