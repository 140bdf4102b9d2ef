package decision_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestRefusalKeepsEviction: the plan of a backend's refusal (a server refused, a resize
// refused, a disk refused) carries the eviction strategy's conditions as the plan refused
// does. EvictionBlocked stays, with no second Warning DrainBlocked, in the refusal's plan or
// in the next decision's; Moving stays, and the next decision's server still follows the
// eviction (MovingServer).
func TestRefusalKeepsEviction(t *testing.T) {
	tests := map[string]struct {
		// The golden case the VM starts from, and whether its own plan is carried out first
		// (its status then holds the condition).
		file  string
		carry bool
		// A JSON merge patch of the VM then ("" for none), and a change of the case's policy
		// (nil for none).
		patch  string
		policy func(p *decision.Policy)
		// The refusal of the next plan's server action (action, "" for none).
		refuse func(p decision.Policy, vm schema.VirtualMachine, srv *backend.Server) decision.Plan
		action decision.ServerOp
		// The condition the refusal keeps, and the reason of the Event of the server action
		// the decision after it asks for ("" for none).
		keep, next string
	}{
		// A drain waits for the VM, and a resize is refused: RestartRequired, the drain
		// still held.
		"resize refused on a cordoned node": {file: "evict-block-cordoned", carry: true, patch: `{"metadata":{"generation":2},"spec":{"resource":{"cpu":4}}}`,
			policy: func(p *decision.Policy) { p.Resize = decision.ResizeManual },
			refuse: func(p decision.Policy, vm schema.VirtualMachine, srv *backend.Server) decision.Plan {
				return p.ResizeRefused(decision.Input{VM: vm, Server: srv, Now: now}, "node capacity")
			},
			action: decision.ResizeServer, keep: decision.ConditionEvictionBlocked},
		// The same under --resize in-place: the next decision replaces the server, and
		// EvictionBlocked goes with it, without a Warning.
		"resize refused on a cordoned node, in place": {file: "evict-block-cordoned", carry: true, patch: `{"metadata":{"generation":2},"spec":{"resource":{"cpu":4}}}`,
			refuse: func(p decision.Policy, vm schema.VirtualMachine, srv *backend.Server) decision.Plan {
				return p.ResizeRefused(decision.Input{VM: vm, Server: srv, Now: now}, "node capacity")
			},
			action: decision.ResizeServer, keep: decision.ConditionEvictionBlocked, next: decision.ReasonReplacingServer},
		// A drain waits for the VM, and its disk is refused.
		"disk refused on a cordoned node": {file: "evict-block-cordoned", carry: true,
			refuse: func(p decision.Policy, vm schema.VirtualMachine, srv *backend.Server) decision.Plan {
				return p.DiskRejected(decision.Input{VM: vm, Server: srv, Now: now}, "forbidden", false)
			},
			keep: decision.ConditionEvictionBlocked},
		// The evicted server is gone, and the next one is refused (a quota): the move stands,
		// and the next try is the move's.
		"server refused during a move": {file: "evict-replace-gone",
			refuse: func(p decision.Policy, vm schema.VirtualMachine, _ *backend.Server) decision.Plan {
				return p.Rejected(decision.Input{VM: vm, Now: now}, "exceeded quota")
			},
			action: decision.CreateServer, keep: decision.ConditionMoving, next: decision.ReasonMovingServer},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(cases, tc.file+".txtar")
			vm, srv := decidecase.Read(t, file)
			budget := decidecase.Budget(t, file)
			p := casePolicy(t, file)
			if tc.policy != nil {
				tc.policy(&p)
			}
			if tc.carry {
				w := applyPlanBudget(t, vm, srv, nil, budget, p.Decide(decision.Input{VM: vm, Server: srv, Budget: budget, Now: now}))
				vm, srv, budget = w.vm, w.srv, w.budget
			}
			if tc.patch != "" {
				vm = patchVM(t, vm, tc.patch)
			}
			was := vm.Status().Condition(tc.keep)
			if was == nil {
				t.Fatalf("the VM carries no %s:\n%s", tc.keep, vm.JSON())
			}
			plan := p.Decide(decision.Input{VM: vm, Server: srv, Budget: budget, Now: now})
			if op := serverOp(plan); op != tc.action {
				t.Fatalf("plan:\n%s\nwant a server action %q", renderPlan(t, plan), tc.action)
			}
			refused := tc.refuse(p, vm, srv)
			checkRefusalEviction(t, vm, plan, refused)
			if c := refused.Status.Condition(tc.keep); c == nil || c.Reason != was.Reason || c.Message != was.Message ||
				!c.LastTransitionTime.Equal(was.LastTransitionTime) {
				t.Errorf("the refusal's %s is %+v, want it kept as %+v", tc.keep, c, *was)
			}
			if refused.Budget != nil {
				t.Errorf("the refusal acts on the budget: %+v", refused.Budget)
			}

			w := applyPlanBudget(t, vm, srv, nil, budget, refused)
			next := p.Decide(decision.Input{VM: w.vm, Server: w.srv, Budget: w.budget, Now: now})
			events := next.Events
			if next.Server != nil {
				events = append(slices.Clone(events), next.Server.Event)
			}
			if i := slices.IndexFunc(events, func(e decision.Event) bool { return e.Reason == decision.ReasonDrainBlocked }); i >= 0 {
				t.Errorf("the next decision warns again: %s", events[i].Message)
			}
			if next.Server == nil && tc.next != "" || next.Server != nil && next.Server.Event.Reason != tc.next {
				t.Errorf("the next decision:\n%s\nwant a server action with the Event %q", renderPlan(t, next), tc.next)
			}
			if next.Server == nil && next.Status != nil && next.Status.Condition(tc.keep) == nil {
				t.Errorf("the next decision drops %s:\n%s", tc.keep, renderPlan(t, next))
			}
		})
	}
}

