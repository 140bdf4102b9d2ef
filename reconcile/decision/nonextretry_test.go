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
				p := policy.Decide(w.vm, w.srv, nil, nil, nil, clock)
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
