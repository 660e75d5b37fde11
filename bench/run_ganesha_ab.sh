#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nlockd against NFS-Ganesha's own NLM with the same load client, in one run: NLM4 LOCK+UNLOCK
# at C=1 P=1, C=8 P=8 and C=64 P=1, from one client host and then from a host per connection.
# For each round, load and source, the three servers run in turn, each started afresh for its
# run, so that the shared machine's load falls on all of them alike:
#   ganesha     NFS-Ganesha (NFSv3, FSAL VFS, its NLM on, its defaults otherwise) locking a real
#               file of its export, with Debian's rpc.statd as its status monitor
#   ganesha-held the same, with one more lock of the client host held through the run (one host
#               only): Ganesha monitors a host (SM_MON to rpc.statd) when it comes to hold a
#               lock and unmonitors it (SM_UNMON) when it holds none, so at C=1 P=1 every pair
#               costs it two calls to rpc.statd; this lock keeps the host monitored, as a client
#               holding some lock already is
#   nlockd-on   nlockd, SQLite store, persist_locks on (the default)
#   nlockd-off  nlockd, SQLite store, --persist-locks false
# Every run sends the same calls, naming Ganesha's NFSv3 file handle of that file (nlockd takes
# any handle). Before the rounds, one LOCK through Ganesha must show up as a kernel lock on the
# file (/proc/locks). Prints one line per run and, at the end, per load the medians of pairs/s
# (calls/s / 2) and the ratios nlockd / Ganesha (held: nlockd on / ganesha-held). A call not
# answered GRANTED counts as an error, not as a pair; any error makes the script fail.
# Everything runs in a network and mount namespace of its own (rpcbind, rpc.statd and Ganesha
# get a private /run and fixed ports that meet nothing else). Needs root, nfs-ganesha,
# nfs-ganesha-vfs, rpcbind, nfs-common (rpc.statd) and python3.
# Usage: bench/run_ganesha_ab.sh NLOCKD_BUILD_DIR [SECONDS (whole)] [ROUNDS]
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "$0")/lib.sh"
bench_enter_netns_private_run "$@"
build=$1 seconds=${2:-2} rounds=${3:-3}
load=$build/bench/load/nlockd-load
results=$bench_scratch/results
export_dir=$bench_scratch/export
bench_file=bench-file
rpcbind_pid="" statd_pid="" ganesha_pid="" ganesha_port=""

for tool in /usr/bin/ganesha.nfsd rpcbind rpc.statd rpcinfo python3 "$load" \
  "$build/src/cmd/nlockd"; do
  command -v "$tool" >/dev/null || { echo "run_ganesha_ab: $tool not found" >&2; exit 2; }
done

