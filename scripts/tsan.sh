#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the tests of nlockd's threaded parts with ThreadSanitizer (build-tsan/, RelWithDebInfo,
# -Werror) and runs them; fails on any report not explained in tests/tsan.supp. Not part of
# scripts/test.sh (a third full build would not fit CI's time): run it before calling a change to
# threads, cancellation or shutdown done. Needs root for the PostgreSQL server the store tests
# start (scripts/with-postgres.sh).
#   scripts/tsan.sh [TEST...]    default: the tests below
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tests=("$@")
if [[ ${#tests[@]} -eq 0 ]]; then
  # The io thread against the store's writer and hand-on threads, the admin server's HTTP
  # threads, the HA lease keeper and callout, notifications and shutdown under load.
  tests=(rpc_test nsm_notifier_test nsm_service_test nlm_service_test server_test
         lock_service_test store_test ha_callout_test admin_test)
fi
export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=true
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNLOCKD_WERROR=ON \
  -DNLOCKD_SANITIZE=thread -DNLOCKD_BUILD_BENCH=OFF -DNLOCKD_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-tsan --target "${tests[@]}"
export TSAN_OPTIONS="suppressions=$root/tests/tsan.supp second_deadlock_stack=1 halt_on_error=0"
failed=()
for test in "${tests[@]}"; do
  binary=$(find build-tsan/src -name "$test" -type f -perm -u+x | head -n 1)
  log=build-tsan/$test.log
  echo "tsan: $test"
  if ! scripts/with-postgres.sh "$binary" >"$log" 2>&1 || grep -q "WARNING: ThreadSanitizer" "$log"
  then
    failed+=("$test")
    grep -A 40 "WARNING: ThreadSanitizer" "$log" | head -n 80 || tail -n 30 "$log"
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "tsan: failed: ${failed[*]} (logs in build-tsan/TEST.log)" >&2
  exit 1
fi
echo "tsan: ${#tests[@]} tests, no reports"
