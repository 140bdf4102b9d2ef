package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

// TestCheck is `promtool check rules` on the shipped file: it parses, with Prometheus'
// default parser, and holds alerts.
func TestCheck(t *testing.T) {
	alerts, err := load(defaultRules)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range alerts {
		if seen[a.rule.Name()] {
			t.Errorf("alert %s is defined twice", a.rule.Name())
		}
		seen[a.rule.Name()] = true
	}
}

// TestCheckFails shows that the check refuses what Prometheus would refuse to load: an
// expression that does not parse, and a field of no rule.
func TestCheckFails(t *testing.T) {
	for name, file := range map[string]string{
		"expression": "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: sum(rate(x[5m])\n",
		"field":      "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: x > 0\n        fro: 5m\n",
		"duration":   "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: x > 0\n        for: 5\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := load(path); err == nil {
				t.Errorf("load accepted %q", file)
			}
		})
	}
}

// The labels a target of Prometheus' Kubernetes service discovery carries that the rules
// group and join by: job and namespace tell installs apart, instance the replicas.
const (
	vmc      = `job="vm-controller/vm-controller",namespace="vm-controller"`
	vmcA     = vmc + `,instance="10.0.0.1:8080"`
	vmcB     = vmc + `,instance="10.0.0.2:8080"`
	other    = `job="vm-controller-b/vm-controller",namespace="vm-controller-b"`
	otherA   = other + `,instance="10.0.1.1:8080"`
	otherB   = other + `,instance="10.0.1.2:8080"`
	kcm      = `job="kube-controller-manager",namespace="kube-system",instance="10.0.9.9:10257"`
	vmcJob   = "vm-controller/vm-controller"
	otherJob = "vm-controller-b/vm-controller"
)

// ruleCase evaluates one alert once a minute over series loaded at one sample a minute
// (the promqltest load syntax), from 0 to end.
type ruleCase struct {
	alert  string
	series string
	end    time.Duration
	// fire: the jobs the alert fires for by end, each labelled job, or "" for an alert
	// without labels (absent()); none: the alert never fires.
	fire []string
	// at, when set, is when the alert first fires for each job of fire: not a minute
	// sooner, as the description promises, nor later.
	at time.Duration
}

