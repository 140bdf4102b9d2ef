package decision_test

import (
	"path/filepath"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestCreated: the server a create made fills in the status the plan writes, and a plan
// without a status, or a create that returned nothing, is left as it is.
func TestCreated(t *testing.T) {
	srv := &backend.Server{Name: "test-vm-server", ID: "uid-1", Detail: "Pending"}
	var none decision.Plan
	none.Created(srv)
	if none.Status != nil {
		t.Errorf("a plan without a status got one: %+v", none.Status)
	}
	p := decision.Plan{Status: &schema.Status{Server: &schema.ServerStatus{State: "Pending"}}}
	p.Created(nil)
	if *p.Status.Server != (schema.ServerStatus{State: "Pending"}) {
		t.Errorf("no server changed the status: %+v", p.Status.Server)
	}
	p.Created(srv)
	if got := *p.Status.Server; got != (schema.ServerStatus{Name: "test-vm-server", ID: "uid-1", State: "Pending"}) {
		t.Errorf("status server %+v, want the created one", got)
	}
}

// TestReportKeepsUsage: a status the decision writes keeps the usage the poller reported,
// which is not the decision's to change.
func TestReportKeepsUsage(t *testing.T) {
	file := filepath.Join(cases, "ready.txtar")
	raw, _ := decidecase.Input(t, file)
	raw, err := jsonpatch.MergePatch(raw, []byte(`{"status":{"server":{"usage":{"cpu":"250m","memory":"64Mi"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	vm, err := schema.Parse(raw, decidecase.Fields(t))
	if err != nil {
		t.Fatal(err)
	}
	_, srv := decidecase.Read(t, file)
	if srv == nil {
		t.Fatal("the case has no server")
	}
	plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
	if plan.Status == nil || plan.Status.Server == nil || plan.Status.Server.Usage == nil ||
		*plan.Status.Server.Usage != (schema.Usage{CPU: "250m", Memory: "64Mi"}) {
		t.Errorf("status %+v: the usage was not kept", plan.Status)
	}
}

// TestSpecChangeNamesEach: a server that differs from the spec in several ways is replaced
// (or resized) with an event that names each difference.
func TestSpecChangeNamesEach(t *testing.T) {
	vm, srv := decidecase.Read(t, filepath.Join(cases, "cpu-changed.txtar"))
	srv.Spec.Memory = resource.MustParse("3Gi")
	plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
	if plan.Server == nil {
		t.Fatal("no server action")
	}
	if msg := plan.Server.Event.Message; !strings.Contains(msg, "cpu ") || !strings.Contains(msg, ", memory 3Gi -> ") {
		t.Errorf("event %q does not name both changes", msg)
	}
}

// TestReleasing: a VM going with its namespace keeps what lets it go (its server deleted, its
// finalizer removed, the next look) and drops the status, the Events, the disk's action and
// the budget's (the namespace's deletion takes the budget).
func TestReleasing(t *testing.T) {
	vm, srv := decidecase.Read(t, filepath.Join(cases, "delete-with-server.txtar"))
	plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
	if plan.Server == nil || plan.Server.Op != decision.DeleteServer || plan.Status == nil {
		t.Fatalf("the case's plan %+v: want the server deleted and a status", plan)
	}
	plan.Disk = &decision.DiskAction{Op: decision.DeleteDisk}
	plan.Budget = &decision.BudgetAction{Op: decision.DeleteBudget, Name: "test-vm-block-eviction"}
	plan.Events = []decision.Event{{Type: decision.EventNormal, Reason: "Any"}}
	plan.Finalizer, plan.RequeueAfter = decision.RemoveFinalizer, 5
	got := plan.Releasing()
	if got.Status != nil || got.Events != nil || got.Disk != nil || got.Budget != nil {
		t.Errorf("Releasing kept status %+v, events %v, disk %+v, budget %+v", got.Status, got.Events, got.Disk, got.Budget)
	}
	if got.Server != plan.Server || got.Finalizer != decision.RemoveFinalizer || got.RequeueAfter != 5 {
		t.Errorf("Releasing dropped what lets the VM go: %+v", got)
	}
	if plan.Status == nil || plan.Disk == nil {
		t.Error("Releasing changed the plan it was called on")
	}

	// A VM whose server is on a node that does not answer is not let go: its status says why,
	// and how (the node deleted, the pod force-deleted), which the namespace's deletion sends
	// a person to read; its Events go, which the API server refuses there.
	vm, srv = decidecase.Read(t, filepath.Join(cases, "nodelost-vm-deleted.txtar"))
	lost := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
	if lost.Status == nil || lost.Status.Reason != decision.ReasonNodeLost || lost.Finalizer == decision.RemoveFinalizer {
		t.Fatalf("the case's plan %+v: want the status NodeLost and the finalizer kept", lost)
	}
	if got := lost.Releasing(); got.Status == nil || got.Status.Reason != decision.ReasonNodeLost || got.Events != nil {
		t.Errorf("Releasing a VM held by its lost node: status %+v, events %v; want the status NodeLost, no Events", got.Status, got.Events)
	}
}

// TestLayoutWithoutNextRetryTime: in a layout without status.nextRetryTime (a CRD of another
// group, a field map of its own), a failed server waiting out its backoff is decided on, the
// plan carried out, and decided on again: nothing more is written. The status kept the time
// of the next try, which the layout reads back as unset, and every decision of the wait found
// the status changed and wrote it again (the message holds the time there).
func TestLayoutWithoutNextRetryTime(t *testing.T) {
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	file := filepath.Join("..", "..", "testdata", "decide", "failed-backoff-wait.txtar")
	vm, srv := decidecase.Read(t, file)
	fields, left := vm.Fields().Without(map[string]bool{"status.nextRetryTime": true})
	if len(left) != 1 {
		t.Fatalf("left out %v, want status.nextRetryTime", left)
	}
	vm = schema.ViewOf(vm.JSON(), vm.ResourceVersion(), fields)
	plan := policy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
	if plan.Status == nil || !strings.Contains(plan.Status.Message, "a new server will be created at") {
		t.Fatalf("status %+v: the case must write the wait, with its time in the message", plan.Status)
	}
	w := applyPlan(t, vm, srv, nil, plan)
	if again := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now}); again.Status != nil {
		t.Errorf("decided again, the status written again: %+v", *again.Status)
	}
}

// TestLingerHintWithoutNextRetryTime: the EvictionBlocked message of a failed server that a
// sidecar keeps running, waiting out its backoff, points at the field of the time of its
// replacement where the layout keeps it (status.nextRetryTime, or the path a field map gives),
// and at the status's message in a layout without that field.
func TestLingerHintWithoutNextRetryTime(t *testing.T) {
	file := filepath.Join("..", "..", "testdata", "decide", "evict-block-cordoned-failed-lingers-backoff.txtar")
	vm, srv := decidecase.Read(t, file)
	budget := decidecase.Budget(t, file)
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	without, _ := vm.Fields().Without(map[string]bool{"status.nextRetryTime": true})
	moved := vm.Fields()
	moved.NextRetryTime = "status.retry.notBefore" // a field map of its own
	for _, tc := range []struct {
		fields schema.Fields
		want   string
	}{
		{vm.Fields(), "(status.nextRetryTime)"},
		{moved, "(status.retry.notBefore)"},
		{without, "(the time the status's message gives)"},
	} {
		v := schema.ViewOf(vm.JSON(), vm.ResourceVersion(), tc.fields)
		plan := policy.Decide(decision.Input{VM: v, Server: srv, Budget: budget, Now: now})
		var msg string
		if plan.Status != nil {
			if c := plan.Status.Condition(decision.ConditionEvictionBlocked); c != nil {
				msg = c.Message
			}
		}
		if !strings.Contains(msg, tc.want) {
			t.Errorf("EvictionBlocked %q, want it to say %s", msg, tc.want)
		}
	}
}
