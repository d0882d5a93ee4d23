#!/usr/bin/env bash
# hack/k8s-testenv.sh: a real Kubernetes control plane on 127.0.0.1 for tests.
#
#   hack/k8s-testenv.sh build                     build (or reuse) the binaries
#   hack/k8s-testenv.sh up                        build if needed, start etcd, kube-apiserver,
#                                                 kube-scheduler, kube-controller-manager, KWOK
#   hack/k8s-testenv.sh nodes N [GPUS] [MODEL]    add N KWOK GPU nodes and wait until they are Ready
#   hack/k8s-testenv.sh status                    what runs, and the nodes
#   hack/k8s-testenv.sh kubectl ARGS...           the built kubectl against the test cluster
#   hack/k8s-testenv.sh env                       print exports (KUBECONFIG, PATH) for a shell
#   hack/k8s-testenv.sh down                      stop everything, remove .k8senv/ (not the binaries)
#
# Binaries are built from hack/k8s-tools (a Go module of its own, so the main module never depends on
# k8s.io/kubernetes) and cached in ${GPUFLEET_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-k8s}/<hash>/bin,
# where <hash> is taken from the tools module's go.sum (with go.mod and etcd/main.go). Nothing is downloaded
# except Go modules through the Go module proxy. Needs: go, openssl, curl. See hack/README.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$ROOT/hack/k8s-tools
STATE=${GPUFLEET_K8S_STATE:-$ROOT/.k8senv}
CACHE=${GPUFLEET_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-k8s}
K8S_VERSION=v1.37.2

# Ports (all on 127.0.0.1). GPUFLEET_K8S_PORT_OFFSET shifts every port, so two environments can coexist.
OFF=${GPUFLEET_K8S_PORT_OFFSET:-0}
APISERVER_PORT=$((6443 + OFF))
ETCD_CLIENT_PORT=$((2379 + OFF))
ETCD_PEER_PORT=$((2380 + OFF))
ETCD_METRICS_PORT=$((2381 + OFF))
SCHEDULER_PORT=$((10259 + OFF))
KCM_PORT=$((10257 + OFF))
KWOK_PORT=$((10247 + OFF))

COMPONENTS=(etcd kube-apiserver kube-scheduler kube-controller-manager kwok)
BINARIES=(etcd kube-apiserver kube-scheduler kube-controller-manager kwok kubectl)

