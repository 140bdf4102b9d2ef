package decision_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// movingMessage is the message of the condition Moving in vm's status, "" without one.
func movingMessage(vm schema.VirtualMachine) string {
	if c := vm.Status().Condition(decision.ConditionMoving); c != nil {
		return c.Message
	}
	return ""
}

// TestEvictedAgainDuringMove: under evictionStrategy Replace a server is evicted from node-a;
// the move's next server lands on node-b, which stays schedulable (a descheduler, a kubelet
// under pressure), and is evicted in turn. The next create prefers to keep off node-b; the
// backend refuses it (a quota), and every try after a refusal must keep off node-b too. The
// refusal's status names no server, so the condition Moving is all the next try has of the
// move: its message says the latest eviction (node-b), written once, when that eviction is
// first seen, and kept word for word through the decisions and refusals after it; the Events
// MovingServer and ServerMoved quote it. A move that carries out a migrate request still
// requires its servers to keep off the migration's source node (node-a) instead.
func TestEvictedAgainDuringMove(t *testing.T) {
	tests := map[string]struct {
		file string // the golden case of the first eviction, from node-a
		// unseen: the second server is evicted and gone before a decision sees it (the
		// backend remembers it: backend.Gone), rather than seen being evicted.
		unseen bool
		// What each create after the second eviction keeps off: required, preferred.
		avoid, prefer string
	}{
		"seen":                   {file: "evict-replace-evicting", prefer: "node-b"},
		"gone unseen":            {file: "evict-replace-evicting", unseen: true, prefer: "node-b"},
		"migrating, seen":        {file: "evict-replace-migrate-evicting", avoid: "node-a"},
		"migrating, gone unseen": {file: "evict-replace-migrate-evicting", unseen: true, avoid: "node-a"},
	}
	dis := backend.Disruption{Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(cases, tc.file+".txtar")
			vm, srv := decidecase.Read(t, file)
			p := casePolicy(t, file)
			at := now
			w := world{vm: vm, srv: srv}
			var writes []string // the message of Moving in each status written
			decide := func(what string) decision.Plan {
				t.Helper()
				plan := p.Decide(decision.Input{VM: w.vm, Server: w.srv, Gone: w.lastGone, Now: at})
				w = applyPlanWorld(t, w, plan)
				if plan.Status != nil {
					writes = append(writes, movingMessage(w.vm))
				}
				if again := p.Decide(decision.Input{VM: w.vm, Server: w.srv, Gone: w.lastGone, Now: at}); plan.Server == nil && again.Status != nil {
					t.Errorf("%s: deciding again writes the status again:\n%s", what, renderPlan(t, again))
				}
				at = at.Add(time.Second)
				return plan
			}
			decide("the first eviction") // ServerEvicted, from node-a
			first := movingMessage(w.vm)
			if !strings.Contains(first, "evicted from node node-a (") {
				t.Fatalf("after the first eviction, Moving says %q", first)
			}
			since := w.vm.Status().Condition(decision.ConditionMoving).LastTransitionTime
			w.srv = nil // gone
			if plan := decide("the first create"); serverOp(plan) != decision.CreateServer {
				t.Fatalf("once the evicted server is gone:\n%s\nwant a create", renderPlan(t, plan))
			}
			// The next server lands on node-b and starts; then it is evicted in turn.
			w.srv.ID, w.srv.Node, w.srv.State, w.srv.Detail = "pod-uid-2", "node-b", backend.StateStarting, "Running"
			decide("the next server starting")
			if got := movingMessage(w.vm); got != first {
				t.Fatalf("while the next server starts, Moving says %q, want %q kept", got, first)
			}
			if tc.unseen {
				w.lastGone = &backend.Gone{Name: w.srv.Name, ID: w.srv.ID, Node: "node-b", Disruption: dis}
				w.srv = nil
			} else {
				d := dis
				w.srv.Disruption, w.srv.Deleting = &d, true
				decide("the second eviction") // ServerEvicted, from node-b
				w.srv = nil                   // gone, and not remembered
			}
			gone := w.lastGone // what the decision of the create after the second eviction is given
			for i := range 3 { // the create, then the create after each of two refusals
				plan := p.Decide(decision.Input{VM: w.vm, Server: w.srv, Gone: w.lastGone, Now: at})
				if serverOp(plan) != decision.CreateServer {
					t.Fatalf("decision %d after the second eviction:\n%s\nwant a create", i, renderPlan(t, plan))
				}
				if s := plan.Server.Spec; s.AvoidNode != tc.avoid || s.PreferAvoidNode != tc.prefer {
					t.Errorf("decision %d (after %d refusals) creates a server that avoids %q and prefers to avoid %q, want %q and %q",
						i, i, s.AvoidNode, s.PreferAvoidNode, tc.avoid, tc.prefer)
				}
				if e := plan.Server.Event; e.Reason != decision.ReasonMovingServer || !strings.Contains(e.Message, "evicted from node node-b (") {
					t.Errorf("decision %d: the create's Event is %s %q, want %s saying the eviction from node-b", i, e.Reason, e.Message, decision.ReasonMovingServer)
				}
				if e := plan.Server.Event; tc.avoid != "" && !strings.HasSuffix(e.Message, " on a node other than "+tc.avoid) {
					t.Errorf("decision %d: the create's Event %q does not name the node it keeps off, %s", i, e.Message, tc.avoid)
				}
				refused := p.Rejected(decision.Input{VM: w.vm, Gone: gone, Now: at}, "exceeded quota")
				w = applyPlanWorld(t, w, refused)
				if refused.Status != nil {
					writes = append(writes, movingMessage(w.vm))
				}
				gone, at = w.lastGone, at.Add(decision.RejectedRetry)
			}
			second := movingMessage(w.vm)
			if !strings.Contains(second, "evicted from node node-b (") {
				t.Errorf("after the second eviction, Moving says %q, want the eviction from node-b", second)
			}
			if c := w.vm.Status().Condition(decision.ConditionMoving); c == nil || !c.LastTransitionTime.Equal(since) {
				t.Errorf("Moving %+v, want it True since the move began (%s)", c, since)
			}
			// The message changed once, when the second eviction was first decided on.
			changes := 0
			for i := 1; i < len(writes); i++ {
				if writes[i] != writes[i-1] {
					changes++
				}
			}
			if writes[0] != first || writes[len(writes)-1] != second || changes != 1 {
				t.Errorf("Moving's message in the statuses written:\n%s\nwant %q, then from the second eviction on one message that says node-b", strings.Join(writes, "\n"), first)
			}

			// The create goes through at last; its server is ready on node-c.
			plan := decide("the create let through")
			if serverOp(plan) != decision.CreateServer {
				t.Fatalf("want a create:\n%s", renderPlan(t, plan))
			}
			w.srv.ID, w.srv.Node, w.srv.State, w.srv.Detail = "pod-uid-3", "node-c", backend.StateReady, "Running"
			plan = decide("the move's server ready")
			var moved []string
			for _, e := range plan.Events {
				if e.Reason == decision.ReasonServerMoved {
					moved = append(moved, e.Message)
				}
			}
			if len(moved) != 1 || !strings.Contains(moved[0], "on node node-c: "+second) {
				t.Errorf("ServerMoved: %q, want one that says node-c and quotes %q", moved, second)
			}
			if m := movingMessage(w.vm); m != "" {
				t.Errorf("the move's server is ready, and Moving stays: %q", m)
			}
		})
	}
}

