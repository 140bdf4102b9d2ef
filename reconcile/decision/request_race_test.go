package decision_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestRequestDeleteUnrecorded: the controller deleted the server for a migrate or restart
// request, and the status write that records it met a conflict (someone wrote the VM
// meanwhile). The next decision sees the request as new and the server going, or gone, where
// the status still says it runs. Under every run strategy that runs it the request is carried
// on: the server is not called missing, the migration is not refused and moves off the node
// the server ran on, the VM is not taken for stopped, and nothing is deleted twice.
func TestRequestDeleteUnrecorded(t *testing.T) {
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	base, running := decidecase.Read(t, filepath.Join(cases, "migrate-requested.txtar"))
	for _, request := range []string{"migrate", "restart"} {
		for _, strategy := range []string{"active", "rerunOnFailure", "once", "manual"} {
			// The status as the controller wrote it for the running server: on node-a.
			patch := `{"spec":{"action":"` + strategy + `"},"status":{"server":{"node":"node-a"}}}`
			if request == "restart" {
				patch = `{"metadata":{"annotations":{"cloudnative.czs/migrateRequestedAt":null,"cloudnative.czs/restartedAt":"2026-06-01T11:59:00Z"}},"spec":{"action":"` + strategy + `"}}`
			}
			vm := patchVM(t, base, patch)
			going := *running
			going.Deleting = true
			for name, srv := range map[string]*backend.Server{"going": &going, "gone": nil} {
				plan := policy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
				where := request + "/" + strategy + "/" + name
				for _, e := range plan.Events {
					if e.Reason == decision.ReasonMigrationRefused || e.Reason == decision.ReasonServerMissing {
						t.Errorf("%s: %s %s: %s", where, e.Type, e.Reason, e.Message)
					}
				}
				st := plan.Status
				if st == nil {
					t.Fatalf("%s: no status, want the request recorded", where)
				}
				if st.Phase == schema.PhaseInactive {
					t.Errorf("%s: the request leaves the VM stopped: %s: %s", where, st.Reason, st.Message)
				}
				if plan.Server != nil && plan.Server.Op == decision.DeleteServer {
					t.Errorf("%s: the server is deleted again", where)
				}
				switch request {
				case "migrate":
					if m := st.Migration; m == nil || m.Phase != schema.MigrationMoving || m.SourceNode != "node-a" {
						t.Errorf("%s: migration %+v, want Moving off node-a", where, m)
					}
					if s := plan.Server; srv == nil && (s == nil || s.Op != decision.CreateServer || s.Spec.AvoidNode != "node-a") {
						t.Errorf("%s: server action %+v, want a create that avoids node-a", where, s)
					}
				case "restart":
					if st.RestartedAt != "2026-06-01T11:59:00Z" {
						t.Errorf("%s: restartedAt %q, want the request recorded", where, st.RestartedAt)
					}
				}
			}
		}
	}
}

// TestRestartCreateUnrecorded: a restart request first seen with the VM's server gone is
// carried out by the create of the next server, and the status write that records it meets a
// conflict (someone wrote the VM meanwhile). The next decision sees the request as new and the
// server it made, which the status has not reported yet. Under every run strategy that runs
// the VM, that server is the restart's: it is not deleted again, and the restart is recorded;
// once it is, nothing more is asked for.
func TestRestartCreateUnrecorded(t *testing.T) {
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	base, _ := decidecase.Read(t, filepath.Join(cases, "restart-no-server.txtar"))
	for _, strategy := range []string{"active", "rerunOnFailure", "once", "manual"} {
		vm := patchVM(t, base, `{"spec":{"action":"`+strategy+`"}}`)
		first := policy.Decide(decision.Input{VM: vm, Now: now})
		if first.Server == nil || first.Server.Op != decision.CreateServer || first.Status == nil || first.Status.RestartedAt == "" {
			t.Fatalf("%s: want a create that records the restart, got:\n%s", strategy, renderPlan(t, first))
		}
		// The create is done; its status write is not: the VM is as it was.
		made := applyPlan(t, vm, nil, nil, first).srv
		for name, srv := range map[string]*backend.Server{"pending": made, "ready": ready(made)} {
			where := strategy + "/" + name
			plan := policy.Decide(decision.Input{VM: vm, Server: srv, Now: now.Add(time.Second)})
			if plan.Server != nil {
				t.Errorf("%s: the server the restart's create made is acted on again: %s %s", where, plan.Server.Op, plan.Server.Event.Message)
			}
			if st := plan.Status; st == nil || st.RestartedAt != first.Status.RestartedAt {
				t.Fatalf("%s: want the restart recorded, got:\n%s", where, renderPlan(t, plan))
			}
			w := applyPlan(t, vm, srv, nil, plan)
			if next := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now.Add(time.Second)}); !next.Empty() {
				t.Errorf("%s: deciding again once the restart is recorded asks for more:\n%s", where, renderPlan(t, next))
			}
		}
	}
}