// checkRefusalEviction fails the test if refused, the plan of a backend's refusal of what plan
// asked for vm, carries the conditions Moving and EvictionBlocked otherwise than plan does, or
// a Warning DrainBlocked that plan does not: a refusal neither drops them (the next decision
// would give the Warning again, and lose the move) nor brings them.
func checkRefusalEviction(t *testing.T, vm schema.VirtualMachine, plan, refused decision.Plan) {
	t.Helper()
	status := func(p decision.Plan) schema.Status {
		if p.Status != nil {
			return *p.Status
		}
		return vm.Status()
	}
	want, got := status(plan), status(refused)
	for _, typ := range []string{decision.ConditionMoving, decision.ConditionEvictionBlocked} {
		w, g := want.Condition(typ), got.Condition(typ)
		if (w == nil) != (g == nil) || w != nil && (w.Status != g.Status || w.Reason != g.Reason || w.Message != g.Message) {
			t.Errorf("%s: the refusal's is %+v, the plan refused's %+v\nplan:\n%s\nrefusal:\n%s", typ, g, w, renderPlan(t, plan), renderPlan(t, refused))
		}
	}
	warns := func(p decision.Plan) bool {
		return slices.ContainsFunc(p.Events, func(e decision.Event) bool { return e.Reason == decision.ReasonDrainBlocked })
	}
	if warns(plan) != warns(refused) {
		t.Errorf("DrainBlocked: the plan refused warns %t, the refusal %t\nplan:\n%s\nrefusal:\n%s", warns(plan), warns(refused), renderPlan(t, plan), renderPlan(t, refused))
	}
}

// serverOp is the operation of plan's server action, "" when it has none.
func serverOp(plan decision.Plan) decision.ServerOp {
	if plan.Server == nil {
		return ""
	}
	return plan.Server.Op
}

// TestRejectedKeepsFailures: for every golden case whose plan creates a server, the status of
// the backend's refusal of that create (Rejected) keeps the failure count the server was to
// start with. A failed server that went during its backoff counts once the backoff is over
// (failed-deleted-after-backoff: 5, not 4); a refusal that lost the count would let the next
// server's failure back off for no longer than the last one.
func TestRejectedKeepsFailures(t *testing.T) {
	creates := 0
	for _, file := range caseFiles(t) {
		vm, srv := decidecase.Read(t, file)
		gone, disk, budget := decidecase.Gone(t, file), decidecase.Disk(t, file), decidecase.Budget(t, file)
		p := casePolicy(t, file)
		plan := p.Decide(decision.Input{VM: vm, Server: srv, Gone: gone, Disk: disk, Budget: budget, Now: now})
		if serverOp(plan) != decision.CreateServer || plan.Status == nil {
			continue
		}
		creates++
		refused := p.Rejected(decision.Input{VM: vm, Disk: disk, Gone: gone, Now: now}, "exceeded quota")
		st := vm.Status() // what the refusal leaves: a VM refused already may have it written
		if refused.Status != nil {
			st = *refused.Status
		}
		if got, want := st.ConsecutiveFailures, plan.Status.ConsecutiveFailures; got != want {
			t.Errorf("%s: the refusal's consecutiveFailures is %d, the create's %d", filepath.Base(file), got, want)
		}
	}
	if creates == 0 {
		t.Fatal("no golden case creates a server")
	}
}

