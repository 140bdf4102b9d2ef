package decision

import (
	"fmt"
	"time"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// DiskForbidden is the plan for a deleted VM on whose way out the backend was forbidden a
// call on the VM's disk (for claims, the API server's Forbidden: the controller's role lost
// a verb on persistentvolumeclaims, or an admission policy refuses it). call says which:
// "read", the look past the cache that makes sure the VM owns no disk the cache does not show
// before it goes, or the operation of the disk's action ("delete", "release"); why is the
// backend's error. Nothing is done to a disk the controller may not see or act on, and a VM
// let go would leave a disk it owns to the garbage collector, which deletes it whatever its
// reclaim policy says: so the finalizer stays, and the VM with it, as for a refused release
// (DiskReleaseRefused, the reason it reports): Terminating and stalled, one Warning, and
// another try every minute, which carries the way out through once the call is allowed. Of
// in, what the forbidden call was decided on, only the VM and the time of the refusal (in.Now)
// count.
func (p Policy) DiskForbidden(in Input, call, why string) Plan {
	vm := in.VM
	d := decision{vm: vm, now: in.Now.UTC().Truncate(time.Second), current: vm.Status(), refusal: true}
	d.report(schema.PhaseTerminating, ReasonDiskReleaseRefused, fmt.Sprintf("The VM is deleted but stays until the controller may %s its disk, "+
		"which is left as it is meanwhile; the %s was forbidden: %s. Give the controller back the permission the error names "+
		"(for a claim: its role's rule on persistentvolumeclaims, as `vm-controller manifests` prints it), or lift the policy that refuses it; "+
		"the VM goes on by itself within a minute",
		call, call, why), nil)
	d.plan.RequeueAfter = Duration(RejectedRetry)
	return d.plan
}
