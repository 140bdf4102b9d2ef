package reconcile

import (
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestControllerPaused: a paused Active VM whose server went is reconciled without a write, a
// server or an Event; once the annotation goes, the VM is queued as new work and gets its new
// server, the Paused condition goes, and Resumed is recorded.
func TestControllerPaused(t *testing.T) {
	w := newWorld(t, "paused-server-gone")
	c, r := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	c.processNextItem(ctx)
	if got := r.last(); got != "success" {
		t.Fatalf("result %q, want success", got)
	}
	if ws := w.writes(); len(ws) != 0 {
		t.Fatalf("writes %+v to a paused VM", ws)
	}
	if srv, _ := w.servers.Observe(ownerOf(w.view(t, "paused-server-gone"))); srv != nil {
		t.Fatalf("server %+v created for a paused VM", srv)
	}
	if evs := w.events(); len(evs) != 0 {
		t.Fatalf("events %q for a paused VM", evs)
	}

	u := w.vm(t, testVM.Namespace, testVM.Name)
	u.SetAnnotations(nil)
	if err := w.client.Tracker().Update(vmGVR, u, u.GetNamespace()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the resumed VM is queued as new work", func() bool { urgent, _ := c.queue.Lens(); return urgent == 1 })
	c.processNextItem(ctx)
	if srv, _ := w.servers.Observe(ownerOf(w.view(t, "paused-server-gone"))); srv == nil {
		t.Error("no server once resumed")
	}
	if phase := status(t, w, testVM, "phase"); phase != string(schema.PhaseCreating) {
		t.Errorf("phase %q once resumed, want Creating", phase)
	}
	resumed := cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields)
	if c := resumed.Status().Condition(schema.ConditionPaused); c != nil {
		t.Errorf("the Paused condition %+v stays once resumed", *c)
	}
	if evs := strings.Join(w.events(), "\n"); !strings.Contains(evs, decision.ReasonResumed) {
		t.Errorf("events %q, want Resumed", evs)
	}
}
