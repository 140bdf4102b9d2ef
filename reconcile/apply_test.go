package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

func (w *world) applier() applier {
	return applier{writer: dynamicWriter{client: w.client.Resource(vmGVR)}, fields: w.fields, backend: w.servers, opt: optionalOf(w.servers), recorder: w.recorder,
		expect: newExpectations(), policy: serverPolicy, now: func() time.Time { return now }}
}

// useBackend has a act on b, its optional interfaces asserted as New asserts them.
func (a *applier) useBackend(b backend.Backend) { a.backend, a.opt = b, optionalOf(b) }

// TestApplyCreate: a new VM gets the finalizer before its server exists, then the server,
// then the status naming the server that was made; each write is conditional on the
// resourceVersion the one before produced, and the events follow the writes they report.
func TestApplyCreate(t *testing.T) {
	w := newWorld(t, "create-new")
	vm := w.view(t, "create-new")
	plan := serverPolicy.Decide(decision.Input{VM: vm, Now: now})
	a := w.applier()
	after, err := a.apply(context.Background(), vm, ownerOf(vm), nil, nil, plan)
	if err != nil || after != 0 {
		t.Fatalf("apply = %v, %v", after, err)
	}
	writes := w.writes()
	if len(writes) != 2 {
		t.Fatalf("writes %+v, want the finalizer then the status", writes)
	}
	fin, st := writes[0], writes[1]
	if fin.subresource != "" || fin.serverExisted || !reflect.DeepEqual(at(fin.body, "metadata", "finalizers"), []any{schema.Finalizer}) {
		t.Errorf("first write %+v: want the finalizer, before any server", fin)
	}
	if rv := at(fin.body, "metadata", "resourceVersion"); rv != "1000" {
		t.Errorf("finalizer patch is conditional on resourceVersion %v, want the decision's 1000", rv)
	}
	if st.subresource != "status" || !st.serverExisted {
		t.Errorf("second write %+v: want the status, once the server exists", st)
	}
	if rv := at(st.body, "metadata", "resourceVersion"); rv != "1001" {
		t.Errorf("status patch is conditional on resourceVersion %v, want 1001, the finalizer write's", rv)
	}
	srv, _ := w.servers.Observe(ownerOf(vm))
	if srv == nil {
		t.Fatal("no server was created")
	}
	got := w.vm(t, "default", "test-vm")
	if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != string(schema.PhaseCreating) {
		t.Errorf("status.phase = %q, want Creating", phase)
	}
	if id, _, _ := unstructured.NestedString(got.Object, "status", "server", "id"); id != srv.ID {
		t.Errorf("status.server.id = %q, want the created server's %q", id, srv.ID)
	}
	if evs := w.events(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Normal CreatingServer ") {
		t.Errorf("events %q, want one CreatingServer", evs)
	}
	if x := a.expect.adjust(cache.NewObjectName("default", "test-vm"), nil); x == nil || x.ID != srv.ID {
		t.Errorf("no expectation of the created server: %+v", x)
	}
}

// TestApplyRejected: a server the backend refuses switches the plan to the Rejected one:
// status Failed with the backend's reason, a Warning, no event of a creation, and a later try.
func TestApplyRejected(t *testing.T) {
	w := newWorld(t, "create-new")
	vm := w.view(t, "create-new")
	w.servers.FailCreate(fmt.Errorf("quota exceeded: %w", backend.ErrRejected))
	after, err := w.applier().apply(context.Background(), vm, ownerOf(vm), nil, nil, serverPolicy.Decide(decision.Input{VM: vm, Now: now}))
	if err != nil {
		t.Fatal(err)
	}
	// The try the Rejected plan asks for.
	if want := time.Duration(serverPolicy.Rejected(decision.Input{VM: vm, Now: now}, "").RequeueAfter); want == 0 || after != want {
		t.Errorf("requeue after %v, want %v", after, want)
	}
	got := w.vm(t, "default", "test-vm")
	phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
	reason, _, _ := unstructured.NestedString(got.Object, "status", "reason")
	msg, _, _ := unstructured.NestedString(got.Object, "status", "message")
	if phase != string(schema.PhaseFailed) || reason != decision.ReasonServerRejected || !strings.Contains(msg, "quota exceeded") {
		t.Errorf("status %s/%s %q, want Failed/ServerRejected with the backend's reason", phase, reason, msg)
	}
	if evs := w.events(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning ServerRejected ") {
		t.Errorf("events %q, want one ServerRejected Warning", evs)
	}
	if !reflect.DeepEqual(got.GetFinalizers(), []string{schema.Finalizer}) {
		t.Errorf("finalizers %v: the finalizer added before the attempt stays", got.GetFinalizers())
	}
}