log() { printf '[k8s-testenv %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

need() {
	local missing=()
	for c in "$@"; do command -v "$c" >/dev/null 2>&1 || missing+=("$c"); done
	((${#missing[@]} == 0)) || die "missing commands: ${missing[*]} (Debian: apt-get install openssl curl; Go from go.dev)"
}

tools_hash() {
	cat "$TOOLS/go.sum" "$TOOLS/go.mod" "$TOOLS/etcd/main.go" | sha256sum | cut -c1-16
}

bin_dir() {
	if [[ -n ${GPUFLEET_K8S_BIN:-} ]]; then echo "$GPUFLEET_K8S_BIN"; else echo "$CACHE/$(tools_hash)/bin"; fi
}

have_binaries() {
	local d=$1 b
	for b in "${BINARIES[@]}"; do [[ -x $d/$b ]] || return 1; done
}

cmd_build() {
	local bin
	bin=$(bin_dir)
	if have_binaries "$bin"; then
		log "binaries cached in $bin"
		return 0
	fi
	need go
	mkdir -p "$(dirname "$bin")"
	# One build at a time per cache key; a second caller waits and then finds the binaries.
	exec 9>"$(dirname "$bin")/.lock"
	if command -v flock >/dev/null 2>&1; then flock 9; fi
	if have_binaries "$bin"; then log "binaries cached in $bin"; return 0; fi
	local tmp="$bin.tmp.$$" t0
	rm -rf "$tmp"
	mkdir -p "$tmp"
	log "building ${BINARIES[*]} into $bin (cold: 15-25 min on 2 cores; warm build cache: about 1 min)"
	t0=$(now)
	local ver=${K8S_VERSION#v}
	(
		cd "$TOOLS"
		GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly" go build -trimpath \
			-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=${ver%%.*} -X k8s.io/component-base/version.gitMinor=$(echo "$ver" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean" \
			-o "$tmp/" tool
	) || { rm -rf "$tmp"; die "go build failed"; }
	have_binaries "$tmp" || { ls "$tmp" >&2; rm -rf "$tmp"; die "build did not produce all of ${BINARIES[*]}"; }
	rm -rf "$bin"
	mv "$tmp" "$bin"
	log "built in $(since "$t0") s"
}

# curl against the API server as the admin user.
kcurl() {
	curl -sS --cacert "$STATE/pki/ca.crt" --cert "$STATE/pki/admin.crt" --key "$STATE/pki/admin.key" "$@"
}

kubectl_() { HOME="$STATE/home" "$(bin_dir)/kubectl" --kubeconfig "$STATE/kubeconfig" "$@"; }

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
	local limit=$1 what=$2 t0
	shift 2
	t0=$(now)
	until "$@" >/dev/null 2>&1; do
		if awk -v a="$t0" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a > l) }'; then
			die "timed out after ${limit}s waiting for $what (logs in $STATE/logs)"
		fi
		sleep 0.2
	done
}

gen_certs() {
	local p=$STATE/pki
	mkdir -p "$p"
	(
		cd "$p"
		umask 077
		openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout ca.key -out ca.crt \
			-subj "/CN=gpufleet-testenv-ca" \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
		openssl req -newkey rsa:2048 -nodes -sha256 -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
		printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
			"extendedKeyUsage=serverAuth" "keyUsage=critical,digitalSignature,keyEncipherment" >apiserver.ext
		openssl x509 -req -sha256 -days 3650 -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
			-extfile apiserver.ext -out apiserver.crt 2>/dev/null
		openssl req -newkey rsa:2048 -nodes -sha256 -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=admin" 2>/dev/null
		printf '%s\n' "extendedKeyUsage=clientAuth" "keyUsage=critical,digitalSignature,keyEncipherment" >admin.ext
		openssl x509 -req -sha256 -days 3650 -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
			-extfile admin.ext -out admin.crt 2>/dev/null
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
		rm -f ./*.csr ./*.ext ca.srl
	)
	local b64='base64 -w0'
	cat >"$STATE/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gpufleet-testenv
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $($b64 <"$p/ca.crt")
users:
- name: admin
  user:
    client-certificate-data: $($b64 <"$p/admin.crt")
    client-key-data: $($b64 <"$p/admin.key")
contexts:
- name: gpufleet-testenv
  context:
    cluster: gpufleet-testenv
    user: admin
current-context: gpufleet-testenv
EOF
	chmod 600 "$STATE/kubeconfig"
}

start() { # start NAME ARGS...: run the binary in the background, pid and log under $STATE.
	local name=$1
	shift
	HOME="$STATE/home" nohup "$(bin_dir)/$name" "$@" </dev/null >"$STATE/logs/$name.log" 2>&1 &
	echo $! >"$STATE/pids/$name"
}

alive() { # alive NAME: the recorded pid runs our binary.
	local f=$STATE/pids/$1 pid
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	[[ -d /proc/$pid ]] || return 1
	[[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */$1 ]]
}

check_alive() { alive "$1" || die "$1 exited; last lines of $STATE/logs/$1.log:
$(tail -n 20 "$STATE/logs/$1.log" 2>/dev/null)"; }

# kwok_stages writes the stages file from the KWOK module's kustomize/stage files.
kwok_stages() {
	local dir
	dir=$(cd "$TOOLS" && GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly" go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
	[[ -n $dir && -d $dir/kustomize/stage ]] || die "KWOK module not in the module cache (run: cd hack/k8s-tools && go mod download)"
	local f first=1
	for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
		pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
		((first)) || echo '---'
		first=0
		cat "$dir/kustomize/stage/$f"
	done >"$STATE/kwok-stages.yaml"
	# A cluster has a kubelet on each node, each updating its own pods;
	# KWOK plays them all with podPlayStageParallelism workers (4 by
	# default), which held a flood of pods to about 150 Running a second
	# here, whatever made them (docs/PERFORMANCE.md). A configuration
	# given leaves the other options without their defaults: they are
	# KWOK's defaults, written out.
	cat >>"$STATE/kwok-stages.yaml" <<-'EOF'
	---
	apiVersion: config.kwok.x-k8s.io/v1alpha1
	kind: KwokConfiguration
	options:
	  podPlayStageParallelism: 32
	  nodePlayStageParallelism: 4
	  nodeLeaseParallelism: 4
	  podsOnNodeSyncParallelism: 1
	EOF
}

check_ports() {
	local port
	for port in $ETCD_CLIENT_PORT $ETCD_PEER_PORT $ETCD_METRICS_PORT $APISERVER_PORT $SCHEDULER_PORT $KCM_PORT $KWOK_PORT; do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			die "port $port on 127.0.0.1 is in use (another test environment? try GPUFLEET_K8S_PORT_OFFSET=100)"
		fi
	done
}

cmd_up() {
	need go openssl curl
	if [[ -d $STATE/pids ]]; then
		local c running=0
		for c in "${COMPONENTS[@]}"; do alive "$c" && running=$((running + 1)); done
		if ((running == ${#COMPONENTS[@]})); then log "already up; KUBECONFIG=$STATE/kubeconfig"; return 0; fi
		log "stale state in $STATE; cleaning it first"
		cmd_down
	fi
	cmd_build
	check_ports
	local t0 bin
	bin=$(bin_dir)
	t0=$(now)
	mkdir -p "$STATE"/{pids,logs,home,etcd}
	chmod 700 "$STATE/etcd"
	gen_certs
	kwok_stages
	local p=$STATE/pki

	start etcd --name=testenv --data-dir="$STATE/etcd" \
		--listen-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" \
		--listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster="testenv=http://127.0.0.1:$ETCD_PEER_PORT" \
		--listen-metrics-urls="http://127.0.0.1:$ETCD_METRICS_PORT" --unsafe-no-fsync --log-level=warn
	wait_for 30 etcd curl -fsS "http://127.0.0.1:$ETCD_CLIENT_PORT/health"
	check_alive etcd

	start kube-apiserver --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
		--endpoint-reconciler-type=none \
		--tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" --client-ca-file="$p/ca.crt" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
		--service-cluster-ip-range=10.96.0.0/16 --authorization-mode=Node,RBAC --allow-privileged=true \
		--feature-gates=GenericWorkload=true --runtime-config=scheduling.k8s.io/v1beta1=true
	wait_for 90 "kube-apiserver /readyz" kcurl -f "https://127.0.0.1:$APISERVER_PORT/readyz"
	check_alive kube-apiserver

	local kc=$STATE/kubeconfig
	start kube-scheduler --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
		--leader-elect=false --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT"
	start kube-controller-manager --kubeconfig="$kc" --authentication-kubeconfig="$kc" --authorization-kubeconfig="$kc" \
		--leader-elect=false --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
		--service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
		--cluster-signing-cert-file="$p/ca.crt" --cluster-signing-key-file="$p/ca.key" \
		--controllers='*' --use-service-account-credentials=false --feature-gates=GenericWorkload=true
	wait_for 60 "kube-scheduler /healthz" curl -fsSk "https://127.0.0.1:$SCHEDULER_PORT/healthz"
	wait_for 60 "kube-controller-manager /healthz" curl -fsSk "https://127.0.0.1:$KCM_PORT/healthz"
	wait_for 60 "the default ServiceAccount" kcurl -f "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/default/serviceaccounts/default"
	check_alive kube-scheduler
	check_alive kube-controller-manager

	start kwok -c "$STATE/kwok-stages.yaml" --kubeconfig="$kc" \
		--manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
		--manage-nodes-with-label-selector= --manage-single-node= \
		--cidr=127.1.0.0/16 --node-ip=127.0.0.1 --node-lease-duration-seconds=40 \
		--server-address="127.0.0.1:$KWOK_PORT"
	wait_for 30 "kwok /healthz" curl -fsS "http://127.0.0.1:$KWOK_PORT/healthz"
	check_alive kwok

	log "up in $(since "$t0") s; export KUBECONFIG=$kc (or: hack/k8s-testenv.sh kubectl get nodes)"
	log "binaries: $bin"
}

gpu_memory_mib() { # the value GPU feature discovery puts in nvidia.com/gpu.memory (MiB)
	case $1 in
	*H200*) echo 143771 ;;
	*H100*80GB* | *H100*) echo 81559 ;;
	*A100*80GB*) echo 81920 ;;
	*A100*) echo 40960 ;;
	*L40S* | *L40*) echo 46068 ;;
	*A10G*) echo 23028 ;;
	*L4*) echo 23034 ;;
	*V100*32GB*) echo 32768 ;;
	*V100*) echo 16384 ;;
	*T4*) echo 15360 ;;
	*) echo 81920 ;;
	esac
}

