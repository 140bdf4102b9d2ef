# Thin entry points: the logic lives in cluster/, so CI (.ci/run) and people run the same
# scripts. See README, "Local cluster".
.PHONY: help tools cluster cluster-down cluster-status test build run

# The version stamped into vm-controller: the commit, marked when the tree has changes.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

help:
	@echo 'make tools          build the control-plane binaries into .cache/bin (skipped when current)'
	@echo 'make cluster        build the tools if needed, then start the local cluster (.cache/kubeconfig)'
	@echo 'make cluster-down   stop the local cluster and delete its state'
	@echo 'make cluster-status exit 0 when the local cluster answers'
	@echo 'make test           gofmt, go vet, then go test ./... against a local cluster'
	@echo 'make build          build bin/vm-controller'
	@echo 'make run            local cluster + CRD + example VMs, then the controller in the foreground (ARGS=... for more flags)'

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

build:
	go build -ldflags "-X main.version=$(VERSION)" -o bin/vm-controller .

run: tools
	cluster/run.sh $(ARGS)