// TestApplyInvalidSpecBounded: an invalid spec whose refused values are huge (admission
// bounds a quantity's length and a nodeSelector's values, not its keys) still ends Failed
// with InvalidSpec and one Warning: the messages fit the CRD's limit for a condition's
// message and the Events API's for a note, which would otherwise refuse the status write (for
// ever, retried) and the Event. The fake API server here checks neither limit, so the test
// checks the lengths it was sent.
func TestApplyInvalidSpecBounded(t *testing.T) {
	long := strings.Repeat("k", 40000)
	manyKeys := map[string]any{}
	for i := range 500 {
		manyKeys[fmt.Sprintf("bad key %03d!", i)] = "v"
	}
	cases := map[string]struct {
		field []string // where the bad value goes
		value any
		quote string // the start of the refused value the message names
	}{
		"a long nodeSelector key": {[]string{"spec", "placement", "nodeSelector"}, map[string]any{long: "v"}, "kkkkkkkk"},
		"a long cpu":              {[]string{"spec", "resource", "cpu"}, strings.Repeat("1", 40000), "11111111"},
		"many bad keys":           {[]string{"spec", "placement", "nodeSelector"}, manyKeys, "bad key 000!"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "create-new")
			u := caseObject(t, "create-new")
			if err := unstructured.SetNestedField(u.Object, tc.value, tc.field...); err != nil {
				t.Fatal(err)
			}
			if err := w.client.Tracker().Update(vmGVR, u, u.GetNamespace()); err != nil {
				t.Fatal(err)
			}
			vm := cachedView(t, u, w.fields)
			if _, err := w.applier().apply(context.Background(), vm, ownerOf(vm), nil, nil, serverPolicy.Decide(decision.Input{VM: vm, Now: now})); err != nil {
				t.Fatal(err)
			}
			got := w.vm(t, u.GetNamespace(), u.GetName())
			reason, _, _ := unstructured.NestedString(got.Object, "status", "reason")
			msg, _, _ := unstructured.NestedString(got.Object, "status", "message")
			if reason != decision.ReasonInvalidSpec || !strings.Contains(msg, tc.quote) {
				t.Errorf("status %s %.200q, want InvalidSpec naming the refused value", reason, msg)
			}
			if len(msg) > schema.ConditionMessageLimit {
				t.Errorf("status message of %d bytes, want at most %d", len(msg), schema.ConditionMessageLimit)
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			if len(conds) == 0 {
				t.Error("no conditions written")
			}
			for _, c := range conds {
				if m, _ := c.(map[string]any)["message"].(string); len(m) > schema.ConditionMessageLimit {
					t.Errorf("condition %v: message of %d bytes, want at most %d", c.(map[string]any)["type"], len(m), schema.ConditionMessageLimit)
				}
			}
			evs := w.events()
			if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning InvalidSpec ") {
				t.Fatalf("events %.300q, want one InvalidSpec Warning", evs)
			}
			if note := strings.TrimPrefix(evs[0], "Warning InvalidSpec "); len(note) > eventNoteLimit || !strings.Contains(note, tc.quote) {
				t.Errorf("event note of %d bytes %.100q, want at most %d naming the refused value", len(note), note, eventNoteLimit)
			}
		})
	}
}

