#!/bin/bash
# fork-storm.sh [GPUFLEET_BINARY]: the submit latency of one team, measured
# with curl over 300 submits, before and during a fork storm in another
# team's workload (as root, with isolation, simulated GPUs). Prints p50 and
# p99 of each run and the storm's process count against its pids.max. The
# submits select a pool that does not exist: they stay pending, so what is
# measured is the API's answer alone.
set -eu
BIN=${1:-gpufleet}
PORT=${PORT:-18555}
D=$(mktemp -d /tmp/fork-storm.XXXX)
"$BIN" server --demo --data "$D" --addr 127.0.0.1:$PORT >"$D/server.log" 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null; wait $SP 2>/dev/null; rm -rf "$D"' EXIT
for _ in $(seq 100); do
	[ -f "$D/admin-token" ] && curl -sf http://127.0.0.1:$PORT/healthz >/dev/null && break
	sleep 0.2
done
export GPUFLEET_ADDR=127.0.0.1:$PORT GPUFLEET_TOKEN=$(cat "$D/admin-token")
lat() {
	for _ in $(seq 300); do
		curl -s -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $GPUFLEET_TOKEN" -H 'Content-Type: application/json' \
			-d '{"team":"inference","resources":{"gpus":"0.01"},"nodeSelector":{"gpufleet.io/pool":"elsewhere"},"command":["true"]}' http://127.0.0.1:$PORT/api/v1/workloads
	done | sort -n | awk '{a[NR]=$1} END{printf "p50 %.1f ms, p99 %.1f ms (n=%d)\n", a[int(NR*0.5)]*1000, a[int(NR*0.99)]*1000, NR}'
}
echo "without the storm: $(lat)"
# Every child sleeps; the parent forks on, retrying as soon as fork fails.
ID=$("$BIN" submit --team research --gpus 1 -- python3 -c '
import os, time
while True:
    try:
        if os.fork() == 0:
            time.sleep(600)
            os._exit(0)
    except OSError:
        pass')
until "$BIN" logs "$ID" | grep -q "attempt 1 started"; do sleep 0.2; done
sleep 2 # the storm grows to its bound
echo "storm: workload $ID running"
echo "during the storm:  $(lat)"
for f in /sys/fs/cgroup/pids/gpufleet*/*/pids.current /sys/fs/cgroup/gpufleet*/*/pids.current; do
	case $f in */"$ID"-*) echo "storm: $(cat "$f") processes, pids.max $(cat "${f%/*}/pids.max")" ;; esac
done
"$BIN" cancel "$ID" >/dev/null
