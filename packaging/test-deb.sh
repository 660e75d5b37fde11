#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CI for the Debian packages (nlockd, libnlockd0, nlockd-dev, nlockd-statd): builds them
# (packaging/build-deb.sh), runs lintian (no error allowed), installs them on this machine with
# dpkg -i, runs the installed daemon as the nlockd user with the unit's own ExecStart line
# (under systemd when it is PID 1), smoke-tests it with the project's rpcgen NLM and NSM clients
# (from build-test/), nlockctl and curl, reloads it, stops it, puts nlockd-statd in the place of
# a running rpc.statd and removes it again (packaging/test-statd-deb.sh), and purges the
# packages.
# Needs root, and build-test/ built with its tests (the rpcgen clients).
# Usage: packaging/test-deb.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

step() { echo "test-deb: $*"; }
# grep -c reads all its input: grep -q would stop early and, under pipefail, fail the pipeline
# when the writer gets SIGPIPE.
contains() { grep -c -e "$1" >/dev/null; }
fail() {
  echo "test-deb: FAILED: $*" >&2
  [[ -n "${log:-}" && -f "$log" ]] && tail -n 30 "$log" >&2
  exit 1
}

started=$(date +%s)
if [[ "${1:-}" == "--no-build" ]]; then  # Test the packages build-deb/ already holds.
  mapfile -t debs < <(ls build-deb/*.deb | grep -v -- '-dbgsym_')
else
  mapfile -t debs < <(packaging/build-deb.sh | grep -v -- '-dbgsym_')
fi
built=$(date +%s)
step "built ${debs[*]##*/} in $((built - started)) s"
version=$(dpkg-parsechangelog -S Version)
[[ -f "build-deb/nlockd_${version}_amd64.deb" ]] || fail "no nlockd_${version}_amd64.deb"

# lintian: errors fail the build; warnings are printed.
lintian --fail-on error --tag-display-limit 0 "build-deb/nlockd_${version}_amd64.changes"
step "lintian: no errors"

cleanup() {
  [[ -n "${daemon_pid:-}" ]] && kill "$daemon_pid" 2>/dev/null || true
  dpkg --purge nlockd-statd nlockd-dev libnlockd0 nlockd >/dev/null 2>&1 || true
  rm -rf "${scratch:-/nonexistent}"
}
trap cleanup EXIT
scratch=$(mktemp -d)
log="$scratch/nlockd.log"

# nlockd-statd takes rpc.statd's place: it is installed on its own, further down.
statd_deb=$(printf '%s\n' "${debs[@]}" | grep '/nlockd-statd_') || fail "no nlockd-statd package"
mapfile -t debs < <(printf '%s\n' "${debs[@]}" | grep -v '/nlockd-statd_')
DEBIAN_FRONTEND=noninteractive dpkg -i "${debs[@]}" >"$scratch/dpkg.log" 2>&1 ||
  { cat "$scratch/dpkg.log" >&2; fail "dpkg -i"; }

# What the package put where.
for path in /usr/sbin/nlockd /usr/bin/nlockctl /lib/systemd/system/nlockd.service \
  /usr/lib/sysusers.d/nlockd.conf /etc/nlockd/nlockd.toml /usr/share/man/man8/nlockd.8.gz \
  /usr/share/man/man8/nlockctl.8.gz /usr/share/man/man5/nlockd.toml.5.gz \
  /usr/share/bash-completion/completions/nlockctl /usr/share/nlockd/grafana/nlockd-dashboard.json \
  /usr/share/nlockd/prometheus/nlockd-alerts.yml /usr/include/nlockd/lock_service.hpp \
  /usr/share/doc/nlockd/operator-guide.md.gz /usr/lib/ocf/resource.d/nlockd/nlockd \
  /usr/share/doc/nlockd/examples/keepalived.conf /etc/logrotate.d/nlockd \
  /usr/share/nlockd/prometheus/prometheus-scrape.yml; do
  [[ -e "$path" ]] || fail "$path is not installed"