// TestPreferenceHeldUntilMoveReady: the preference against the node a server was evicted from
// (docs/eviction.md) is asked of every server the move creates until one of them is ready,
// since the move is not over until then: the move's server that fails before it is ready is
// replaced by one that still prefers to keep off node-a, with the Event MovingServer, and
// Moving stays. Once a server of the move is ready, Moving goes with ServerMoved, and the next
// server (that one failed) places freely.
func TestPreferenceHeldUntilMoveReady(t *testing.T) {
	file := filepath.Join(cases, "evict-replace-evicting.txtar")
	vm, srv := decidecase.Read(t, file)
	p := casePolicy(t, file)
	at := now
	w := world{vm: vm, srv: srv}
	decide := func() decision.Plan {
		plan := p.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: at})
		w = applyPlan(t, w.vm, w.srv, nil, plan)
		at = at.Add(max(time.Duration(plan.RequeueAfter), 5*time.Second))
		return plan
	}
	// nextCreate decides until a server is created (the failed one deleted, its backoff waited
	// out, the deleted one gone) and returns that create.
	nextCreate := func(what string) *decision.ServerAction {
		t.Helper()
		for range 20 {
			if w.srv != nil && w.srv.Deleting {
				w.srv = nil // gone
			}
			if plan := decide(); serverOp(plan) == decision.CreateServer {
				return plan.Server
			}
		}
		t.Fatalf("%s: no server created; the VM is %s/%s", what, w.vm.Status().Phase, w.vm.Status().Reason)
		return nil
	}
	fail := func(node string) {
		w.srv.Node, w.srv.State, w.srv.Detail, w.srv.Since = node, backend.StateFailed, "Failed", at
	}

	decide() // ServerEvicted, from node-a
	if a := nextCreate("after the eviction"); a.Spec.PreferAvoidNode != "node-a" {
		t.Fatalf("the move's first server prefers to avoid %q, want node-a", a.Spec.PreferAvoidNode)
	}
	w.srv.ID = "pod-uid-2"
	fail("node-b") // before it was ever ready
	a := nextCreate("after the move's server failed")
	if a.Spec.PreferAvoidNode != "node-a" || a.Event.Reason != decision.ReasonMovingServer {
		t.Errorf("the server after the move's failed one prefers to avoid %q, with the Event %s; want node-a, %s",
			a.Spec.PreferAvoidNode, a.Event.Reason, decision.ReasonMovingServer)
	}
	if movingMessage(w.vm) == "" {
		t.Errorf("the move's server failed before it was ready, and Moving went: %s", w.vm.Status().Reason)
	}

	w.srv.ID, w.srv.Node, w.srv.State, w.srv.Detail = "pod-uid-3", "node-c", backend.StateReady, "Running"
	plan := decide()
	if movingMessage(w.vm) != "" || !hasEvent(plan, decision.ReasonServerMoved) {
		t.Fatalf("the move's server is ready:\n%s\nwant ServerMoved, and Moving gone", renderPlan(t, plan))
	}
	fail("node-c")
	if a := nextCreate("after the moved server failed"); a.Spec.PreferAvoidNode != "" || a.Event.Reason == decision.ReasonMovingServer {
		t.Errorf("the server after the moved one prefers to avoid %q, with the Event %s; want it placed freely",
			a.Spec.PreferAvoidNode, a.Event.Reason)
	}
}

// hasEvent reports whether plan records an Event of reason.
func hasEvent(plan decision.Plan, reason string) bool {
	for _, e := range plan.Events {
		if e.Reason == reason {
			return true
		}
	}
	return false
}