func TestRules(t *testing.T) {
	tests := map[string]ruleCase{
		// With the phase collector exporting Creating 0 once no VM is Creating, a VM that
		// was Creating for two minutes leaves a 0 in every later window.
		"StuckCreating/two minutes then Active": {
			alert:  "VirtualMachinesStuckCreating",
			series: `vmcontroller_vms{` + vmcA + `,phase="Creating"} 0 0 1 1 0x60`,
			end:    60 * time.Minute,
		},
		"StuckCreating/never 0 for 35 minutes": {
			alert:  "VirtualMachinesStuckCreating",
			series: `vmcontroller_vms{` + vmcA + `,phase="Creating"} 0 0 1x40`,
			end:    42 * time.Minute,
			fire:   []string{vmcJob},
		},
		// A replica that has run for less than the window has no 0 in it yet: a rolling
		// update while a VM is Creating is no VM stuck for half an hour.
		"StuckCreating/a new replica while a VM is Creating": {
			alert: "VirtualMachinesStuckCreating",
			series: `vmcontroller_vms{` + vmcA + `,phase="Creating"} 0x19 stale
				vmcontroller_vms{` + vmcB + `,phase="Creating"} _x20 1x10 0x30`,
			end: 60 * time.Minute,
		},
		"StuckCreating/another install's VMs": {
			alert: "VirtualMachinesStuckCreating",
			series: `vmcontroller_vms{` + vmcA + `,phase="Creating"} 0x60
				vmcontroller_vms{` + otherA + `,phase="Creating"} 0 1x60`,
			end:  60 * time.Minute,
			fire: []string{otherJob},
		},
		"StuckTerminating/a deletion of two minutes": {
			alert:  "VirtualMachinesStuckTerminating",
			series: `vmcontroller_vms{` + vmcA + `,phase="Terminating"} 0 0 1 1 0x60`,
			end:    60 * time.Minute,
		},
		"StuckTerminating/never 0 for 35 minutes": {
			alert:  "VirtualMachinesStuckTerminating",
			series: `vmcontroller_vms{` + vmcA + `,phase="Terminating"} 0 0 1x40`,
			end:    42 * time.Minute,
			fire:   []string{vmcJob},
			// 1 from 2m: the 30 minutes to 31m hold no 0 (the range leaves out its start),
			// and so for 5 minutes more.
			at: 36 * time.Minute,
		},
		"StuckTerminating/a new replica while a VM is Terminating": {
			alert: "VirtualMachinesStuckTerminating",
			series: `vmcontroller_vms{` + vmcA + `,phase="Terminating"} 0x19 stale
				vmcontroller_vms{` + vmcB + `,phase="Terminating"} _x20 1x10 0x30`,
			end: 60 * time.Minute,
		},
		"StuckTerminating/another install's VMs": {
			alert: "VirtualMachinesStuckTerminating",
			series: `vmcontroller_vms{` + vmcA + `,phase="Terminating"} 0x60
				vmcontroller_vms{` + otherA + `,phase="Terminating"} 0 1x60`,
			end:  60 * time.Minute,
			fire: []string{otherJob},
		},
		"Unknown/a VM on a lost node": {
			alert: "VirtualMachinesUnknown",
			series: `vmcontroller_vms{` + vmcA + `,phase="Unknown"} 0 1x30
				vmcontroller_vms{` + vmcB + `,phase="Unknown"} 0 1x30`,
			end:  30 * time.Minute,
			fire: []string{vmcJob},
			at:   16 * time.Minute,
		},
		// Both replicas count the stop that waits: one alert for the install, at its count.
		"WaitingForLostNode/a stop that waits for a lost node": {
			alert: "VirtualMachinesWaitingForLostNode",
			series: `vmcontroller_vm_reasons{` + vmcA + `,phase="Inactive",reason="NodeLost"} 0 1x30
				vmcontroller_vm_reasons{` + vmcB + `,phase="Inactive",reason="NodeLost"} 0 1x30
				vmcontroller_vm_reasons{` + vmcA + `,phase="Inactive",reason="Stopped"} 5x31`,
			end:  30 * time.Minute,
			fire: []string{vmcJob},
			// NodeLost from 1m, and so for 15 minutes.
			at: 16 * time.Minute,
		},
		"WaitingForLostNode/a deletion that waits for a lost node": {
			alert:  "VirtualMachinesWaitingForLostNode",
			series: `vmcontroller_vm_reasons{` + vmcA + `,phase="Terminating",reason="NodeLost"} 0x5 2x30`,
			end:    30 * time.Minute,
			fire:   []string{vmcJob},
			at:     21 * time.Minute,
		},
		// A node that reboots, or a network blip: NodeLost for 10 minutes, then the node
		// answers and the stop ends.
		"WaitingForLostNode/a node back within 10 minutes": {
			alert: "VirtualMachinesWaitingForLostNode",
			series: `vmcontroller_vm_reasons{` + vmcA + `,phase="Inactive",reason="NodeLost"} 0 1x10 0x30
				vmcontroller_vm_reasons{` + vmcA + `,phase="Inactive",reason="ServerStopped"} 0x11 1x30`,
			end: 40 * time.Minute,
		},
		// A VM to run on a lost node is VirtualMachinesUnknown's: one alert for it, not two.
		"WaitingForLostNode/a VM to run on a lost node": {
			alert:  "VirtualMachinesWaitingForLostNode",
			series: `vmcontroller_vm_reasons{` + vmcA + `,phase="Unknown",reason="NodeLost"} 0 1x30`,
			end:    30 * time.Minute,
		},
		"WaitingForLostNode/another install's VMs": {
			alert: "VirtualMachinesWaitingForLostNode",
			series: `vmcontroller_vm_reasons{` + vmcA + `,phase="Creating",reason="NodeLost"} 0x40
				vmcontroller_vm_reasons{` + otherA + `,phase="Creating",reason="NodeLost"} 0 1x40`,
			end:  40 * time.Minute,
			fire: []string{otherJob},
			at:   16 * time.Minute,
		},
		"DeleteRefused/a deletion refused the server's delete": {
			alert: "VirtualMachinesDeleteRefused",
			series: `vmcontroller_vm_reasons{` + vmcA + `,phase="Terminating",reason="ServerDeleteRefused"} 0 1x30
				vmcontroller_vm_reasons{` + vmcB + `,phase="Terminating",reason="ServerDeleteRefused"} 0 1x30`,
			end:  30 * time.Minute,
			fire: []string{vmcJob},
			at:   16 * time.Minute,
		},
		"DeleteRefused/a stop refused, in another install": {
			alert: "VirtualMachinesDeleteRefused",
			series: `vmcontroller_vm_reasons{` + vmcA + `,phase="Terminating",reason="ServerDeleting"} 3x30
				vmcontroller_vm_reasons{` + otherA + `,phase="Failed",reason="ServerDeleteRefused"} 1x30`,
			end:  30 * time.Minute,
			fire: []string{otherJob},
			at:   15 * time.Minute,
		},
		// The role fixed after 5 minutes: the next try goes through.
		"DeleteRefused/a refusal lifted": {
			alert:  "VirtualMachinesDeleteRefused",
			series: `vmcontroller_vm_reasons{` + vmcA + `,phase="Terminating",reason="DiskReleaseRefused"} 0 1x5 0x30`,
			end:    35 * time.Minute,
		},
		// A standby queues nothing; its series says 0 and the join keeps it out all the same.
		"QueueBacklog/a leader that does not drain": {
			alert: "VMControllerQueueBacklog",
			series: `vmcontroller_leader{` + vmcA + `} 1x40
				workqueue_depth{` + vmcA + `,name="virtualmachines"} 200x40
				workqueue_depth{` + vmcA + `,name="virtualmachines_usage"} 500x40
				vmcontroller_leader{` + vmcB + `} 0x40
				workqueue_depth{` + vmcB + `,name="virtualmachines"} 0x40
				workqueue_depth{` + kcm + `,name="deployment"} 500x40`,
			end:  40 * time.Minute,
			fire: []string{vmcJob},
			// Above 100 for the 15 minutes to 15m, a sample at 0 15 minutes back, and so
			// for 5 minutes more: 20 minutes, as the description says.
			at: 20 * time.Minute,
		},
		// A new leader pod queues every VM at its start and drains them in 10 minutes:
		// min_over_time over a series 5 minutes old fired at 35m.
		"QueueBacklog/a new leader pod that drains its start in 10 minutes": {
			alert: "VMControllerQueueBacklog",
			series: `vmcontroller_leader{` + vmcA + `} 1x29 stale
				workqueue_depth{` + vmcA + `,name="virtualmachines"} 0x29 stale
				vmcontroller_leader{` + vmcB + `} _x30 1x30
				workqueue_depth{` + vmcB + `,name="virtualmachines"} _x30 500x10 0x20`,
			end: 60 * time.Minute,
		},
		// A standby that takes over at 20m has exported its queue, at 0, since it started:
		// its window holds those zeros until 34m, and the backlog counts from the takeover.
		"QueueBacklog/a standby that takes over a backlog": {
			alert: "VMControllerQueueBacklog",
			series: `vmcontroller_leader{` + vmcB + `} 0x19 1x40
				workqueue_depth{` + vmcB + `,name="virtualmachines"} 0x19 300x40`,
			end:  60 * time.Minute,
			fire: []string{vmcJob},
			at:   39 * time.Minute,
		},
		// The series is born at 0 (metrics.New), so the first panic is an increase.
		"ReconcilePanics/first panic": {
			alert:  "VMControllerReconcilePanics",
			series: `vmcontroller_reconcile_total{` + vmcA + `,result="panic"} 0x5 1x20`,
			end:    10 * time.Minute,
			fire:   []string{vmcJob},
		},
		"StuckWorker/another program's queue": {
			alert: "VMControllerStuckWorker",
			series: `vmcontroller_leader{` + vmcA + `} 1x40
				vmcontroller_reconcile_timeout_seconds{` + vmcA + `} 60x40
				workqueue_longest_running_processor_seconds{` + vmcA + `,name="virtualmachines"} 0x40
				workqueue_longest_running_processor_seconds{` + kcm + `,name="deployment"} 0+60x40`,
			end: 40 * time.Minute,
		},
		"StuckWorker/the controller's queue": {
			alert: "VMControllerStuckWorker",
			series: `vmcontroller_leader{` + vmcA + `} 1x40
				vmcontroller_reconcile_timeout_seconds{` + vmcA + `} 60x40
				workqueue_longest_running_processor_seconds{` + vmcA + `,name="virtualmachines"} 0+60x40
				workqueue_longest_running_processor_seconds{` + kcm + `,name="deployment"} 0x40`,
			end:  20 * time.Minute,
			fire: []string{vmcJob},
			// Past 5 minutes (twice the default 1m, at least 5 minutes) at 6m, the first
			// sample above 300 s, and so for 5 minutes more: a worker held 11 minutes.
			at: 11 * time.Minute,
		},
		// Each install's --reconcile-timeout is its own: 10m here makes 20m the limit.
		"StuckWorker/under twice its own install's timeout": {
			alert: "VMControllerStuckWorker",
			series: `vmcontroller_leader{` + vmcA + `} 1x40
				vmcontroller_reconcile_timeout_seconds{` + vmcA + `} 600x40
				workqueue_longest_running_processor_seconds{` + vmcA + `,name="virtualmachines"} 0+30x40
				vmcontroller_leader{` + otherA + `} 1x40
				vmcontroller_reconcile_timeout_seconds{` + otherA + `} 60x40`,
			end: 40 * time.Minute,
		},
		"SeveralLeaders/one leader in each of two installs": {
			alert: "VMControllerSeveralLeaders",
			series: `vmcontroller_leader{` + vmcA + `} 1x30
				vmcontroller_leader{` + vmcB + `} 0x30
				vmcontroller_leader{` + otherA + `} 1x30
				vmcontroller_leader{` + otherB + `} 0x30`,
			end: 30 * time.Minute,
		},
		"SeveralLeaders/two leaders in one install": {
			alert: "VMControllerSeveralLeaders",
			series: `vmcontroller_leader{` + vmcA + `} 1x30
				vmcontroller_leader{` + vmcB + `} 1x30
				vmcontroller_leader{` + otherA + `} 1x30`,
			end:  30 * time.Minute,
			fire: []string{vmcJob},
		},
		"NoLeader/one install leaderless beside one that leads": {
			alert: "VMControllerNoLeader",
			series: `vmcontroller_leader{` + vmcA + `} 0x30
				vmcontroller_leader{` + vmcB + `} 0x30
				vmcontroller_leader{` + otherA + `} 1x30`,
			end:  30 * time.Minute,
			fire: []string{vmcJob},
		},
		"Gone/one install no longer scraped beside one that is": {
			alert: "VMControllerGone",
			series: `vmcontroller_leader{` + vmcA + `} 1x10 stale
				vmcontroller_leader{` + otherA + `} 1x40`,
			end:  40 * time.Minute,
			fire: []string{vmcJob},
		},
		"Gone/a rolling update": {
			alert: "VMControllerGone",
			series: `vmcontroller_leader{` + vmcA + `} 1x10 stale
				vmcontroller_leader{` + vmcB + `} _x9 0 1x30`,
			end: 40 * time.Minute,
		},
		"Absent/another install scraped": {
			alert: "VMControllerAbsent",
			series: `vmcontroller_leader{` + vmcA + `} 1x10 stale
				vmcontroller_leader{` + otherA + `} 1x40`,
			end: 40 * time.Minute,
		},
		"Absent/none scraped": {
			alert:  "VMControllerAbsent",
			series: `up{` + kcm + `} 1x20`,
			end:    20 * time.Minute,
			fire:   []string{""},
		},
		"APIErrors/another program's requests": {
			alert: "VMControllerAPIErrors",
			series: `vmcontroller_leader{` + vmcA + `} 1x40
				rest_client_requests_total{` + vmcA + `,code="200",method="GET",host="api"} 0+100x40
				rest_client_requests_total{` + kcm + `,code="200",method="GET",host="api"} 0+10x40
				rest_client_requests_total{` + kcm + `,code="503",method="GET",host="api"} 0+10x40`,
			end: 40 * time.Minute,
		},
		"APIErrors/the controller's requests": {
			alert: "VMControllerAPIErrors",
			series: `vmcontroller_leader{` + vmcA + `} 1x40
				rest_client_requests_total{` + vmcA + `,code="200",method="GET",host="api"} 0+80x40
				rest_client_requests_total{` + vmcA + `,code="503",method="GET",host="api"} 0+20x40
				rest_client_requests_total{` + kcm + `,code="200",method="GET",host="api"} 0+10000x40`,
			end:  40 * time.Minute,
			fire: []string{vmcJob},
		},
		"APIThrottled/another program's requests": {
			alert: "VMControllerAPIThrottled",
			series: `vmcontroller_leader{` + vmcA + `} 1x40
				rest_client_requests_total{` + vmcA + `,code="200",method="GET",host="api"} 0+100x40
				rest_client_requests_total{` + kcm + `,code="429",method="GET",host="api"} 0+10x40`,
			end: 40 * time.Minute,
		},
		"APIThrottled/the controller's requests": {
			alert: "VMControllerAPIThrottled",
			series: `vmcontroller_leader{` + vmcA + `} 1x40
				rest_client_requests_total{` + vmcA + `,code="429",method="GET",host="api"} 0+10x40`,
			end:  40 * time.Minute,
			fire: []string{vmcJob},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := evaluate(t, tc)
			for _, job := range tc.fire {
				at, ok := got[job]
				switch {
				case !ok:
					t.Errorf("%s did not fire for job %q by %v; fired for %v", tc.alert, job, tc.end, got)
				case tc.at != 0 && at != tc.at:
					t.Errorf("%s fired for job %q at %v, want at %v", tc.alert, job, at, tc.at)
				}
				delete(got, job)
			}
			for job, at := range got {
				t.Errorf("%s fired for job %q at %v, want no alert for it", tc.alert, job, at)
			}
		})
	}
}