done
ls /usr/lib/x86_64-linux-gnu/libnlockd.so.0* /usr/lib/x86_64-linux-gnu/cmake/nlockd/nlockdConfig.cmake \
  /usr/lib/x86_64-linux-gnu/pkgconfig/nlockd.pc >/dev/null || fail "library files missing"
dpkg-query -W -f='${Conffiles}\n' nlockd | contains '^ /etc/nlockd/nlockd.toml ' ||
  fail "/etc/nlockd/nlockd.toml is not a conffile"
getent passwd nlockd >/dev/null || fail "no nlockd user"
[[ $(stat -c %U /var/lib/nlockd) == nlockd ]] || fail "/var/lib/nlockd is not nlockd's"
[[ $(stat -c %U /var/log/nlockd) == nlockd ]] || fail "/var/log/nlockd is not nlockd's"
dpkg-query -W -f='${Conffiles}\n' nlockd | contains '^ /etc/logrotate.d/nlockd ' ||
  fail "/etc/logrotate.d/nlockd is not a conffile"
if command -v logrotate >/dev/null; then
  logrotate --debug --state "$scratch/logrotate.state" /etc/logrotate.d/nlockd \
    >"$scratch/logrotate.txt" 2>&1 || { cat "$scratch/logrotate.txt" >&2; fail "logrotate -d"; }
fi
grep -q '^store = "sqlite:/var/lib/nlockd/nlockd.db"$' /etc/nlockd/nlockd.toml ||
  fail "the packaged config does not keep its store in /var/lib/nlockd"
/usr/sbin/nlockd --version | contains "^nlockd $version " || fail "nlockd --version"
# The daemon's allocator (CMakeLists.txt, NLOCKD_DAEMON_MALLOC): linked, and a package dependency.
ldd /usr/sbin/nlockd | contains 'libtcmalloc_minimal\.so' || fail "nlockd does not link tcmalloc"
dpkg-query -W -f='${Depends}\n' nlockd | contains 'libtcmalloc-minimal4' ||
  fail "the package does not depend on libtcmalloc-minimal4"
# The licence: machine-readable copyright in every package, and in the library's metadata.
for package in nlockd libnlockd0 nlockd-dev; do
  contains '^License: Apache-2.0$' <"/usr/share/doc/$package/copyright" ||
    fail "$package's copyright does not name Apache-2.0"
done
contains '^License: Apache-2.0$' </usr/lib/x86_64-linux-gnu/pkgconfig/nlockd.pc ||
  fail "nlockd.pc names no licence"
contains 'set(nlockd_LICENSE "Apache-2.0")' </usr/lib/x86_64-linux-gnu/cmake/nlockd/nlockdConfig.cmake ||
  fail "nlockdConfig.cmake names no licence"
/usr/bin/nlockctl --version | contains "^nlockctl $version " || fail "nlockctl --version"
runuser -u nlockd -- /usr/sbin/nlockd --config /etc/nlockd/nlockd.toml --check-config \
  >"$scratch/check.txt" || fail "--check-config of the packaged config"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /lib/systemd/system/nlockd.service 2>&1 | grep -v "^$" || true
fi
step "installed: files, conffile, user, state directory, versions"

# The unit's ExecStart line, run as the unit's user in its working directory. The ports are
# moved aside (flags added after the line) so that a real lockd or rpcbind is not disturbed.
exec_start=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/nlockd.service)
[[ "$exec_start" == "/usr/sbin/nlockd --config /etc/nlockd/nlockd.toml" ]] ||
  fail "unexpected ExecStart: $exec_start"
read -r -a command <<<"$exec_start"
(cd /var/lib/nlockd && exec setpriv --reuid nlockd --regid nlockd --init-groups \
  "${command[@]}" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --rpcbind-register false --grace 0 >"$log" 2>&1) &
daemon_pid=$!
for _ in $(seq 200); do
  # The admin server comes up last (once nlockd serves).
  grep -q "nlockd admin listening" "$log" && break
  kill -0 "$daemon_pid" 2>/dev/null || fail "the installed nlockd exited"
  sleep 0.1
