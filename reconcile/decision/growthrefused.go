package decision

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// GrowthRefused is the plan for a VM whose disk's growth, asked by plan (an ExpandDisk action
// decided on in), the API server refused (a quota on storage, an admission policy; why is its
// error), at the time of the refusal (in.Now). The disk keeps its size and its data, and the
// rest of the plan is carried out: a server the VM is to have is made on the disk as it is.
// As DiskRejected it was the VM Failed and no server made, every minute, with no way back:
// the CRD refuses a smaller rootDisk.
//
// The VM is decided again on its disk as if the growth had been asked of the storage and
// refused there (the claim's own word for that, DiskResizeInfeasible: Stalled, a Warning
// quoting the refusal), without the plan's disk action; its budget action is the plan's. The
// disk's growth carries the size the claim keeps (backend.Growth.Kept), which says the API
// server refused it, not the storage, so that the status says who refused it, the size the
// claim still asks for, and what to do about it (refusedGrowthHint); its state is that of
// the storage's refusal (GrowthInfeasible), so that all else decides it as a refused growth,
// and no state of the decision's own goes out with the disk GrowthRefused returns. It is
// decided on in.Budget, the budget the plan was decided on, not on a budget read again: a
// read that failed, or a cache that moved in between, would decide the VM as one without that
// budget, and a status that says the budget holds a drain (EvictionBlocked) would lose it for
// one write while the budget still held the drain. The status records the size the disk asks
// for as it is (diskAsks). The growth is asked again at the VM's next reconcile, at least
// every RejectedRetry, and refused again until the quota allows it, with nothing more written.
//
// It returns the disk the plan was decided on, in.Disk with the refusal, on which a refusal
// of what follows in the plan (the server's create) is decided. A plan that grows no disk, or
// an input without one, is returned as it is.
func (p Policy) GrowthRefused(in Input, plan Plan, why string) (Plan, *backend.Disk) {
	seen, act := in.Disk, plan.Disk
	if seen == nil || act == nil || act.Op != ExpandDisk || act.Spec == nil {
		return plan, seen
	}
	refused := *seen
	refused.Requested = act.Spec.Size
	kept := seen.Requested
	refused.Growth = backend.Growth{State: backend.GrowthInfeasible, Message: why, Kept: &kept}
	in.Disk = &refused
	re := p.Decide(in)
	re.Disk, re.Budget = nil, plan.Budget
	re.diskAsks(seen.Requested, in.VM.Status())
	if re.RequeueAfter == 0 || re.RequeueAfter > Duration(RejectedRetry) {
		// Nothing else brings the VM back once the quota allows the growth (a quota is not
		// watched): it is looked at again at the pace of refusals.
		re.RequeueAfter = Duration(RejectedRetry)
	}
	return re, &refused
}

// refusedGrowthHint is what the DiskResizing condition of a growth the API server refused
// says after the refusal (diskCondition): the storage was not asked, so the claim still asks
// for kept, its size before, which the status records where the VM's layout has a place for
// it (diskAsks); the way on is a quota that lets the growth through, or a smaller rootDisk,
// named by its path in the VM's layout, down to kept and no lower (a disk never shrinks:
// DiskShrinkRefused). What the user can do differs from a growth the storage refused, for
// which the claim asks for the larger size already.
func (d *decision) refusedGrowthHint(kept resource.Quantity) string {
	f := d.vm.Fields()
	asks := kept.String()
	if f.RootDiskRequest != "" {
		asks += " (" + f.RootDiskRequest + ")"
	}
	return fmt.Sprintf("; the storage was not asked, and the claim still asks for %s: raise the quota, or ask for less "+
		"(a %s the quota allows, no less than %s)", asks, f.RootDisk, kept.String())
}

// diskAsks records in the status the size the disk asks for as it is, requested, for a plan
// decided on the disk as if it asked for more: a growth the API server refused is decided as
// one the storage refused (GrowthRefused), on a disk that asks for the size refused, which the
// claim does not. The CRD's rule on rootDisk lets it go back to the size the status records;
// the size refused would hold it above the claim's own on storage that rounds a disk up. A
// status that then says what current says is not written.
func (p *Plan) diskAsks(requested resource.Quantity, current schema.Status) {
	if p.Status == nil || p.Status.RootDisk == nil || p.Status.RootDisk.Request == "" {
		return
	}
	disk := *p.Status.RootDisk // a copy: the status may share its disk with the current one
	disk.Request = requested.String()
	p.Status.RootDisk = &disk
	if p.Status.SameAs(current) {
		p.Status = nil
	}
}