// TestRejectedKeepsAvoidedNode: a server created to move the VM off a node (the next one after
// an eviction under Replace, which prefers another node; a migration's, which requires one) and
// refused by the backend is asked for again, after each refusal, keeping off the same node as
// the create refused. The refusal's status is all the next decision has of the move: the
// status that named the evicted server on its node (ServerEvicted) is replaced by the refusal's,
// and a migrate request the refused create was to carry out was recorded by its plan only.
func TestRejectedKeepsAvoidedNode(t *testing.T) {
	tests := map[string]struct {
		file          string // the golden case whose plan creates the server
		avoid, prefer string // the node the create keeps off: required, preferred
	}{
		"evicted, gone":                         {"evict-replace-gone", "", "node-a"},
		"evicted without a drain, gone":         {"evict-replace-undrained-gone", "", "node-a"},
		"evicted, gone unseen":                  {"evict-replace-gone-unseen", "", "node-a"},
		"evicted under Manual, gone unseen":     {"evict-replace-manual-gone-unseen", "", "node-a"},
		"evicted, gone, a migrate request seen": {"evict-replace-migrate-gone", "node-a", ""},
		"migrated, gone":                        {"migrate-create", "node-a", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(cases, tc.file+".txtar")
			vm, srv := decidecase.Read(t, file)
			gone, disk, budget := decidecase.Gone(t, file), decidecase.Disk(t, file), decidecase.Budget(t, file)
			p := casePolicy(t, file)
			at := now
			for i := range 3 { // the create, then the create after each of two refusals
				plan := p.Decide(decision.Input{VM: vm, Server: srv, Gone: gone, Disk: disk, Budget: budget, Now: at})
				if serverOp(plan) != decision.CreateServer {
					t.Fatalf("decision %d:\n%s\nwant a create", i, renderPlan(t, plan))
				}
				if s := plan.Server.Spec; s.AvoidNode != tc.avoid || s.PreferAvoidNode != tc.prefer {
					t.Errorf("decision %d (after %d refusals) creates a server that avoids %q and prefers to avoid %q, want %q and %q",
						i, i, s.AvoidNode, s.PreferAvoidNode, tc.avoid, tc.prefer)
				}
				w := applyPlanWorld(t, world{vm: vm, srv: srv, lastGone: gone, disk: disk, budget: budget}, p.Rejected(decision.Input{VM: vm, Disk: disk, Gone: gone, Now: at}, "exceeded quota"))
				vm, srv, gone, disk, budget, at = w.vm, w.srv, w.lastGone, w.disk, w.budget, at.Add(time.Minute)
			}
		})
	}
}

