package decision

import (
	"fmt"
	"slices"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// A paused VM (schema.AnnotationPaused is "true") is left alone while someone repairs it by
// hand, as Cluster API's and Crossplane's paused annotations do: no server is created,
// replaced, resized or deleted, the finalizer is neither added nor removed, and of the status
// only the Paused condition is written (and lastUpdateTime, as with every status write), so
// that kubectl shows why nothing happens. A deletion
// waits: the finalizer holds the VM, and its server, until the annotation goes. Removing it
// resumes normal work, which drops the condition (report calls resumed).

// resumeHint is how a user resumes a paused VM; the Paused condition's messages end with it.
func (d *decision) resumeHint() string {
	return "resume with: " + Annotate(d.vm, schema.AnnotationPaused+"-")
}

// paused decides for a paused VM: the Paused condition, and nothing else.
func (d *decision) paused() {
	if d.vm.Deleting() && !d.vm.HasFinalizer(schema.Finalizer) {
		return // nothing holds it: it is gone as soon as Kubernetes gets to it
	}
	hint := d.resumeHint()
	reason, typ := ReasonPaused, EventNormal
	msg := fmt.Sprintf("The controller leaves this VM and its server alone while it has the annotation %s=true; %s",
		schema.AnnotationPaused, hint)
	if d.vm.Deleting() {
		reason, typ = ReasonDeletionPaused, EventWarning
		msg = fmt.Sprintf("The VM is deleted, but it is paused: its server and the VM stay until the annotation %s goes; %s",
			schema.AnnotationPaused, hint)
	}
	cond := schema.Condition{Type: schema.ConditionPaused, Status: schema.ConditionTrue, Reason: reason, Message: msg,
		ObservedGeneration: d.vm.Generation(), LastTransitionTime: d.now}
	st := d.current
	st.Conditions = schema.SetCondition(d.current.Conditions, cond)
	if st.SameAs(d.current) {
		return
	}
	st.LastUpdateTime = d.now // every status write says when it was made
	d.plan.Status = &st
	if prev := d.current.Condition(schema.ConditionPaused); prev == nil || prev.Reason != reason {
		d.event(typ, reason, msg)
	}
}

// resumed drops the Paused condition from conds, the status being written for a VM that is
// not paused, and records that the VM was resumed when it had the condition. A decision
// reports its status once; the event is recorded once all the same.
func (d *decision) resumed(conds []schema.Condition) []schema.Condition {
	if d.current.Condition(schema.ConditionPaused) == nil {
		return conds
	}
	if !slices.ContainsFunc(d.plan.Events, func(e Event) bool { return e.Reason == ReasonResumed }) {
		d.event(EventNormal, ReasonResumed, fmt.Sprintf("The annotation %s is gone: the controller manages the VM again", schema.AnnotationPaused))
	}
	return schema.RemoveCondition(conds, schema.ConditionPaused)
}
