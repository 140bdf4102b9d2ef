package decision

import (
	"fmt"
	"time"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// ServerDeleteRefused is the plan for a VM whose server the backend refused to delete
// (backend.ErrRejected, why: the controller's role lost its delete, an admission policy that
// protects the pod): a delete for the VM's deletion, a stop, a restart, a migration. Retried
// with the error backoff, the VM kept the status it had ("running and ready" on a VM being
// deleted) with no word of the refusal but the log, for up to the backoff's ceiling after
// the cause was fixed. Now its status says why (Terminating for a deleted VM, which stays
// until its server goes, else Failed), Stalled on it with a Warning, and the delete is asked
// again every RejectedRetry. The server is left as it is. in is what the refused delete was
// decided on, its VM as last written, at the time of the refusal (in.Now); of what the backend
// observed, only its Server counts (nil: the message names none).
func (p Policy) ServerDeleteRefused(in Input, why string) Plan {
	vm, srv := in.VM, in.Server
	d := decision{vm: vm, now: in.Now.UTC().Truncate(time.Second), current: vm.Status(), refusal: true}
	name := "its server"
	if srv != nil {
		name = "server " + srv.Name
	}
	const fix = "Give the controller back its permission to delete the server (for a pod: its role's rule on pods, as `vm-controller manifests` prints it), " +
		"or lift the policy that refuses it; the controller asks again every minute"
	phase, msg := schema.PhaseFailed, fmt.Sprintf("The controller could not delete %s: %s. %s", name, why, fix)
	if vm.Deleting() {
		phase, msg = schema.PhaseTerminating, fmt.Sprintf("The VM is deleted but stays until %s is deleted, which was refused: %s. %s", name, why, fix)
	}
	d.report(phase, ReasonServerDeleteRefused, msg, srv)
	d.plan.RequeueAfter = Duration(RejectedRetry)
	return d.plan
}
