package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestScaleFlagsValidate: flags that would measure something else than they say are refused,
// with the flag named.
func TestScaleFlagsValidate(t *testing.T) {
	ok := scaleFlags{vms: 100000, concurrency: 32, restarts: 1, events: "all", rootDisk: "claim"}
	tests := []struct {
		name     string
		scenario string
		change   func(*scaleFlags)
		want     string // "" for valid
	}{
		{"defaults", "all", func(*scaleFlags) {}, ""},
		{"seeded, settled", "all", func(f *scaleFlags) {
			f.seed, f.settle, f.restarts, f.etcd = 1000, time.Minute, 3, "http://127.0.0.1:2379"
			f.rootDisk = "ephemeral"
		}, ""},
		{"seed every VM", "all", func(f *scaleFlags) { f.seed = 100000 }, "--seed"},
		{"negative seed", "all", func(f *scaleFlags) { f.seed = -1 }, "--seed"},
		{"seeded with a tail", "all", func(f *scaleFlags) { f.seed, f.tail, f.rootDisk = 1000, 10000, "ephemeral" }, ""},
		{"seeded with claims", "all", func(f *scaleFlags) { f.seed = 1000 }, "--root-disk"},
		{"unknown root disk", "all", func(f *scaleFlags) { f.rootDisk = "pvc" }, "--root-disk"},
		{"tail without seed", "teardown", func(f *scaleFlags) { f.tail = 10 }, "--tail"},
		{"negative tail", "all", func(f *scaleFlags) { f.seed, f.tail = 1000, -1 }, "--tail"},
		{"nothing left to seed", "all", func(f *scaleFlags) { f.seed, f.tail = 1000, 99000 }, "--tail"},
		{"seeded, all torn down", "all", func(f *scaleFlags) { f.seed, f.teardownAll, f.rootDisk = 1000, true, "ephemeral" }, ""},
		{"teardown-all without seed", "all", func(f *scaleFlags) { f.teardownAll = true }, "--teardown-all"},
		{"API server profiled over the cold starts", "restart", func(f *scaleFlags) { f.apiserverProfile, f.apiserverProfileFor = "/tmp/p", time.Minute }, ""},
		{"API server profiled without a cold start", "idle", func(f *scaleFlags) { f.apiserverProfile, f.apiserverProfileFor = "/tmp/p", time.Minute }, "--apiserver-profile"},
		{"API server profiled for less than a second", "all", func(f *scaleFlags) { f.apiserverProfile = "/tmp/p" }, "--apiserver-profile-for"},
		{"controller profiled over the cold starts", "restart", func(f *scaleFlags) { f.restartProfile, f.restartProfileFor = "/tmp/p", time.Minute }, ""},
		{"controller profiled without a cold start", "burst", func(f *scaleFlags) { f.restartProfile, f.restartProfileFor = "/tmp/p", time.Minute }, "--restart-profile"},
		{"controller profiled for less than a second", "restart", func(f *scaleFlags) { f.restartProfile = "/tmp/p" }, "--restart-profile-for"},
		{"cold starts alternating with a baseline", "restart", func(f *scaleFlags) { f.restartBaseline, f.restarts = "/tmp/base", 6 }, ""},
		{"baseline without a cold start", "teardown", func(f *scaleFlags) { f.restartBaseline, f.restarts = "/tmp/base", 6 }, "--restart-baseline"},
		{"baseline before the memory stage", "all", func(f *scaleFlags) { f.restartBaseline, f.restarts = "/tmp/base", 6 }, "--restart-baseline"},
		{"baseline with one cold start", "restart", func(f *scaleFlags) { f.restartBaseline = "/tmp/base" }, "--restart-baseline"},
		{"baseline and GOMAXPROCS both taking turns", "restart", func(f *scaleFlags) {
			f.restartBaseline, f.restarts, f.restartProcs = "/tmp/base", 6, []int{0, 1}
		}, "--restart-baseline"},
		{"a VM created during the cold starts", "restart", func(f *scaleFlags) { f.restartNewVM = time.Second }, ""},
		{"a VM created without a cold start", "burst", func(f *scaleFlags) { f.restartNewVM = time.Second }, "--restart-new-vm"},
		{"a VM created before the exec", "restart", func(f *scaleFlags) { f.restartNewVM = -time.Second }, "--restart-new-vm"},
		{"etcd without seed", "all", func(f *scaleFlags) { f.etcd = "http://127.0.0.1:2379" }, "--etcd"},
		{"no restarts", "restart", func(f *scaleFlags) { f.restarts = 0 }, "--restarts"},
		{"settle without a cold start", "idle", func(f *scaleFlags) { f.settle = time.Minute }, "--settle"},
		{"settle before the memory's cold start", "memory", func(f *scaleFlags) { f.settle = time.Minute }, ""},
		{"no VMs", "burst", func(f *scaleFlags) { f.vms = 0 }, "--vms"},
		{"no creates in flight", "burst", func(f *scaleFlags) { f.concurrency = 0 }, "--concurrency"},
		{"negative workers", "burst", func(f *scaleFlags) { f.workers = -1 }, "--workers"},
		{"unknown events", "burst", func(f *scaleFlags) { f.events = "none" }, "--events"},
		{"progress every minute", "burst", func(f *scaleFlags) { f.progress = time.Minute }, ""},
		{"negative progress", "burst", func(f *scaleFlags) { f.progress = -time.Second }, "--progress"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := ok
			tc.change(&f)
			err := f.validate(tc.scenario)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("validate: %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("validate: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestScaleStages: seeding leaves out the stages that need every VM's writes, unless --tail or
// --teardown-all brings the teardown back.
func TestScaleStages(t *testing.T) {
	tests := []struct {
		name     string
		scenario string
		f        scaleFlags
		want     []string
	}{
		{"all, no seed", "all", scaleFlags{}, []string{"memory", "restart", "idle", "teardown", "ceiling"}},
		{"all, seeded", "all", scaleFlags{seed: 1000}, []string{"memory", "restart", "idle"}},
		{"all, seeded with a tail", "all", scaleFlags{seed: 1000, tail: 10000}, []string{"memory", "restart", "idle", "teardown"}},
		{"all, seeded, all torn down", "all", scaleFlags{seed: 1000, teardownAll: true}, []string{"memory", "restart", "idle", "teardown"}},
		{"teardown, seeded", "teardown", scaleFlags{seed: 1000}, []string{}},
		{"teardown, seeded, all torn down", "teardown", scaleFlags{seed: 1000, teardownAll: true}, []string{"teardown"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.stages(tc.scenario); !slices.Equal(got, tc.want) {
				t.Errorf("stages(%q) = %v, want %v", tc.scenario, got, tc.want)
			}
		})
	}
}
