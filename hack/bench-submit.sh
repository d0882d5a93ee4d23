#!/usr/bin/env bash
# Runs BenchmarkSubmit (internal/app) ROUNDS times, each run SQLite then
# PostgreSQL in one process (a durable PostgreSQL of the benchmark's own:
# fsync and synchronous_commit on), and prints for each store the min /
# median / max of its figures over the runs, and the ratios PostgreSQL over
# SQLite taken run by run (rate and p99), min / median / max. On a shared
# machine compare only figures measured side by side like this.
#
#   hack/bench-submit.sh [ROUNDS (5)] [SUBMITS (8000)] [extra test flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
submits=${2:-8000}
shift $(( $# > 2 ? 2 : $# ))
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/app.test" ./internal/app
for i in $(seq "$rounds"); do
  (cd internal/app && "$tmp/app.test" -test.run '^$' -test.bench '^BenchmarkSubmit$' \
    -test.benchtime "${submits}x" -test.timeout 10m "$@" 2>/dev/null) | grep '^BenchmarkSubmit/' >>"$tmp/out" || true
done
awk '
function sorted(a, n,   i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } }
function mmm(key, n,   a, i) { for (i = 1; i <= n; i++) a[i] = v[key, i]; sorted(a, n); return sprintf("%.4g / %.4g / %.4g", a[1], a[int((n+1)/2)], a[n]) }
{
  store = ($1 ~ /postgres/) ? "postgres" : "sqlite"
  run[store]++
  for (i = 3; i < NF; i += 2) { m = $(i+1); v[store "|" m, run[store]] = $i; metric[m] = 1 }
}
END {
  for (s = 1; s <= 2; s++) {
    store = (s == 1) ? "sqlite" : "postgres"
    printf "%s (%d runs, min / median / max):\n", store, run[store]
    for (m in metric) if ((store "|" m, 1) in v) printf "  %-24s %s\n", m, mmm(store "|" m, run[store])
  }
  n = (run["sqlite"] < run["postgres"]) ? run["sqlite"] : run["postgres"]
  for (i = 1; i <= n; i++) {
    v["rate", i] = v["postgres|submits/s", i] / v["sqlite|submits/s", i]
    v["p99", i] = v["postgres|p99-ms", i] / v["sqlite|p99-ms", i]
  }
  printf "postgres / sqlite, run by run (%d pairs, min / median / max):\n", n
  printf "  %-24s %s\n", "submits/s", mmm("rate", n)
  printf "  %-24s %s\n", "p99-ms", mmm("p99", n)
}' "$tmp/out"
