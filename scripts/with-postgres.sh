#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs COMMAND against a private PostgreSQL server, then stops the server and removes it.
#   scripts/with-postgres.sh COMMAND [ARGS...]
#   e.g. scripts/with-postgres.sh ctest --test-dir build -L db
# The server lives in a temporary directory, listens on a free port (and on a unix socket in that
# directory), and holds a database nlockd_test owned by the role nlockd. It listens on every
# address but admits by password only 127.0.0.1 and 10.231.0.0/16, the links that
# tests/integration/ha_fault_test.cpp makes from its network namespaces to this one (so that it
# can cut them). COMMAND sees:
#   NLOCKD_TEST_PG_URI      postgresql://nlockd:PASSWORD@127.0.0.1:PORT/nlockd_test
#   NLOCKD_TEST_PG_DATADIR  the server's data directory
#   NLOCKD_TEST_PG_CTL      a pg_ctl command line for this server: append stop, start or restart
# Run as root, the server runs as the postgres user (runuser); otherwise as the caller.
# PostgreSQL comes from Debian's postgresql package (scripts/install-deps.sh --test).
set -euo pipefail

if (($# == 0)); then
  echo "usage: $0 COMMAND [ARGS...]" >&2
  exit 2
fi

pg_bin="${NLOCKD_PG_BIN:-}"
if [[ -z "$pg_bin" ]]; then
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
fi
if [[ -z "$pg_bin" || ! -x "$pg_bin/initdb" ]]; then
  echo "with-postgres: no PostgreSQL server binaries (install Debian's postgresql package:" \
       "scripts/install-deps.sh --test)" >&2
  exit 1
fi

as_server_user=()
if [[ $(id -u) -eq 0 ]]; then
  as_server_user=(runuser -u postgres --)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/nlockd-pg.XXXXXX")
data="$work/data"
log="$work/server.log"
chmod 755 "$work"
if [[ $(id -u) -eq 0 ]]; then
  chown postgres: "$work"
fi

pg_ctl=("${as_server_user[@]}" "$pg_bin/pg_ctl" -D "$data" -l "$log" -w -t 60)

cleanup() {
  local status=$?
  if [[ -f "$data/postmaster.pid" ]]; then
    "${pg_ctl[@]}" -m immediate stop >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

password=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
echo "$password" >"$work/password"
if [[ $(id -u) -eq 0 ]]; then
  chown postgres: "$work/password"
fi

"${as_server_user[@]}" "$pg_bin/initdb" -D "$data" -U postgres --auth-local=trust \
  --auth-host=scram-sha-256 --pwfile="$work/password" -E UTF8 --locale=C.UTF-8 --no-sync \
  >"$work/initdb.log" 2>&1 || { cat "$work/initdb.log" >&2; exit 1; }

cat >>"$data/pg_hba.conf" <<HBA
# with-postgres.sh: the test namespaces' links
host all all 10.231.0.0/16 scram-sha-256
HBA

# A free port: try random ones until the server binds.
port=""
for _ in $(seq 1 20); do
  candidate=$((20000 + RANDOM % 40000))
  cat >>"$data/postgresql.conf" <<CONF
# with-postgres.sh
listen_addresses = '*'
port = $candidate
unix_socket_directories = '$work'
max_connections = 200
CONF
  if "${pg_ctl[@]}" start >/dev/null 2>&1; then
    port=$candidate
    break
  fi
  if ! grep -q "could not bind\|Address already in use" "$log" 2>/dev/null; then
    cat "$log" >&2
    exit 1
  fi
done
if [[ -z "$port" ]]; then
  echo "with-postgres: found no free port" >&2
  exit 1
fi

psql=("${as_server_user[@]}" "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$port"
      -U postgres -d postgres)
"${psql[@]}" -c "CREATE ROLE nlockd LOGIN PASSWORD '$password'"
"${psql[@]}" -c "CREATE DATABASE nlockd_test OWNER nlockd"

export NLOCKD_TEST_PG_URI="postgresql://nlockd:$password@127.0.0.1:$port/nlockd_test"
export NLOCKD_TEST_PG_DATADIR="$data"
printf -v NLOCKD_TEST_PG_CTL '%q ' "${pg_ctl[@]}"
export NLOCKD_TEST_PG_CTL
echo "with-postgres: PostgreSQL $("$pg_bin/postgres" --version | awk '{print $3}') on" \
     "127.0.0.1:$port ($data)" >&2

set +e
"$@"
status=$?
set -e
exit "$status"
