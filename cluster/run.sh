#!/usr/bin/env bash
# run.sh is `make run`: the main job on the local cluster. It starts the cluster if needed,
# installs the CRD and the example VMs, builds vm-controller and runs it in the foreground
# (Ctrl-C stops it cleanly). Arguments are passed to `vm-controller run`.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
export KUBECONFIG=$REPO/.cache/kubeconfig PATH=$REPO/.cache/bin:$PATH

log() { printf '[%4ds] %s\n' "$SECONDS" "$*"; }

cluster/cluster.sh up
log "installing the CRD and the example VMs"
kubectl apply -f crds/
kubectl wait --for=condition=Established crd/virtualmachines.cloudnative.czs --timeout=60s >/dev/null
kubectl apply -f examples/
make --no-print-directory build
log "running bin/vm-controller; in another terminal: export KUBECONFIG=$KUBECONFIG PATH=$REPO/.cache/bin:\$PATH; kubectl get vm"
exec bin/vm-controller run --kubeconfig "$KUBECONFIG" "$@"
