# Thin entry points: the logic lives in cluster/, so CI (.ci/run) and people run the same
# scripts. See README, "Local cluster".
.PHONY: help tools cluster cluster-down cluster-status test

help:
	@echo 'make tools          build the control-plane binaries into .cache/bin (skipped when current)'
	@echo 'make cluster        build the tools if needed, then start the local cluster (.cache/kubeconfig)'
	@echo 'make cluster-down   stop the local cluster and delete its state'
	@echo 'make cluster-status exit 0 when the local cluster answers'
	@echo 'make test           gofmt, go vet, then go test ./... against a local cluster'

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

# make run (start the controller against the local cluster) belongs here; it comes with the
# controller.