// TestApplyErrors: a transient failure of any step is returned (wrapped, so that the queue
// backs off and a conflict is told apart) and stops the plan there; a VM that is gone ends it
// quietly.
func TestApplyErrors(t *testing.T) {
	conflict := apierrors.NewConflict(vmGVR.GroupResource(), "test-vm", errors.New("changed"))
	notFound := apierrors.NewNotFound(vmGVR.GroupResource(), "test-vm")
	boom := errors.New("boom")
	tests := map[string]struct {
		vm, server string // the case whose VM and server the plan is for
		setup      func(w *world)
		err        error  // wrapped in the returned error; nil: none returned
		errText    string // the returned error starts with it
		created    bool   // a server exists afterwards (and was not going)
		writes     int    // patches the API received
	}{
		"finalizer conflict: no server": {vm: "create-new", setup: func(w *world) { w.failNext("main", conflict) },
			err: conflict, errText: "add finalizer", writes: 1},
		"create fails: no status": {vm: "create-new", setup: func(w *world) { w.servers.FailCreate(boom) },
			err: boom, errText: "create server", writes: 1},
		"status conflict": {vm: "create-new", setup: func(w *world) { w.failNext("status", conflict) },
			err: conflict, errText: "write status", created: true, writes: 2},
		"status of a VM gone": {vm: "create-new", setup: func(w *world) { w.failNext("status", notFound) },
			created: true, writes: 2},
		"delete fails": {vm: "delete-with-server", server: "delete-with-server", setup: func(w *world) { w.servers.FailDelete(boom) },
			err: boom, errText: "delete server", created: true},
		"finalizer removal on a VM gone": {vm: "delete-without-server", setup: func(w *world) { w.failNext("main", notFound) },
			writes: 1},
		"finalizer removal conflict": {vm: "delete-without-server", setup: func(w *world) { w.failNext("main", conflict) },
			err: conflict, errText: "remove finalizer", writes: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.vm)
			vm := w.view(t, tc.vm)
			var srv *backend.Server
			if tc.server != "" {
				_, srv = decidecase.Read(t, caseFile(tc.server))
				w.servers.Set(ownerOf(vm), srv)
			}
			tc.setup(w)
			_, err := w.applier().apply(context.Background(), vm, ownerOf(vm), srv, nil, serverPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now}))
			switch {
			case tc.err == nil && err != nil:
				t.Fatalf("apply: %v, want no error", err)
			case tc.err != nil && (!errors.Is(err, tc.err) || !strings.HasPrefix(err.Error(), tc.errText)):
				t.Fatalf("apply: %v, want %q wrapping %v", err, tc.errText, tc.err)
			}
			s, _ := w.servers.Observe(ownerOf(vm))
			if created := s != nil && !s.Deleting; created != tc.created {
				t.Errorf("server %+v, want created %v", s, tc.created)
			}
			if n := len(w.writes()); n != tc.writes {
				t.Errorf("%d writes, want %d: %+v", n, tc.writes, w.writes())
			}
		})
	}
}

// TestApplyDelete: deleting a VM with a server asks the backend to delete it, expects the
// deletion, reports Terminating with the finalizer kept, and records why.
func TestApplyDelete(t *testing.T) {
	w := newWorld(t, "delete-with-server")
	vm := w.view(t, "delete-with-server")
	_, srv := decidecase.Read(t, caseFile("delete-with-server"))
	w.servers.Set(ownerOf(vm), srv)
	a := w.applier()
	if _, err := a.apply(context.Background(), vm, ownerOf(vm), srv, nil, serverPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now})); err != nil {
		t.Fatal(err)
	}
	if s, _ := w.servers.Observe(ownerOf(vm)); s == nil || !s.Deleting {
		t.Errorf("server %+v, want it going", s)
	}
	if x := a.expect.adjust(cache.NewObjectName(vm.Namespace(), vm.Name()), srv); x == nil || !x.Deleting {
		t.Errorf("the deletion is not expected: %+v", x)
	}
	got := w.vm(t, vm.Namespace(), vm.Name())
	if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != string(schema.PhaseTerminating) {
		t.Errorf("phase %q, want Terminating", phase)
	}
	if !reflect.DeepEqual(got.GetFinalizers(), []string{schema.Finalizer}) {
		t.Errorf("finalizers %v: kept until the server is gone", got.GetFinalizers())
	}
	if evs := w.events(); len(evs) == 0 || !strings.HasPrefix(evs[0], "Normal DeletingServer ") {
		t.Errorf("events %q, want DeletingServer first", evs)
	}
}

