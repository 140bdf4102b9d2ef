package decision

import (
	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The conditions GitOps tools read: kstatus (sigs.k8s.io/cli-utils/pkg/kstatus), which Flux,
// Argo CD's health checks and kubectl wait follow, reads Reconciling (True: in progress)
// and Stalled (True: failed, it will not get there without a change) beside Ready, and
// status.observedGeneration against metadata.generation. Both are present only while True,
// as kstatus recommends ("abnormal-true"), each with the generation it speaks for; the VM's
// Resizing and RestartRequired follow the same rule.
//
// What each status means (docs/reference/phases-reasons-events.md, "kstatus"):
//   - Stalled: an invalid spec, a server or disk the backend refused, a disk of the VM's name
//     that is another's, a disk that cannot take the size asked for or the storage class the
//     spec names (DiskClassChangeRefused), the VM's bound disk deleted by someone else while
//     a server holds it (DiskDeleting), a disk whose volume is lost (WaitingForDisk), and a
//     server stuck for longer than --stalled-after (stuck.go).
//   - Reconciling: a server being created, started, replaced or stopped (on request too), a
//     failed one to be replaced after its backoff (runStrategy Always, RerunOnFailure), the VM being deleted, a resize in place or a disk's growth
//     under way.
//   - Stalled also: a failed server that its run strategy does not replace (Once, Manual).
//   - Neither: the VM is as the spec asks (Active; Inactive with no server, or stopped by its
//     run strategy: GuestShutDown, Stopped, NotStarted), or waits for
//     something only a person decides (RestartRequired under --resize manual, a node that
//     does not answer, a backend state the controller does not know).

// atRest are the Inactive reasons of a VM stopped as its spec or its requests ask (Halted, a
// stop request, a guest shut down or a server gone that its run strategy does not replace, a
// Manual VM never started): the Ready condition is left out of its status, with Reconciling
// and Stalled, so that kstatus counts it Current (report).
var atRest = map[string]bool{
	ReasonServerStopped: true,
	ReasonGuestShutDown: true,
	ReasonStopped:       true,
	ReasonNotStarted:    true,
	ReasonServerMissing: true,
}

// stalledReasons are the reasons of a phase that cannot change without a change of the spec
// or of the world the controller cannot make itself.
var stalledReasons = map[string]bool{
	ReasonInvalidSpec:    true,
	ReasonServerRejected: true,
	ReasonDiskConflict:   true,
	ReasonDiskRejected:   true,
	// Terminating, on the refusal of a person's making (DiskReleaseRefused).
	ReasonDiskReleaseRefused: true,
	// The server's delete refused (its deletion, a stop, a restart): a person's fix too.
	ReasonServerDeleteRefused: true,
}

// stalledOn reports whether st is Stalled on its own reason: the phase's reason is what
// holds the VM (a stalled reason, a failure not retried, a disk whose volume is lost, a
// server stuck past the bound), not a condition beside it (a disk's growth or class).
func stalledOn(st schema.Status) bool {
	c := st.Condition(schema.ConditionStalled)
	return c != nil && c.Status == schema.ConditionTrue && c.Reason == st.Reason
}

// retries reports whether the controller makes a new server by itself after a Failed phase
// of this reason: a failed server, under the run strategies that replace one (Always,
// RerunOnFailure; Once and Manual leave it ended).
func (d *decision) retries(reason string) bool {
	return reason == ReasonServerFailed && (d.run.strategy == schema.RunAlways || d.run.strategy == schema.RunRerunOnFailure)
}

// diskRefusals are the DiskResizing reasons of a growth that will not happen as asked.
var diskRefusals = map[string]bool{
	ReasonDiskResizeInfeasible: true,
	ReasonDiskNotExpandable:    true,
	ReasonDiskShrinkRefused:    true,
}

// kstatus returns st's conditions with Reconciling and Stalled as st says.
func (d *decision) kstatus(st *schema.Status) []schema.Condition {
	reconciling, stalled := d.progress(st)
	conds := d.lifecycle(st.Conditions, schema.ConditionReconciling, reconciling, st.ObservedGeneration)
	return d.lifecycle(conds, schema.ConditionStalled, stalled, st.ObservedGeneration)
}

// progress is the Reconciling and the Stalled condition of st (nil: absent); never both, as
// kstatus reads the first of them it meets.
func (d *decision) progress(st *schema.Status) (reconciling, stalled *lifecycleCondition) {
	phase := &lifecycleCondition{st.Reason, st.Message}
	switch {
	case d.cond.stalled != nil:
		return nil, d.cond.stalled
	case stalledReasons[st.Reason]:
		return nil, phase
	case d.disk.going != nil:
		return nil, d.disk.going // the disk's data goes unless a person keeps its volume
	case d.disk.resizing != nil && diskRefusals[d.disk.resizing.reason]:
		return nil, d.disk.resizing
	case d.disk.class != nil:
		return nil, d.disk.class
	case st.Reason == ReasonWaitingForDisk && d.disk.own != nil && !d.disk.own.Deleting && d.disk.own.Phase == backend.DiskLost:
		return nil, phase // a volume gone does not come back without a person
	}
	switch st.Phase {
	case schema.PhaseCreating, schema.PhaseTerminating:
		return phase, nil
	case schema.PhaseInactive:
		if st.Reason == ReasonServerStopping || st.Reason == ReasonStopping {
			return phase, nil
		}
	case schema.PhaseFailed:
		if d.retries(st.Reason) {
			return phase, nil
		}
		return nil, phase // a failure the controller does not retry by itself
	case schema.PhaseActive:
		switch {
		case d.cond.resizing != nil && underWay(d.cond.resizing.reason):
			return d.cond.resizing, nil
		case d.disk.resizing != nil:
			return d.disk.resizing, nil
		}
	}
	return nil, nil
}
