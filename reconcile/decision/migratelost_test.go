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

// TestMigrateThroughNodeLost: a migration whose delete was sent, and whose server's node then
// stops answering, under each run strategy. The deletion cannot finish: the VM says NodeLost
// with a Warning and the way out, in phase Creating (the move's next server is what waits),
// without claiming the server the move deletes, for as long as the node is lost; the move
// stays Moving from node-a. Once the node is deleted and the server with it, the next server
// is made, kept off node-a, and no ServerMissing is said.
func TestMigrateThroughNodeLost(t *testing.T) {
	for _, action := range []string{"active", "rerunOnFailure", "once", "manual"} {
		t.Run(action, func(t *testing.T) {
			file := filepath.Join(cases, "migrate-requested.txtar")
			vm, srv := decidecase.Read(t, file)
			policy := casePolicy(t, file)
			vm = patchVM(t, vm, `{"spec":{"action":"`+action+`"}}`)
			plan := policy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
			if plan.Server == nil || plan.Server.Op != decision.DeleteServer {
				t.Fatalf("no deletion for the migration: %+v", plan.Server)
			}
			w := applyPlan(t, vm, srv, nil, plan)
			vm, srv = w.vm, w.srv
			// The node stops answering while the server is being deleted.
			srv.State, srv.Message = backend.StateLost, "node node-a is not ready"
			var events []decision.Event
			at := now.Add(time.Minute)
			for range 3 {
				plan := policy.Decide(decision.Input{VM: vm, Server: srv, Now: at})
				events = append(events, plan.Events...)
				w := applyPlan(t, vm, srv, nil, plan)
				vm, srv, at = w.vm, w.srv, at.Add(time.Minute)
			}
			if !slices.ContainsFunc(events, func(e decision.Event) bool {
				return e.Type == decision.EventWarning && e.Reason == decision.ReasonNodeLost
			}) {
				t.Errorf("no Warning NodeLost in %+v", events)
			}
			if m := vm.Status().Migration; m == nil || m.Phase != schema.MigrationMoving || m.SourceNode != "node-a" {
				t.Errorf("while the node is lost, migration %+v, want Moving from node-a", m)
			}
			plan = waitsOnLostNode(t, policy, vm, at, "kubectl delete node node-a")
			if to := plan.Server.Spec.AvoidNode; to != "node-a" {
				t.Errorf("the move's next server avoids %q, want node-a", to)
			}
		})
	}
}
