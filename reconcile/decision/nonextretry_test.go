package decision_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestFailedReplacedWithoutNextRetryField: a layout without status.nextRetryTime (the
// tutorial's v1alpha1 CRD lacks it: the next try is in the message only) still replaces a
// failed server once its backoff is over, by the controller's clock, whatever its node's
// clock says. The decisions go on as the controller's would, each on the status the one
// before wrote, with the clock moved on to the time each asked to be looked at again (10s at
// least); the time in the message must not move on with them.
func TestFailedReplacedWithoutNextRetryField(t *testing.T) {
	tests := map[string]struct {
		ended time.Duration // when the server ended by its node's clock, from the controller's now
	}{
		"node in step":         {0},
		"node an hour ahead":   {time.Hour},
		"node a minute behind": {-time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(cases, "active-steady.txtar")
			vm0, srv := decidecase.Read(t, file)
			policy := casePolicy(t, file)
			policy.RootDisk = decision.RootDiskEphemeral
			f := vm0.Fields()
			f.NextRetryTime = ""
			vm, err := schema.Parse(vm0.JSON(), f)
			if err != nil {
				t.Fatal(err)
			}
			failed := *srv
			failed.State, failed.Detail, failed.Since, failed.Message = backend.StateFailed, "Failed", now.Add(tc.ended), "Error: exit code 1"
			w := world{vm: vm, srv: &failed}
			clock := now.Add(time.Second)
			var messages []string
			for range 40 {
				p := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: clock})
				if p.Server != nil && p.Server.Op == decision.DeleteServer {
					if got := clock.Sub(now); got > 3*policy.RestartBackoff {
						t.Errorf("replaced only %s after the failure (backoff %s); the messages written:\n%q", got, policy.RestartBackoff, messages)
					}
					if tc.ended >= 0 && clock.Sub(now) < policy.RestartBackoff {
						t.Errorf("replaced %s after the failure, before its backoff of %s", clock.Sub(now), policy.RestartBackoff)
					}
					return
				}
				if p.Status != nil {
					messages = append(messages, p.Status.Message)
				}
				w = applyPlan(t, w.vm, w.srv, nil, p)
				clock = clock.Add(max(time.Duration(p.RequeueAfter), 10*time.Second))
			}
			t.Errorf("never replaced within %s of the failure (backoff %s); the messages written:\n%q", clock.Sub(now), policy.RestartBackoff, messages)
		})
	}
}

// TestRetryWithoutNextRetryFieldHoldsThroughOtherWrites: in a layout without
// status.nextRetryTime, on a node whose clock runs an hour ahead, the failure was recorded 5s
// ago with its retry at 12:00:05. The spec changes since (a new generation), and the status
// write of that moves lastUpdateTime: the retry stays at the time the message gives, rather
// than moving on with each write.
func TestRetryWithoutNextRetryFieldHoldsThroughOtherWrites(t *testing.T) {
	dir := t.TempDir()
	base, err := os.ReadFile(filepath.Join(cases, "base.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "base.yaml"), base, 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "recorded.txtar")
	if err := os.WriteFile(file, []byte(`The failure recorded 5s ago, the spec changed since.
-- vm.patch.yaml --
metadata: {generation: 2}
spec: {evictionStrategy: None}
status:
  phase: Failed
  reason: ServerFailed
  observedGeneration: 1
  message: 'Server test-vm-server failed (Error: exit code 1); a new server will be created at 2026-06-01T12:00:05Z'
  lastUpdateTime: "2026-06-01T11:59:55Z"
  server: {name: test-vm-server, id: pod-uid-1, state: Failed}
-- server.yaml --
name: test-vm-server
id: pod-uid-1
state: Failed
detail: Failed
deleting: false
spec:
  cpu: "2"
  memory: "4G"
  rootDisk: "40G"
  image: registry.k8s.io/pause:3.10
since: -1h
message: "Error: exit code 1"
`), 0o644); err != nil {
		t.Fatal(err)
	}
	vm0, srv := decidecase.Read(t, file)
	f := vm0.Fields()
	f.NextRetryTime = ""
	vm, err := schema.Parse(vm0.JSON(), f)
	if err != nil {
		t.Fatal(err)
	}
	p := casePolicy(t, filepath.Join(cases, "active-steady.txtar"))
	p.RootDisk = decision.RootDiskEphemeral
	w := world{vm: vm, srv: srv}
	clock, retry := now, now.Add(5*time.Second)
	writes := 0
	for range 20 {
		plan := p.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: clock})
		if plan.Server != nil && plan.Server.Op == decision.DeleteServer {
			if clock.After(retry) {
				t.Errorf("replaced at %s, the recorded retry was %s", clock.Format(time.RFC3339), retry.Format(time.RFC3339))
			}
			return
		}
		if plan.Status != nil {
			writes++
		}
		w = applyPlan(t, w.vm, w.srv, nil, plan)
		clock = clock.Add(max(time.Duration(plan.RequeueAfter), time.Second))
	}
	t.Errorf("not replaced by %s (recorded retry %s); %d status writes; last message %q",
		clock.Format(time.RFC3339), retry.Format(time.RFC3339), writes, w.vm.Status().Message)
}