// TestRejectedKeepsMoveSeenOnceGone: under evictionStrategy Replace, a server evicted and gone
// before any decision saw it (the backend remembers it: backend.Departures) moves the VM, and
// the backend refuses the next server (a quota). The refusal's status keeps the move's
// condition Moving, as the create refused would have written it, and the try a minute later
// is still the move's: MovingServer, keeping off the node the server was evicted from. Before,
// the refusal was decided without what the backend remembers: its status had no Moving, the
// next try was a plain CreatingServer that could land on the drained node, and the move's
// Event ServerMoved never came.
func TestRejectedKeepsMoveSeenOnceGone(t *testing.T) {
	for _, name := range []string{"evict-replace-gone-unseen", "evict-replace-manual-gone-unseen", "evict-replace-once-gone-unseen"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(cases, name+".txtar")
			vm, _ := decidecase.Read(t, file)
			gone := decidecase.Gone(t, file)
			p := casePolicy(t, file)
			plan := p.Decide(decision.Input{VM: vm, Gone: gone, Now: now})
			if serverOp(plan) != decision.CreateServer || plan.Status == nil || plan.Status.Condition(decision.ConditionMoving) == nil {
				t.Fatalf("plan:\n%s\nwant a create with the condition Moving", renderPlan(t, plan))
			}
			refused := p.Rejected(decision.Input{VM: vm, Gone: gone, Now: now}, "exceeded quota")
			checkRefusalEviction(t, vm, plan, refused)

			w := applyPlanWorld(t, world{vm: vm, lastGone: gone}, refused)
			next := p.Decide(decision.Input{VM: w.vm, Server: w.srv, Gone: w.lastGone, Disk: w.disk, Budget: w.budget, Now: now.Add(time.Minute)})
			if serverOp(next) != decision.CreateServer || next.Server.Event.Reason != decision.ReasonMovingServer ||
				next.Server.Spec.PreferAvoidNode != "node-a" {
				t.Errorf("a minute after the refusal:\n%s\nwant a create with the Event %s that prefers to avoid node-a",
					renderPlan(t, next), decision.ReasonMovingServer)
			}
		})
	}
}

// refuseCreate is the plan of the backend's refusal of a create decided on vm, gone and disk.
func refuseCreate(p decision.Policy, vm schema.VirtualMachine, gone *backend.Gone, disk *backend.Disk, at time.Time) decision.Plan {
	return p.Rejected(decision.Input{VM: vm, Disk: disk, Gone: gone, Now: at}, "exceeded quota")
}

// TestRejectedReportsDisk: the status of a refused create (a missing PriorityClass, a quota)
// reports the VM's disk as the backend observed it, as the create's own status would have: a
// disk bound since the last status write (the server made on it is no write of its own:
// onTheWay) is Bound in the refusal's status, not Pending for as long as the refusals last. A
// refusal decided again on the world it left writes nothing new.
func TestRejectedReportsDisk(t *testing.T) {
	creates := 0
	for _, file := range decidecase.Files(t, claimCases) {
		vm, srv := decidecase.Read(t, file)
		gone, disk, budget := decidecase.Gone(t, file), decidecase.Disk(t, file), decidecase.Budget(t, file)
		p := casePolicy(t, file)
		if p.RootDisk == decision.RootDiskEphemeral || disk == nil {
			continue
		}
		name := filepath.Base(file)
		at := now
		var last decision.Plan
		for i := range 3 { // the create, then the create after each of two refusals
			plan := p.Decide(decision.Input{VM: vm, Server: srv, Gone: gone, Disk: disk, Budget: budget, Now: at})
			if serverOp(plan) != decision.CreateServer {
				break
			}
			// After a change of the disk's owner, the growth that follows it in a write of its
			// own (disk.go: growsNext) changes DiskResizing once: the status is written again.
			grows := last.Disk != nil && (last.Disk.Op == decision.AdoptDisk || last.Disk.Op == decision.ReleaseDisk) &&
				plan.Disk != nil && plan.Disk.Op == decision.ExpandDisk
			last = plan
			if i == 0 {
				creates++
			}
			// The plan's disk action comes first and is carried out (an adoption, a growth);
			// the refusal is decided on what the plan was decided on.
			before := applyPlanWorld(t, world{vm: vm, srv: srv, lastGone: gone, disk: disk, budget: budget}, decision.Plan{Disk: plan.Disk})
			refused := refuseCreate(p, vm, gone, disk, at)
			if i > 0 && refused.Status != nil && !grows {
				t.Errorf("%s: refusal %d writes the status again:\n%s", name, i+1, renderPlan(t, refused))
			}
			st := vm.Status()
			if refused.Status != nil {
				st = *refused.Status
			}
			if got := st.RootDisk; got == nil || got.ClaimName != disk.Name || got.Phase != string(disk.Phase) {
				t.Errorf("%s: refusal %d reports the disk as %+v, want %s %s", name, i+1, got, disk.Name, disk.Phase)
			}
			w := applyPlanWorld(t, world{vm: vm, srv: srv, lastGone: gone, disk: before.disk, budget: budget}, refused)
			vm, srv, gone, disk, budget, at = w.vm, w.srv, w.lastGone, w.disk, w.budget, at.Add(time.Minute)
		}
	}
	if creates == 0 {
		t.Fatal("no golden case under claim creates a server")
	}
}
