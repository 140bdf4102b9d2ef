#!/usr/bin/env bash
# cluster.sh builds and runs the local control plane that vm-controller is developed and
# tested against: a real etcd, kube-apiserver, kube-controller-manager and kube-scheduler,
# with kwok standing in for the kubelets of fake nodes. Everything it builds or starts lives
# under $REPO/.cache (git-ignored), so it never touches ~/.kube or ~/.kwok.
#
# Usage: cluster/cluster.sh build|up|down|status
#
#   build   build the binaries into .cache/bin (skipped when nothing they depend on changed)
#   up      start the cluster (idempotent), with NODES fake nodes, and write .cache/kubeconfig
#           (context kwok-NAME); all components listen on 127.0.0.1 only; apply the
#           StorageClasses (cluster/storage.yaml; kube-controller-manager provisions their
#           claims as host-path volumes, cluster/kwokctl.yaml); then the resizer, which plays the
#           kubelet's part of in-place pod resize on kwok's nodes, ends terminating pods on
#           their UID, and grows claims as a CSI driver and the kubelet would (cluster/resizer;
#           log in the cluster's logs/resizer.log)
#   down    stop the resizer and the cluster and delete its state, the directories of its
#           host-path volumes included (fine when there is none)
#   status  exit 0 when the cluster answers /readyz, 1 otherwise
#
# Environment:
#   CLUSTER_NAME         kwok cluster name (default vmc)
#   NODES                number of fake nodes `up` makes sure exist (default 3)
#   MAX_PODS             pods each fake node takes (its allocatable pods; default 110, the
#                        kubelet's default); raise it for a scale run of more than 110*NODES
#                        pods instead of adding nodes, whose heartbeats load the API server
#   KUBE_APISERVER_PORT  pin the apiserver's port; by default kwokctl picks free ports
#                        (counting down from 32767) and records them in the cluster's state
#   KWOKCTL_EXTRA        extra arguments for `kwokctl create cluster`, word-split
#                        (e.g. KWOKCTL_EXTRA=--disable-qps-limits)
#   UP_TIMEOUT           seconds `up` may take before it gives up (default 180)
#   RESIZER              1 (default): `up` starts the resizer, which also ends terminating pods
#                        in place of kwok's pod-delete stage (see kwok_stages); 0: it does not,
#                        pods on kwok nodes cannot be resized, claims cannot grow (the API server
#                        admits it, nothing carries it out), and kwok deletes terminating pods by
#                        name (the resizer writes every running pod's status once, which a
#                        benchmark may want to leave out)
#   BUILD_TIMEOUT        seconds one build step may take before it gives up (default 3600)
set -euo pipefail

# Pins. Kubernetes (v1.36.x) and etcd are pinned by cluster/tools/go.mod, the Go module that
# builds them, so that go.sum verifies their source; the version stamped into the Kubernetes
# binaries is read from there too, so that file is the one place to change them. kwok is
# installed from its own module (it has no replace directives, so `go install @version` works).
KWOK_VERSION=v0.7.0
# metrics-server serves metrics.k8s.io from kwok's simulated usage, so the controller's
# usage reporting runs against the real API.
METRICS_SERVER_VERSION=v0.9.0

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=$REPO/cluster/tools
CACHE=$REPO/.cache
BIN=$CACHE/bin
STAMPS=$CACHE/stamps
KUBECONFIG_FILE=$CACHE/kubeconfig
CLUSTER_NAME=${CLUSTER_NAME:-vmc}
NODES=${NODES:-3}
MAX_PODS=${MAX_PODS:-110}
UP_TIMEOUT=${UP_TIMEOUT:-180}
RESIZER=${RESIZER:-1}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-3600}
KUBE_APISERVER_PORT=${KUBE_APISERVER_PORT:-}
# kwokctl keeps clusters, its config and its download cache here instead of ~/.kwok.
export KWOK_WORKDIR=$CACHE/kwok
# kwokctl runs kubectl itself (readiness checks, scaling): the first on PATH, else a
# download. Ours goes first, so it is the same version as the server and nothing is fetched.
export PATH=$BIN:$PATH
export KWOK_KUBECTL_BINARY=$BIN/kubectl
CLUSTER_DIR=$KWOK_WORKDIR/clusters/$CLUSTER_NAME