// ready is srv running and ready on node-b.
func ready(srv *backend.Server) *backend.Server {
	r := *srv
	r.State, r.Detail, r.Node = backend.StateReady, "Running", "node-b"
	return &r
}

// TestServerMissingWithoutRequest: without a request, a server gone where the status says
// it runs is still called missing (a Warning), and under Manual the VM stays stopped: the
// requests explain a server's going, nothing else does.
func TestServerMissingWithoutRequest(t *testing.T) {
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	base, _ := decidecase.Read(t, filepath.Join(cases, "migrate-requested.txtar"))
	for _, strategy := range []string{"active", "manual"} {
		vm := patchVM(t, base, `{"metadata":{"annotations":{"cloudnative.czs/migrateRequestedAt":null}},"spec":{"action":"`+strategy+`"}}`)
		plan := policy.Decide(decision.Input{VM: vm, Now: now})
		missing := false
		for _, e := range plan.Events {
			missing = missing || e.Reason == decision.ReasonServerMissing
		}
		if !missing {
			t.Errorf("%s: events %+v, want ServerMissing", strategy, plan.Events)
		}
		if strategy == "manual" && (plan.Status == nil || plan.Status.Phase != schema.PhaseInactive) {
			t.Errorf("manual: status %+v, want the VM stopped", plan.Status)
		}
	}
}

