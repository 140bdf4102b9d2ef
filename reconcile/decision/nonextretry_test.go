package decision_test

import (
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
// failed server once its backoff is over. The decisions go on as the controller's would,
// each on the status the one before wrote, with the clock moved on to the time each asked
// to be looked at again; the time in the message must not move with them.
func TestFailedReplacedWithoutNextRetryField(t *testing.T) {
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
	failed.State, failed.Detail, failed.Since, failed.Message = backend.StateFailed, "Failed", now, "Error: exit code 1"
	w := world{vm: vm, srv: &failed}
	clock := now.Add(time.Second)
	var messages []string
	for range 12 {
		p := policy.Decide(w.vm, w.srv, nil, nil, nil, clock)
		if p.Server != nil && p.Server.Op == decision.DeleteServer {
			if got, want := clock.Sub(now), policy.RestartBackoff; got < want {
				t.Errorf("replaced %s after the failure, before its backoff of %s", got, want)
			}
			return
		}
		w = applyPlan(t, w.vm, w.srv, nil, p)
		messages = append(messages, w.vm.Status().Message)
		if p.RequeueAfter > 0 {
			clock = clock.Add(time.Duration(p.RequeueAfter))
		} else {
			clock = clock.Add(10 * time.Second)
		}
	}
	t.Errorf("the failed server is never replaced (%s after it failed, backoff %s); the messages written:\n%q", clock.Sub(now), policy.RestartBackoff, messages)
}

// TestFailedReplacedWithoutNextRetryFieldNodeAhead: in the same layout, a server whose node's
// clock runs an hour ahead is replaced the backoff after the controller saw its failure, not
// an hour later, and the time in the message does not move on with each look.
func TestFailedReplacedWithoutNextRetryFieldNodeAhead(t *testing.T) {
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
	failed.State, failed.Detail, failed.Since, failed.Message = backend.StateFailed, "Failed", now.Add(time.Hour), "Error: exit code 1"
	w := world{vm: vm, srv: &failed}
	clock := now.Add(time.Second)
	writes := 0
	for range 40 {
		p := policy.Decide(w.vm, w.srv, nil, nil, nil, clock)
		if p.Server != nil && p.Server.Op == decision.DeleteServer {
			if got := clock.Sub(now); got > 3*policy.RestartBackoff {
				t.Errorf("replaced only %s after the failure (backoff %s), %d status writes", got, policy.RestartBackoff, writes)
			}
			return
		}
		if p.Status != nil {
			writes++
		}
		w = applyPlan(t, w.vm, w.srv, nil, p)
		clock = clock.Add(max(time.Duration(p.RequeueAfter), 10*time.Second))
	}
	t.Errorf("never replaced within %s of the failure (backoff %s); %d status writes, last message %q", clock.Sub(now), policy.RestartBackoff, writes, w.vm.Status().Message)
}