KUBE_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd)
KWOK_BINS=(kwok kwokctl)
# Built from this repository's own module, so it follows the code (go build caches it).
RESIZER_BIN=$BIN/kwok-resizer
# The kwok Stages the cluster runs with, and kwok's pod-delete stage, added to them when the
# resizer does not run (see kwok_stages).
KWOK_STAGES=$CACHE/kwok-stages.yaml
KWOK_POD_DELETE=$CACHE/kwok-pod-delete.yaml
METRICS_SERVER_BINS=(metrics-server)

# log prints one progress line prefixed with the seconds since the command started, so a
# slow step is visible without a separate timer.
log() { printf '[%4ds] %s\n' "$SECONDS" "$*"; }

# die prints the single line that explains a failure, on stderr, and exits non-zero.
die() {
	printf 'cluster.sh: %s\n' "$*" >&2
	exit 1
}

# need fails early, with the tool's name, instead of letting a later command fail obscurely.
need() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null 2>&1 || die "$tool not found in PATH; install it (see docs/dev/local-cluster.md)"
	done
}

# need_bins checks that `build` has run, so `up` never falls back to kwokctl's downloads.
need_bins() {
	local b
	for b in "${KUBE_BINS[@]}" "${KWOK_BINS[@]}" "${METRICS_SERVER_BINS[@]}"; do
		[[ -x $BIN/$b ]] || die "$BIN/$b is missing; build the tools first: make tools (cluster/cluster.sh build)"
	done
	[[ -f $KWOK_STAGES && -f $KWOK_POD_DELETE ]] || die "$KWOK_STAGES is missing; build the tools first: make tools (cluster/cluster.sh build)"
	if [[ $RESIZER == 1 ]]; then
		[[ -x $RESIZER_BIN ]] || die "$RESIZER_BIN is missing; build the tools first: make tools (cluster/cluster.sh build)"
	fi
	return 0
}

# The resizer runs beside the cluster's components, its pid and log in the cluster's directory
# (outside kwokctl's pids/, which lists kwokctl's own components), so that down finds it.
RESIZER_PID=$CLUSTER_DIR/resizer.pid
RESIZER_LOG=$CLUSTER_DIR/logs/resizer.log

# start_resizer starts the resizer unless it runs already, and checks that it got its caches.
start_resizer() {
	if [[ -f $RESIZER_PID ]] && alive "$(<"$RESIZER_PID")"; then
		log "resizer: already running (pid $(<"$RESIZER_PID"))"
		return 0
	fi
	mkdir -p "$(dirname "$RESIZER_LOG")"
	# The previous run's log is kept once; a fresh log lets resizer_started read this run's.
	[[ -f $RESIZER_LOG ]] && mv -f "$RESIZER_LOG" "$RESIZER_LOG.1"
	nohup "$RESIZER_BIN" --kubeconfig "$KUBECONFIG_FILE" >>"$RESIZER_LOG" 2>&1 </dev/null &
	echo $! >"$RESIZER_PID"
	log "resizer: started (pid $!, log $RESIZER_LOG)"
}

# stop_resizer stops the resizer this cluster started, by its recorded pid.
stop_resizer() {
	[[ -f $RESIZER_PID ]] || return 0
	local pid
	pid=$(<"$RESIZER_PID")
	if alive "$pid" && [[ $(ps -o comm= -p "$pid") == kwok-resizer ]]; then
		kill "$pid" 2>/dev/null || true
		local i
		for ((i = 0; i < 50; i++)); do
			alive "$pid" || break
			sleep 0.1
		done
	fi
	rm -f "$RESIZER_PID"
}

# resizer_started tells whether the resizer has synced its caches and logged so.
resizer_started() {
	grep -q 'msg="Resizer started"' "$RESIZER_LOG" 2>/dev/null && alive "$(<"$RESIZER_PID")"
}

# stamp hashes what a group of binaries is built from (given on stdin) together with the
# toolchain; a stored stamp that matches means the binaries are current. `go env` catches a
# new toolchain, CGO or GOARCH.
stamp() {
	{
		cat
		go version
		go env GOOS GOARCH CGO_ENABLED GOAMD64 GOFLAGS
	} | sha256sum | cut -d' ' -f1
}

# fresh tells whether a group's stored stamp matches and all its binaries exist.
fresh() {
	local group=$1 want=$2 b
	shift 2
	[[ -f $STAMPS/$group && $(<"$STAMPS/$group") == "$want" ]] || return 1
	for b in "$@"; do [[ -x $BIN/$b ]] || return 1; done
}