cmd_nodes() {
	local n=${1:?usage: nodes N [GPUS] [MODEL]} gpus=${2:-8} model=${3:-NVIDIA-H100-80GB-HBM3}
	[[ $n =~ ^[0-9]+$ && $gpus =~ ^[0-9]+$ ]] || die "usage: nodes N [GPUS] [MODEL]"
	alive kube-apiserver && alive kwok || die "not up (run: hack/k8s-testenv.sh up)"
	local prefix=${GPUFLEET_K8S_NODE_PREFIX:-gpu-node} mem cpu memory extra=${GPUFLEET_K8S_NODE_LABELS:-}
	mem=${GPUFLEET_K8S_GPU_MEMORY:-$(gpu_memory_mib "$model")}
	cpu=${GPUFLEET_K8S_NODE_CPU:-$((gpus > 0 ? gpus * 16 : 16))}
	memory=${GPUFLEET_K8S_NODE_MEMORY:-$((gpus > 0 ? gpus * 128 : 64))Gi}
	# Continue numbering after the nodes this script made before.
	local start=0 existing
	existing=$(kubectl_ get nodes -l gpufleet.io/testenv=true -o name 2>/dev/null | sed -n "s|^node/$prefix-\([0-9]*\)$|\1|p" | sort -n | tail -n 1)
	[[ -n $existing ]] && start=$((10#$existing + 1))
	local extra_yaml="" kv
	if [[ -n $extra ]]; then
		IFS=, read -ra kvs <<<"$extra"
		for kv in "${kvs[@]}"; do extra_yaml+="      \"${kv%%=*}\": \"${kv#*=}\""$'\n'; done
	fi
	local t0 i name names=()
	t0=$(now)
	{
		echo "apiVersion: v1"
		echo "kind: List"
		echo "items:"
		for ((i = start; i < start + n; i++)); do
			name=$(printf '%s-%03d' "$prefix" "$i")
			names+=("$name")
			cat <<EOF
- apiVersion: v1
  kind: Node
  metadata:
    name: $name
    annotations:
      kwok.x-k8s.io/node: fake
      node.alpha.kubernetes.io/ttl: "0"
    labels:
      kubernetes.io/hostname: $name
      kubernetes.io/os: linux
      kubernetes.io/arch: amd64
      type: kwok
      gpufleet.io/testenv: "true"
      nvidia.com/gpu.present: "true"
      nvidia.com/gpu.product: "$model"
      nvidia.com/gpu.memory: "$mem"
      nvidia.com/gpu.count: "$gpus"
${extra_yaml}  status:
    capacity:
      cpu: "$cpu"
      memory: "$memory"
      pods: "110"
      nvidia.com/gpu: "$gpus"
    allocatable:
      cpu: "$cpu"
      memory: "$memory"
      pods: "110"
      nvidia.com/gpu: "$gpus"
EOF
		done
	} >"$STATE/nodes-$start.yaml"
	kubectl_ create -f "$STATE/nodes-$start.yaml" >/dev/null
	# Wait for Ready. kubectl wait with many names is one watch; chunk to keep the command line short.
	local chunk=()
	for name in "${names[@]}"; do
		chunk+=("node/$name")
		if ((${#chunk[@]} == 200)); then kubectl_ wait --for=condition=Ready --timeout=120s "${chunk[@]}" >/dev/null; chunk=(); fi
	done
	((${#chunk[@]} == 0)) || kubectl_ wait --for=condition=Ready --timeout=120s "${chunk[@]}" >/dev/null
	log "$n nodes (${names[0]}..${names[-1]}, $gpus x $model each) Ready in $(since "$t0") s"
}

cmd_status() {
	local c pid rss
	for c in "${COMPONENTS[@]}"; do
		if alive "$c"; then
			pid=$(<"$STATE/pids/$c")
			rss=$(awk '/^VmRSS/ { printf "%d MiB", $2 / 1024 }' "/proc/$pid/status")
			printf '%-24s running  pid %-8s %s\n' "$c" "$pid" "$rss"
		else
			printf '%-24s stopped\n' "$c"
		fi
	done
	if alive kube-apiserver; then
		printf 'readyz: %s\n' "$(kcurl "https://127.0.0.1:$APISERVER_PORT/readyz" 2>&1)"
		printf 'kubeconfig: %s\n' "$STATE/kubeconfig"
		kubectl_ get nodes -L nvidia.com/gpu.product 2>/dev/null | head -n 20 || true
	fi
	printf 'binaries: %s (%s)\n' "$(bin_dir)" "$(have_binaries "$(bin_dir)" && echo built || echo 'not built')"
}

stop_one() {
	local c=$1 pid i
	alive "$c" || return 0
	pid=$(<"$STATE/pids/$c")
	kill -TERM "$pid" 2>/dev/null || return 0
	# kube-apiserver can ignore SIGTERM for more than 5 s (it drains); give everyone 10 s, then SIGKILL.
	for ((i = 0; i < 100; i++)); do
		[[ -d /proc/$pid ]] || return 0
		sleep 0.1
	done
	log "$c (pid $pid) did not stop in 10 s; SIGKILL"
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do [[ -d /proc/$pid ]] || return 0; sleep 0.1; done
}

cmd_down() {
	local c t0
	t0=$(now)
	if [[ -d $STATE/pids ]]; then
		# Stop clients first, then the API server, then etcd; the first four in parallel.
		for c in kwok kube-controller-manager kube-scheduler kube-apiserver; do stop_one "$c" & done
		wait
		stop_one etcd
	fi
	rm -rf "$STATE"
	log "down in $(since "$t0") s (binaries kept in $(bin_dir))"
}

case ${1:-} in
build) cmd_build ;;
up) cmd_up ;;
nodes) shift; cmd_nodes "$@" ;;
status) cmd_status ;;
down) cmd_down ;;
kubectl) shift; kubectl_ "$@" ;;
env) printf 'export KUBECONFIG=%q\nexport PATH=%q:$PATH\n' "$STATE/kubeconfig" "$(bin_dir)" ;;
*) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
