#!/usr/bin/env bash
# run.sh is `make run`: the main job on the local cluster. Arguments are passed to
# `vm-controller run`. In this order:
#   1. builds vm-controller and checks the arguments (a bad flag stops here, exit 2, before
#      anything in the cluster is touched);
#   2. starts the cluster if needed;
#   3. applies the CRD (a newer one replaces the one there);
#   4. creates the example VMs (examples/*.yaml) only when this run installed the CRD, that
#      is on a cluster that had none: a VM of the cluster is the user's, so a later run never
#      overwrites one that was edited nor brings back one that was deleted (to bring the
#      missing examples back: kubectl create -f examples/; the ones there are left alone);
#   5. runs vm-controller in the foreground (Ctrl-C stops it cleanly).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export KUBECONFIG=$REPO/.cache/kubeconfig PATH=$REPO/.cache/bin:$PATH
CRD=virtualmachines.cloudnative.czs

log() { printf '[%4ds] %s\n' "$SECONDS" "$*"; }

make --no-print-directory build
# `run` checks its flags before it reads the kubeconfig, and exits 2 on a bad one (nothing
# tried) or 1 on a kubeconfig it cannot read: given one that does not exist (last, so that it
# wins over any in the arguments), a run with these arguments gets no further than the
# check, and never reaches a cluster.
rc=0
out=$(bin/vm-controller run "$@" --kubeconfig /nonexistent/vm-controller-run-sh 2>&1) || rc=$?
case $rc in
0 | 2) printf '%s\n' "$out" >&2; exit "$rc" ;; # 0: --help
esac

cluster/cluster.sh up
installed=$(kubectl get crd "$CRD" --ignore-not-found -o name)
log "installing the CRD"
kubectl apply -f crds/
kubectl wait --for=condition=Established "crd/$CRD" --timeout=60s >/dev/null
if [[ -z $installed ]]; then
	log "creating the example VMs (the CRD is new)"
	kubectl create -f examples/
else
	log "the CRD was installed before: the example VMs are left as they are (kubectl create -f examples/ brings back missing ones)"
fi
log "running bin/vm-controller; in another terminal: export KUBECONFIG=$KUBECONFIG PATH=$REPO/bin:$REPO/.cache/bin:\$PATH; kubectl get vm"
exec bin/vm-controller run --kubeconfig "$KUBECONFIG" "$@"