# run_build runs one build command under a timeout and turns a failure into one line.
run_build() {
	local what=$1 rc=0
	shift
	timeout "$BUILD_TIMEOUT" "$@" || rc=$?
	if ((rc == 124)); then
		die "building $what took longer than ${BUILD_TIMEOUT}s (BUILD_TIMEOUT); gave up"
	elif ((rc != 0)); then
		die "building $what failed (exit $rc); the errors are above"
	fi
}

cmd_build() {
	need go sha256sum timeout
	mkdir -p "$BIN" "$STAMPS"
	# A go.work elsewhere must not change which modules the tools module builds with.
	export GOWORK=off

	local kube_version etcd_version source_date source_sum pins
	# The module proxy serves no git commit for k8s.io/kubernetes, so the binaries carry the
	# go.sum hash of the exact source built, and the release's date rather than today's (so
	# the build, and its stamp, are reproducible).
	pins=$(cd "$TOOLS" && go list -m -f '{{.Version}} {{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' \
		k8s.io/kubernetes go.etcd.io/etcd/server/v3) ||
		die "go list -m in $TOOLS failed (error above); a first build needs the Go module proxy"
	{ read -r kube_version source_date && read -r etcd_version _; } <<<"$pins"
	source_sum=$(awk -v v="$kube_version" '$1 == "k8s.io/kubernetes" && $2 == v { print $3 }' "$TOOLS/go.sum")
	[[ $kube_version =~ ^v([0-9]+)\.([0-9]+)\. ]] || die "unexpected Kubernetes version $kube_version in $TOOLS/go.mod"
	local major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]} pkg x
	# Both version packages are set, as the Kubernetes release build does: component-base for
	# `--version` and the server's /version (kubectl compares them for its skew warning),
	# client-go for the user agent.
	local ldflags="-s -w"
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		for x in "gitVersion=$kube_version" "gitMajor=$major" "gitMinor=$minor" \
			"gitTreeState=clean" "gitCommit=$source_sum" "buildDate=$source_date"; do
			ldflags+=" -X $pkg.$x"
		done
	done

	local want
	want=$({ cat "$TOOLS/go.mod" "$TOOLS/go.sum" "$TOOLS/etcd/main.go" && echo "$ldflags"; } | stamp)
	if fresh kube "$want" "${KUBE_BINS[@]}"; then
		log "kubernetes $kube_version + etcd $etcd_version: up to date in $BIN"
	else
		rm -f "$STAMPS/kube"
		log "kubernetes $kube_version + etcd $etcd_version: go build ${KUBE_BINS[*]} (empty Go caches: about 7 min on 2 cores; warm: seconds)"
		# One go build for all five so that the packages they share are compiled once.
		run_build "kubernetes $kube_version" \
			env -C "$TOOLS" go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$BIN/" \
			k8s.io/kubernetes/cmd/kube-apiserver \
			k8s.io/kubernetes/cmd/kube-controller-manager \
			k8s.io/kubernetes/cmd/kube-scheduler \
			k8s.io/kubernetes/cmd/kubectl \
			./etcd
		printf '%s\n' "$want" >"$STAMPS/kube"
	fi

	local kwok_ldflags="-s -w"
	want=$(echo "$KWOK_VERSION $kwok_ldflags" | stamp)
	if fresh kwok "$want" "${KWOK_BINS[@]}"; then
		log "kwok $KWOK_VERSION: up to date in $BIN"
	else
		rm -f "$STAMPS/kwok"
		log "kwok $KWOK_VERSION: go install kwok kwokctl (empty Go caches: about 2 min; warm: seconds)"
		run_build "kwok $KWOK_VERSION" \
			env -C "$REPO" GOBIN="$BIN" go install -trimpath -buildvcs=false -ldflags "$kwok_ldflags" \
			"sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" \
			"sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
		printf '%s\n' "$want" >"$STAMPS/kwok"
	fi

	want=$(echo "$METRICS_SERVER_VERSION $kwok_ldflags" | stamp)
	if fresh metrics-server "$want" "${METRICS_SERVER_BINS[@]}"; then
		log "metrics-server $METRICS_SERVER_VERSION: up to date in $BIN"
	else
		rm -f "$STAMPS/metrics-server"
		log "metrics-server $METRICS_SERVER_VERSION: go install (empty Go caches: about 2 min; warm: seconds)"
		run_build "metrics-server $METRICS_SERVER_VERSION" \
			env -C "$REPO" GOBIN="$BIN" go install -trimpath -buildvcs=false -ldflags "$kwok_ldflags" \
			"sigs.k8s.io/metrics-server/cmd/metrics-server@$METRICS_SERVER_VERSION"
		printf '%s\n' "$want" >"$STAMPS/metrics-server"
	fi
	kwok_stages
	log "resizer: go build ./cluster/resizer"
	run_build "the resizer" env -C "$REPO" go build -trimpath -buildvcs=false -o "$RESIZER_BIN" ./cluster/resizer
	log "build: done ($BIN)"
}

