#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# User-space instructions nlockd executes per call, NULL and then NLM4 LOCK+UNLOCK (C=8 P=8),
# counted by valgrind's callgrind with its counters zeroed before and dumped after each run: a
# figure that other load on the machine disturbs far less than time (only through batching:
# fewer calls per wake-up cost more instructions each). Kernel work is not counted.
# Usage: bench/ir_per_call.sh NLOCKD_BIN NLOCKD_LOAD_BIN PORT SECONDS
set -euo pipefail
bin=$1 load=$2 port=$3 seconds=$4
dir=$(mktemp -d)
cd "$dir"
valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" "$bin" --listen "127.0.0.1:$port" \
  --rpcbind-register=false --admin-listen off --grace 0 --store "sqlite:$dir/db" --log-level warn \
  2>"$dir/vg.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1200); do ss -ltnH | grep -q ":$port " && break; sleep 0.1; done
for workload in fixed nlm4-lock-unlock; do
  callgrind_control -z "$pid" >/dev/null 2>&1
  json=$("$load" --target "127.0.0.1:$port" --workload "$workload" --connections 8 --pipeline 8 \
    --duration "$seconds" --warmup 0 --json)
  callgrind_control -d "$workload" "$pid" >/dev/null 2>&1
  sleep 1
  calls=$(sed -n 's/.*"calls":\([0-9]*\).*/\1/p' <<<"$json")
  f=$(ls -t "$dir"/cg.* | head -1)
  ir=$(grep -m1 "^summary:\|^totals:" "$f" | awk '{print $2}')
  echo "$bin $workload calls=$calls instructions=$ir per call=$((ir / calls))"
done