// TestApplyStopGrace: a stop request's deletion carries the grace period the stop asked for
// to the backend (backend.GracefulDeleter); the request is recorded in status.
func TestApplyStopGrace(t *testing.T) {
	w := newWorld(t, "verb-manual-stop-grace")
	vm := w.view(t, "verb-manual-stop-grace")
	_, srv := decidecase.Read(t, caseFile("verb-manual-stop-grace"))
	w.servers.Set(ownerOf(vm), srv)
	if _, err := w.applier().apply(context.Background(), vm, ownerOf(vm), srv, nil, serverPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now})); err != nil {
		t.Fatal(err)
	}
	if g, ok := w.servers.Grace(ownerOf(vm)); !ok || g != 5*time.Second {
		t.Errorf("grace period %v (given: %v), want 5s", g, ok)
	}
	got := w.vm(t, vm.Namespace(), vm.Name())
	if at, _, _ := unstructured.NestedString(got.Object, "status", "stopRequestedAt"); at != "2026-06-01T11:59:00Z" {
		t.Errorf("status.stopRequestedAt %q, want the annotation's value", at)
	}
	if evs := w.events(); len(evs) == 0 || !strings.HasPrefix(evs[0], "Normal StoppingServer ") {
		t.Errorf("events %q, want StoppingServer first", evs)
	}
}

// TestApplyReleases: a VM being deleted whose server is gone loses the controller's
// finalizer and keeps everyone else's.
func TestApplyReleases(t *testing.T) {
	w := newWorld(t, "delete-without-server")
	obj := w.vm(t, "default", "test-vm")
	obj.SetFinalizers(append(obj.GetFinalizers(), "example.com/other"))
	if err := w.client.Tracker().Update(vmGVR, obj, "default"); err != nil {
		t.Fatal(err)
	}
	vm := cachedView(t, obj, w.fields)
	plan := serverPolicy.Decide(decision.Input{VM: vm, Now: now})
	if plan.Finalizer != decision.RemoveFinalizer {
		t.Fatalf("plan %+v does not release the VM", plan)
	}
	if _, err := w.applier().apply(context.Background(), vm, ownerOf(vm), nil, nil, plan); err != nil {
		t.Fatal(err)
	}
	if got := w.vm(t, "default", "test-vm").GetFinalizers(); !reflect.DeepEqual(got, []string{"example.com/other"}) {
		t.Errorf("finalizers %v, want only the other one", got)
	}
}

// TestEventAction: the action of an Event says what the controller did.
func TestEventAction(t *testing.T) {
	for reason, want := range map[string]string{
		decision.ReasonCreatingServer: "CreateServer", decision.ReasonDeletingServer: "DeleteServer", decision.ReasonReplacingServer: "DeleteServer",
		decision.ReasonRestartingServer: "DeleteServer", decision.ReasonServerReady: "UpdateStatus", decision.ReasonServerMissing: "UpdateStatus",
		decision.ReasonStartingServer: "DeleteServer", decision.ReasonStoppingServer: "DeleteServer",
	} {
		if got := eventAction(reason); got != want {
			t.Errorf("eventAction(%s) = %s, want %s", reason, got, want)
		}
	}
}

// caseFile is the file of the golden case name.
func caseFile(name string) string { return "../testdata/decide/" + name + ".txtar" }

