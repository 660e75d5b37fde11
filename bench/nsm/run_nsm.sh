#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# SM_MON throughput (1 and 64 clients, durable on SQLite) against the RPC NULL ceiling, and SM_MON
# latency with no registrations and with 10,000 present, against a fresh nlockd on a fresh
# SQLite file. Usage: bench/nsm/run_nsm.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
build=${1:-build-bench}
seconds=${2:-3}
nlockd_start "$build" --store "sqlite:$bench_scratch/nlockd.db" --nsm-max-registrations 10000000
"$build/bench/nsm/nlockd-nsm-bench" --target "127.0.0.1:$nlockd_port" --duration "$seconds"
