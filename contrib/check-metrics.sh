#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the shipped Grafana dashboard and Prometheus alert rules: promtool accepts the rules,
# and every metric they name is one a running nlockd exports (its /metrics scraped after a few
# NLM and NSM calls, so that the per-procedure families exist).
# Usage: contrib/check-metrics.sh NLOCKD_BINARY NLM_CLIENT_BINARY NSM_CLIENT_BINARY
set -euo pipefail
nlockd=$1
nlm_client=$2
nsm_client=$3
contrib="$(cd "$(dirname "$0")" && pwd)"
rules="$contrib/prometheus/nlockd-alerts.yml"
dashboard="$contrib/grafana/nlockd-dashboard.json"

promtool check rules "$rules"

scratch=$(mktemp -d)
log="$scratch/nlockd.log"
"$nlockd" --store memory: --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --rpcbind-register false --grace 0 >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$scratch"' EXIT
for _ in $(seq 300); do
  grep -q "nlockd listening" "$log" && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
port=$(sed -n 's/.*nlockd listening address=[^ ]* port=\([0-9]*\).*/\1/p' "$log")
admin_port=$(sed -n 's/.*nlockd admin listening address=[^ ]* port=\([0-9]*\).*/\1/p' "$log")
"$nlm_client" --server 127.0.0.1 --port "$port" --tcp null \
  "lock fh=f caller=c oh=o svid=1 offset=0 length=1 exclusive=1" >/dev/null
"$nsm_client" --server 127.0.0.1 --port "$port" null >/dev/null
curl -fsS "http://127.0.0.1:$admin_port/metrics" | sed -n 's/^# TYPE \([a-z_:]*\) .*/\1/p' |
  sort -u >"$scratch/exported"

# Metric names in PromQL expressions: nlockd's prefixes, less histogram and summary suffixes.
{
  grep -o '"expr": *"[^"]*' "$dashboard" || true
  grep -E '^\s*expr:|^\s+histogram_quantile|^\s+[a-z_]+\{' "$rules" || true
} | grep -oE '\b(nlm|nsm|rpc|store|nlockd)_[a-z_]+' | sed -E 's/_(bucket|sum|count)$//' |
  sort -u >"$scratch/named"
[[ -s "$scratch/named" ]] || { echo "check-metrics: no metric names found" >&2; exit 1; }

missing=$(comm -23 "$scratch/named" "$scratch/exported")
if [[ -n "$missing" ]]; then
  echo "check-metrics: the dashboard or the rules name metrics nlockd does not export:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "check-metrics: $(wc -l <"$scratch/named") metric names, all exported"
