#!/usr/bin/env bash
# Replays the rapid seeds that once found a bug in the scheduler
# (internal/sched/testdata/failed-seeds.txt): the package's tests under
# each seed in turn. Plain `go test` takes a fresh seed every run; this is
# the fixed list beside it, which CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=$(sed -e 's/#.*//' internal/sched/testdata/failed-seeds.txt | tr -s ' \t' '\n' | grep -E '^[0-9]+$')
for s in $seeds; do
  echo "failed-seeds: internal/sched under -rapid.seed=$s"
  go test -count=1 ./internal/sched -rapid.seed="$s"
done
