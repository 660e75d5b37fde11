#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A PostgreSQL primary with a synchronous streaming replica, for the HA failover test
# (tests/integration/ha_test.cpp): both in DIR, both on 127.0.0.1, run as the postgres user
# when called as root. Synchronous replication (synchronous_commit on, the replica named in
# synchronous_standby_names) is what makes a promoted replica hold every commit the primary
# acknowledged, lease and lock table included; asynchronous replication could lose the last ones.
#   pg_failover_pair.sh start DIR      prints "PRIMARY_PORT REPLICA_PORT PASSWORD"
#   pg_failover_pair.sh fail DIR       stops the primary at once (-m immediate) and promotes the
#                                      replica; returns once the replica accepts writes
#   pg_failover_pair.sh stop DIR       stops both (whichever run) and removes DIR
set -euo pipefail

action=${1:?usage: $0 start|fail|stop DIR}
dir=${2:?usage: $0 start|fail|stop DIR}
pg_bin="${NLOCKD_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}"
as_postgres=()
if [[ $(id -u) -eq 0 ]]; then
  as_postgres=(runuser -u postgres --)
fi
ctl() {  # ctl NAME ARGS...: pg_ctl for the primary or the replica
  local name=$1
  shift
  "${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$dir/$name" -l "$dir/$name.log" -w -t 60 "$@"
}

# start_on_free_port NAME: starts the server in $dir/NAME on a random port below the kernel's
# ephemeral range (a port a client socket holds passes a "nothing listens" probe but cannot be
# bound), trying again on another port when the bind fails; prints the port.
start_on_free_port() {
  local name=$1 port low
  low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  ((low > 11000)) || low=65535
  for _ in $(seq 1 20); do
    port=$((10000 + RANDOM % (low - 10000)))
    rm -f "$dir/$name.log"
    if ctl "$name" -o "-p $port" start >/dev/null 2>&1; then
      echo "$port"
      return
    fi
    if ! grep -q "could not bind\|could not create any TCP/IP sockets\|Address already in use" \
        "$dir/$name.log" 2>/dev/null; then
      echo "pg_failover_pair: the $name did not start:" >&2
      cat "$dir/$name.log" >&2
      exit 1
    fi
  done
  echo "pg_failover_pair: no free port for the $name" >&2
  exit 1
}

case $action in
  start)
    mkdir -p "$dir"
    chmod 755 "$dir"
    [[ $(id -u) -eq 0 ]] && chown postgres: "$dir"
    password=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
    echo "$password" >"$dir/password"
    [[ $(id -u) -eq 0 ]] && chown postgres: "$dir/password"
    "${as_postgres[@]}" "$pg_bin/initdb" -D "$dir/primary" -U postgres --auth-local=trust \
      --auth-host=scram-sha-256 --pwfile="$dir/password" -E UTF8 --locale=C.UTF-8 --no-sync \
      >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    cat >>"$dir/primary/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
max_connections = 100
synchronous_standby_names = 'replica'
CONF
    echo "local replication postgres trust" >>"$dir/primary/pg_hba.conf"
    primary_port=$(start_on_free_port primary)
    psql=("${as_postgres[@]}" "$pg_bin/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir"
          -p "$primary_port" -U postgres -d postgres)
    # Until the replica streams, commits wait for it: make the role and database first, with
    # synchronous commit off for these two statements only.
    PGOPTIONS="-c synchronous_commit=local" "${psql[@]}" \
      -c "CREATE ROLE nlockd LOGIN PASSWORD '$password'" \
      -c "CREATE DATABASE nlockd_test OWNER nlockd"
    "${as_postgres[@]}" "$pg_bin/pg_basebackup" -h "$dir" -p "$primary_port" -U postgres \
      -D "$dir/replica" -R --no-sync -X stream -c fast -d "application_name=replica" \
      >"$dir/basebackup.log" 2>&1 || { cat "$dir/basebackup.log" >&2; exit 1; }
    # Promoted, it has no standby of its own: it must not wait for one at each commit (the
    # primary's setting came with the base backup).
    cat >>"$dir/replica/postgresql.conf" <<CONF
synchronous_standby_names = ''
CONF
    replica_port=$(start_on_free_port replica)
    # Ready once the primary sees the replica as its synchronous standby.
    for _ in $(seq 1 200); do
      state=$("${psql[@]}" -At -c \
        "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'replica'")
      [[ "$state" == sync ]] && break
      sleep 0.05
    done
    [[ "$state" == sync ]] || { echo "pg_failover_pair: the replica is not synchronous" >&2; exit 1; }
    echo "$primary_port $replica_port $password"
    ;;
  fail)
    ctl primary -m immediate stop >/dev/null
    ctl replica promote >/dev/null  # -w: returns once the promotion is done
    ;;
  stop)
    for name in primary replica; do
      if [[ -f "$dir/$name/postmaster.pid" ]]; then
        ctl "$name" -m immediate stop >/dev/null 2>&1 || true
      fi
    done
    rm -rf "$dir"
    ;;
  *)
    echo "usage: $0 start|fail|stop DIR" >&2
    exit 2
    ;;
esac