// patchVM is vm with a JSON merge patch applied.
func patchVM(t *testing.T, vm schema.VirtualMachine, patch string) schema.VirtualMachine {
	t.Helper()
	raw, err := jsonpatch.MergePatch([]byte(vm.JSON()), []byte(patch))
	if err != nil {
		t.Fatal(err)
	}
	out, err := schema.Parse(raw, decidecase.Fields(t))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMigrateDuringEviction: a migrate request written while a drain evicts the server under
// evictionStrategy Replace (kubectl vm migrate saw the VM Active just before), seen by the
// controller while the server goes or once it is gone. Under every run strategy that runs the
// VM, the eviction's deletion carries the request out: the migration moves off node-a, the
// next server keeps off it, and once that one is ready on node-b the migration has Succeeded;
// it is never refused, and nothing is deleted by the controller.
func TestMigrateDuringEviction(t *testing.T) {
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	base, evicted := decidecase.Read(t, filepath.Join(cases, "evict-replace-evicting.txtar"))
	request := `{"metadata":{"annotations":{"cloudnative.czs/migrateRequestedAt":"2026-06-01T11:59:30Z"}}}`
	for _, strategy := range []string{"active", "rerunOnFailure", "once", "manual"} {
		for _, seen := range []string{"going", "gone"} {
			where := strategy + "/" + seen
			srv := *evicted
			w := world{vm: patchVM(t, base, `{"spec":{"action":"`+strategy+`"}}`), srv: &srv}
			var events []decision.Event
			decide := func() {
				p := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now})
				if p.Server != nil && p.Server.Op == decision.DeleteServer {
					t.Errorf("%s: the controller deletes the server: %+v", where, p.Server.Event)
				}
				events = append(events, p.Events...)
				if p.Server != nil {
					events = append(events, p.Server.Event)
				}
				w = applyPlan(t, w.vm, w.srv, nil, p)
			}
			if seen == "going" {
				w.vm = patchVM(t, w.vm, request)
			}
			decide() // the eviction under way: ServerEvicted
			w.srv = nil
			if seen == "gone" {
				w.vm = patchVM(t, w.vm, request)
			}
			decide() // the next server
			if w.srv == nil || w.srv.Spec.AvoidNode != "node-a" || !movingOff(w.vm.Status(), "node-a") {
				t.Fatalf("%s: server %+v, migration %+v: want the next server kept off node-a, the migration Moving", where, w.srv, w.vm.Status().Migration)
			}
			w.srv.Node, w.srv.State = "node-b", backend.StateReady
			decide()
			st := w.vm.Status()
			if m := st.Migration; m == nil || m.Phase != schema.MigrationSucceeded || m.TargetNode != "node-b" {
				t.Errorf("%s: migration %+v, want Succeeded on node-b", where, m)
			}
			if st.Phase != schema.PhaseActive || st.Condition(decision.ConditionMoving) != nil {
				t.Errorf("%s: %s/%s with Moving %+v, want Active, moved", where, st.Phase, st.Reason, st.Condition(decision.ConditionMoving))
			}
			for _, e := range events {
				if e.Reason == decision.ReasonMigrationRefused || e.Reason == decision.ReasonServerMissing {
					t.Errorf("%s: %s %s: %s", where, e.Type, e.Reason, e.Message)
				}
			}
			if next := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now}); !next.Empty() {
				t.Errorf("%s: deciding the moved VM again asks for more: %s", where, renderPlan(t, next))
			}
		}
	}
}

// TestRestartBeforeFirstRun: under --root-disk claim the first server of a VM is created once
// its disk is bound, or at once for a disk that binds with it, and no status names it while
// it is on its way (onTheWay). A restart requested then finds a server no status has
// reported (unrecorded), without the request's mark: it predates the request. Its guest has
// not run: it boots after the request, as a restarted one would, so
// nothing is lost if the server is kept; but the request is not answered in silence. The
// restart is recorded with a RestartNotNeeded Event that names it, the status then names the
// server, and a further restart request replaces it.
func TestRestartBeforeFirstRun(t *testing.T) {
	const first, second = "2026-06-01T12:00:30Z", "2026-06-01T12:02:00Z"
	for _, name := range []string{"pending-binds-with-server", "bound-no-server"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(claimCases, name+".txtar")
			vm, srv := decidecase.Read(t, file)
			disk := decidecase.Disk(t, file)
			policy := casePolicy(t, file)
			create := policy.Decide(decision.Input{VM: vm, Server: srv, Disk: disk, Now: now})
			if serverOp(create) != decision.CreateServer {
				t.Fatalf("want the first server created:\n%s", renderPlan(t, create))
			}
			w := applyPlan(t, vm, srv, disk, create)
			if s := w.vm.Status().Server; s != nil && s.ID != "" {
				t.Fatalf("the status names the new server %+v: the case no longer leaves it unrecorded", s)
			}
			if w.srv == nil || w.srv.State != backend.StatePending {
				t.Fatalf("server %+v, want one pending", w.srv)
			}

			vm = patchVM(t, w.vm, `{"metadata":{"annotations":{"cloudnative.czs/restartedAt":"`+first+`"}}}`)
			plan := policy.Decide(decision.Input{VM: vm, Server: w.srv, Disk: w.disk, Now: now.Add(time.Minute)})
			if plan.Server != nil {
				t.Errorf("the server that has not run is acted on: %s %s", plan.Server.Op, plan.Server.Event.Message)
			}
			if plan.Status == nil || plan.Status.RestartedAt != first {
				t.Fatalf("want the restart recorded:\n%s", renderPlan(t, plan))
			}
			said := false
			for _, e := range plan.Events {
				said = said || e.Reason == decision.ReasonRestartNotNeeded && strings.Contains(e.Message, first) && strings.Contains(e.Message, w.srv.Name)
			}
			if !said {
				t.Errorf("the restart is recorded without an Event that says so:\n%s", renderPlan(t, plan))
			}
			w = applyPlan(t, vm, w.srv, w.disk, plan)
			if next := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Disk: w.disk, Now: now.Add(time.Minute)}); !next.Empty() {
				t.Errorf("deciding again once the restart is recorded asks for more:\n%s", renderPlan(t, next))
			}

			vm = patchVM(t, w.vm, `{"metadata":{"annotations":{"cloudnative.czs/restartedAt":"`+second+`"}}}`)
			again := policy.Decide(decision.Input{VM: vm, Server: w.srv, Disk: w.disk, Now: now.Add(2 * time.Minute)})
			if a := again.Server; a == nil || a.Op != decision.DeleteServer || a.Event.Reason != decision.ReasonServerRestarted {
				t.Errorf("a further restart does not replace the server:\n%s", renderPlan(t, again))
			}
		})
	}
}

