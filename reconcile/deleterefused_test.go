package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestControllerServerDeleteRefused: the delete of a deleted VM's server is refused (the
// controller's role without delete on pods, an admission policy that protects the pod). The
// VM says so: Terminating, ServerDeleteRefused, Stalled, one Warning, looked at again within
// a minute, its finalizer on; once the delete is let through, the server goes and so does the
// VM. Before, every reconcile failed into the error backoff, and the VM, being deleted, said
// "running and ready" with no Event.
func TestControllerServerDeleteRefused(t *testing.T) {
	w := newWorld(t, "delete-with-server")
	owner := ownerOf(w.view(t, "delete-with-server"))
	_, srv := decidecase.Read(t, caseFile("delete-with-server"))
	if srv == nil {
		t.Fatal("the case has no server")
	}
	w.servers.Set(owner, srv)
	c, _ := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	w.servers.FailDelete(fmt.Errorf("delete pod %s: pods %q is forbidden: User cannot delete resource: %w", srv.Name, srv.Name, backend.ErrRejected))
	after, err := c.reconcile(ctx, testVM, c.log, false)
	if err != nil {
		t.Fatalf("reconcile: %v, want the refusal in the status", err)
	}
	if after == 0 || after > decision.RejectedRetry {
		t.Errorf("looked at again after %v, want within %v", after, decision.RejectedRetry)
	}
	st := cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields).Status()
	if st.Phase != schema.PhaseTerminating || st.Reason != decision.ReasonServerDeleteRefused || !strings.Contains(st.Message, "forbidden") ||
		st.Condition(schema.ConditionStalled) == nil {
		t.Errorf("status %s %s %q, Stalled %v: want Terminating ServerDeleteRefused quoting the refusal, Stalled", st.Phase, st.Reason, st.Message, st.Condition(schema.ConditionStalled))
	}
	if evs := w.events(); !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Warning ServerDeleteRefused ") }) {
		t.Errorf("events %q, want the Warning ServerDeleteRefused", evs)
	}
	if len(w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers()) == 0 {
		t.Fatal("the finalizer came off with the server still there")
	}

	w.servers.FailDelete(nil) // the role fixed
	cachedAt(t, c, w, testVM)
	if _, err := c.reconcile(ctx, testVM, c.log, false); err != nil {
		t.Fatal(err)
	}
	if s, _ := w.servers.Observe(owner); s != nil && !s.Deleting {
		t.Errorf("server %+v, want it deleted once the delete is let through", s)
	}
}
