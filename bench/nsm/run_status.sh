#!/usr/bin/env bash
# SM_NOTIFY received -> status callback sent (1 and 10,000 registrations) and SM_SIMU_CRASH with
# 10,000 monitored hosts, in a private network namespace (needs root): there the bench can play
# rpcbind on :111 for this host and for every peer on 127.a.b.c, and nlockd asks it.
# Usage: bench/nsm/run_status.sh [BUILD_DIR] [STORE: sqlite|memory] [REGISTRATIONS]
set -euo pipefail
build=$(realpath "${1:-build-bench}")
store_kind=${2:-sqlite}
registrations=${3:-10000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
store="memory:"
[[ "$store_kind" == sqlite ]] && store="sqlite:$dir/nlockd.db"
unshare --net bash -euo pipefail -c '
  ip link set lo up
  "$1/src/cmd/nlockd" --listen 127.0.0.1:4045 --rpcbind-register=false --rpcbind-port 111 \
    --grace 0 --store "$2" --nsm-max-registrations 10000000 --log-level warn 2>"$3/log" &
  pid=$!
  trap "kill $pid 2>/dev/null; wait $pid 2>/dev/null" EXIT
  for _ in $(seq 200); do
    ss -lunH | grep -q ":4045 " && break
    sleep 0.05
  done
  "$1/bench/nsm/nlockd-nsm-status-bench" --port 4045 --registrations "$4"
' run_status "$build" "$store" "$dir" "$registrations"
