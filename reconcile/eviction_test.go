package reconcile

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// evictedUnseen starts a controller on the VM of case name, running its server (the evicted
// server of evict-replace-manual-evicting, before the eviction), works the queue off, and
// then has a drain evict the server and the server go before the controller looks again: the
// backend shows the server marked, then no server, with nothing reconciled in between. It
// returns the controller, the worker's context and the VM's owner.
func evictedUnseen(t *testing.T, w *world, name string) (*Controller, context.Context, backend.Owner) {
	t.Helper()
	_, evicted := decidecase.Read(t, caseFile("evict-replace-manual-evicting"))
	running := *evicted
	running.Deleting, running.Disruption = false, nil
	owner := ownerOf(w.view(t, name))
	w.servers.Set(owner, &running)
	c, _ := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
	}
	if got := status(t, w, testVM, "reason"); got != decision.ReasonServerReady {
		t.Fatalf("before the eviction: reason %q, want %s", got, decision.ReasonServerReady)
	}
	w.events()

	w.servers.Set(owner, evicted) // the eviction's mark, and its deletion
	w.servers.Set(owner, nil)     // gone, with no reconcile in between
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
	}
	return c, ctx, owner
}

// TestControllerEvictedUnseenManual: a VM under runStrategy Manual and evictionStrategy
// Replace whose server was evicted and gone before the controller saw the eviction gets a new
// server at once, off the node it was evicted from if another takes it, with the condition
// Moving and the Event MovingServer: the backend remembered the eviction. It is not left
// stopped with ServerMissing, as a server deleted by someone else would leave it.
func TestControllerEvictedUnseenManual(t *testing.T) {
	const name = "evict-replace-manual-gone-unseen"
	w := newWorld(t, name)
	_, _, owner := evictedUnseen(t, w, name)

	srv, _ := w.servers.Observe(owner)
	if srv == nil {
		t.Fatalf("no new server: the VM is %s (%s)", status(t, w, testVM, "phase"), status(t, w, testVM, "reason"))
	}
	if srv.ID == "pod-uid-1" || srv.Spec.PreferAvoidNode != "node-a" {
		t.Errorf("server %s prefers to avoid %q, want a new server off node-a", srv.ID, srv.Spec.PreferAvoidNode)
	}
	if got := status(t, w, testVM, "phase"); got != string(schema.PhaseCreating) {
		t.Errorf("phase %q, want %s", got, schema.PhaseCreating)
	}
	if c := condition(t, w, decision.ConditionMoving); c["status"] != "True" || c["reason"] != decision.ReasonServerEvicted {
		t.Errorf("condition Moving %v, want True, ServerEvicted", c)
	}
	evs := w.events()
	if !slices.ContainsFunc(evs, func(e string) bool {
		return strings.HasPrefix(e, "Normal MovingServer Server test-vm-server was evicted from node node-a")
	}) ||
		slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, decision.ReasonServerMissing) }) {
		t.Errorf("events %q, want MovingServer and no ServerMissing", evs)
	}
	if g := w.servers.LastGone(owner); g != nil {
		t.Errorf("the backend still remembers the eviction once a new server came: %+v", *g)
	}
}

// TestControllerForgetsDepartures: what the backend remembers of a VM's server gone while
// disrupted goes with the VM. Under evictionStrategy None it is never taken up (the VM stays
// stopped, ServerMissing), so only the VM's deletion ends it.
func TestControllerForgetsDepartures(t *testing.T) {
	const name = "evict-none-manual-gone-unseen"
	w := newWorld(t, name)
	c, ctx, owner := evictedUnseen(t, w, name)
	if got := status(t, w, testVM, "reason"); got != decision.ReasonServerMissing {
		t.Fatalf("reason %q, want %s under None", got, decision.ReasonServerMissing)
	}
	if w.servers.LastGone(owner) == nil {
		t.Fatal("the backend did not remember the eviction")
	}
	if err := w.client.Tracker().Delete(vmGVR, testVM.Namespace, testVM.Name); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the VM's deletion is reconciled", func() bool {
		if _, ok := c.view(testVM); ok {
			return false
		}
		for c.queue.Len() > 0 {
			c.processNextItem(ctx)
		}
		return true
	})
	if g := w.servers.LastGone(owner); g != nil {
		t.Errorf("the backend remembers the eviction of a VM that is gone: %+v", *g)
	}
}

// condition is the VM's status condition of type typ, as a map; nil when it has none.
func condition(t *testing.T, w *world, typ string) map[string]any {
	t.Helper()
	obj := w.vm(t, testVM.Namespace, testVM.Name)
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// TestControllerEvictedUnseenRefused: as TestControllerEvictedUnseenManual, but the backend
// refuses the server that moves the VM (a quota). The refusal's status keeps the move
// (Moving), and once the backend takes servers again the next one is the move's: MovingServer,
// off node-a if another node takes it. Before, the refusal was decided without what the
// backend remembered of the eviction, and the move was lost: the next server was a plain
// CreatingServer with no preference, and no ServerMoved came.
func TestControllerEvictedUnseenRefused(t *testing.T) {
	const name = "evict-replace-manual-gone-unseen"
	w := newWorld(t, name)
	w.servers.FailCreate(fmt.Errorf("exceeded quota: %w", backend.ErrRejected))
	c, ctx, owner := evictedUnseen(t, w, name)

	if got := status(t, w, testVM, "reason"); got != decision.ReasonServerRejected {
		t.Fatalf("reason %q, want %s", got, decision.ReasonServerRejected)
	}
	if c := condition(t, w, decision.ConditionMoving); c["status"] != "True" || c["reason"] != decision.ReasonServerEvicted {
		t.Errorf("after the refusal, condition Moving %v, want True, ServerEvicted", c)
	}
	w.events()

	w.servers.FailCreate(nil)
	cachedAt(t, c, w, testVM)
	c.queue.Add(testVM) // the refusal's retry
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
	}
	srv, _ := w.servers.Observe(owner)
	if srv == nil {
		t.Fatalf("no new server: the VM is %s (%s)", status(t, w, testVM, "phase"), status(t, w, testVM, "reason"))
	}
	if srv.Spec.PreferAvoidNode != "node-a" {
		t.Errorf("the new server prefers to avoid %q, want node-a", srv.Spec.PreferAvoidNode)
	}
	if evs := w.events(); !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Normal MovingServer ") }) {
		t.Errorf("events %q, want MovingServer", evs)
	}
}
