#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the Linux kernel NFS client scenarios against NLOCKD_BINARY (docs/kernel-rig.md).
# Usage: tests/kernel/run.sh NLOCKD_BINARY [SCENARIO...]  (1-14, 12s-14s, run in the rig's order;
# default all: docs/kernel-rig.md, "What it checks")
# Needs root, ip netns, qemu-system-x86, busybox-static, nfs-ganesha(-vfs), rpcbind, nfs-common,
# and for scenarios 12 to 14 nfs-kernel-server and e2fsprogs (scripts/install-deps.sh --test). The guest kernel and initramfs are kept in
# $NLOCKD_KERNEL_CACHE (default /var/cache/nlockd-kernel-rig), fetched with apt-get on first use.
# NLOCKD_KERNEL_KEEP=1 keeps the work directory (logs, console, ganesha and nlockd output).
# NLOCKD_KERNEL_GUEST_BINARY: the nlockd the guests run as their status monitor (scenarios 4, 7,
# 12 to 14; default NLOCKD_BINARY). The test command gives them the Release build, as the
# package ships it: an ASan build starts seconds slower under QEMU's emulation, and those
# scenarios time the guest's start against rpc.statd's.
# NLOCKD_KERNEL_GUEST_TRACE=1 runs the guests' nlockd under strace, with the dynamic linker's
# statistics in its log, to see where its start-up goes (with NLOCKD_KERNEL_KEEP=1: the traces
# are in the work directory's guest-state/ and nfsd-state/). A measurement: strace slows it.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 NLOCKD_BINARY [SCENARIO...]" >&2
  exit 2
fi
nlockd=$(realpath "$1")
shift
guest_nlockd=$(realpath "${NLOCKD_KERNEL_GUEST_BINARY:-$nlockd}")
here=$(cd "$(dirname "$0")" && pwd)
cache=${NLOCKD_KERNEL_CACHE:-/var/cache/nlockd-kernel-rig}
python=/usr/bin/python3  # Debian's: the guest runs the same one through the shared root.

[[ $(id -u) -eq 0 ]] || { echo "kernel: needs root (ip netns, tap, QEMU)" >&2; exit 2; }
for binary in "$nlockd" "$guest_nlockd"; do
  [[ -x "$binary" ]] || { echo "kernel: $binary is not executable" >&2; exit 2; }
done
missing() {
  echo "kernel: $1 missing (scripts/install-deps.sh --test)" >&2
  exit 2
}
for tool in qemu-system-x86_64 ganesha.nfsd rpcbind rpc.statd sm-notify mount.nfs ip; do
  command -v "$tool" >/dev/null || missing "$tool"
done
[[ -x /bin/busybox ]] || missing busybox-static
[[ -x $python ]] || missing python3

# The guest kernel: Debian's, unpacked into the cache (never installed on this host, so the
# host's boot stays as it is).
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
kdir=$(ls -d "$cache"/linux-* 2>/dev/null | sort -V | tail -n 1 || true)
kernel_package() {  # what the linux-image-amd64 metapackage points at today
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}'
}
if [[ -z "$kdir" || ! -f "$kdir/done" ]]; then
  pkg=$(kernel_package)
  if [[ -z "$pkg" ]]; then
    apt-get update -q >/dev/null
    pkg=$(kernel_package)
  fi
  [[ -n "$pkg" ]] || { echo "kernel: cannot resolve linux-image-amd64" >&2; exit 2; }
  kdir="$cache/$pkg"
  rm -rf "$kdir" && mkdir -p "$kdir/deb"
  if ! (cd "$kdir/deb" && apt-get download -q "$pkg" >"$kdir/download.log" 2>&1); then
    cat "$kdir/download.log" >&2
    echo "kernel: apt-get download $pkg failed" >&2
    exit 2
  fi
  deb=$(ls "$kdir"/deb/*.deb)
  dpkg-deb -x "$deb" "$kdir/root"
  rm -rf "$kdir/deb"
  touch "$kdir/done"
fi
version=$(ls "$kdir/root/lib/modules")
vmlinux="$kdir/vmlinux"
if [[ ! -f "$vmlinux" ]]; then
  "$python" "$here/guest-image.py" vmlinux "$kdir/root/boot/vmlinuz-$version" "$vmlinux"
fi
# The initramfs is rebuilt whenever its inputs change.
# The kernel NFS server's guest (scenarios 12 to 14) has one of its own, with nfsd.
key=$(cat "$here/initramfs-init" "$here/guest-image.py" /bin/busybox | sha256sum | cut -c1-16)
initrd="$kdir/initramfs-$key.cpio.gz"
initrd_nfsd="$kdir/initramfs-nfsd-$key.cpio.gz"
if [[ ! -f "$initrd" || ! -f "$initrd_nfsd" ]]; then
  rm -f "$kdir"/initramfs-*.cpio.gz
  "$python" "$here/guest-image.py" initramfs "$kdir/root/lib/modules/$version" \
    "$here/initramfs-init" /bin/busybox "$initrd"
  "$python" "$here/guest-image.py" initramfs "$kdir/root/lib/modules/$version" \
    "$here/initramfs-init" /bin/busybox "$initrd_nfsd" nfsd
fi
exec 9>&-

# One network namespace holds the server side (rpcbind, Ganesha, nlockd) and the guest's tap;
# a private mount namespace gives it its own /run, so its rpcbind is not the host's.
ns="nlk-kernel-$$"
# Namespaces of earlier runs killed before they could clean up (their run.sh is gone).
for old in $(ip netns list | awk '/^nlk-kernel-[0-9]+( |$)/ {print $1}'); do
  kill -0 "${old#nlk-kernel-}" 2>/dev/null && continue
  pids=$(ip netns pids "$old" 2>/dev/null || true)
  [[ -z "$pids" ]] || kill -9 $pids 2>/dev/null || true
  ip netns del "$old" 2>/dev/null || true
done
work=$(mktemp -d /tmp/nlk-kernel.XXXXXX)
cleanup() {
  local rc=$?
  # Whatever is left in the namespace is ours: the rig's own processes, or QEMU after a crash.
  local pids
  pids=$(ip netns pids "$ns" 2>/dev/null || true)
  [[ -z "$pids" ]] || kill -9 $pids 2>/dev/null || true
  for _ in $(seq 100); do  # until they are gone (up to 10 s), before their files are removed
    [[ -z "$(ip netns pids "$ns" 2>/dev/null)" ]] && break
    sleep 0.1
  done
  ip netns del "$ns" 2>/dev/null || true
  if [[ "${NLOCKD_KERNEL_KEEP:-0}" == 1 ]]; then
    echo "kernel: work directory kept: $work"
  else
    rm -rf "$work" || true
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$ns"
ip -n "$ns" link set lo up
mkdir -m 0755 "$work/run"
# In the background, so that a TERM reaches the trap at once rather than after the run.
ip netns exec "$ns" unshare --mount --propagation private sh -c \
  'mount --bind "$0" /run && exec "$@"' "$work/run" \
  "$python" -B "$here/rig.py" --nlockd "$nlockd" --guest-nlockd "$guest_nlockd" --kernel "$vmlinux" --initrd "$initrd" \
  --initrd-nfsd "$initrd_nfsd" \
  --kernel-config "$kdir/root/boot/config-$version" --work "$work" "$@" &
wait $!
