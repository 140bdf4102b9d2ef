package decision_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestFirstFailureBacksOffByControllerClock: a server that was ready for an hour (the status
// last written then) fails for the first time, and the controller sees it at now; the pod's
// finishedAt is by its node's clock, off by skew. Whatever the skew, the failed server is
// replaced once the first backoff has passed by the controller's clock since it saw the
// failure, not sooner (a node behind would cut the backoff short, or skip it) and not later (a
// node ahead would hold the VM). The decisions go on as the controller's would, each on the
// status the one before wrote, at the time it asked to be looked at again.
//
// From these inputs a failure seen late by the controller (its watch lagged, it restarted)
// reads the same as one on a node whose clock is behind by as much: it is taken as the latter.
func TestFirstFailureBacksOffByControllerClock(t *testing.T) {
	tests := map[string]struct {
		skew time.Duration // the node's clock minus the controller's
	}{
		"in step":                {0},
		"ahead a year":           {365 * 24 * time.Hour},
		"behind 5s":              {-5 * time.Second},
		"behind the backoff":     {-10 * time.Second},
		"behind 1m":              {-time.Minute},
		"behind past last write": {-2 * time.Hour},
	}
	file := filepath.Join(cases, "active-steady.txtar")
	policy := casePolicy(t, file)
	want := now.Add(policy.RestartBackoff)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, srv := decidecase.Read(t, file)
			failed := *srv
			failed.State, failed.Detail, failed.Message = backend.StateFailed, "Failed", "Error: exit code 1"
			failed.Since = now.Add(tc.skew)
			w := world{vm: vm, srv: &failed}
			clock := now
			for range 10 {
				p := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: clock})
				if p.Server != nil {
					if clock.Before(want) || clock.After(want) {
						t.Errorf("replaced at %s, %s after the controller saw the failure; want after the backoff, %s",
							clock.Format(time.RFC3339), clock.Sub(now), policy.RestartBackoff)
					}
					return
				}
				if p.RequeueAfter <= 0 {
					t.Fatalf("at %s: the failed server waits with no time to look again", clock.Format(time.RFC3339))
				}
				w = applyPlan(t, w.vm, w.srv, nil, p)
				clock = clock.Add(time.Duration(p.RequeueAfter))
			}
			t.Errorf("the failed server is never replaced (looked at last %s after the failure)", clock.Sub(now))
		})
	}
}
