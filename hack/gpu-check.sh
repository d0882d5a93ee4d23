#!/usr/bin/env bash
# hack/gpu-check.sh: prove gpufleet on a machine with NVIDIA GPUs, in a few minutes.
#
#   hack/gpu-check.sh                 build gpufleet (and its CUDA probe) here, then check
#   hack/gpu-check.sh --bin PATH      use a built gpufleet binary (PATH may be .gz); a gpufleet-cuda-probe
#                                     beside it is used too (or --probe PATH)
#   hack/gpu-check.sh --simulate      the CPU half: the same checks against simulated GPUs, where the
#                                     machine has none (what needs CUDA is skipped)
#
# It starts a server with its default isolation on a scratch data directory and prints one line per
# check (PASS, FAIL or SKIP) and a summary: the node's isolation level first (as root, anything short
# of per-team users with Landlock fails: such a kernel proves nothing about the sandbox), the node
# Ready with real evidence (CUDA started in the sandbox), a CUDA job naming its device, two 0.25
# workloads of two teams on one GPU at once, a fraction over its memory share stopped as
# GPUMemoryLimitExceeded, a DataLoader with 4 workers, a Triton kernel and torch.compile in the sandbox,
# a memory limit (OOMKilled) and a network apart from other teams', an acceptance card measuring bf16
# TFLOP/s, usage per workload. PyTorch is used where some python3 of
# the system's (not a user's home) imports torch; else the CUDA job is nvidia-smi in the sandbox.
#
# Exit status: 0 when every check passed, 1 when one failed, 2 (printing "no NVIDIA GPU") where
# nvidia-smi -L finds none. It leaves no process behind. Needs: bash, curl, python3 (to read JSON).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN="" PROBE="" SIMULATE=0
while (($#)); do
	case $1 in
	--bin) BIN=$2; shift 2 ;;
	--probe) PROBE=$2; shift 2 ;;
	--simulate) SIMULATE=1; shift ;;
	-h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
	esac
done

started=$(date +%s)
PASSED=0 FAILED=0 SKIPPED=0
at() { printf '%4ds' $(($(date +%s) - started)); }
pass() { PASSED=$((PASSED + 1)); printf 'PASS  %s  %-14s %s\n' "$(at)" "$1" "${2:-}"; }
fail() { FAILED=$((FAILED + 1)); printf 'FAIL  %s  %-14s %s\n' "$(at)" "$1" "${2:-}"; }
skip() { SKIPPED=$((SKIPPED + 1)); printf 'SKIP  %s  %-14s %s\n' "$(at)" "$1" "${2:-}"; }
say() { printf '      %s\n' "$*"; }

# JSON from the CLI, read with python3: j FILE EXPR (EXPR in Python, the document is d).
j() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); r=eval(sys.argv[2]); print("" if r is None else r)' "$1" "$2" 2>/dev/null; }

if ((!SIMULATE)); then
	if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
		echo "no NVIDIA GPU (nvidia-smi -L finds none); hack/gpu-check.sh --simulate checks the CPU half"
		exit 2
	fi
fi
command -v python3 >/dev/null || { echo "gpu-check: python3 is needed to read the API's JSON" >&2; exit 1; }
command -v curl >/dev/null || { echo "gpu-check: curl is needed" >&2; exit 1; }

SCRATCH=$(mktemp -d /tmp/gpufleet-check.XXXXXX)
chmod 755 "$SCRATCH"
DATA=$SCRATCH/data
mkdir -p "$SCRATCH/bin"
SERVER_PID=""
cleanup() {
	if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
		# Every workload ends before the server does: supervisors outlive a server.
		for id in $(gf get workloads -o json 2>/dev/null | python3 -c 'import json,sys
for w in json.load(sys.stdin)["items"]:
    if w["status"]["phase"] in ("Pending","Running"): print(w["id"])' 2>/dev/null); do
			gf cancel "$id" >/dev/null 2>&1
		done
		for _ in $(seq 100); do
			gf get workloads --phase Running -o json 2>/dev/null | grep -q '"id"' || break
			sleep 0.1
		done
		kill -TERM "$SERVER_PID" 2>/dev/null
		wait "$SERVER_PID" 2>/dev/null
	fi
	# Anything still running from the scratch directory (a supervisor, a task) goes too.
	pkill -KILL -f "$SCRATCH" 2>/dev/null
	rm -rf "$SCRATCH"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# 1. The binaries: the server and, beside it, the CUDA probe.
if [[ -n $BIN ]]; then
	case $BIN in
	*.gz) gunzip -c "$BIN" >"$SCRATCH/bin/gpufleet" ;;
	*) cp "$BIN" "$SCRATCH/bin/gpufleet" ;;
	esac
	[[ -z $PROBE && -x $(dirname "$BIN")/gpufleet-cuda-probe ]] && PROBE=$(dirname "$BIN")/gpufleet-cuda-probe
	[[ -z $PROBE && -f $(dirname "$BIN")/gpufleet-cuda-probe.gz ]] && PROBE=$(dirname "$BIN")/gpufleet-cuda-probe.gz
