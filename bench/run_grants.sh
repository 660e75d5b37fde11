#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# 200 blocked waiters released at once: time until every GRANTED_MSG callback is acknowledged,
# with every client answering and with 10% of them silent. Runs nlockd and the bench
# in a private network namespace (needs root) so that the 127.x.y.z client addresses meet
# nothing else; the callbacks go to each LOCK_MSG's UDP source port.
# Usage: bench/run_grants.sh [BUILD_DIR] [WAITERS] [ROUNDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_enter_netns "$@"
build=${1:-build-bench}
waiters=${2:-200}
rounds=${3:-3}
nlockd_start "$build" --store memory:
"$build/bench/grant/nlockd-grant-bench" --target "127.0.0.1:$nlockd_port" --waiters "$waiters" \
  --rounds "$rounds"
