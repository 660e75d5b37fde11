#!/usr/bin/env bash
# 200 blocked waiters released at once: time until every GRANTED_MSG callback is acknowledged,
# with every client answering and with 10% of them silent (issue 4). Runs nlockd and the bench
# in a private network namespace (needs root) so that the fixed port and the 127.x.y.z client
# addresses meet nothing else; the callbacks go to each LOCK_MSG's UDP source port.
# Usage: bench/run_grants.sh [BUILD_DIR] [WAITERS] [ROUNDS]
set -euo pipefail
build=$(realpath "${1:-build-bench}")
waiters=${2:-200}
rounds=${3:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
unshare --net bash -euo pipefail -c '
  ip link set lo up
  "$1/src/cmd/nlockd" --listen 127.0.0.1:4045 --rpcbind-register=false --admin-listen off \
    --grace 0 --store "sqlite:$2/nlockd.db" --log-level warn 2>"$2/log" &
  pid=$!
  trap "kill $pid 2>/dev/null; wait $pid 2>/dev/null" EXIT
  for _ in $(seq 200); do
    ss -lunH | grep -q ":4045 " && break
    sleep 0.05
  done
  "$1/bench/grant/nlockd-grant-bench" --target 127.0.0.1:4045 --waiters "$3" --rounds "$4"
' run_grants "$build" "$dir" "$waiters" "$rounds"
