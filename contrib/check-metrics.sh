#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the shipped Prometheus and Grafana files against nlockd:
# - promtool accepts the alert rules, and their unit tests (nlockd-alerts-test.yml) pass;
# - promtool accepts the example scrape configuration (its file paths pointed at scratch files);
# - every metric the dashboard and the rules name is one a freshly started nlockd exports on its
#   first scrape, before any call (the request series exist from the start), except the HA
#   gauges, exported only with ha = true, which must be names admin/metrics.cpp registers.
# Usage: contrib/check-metrics.sh NLOCKD_BINARY
set -euo pipefail
nlockd=$1
contrib="$(cd "$(dirname "$0")" && pwd)"
rules="$contrib/prometheus/nlockd-alerts.yml"
dashboard="$contrib/grafana/nlockd-dashboard.json"
metrics_source="$contrib/../src/admin/metrics.cpp"

scratch=$(mktemp -d)
pid=
trap '[[ -n "$pid" ]] && kill $pid 2>/dev/null; rm -rf "$scratch"' EXIT

promtool check rules "$rules"
(cd "$contrib/prometheus" && promtool test rules nlockd-alerts-test.yml)
touch "$scratch/token"
sed -e "s|/usr/share/nlockd/prometheus/nlockd-alerts.yml|$rules|" \
  -e "s|/etc/prometheus/nlockd-token|$scratch/token|" \
  "$contrib/prometheus/prometheus-scrape.yml" >"$scratch/prometheus.yml"
promtool check config "$scratch/prometheus.yml"

log="$scratch/nlockd.log"
"$nlockd" --store memory: --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 \
  --rpcbind-register false --grace 0 >"$log" 2>&1 &
pid=$!
# The admin server starts once the service serves: its line comes after "nlockd listening".
for _ in $(seq 300); do
  grep -q "nlockd admin listening" "$log" && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
admin_port=$(sed -n 's/.*nlockd admin listening" address=[^ ]* port=\([0-9]*\).*/\1/p' "$log")
curl -fsS "http://127.0.0.1:$admin_port/metrics" | sed -n 's/^# TYPE \([a-z_:]*\) .*/\1/p' |
  sort -u >"$scratch/exported"
# The HA gauges, registered when the service runs with ha.
grep -o 'Name("nlockd_ha_[a-z_]*")' "$metrics_source" | sed 's/Name("\(.*\)")/\1/' >>"$scratch/exported"
sort -u -o "$scratch/exported" "$scratch/exported"

# Metric names in PromQL expressions: nlockd's prefixes, less histogram and summary suffixes.
{
  grep -o '"expr": *"[^"]*' "$dashboard" || true
  grep -E '^\s*expr:|^\s+histogram_quantile|^\s+[a-z_(]+[ a-z_(]*[{(]|^\s+[<>=!]|^\s+and ' "$rules" || true
} | grep -oE '\b(nlm|nsm|rpc|store|nlockd|process)_[a-z_]+' | sed -E 's/_(bucket|sum|count)$//' |
  sort -u >"$scratch/named"
[[ -s "$scratch/named" ]] || { echo "check-metrics: no metric names found" >&2; exit 1; }

missing=$(comm -23 "$scratch/named" "$scratch/exported")
if [[ -n "$missing" ]]; then
  echo "check-metrics: the dashboard or the rules name metrics nlockd does not export:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "check-metrics: $(wc -l <"$scratch/named") metric names, all exported from the first scrape"
