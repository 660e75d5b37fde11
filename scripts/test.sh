#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the formatting, builds nlockd with ASan+UBSan and -Werror, holds src/ to clang-tidy's
# findings baseline, runs every test (unit, db, integration) against a
# PostgreSQL server this script starts, then an out-of-tree consumer of the installed library,
# then the per-call instruction guard (a Release build under callgrind), then a Linux kernel NFS
# client under QEMU against that nlockd, then the Debian packages (built,
# checked by lintian, installed, run and purged), then each fuzz target briefly.
# Usage: scripts/test.sh [--no-fuzz]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)

# Formatting and layering first: they fail in a second, before any compiling.
scripts/check-format.sh
scripts/check-layering.py

# ccache: paths relative to the checkout and no working directory in the hash, so that another
# clone or worktree of the same sources reuses the objects.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=true

build=build-test
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNLOCKD_WERROR=ON \
  -DNLOCKD_SANITIZE=address >/dev/null
cmake --build "$build" -j "$jobs"

# clang-tidy over src/ with the build's compile_commands.json: a finding that
# .clang-tidy-baseline does not hold fails here, before the tests (7 to 8 minutes on two cores).
scripts/check-tidy.py "$build" -j "$jobs"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [[ -x scripts/with-postgres.sh ]]; then
  scripts/with-postgres.sh ctest --test-dir "$build" --output-on-failure -j "$jobs"
else
  ctest --test-dir "$build" --output-on-failure -j "$jobs"
fi

# libnlockd installed to a temporary prefix and used by a project outside the tree
# (find_package shared and static, pkg-config).
tests/consumer/run.sh "$build"

# The per-call cost guard: instructions per call under callgrind against tests/perf/ir_baseline.txt
# (more than 10 % over fails). Valgrind cannot run ASan binaries, so it has a Release build of
# its own, of the three programs it runs.
cmake -S . -B build-perf -G Ninja -DCMAKE_BUILD_TYPE=Release -DNLOCKD_BUILD_TESTS=OFF >/dev/null
cmake --build build-perf --target nlockd nlockd-load embedded_server -j "$jobs"
tests/perf/ir_guard.sh build-perf

# A Linux kernel NFS client under QEMU against the sanitized nlockd (docs/kernel-rig.md); the
# guests' own status monitor is the Release nlockd, timed against rpc.statd.
NLOCKD_KERNEL_GUEST_BINARY=build-perf/src/cmd/nlockd tests/kernel/run.sh "$build/src/cmd/nlockd"

# The Debian packages: built with dpkg-buildpackage (ccache, no tests), lintian without errors,
# installed with dpkg -i, the installed daemon run as the nlockd user and smoke-tested, purged.
packaging/test-deb.sh

if [[ "${1:-}" != "--no-fuzz" ]]; then
  # The fuzz targets need clang; each compiles only the sources on the path it exercises. Each
  # runs for a bounded time (NLOCKD_FUZZ_SECONDS, 30 by default: 2.5 minutes for the five),
  # seeded from its corpus in the repository; what it finds new goes to a scratch directory.
  fuzz_targets=(rpc_fuzz nlm_wire_fuzz nsm_wire_fuzz config_fuzz admin_router_fuzz)
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DNLOCKD_FUZZ=ON -DNLOCKD_BUILD_TESTS=OFF -DNLOCKD_BUILD_BENCH=OFF >/dev/null
  cmake --build build-fuzz --target "${fuzz_targets[@]}" -j "$jobs"
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  for target in "${fuzz_targets[@]}"; do
    mkdir "$scratch/$target"
    "$root/build-fuzz/tests/fuzz/$target" -max_total_time="${NLOCKD_FUZZ_SECONDS:-30}" \
      -print_final_stats=1 "$scratch/$target" "$root/tests/fuzz/corpus/$target" \
      >"$scratch/$target.log" 2>&1 || { tail -n 60 "$scratch/$target.log"; exit 1; }
    echo "fuzz: $target ran without a crash ($(grep -o 'average_exec_per_sec: *[0-9]*' \
      "$scratch/$target.log" | tr -s ' '))"
  done
fi
