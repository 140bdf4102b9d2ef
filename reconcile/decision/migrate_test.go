package decision_test

import (
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestStopEndsMigration: a migration under way (the server on node-a deleted, the next one
// starting on node-b) and the VM stopped by each way a VM stops: Halted, a stop request, its
// guest shutting down under a run strategy that keeps it so. The migration ends Failed once
// the VM is stopped, rather than stay Moving for ever, and the server a later start creates is
// not kept off node-a.
func TestStopEndsMigration(t *testing.T) {
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	base, running := decidecase.Read(t, filepath.Join(cases, "migrate-requested.txtar"))
	for _, c := range []struct{ strategy, stop, start string }{
		{"active", `{"spec":{"action":"inactive"}}`, `{"spec":{"action":"active"}}`},
		{"rerunOnFailure", `{"metadata":{"annotations":{"cloudnative.czs/stopRequestedAt":"2026-06-01T11:59:30Z"}}}`, ""},
		{"once", `{"metadata":{"annotations":{"cloudnative.czs/stopRequestedAt":"2026-06-01T11:59:30Z"}}}`, ""},
		{"manual", `{"metadata":{"annotations":{"cloudnative.czs/stopRequestedAt":"2026-06-01T11:59:30Z"}}}`, ""},
		{"rerunOnFailure", "shutdown", ""},
		{"once", "shutdown", ""},
		{"once", "failure", ""},
		{"manual", "shutdown", ""},
	} {
		name := c.strategy + "/" + c.stop
		if c.start == "" {
			c.start = `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"2026-06-01T11:59:50Z"}}}`
		}
		srv := *running
		w := world{vm: patchVM(t, base, `{"spec":{"action":"`+c.strategy+`"}}`), srv: &srv}
		decide := func() decision.Plan {
			p := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now})
			w = applyPlan(t, w.vm, w.srv, nil, p)
			return p
		}
		decide() // the server on node-a is deleted for the migration
		w.srv = nil
		decide() // the next one is created, kept off node-a
		if !movingOff(w.vm.Status(), "node-a") || w.srv == nil || w.srv.Spec.AvoidNode != "node-a" {
			t.Fatalf("%s: the migration is not under way: %+v, server %+v", name, w.vm.Status().Migration, w.srv)
		}
		w.srv.Node, w.srv.State = "node-b", backend.StateStarting
		switch c.stop {
		case "shutdown":
			w.srv.State, w.srv.Since = backend.StateStopped, now
		case "failure":
			w.srv.State, w.srv.Since = backend.StateFailed, now
		default:
			w.vm = patchVM(t, w.vm, c.stop)
		}
		decide()
		if w.srv != nil && w.srv.Deleting {
			w.srv = nil
			decide()
		}
		st := w.vm.Status()
		if st.Phase != schema.PhaseInactive && st.Phase != schema.PhaseFailed {
			t.Fatalf("%s: the VM is %s/%s, want it stopped", name, st.Phase, st.Reason)
		}
		if m := st.Migration; m == nil || m.Phase != schema.MigrationFailed || m.SourceNode != "node-a" {
			t.Errorf("%s: stopped (%s) with migration %+v, want it Failed", name, st.Reason, m)
		}
		if next := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now}); !next.Empty() {
			t.Errorf("%s: deciding the stopped VM again asks for more: %+v", name, next)
		}
		w.vm = patchVM(t, w.vm, c.start)
		for i := 0; i < 3 && (w.srv == nil || w.srv.Deleting || ended(w.srv)); i++ {
			if w.srv != nil && w.srv.Deleting {
				w.srv = nil
			}
			decide()
		}
		if w.srv == nil || ended(w.srv) || w.srv.Deleting {
			t.Fatalf("%s: no new server after the start: %+v (%s)", name, w.srv, w.vm.Status().Reason)
		}
		if w.srv.Spec.AvoidNode != "" {
			t.Errorf("%s: the server of the start keeps off %s", name, w.srv.Spec.AvoidNode)
		}
	}
}

// ended reports whether srv ended (it will not run again by itself).
func ended(srv *backend.Server) bool {
	return srv.State == backend.StateStopped || srv.State == backend.StateFailed
}