// TestApplyResize: a resize the backend takes keeps the server (same ID, new cpu) and records
// ResizingServer; one it refuses outright is recorded at this generation instead, and the
// next decision replaces the server under --resize in-place, or leaves it with
// RestartRequired under manual and asks for nothing more.
func TestApplyResize(t *testing.T) {
	tests := map[string]struct {
		mode      decision.ResizeMode
		refuse    string
		condition string // the lifecycle condition the status then carries, as Type/Reason
		next      decision.ServerOp
		event     string // the event's "Type Reason" prefix
	}{
		"taken":             {mode: decision.ResizeInPlace, condition: "Resizing/ResizePending", event: "Normal ResizingServer "},
		"refused, in-place": {mode: decision.ResizeInPlace, refuse: "node capacity", condition: "Resizing/ResizeInfeasible", next: decision.DeleteServer},
		"refused, manual":   {mode: decision.ResizeManual, refuse: "node capacity", condition: "RestartRequired/ResizeInfeasible"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "cpu-resize-requested")
			vm := w.view(t, "cpu-resize-requested")
			_, srv := decidecase.Read(t, caseFile("cpu-resize-requested"))
			owner := ownerOf(vm)
			w.servers.Set(owner, srv)
			w.servers.AnswerResizes(memory.ResizeAnswer{Refuse: tc.refuse, State: backend.ResizePending})
			a := w.applier()
			a.policy.Resize = tc.mode
			plan := a.policy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
			if plan.Server == nil || plan.Server.Op != decision.ResizeServer {
				t.Fatalf("plan %+v, want a resize", plan.Server)
			}
			if _, err := a.apply(context.Background(), vm, owner, srv, nil, plan); err != nil {
				t.Fatal(err)
			}
			after, _ := w.servers.Observe(owner)
			if after.ID != srv.ID || (tc.refuse == "") != (after.Spec.CPU.String() == "4") {
				t.Errorf("server %s cpu %s after the resize", after.ID, after.Spec.CPU.String())
			}
			evs := w.events()
			if tc.event != "" && (len(evs) != 1 || !strings.HasPrefix(evs[0], tc.event)) {
				t.Errorf("events %q, want one %s", evs, tc.event)
			}
			obj := w.vm(t, "default", "test-vm")
			raw, err := obj.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			vm2, err := schema.Parse(raw, w.fields)
			if err != nil {
				t.Fatal(err)
			}
			st := vm2.Status()
			typ, reason, _ := strings.Cut(tc.condition, "/")
			if c := st.Condition(typ); c == nil || c.Reason != reason || c.ObservedGeneration != vm.Generation() {
				t.Errorf("condition %s: %+v, want reason %s at generation %d", typ, c, reason, vm.Generation())
			}
			next := a.policy.Decide(decision.Input{VM: vm2, Server: after, Now: now})
			switch {
			case tc.next == "" && !next.Empty():
				t.Errorf("next plan %+v, want nothing", next)
			case tc.next != "" && (next.Server == nil || next.Server.Op != tc.next):
				t.Errorf("next plan %+v, want %s", next.Server, tc.next)
			}
		})
	}
}

// TestApplyRefusedResizeDeleteFails: the host refused a resize, so the server is replaced; the
// replacement's status goes first (StatusFirst), and it no longer carries the record of the
// refusal. When the delete after it fails, the next decision carries the replacement on: it
// deletes the server, writes nothing, and neither asks for the refused resize again nor says
// the VM is ready in between.
func TestApplyRefusedResizeDeleteFails(t *testing.T) {
	w := newWorld(t, "cpu-resize-requested")
	_, srv := decidecase.Read(t, caseFile("cpu-resize-requested"))
	vm := w.view(t, "cpu-resize-requested")
	owner := ownerOf(vm)
	w.servers.Set(owner, srv)
	w.servers.AnswerResizes(memory.ResizeAnswer{Refuse: "node capacity"})
	a := w.applier()
	stored := func() schema.VirtualMachine { return cachedView(t, w.vm(t, "default", "test-vm"), w.fields) }

	if plan := a.policy.Decide(decision.Input{VM: vm, Server: srv, Now: now}); plan.Server == nil || plan.Server.Op != decision.ResizeServer {
		t.Fatalf("plan %+v, want a resize", plan.Server)
	} else if _, err := a.apply(context.Background(), vm, owner, srv, nil, plan); err != nil {
		t.Fatal(err)
	}
	plan := a.policy.Decide(decision.Input{VM: stored(), Server: srv, Now: now})
	if plan.Server == nil || plan.Server.Op != decision.DeleteServer || !plan.Server.StatusFirst || plan.Status == nil {
		t.Fatalf("plan %+v, want the server replaced, the status first", plan)
	}
	w.servers.FailDelete(errors.New("connection refused"))
	if _, err := a.apply(context.Background(), stored(), owner, srv, nil, plan); err == nil {
		t.Fatal("apply: no error from the failed delete")
	}
	if r := status(t, w, testVM, "reason"); r != decision.ReasonServerReplacing {
		t.Fatalf("reason %q after the failed delete, want %s written first", r, decision.ReasonServerReplacing)
	}

	w.servers.FailDelete(nil)
	writes := len(w.writes())
	plan = a.policy.Decide(decision.Input{VM: stored(), Server: srv, Now: now})
	if plan.Server == nil || plan.Server.Op != decision.DeleteServer || plan.Status != nil {
		t.Fatalf("plan after the failed delete:\n%+v\n%+v\nwant the delete again and nothing written", plan.Server, plan.Status)
	}
	if _, err := a.apply(context.Background(), stored(), owner, srv, nil, plan); err != nil {
		t.Fatal(err)
	}
	if s, _ := w.servers.Observe(owner); s == nil || !s.Deleting || s.Spec.CPU.String() != srv.Spec.CPU.String() {
		t.Errorf("server %+v, want it going, not resized", s)
	}
	if n := len(w.writes()); n != writes {
		t.Errorf("%d writes of the VM, want none", n-writes)
	}
}

