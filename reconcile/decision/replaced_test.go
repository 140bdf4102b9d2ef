package decision_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestReplacementDeleteUnrecorded: the controller deleted the server to replace it (the image
// changed, which no server takes in place), and the status write that went with the delete
// was lost (a conflict). The next decisions see the status still naming the server, and the
// server going, then gone; the loop gives them the server it deleted (backend.Gone.Replaced).
// Under every run strategy the replacement is carried on: the server is not called missing,
// the VM is not taken for stopped, nothing is deleted twice, and once the server is gone a new
// one is created with the new image. A stop request still stops. Without the loop's memory
// (a delete by someone else), or with a memory of another server, the server is missing, as
// before (TestServerMissingWithoutRequest).
func TestReplacementDeleteUnrecorded(t *testing.T) {
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	base, running := decidecase.Read(t, filepath.Join(cases, "strategy-manual-running.txtar"))
	const image = `"spec":{"image":"example.com/vm:2","action":"%s"},"metadata":{"generation":2}`
	tests := map[string]struct {
		strategy string // the VM's spec.action
		stop     bool   // a stop request comes with the lost write
		// The loop's memory: the server the controller deleted (the running one), or
		// another one, or none.
		memory string
		// What the decisions do once the server is gone: create a new one, or stop the VM
		// (missing: with the Warning ServerMissing).
		create, missing bool
	}{
		"Always":                 {strategy: "active", memory: "it", create: true},
		"RerunOnFailure":         {strategy: "rerunOnFailure", memory: "it", create: true},
		"Once":                   {strategy: "once", memory: "it", create: true},
		"Manual":                 {strategy: "manual", memory: "it", create: true},
		"Manual, stop requested": {strategy: "manual", memory: "it", stop: true},
		"Manual, no memory":      {strategy: "manual", missing: true},
		"Manual, another server": {strategy: "manual", memory: "another", missing: true},
		"Once, no memory":        {strategy: "once", missing: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm := patchVM(t, base, "{"+fmt.Sprintf(image, tc.strategy)+"}")
			plan := policy.Decide(decision.Input{VM: vm, Server: running, Now: now})
			if serverOp(plan) != decision.DeleteServer || plan.Status == nil || plan.Status.Phase != schema.PhaseCreating {
				t.Fatalf("plan:\n%s\nwant the server replaced", renderPlan(t, plan))
			}
			// The delete is done; the status write and its Events are lost.
			lost := plan
			lost.Status, lost.Events = nil, nil
			w := applyPlanWorld(t, world{vm: vm, srv: running}, lost)
			if tc.stop {
				w.vm = patchVM(t, w.vm, `{"metadata":{"annotations":{"cloudnative.czs/stopRequestedAt":"2026-06-01T11:59:30Z"}}}`)
			}
			var memory *backend.Gone
			switch tc.memory {
			case "it":
				memory = &backend.Gone{Name: running.Name, ID: running.ID, Node: running.Node, Replaced: true}
			case "another":
				memory = &backend.Gone{Name: running.Name, ID: "pod-uid-0", Replaced: true}
			}
			missing := false
			for i, srv := range []*backend.Server{w.srv, nil} { // going, then gone
				if i == 0 && !srv.Deleting {
					t.Fatalf("the server is not being deleted: %+v", *srv)
				}
				plan := policy.Decide(decision.Input{VM: w.vm, Server: srv, Gone: memory, Now: now})
				for _, e := range plan.Events {
					missing = missing || e.Reason == decision.ReasonServerMissing
				}
				if a := plan.Server; srv != nil && a != nil && a.Op == decision.DeleteServer {
					t.Errorf("the server being deleted is deleted again:\n%s", renderPlan(t, plan))
				}
				if srv == nil {
					created := serverOp(plan) == decision.CreateServer
					if created != tc.create || created && plan.Server.Spec.Image != "example.com/vm:2" {
						t.Errorf("once the server is gone:\n%s\nwant a create of the new image: %t", renderPlan(t, plan), tc.create)
					}
					if st := plan.Status; !tc.create && st != nil && st.Phase != schema.PhaseInactive {
						t.Errorf("once the server is gone, phase %s (%s), want the VM stopped", st.Phase, st.Reason)
					}
					break
				}
				if st := plan.Status; tc.create && st != nil && st.Phase == schema.PhaseInactive {
					t.Errorf("while the server goes: phase %s (%s): %s, want the replacement carried on", st.Phase, st.Reason, st.Message)
				}
				w = applyPlanWorld(t, world{vm: w.vm, srv: srv}, plan)
				if memory != nil && decision.ClaimedServer(w.vm.Status()) != memory.Name {
					memory = nil // the loop forgets its delete once a status write that says so went through
				}
			}
			if missing != tc.missing {
				t.Errorf("Warning ServerMissing: %t, want %t", missing, tc.missing)
			}
		})
	}
}
