package decision

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// An invalid spec (schema.VirtualMachine.Spec's errors) is refused: the VM is Failed
// (InvalidSpec), and nothing is made, replaced, resized or grown for it. With a field in error
// the decision cannot know the server the spec asks for (cpu, memory, image, placement), nor
// the disk's size and class (retainDisk keeps it safe as the reclaim policy says), nor the
// eviction strategy and so the budget: acting on the rest would be guessing. What it still
// knows, when the run strategy reads as one of its words, is whether the VM is to have a
// server at all, and under Halted, or on a stop request under RerunOnFailure, Once or Manual,
// its owner wants none: `kubectl vm stop` to free a node must not be told the VM stopped while
// its server runs on until someone fixes a field the owner may not even own (a CRD of another
// group that lets it through, a value stored before a validation rule). Deleting the server
// needs none of what the error hides, and never touches the disk: the server is deleted as
// the valid spec's decision deletes it (haltServer, deleteOnStop), and the status stays
// Failed, InvalidSpec, its message saying that the server is being deleted all the same. A
// start or a restart waits for the spec to be fixed; so does a stop of a VM with no server,
// which there is nothing to carry out for.

// invalid reports a VM whose spec has the errors errs; spec is what could be read of it.
func (d *decision) invalid(spec schema.Spec, errs field.ErrorList) {
	srv, suffix := d.srv, ""
	if srv != nil {
		if why := d.stopInvalid(spec); why != "" {
			srv = d.deletingServer()
			suffix = fmt.Sprintf("; server %s is being deleted all the same (%s)", srv.Name, why)
			if srv.State == backend.StateLost {
				suffix += ", and its node does not answer: the deletion waits for it"
			}
		}
		if a := d.plan.Server; a != nil && d.current.Reason != ReasonInvalidSpec {
			// The server's Event stands for the transition (report), which would have been
			// InvalidSpec's Warning: it says the spec is refused, for whoever reads Events only.
			a.Event.Message += "; the spec is invalid: the VM is Failed (InvalidSpec), its status says why"
		}
	}
	// The field errors are cut short, if need be, rather than what is done of the server.
	msg := schema.Shorten(invalidMessage(errs), schema.ConditionMessageLimit-len(suffix)) + suffix
	d.report(schema.PhaseFailed, ReasonInvalidSpec, msg, srv)
}

// stopInvalid deletes the server (there is one) of a VM whose spec is invalid when its run
// strategy says it is to have none: Halted, whose requests are recorded as they are under a
// valid spec (inactive: a stop's grace period cuts a deletion under way short), or a new
// stop request under RerunOnFailure, Once or Manual, recorded as carried out. A stop's
// deletion under way goes on. It returns why, for the status message ("" when the server is
// not to go: under Always, a run strategy the spec does not name clearly, no stop), and puts
// the status the valid spec's decision writes for it in the refusal's record
// (ConditionRefusedWhileStopped: ServerStopping, Stopping), so that once the spec is fixed the
// VM is stopped, not started again.
func (d *decision) stopInvalid(spec schema.Spec) string {
	srv := d.srv
	switch spec.RunStrategy {
	case schema.RunHalted:
		d.haltServer(d.recordRequests())
		d.run.stoppedAs = &rested{schema.PhaseInactive, ReasonServerStopping,
			fmt.Sprintf("Waiting for server %s to be deleted (action is inactive)", srv.Name), true}
		return "action is inactive"
	case schema.RunRerunOnFailure, schema.RunOnce, schema.RunManual:
	default:
		return ""
	}
	at := d.current.StopRequestedAt
	if _, stop := d.newRequests(); stop.Value != "" {
		at = stop.Value
		d.next().StopRequestedAt = at
		if r := d.newRestart(); r != "" {
			d.next().RestartedAt = r // overtaken by the stop
		}
		d.deleteOnStop(at)
	} else if !srv.Deleting || !d.stopping() {
		return ""
	}
	d.run.stoppedAs = &rested{schema.PhaseInactive, ReasonStopping,
		fmt.Sprintf("Waiting for server %s to be deleted %s", srv.Name, stopNote(at)), true}
	return "stop requested at " + at
}
