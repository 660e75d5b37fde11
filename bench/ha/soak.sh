#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The randomized HA fault run of tests/integration/ha_fault_test.cpp (kill -9, partition from
# PostgreSQL, SIGTERM move, each round under LOCK/UNLOCK load with the clients' checker), for
# ROUNDS rounds (default 100) against a private PostgreSQL. Needs root.
# Usage: bench/ha/soak.sh [BUILD_DIR] [ROUNDS] [SEED]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build-test}
export NLOCKD_HA_FAULT_ROUNDS=${2:-100}
[[ -n "${3:-}" ]] && export NLOCKD_HA_FAULT_SEED=$3
exec "$here/../../scripts/with-postgres.sh" "$build/tests/integration/ha_fault_test" \
  --gtest_filter=HaFaultTest.RandomizedFaults
