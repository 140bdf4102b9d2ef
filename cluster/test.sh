#!/usr/bin/env bash
# test.sh is `make test`: static checks, then the whole test suite, the e2e tests (build tag
# e2e) included, against a real local cluster. It starts the cluster only when none is
# running and then removes it again (also on failure or interrupt), so it neither disturbs a
# developer's running cluster nor leaves one behind in CI. It exits with go test's status.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
CLUSTER=$REPO/cluster/cluster.sh

log() { printf '[%4ds] %s\n' "$SECONDS" "$*"; }
die() {
	printf 'test.sh: %s\n' "$*" >&2
	exit 1
}

command -v go >/dev/null 2>&1 || die "go not found in PATH; install Go (see go.mod for the version)"

log "gofmt"
# .cache holds kwok's state, not sources; cluster/tools is its own module but ours to format.
unformatted=$(find . -path ./.cache -prune -o -path ./.git -prune -o -name '*.go' -print0 | xargs -0 -r gofmt -l)
[[ -z $unformatted ]] || die "gofmt needed on: $(echo "$unformatted" | tr '\n' ' ')(run gofmt -w)"

# The e2e tests need a cluster; `go test ./...` without one must pass, so each of their files
# carries the build tag, and this run (with -tags e2e) is the one that includes them.
untagged=$(grep -L '^//go:build e2e$' e2e/*.go || true)
[[ -z $untagged ]] || die "e2e files without the line //go:build e2e: $(echo "$untagged" | tr '\n' ' ')(go test ./... would run them without a cluster)"

log "go vet ./..."
go vet ./... || die "go vet ./... failed (see above)"
log "go vet -tags e2e ./..."
go vet -tags e2e ./... || die "go vet -tags e2e ./... failed (see above)"

"$CLUSTER" build

started=0
# Removing only a cluster this script started; `|| true` keeps go test's status as ours.
# shellcheck disable=SC2317 # called from the EXIT trap
cleanup() {
	local rc=$?
	if ((started)); then
		"$CLUSTER" down || true
	fi
	exit "$rc"
}
trap cleanup EXIT
# Interrupts exit through the EXIT trap, so the cluster goes away on Ctrl-C too.
trap 'exit 130' INT
trap 'exit 143' TERM

if "$CLUSTER" status >/dev/null 2>&1; then
	log "using the running cluster (left running afterwards)"
else
	started=1
	"$CLUSTER" up
fi

log "go test -tags e2e -count=1 -timeout 30m ./..."
rc=0
PATH=$REPO/.cache/bin:$PATH KUBECONFIG=$REPO/.cache/kubeconfig \
	go test -tags e2e -count=1 -timeout 30m ./... || rc=$?
log "go test exited $rc"
exit "$rc"
