package decision_test

import (
	"path/filepath"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestClassChangeSurvivesResizeRefusal: a VM Stalled with DiskClassChangeRefused whose resize
// the backend refuses keeps its Stalled condition, and no second
// DiskClassChangeRefused Warning follows.
func TestClassChangeSurvivesResizeRefusal(t *testing.T) {
	tests := map[string]struct {
		patch  string
		policy func(*decision.Policy)
		refuse func(p decision.Policy, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk) decision.Plan
	}{
		"resize refused, in place": {patch: `{"metadata":{"generation":3},"spec":{"resource":{"cpu":4}}}`,
			policy: func(p *decision.Policy) { p.CanResize = true },
			refuse: func(p decision.Policy, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk) decision.Plan {
				return p.ResizeRefused(decision.Input{VM: vm, Server: srv, Disk: disk, Now: now}, "node capacity")
			}},
		"resize refused, manual": {patch: `{"metadata":{"generation":3},"spec":{"resource":{"cpu":4}}}`,
			policy: func(p *decision.Policy) { p.Resize = decision.ResizeManual; p.CanResize = true },
			refuse: func(p decision.Policy, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk) decision.Plan {
				return p.ResizeRefused(decision.Input{VM: vm, Server: srv, Disk: disk, Now: now}, "node capacity")
			}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(claimCases, "class-changed-bound.txtar")
			vm, srv := decidecase.Read(t, file)
			disk := decidecase.Disk(t, file)
			p := casePolicy(t, file)
			if tc.policy != nil {
				tc.policy(&p)
			}
			w := applyPlan(t, vm, srv, disk, p.Decide(decision.Input{VM: vm, Server: srv, Disk: disk, Now: now}))
			if c := w.vm.Status().Condition(schema.ConditionStalled); c == nil || c.Reason != decision.ReasonDiskClassChangeRefused {
				t.Fatalf("not Stalled for the class: %s", w.vm.JSON())
			}
			vm = patchVM(t, w.vm, tc.patch)
			if plan := p.Decide(decision.Input{VM: vm, Server: w.srv, Disk: w.disk, Now: now}); serverOp(plan) != decision.ResizeServer {
				t.Fatalf("the cpu change is not a resize:\n%s", renderPlan(t, plan))
			}
			refused := tc.refuse(p, vm, w.srv, w.disk)
			if refused.Status != nil {
				if c := refused.Status.Condition(schema.ConditionStalled); c == nil || c.Reason != decision.ReasonDiskClassChangeRefused && c.Reason == "" {
					t.Errorf("the refusal drops Stalled %s: %+v", decision.ReasonDiskClassChangeRefused, c)
				}
			}
			w2 := applyPlan(t, vm, w.srv, w.disk, refused)
			next := p.Decide(decision.Input{VM: w2.vm, Server: w2.srv, Disk: w2.disk, Now: now})
			for _, e := range next.Events {
				if e.Reason == decision.ReasonDiskClassChangeRefused {
					t.Errorf("the decision after the refusal warns %s a second time", e.Reason)
				}
			}
		})
	}
}
