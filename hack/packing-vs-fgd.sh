#!/usr/bin/env bash
# hack/packing-vs-fgd.sh: gpufleet against the FGD authors' published figures, on their own sequences.
#
#   hack/packing-vs-fgd.sh [WORKLOAD...] [SEEDS]
#
# WORKLOAD is the NAME of openb_pod_list_NAME.csv (default: the 17 workloads of
# internal/sim/testdata/fgd-authors-alloc.csv); SEEDS as --seed takes them, 42-51 or 42,45
# (default 42-51). For each workload it runs, with the gpufleet built from this tree,
#
#   gpufleet sim packing --order authors --policy gpufleet,bestfit --seed SEEDS --report 1 -o json
#
# (the seeds and policies in parallel, as the CLI runs them) and prints one line per workload and
# seed: gpufleet's and bestfit's allocation at 100% arrived GPU demand, computed as the authors
# compute theirs (authorsAllocation: the mean over the pods whose arrival rounds to 100%), their
# published FGD and BestFit for the same workload and seed, the ratio of unallocated capacity
# (100 − gpufleet) / (100 − FGD), the sequence's bound at 100% (no policy can allocate more) and the
# same ratio for it. On the authors' sequence bestfit is their BestFit, so its column should equal
# theirs; the last lines count where it does, and give the median and max of the ratio and how many
# cases are at or below 0.75.
#
# Environment: T, the folder of the openb CSVs (default ../shared/traces/alibaba-gpu-v2023 from the
# repository root); PARALLEL, runs at a time (default: the CLI's, one per core). Progress goes to
# stderr. About 3 s a gpufleet run on 2 cores: 17 workloads × 10 seeds take 5–10 minutes. Needs: bash,
# go, jq, awk, sort.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
FIXTURE=internal/sim/testdata/fgd-authors-alloc.csv
T=${T:-../shared/traces/alibaba-gpu-v2023}
NODES=$T/openb_node_list_gpu_node.csv

seeds=42-51
workloads=()
for a in "$@"; do
	if [[ $a =~ ^[0-9][0-9,-]*$ ]]; then
		seeds=$a
	else
		workloads+=("$a")
	fi
done
if ((${#workloads[@]} == 0)); then
	mapfile -t workloads < <(grep -v '^#' "$FIXTURE" | tail -n +2 | cut -d, -f1 | uniq)
fi
[[ -f $NODES ]] || { echo "packing-vs-fgd: no $NODES (set T to the folder of the openb CSVs)" >&2; exit 2; }
for w in "${workloads[@]}"; do
	[[ -f $T/openb_pod_list_$w.csv ]] || { echo "packing-vs-fgd: no $T/openb_pod_list_$w.csv" >&2; exit 2; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "packing-vs-fgd: building gpufleet from $ROOT" >&2
go build -o "$tmp/gpufleet" ./cmd/gpufleet
par=()
[[ -n ${PARALLEL:-} ]] && par=(--parallel "$PARALLEL")

printf '%-12s %4s  %8s %8s  %8s %8s  %6s  %6s %6s\n' workload seed gpufleet bestfit FGD BestFit ratio bound ratio
n=0
for w in "${workloads[@]}"; do
	n=$((n + 1))
	echo "packing-vs-fgd: [$n/${#workloads[@]}] $w, seeds $seeds" >&2
	"$tmp/gpufleet" sim packing --nodes "$NODES" --pods "$T/openb_pod_list_$w.csv" --order authors \
		--policy gpufleet,bestfit --seed "$seeds" --report 1 "${par[@]}" -o json >"$tmp/$w.json"
	# seed, gpufleet, bestfit, bound (%), one line a seed.
	jq -r '[.runs[] | {p: .policy, s: .seed, a: (.points[0].authorsAllocation // null), b: .points[0].bound}]
		| group_by(.s)[]
		| [.[0].s, (map(select(.p == "gpufleet"))[0].a * 100), (map(select(.p == "bestfit"))[0].a * 100), (.[0].b * 100)]
		| @tsv' "$tmp/$w.json" |
		awk -F'\t' -v w="$w" -v fix="$FIXTURE" -v out="$tmp/cases" '
			BEGIN {
				while ((getline line < fix) > 0) {
					if (line ~ /^#/ || line ~ /^workload,/) continue
					split(line, f, ",")
					fgd[f[1] "," f[2]] = f[4]; bf[f[1] "," f[2]] = f[8]
				}
			}
			{
				k = w "," $1
				if (!(k in fgd)) {
					printf "%-12s %4d  %8.2f %8.2f  %8s %8s  %6s  %6.2f %6s\n", w, $1, $2, $3, "-", "-", "-", $4, "-"
					next
				}
				r = (100 - $2) / (100 - fgd[k]); rb = (100 - $4) / (100 - fgd[k])
				same = sprintf("%.2f", $3) == sprintf("%.2f", bf[k])
				printf "%-12s %4d  %8.2f %8.2f  %8.2f %8.2f  %6.3f  %6.2f %6.3f%s\n", w, $1, $2, $3, fgd[k], bf[k], r, $4, rb, same ? "" : "  (bestfit ≠ BestFit)"
				printf "%.6f %d\n", r, same >> out
			}'
done

[[ -s $tmp/cases ]] || { echo "no case has a published figure"; exit 0; }
sort -n "$tmp/cases" | awk '
	{ r[NR] = $1; if ($1 <= 0.75) low++; if ($2) same++ }
	END {
		med = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
		printf "bestfit = their BestFit at 100%%: %d of %d cases\n", same, NR
		printf "ratio (100 - gpufleet) / (100 - FGD) over %d cases: median %.3f, max %.3f, %d at or below 0.75\n", NR, med, r[NR], low
	}'