// TestApplyMigrationRecordReplaced: a migration record written over an earlier one replaces
// it wholly in the VM as the API server stores it: none of the earlier record's fields the new
// one leaves out (the nodes of the move before it, its message) stays behind.
func TestApplyMigrationRecordReplaced(t *testing.T) {
	tests := map[string]struct {
		vm, server string                       // the golden case whose VM and server (if any) the world starts from
		set        func(o map[string]any) error // the change of the stored VM that asks for the new migration
		phase      schema.MigrationPhase        // the new record's
	}{
		// A migration that succeeded, then a request for a VM that is halted.
		"refused after a move": {vm: "migrate-not-running", phase: schema.MigrationRefused, set: func(o map[string]any) error {
			return unstructured.SetNestedMap(o, map[string]any{"requestedAt": "2026-06-01T11:00:00Z", "phase": "Succeeded",
				"sourceNode": "node-a", "targetNode": "node-b", "message": "Server test-vm-server moved from node node-a to node node-b"},
				"status", "migration")
		}},
		// A migration that succeeded onto node-b, then another request: Moving off node-b.
		"moving after a move": {vm: "migrate-done-steady", server: "migrate-done-steady", phase: schema.MigrationMoving, set: func(o map[string]any) error {
			return unstructured.SetNestedField(o, "2026-06-01T11:59:30Z", "metadata", "annotations", schema.AnnotationMigrateRequestedAt)
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.vm)
			obj := w.vm(t, "default", "test-vm")
			if err := tc.set(obj.Object); err != nil {
				t.Fatal(err)
			}
			if err := w.client.Tracker().Update(vmGVR, obj, "default"); err != nil {
				t.Fatal(err)
			}
			vm := cachedView(t, obj, w.fields)
			var srv *backend.Server
			if tc.server != "" {
				_, srv = decidecase.Read(t, caseFile(tc.server))
				w.servers.Set(ownerOf(vm), srv)
			}
			plan := serverPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
			if plan.Status == nil || plan.Status.Migration == nil || plan.Status.Migration.Phase != tc.phase {
				t.Fatalf("plan:\n%+v\nwant a migration record %s", plan.Status, tc.phase)
			}
			if _, err := w.applier().apply(context.Background(), vm, ownerOf(vm), srv, nil, plan); err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(plan.Status.Migration)
			if err != nil {
				t.Fatal(err)
			}
			var want map[string]any
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatal(err)
			}
			got, _, _ := unstructured.NestedMap(w.vm(t, "default", "test-vm").Object, "status", "migration")
			if !reflect.DeepEqual(got, want) {
				t.Errorf("status.migration stored as\n%v\nwant the new record only\n%v", got, want)
			}
		})
	}
}

