package decision

import (
	"fmt"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// A disk left from --root-disk claim. Under --root-disk ephemeral the controller makes no disk,
// mounts none on a new server, grows none, and the status reports none; but a VM may still
// have the disk a controller under claim made for it (the mode switched with VMs in place).
// That disk is its owner's data as much as under claim: the VM owns it or lets go of it as its
// reclaim policy says (leftDisk), and the VM's deletion deletes or keeps it so (deletingDisk).
// Without that, a Retain policy would leave the disk owned by the VM, and the garbage
// collector deletes what a deleted VM owns. A disk of the name that is not the VM's (an
// earlier VM's kept disk, another's) is left alone: nothing adopts it under ephemeral.

// holdDisk keeps the VM's own disk as its spec says, under either mode: keepDisk under claim
// (owned or kept, and grown), leftDisk under ephemeral.
func (d *decision) holdDisk(spec schema.Spec) {
	if d.disk.claims {
		d.keepDisk(spec)
		return
	}
	d.leftDisk(spec)
}

// leftDisk makes the VM own its disk, or stop owning it, as its reclaim policy says (keeps: a
// kept disk stays kept unless the spec names Delete), as keepDisk does under claim (with the
// same Events and the same mark), has it record the VM's kind as keepDisk does, and does
// nothing else to it: its size stays what it is, and no DiskResizing condition is kept.
func (d *decision) leftDisk(spec schema.Spec) {
	seen := d.disk.seen
	if d.disk.own == nil || seen.Deleting {
		return
	}
	up := backend.DiskSpec{Size: seen.Requested, Keep: keeps(spec, seen, true)} // its size as it is
	switch o := owner(up); {
	case up.Keep && (o != seen.Owner || !seen.KeptMark):
		msg := fmt.Sprintf("Disk %s is kept when the VM is deleted (%s): the VM no longer owns it", seen.Name, d.whyKept(spec))
		if o == seen.Owner {
			msg = fmt.Sprintf("Disk %s is kept when the VM is deleted (%s): marked as kept", seen.Name, d.whyKept(spec))
		}
		d.plan.Disk = &DiskAction{Op: ReleaseDisk, Spec: &up, Event: Event{Type: EventNormal, Reason: ReasonRetainingDisk,
			Message: msg + d.deleteHint(spec)}}
		d.disk.own.Owner, d.disk.own.KeptMark = o, true
	case !up.Keep && (o != seen.Owner || seen.KeptMark):
		msg := fmt.Sprintf("Disk %s goes with the VM when it is deleted (reclaim policy Delete): the VM owns it again", seen.Name)
		if o == seen.Owner {
			msg = fmt.Sprintf("Disk %s goes with the VM when it is deleted (reclaim policy Delete): no longer marked as kept", seen.Name)
		}
		d.plan.Disk = &DiskAction{Op: AdoptDisk, Spec: &up, Event: Event{Type: EventNormal, Reason: ReasonAdoptingDisk, Message: msg}}
		d.disk.own.Owner, d.disk.own.KeptMark = o, false
	default:
		d.recordDiskKind(up)
	}
	d.disk.own.KindUnrecorded = false // each of the changes above records it
}