// migrationEvents checks the Events of a migration's outcome and returns evs without them: a
// Warning MigrationRefused exactly when the status records a new refusal, a Normal Migrated
// exactly when it records a new success, and a migration record that only ever moves on to a
// newer request or a later phase of the same one.
func migrationEvents(fail func(string, ...any), current, st schema.Status, evs []decision.Event) []decision.Event {
	was, now := current.Migration, st.Migration
	if was != nil && now == nil {
		fail("the migration record %+v is dropped", *was)
	}
	fresh := func(phase schema.MigrationPhase) bool {
		return now != nil && now.Phase == phase && (was == nil || !was.Same(now))
	}
	for _, c := range []struct {
		reason, typ string
		want        bool
	}{
		{decision.ReasonMigrationRefused, corev1.EventTypeWarning, fresh(schema.MigrationRefused)},
		{decision.ReasonMigrated, corev1.EventTypeNormal, fresh(schema.MigrationSucceeded)},
	} {
		i := slices.IndexFunc(evs, func(e decision.Event) bool { return e.Reason == c.reason })
		switch {
		case c.want && i < 0:
			fail("the migration record %+v without a %s event", *now, c.reason)
		case !c.want && i >= 0:
			fail("a %s event %+v without a new record of it", c.reason, evs[i])
		case i >= 0:
			if evs[i].Type != c.typ || slices.ContainsFunc(evs[i+1:], func(e decision.Event) bool { return e.Reason == c.reason }) {
				fail("%s events %+v: want one, %s", c.reason, evs, c.typ)
			}
			evs = slices.Delete(slices.Clone(evs), i, i+1)
		}
	}
	return evs
}

// movingOff reports whether the status records a migration under way off node.
func movingOff(st schema.Status, node string) bool {
	m := st.Migration
	return m != nil && m.Phase == schema.MigrationMoving && m.SourceNode == node
}

// TestMigrateAgainWhileMoving: a second migrate request written while a move off node-a is
// under way, at each of its steps. The move carries it out: the record takes the new value and
// goes on as the move would have (no refusal, no second delete, the next server kept off
// node-a), and the outcome answers the new request: Succeeded once the next server is ready
// elsewhere, Failed once no other node has taken it within StalledAfter (that server deleted,
// so that the VM is not kept down for good).
func TestMigrateAgainWhileMoving(t *testing.T) {
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	const again = "2026-06-01T11:59:30Z"
	tests := map[string]struct {
		file  string            // the move at that step (a golden case), with the request of 11:59:00 acted on
		op    decision.ServerOp // the server action the move takes there ("": none)
		phase schema.MigrationPhase
	}{
		"old server being deleted": {file: "migrate-waiting.txtar", phase: schema.MigrationMoving},
		"old server gone":          {file: "migrate-create.txtar", op: decision.CreateServer, phase: schema.MigrationMoving},
		"next server pending":      {file: "migrate-unschedulable.txtar", phase: schema.MigrationMoving},
		"next server ready":        {file: "migrate-succeeded.txtar", phase: schema.MigrationSucceeded},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, srv := decidecase.Read(t, filepath.Join(cases, tc.file))
			if !movingOff(vm.Status(), "node-a") {
				t.Fatalf("%s: not a move off node-a: %+v", tc.file, vm.Status().Migration)
			}
			vm = patchVM(t, vm, `{"metadata":{"annotations":{"cloudnative.czs/migrateRequestedAt":"`+again+`"}}}`)
			plan := policy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
			var op decision.ServerOp
			if plan.Server != nil {
				op = plan.Server.Op
			}
			if op != tc.op {
				t.Errorf("server action %q, want %q", op, tc.op)
			}
			if op == decision.CreateServer && plan.Server.Spec.AvoidNode != "node-a" {
				t.Errorf("the next server avoids %q, want node-a", plan.Server.Spec.AvoidNode)
			}
			if plan.Status == nil {
				t.Fatalf("no status, want the request recorded:\n%s", renderPlan(t, plan))
			}
			m := plan.Status.Migration
			if m == nil || m.RequestedAt != again || m.Phase != tc.phase || m.SourceNode != "node-a" {
				t.Errorf("migration %+v, want %s off node-a for the request of %s", m, tc.phase, again)
			}
			migrationEvents(t.Errorf, vm.Status(), *plan.Status, plan.Events)
			w := applyPlan(t, vm, srv, nil, plan)
			if next := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now}); !next.Empty() {
				t.Errorf("deciding again asks for more:\n%s", renderPlan(t, next))
			}
		})
	}

	// The next server still pending once it has waited StalledAfter: the move gives up,
	// for the new request.
	vm, srv := decidecase.Read(t, filepath.Join(cases, "migrate-unschedulable.txtar"))
	vm = patchVM(t, vm, `{"metadata":{"annotations":{"cloudnative.czs/migrateRequestedAt":"`+again+`"}}}`)
	w := applyPlan(t, vm, srv, nil, policy.Decide(decision.Input{VM: vm, Server: srv, Now: now}))
	plan := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now.Add(policy.StalledAfter)})
	if plan.Server == nil || plan.Server.Op != decision.DeleteServer || plan.Server.Event.Reason != decision.ReasonMigrationFailed {
		t.Fatalf("past StalledAfter the move's pending server is kept:\n%s", renderPlan(t, plan))
	}
	if m := plan.Status.Migration; m == nil || m.Phase != schema.MigrationFailed || m.RequestedAt != again {
		t.Errorf("migration %+v, want Failed for the request of %s", m, again)
	}
}