done
port=$(sed -n 's/.*nlockd listening" address=[^ ]* port=\([0-9]*\).*/\1/p' "$log")
admin_port=$(sed -n 's/.*nlockd admin listening" address=[^ ]* port=\([0-9]*\).*/\1/p' "$log")
[[ -n "$port" && -n "$admin_port" ]] || fail "the installed nlockd did not start"
[[ $(ps -o user= -p "$daemon_pid") == nlockd ]] || fail "nlockd does not run as user nlockd"

# Real NLM and NSM calls over TCP and UDP with the rpcgen clients of the test build: a lock
# (persisted in the SQLite store), its conflict seen by TEST, the unlock; SM_STAT.
tools="${NLOCKD_TEST_TOOLS:-$root/build-test/tests/integration}"
nlm=("$tools/nlm_client" --server 127.0.0.1 --port "$port")
lock="fh=deb-smoke caller=client-a oh=owner-a svid=7 offset=0 length=10 exclusive=1"
"${nlm[@]}" --tcp null "lock $lock" | tee "$scratch/nlm.txt"
grep -q '^lock stat=granted' "$scratch/nlm.txt" || fail "NLM LOCK over TCP"
"${nlm[@]}" "test fh=deb-smoke caller=client-b oh=owner-b svid=8 offset=5 length=1 exclusive=1" \
  "unlock $lock" | tee "$scratch/nlm-udp.txt"
grep -q '^test stat=denied' "$scratch/nlm-udp.txt" || fail "NLM TEST over UDP"
"$tools/nsm_client" --server 127.0.0.1 --port "$port" null "stat name=localhost" |
  tee "$scratch/nsm.txt"
grep -q '^stat res=' "$scratch/nsm.txt" || fail "NSM SM_STAT"
server="http://127.0.0.1:$admin_port"
/usr/bin/nlockctl --server "$server" status | contains '^state_number: ' || fail "nlockctl status"
/usr/bin/nlockctl --server "$server" locks list --json | contains '"locks"' || fail "nlockctl --json"
curl -fsS "$server/readyz" >/dev/null || fail "/readyz"
curl -fsS "$server/metrics" | contains '^nsm_state_number ' || fail "/metrics"
curl -fsS "$server/api/v1/status" | contains "\"version\":\"$version\"" || fail "version in status"
[[ $(stat -c %U /var/lib/nlockd/nlockd.db) == nlockd ]] || fail "the store is not in /var/lib/nlockd"
# The packaged config refuses admin writes without a token. (An empty body with its
# Content-Length, as nlockctl sends: cpp-httplib answers 400 to a POST without one.)
[[ $(curl -s -o /dev/null -w '%{http_code}' --data '' "$server/api/v1/grace/end") == 403 ]] ||
  fail "an admin write without a token was not refused"

# Reload, then stop.
kill -HUP "$daemon_pid"
for _ in $(seq 100); do grep -q "nlockd reloaded" "$log" && break; sleep 0.1; done
grep -q "nlockd reloaded" "$log" || fail "SIGHUP did not reload"
kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "nlockd did not stop cleanly"
daemon_pid=
grep -q "nlockd stopped" "$log" || fail "no clean stop"
step "the installed daemon ran as nlockd, answered NLM, NSM, nlockctl and /metrics, reloaded and stopped"

# nlockd-statd: installed where rpc.statd runs, and removed (in a namespace of its own).
packaging/test-statd-deb.sh "$statd_deb" "$tools/nsm_client"

dpkg --purge nlockd-dev libnlockd0 nlockd >"$scratch/purge.log" 2>&1 ||
  { cat "$scratch/purge.log" >&2; fail "dpkg --purge"; }
[[ ! -e /var/lib/nlockd && ! -e /var/log/nlockd && ! -e /etc/nlockd/nlockd.toml &&
  ! -e /usr/sbin/nlockd && ! -e /etc/logrotate.d/nlockd ]] ||
  fail "purge left files behind"
step "purged; package step took $(($(date +%s) - started)) s (build $((built - started)) s)"
