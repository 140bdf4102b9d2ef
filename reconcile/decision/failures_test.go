package decision_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestFailuresAcrossReady: under runStrategy Always, a server becomes ready and ends after a
// while, and so does each one that replaces it. While each ends sooner than MaxRestartBackoff
// after it became ready, the wait before the next one grows as for a server that never gets
// ready: it did not run stably, and replacing it every RestartBackoff for ever is the loop
// the backoff is there to prevent. Once a server has been ready that long its failures are
// forgotten, whether a decision came at that moment (the look a Ready decision asks for) or
// the server ended before one did. A clean shutdown is counted too (the first one is replaced
// at once). How long a server was ready is told by the controller's clock: a node whose clock
// runs ahead (the pod's finishedAt is by it) does not make a server that ended seconds after
// it was ready one that ran stably.
func TestFailuresAcrossReady(t *testing.T) {
	const s = time.Second
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	tests := map[string]struct {
		end   backend.State   // how each server ends
		ran   time.Duration   // how long each is ready before it ends
		look  bool            // a decision comes when the Ready one asks for another look
		waits []time.Duration // the wait before each replacement
		skew  time.Duration   // the clock of the servers' node minus the controller's
	}{
		"fails soon":                   {backend.StateFailed, 5 * s, true, []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s, 300 * s}, 0},
		"fails just before the bound":  {backend.StateFailed, policy.MaxRestartBackoff - s, true, []time.Duration{10 * s, 20 * s, 40 * s, 80 * s}, 0},
		"fails at the bound":           {backend.StateFailed, policy.MaxRestartBackoff, true, []time.Duration{10 * s, 10 * s, 10 * s, 10 * s}, 0},
		"fails after running stably":   {backend.StateFailed, 10 * time.Minute, true, []time.Duration{10 * s, 10 * s, 10 * s, 10 * s}, 0},
		"the same, no look in between": {backend.StateFailed, 10 * time.Minute, false, []time.Duration{10 * s, 10 * s, 10 * s, 10 * s}, 0},
		"shuts down soon":              {backend.StateStopped, 5 * s, true, []time.Duration{0, 20 * s, 40 * s, 80 * s}, 0},
		"shuts down after stably":      {backend.StateStopped, 10 * time.Minute, true, []time.Duration{0, 0, 0, 0}, 0},
		"fails soon, node ahead":       {backend.StateFailed, 5 * s, true, []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 300 * s}, 6 * time.Minute},
		"fails soon, node far ahead":   {backend.StateFailed, 5 * s, false, []time.Duration{10 * s, 20 * s, 40 * s, 80 * s}, 365 * 24 * time.Hour},
		"shuts down soon, node ahead":  {backend.StateStopped, 5 * s, true, []time.Duration{0, 20 * s, 40 * s, 80 * s}, 6 * time.Minute},
		"fails stably, node behind":    {backend.StateFailed, 10 * time.Minute, true, []time.Duration{10 * s, 10 * s, 10 * s}, -time.Minute},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, srv := decidecase.Read(t, filepath.Join(cases, "active-steady.txtar"))
			w := world{vm: vm, srv: srv}
			clock := now
			decide := func() decision.Plan {
				t.Helper()
				p := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: clock})
				w = applyPlan(t, w.vm, w.srv, nil, p)
				return p
			}
			var waits []time.Duration
			for range tc.waits {
				// Ready now (the first server is, since the case's status says).
				w.srv.State, w.srv.Detail, w.srv.Node = backend.StateReady, "Running", "node-a"
				ready := decide()
				if again := time.Duration(ready.RequeueAfter); tc.look && again > 0 && again < tc.ran {
					clock = clock.Add(again)
					decide()
					clock = clock.Add(-again)
				}
				clock = clock.Add(tc.ran)
				w.srv.State, w.srv.Since = tc.end, clock.Add(tc.skew)
				wait := time.Duration(0)
				p := decide()
				if p.Server == nil {
					next := w.vm.Status().NextRetryTime
					if next.IsZero() {
						t.Fatalf("the ended server is neither replaced nor waited for:\n%s", renderPlan(t, p))
					}
					wait = next.Sub(clock)
					clock = next
					p = decide()
				}
				if p.Server == nil || p.Server.Op != decision.DeleteServer {
					t.Fatalf("the ended server is not replaced after its wait:\n%s", renderPlan(t, p))
				}
				waits = append(waits, wait)
				w.srv = nil // gone
				if p := decide(); p.Server == nil || p.Server.Op != decision.CreateServer {
					t.Fatalf("no next server:\n%s", renderPlan(t, p))
				}
			}
			if !slices.Equal(waits, tc.waits) {
				t.Errorf("waits before the replacements %v, want %v", waits, tc.waits)
			}
		})
	}
}

// TestFailuresKeptForUnrecordedServer: the server the status names ready is deleted by
// someone; a create makes the next one, and the status write that records it does not go
// through (a conflict, a failover). The next decision finds the new server ready, the status
// still Active and Ready with the old server's time: the new server's failures are forgotten
// only once it has been ready for MaxRestartBackoff itself, not a second after it is seen.
func TestFailuresKeptForUnrecordedServer(t *testing.T) {
	file := filepath.Join(cases, "active-steady.txtar")
	vm, _ := decidecase.Read(t, file)
	policy := casePolicy(t, file)
	vm = patchVM(t, vm, `{"status":{"consecutiveFailures":3}}`)
	created := applyPlan(t, vm, nil, nil, policy.Decide(decision.Input{VM: vm, Now: now})).srv // its status write is lost
	seen := now.Add(30 * time.Second)
	w := applyPlan(t, vm, ready(created), nil, policy.Decide(decision.Input{VM: vm, Server: ready(created), Now: seen}))
	for _, tc := range []struct {
		after time.Duration // since the new server is first seen ready
		want  int           // consecutiveFailures
	}{
		{time.Second, 3},
		{policy.MaxRestartBackoff - time.Second, 3},
		{policy.MaxRestartBackoff, 0},
	} {
		p := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: seen.Add(tc.after)})
		if got := applyPlan(t, w.vm, w.srv, nil, p).vm.Status().ConsecutiveFailures; got != tc.want {
			t.Errorf("server %s ready for %s: consecutiveFailures %d, want %d", w.srv.ID, tc.after, got, tc.want)
		}
	}
}