// evaluate loads the series, evaluates the alert once a minute as the rule manager would,
// and returns the job of each alert that fired, with the first time it did.
func evaluate(t *testing.T, tc ruleCase) map[string]time.Duration {
	t.Helper()
	alerts, err := load(defaultRules)
	if err != nil {
		t.Fatal(err)
	}
	var rule *rules.AlertingRule
	for _, a := range alerts {
		if a.rule.Name() == tc.alert {
			rule = a.rule
		}
	}
	if rule == nil {
		t.Fatalf("%s has no alert %s", defaultRules, tc.alert)
	}
	store := promqltest.LoadedStorage(t, "load 1m\n"+indent(tc.series))
	t.Cleanup(func() { store.Close() })
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples: 1_000_000,
		Timeout:    time.Minute,
		Parser:     promParser,
		// The default lookback of a Prometheus server: a series without a sample for 5
		// minutes (or with a stale marker) is gone.
		LookbackDelta: 5 * time.Minute,
	})
	t.Cleanup(func() { engine.Close() })
	query := rules.EngineQueryFunc(engine, store)
	fired := map[string]time.Duration{}
	for at := time.Duration(0); at <= tc.end; at += time.Minute {
		if _, err := rule.Eval(context.Background(), 0, time.Unix(0, 0).Add(at), query, nil, 0); err != nil {
			t.Fatalf("evaluate %s at %v: %v", tc.alert, at, err)
		}
		for _, a := range rule.ActiveAlerts() {
			if a.State != rules.StateFiring {
				continue
			}
			job := a.Labels.Get("job") // "" for absent(), which has no labels
			if _, ok := fired[job]; !ok {
				fired[job] = at
			}
		}
	}
	return fired
}

// indent puts each line of series under the load command, as its syntax wants.
func indent(series string) string {
	var b strings.Builder
	for _, l := range strings.Split(series, "\n") {
		b.WriteString("  " + strings.TrimSpace(l) + "\n")
	}
	return b.String()
}
