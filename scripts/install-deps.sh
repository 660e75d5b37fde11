#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages nlockd needs, and only those that are missing, so that a second
# run needs no network.
#   scripts/install-deps.sh          build and run nlockd
#   scripts/install-deps.sh --test   also everything the tests and benchmarks use
set -euo pipefail

build_packages=(
  g++ cmake ninja-build ccache pkg-config
  libasio-dev libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev nlohmann-json3-dev
  libsqlite3-dev libpq-dev prometheus-cpp-dev libcpp-httplib-dev libssl-dev nettle-dev zlib1g-dev libbrotli-dev
  libgoogle-perftools-dev
)
test_packages=(
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libtirpc-dev rpcsvc-proto rpcbind nfs-common
  clang libclang-rt-14-dev clang-format-14 clang-tidy-14
  postgresql sqlite3 iproute2 procps curl prometheus
  # The floating-address recipes (tests/integration/ha_recipes_test.cpp): keepalived,
  # ocf-tester with the IPaddr2 resource agent, and a two-node Pacemaker cluster.
  keepalived resource-agents corosync pacemaker pacemaker-cli-utils
  # The Debian packages (packaging/test-deb.sh): dpkg-buildpackage, debhelper, lintian.
  dpkg-dev debhelper lintian logrotate
  # The kernel client rig (tests/kernel/): the guest's kernel is not installed but fetched
  # into a cache by tests/kernel/run.sh with apt-get download.
  qemu-system-x86 busybox-static nfs-ganesha nfs-ganesha-vfs python3
  # Its second guest, the kernel's own NFS server (scenarios 12-14), from the shared root: its
  # export lives on an ext4 image that survives the guest's power cut.
  nfs-kernel-server e2fsprogs
  # The per-call cost guard (tests/perf/ir_guard.sh): callgrind.
  valgrind
)

wanted=("${build_packages[@]}")
if [[ "${1:-}" == "--test" ]]; then
  wanted+=("${test_packages[@]}")
fi

missing=()
for pkg in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#wanted[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# Services that packages would start (rpcbind, postgresql) are started by the tests themselves.
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