# stop_pid PID [SIGNAL]: sends SIGNAL (TERM), then waits for it.
stop_pid() {
  [[ -n "$1" ]] || return 0
  kill -"${2:-TERM}" "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# SIGKILL: on SIGTERM Ganesha first sends SM_UNMON for every client host it monitors, each
# failing only after an RPC timeout of seconds at that stage of its shutdown (after 64 hosts:
# still shutting down eight minutes later). Its NLM state is in memory, and at its next start it
# drops its registrations with rpc.statd (SM_UNMON_ALL).
ganesha_stop() {
  stop_pid "$ganesha_pid" KILL
  ganesha_pid=""
}

cleanup() {
  ganesha_stop
  stop_pid "$statd_pid"
  stop_pid "$rpcbind_pid"
  bench_cleanup
}
trap cleanup EXIT

# wait_until WHAT PID COMMAND...: polls COMMAND (up to 10 s) while process PID lives.
wait_until() {
  local what=$1 pid=$2
  shift 2
  for _ in $(seq 200); do
    "$@" && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "run_ganesha_ab: $what did not come up" >&2
  return 1
}

# registered PROGRAM VERSION: the TCP port rpcbind maps PROGRAM VERSION to, if any.
registered() {
  rpcinfo -p 127.0.0.1 2>/dev/null |
    awk -v p="$1" -v v="$2" '$1 == p && $2 == v && $3 == "tcp" {print $4; exit}'
}

# Sets ganesha_port once the running Ganesha itself listens on the port rpcbind maps NLM 4 to
# (not a mapping left by the Ganesha before it).
ganesha_listening() {
  ganesha_port=$(registered 100021 4)
  [[ -n "$ganesha_port" ]] &&
    ss -ltnpH "sport = :$ganesha_port" 2>/dev/null | grep -q "pid=$ganesha_pid,"
}

ganesha_start() {
  /usr/bin/ganesha.nfsd -F -f "$bench_scratch/ganesha.conf" -L "$bench_scratch/ganesha.log" \
    -p "$bench_scratch/ganesha.pid" >>"$bench_scratch/ganesha.out" 2>&1 &
  ganesha_pid=$!
  wait_until "Ganesha's NLM" "$ganesha_pid" ganesha_listening || {
    tail -n 30 "$bench_scratch/ganesha.log" "$bench_scratch/ganesha.out" >&2
    exit 1
  }
}

# The server side Ganesha needs: rpcbind, and rpc.statd (Ganesha's NLM calls SM_MON on the first
# LOCK from each client host and refuses the lock if that fails) with a state directory of its
# own. rpc.statd runs as the owner of sm/ (user statd), which must reach it.
chmod 0711 "$bench_scratch"
rpcbind -f &
rpcbind_pid=$!
rpcbind_up() { rpcinfo -p 127.0.0.1 >/dev/null 2>&1; }
wait_until rpcbind "$rpcbind_pid" rpcbind_up
mkdir -p "$bench_scratch/statd/sm" "$bench_scratch/statd/sm.bak"
touch "$bench_scratch/statd/state"
chown statd:nogroup "$bench_scratch/statd/sm" "$bench_scratch/statd/sm.bak" \
  "$bench_scratch/statd/state"
rpc.statd -F --no-notify -P "$bench_scratch/statd" 2>"$bench_scratch/statd.log" &
statd_pid=$!
statd_registered() { [[ -n "$(registered 100024 1)" ]]; }
wait_until rpc.statd "$statd_pid" statd_registered || {
  cat "$bench_scratch/statd.log" >&2
  exit 1
}

mkdir -m 0777 "$export_dir"
echo "the file every run locks" >"$export_dir/$bench_file"
cat >"$bench_scratch/ganesha.conf" <<EOF
# NFSv3 only, with Ganesha's own NLM; no grace period at start, as nlockd runs with --grace 0.
NFS_CORE_PARAM {
    Protocols = 3;
    Enable_NLM = true;
    Enable_RQUOTA = false;
    Plugins_Dir = /usr/lib/x86_64-linux-gnu/ganesha;
}
NFSv4 {
    Graceless = true;
    RecoveryRoot = $bench_scratch/ganesha-recovery;
}
EXPORT {
    Export_Id = 1;
    Path = $export_dir;
    Pseudo = /export;
    Protocols = 3;
    Transports = TCP;
    Access_Type = RW;
    Squash = No_Root_Squash;
    SecType = sys;
    FSAL {
        Name = VFS;
    }
}
LOG {
    Default_Log_Level = EVENT;
}
EOF

# Ganesha's NFSv3 handle of the file (MNT of the export, LOOKUP of the file), and proof that its
# NLM locks that file for real: after one LOCK (of bytes 0 to 4095, the first lane's range), the
# kernel holds a write lock on the file's inode over that range.
ganesha_start
fh=$(python3 "$(dirname "$0")/ganesha_fh.py" 127.0.0.1 "$export_dir" "$bench_file")
json=$("$load" --target "127.0.0.1:$ganesha_port" --workload nlm4-lock-unlock --connections 1 \
  --pipeline 1 --calls 1 --warmup 0 --duration 10 --json --fh-hex "$fh")
inode=$(stat -c %i "$export_dir/$bench_file")
if ! grep -q '"calls":1,"errors":0,' <<<"$json" ||
  ! grep -Eq "WRITE +[-0-9]+ +[0-9a-f]+:[0-9a-f]+:$inode 0 4095\$" /proc/locks; then
  echo "run_ganesha_ab: Ganesha's answer to one LOCK of the file: $json; its locks:" >&2
  grep -E ":$inode " /proc/locks >&2 || echo "(none)" >&2
  exit 1
fi
ganesha_stop

# The arguments of a LOCK of the file by another owner ("anchor") than any lane, of byte 2^40.
anchor_args=$(python3 -c '
import struct, sys
def opaque(b): return struct.pack(">I", len(b)) + b + bytes(-len(b) % 4)
print((opaque(b"anchor") + struct.pack(">II", 0, 1) + opaque(b"anchor") +
       opaque(bytes.fromhex(sys.argv[1])) + opaque(b"1@anchor") +
       struct.pack(">iQQII", 1, 1 << 40, 1, 0, 1)).hex())' "$fh")

# Takes the anchor's lock at Ganesha (from 127.0.0.1, the one-host loads' address), and checks
# that the kernel holds it.
ganesha_hold() {
  "$load" --target "127.0.0.1:$ganesha_port" --program 100021 --version 4 --procedure 2 \
    --args-hex "$anchor_args" --calls 1 --warmup 0 --duration 10 >/dev/null
  if ! grep -Eq "WRITE +[-0-9]+ +[0-9a-f]+:[0-9a-f]+:$inode 1099511627776 1099511627776\$" \
    /proc/locks; then
    echo "run_ganesha_ab: Ganesha did not take the anchor's lock" >&2
    exit 1
  fi
}

echo "# Ganesha $(/usr/bin/ganesha.nfsd -v 2>&1 | grep -o 'Release = [^ ,]*' | head -1)," \
  "file handle $fh: one LOCK through it is a kernel lock on the file"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

for round in $(seq "$rounds"); do
  for load_shape in "1 1" "8 8" "64 1"; do
    read -r c p <<<"$load_shape"
    for sources in one per-conn; do
      flag=()
      [[ $sources == per-conn ]] && flag=(--distinct-sources)
      configs=(ganesha ganesha-held nlockd-on nlockd-off)
      [[ $sources == per-conn ]] && configs=(ganesha nlockd-on nlockd-off)
      for cfg in "${configs[@]}"; do
        if [[ $cfg == ganesha* ]]; then
          ganesha_start
          [[ $cfg == ganesha-held ]] && ganesha_hold
          port=$ganesha_port
        else
          extra=()
          [[ $cfg == nlockd-off ]] && extra=(--persist-locks false)
          rm -f "$bench_scratch"/nlockd.db*
          nlockd_start "$build" --store "sqlite:$bench_scratch/nlockd.db" "${extra[@]}"
          port=$nlockd_port
        fi
        json=$(timeout -k 5 $((seconds + 60)) "$load" --target "127.0.0.1:$port" \
          --workload nlm4-lock-unlock --connections "$c" --pipeline "$p" \
          --duration "$seconds" --warmup 0.5 --json --fh-hex "$fh" \
          "${flag[@]}") || true  # it fails when no call was GRANTED: counted below as errors
        ganesha_stop
        nlockd_stop
        rate=$(sed -n 's/.*"calls_per_second":\([0-9.]*\).*/\1/p' <<<"$json")
        errors=$(sed -n 's/.*"errors":\([0-9]*\).*/\1/p' <<<"$json")
        p50=$(sed -n 's/.*"p50_us":\([0-9]*\).*/\1/p' <<<"$json")
        if [[ -z "$rate" ]]; then
          # The load client ends a connection whose call goes unanswered for --call-timeout
          # (10 s), and the timeout above backs that up. A run without a result counts as one
          # error.
          echo "run_ganesha_ab: no result from the load client against $cfg (a call never" \
            "answered?): $json" >&2
          rate=0 errors=1 p50=-
        fi
        echo "round $round C=$c P=$p hosts=$sources $cfg pairs/s $(awk -v r="$rate" \
          'BEGIN {printf "%.0f", r / 2}') p50_us $p50 errors $errors"
        echo "C=$c/P=$p/$sources $cfg $rate $errors" >>"$results"
      done
    done
  done
  echo "# load average after round $round: $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "# medians of pairs/s (calls/s / 2); on, off: nlockd with persist_locks on, off"
awk "$bench_awk_median"'{k = $1; v[k, $2] = v[k, $2] " " $3 / 2; e[$2] += $4; keys[k] = 1}
  END {
    for (k in keys) {
      g = median(v[k, "ganesha"]); h = median(v[k, "ganesha-held"])
      on = median(v[k, "nlockd-on"]); off = median(v[k, "nlockd-off"])
      printf "%-20s ganesha %7.0f held %7s | nlockd on %7.0f off %7.0f | on/ganesha %6.2f off/ganesha %6.2f on/held %5s\n", k, g, h ? sprintf("%.0f", h) : "-", on, off, g ? on / g : 0, g ? off / g : 0, h ? sprintf("%.2f", on / h) : "-"
    }
    for (c in e) if (e[c]) printf "ERRORS: %s had %d calls not answered GRANTED\n", c, e[c] > "/dev/stderr"
  }' "$results" | sort -t= -k2n
errors=$(awk '{n += $4} END {print n + 0}' "$results")
[[ $errors == 0 ]] || exit 1
