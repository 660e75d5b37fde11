#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# NLM4 TEST against a file holding 100,000 locks, against TEST on a file holding 1 lock and the
# RPC NULL ceiling of the same server, in one run. The files are filled over the wire.
# Usage: bench/run_nlm_test.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
seconds=${2:-5}
nlockd_start "$build" --store memory:
"$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" --workload nlm4-test \
  --file-locks 1,100000 --connections 1,8 --pipeline 1,8 --duration "$seconds" --warmup 1
