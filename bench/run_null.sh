#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The RPC NULL ceiling: starts nlockd from BUILD_DIR on a free loopback port and drives NULL
# (NLM v4 procedure 0) at 1, 8 and 64 connections with 1 and 8 calls in flight each.
# Usage: bench/run_null.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build-bench}
seconds=${2:-5}
nlockd_start "$build" --store memory:
"$build/bench/load/nlockd-load" --target "127.0.0.1:$nlockd_port" --connections 1,8,64 \
  --pipeline 1,8 --duration "$seconds" --warmup 1
