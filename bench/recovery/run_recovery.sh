#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Recovery latencies with real processes, each host its own network namespace with its own
# rpcbind (Debian's) and /run: a server host running nlockd and two client hosts.
#   fresh    exec of nlockd on an empty store -> first lock granted to a client that has been
#            asking the server's rpcbind for NLM (and then NLM for the lock) every 0.5 ms
#   restart  client 1 holds 10 locks; kill -9; exec again on the same store -> first lock on a
#            file nobody held granted to client 2 (asking as above)
#   reboot   client 1 holds a lock, client 2 waits behind it (blocking LOCK, its own NLM
#            callback server registered with its rpcbind); Debian's sm-notify runs on client 1 as
#            at boot -> client 2's callback server prints the GRANTED callback
# Each round runs every scenario against every nlockd binary given, interleaved, so that the
# figures of one run are comparable. Needs root, iproute2, rpcbind and sm-notify.
# Usage: bench/recovery/run_recovery.sh BUILD_DIR [ROUNDS] [NLOCKD...]
#   NLOCKD defaults to BUILD_DIR/src/cmd/nlockd; the tools come from BUILD_DIR.
set -euo pipefail
build=${1:?usage: run_recovery.sh BUILD_DIR [ROUNDS] [NLOCKD...]}
rounds=${2:-5}
shift $(($# < 2 ? $# : 2))
binaries=("$@")
[[ ${#binaries[@]} -gt 0 ]] || binaries=("$build/src/cmd/nlockd")
probe=$build/bench/recovery/nlockd-recovery-probe
nlm_client=$build/tests/integration/nlm_client
callback_server=$build/tests/integration/nlm_callback_server
for tool in "$probe" "$nlm_client" "$callback_server" "${binaries[@]}"; do
  [[ -x "$tool" ]] || { echo "missing $tool" >&2; exit 2; }
done

scratch=$(mktemp -d)
tag="nlkr$$"
hosts=(srv cl1 cl2)
pids=()
nlockd_pid=""
cleanup() {
  [[ -n "$nlockd_pid" ]] && kill -9 "$nlockd_pid" 2>/dev/null || true
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # What still runs in our namespaces (rpcbind, tools) was started by this script.
  for h in "${hosts[@]}"; do
    for pid in $(ip netns pids "$tag-$h" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
    ip netns del "$tag-$h" 2>/dev/null || true
  done
  rm -rf "$scratch"
}
trap cleanup EXIT

# on HOST CMD...: runs CMD in HOST's namespace with HOST's /run.
on() {
  local host=$1
  shift
  ip netns exec "$tag-$host" unshare --mount --propagation private \
    sh -c 'mount --bind "$0" /run && exec "$@"' "$scratch/run-$host" "$@"
}
now_us() { local t=$EPOCHREALTIME; echo "${t/./}"; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1000 }'; }

for h in "${hosts[@]}"; do
  ip netns add "$tag-$h"
  ip -n "$tag-$h" link set lo up
  mkdir -p "$scratch/run-$h"
done
for n in 1 2; do
  ip -n "$tag-srv" link add "v$n" type veth peer name v0 netns "$tag-cl$n"
  ip -n "$tag-srv" addr add "10.77.$n.1/24" dev "v$n"
  ip -n "$tag-cl$n" addr add "10.77.$n.2/24" dev v0
  ip -n "$tag-srv" link set "v$n" up
  ip -n "$tag-cl$n" link set v0 up
done
for h in "${hosts[@]}"; do
  on "$h" rpcbind -f &
  pids+=($!)
done
for h in "${hosts[@]}"; do
  for _ in $(seq 100); do on "$h" rpcinfo -p 127.0.0.1 >/dev/null 2>&1 && break; sleep 0.05; done
done

export NLOCKD_STATD_STATE_FILE=$scratch/no-statd-state
# start_nlockd BINARY STORE [FLAGS...]: execs nlockd on the server host; sets exec_us.
start_nlockd() {
  local binary=$1 store=$2
  shift 2
  wrapper_us=$(now_us)
  rm -f "$scratch/nlockd.pid" "$scratch/exec_us"
  # The pid of nlockd itself (the shell execs it), not of the namespace wrapper; and the time
  # just before that exec (after ip netns exec, unshare and the bind mount, which are the
  # bench's and took 30-70 ms on the loaded machine).
  ip netns exec "$tag-srv" unshare --mount --propagation private \
    sh -c 'mount --bind "$0" /run && echo $$ >"$1" && date +%s%6N >"$2" && shift 2 &&
      exec "$@"' "$scratch/run-srv" "$scratch/nlockd.pid" "$scratch/exec_us" \
    "$binary" --listen 0.0.0.0:4045 --store "sqlite:$store" \
    --admin-listen off --log-level debug "$@" >"$scratch/nlockd.log" 2>&1 &
  wrapper_pid=$!
  for _ in $(seq 400); do [[ -s "$scratch/exec_us" ]] && break; sleep 0.005; done
  nlockd_pid=$(cat "$scratch/nlockd.pid")
  exec_us=$(cat "$scratch/exec_us")
  echo "  (wrapper before exec: $(ms "$wrapper_us" "$exec_us") ms)" >&2
}
await_registered() {
  for _ in $(seq 400); do
    grep -q "registered .* with rpcbind" "$scratch/nlockd.log" && return 0
    sleep 0.01
  done
  echo "nlockd did not register" >&2
  cat "$scratch/nlockd.log" >&2
  exit 1
}
stop_nlockd() {
  kill "$nlockd_pid" 2>/dev/null || true
  wait "$wrapper_pid" 2>/dev/null || true
  while kill -0 "$nlockd_pid" 2>/dev/null; do sleep 0.01; done
  nlockd_pid=""
}
# log_ms PATTERN: ms from exec to the first log line matching PATTERN ("-" if none).
log_ms() {
  local line stamp
  line=$(grep -m1 -E "$1" "$scratch/nlockd.log" || true)
  [[ -n "$line" ]] || { echo "-"; return; }
  stamp=$(date -d "${line%% *}" +%s%6N)
  ms "$exec_us" "$stamp"
}

# log_trace LABEL: with NLOCKD_RECOVERY_TRACE=1, nlockd's log lines with ms from exec, to stderr.
log_trace() {
  [[ -n "${NLOCKD_RECOVERY_TRACE:-}" ]] || return 0
  local line stamp
  echo "--- $1: nlockd log, ms from exec" >&2
  while IFS= read -r line; do
    stamp=$(date -d "${line%% *}" +%s%6N 2>/dev/null) || { echo "        $line" >&2; continue; }
    printf '%8s %s\n' "$(ms "$exec_us" "$stamp")" "${line#* }" >&2
  done <"$scratch/nlockd.log"
}

fresh() {
  local binary=$1 label=$2 out
  rm -f "$scratch"/fresh.db*
  on cl1 "$probe" --server 10.77.1.1 --caller fresh-probe --fh "fresh-$RANDOM" \
    >"$scratch/probe.out" &
  local probe_pid=$!
  sleep 0.05  # the probe is polling rpcbind before nlockd starts
  start_nlockd "$binary" "$scratch/fresh.db"
  wait "$probe_pid" || true
  out=$(cat "$scratch/probe.out")
  local granted=${out#*at_us=}
  granted=${granted%% *}
  local port_at=${out#*port_at_us=}
  port_at=${port_at%% *}
  if [[ "$out" == granted* ]]; then
    echo "fresh $label: first lock $(ms "$exec_us" "$granted") ms (port known at" \
      "$(ms "$exec_us" "$port_at") ms; log: listening $(log_ms 'nlockd listening') ms," \
      "registered $(log_ms 'registered .* with rpcbind') ms, monitoring $(log_ms 'monitoring host') ms)"
  else
    echo "fresh $label: $out"
  fi
  log_trace "fresh $label"
  stop_nlockd
}

restart() {
  local binary=$1 label=$2 out i
  rm -f "$scratch"/restart.db*
  start_nlockd "$binary" "$scratch/restart.db"
  await_registered
  for i in $(seq 10); do
    on cl1 "$nlm_client" --server 10.77.1.1 \
      "lock fh=held-$i caller=client1 svid=1 oh=1@client1 state=1 offset=0 length=10" >/dev/null
  done
  kill -9 "$nlockd_pid"
  wait "$wrapper_pid" 2>/dev/null || true
  on cl2 "$probe" --server 10.77.2.1 --caller client2 --fh "untouched-$RANDOM" \
    >"$scratch/probe.out" &
  local probe_pid=$!
  sleep 0.05
  start_nlockd "$binary" "$scratch/restart.db"
  wait "$probe_pid" || true
  out=$(cat "$scratch/probe.out")
  local granted=${out#*at_us=}
  granted=${granted%% *}
  if [[ "$out" == granted* ]]; then
    echo "restart $label: first new lock $(ms "$exec_us" "$granted") ms (log: listening" \
      "$(log_ms 'nlockd listening') ms, registered $(log_ms 'registered .* with rpcbind') ms;" \
      "${out#* getports=})"
  else
    echo "restart $label: $out"
  fi
  log_trace "restart $label"
  stop_nlockd
}

reboot() {
  local binary=$1 label=$2 state line sent granted
  rm -f "$scratch"/reboot.db*
  start_nlockd "$binary" "$scratch/reboot.db"
  await_registered
  coproc callbacks { on cl2 "$callback_server"; }
  read -r -t 10 line <&"${callbacks[0]}"  # ready udp=... tcp=...
  for state in 3 5 7; do
    on cl1 "$nlm_client" --server 10.77.1.1 \
      "lock fh=f caller=client1 svid=1 oh=1@client1 state=$((state - 2)) offset=0 length=10" \
      >/dev/null
    on cl2 "$nlm_client" --server 10.77.2.1 \
      "lock fh=f caller=client2 svid=2 oh=2@client2 offset=0 length=10 block=1" >/dev/null
    local dir=$scratch/statd-cl1-$state
    mkdir -p "$dir/sm" "$dir/sm.bak"
    printf '0100007f 000186b5 00000004 00000010 %s 10.77.1.1 client1\n' \
      "00000000000000000000000000000000" >"$dir/sm/10.77.1.1"
    printf "$(printf '\\x%02x' "$state")\\x00\\x00\\x00" >"$dir/state"
    sent=$(now_us)
    on cl1 sm-notify -f -d -n -P "$dir" -m 1 >/dev/null 2>&1 &
    local notify_pid=$!
    granted=""
    while read -r -t 10 line <&"${callbacks[0]}"; do
      if [[ "$line" == GRANTED* ]]; then granted=$(now_us); break; fi
    done
    wait "$notify_pid" || true
    if [[ -n "$granted" ]]; then
      echo "reboot $label: state $state sm-notify exec -> GRANTED $(ms "$sent" "$granted") ms"
    else
      echo "reboot $label: state $state no GRANTED within 10 s"
    fi
    on cl2 "$nlm_client" --server 10.77.2.1 \
      "unlock fh=f caller=client2 svid=2 oh=2@client2 offset=0 length=10" >/dev/null
  done
  grep -E "SM_NOTIFY|rebooted|GRANTED|granted" "$scratch/nlockd.log" | tail -n 6 >&2 || true
  kill "$callbacks_PID" 2>/dev/null || true
  wait "$callbacks_PID" 2>/dev/null || true
  stop_nlockd
}

for round in $(seq "$rounds"); do
  echo "== round $round"
  for i in "${!binaries[@]}"; do fresh "${binaries[$i]}" "nlockd$i"; done
  for i in "${!binaries[@]}"; do restart "${binaries[$i]}" "nlockd$i"; done
  for i in "${!binaries[@]}"; do reboot "${binaries[$i]}" "nlockd$i"; done
done