# kwok_stages writes the kwok Stages the cluster runs with: kwok's own defaults, read from its
# module source, without pod-delete, followed by this project's (cluster/stages.yaml: pods that
# end on purpose, images that fail to pull). pod-delete deletes a terminating pod by name, so a
# delete it queued for a pod that has since gone can remove the new pod of the same name that
# vm-controller creates in its place; the resizer ends terminating pods as a kubelet does
# instead, with the pod's UID as a precondition (cluster/resizer). pod-delete goes to a file of
# its own, which up adds when the resizer does not run (RESIZER=0). kwok takes its defaults
# only when no Stage is configured, so the node stages are listed too, as kwokctl would
# configure them for the binary runtime.
kwok_stages() {
	local dir
	dir=$(cd "${TMPDIR:-/tmp}" && GOFLAGS= go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') ||
		die "go mod download sigs.k8s.io/kwok@$KWOK_VERSION failed (error above)"
	[[ -d $dir/kustomize/stage ]] || die "kwok's stages are not in its module source ($dir/kustomize/stage)"
	local f
	# A subshell, so that a failed cat ends it and not the script, and die says why.
	(
		echo "# kwok $KWOK_VERSION's default Stages without pod-delete, then cluster/stages.yaml; written by cluster/cluster.sh build."
		for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
			pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml; do
			cat "$dir/kustomize/stage/$f" || exit 1
			echo ---
		done
		cat "$REPO/cluster/stages.yaml" || exit 1
	) >"$KWOK_STAGES.tmp" || die "could not read kwok's stages from $dir/kustomize/stage or cluster/stages.yaml"
	mv "$KWOK_STAGES.tmp" "$KWOK_STAGES"
	cp "$dir/kustomize/stage/pod/fast/pod-delete.yaml" "$KWOK_POD_DELETE.tmp" || die "could not read kwok's pod-delete stage from $dir/kustomize/stage"
	mv "$KWOK_POD_DELETE.tmp" "$KWOK_POD_DELETE"
	log "kwok stages: $KWOK_STAGES (kwok's defaults without pod-delete, and cluster/stages.yaml)"
}

# kubectl_c runs kubectl against the local cluster with a per-request bound, so no wait in
# this script can hang on an apiserver that accepts connections but never answers.
kubectl_c() {
	timeout 30 "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" --request-timeout=10s "$@"
}

# kwokctl_c runs kwokctl on this repository's cluster without ever editing ~/.kube/config
# (its --kubeconfig defaults to that file or $KUBECONFIG).
kwokctl_c() {
	"$BIN/kwokctl" --name "$CLUSTER_NAME" "$@"
}

# ready tells whether the cluster answers /readyz through the repository's kubeconfig.
ready() {
	owns_kubeconfig && [[ $(kubectl_c get --raw /readyz 2>/dev/null) == ok ]]
}

# port_taken tells whether something already accepts connections on 127.0.0.1:$1.
port_taken() {
	timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null
}

# alive tells whether a process runs; a zombie (exited, not yet reaped) does not count.
alive() {
	local state
	[[ $1 =~ ^[0-9]+$ ]] && state=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $state != Z* ]]
}

