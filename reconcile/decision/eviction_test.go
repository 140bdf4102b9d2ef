package decision_test

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// applyBudget carries out a plan's budget action on the in-memory backend, which holds the
// budget observed (have), and returns the budget as it is afterwards. A plan that makes a
// budget the VM has, or deletes one it lacks, fails the test.
func applyBudget(t *testing.T, b *memory.Backend, owner backend.Owner, have *backend.Budget, act *decision.BudgetAction) *backend.Budget {
	t.Helper()
	if have != nil {
		b.SetBudget(owner, have)
	}
	if act != nil {
		var err error
		switch act.Op {
		case decision.CreateBudget:
			if have != nil {
				t.Fatalf("plan creates a budget while the VM has one")
			}
			_, err = b.CreateBudget(context.Background(), owner)
		case decision.DeleteBudget:
			if have == nil {
				t.Fatalf("plan deletes a budget the VM does not have")
			}
			err = b.DeleteBudget(context.Background(), owner)
		default:
			t.Fatalf("unknown budget operation %q", act.Op)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.ObserveBudget(owner)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// evictionEvents checks the Events of the eviction strategies' conditions in a plan whose
// status goes from current to st, and returns evs without them: ServerMoved, Normal, once,
// exactly when Moving goes because the server is ready; DrainBlocked, a Warning, once, exactly
// when EvictionBlocked comes, and on a server that runs on a cordoned node.
func evictionEvents(fail func(string, ...any), current, st schema.Status, srv *backend.Server, evs []decision.Event) []decision.Event {
	for _, c := range []struct {
		reason string
		typ    string
		want   bool
	}{
		{decision.ReasonServerMoved, corev1.EventTypeNormal, current.Condition(decision.ConditionMoving) != nil &&
			st.Condition(decision.ConditionMoving) == nil && srv != nil && srv.State == backend.StateReady && !srv.Deleting},
		{decision.ReasonDrainBlocked, corev1.EventTypeWarning, current.Condition(decision.ConditionEvictionBlocked) == nil &&
			st.Condition(decision.ConditionEvictionBlocked) != nil},
	} {
		i := slices.IndexFunc(evs, func(e decision.Event) bool { return e.Reason == c.reason })
		switch {
		case c.want && i < 0:
			fail("no %s event", c.reason)
		case !c.want && i >= 0:
			fail("a %s event without its condition's change", c.reason)
		case i >= 0:
			if evs[i].Type != c.typ || slices.ContainsFunc(evs[i+1:], func(e decision.Event) bool { return e.Reason == c.reason }) {
				fail("%s events %+v: want one, %s", c.reason, evs, c.typ)
			}
			evs = slices.Delete(slices.Clone(evs), i, i+1)
		}
	}
	if st.Condition(decision.ConditionEvictionBlocked) != nil && (srv == nil || !srv.Cordoned || srv.Deleting) {
		fail("EvictionBlocked without a server that stays on a cordoned node")
	}
	return evs
}
