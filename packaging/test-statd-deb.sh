#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The nlockd-statd package on a host where Debian's rpc.statd runs, without systemd (what
# start-statd and the maintainer scripts do then), in a network namespace with its own rpcbind
# and a private /run and /var/lib/nfs, so that the machine's own are not touched: rpc.statd monitors a host; installing the package stops statd and starts nlockd,
# which takes statd's registration and state number over on the same boot (nobody notified);
# nlockd monitors a second host; a reinstall keeps it serving; removing the package gives the
# files back and starts rpc.statd again, which monitors both under the same state; installing
# it again hands over once more, and a purge leaves rpc.statd running and nothing of nlockd's. Called by packaging/test-deb.sh
# with the nlockd package installed.
# Usage: packaging/test-statd-deb.sh NLOCKD_STATD_DEB NSM_CLIENT
set -euo pipefail
deb=$(realpath "$1")
nsm_client=$(realpath "$2")

step() { echo "test-statd-deb: $*"; }
fail() {
  echo "test-statd-deb: FAILED: $*" >&2
  for file in /var/log/nlockd-statd.log "${scratch:-/nonexistent}"/*.log; do
    [[ -f "$file" ]] && { echo "--- $file" >&2; tail -n 40 "$file" >&2; }
  done
  exit 1
}

if [[ "${NLOCKD_STATD_DEB_INSIDE:-}" != 1 ]]; then
  netns="nlockd-statd-deb-$$"
  ip netns add "$netns"
  trap 'ip netns delete "$netns" 2>/dev/null || true' EXIT
  mkdir -p /var/lib/nfs
  NLOCKD_STATD_DEB_INSIDE=1 ip netns exec "$netns" unshare --mount --propagation private \
    "$0" "$@"
  exit
fi

# Inside: the namespace's loopback, a private /run and statd's directory as Debian makes it.
scratch=$(mktemp -d)
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /var/lib/nfs
mkdir -p /run/rpcbind /var/lib/nfs/sm /var/lib/nfs/sm.bak
chown statd /var/lib/nfs /var/lib/nfs/sm /var/lib/nfs/sm.bak
ip link set lo up
cleanup() {
  dpkg --purge nlockd-statd >/dev/null 2>&1 || true
  for pid_file in /run/nlockd-statd.pid /run/rpc.statd.pid; do
    pid=$(cat "$pid_file" 2>/dev/null || true)
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
  done
  [[ -n "${rpcbind_pid:-}" ]] && kill "$rpcbind_pid" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT
rpcbind -f -w >"$scratch/rpcbind.log" 2>&1 &
rpcbind_pid=$!
# Waits up to 10 s for PROGRAM VERSION to answer on loopback (UDP, as mount.nfs asks).
await_answer() {
  for _ in $(seq 100); do
    rpcinfo -T udp 127.0.0.1 "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}
await_answer 100000 2 || fail "rpcbind did not start"

# The status monitor: whose process holds its pid file, and what SM_STAT says.
monitor() {
  local pid_file=$1 pid
  pid=$(cat "$pid_file" 2>/dev/null || true)
  [[ -n "$pid" ]] && cat "/proc/$pid/comm" 2>/dev/null || true
}
nsm() { "$nsm_client" --server 127.0.0.1 "$@"; }
state() {
  nsm "stat name=127.0.0.1" | sed -n 's/^stat res=[a-z_]* state=\([0-9]*\)$/\1/p'
}
mon() {
  nsm "mon name=$1 my_name=127.0.0.1 prog=100021 vers=4 proc=16 priv0=7" | grep -c '^mon res=succ' \
    >/dev/null || fail "SM_MON $1"
}

rpc.statd --no-notify >"$scratch/statd.log" 2>&1 || fail "rpc.statd did not start"
await_answer 100024 1 || fail "rpc.statd does not answer"
[[ $(monitor /run/rpc.statd.pid) == rpc.statd ]] || fail "rpc.statd is not running"
mon 192.0.2.20
statd_state=$(state)
[[ -n "$statd_state" ]] || fail "no state from rpc.statd"
step "rpc.statd monitors 192.0.2.20 at state $statd_state"

DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" >"$scratch/dpkg-install.log" 2>&1 ||
  fail "dpkg -i nlockd-statd"
dpkg-divert --list /usr/sbin/start-statd | grep -c 'by nlockd-statd' >/dev/null ||
  fail "start-statd is not diverted"
[[ -x /usr/sbin/start-statd.nfs-common ]] || fail "nfs-common's start-statd was not kept"
grep -c 'nlockd-statd' /usr/sbin/start-statd >/dev/null || fail "start-statd is not nlockd-statd's"
for path in /lib/systemd/system/rpc-statd.service.d/nlockd-statd.conf \
  /lib/systemd/system/rpc-statd-notify.service.d/nlockd-statd.conf /etc/nlockd/nlockd-statd.toml; do
  [[ -e "$path" ]] || fail "$path is not installed"
done
if command -v systemd-analyze >/dev/null; then
  # The units with the drop-ins, as systemd would load them: no key it does not know.
  systemd-analyze verify /lib/systemd/system/rpc-statd.service \
    /lib/systemd/system/rpc-statd-notify.service >"$scratch/verify.log" 2>&1 || true
  grep -c -i 'unknown\|ignoring' "$scratch/verify.log" >/dev/null &&
    fail "systemd-analyze verify: $(cat "$scratch/verify.log")"
fi
[[ $(monitor /run/nlockd-statd.pid) == nlockd ]] || fail "nlockd does not run after the install"
[[ -z "$(monitor /run/rpc.statd.pid)" ]] || fail "rpc.statd still runs"
[[ $(state) == "$statd_state" ]] || fail "state $(state) after the hand-over, not $statd_state"
[[ -e /var/lib/nfs/nlockd.held ]] || fail "nlockd does not hold statd's directory"
/usr/bin/nlockctl --server http://127.0.0.1:9465 clients list | grep -c '192.0.2.20' >/dev/null ||
  fail "statd's registration of 192.0.2.20 was not taken over"
/usr/sbin/nlockd --config /etc/nlockd/nlockd-statd.toml --check-config |
  grep -c "^# from nfs.conf: statd.state_directory (rpc.statd's default)" >/dev/null ||
  fail "--check-config does not say where statd.state_directory came from"
timeout 10 /usr/sbin/start-statd || fail "start-statd with nlockd running"
[[ $(monitor /run/nlockd-statd.pid) == nlockd ]] || fail "start-statd disturbed nlockd"
mon 192.0.2.21
step "installed: nlockd took statd's registration and state $statd_state over, monitors 192.0.2.21"

# Reinstalled over itself (dpkg's upgrade path): the diversion is kept, nlockd keeps serving.
DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" >"$scratch/dpkg-reinstall.log" 2>&1 ||
  fail "dpkg -i nlockd-statd over itself"
[[ $(dpkg-divert --list /usr/sbin/start-statd | grep -c 'by nlockd-statd') == 1 ]] ||
  fail "the diversion after a reinstall"
[[ $(monitor /run/nlockd-statd.pid) == nlockd ]] || fail "nlockd does not run after a reinstall"
[[ $(state) == "$statd_state" ]] || fail "state $(state) after a reinstall, not $statd_state"
step "reinstalled: nlockd still serves at state $statd_state"

dpkg -r nlockd-statd >"$scratch/dpkg-remove.log" 2>&1 || fail "dpkg -r nlockd-statd"
dpkg-divert --list /usr/sbin/start-statd | grep -c . >/dev/null && fail "the diversion stayed"
grep -c 'nlockd' /usr/sbin/start-statd >/dev/null && fail "start-statd is not nfs-common's again"
[[ ! -e /lib/systemd/system/rpc-statd.service.d/nlockd-statd.conf ]] || fail "the drop-in stayed"
[[ ! -e /var/lib/nfs/nlockd.held ]] || fail "nlockd did not give statd's directory back"
await_answer 100024 1 || fail "no status monitor answers after the removal"
[[ $(monitor /run/rpc.statd.pid) == rpc.statd ]] || fail "rpc.statd was not started again"
[[ $(state) == "$statd_state" ]] || fail "rpc.statd at state $(state), not $statd_state"
for host in 192.0.2.20 192.0.2.21; do
  grep -rl "$host" /var/lib/nfs/sm >/dev/null || fail "rpc.statd's sm/ lacks $host"
done
step "removed: rpc.statd runs again at state $statd_state and monitors 192.0.2.20 and 192.0.2.21"

# Installed once more while rpc.statd runs on the files nlockd gave back: the same hand-over.
DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" >"$scratch/dpkg-install-again.log" 2>&1 ||
  fail "dpkg -i nlockd-statd a second time"
[[ $(monitor /run/nlockd-statd.pid) == nlockd ]] || fail "nlockd does not run after the second install"
[[ $(state) == "$statd_state" ]] || fail "state $(state) after the second install"
/usr/bin/nlockctl --server http://127.0.0.1:9465 clients list | grep -c '192.0.2.21' >/dev/null ||
  fail "the registration nlockd made, given back to statd, was not taken over again"
dpkg --purge nlockd-statd >"$scratch/dpkg-purge.log" 2>&1 || fail "dpkg --purge nlockd-statd"
[[ ! -e /var/lib/nlockd-statd && ! -e /etc/nlockd/nlockd-statd.toml ]] ||
  fail "the purge left nlockd-statd's files"
[[ $(monitor /run/rpc.statd.pid) == rpc.statd ]] || fail "rpc.statd was not started after the purge"
grep -c 'nlockd' /usr/sbin/start-statd >/dev/null && fail "start-statd after the purge"
step "installed again while rpc.statd ran, then purged: rpc.statd back at state $(state)"