// TestApplyReplacementOrder: a server replaced because of the spec is deleted only once the
// status that says so is written (StatusFirst), so that no one deciding on the VM after the
// delete finds the server gone under a status that says it runs; a status write that fails
// leaves the server as it was. A restart deletes first, as every delete that carries out a
// request does: the request says why the server goes until the status records it.
func TestApplyReplacementOrder(t *testing.T) {
	tests := map[string]struct {
		// statusFirst: the status is written while the server still runs.
		statusFirst bool
	}{
		"rootdisk-changed": {statusFirst: true},
		"restart-once":     {statusFirst: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, name)
			vm := w.view(t, name)
			_, srv := decidecase.Read(t, caseFile(name))
			w.servers.Set(ownerOf(vm), srv)
			plan := serverPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
			if plan.Server == nil || plan.Server.Op != decision.DeleteServer || plan.Status == nil || plan.Server.StatusFirst != tc.statusFirst {
				t.Fatalf("plan %+v, want a delete and a status, statusFirst %v", plan, tc.statusFirst)
			}

			// The status write fails.
			w.failNext("status", apierrors.NewConflict(vmGVR.GroupResource(), vm.Name(), errors.New("the VM changed")))
			_, err := w.applier().apply(context.Background(), vm, ownerOf(vm), srv, nil, plan)
			if !apierrors.IsConflict(err) {
				t.Fatalf("apply: %v, want the conflict", err)
			}
			if s, _ := w.servers.Observe(ownerOf(vm)); tc.statusFirst && (s == nil || s.Deleting) {
				t.Errorf("server %+v after a failed status write, want it running", s)
			}

			// It goes through.
			w.servers.Set(ownerOf(vm), srv)
			if _, err := w.applier().apply(context.Background(), vm, ownerOf(vm), srv, nil, plan); err != nil {
				t.Fatal(err)
			}
			if s, _ := w.servers.Observe(ownerOf(vm)); s == nil || !s.Deleting {
				t.Errorf("server %+v, want it going", s)
			}
			writes := w.writes()
			last := writes[len(writes)-1]
			if last.subresource != "status" || last.serverDeleting == tc.statusFirst {
				t.Errorf("last write %s/%s with the server being deleted: %v, want %v", last.name, last.subresource, last.serverDeleting, !tc.statusFirst)
			}
			if evs := w.events(); len(evs) == 0 || !slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, plan.Server.Event.Reason) }) {
				t.Errorf("events %q, want %s", evs, plan.Server.Event.Reason)
			}
		})
	}
}

// TestApplyReplacementDeleteRefused: a replacement's delete after its status (StatusFirst)
// that the backend refuses for good is said at once, in a second status write: Failed,
// ServerDeleteRefused, Stalled, with a Warning, looked at again within RejectedRetry. Before,
// the refusal went to the error backoff with the status saying the server was being replaced,
// and only the next try, which deletes first, said it.
func TestApplyReplacementDeleteRefused(t *testing.T) {
	const name = "rootdisk-changed"
	w := newWorld(t, name)
	vm := w.view(t, name)
	_, srv := decidecase.Read(t, caseFile(name))
	w.servers.Set(ownerOf(vm), srv)
	plan := serverPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
	if plan.Server == nil || plan.Server.Op != decision.DeleteServer || !plan.Server.StatusFirst || plan.Status == nil {
		t.Fatalf("plan %+v, want the server replaced, the status first", plan)
	}
	w.servers.FailDelete(fmt.Errorf("delete pod %s: pods %q is forbidden: an admission policy: %w", srv.Name, srv.Name, backend.ErrRejected))
	after, err := w.applier().apply(context.Background(), vm, ownerOf(vm), srv, nil, plan)
	if err != nil {
		t.Fatalf("apply: %v, want the refusal in the status", err)
	}
	if after == 0 || after > decision.RejectedRetry {
		t.Errorf("looked at again after %v, want within %v", after, decision.RejectedRetry)
	}
	if s, _ := w.servers.Observe(ownerOf(vm)); s == nil || s.Deleting {
		t.Errorf("server %+v, want it left as it is", s)
	}
	st := cachedView(t, w.vm(t, vm.Namespace(), vm.Name()), w.fields).Status()
	if st.Phase != schema.PhaseFailed || st.Reason != decision.ReasonServerDeleteRefused || !strings.Contains(st.Message, "forbidden") ||
		st.Condition(schema.ConditionStalled) == nil {
		t.Errorf("status %s %s %q, Stalled %v: want Failed ServerDeleteRefused quoting the refusal, Stalled", st.Phase, st.Reason, st.Message, st.Condition(schema.ConditionStalled))
	}
	writes := w.writes()
	if n := len(writes); n != 2 || writes[0].subresource != "status" || writes[1].subresource != "status" {
		t.Errorf("writes %+v, want the replacement's status, then the refusal's", writes)
	}
	if evs := w.events(); !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Warning ServerDeleteRefused ") }) {
		t.Errorf("events %q, want the Warning ServerDeleteRefused", evs)
	}

	// The next decision, on the VM as written, deletes first and keeps the status as it is.
	vm = cachedView(t, w.vm(t, vm.Namespace(), vm.Name()), w.fields)
	plan = serverPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
	if plan.Server == nil || plan.Server.Op != decision.DeleteServer || plan.Server.StatusFirst {
		t.Errorf("plan %+v after the refusal, want the delete asked again before any status", plan.Server)
	}
}