# check_recorded_ports fails fast when a stopped cluster's ports (chosen at creation and
# recorded in its kwok.yaml) are now held by another program, which would otherwise only
# show as a timeout. It checks only when none of the cluster's own processes is alive, so
# that a half-running cluster's own listeners are not mistaken for strangers.
check_recorded_ports() {
	local pidfile pid port
	for pidfile in "$CLUSTER_DIR"/pids/*.pid; do
		[[ -f $pidfile ]] || continue
		pid=$(<"$pidfile")
		alive "$pid" && return 0
	done
	local ports
	mapfile -t ports < <(awk '$1 ~ /^[A-Za-z]+Port:$/ && $2 ~ /^[0-9]+$/ && $2 > 0 { print $2 }' "$CLUSTER_DIR/kwok.yaml" | sort -u)
	for port in "${ports[@]}"; do
		port_taken "$port" &&
			die "port $port, recorded for cluster $CLUSTER_NAME in $CLUSTER_DIR/kwok.yaml, is in use by another program; stop it, or start afresh (new ports): $(reset_hint), then up again"
	done
	return 0
}

# dead_components names the cluster's components whose process is gone, so a timeout says
# which one to look at (a crashed apiserver, say) instead of only "timed out".
dead_components() {
	local pidfile pid dead=()
	for pidfile in "$CLUSTER_DIR"/pids/*.pid; do
		[[ -f $pidfile ]] || continue
		pid=$(<"$pidfile")
		alive "$pid" && continue
		dead+=("$(basename "$pidfile" .pid)")
	done
	((${#dead[@]} == 0)) || printf 'not running: %s; ' "${dead[*]}"
}

# reset_hint is the command that deletes this cluster, for error messages.
reset_hint() {
	if [[ $CLUSTER_NAME == vmc ]]; then
		echo "make cluster-down"
	else
		echo "CLUSTER_NAME=$CLUSTER_NAME cluster/cluster.sh down"
	fi
}

# owns_kubeconfig tells whether .cache/kubeconfig belongs to this cluster (kwokctl names the
# context kwok-NAME); clusters of other names must not delete it.
owns_kubeconfig() {
	[[ -f $KUBECONFIG_FILE ]] && grep -qx "current-context: kwok-$CLUSTER_NAME" "$KUBECONFIG_FILE"
}

# wait_until polls a command until it succeeds or the deadline (in $SECONDS) passes.
wait_until() {
	local deadline=$1 what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		((SECONDS < deadline)) ||
			die "timed out after ${UP_TIMEOUT}s waiting for $what (UP_TIMEOUT); $(dead_components)logs: $CLUSTER_DIR/logs; reset: $(reset_hint)"
		sleep 1
	done
}

# metrics_ready tells whether metrics-server serves metrics.k8s.io. kwokctl starts it beside
# the API server, and it exits at once if the API server does not answer yet (seen on a busy
# machine: "unable to load configmap based request-header-client-ca-file ... connection
# refused"); then it is started again. Until it serves, usage has no source, and the
# controller manager, whose discovery of metrics.k8s.io fails, never finishes deleting a
# namespace.
metrics_ready() {
	local available pid=
	available=$(kubectl_c get apiservice v1beta1.metrics.k8s.io \
		-o jsonpath='{.status.conditions[?(@.type=="Available")].status}' 2>/dev/null) || true
	[[ $available == True ]] && return 0
	[[ -f $CLUSTER_DIR/pids/metrics-server.pid ]] && pid=$(<"$CLUSTER_DIR/pids/metrics-server.pid")
	if [[ -n $pid ]] && ! alive "$pid"; then
		printf '[%4ds] metrics-server had exited (log: %s): kwokctl start cluster\n' "$SECONDS" \
			"$CLUSTER_DIR/logs/metrics-server.log" >>"$CACHE/kwokctl-start.log"
		kwokctl_c start cluster >>"$CACHE/kwokctl-start.log" 2>&1 || true
	fi
	return 1
}

# nodes_ready is true when at least $NODES nodes exist and all of them are Ready.
nodes_ready() {
	local out total ready
	out=$(kubectl_c get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}') || return 1
	total=$(grep -c . <<<"$out" || true)
	ready=$(grep -c '^True$' <<<"$out" || true)
	((total >= NODES && ready == total))
}

cmd_up() {
	need timeout
	need_bins
	[[ $NODES =~ ^[0-9]+$ ]] || die "NODES must be a number, got '$NODES'"
	[[ $MAX_PODS =~ ^[1-9][0-9]*$ ]] || die "MAX_PODS must be a positive number, got '$MAX_PODS'"
	[[ $UP_TIMEOUT =~ ^[0-9]+$ ]] || die "UP_TIMEOUT must be a number of seconds, got '$UP_TIMEOUT'"
	local deadline=$((SECONDS + UP_TIMEOUT))
	mkdir -p "$CACHE"

	if [[ -f $CLUSTER_DIR/kwok.yaml ]] && ready; then
		log "cluster $CLUSTER_NAME is already up"
	else
		local args=(
			create cluster --runtime binary --kubeconfig '' --config "$REPO/cluster/kwokctl.yaml"
			--etcd-binary "$BIN/etcd"
			--kube-apiserver-binary "$BIN/kube-apiserver"
			--kube-controller-manager-binary "$BIN/kube-controller-manager"
			--kube-scheduler-binary "$BIN/kube-scheduler"
			--kwok-controller-binary "$BIN/kwok"
			--enable metrics-server --metrics-server-binary "$BIN/metrics-server"
			--enable-crds ClusterResourceUsage,ResourceUsage
			--kube-authorization=true --kube-admission=true
			--timeout "${UP_TIMEOUT}s"
		)
		# A cluster made runs the stages cluster/stages.yaml has now: build writes them, and a
		# stage added since the last build would be missing from this cluster for its life.
		if [[ $REPO/cluster/stages.yaml -nt $KWOK_STAGES ]]; then kwok_stages; fi
		# With the resizer, kwok runs without its pod-delete stage (see kwok_stages).
		args+=(--config "$KWOK_STAGES")
		if [[ $RESIZER != 1 ]]; then args+=(--config "$KWOK_POD_DELETE"); fi
		if [[ -f $CLUSTER_DIR/kwok.yaml ]]; then
			# The state is there but the processes are not (a reboot, a kill): kwokctl
			# restarts them on the ports it recorded.
			log "cluster $CLUSTER_NAME exists but does not answer: restarting it"
			check_recorded_ports
		else
			if [[ -n $KUBE_APISERVER_PORT ]]; then
				[[ $KUBE_APISERVER_PORT =~ ^[0-9]+$ ]] || die "KUBE_APISERVER_PORT must be a port number, got '$KUBE_APISERVER_PORT'"
				port_taken "$KUBE_APISERVER_PORT" &&
					die "port $KUBE_APISERVER_PORT (KUBE_APISERVER_PORT) is already in use; free it or unset KUBE_APISERVER_PORT to let kwokctl pick a free one"
				args+=(--kube-apiserver-port "$KUBE_APISERVER_PORT")
			fi
			log "creating cluster $CLUSTER_NAME (kwokctl, binary runtime, state in $CLUSTER_DIR)"
		fi
		local extra=()
		read -r -a extra <<<"${KWOKCTL_EXTRA:-}"
		local rc=0
		timeout "$UP_TIMEOUT" "$BIN/kwokctl" --name "$CLUSTER_NAME" "${args[@]}" "${extra[@]}" \
			>"$CACHE/kwokctl-create.log" 2>&1 || rc=$?
		if ((rc != 0)); then
			# kwokctl logs JSON; its last "err" is the reason, the rest stays in the file.
			local reason
			reason=$(grep -o '"err":"[^"]*"' "$CACHE/kwokctl-create.log" | tail -n 1 | cut -d'"' -f4)
			((rc == 124)) && reason="not ready within ${UP_TIMEOUT}s (UP_TIMEOUT)"
			die "kwokctl create cluster failed (exit $rc${reason:+: $reason}); $(dead_components)output: $CACHE/kwokctl-create.log, logs: $CLUSTER_DIR/logs; reset: $(reset_hint)"
		fi
		# kwokctl prints the kubeconfig of its admin user with the certificates inline;
		# writing it through a temporary file never leaves a half-written kubeconfig.
		kwokctl_c get kubeconfig >"$KUBECONFIG_FILE.tmp" 2>"$CACHE/kwokctl-kubeconfig.log" ||
			die "kwokctl get kubeconfig failed; see $CACHE/kwokctl-kubeconfig.log"
		chmod 600 "$KUBECONFIG_FILE.tmp"
		mv "$KUBECONFIG_FILE.tmp" "$KUBECONFIG_FILE"
		log "apiserver: waiting for /readyz"
		wait_until "$deadline" "the apiserver's /readyz" ready
	fi

	log "nodes: $NODES kwok nodes (kwokctl scale node)"
	# kwok's node template advertises cpu, memory and pods only; the controller's servers also
	# request ephemeral-storage (the VM's root disk), which would leave them Pending with
	# "Insufficient ephemeral-storage". The parameter applies to nodes scale creates.
	timeout $((deadline - SECONDS > 0 ? deadline - SECONDS : 1)) \
		"$BIN/kwokctl" --name "$CLUSTER_NAME" scale node --replicas "$NODES" \
		--param '.allocatable["ephemeral-storage"] = "10Ti"' --param ".allocatable.pods = \"$MAX_PODS\"" >"$CACHE/kwokctl-scale.log" 2>&1 ||
		die "kwokctl scale node --replicas $NODES failed; see $CACHE/kwokctl-scale.log"
	wait_until "$deadline" "$NODES Ready nodes" nodes_ready
	# Pods are refused until the controller manager has made the namespace's default
	# ServiceAccount, so a cluster without it is not usable yet.
	log "waiting for the default ServiceAccount"
	wait_until "$deadline" "the default ServiceAccount in namespace default" kubectl_c get serviceaccount default -n default
	# The StorageClasses claims are provisioned with (see cluster/storage.yaml).
	wait_until "$deadline" "the StorageClasses of cluster/storage.yaml" kubectl_c apply -f "$REPO/cluster/storage.yaml"
	# kwok reports each pod's usage to metrics-server as cluster/usage.yaml says.
	wait_until "$deadline" "kwok's ClusterResourceUsage API" kubectl_c apply -f "$REPO/cluster/usage.yaml"
	wait_until "$deadline" "metrics-server serving metrics.k8s.io (restarts: $CACHE/kwokctl-start.log)" metrics_ready
	if [[ $RESIZER == 1 ]]; then
		start_resizer
		wait_until "$deadline" "the resizer's caches (log: $RESIZER_LOG)" resizer_started
	fi
	log "cluster $CLUSTER_NAME is ready: $NODES nodes, kubeconfig $KUBECONFIG_FILE"
	printf 'export KUBECONFIG=%s\n' "$KUBECONFIG_FILE"
}

# remove_hostpath_volumes removes the directories of the cluster's host-path volumes, which
# kube-controller-manager's provisioner made under /tmp/hostpath_pv and would remove only with
# their claims. Other clusters on the machine (of other checkouts, or CLUSTER_NAMEs) keep theirs
# there too, so it removes only the paths this cluster's volumes name, and only while the
# cluster answers; a cluster that does not leaves its (empty) directories behind.
remove_hostpath_volumes() {
	ready || return 0
	local paths path
	paths=$(kubectl_c get persistentvolumes -o jsonpath='{range .items[*]}{.spec.hostPath.path}{"\n"}{end}' 2>/dev/null) || return 0
	while read -r path; do
		[[ $path =~ ^/tmp/hostpath_pv/[0-9a-f-]+$ ]] && rm -rf -- "$path"
	done <<<"$paths"
	return 0
}

cmd_down() {
	if [[ ! -d $CLUSTER_DIR ]]; then
		if owns_kubeconfig; then rm -f "$KUBECONFIG_FILE"; fi
		log "no cluster $CLUSTER_NAME: nothing to delete"
		return 0
	fi
	[[ -x $BIN/kwokctl ]] || die "$BIN/kwokctl is missing, so the cluster in $CLUSTER_DIR cannot be stopped; run make tools first"
	stop_resizer
	remove_hostpath_volumes
	log "deleting cluster $CLUSTER_NAME"
	local rc=0
	# delete refuses an empty --kubeconfig and would edit ~/.kube/config or $KUBECONFIG by
	# default; a path that does not exist makes it edit nothing (it logs and goes on).
	timeout 120 "$BIN/kwokctl" --name "$CLUSTER_NAME" delete cluster --kubeconfig "$CACHE/no-kubeconfig" \
		>"$CACHE/kwokctl-delete.log" 2>&1 || rc=$?
	((rc == 0)) || die "kwokctl delete cluster failed (exit $rc); see $CACHE/kwokctl-delete.log"
	if owns_kubeconfig; then rm -f "$KUBECONFIG_FILE"; fi
	log "cluster $CLUSTER_NAME deleted"
}

cmd_status() {
	if [[ -x $BIN/kubectl ]] && ready; then
		log "cluster $CLUSTER_NAME answers (KUBECONFIG=$KUBECONFIG_FILE)"
		return 0
	fi
	log "cluster $CLUSTER_NAME does not answer (KUBECONFIG=$KUBECONFIG_FILE)"
	return 1
}

case ${1:-} in
build) cmd_build ;;
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
*)
	printf 'usage: %s build|up|down|status\n' "$0" >&2
	exit 2
	;;
esac
