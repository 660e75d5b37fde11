#!/usr/bin/env bash
# SM_NOTIFY received -> status callback sent (1 and 10,000 registrations) and SM_SIMU_CRASH with
# 10,000 monitored hosts, in a private network namespace (needs root): there the bench can play
# rpcbind on :111 for this host and for every peer on 127.a.b.c, and nlockd asks it.
# Usage: bench/nsm/run_status.sh [BUILD_DIR] [STORE: sqlite|memory] [REGISTRATIONS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/../lib.sh"
bench_enter_netns "$@"
build=${1:-build-bench}
store_kind=${2:-sqlite}
registrations=${3:-10000}
store="memory:"
[[ "$store_kind" == sqlite ]] && store="sqlite:$bench_scratch/nlockd.db"
nlockd_start "$build" --store "$store" --rpcbind-port 111 --nsm-max-registrations 10000000
"$build/bench/nsm/nlockd-nsm-status-bench" --port "$nlockd_port" --registrations "$registrations"