else
	command -v go >/dev/null || { echo "gpu-check: no Go toolchain here: give a built binary with --bin PATH" >&2; exit 1; }
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$SCRATCH/bin/gpufleet" ./cmd/gpufleet) || { fail build "go build failed"; exit 1; }
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$SCRATCH/bin/gpufleet-cuda-probe" ./cmd/gpufleet-cuda-probe) || fail build "the CUDA probe did not build"
fi
if [[ -n $PROBE ]]; then
	case $PROBE in
	*.gz) gunzip -c "$PROBE" >"$SCRATCH/bin/gpufleet-cuda-probe" ;;
	*) cp "$PROBE" "$SCRATCH/bin/gpufleet-cuda-probe" ;;
	esac
fi
chmod 755 "$SCRATCH/bin"/*
GF=$SCRATCH/bin/gpufleet
gf() { "$GF" "$@"; }

# A python3 with PyTorch that a workload's user can run: the system's, never one under a home.
PY="" PYDIR=""
if ((!SIMULATE)); then
	for p in /usr/bin/python3 /usr/local/bin/python3 /opt/conda/bin/python3 /opt/venv/bin/python3 /opt/pytorch/bin/python3; do
		if [[ -x $p ]] && "$p" -c 'import torch' 2>/dev/null; then PY=$p PYDIR=$(dirname "$p"); break; fi
	done
fi

# 2. The server, with its default isolation.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
CONFIG=$SCRATCH/config.yaml
: >"$CONFIG"
if [[ -n $PYDIR ]]; then
	printf 'local:\n  path: "%s:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"\n' "$PYDIR" >>"$CONFIG"
fi
args=(server --data "$DATA" --addr "127.0.0.1:$PORT" --config "$CONFIG" --node-name gpu-check)
((SIMULATE)) && args+=(--fake-gpus 1xH200-141GB)
"$GF" "${args[@]}" >"$SCRATCH/server.log" 2>&1 &
SERVER_PID=$!
export GPUFLEET_ADDR=127.0.0.1:$PORT
for _ in $(seq 300); do
	curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && [[ -s $DATA/admin-token ]] && break
	kill -0 "$SERVER_PID" 2>/dev/null || break
	sleep 0.1
done
if ! curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; then
	fail server "did not start; its log:"; tail -20 "$SCRATCH/server.log"; exit 1
fi
GPUFLEET_TOKEN=$(cat "$DATA/admin-token")
export GPUFLEET_TOKEN

# The node, once qualified.
NODE=gpu-check
state=""
for _ in $(seq 600); do
	gf get nodes -o json >"$SCRATCH/nodes.json" 2>/dev/null
	state=$(j "$SCRATCH/nodes.json" 'next(n["state"] for n in d["items"] if n["name"]=="gpu-check")')
	[[ $state == Ready || $state == Failed ]] && break
	sleep 0.2
done
ISOLATION=$(j "$SCRATCH/nodes.json" 'next(n.get("isolation","") for n in d["items"] if n["name"]=="gpu-check")')
GPUS=$(j "$SCRATCH/nodes.json" 'next(len(n["gpus"]) for n in d["items"] if n["name"]=="gpu-check")')
MODEL=$(j "$SCRATCH/nodes.json" 'next(n["gpus"][0]["model"] for n in d["items"] if n["name"]=="gpu-check")')
echo "gpufleet $(gf version 2>/dev/null | head -1) on $(uname -srm)"
((SIMULATE)) || echo "driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1), $(nvidia-smi | grep -o 'CUDA Version: [0-9.]*' | head -1), $GPUS x $MODEL"
echo "isolation: $ISOLATION"
if [[ $(id -u) == 0 ]] && ! [[ $ISOLATION == *"per-team users"* && $ISOLATION == *Landlock* ]]; then
	fail isolation "the server runs as root but confines tasks with: $ISOLATION"
else
	pass isolation "$ISOLATION"
fi

# 3. Node Ready, on real evidence: CUDA starts in the sandbox.
gf get evidence --node "$NODE" -o json >"$SCRATCH/evidence.json" 2>/dev/null
cuda=$(j "$SCRATCH/evidence.json" 'next((e["result"]+": "+e.get("message","")) for e in reversed(d["items"]) if e.get("check")=="cuda-init")')
simulated=$(j "$SCRATCH/evidence.json" 'sum(1 for e in d["items"] if e.get("simulated"))')
if [[ $state != Ready ]]; then
	fail node-ready "node $state: $(j "$SCRATCH/nodes.json" 'next(n.get("stateReason","")+": "+n.get("stateMessage","") for n in d["items"] if n["name"]=="gpu-check")')"
elif ((SIMULATE)); then
	pass node-ready "simulated GPUs; CUDA probe: $cuda"
elif [[ $simulated != 0 || $cuda != Pass* ]]; then
	fail node-ready "evidence simulated: $simulated records; CUDA in the sandbox: $cuda"
else
	pass node-ready "$cuda"
fi

gf create team check-a >/dev/null 2>&1
gf create team check-b >/dev/null 2>&1

# submit TEAM NAME ARGS... prints the workload's ID.
submit() { local team=$1 name=$2; shift 2; gf submit --team "$team" --name "$name" --grace-period 2s "$@"; }
# status ID EXPR: a field of the workload's JSON.
status() { gf get workload "$1" -o json >"$SCRATCH/w.json" 2>/dev/null && j "$SCRATCH/w.json" "$2"; }
# wait_phase ID SECONDS PHASE...: until the workload reaches one of the phases.
wait_phase() {
	local id=$1 secs=$2 p; shift 2
	for _ in $(seq $((secs * 5))); do
		p=$(status "$id" 'd["status"]["phase"]')
		for want in "$@"; do [[ $p == "$want" ]] && return 0; done
		sleep 0.2
	done
	return 1
}
logs() { gf logs "$1" 2>/dev/null; }

# 4. A CUDA job names its device.
if [[ -n $PY ]]; then
	id=$(submit check-a cuda --gpus 1 -- python3 -c 'import torch; print("DEVICE", torch.cuda.get_device_name(0))')
	if wait_phase "$id" 120 Succeeded Failed && logs "$id" | grep -q "^DEVICE $MODEL"; then
		pass cuda-job "PyTorch in the sandbox: $(logs "$id" | grep '^DEVICE' | head -1)"
	else
		fail cuda-job "$(status "$id" 'd["status"]["phase"]+" "+d["status"]["reason"]+": "+d["status"]["message"]'); log: $(logs "$id" | tail -3 | tr '\n' ' ')"
	fi
elif ((!SIMULATE)); then
	id=$(submit check-a cuda --gpus 1 -- nvidia-smi --query-gpu=name --format=csv,noheader)
	if wait_phase "$id" 60 Succeeded Failed && logs "$id" | grep -qx "$MODEL"; then
		pass cuda-job "no PyTorch here: nvidia-smi in the sandbox sees $MODEL"
	else
		fail cuda-job "$(logs "$id" | tail -3 | tr '\n' ' ')"
	fi
else
	skip cuda-job "simulated GPUs"
fi

# 5. Two 0.25 workloads of two teams on one GPU at once.
if [[ -n $PY ]]; then
	hold='import torch, time; x = torch.ones(1 << 28, device="cuda"); print("HOLDING", flush=True); time.sleep(120)'
	a=$(submit check-a share-a --gpus 0.25 -- python3 -c "$hold")
	b=$(submit check-b share-b --gpus 0.25 -- python3 -c "$hold")
else
	hold='echo "utilization=0.4 memoryMiB=2048" > "$GPUFLEET_SIM_USAGE_FILE"; echo HOLDING; sleep 120'
	a=$(submit check-a share-a --gpus 0.25 -- sh -c "$hold")
	b=$(submit check-b share-b --gpus 0.25 -- sh -c "$hold")
fi
both=""
for _ in $(seq 600); do
	if logs "$a" | grep -q HOLDING && logs "$b" | grep -q HOLDING; then both=yes; break; fi
	[[ $(status "$a" 'd["status"]["phase"]') == Failed || $(status "$b" 'd["status"]["phase"]') == Failed ]] && break
	sleep 0.2
done
ga=$(status "$a" 'd["status"]["placement"][0]["gpuIndex"]')
gb=$(status "$b" 'd["status"]["placement"][0]["gpuIndex"]')
if [[ -n $both && -n $ga && $ga == "$gb" ]]; then
	pass share "teams check-a and check-b each hold 0.25 of GPU $ga at once"
else
	fail share "both running: ${both:-no}; GPUs ${ga:-?} and ${gb:-?}; $(logs "$a" | tail -2 | tr '\n' ' ')"
fi

# 6. Usage per workload, while the two hold their share.
usage=""
for _ in $(seq 300); do
	usage=$(status "$a" '(lambda u: "%s %s" % (u["gpuUtilization"], u["gpuMemoryUsedMiB"]) if u else None)(d["status"].get("usage"))')
	[[ -n $usage && ${usage#* } != 0 ]] && break
	sleep 0.2
done
if [[ -n $usage && ${usage#* } != 0 ]]; then
	pass usage "share-a: GPU utilisation ${usage% *}, GPU memory ${usage#* } MiB"
else
	fail usage "no usage sample for share-a (${usage:-none})"
fi
gf cancel "$a" "$b" >/dev/null 2>&1
wait_phase "$a" 30 Failed Cancelled Succeeded >/dev/null
wait_phase "$b" 30 Failed Cancelled Succeeded >/dev/null

# 7. A fraction over its memory share is stopped.
if [[ -n $PY ]]; then
	hog='import torch, os, time
limit = int(os.environ["GPUFLEET_GPU_MEMORY_LIMIT_MIB"])
x = torch.empty((limit + 4096) << 20, dtype=torch.uint8, device="cuda")
print("ALLOCATED", x.numel() >> 20, "MiB of a", limit, "MiB share", flush=True)
time.sleep(120)'
	id=$(submit check-a hog --gpus 0.25 -- python3 -c "$hog")
elif ((SIMULATE)); then
	id=$(submit check-a hog --gpus 0.25 -- sh -c 'echo "utilization=0.5 memoryMiB=$((GPUFLEET_GPU_MEMORY_LIMIT_MIB + 4096))" > "$GPUFLEET_SIM_USAGE_FILE"; sleep 120')
fi
if [[ -n ${id:-} ]] && { [[ -n $PY ]] || ((SIMULATE)); }; then
	wait_phase "$id" 90 Failed Succeeded >/dev/null
	reason=$(status "$id" 'd["status"]["reason"]')
	if [[ $reason == GPUMemoryLimitExceeded ]]; then
		pass memory-share "stopped: $(status "$id" 'd["status"]["message"]')"
	else
		fail memory-share "ended $(status "$id" 'd["status"]["phase"]') $reason, want GPUMemoryLimitExceeded"
	fi
else
	skip memory-share "no PyTorch to allocate GPU memory with"
fi

# 8. What ML stacks do in the sandbox: DataLoader workers, Triton, torch.compile.
if [[ -n $PY ]]; then
	stack='import torch, torch.utils.data as data
ds = data.TensorDataset(torch.randn(4096, 16))
n = sum(b[0].shape[0] for b in data.DataLoader(ds, batch_size=64, num_workers=4))
print("DATALOADER", n, flush=True)
try:
    import triton, triton.language as tl
    @triton.jit
    def add(x, y, out, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out + i, tl.load(x + i, mask=i < n) + tl.load(y + i, mask=i < n), mask=i < n)
    x = torch.rand(10000, device="cuda"); y = torch.rand(10000, device="cuda"); o = torch.empty_like(x)
    add[(triton.cdiv(10000, 1024),)](x, y, o, 10000, BLOCK=1024)
    print("TRITON", bool(torch.allclose(o, x + y)), flush=True)
except ImportError as e:
    print("TRITON missing", e, flush=True)
m = torch.compile(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).cuda())
print("COMPILE", tuple(m(torch.randn(32, 64, device="cuda")).shape), flush=True)'
	id=$(submit check-a ml-stack --gpus 1 --memory 8G -- python3 -c "$stack")
	wait_phase "$id" 240 Succeeded Failed >/dev/null
	out=$(logs "$id")
	[[ $out == *"DATALOADER 4096"* ]] && pass dataloader "4 workers read 4096 samples" || fail dataloader "$(echo "$out" | tail -3 | tr '\n' ' ')"
	if [[ $out == *"TRITON True"* ]]; then pass triton "a Triton kernel ran and added right"
	elif [[ $out == *"TRITON missing"* ]]; then skip triton "triton is not installed"
	else fail triton "$(echo "$out" | grep -i -m3 'triton\|error' | tr '\n' ' ')"; fi
	[[ $out == *"COMPILE (32, 8)"* ]] && pass torch-compile "a compiled model ran" || fail torch-compile "$(echo "$out" | tail -3 | tr '\n' ' ')"
else
	skip dataloader "no PyTorch"
	skip triton "no PyTorch"
	skip torch-compile "no PyTorch"
fi

# 9. Tenancy: a workload's memory limit, and its network apart from other teams'.
if [[ $ISOLATION == *cgroup* ]]; then
	id=$(submit check-a memory-limit --gpus 0.25 --memory 256Mi -- python3 -c 'b = bytearray(1 << 30); print(len(b))')
	wait_phase "$id" 60 Failed Succeeded >/dev/null
	reason=$(status "$id" 'd["status"]["reason"]')
	[[ $reason == OOMKilled ]] && pass memory-limit "$(status "$id" 'd["status"]["message"]')" ||
		fail memory-limit "ended $(status "$id" 'd["status"]["phase"]') $reason, want OOMKilled under --memory 256Mi"
else
	skip memory-limit "no cgroups here ($ISOLATION)"
fi
if [[ $ISOLATION == *"network namespaces"* ]]; then
	svc=$(submit check-b net-service --gpus 0.25 --kind service --port 8000 -- python3 -m http.server 8000)
	addr=""
	for _ in $(seq 150); do
		addr=$(status "$svc" 'd["status"].get("address") or None')
		[[ -n $addr ]] && break
		sleep 0.2
	done
	probe='import socket, sys, time
for i in range(50):
    try:
        socket.create_connection((sys.argv[1], 8000), timeout=2).close(); print("REACHED"); break
    except ConnectionRefusedError: time.sleep(0.1)
    except OSError as e: print("REFUSED", e); break
else: print("NOTHING")'
	same=$(submit check-b net-friend --gpus 0.25 -- python3 -c "$probe" "$addr")
	other=$(submit check-a net-stranger --gpus 0.25 -- python3 -c "$probe" "$addr")
	wait_phase "$same" 60 Succeeded Failed >/dev/null
	wait_phase "$other" 60 Succeeded Failed >/dev/null
	if [[ -n $addr ]] && logs "$same" | grep -q REACHED && logs "$other" | grep -q REFUSED; then
		pass network "check-b's service at $addr: its team reaches it, check-a is refused"
	else
		fail network "address ${addr:-none}; same team: $(logs "$same" | tail -1); other team: $(logs "$other" | tail -1)"
	fi
	gf cancel "$svc" >/dev/null 2>&1
else
	skip network "no network namespaces here ($ISOLATION)"
fi

# 10. An acceptance card whose smoke stage reports bf16 TFLOP/s.
if [[ -n $PY ]]; then
	cat >"$SCRATCH/card.yaml" <<'EOF'
kind: AcceptanceCard
name: gpu-check
team: check-a
stages:
  - name: smoke
    type: smoke
    workload:
      resources: {gpus: "1"}
      command:
        - python3
        - -c
        - |
          import json, os, time, torch
          a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
          for _ in range(3): a @ b
          torch.cuda.synchronize(); t = time.perf_counter(); n = 20
          for _ in range(n): a @ b
          torch.cuda.synchronize(); s = time.perf_counter() - t
          tflops = 2 * 8192**3 * n / s / 1e12
          print("bf16 TFLOP/s", round(tflops, 1))
          open(os.environ["GPUFLEET_METRICS_FILE"], "a").write(json.dumps({"name": "bf16_tflops", "value": tflops, "unit": "TFLOP/s"}) + "\n")
    criteria: ["exit_code == 0", "bf16_tflops > 0"]
EOF
	if gf accept run "$SCRATCH/card.yaml" >"$SCRATCH/card.out" 2>&1; then
		pass acceptance "$(grep -o 'bf16_tflops[^,;]*' "$SCRATCH/card.out" | head -1)"
	else
		fail acceptance "$(tail -5 "$SCRATCH/card.out" | tr '\n' ' ')"
	fi
else
	cat >"$SCRATCH/card.yaml" <<'EOF'
kind: AcceptanceCard
name: gpu-check
team: check-a
stages:
  - name: smoke
    type: smoke
    workload: {resources: {gpus: "1"}, command: [sh, -c, "echo smoke"]}
    criteria: ["exit_code == 0"]
EOF
	if gf accept run "$SCRATCH/card.yaml" >"$SCRATCH/card.out" 2>&1; then
		pass acceptance "a smoke stage passed (no PyTorch: no TFLOP/s measured)"
	else
		fail acceptance "$(tail -5 "$SCRATCH/card.out" | tr '\n' ' ')"
	fi
fi

echo "summary: $PASSED passed, $FAILED failed, $SKIPPED skipped in $(($(date +%s) - started)) s"
((FAILED == 0))
