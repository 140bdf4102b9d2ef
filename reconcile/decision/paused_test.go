package decision_test

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// What FuzzDecide holds the decisions about pausing to (see paused.go).

// checkPaused fails unless the plan for a paused VM leaves it alone: no finalizer change, no
// server, disk or budget action, no requeue; a status, if any, that is the current one with the Paused
// condition set (True, its reason DeletionPaused for a VM being deleted, else Paused, at the
// VM's generation) and the write's time; at most one Event, of the condition's reason, when
// that reason is new. A deleted VM that nothing holds gets nothing at all.
func checkPaused(fail func(string, ...any), vm schema.VirtualMachine, plan decision.Plan) {
	if plan.Finalizer != "" || plan.Server != nil || plan.Disk != nil || plan.Budget != nil || plan.RequeueAfter != 0 {
		fail("acts on a paused VM")
	}
	st := plan.Status
	if st == nil {
		if len(plan.Events) > 0 {
			fail("events without a status change")
		}
		return
	}
	if vm.Deleting() && !vm.HasFinalizer(schema.Finalizer) {
		fail("writes the status of a paused VM that nothing holds")
	}
	current := vm.Status()
	c := st.Condition(schema.ConditionPaused)
	want := decision.ReasonPaused
	if vm.Deleting() {
		want = decision.ReasonDeletionPaused
	}
	if c == nil || c.Status != schema.ConditionTrue || c.Reason != want || c.ObservedGeneration != vm.Generation() || c.Message == "" {
		fail("Paused condition %+v, want True with reason %s at generation %d", c, want, vm.Generation())
		return
	}
	if !st.LastUpdateTime.Equal(now) {
		fail("status lastUpdateTime %s, want the decision's time %s", st.LastUpdateTime, now)
	}
	// Everything else as it was.
	rest, was := *st, current
	rest.Conditions = schema.RemoveCondition(st.Conditions, schema.ConditionPaused)
	was.Conditions = schema.RemoveCondition(current.Conditions, schema.ConditionPaused)
	if !rest.SameAs(was) {
		fail("writes more of a paused VM's status than the Paused condition")
	}
	if st.SameAs(current) {
		fail("writes a status that differs from the current one only in its times")
	}
	prev := current.Condition(schema.ConditionPaused)
	switch {
	case prev != nil && prev.Reason == c.Reason:
		if len(plan.Events) != 0 {
			fail("events %+v though the pause's reason did not change", plan.Events)
		}
	case len(plan.Events) != 1 || plan.Events[0].Reason != c.Reason ||
		(plan.Events[0].Type == corev1.EventTypeWarning) != vm.Deleting():
		fail("events %+v, want one %s (a Warning when the deletion waits)", plan.Events, c.Reason)
	}
}

// resumedEvents checks the Resumed event and the Paused condition of a plan for a VM that is
// not paused, and returns the plan's events without the Resumed one: a status written for it
// has no Paused condition, and carries one Resumed event exactly when the current status has
// the condition.
func resumedEvents(fail func(string, ...any), current, st schema.Status, evs []decision.Event) []decision.Event {
	if st.Condition(schema.ConditionPaused) != nil {
		fail("a VM that is not paused keeps the Paused condition")
	}
	i := slices.IndexFunc(evs, func(e decision.Event) bool { return e.Reason == decision.ReasonResumed })
	had := current.Condition(schema.ConditionPaused) != nil
	switch {
	case had && i < 0:
		fail("the Paused condition goes without a Resumed event")
	case !had && i >= 0:
		fail("a Resumed event for a VM that was not paused")
	case i >= 0:
		if evs[i].Type != corev1.EventTypeNormal || slices.ContainsFunc(evs[i+1:], func(e decision.Event) bool { return e.Reason == decision.ReasonResumed }) {
			fail("Resumed events %+v: want one, Normal", evs)
		}
		return slices.Delete(slices.Clone(evs), i, i+1)
	}
	return evs
}