// TestRestartUnrecordedServer: a restart request meets a server no status has reported yet
// (under --root-disk claim the first server, whose create's status said nothing new). A
// server that carries no mark of the request predates it: one that has started (its guest
// booted before the request) is restarted as any other, one still pending is kept and the
// request answered with RestartNotNeeded. A server marked with the request is the one its
// own create made (whose status write was lost): the restart is recorded, not carried out a
// second time.
func TestRestartUnrecordedServer(t *testing.T) {
	const request = "2026-06-01T11:59:30Z"
	file := filepath.Join(claimCases, "restart-unrecorded-ready.txtar")
	vm, base := decidecase.Read(t, file)
	disk := decidecase.Disk(t, file)
	policy := casePolicy(t, file)
	tests := map[string]struct {
		state   backend.State // the server's
		restart bool          // it carries out the request (its create was the restart's)
		deleted bool          // the plan restarts it (ServerRestarted)
	}{
		"pending, predates the request":  {state: backend.StatePending},
		"starting, predates the request": {state: backend.StateStarting, deleted: true},
		"ready, predates the request":    {state: backend.StateReady, deleted: true},
		"failed, predates the request":   {state: backend.StateFailed, deleted: true},
		"pending, the restart's own":     {state: backend.StatePending, restart: true},
		"ready, the restart's own":       {state: backend.StateReady, restart: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srv := *base
			srv.State = tc.state
			if tc.restart {
				srv.Spec.Restart = request
			}
			plan := policy.Decide(decision.Input{VM: vm, Server: &srv, Disk: disk, Now: now})
			if plan.Status == nil || plan.Status.RestartedAt != request {
				t.Fatalf("want the restart recorded:\n%s", renderPlan(t, plan))
			}
			a := plan.Server
			restarted := a != nil && a.Op == decision.DeleteServer && a.Event.Reason == decision.ReasonServerRestarted
			if restarted != tc.deleted || !tc.deleted && a != nil {
				t.Errorf("restarted %v, want %v:\n%s", restarted, tc.deleted, renderPlan(t, plan))
			}
			notNeeded := slices.ContainsFunc(plan.Events, func(e decision.Event) bool { return e.Reason == decision.ReasonRestartNotNeeded })
			if want := !tc.deleted && !tc.restart; notNeeded != want {
				t.Errorf("Event RestartNotNeeded %v, want %v:\n%s", notNeeded, want, renderPlan(t, plan))
			}
			w := applyPlan(t, vm, &srv, disk, plan)
			if next := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Disk: w.disk, Now: now}); !next.Empty() {
				t.Errorf("deciding again asks for more:\n%s", renderPlan(t, next))
			}
		})
	}
}
