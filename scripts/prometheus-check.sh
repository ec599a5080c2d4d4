#!/usr/bin/env bash
# Scrape a real `cachelens serve --demo` with a real Prometheus (Debian's `prometheus` package:
# `apt-get install prometheus`), both on 127.0.0.1, with the read token as a bearer token as
# README's "Metrics" section says; then ask Prometheus for the series and print them next to
# the JSON API's figures. Also lints the exposition with `promtool check metrics` and the
# Grafana dashboard's queries with `promtool check rules`. Prints; exits non-zero on a failure.
#
#   scripts/prometheus-check.sh [path/to/cachelens]   (default: target/debug/cachelens)
set -euo pipefail
BIN=${1:-${CARGO_TARGET_DIR:-target}/debug/cachelens}
command -v prometheus >/dev/null && command -v promtool >/dev/null || { echo "needs prometheus and promtool (apt-get install prometheus)"; exit 2; }
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
CL_PORT=$(free_port); PROM_PORT=$(free_port)
TOKEN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf %s "$TOKEN" > "$WORK/token"; chmod 600 "$WORK/token"

"$BIN" serve --demo --db "$WORK/demo.db" --listen "127.0.0.1:$CL_PORT" --read-token "$TOKEN" > "$WORK/serve.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 120); do curl -sf -o /dev/null -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$CL_PORT/api/v1/machines" && break; sleep 0.5; done

echo "== without the token: HTTP $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$CL_PORT/metrics")"
curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$CL_PORT/metrics" > "$WORK/metrics.txt"
echo "== promtool check metrics (lint of the exposition):"
promtool check metrics < "$WORK/metrics.txt" && echo "   clean"

echo "== promtool check rules (the Grafana dashboard's queries):"
python3 - "$(dirname "$0")/../docs/grafana-cachelens.json" "$WORK/rules.yml" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
exprs.append(d["templating"]["list"][1]["query"]["query"].replace("label_values(", "group by (machine) (").replace(", machine)", ")"))
with open(sys.argv[2], "w") as f:
    f.write("groups:\n- name: dashboard\n  rules:\n")
    for i, e in enumerate(exprs):
        e = e.replace("$window", "1h").replace("$__rate_interval", "1m").replace("$machine", ".*")
        f.write(f"  - record: dashboard:q{i}\n    expr: {json.dumps(e)}\n")
PY
promtool check rules "$WORK/rules.yml"

cat > "$WORK/prometheus.yml" <<YML
global: { scrape_interval: 1s }
scrape_configs:
  - job_name: cachelens
    authorization: { credentials_file: $WORK/token }
    static_configs: [ { targets: ["127.0.0.1:$CL_PORT"] } ]
YML
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$PROM_PORT" > "$WORK/prom.log" 2>&1 &
PIDS+=($!)
q() { curl -sf "http://127.0.0.1:$PROM_PORT/api/v1/query" --data-urlencode "query=$1"; }
for _ in $(seq 60); do
  [ "$(q 'up{job="cachelens"}' 2>/dev/null | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null)" = 1 ] && break
  sleep 1
done
echo "== Prometheus scraped it: up=$(q 'up{job="cachelens"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')"
echo "== per machine, Prometheus vs /api/v1 (entries, bytes, hits, misses, compile s):"
curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$CL_PORT/api/v1/machines?limit=10000" > "$WORK/machines.json"
for m in $(python3 -c 'import json,sys; print(" ".join(x["name"] for x in json.load(open(sys.argv[1]))))' "$WORK/machines.json"); do
  curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$CL_PORT/api/v1/history?machine=$m&bucket=day&limit=10000" > "$WORK/h.json"
  api=$(python3 -c '
import json, sys
m = [x for x in json.load(open(sys.argv[1])) if x["name"] == sys.argv[3]][0]
h = json.load(open(sys.argv[2]))
s = lambda k: sum(p[k] or 0 for p in h)
f = lambda v: int(v) if float(v).is_integer() else round(v, 3)
print(*[f(v) for v in (m["entries"], m["bytes"], s("hits"), s("misses"), s("compile_ms") / 1000)])' "$WORK/machines.json" "$WORK/h.json" "$m")
  prom=""
  for s in cachelens_entries cachelens_bytes cachelens_cache_hits_total cachelens_cache_misses_total cachelens_compile_seconds_total; do
    prom+="$(q "$s{machine=\"$m\"}" | python3 -c 'import json,sys; v=float(json.load(sys.stdin)["data"]["result"][0]["value"][1]); print(int(v) if v.is_integer() else round(v, 3))') "
  done
  printf '   %-12s prometheus: %s| api: %s\n' "$m" "$prom" "$api"
  [ "${prom% }" = "$api" ] || { echo "   MISMATCH"; exit 1; }
done
echo "== route histogram series in Prometheus: $(q 'count(cachelens_http_request_duration_seconds_count)' | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')"
echo "ok"
