# Thin entry points: the logic lives in cluster/ and tools/, so CI (.ci/run) and people run
# the same scripts. See docs/dev/local-cluster.md and CONTRIBUTING.md.
.PHONY: help tools cluster cluster-down cluster-status test test-image test-rules test-bench build run image release

# The version stamped into vm-controller: the tag on the commit, else the commit's abbreviated
# hash (7 hex digits, more where 7 would be ambiguous; after a tag, git describe puts the tag
# and a count before it), with -dirty when git status lists a change (an untracked file counts,
# as it does for go build's vcs.modified); devel outside a checkout. The image's tag derives
# from it by the rule `vm-controller manifests` applies to its default image: a release's
# version, else the commit's first 7 hex digits (testdata/image-tags.txt).
VERSION ?= $(shell v=$$(git describe --tags --always --abbrev=7 2>/dev/null) && \
	{ test -z "$$(git status --porcelain 2>/dev/null)" || v=$$v-dirty; echo $$v; } || echo devel)
# Static, reproducible binaries for the image and releases: no cgo, no local paths.
STATIC := CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$(VERSION)"
# The image's platforms (linux/<arch>); IMAGE_ARCHS=amd64 builds one only.
IMAGE_ARCHS ?= amd64 arm64
# Shipped in the image as /etc/ssl/certs/ca-certificates.crt when the host has it (Debian's
# ca-certificates); the controller itself trusts the cluster's CA from its ServiceAccount.
CA_BUNDLE ?= $(wildcard /etc/ssl/certs/ca-certificates.crt)
# Unix time stamped into the image and its files; the last commit's, so rebuilds are identical.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

help:
	@echo 'make tools          build the control-plane binaries into .cache/bin (skipped when current)'
	@echo 'make cluster        build the tools if needed, then start the local cluster (.cache/kubeconfig)'
	@echo 'make cluster-down   stop the local cluster and delete its state'
	@echo 'make cluster-status exit 0 when the local cluster answers'
	@echo 'make test           gofmt, go vet, then go test ./... against a local cluster, then the image, rules and bench tests'
	@echo 'make test-rules     check the alerting rules and evaluate them with Prometheus'\''s PromQL engine'
	@echo 'make test-bench     vet and test the bench and its controller-runtime peer (modules of their own; no cluster)'
	@echo 'make build          build bin/vm-controller and the kubectl plugin bin/kubectl-vm (the same binary)'
	@echo 'make image          build the container image into bin/image/ (no Docker daemon needed; IMAGE_ARCHS=amd64 for one)'
	@echo 'make release        build linux and darwin, amd64 and arm64 binaries (and kubectl-vm, the plugin) with sha256 checksums into dist/'
	@echo 'make run            local cluster + CRD (+ example VMs with a new CRD), then the controller in the foreground (ARGS=... for more flags)'

tools:
	cluster/cluster.sh build

cluster: tools
	cluster/cluster.sh up

cluster-down:
	cluster/cluster.sh down

cluster-status:
	cluster/cluster.sh status

test:
	cluster/test.sh
	$(MAKE) test-image
	$(MAKE) test-rules
	$(MAKE) test-bench

# The image test builds the binary and the image, unpacks it and runs its entrypoint with
# --version. tools/image is its own module, which `go test ./...` at the root does not enter.
test-image:
	cd tools/image && go vet ./... && go test ./...

# The rules test checks docs/monitoring/prometheus-rules.yaml as promtool check rules does
# (TestCheck; `go run . FILE` there checks another file) and evaluates the alerts with
# Prometheus' PromQL engine over synthetic series. tools/promrules is its own module, so that
# the root's go.mod does not take Prometheus' dependencies.
test-rules:
	cd tools/promrules && go vet ./... && go test ./...

# The bench's own tests (its flags, results files, charts and report against golden files) and
# the peer's. bench/ is a module of its own, so that its chart and profile libraries stay out
# of the root's go.mod, and bench/peer another; `go test ./...` at the root enters neither.
test-bench:
	cd bench && go vet ./... && go test ./...
	cd bench/peer && go vet ./... && go test ./...

# bin/kubectl-vm is the same binary under the kubectl plugin's name: put bin/ on $PATH and
# `kubectl vm start NAME` runs it (docs/run-strategies.md).
build:
	go build -ldflags "-X main.version=$(VERSION)" -o bin/vm-controller .
	cp bin/vm-controller bin/kubectl-vm

run: tools
	cluster/run.sh $(ARGS)

# tools/image is its own module, run from its directory; its paths are absolute, so that the
# tarballs it prints can be passed on as printed (kind load image-archive, crane push) from
# the checkout's root, or from anywhere.
image:
	@for arch in $(IMAGE_ARCHS); do \
		echo "go build linux/$$arch"; \
		GOOS=linux GOARCH=$$arch $(STATIC) -o bin/image/linux-$$arch/vm-controller . || exit 1; \
	done
	cd tools/image && go run . -version '$(VERSION)' -out '$(CURDIR)/bin/image' -created '$(SOURCE_DATE_EPOCH)' \
		$(if $(CA_BUNDLE),-ca-bundle '$(CA_BUNDLE)') \
		$(foreach a,$(IMAGE_ARCHS),-binary '$(a)=$(CURDIR)/bin/image/linux-$(a)/vm-controller')

release:
	VERSION='$(VERSION)' tools/release/release.sh
