package decision

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The VM's disk, under --root-disk claim: a disk of rootDisk size that the backend keeps apart
// from the server (backend.Disks), which every server of the VM mounts and which outlives them
// all. The decision makes the disk before the server, grows it in place, keeps it or deletes
// it when the VM goes as the reclaim policy says, adopts one an earlier VM of the name kept,
// and never takes another's, never shrinks one, never replaces a server for its disk.

// RootDiskMode is where a VM's root disk lives: --root-disk.
type RootDiskMode string

// The root disk modes.
const (
	// RootDiskClaim gives each VM a disk of its own that outlives its servers (for pods: a
	// PersistentVolumeClaim). The zero mode means the same.
	RootDiskClaim RootDiskMode = "claim"
	// RootDiskEphemeral gives each server a root disk that goes with it (for pods:
	// ephemeral storage): every replacement starts on an empty disk.
	RootDiskEphemeral RootDiskMode = "ephemeral"
)

// claims reports whether VMs have disks of their own under p.
func (p Policy) claims() bool { return p.RootDisk != RootDiskEphemeral }

// diskPart is the disk's part of a decision: the disk observed, the disk the plan leaves, and
// what the status is to say of it (why a server waits for it, its conditions, the Events of
// their changes). It is decided here and in leftdisk.go; report writes it into the status,
// and kstatus.go, stuck.go and migrate.go read it.
type diskPart struct {
	// claims: VMs have disks of their own (Policy.RootDisk). seen is the disk of the
	// VM's name the backend observed, whoever's it is; own is the VM's own as the plan
	// leaves it (nil: none), what the status reports under claim. Under ephemeral a VM may
	// still have the disk made for it under claim (leftdisk.go): kept or deleted as its
	// reclaim policy says, never mounted, grown or reported.
	claims bool
	seen   *backend.Disk
	own    *backend.Disk
	// wait, if set, is why no server may start for the disk (a disk of the name going
	// away); resizing is the DiskResizing condition to carry (nil drops it), and
	// events the Events of its changes, recorded with the status.
	wait     string
	resizing *lifecycleCondition
	events   []Event
	// growthNext: the plan changes the disk's owner or mark, and the growth rootDisk asks
	// for follows in a write of its own (growsNext).
	growthNext bool
	// class, if set, says the storage class the spec names does not apply to the disk
	// (classChange); kstatus.go makes it Stalled's.
	class *lifecycleCondition
	// going, if set, says the VM's own disk, bound, is being deleted by someone else
	// while a server holds it (diskDeleting); kstatus.go makes it Stalled's.
	going *lifecycleCondition
}

// diskSpec is what the live VM's spec asks of its disk, seen as seen (nil: none yet).
func diskSpec(spec schema.Spec, seen *backend.Disk) backend.DiskSpec {
	return backend.DiskSpec{Size: spec.RootDisk, StorageClass: spec.StorageClass, Keep: keeps(spec, seen, true)}
}

// keeps reports whether the VM keeps its disk, seen as seen, when the VM is deleted: under
// reclaim policy Retain, or one that is not a policy (a disk is its owner's data); and when
// the VM names no policy, a disk that is kept already: one an earlier VM of the name kept
// (unowned and labelled for the name: under Delete that VM's way out would have deleted it),
// one marked kept, or, while the VM lives, one it does not own (kept by a version that did
// not mark). Only Delete named in the spec lets a kept disk go with the VM. On the way out,
// a disk the VM does not own and that carries no mark is one a deletion with
// --cascade=orphan let go of: it goes as Delete says.
func keeps(spec schema.Spec, seen *backend.Disk, live bool) bool {
	switch {
	case spec.ReclaimPolicy != schema.ReclaimDelete:
		return true
	case spec.ReclaimPolicySet || seen == nil:
		return false
	}
	return seen.KeptMark || seen.Owner == backend.DiskUnowned || live && seen.Owner == backend.DiskKept
}

// keepWhy is why a VM whose spec is spec keeps its disk, for the Events that say so, in a
// layout that has a reclaim policy (whyKept: in the VM's own).
func keepWhy(spec schema.Spec) string {
	switch {
	case spec.ReclaimPolicy == schema.ReclaimRetain:
		return "reclaim policy Retain"
	case spec.ReclaimPolicy != schema.ReclaimDelete:
		return "its reclaim policy is not one, and a disk is kept unless it says Delete"
	}
	return "the VM names no reclaim policy, and a kept disk stays kept unless it says Delete"
}

// whyKept is keepWhy in the VM's layout. A layout without a reclaim policy (a CRD of an
// earlier release, a field map that maps none) holds no policy for a VM to name, Delete
// included: its VMs keep a disk that is kept already (keeps), the safe side, until someone
// deletes the claim, and an Event that said "unless it says Delete" would send the user after
// a field the resource does not have. noReclaimHint says what they can do instead.
func (d *decision) whyKept(spec schema.Spec) string {
	if d.noReclaimField() {
		return "the VM names no reclaim policy, and a kept disk stays kept"
	}
	return keepWhy(spec)
}

// noReclaimField reports whether the VM's layout has no reclaim policy.
func (d *decision) noReclaimField() bool { return d.vm.Fields().RootDiskReclaimPolicy == "" }

// deleteHint is how a user lets the kept disk of a VM that names no reclaim policy go; "" when
// the VM names one. The Events that keep such a disk end with it. In a layout with a reclaim
// policy it is the patch that names Delete; in one without, which cannot name it, the claim's
// deletion by hand once the VM is deleted (noReclaimHint): while the VM lives its server
// uses the disk.
func (d *decision) deleteHint(spec schema.Spec) string {
	path := d.vm.Fields().RootDiskReclaimPolicy
	switch {
	case spec.ReclaimPolicySet:
		return ""
	case path == "":
		if d.disk.seen == nil {
			return ""
		}
		return "; " + noReclaimHint(d.disk.seen.Name, d.vm.Namespace(), "to have the disk gone, delete it by hand once the VM is deleted")
	}
	return fmt.Sprintf("; to delete it with the VM: kubectl patch %s --type merge -p '%s'",
		kubectlRef(d.vm, itsVersion), policyPatch(path, schema.ReclaimDelete))
}

// noReclaimHint says that a VM whose layout has no reclaim policy cannot say Delete, then
// what (todo) to do instead, with the command that deletes its claim, named disk, in
// namespace.
func noReclaimHint(disk, namespace, todo string) string {
	return fmt.Sprintf("the VM's resource has no reclaim policy field, so it cannot say Delete: %s: kubectl delete pvc %s -n %s",
		todo, disk, namespace)
}

// policyPatch is the JSON merge patch that sets the reclaim policy at path (dotted) to p.
func policyPatch(path string, p schema.ReclaimPolicy) string {
	out := `"` + string(p) + `"`
	for path != "" {
		i := strings.LastIndexByte(path, '.')
		out = `{"` + path[i+1:] + `":` + out + `}`
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return out
}

// owner is whose a disk made or updated to spec is.
func owner(spec backend.DiskSpec) backend.DiskOwner {
	if spec.Keep {
		return backend.DiskKept
	}
	return backend.DiskOwned
}

// diskFor makes sure an active VM has its disk: it creates it, adopts a kept one of its name,
// or keeps its own as its reclaim policy and size say (keepDisk). It reports whether a server
// may be created now (firstServer: not while a disk of the name is going away, nor before the
// disk has its storage), and false for ok when a disk of the name is another's: the VM is then
// reported Failed, and nothing else is done.
func (d *decision) diskFor(spec schema.Spec) (serverMayStart, ok bool) {
	seen := d.disk.seen
	want := diskSpec(spec, seen)
	switch {
	case seen == nil:
		class := "the cluster's default storage class"
		if want.StorageClass != "" {
			class = "storage class " + want.StorageClass
		}
		ev := Event{Type: EventNormal, Reason: ReasonCreatingDisk, Message: fmt.Sprintf("Creating a root disk of %s in %s", want.Size.String(), class)}
		if had := d.hadDisk(); had != nil {
			ev = Event{Type: EventWarning, Reason: ReasonDiskRecreated, Message: fmt.Sprintf(
				"Creating a new, empty root disk of %s in %s: disk %s (%s), which the VM had, was deleted, not by the controller; its data is not on the new disk",
				want.Size.String(), class, had.ClaimName, had.Capacity)}
		}
		d.plan.Disk = &DiskAction{Op: CreateDisk, Spec: &want, Event: ev}
		// As the backend will show it: being bound, of the size asked, its name filled in by
		// the apply step (Plan.CreatedDisk).
		d.disk.own = &backend.Disk{Phase: backend.DiskPending, Requested: want.Size, StorageClass: want.StorageClass, Owner: owner(want)}
		// How it binds is known from the API server's answer (its class, the default one
		// filled in), which the next decision reads: the server waits for that.
		return false, true
	case seen.Deleting && !seen.Owner.Mine():
		d.disk.wait = fmt.Sprintf("Waiting for disk %s of an earlier VM to be deleted before a new one is created", seen.Name)
		return false, true
	case seen.Owner == backend.DiskOther:
		d.conflict()
		return false, false
	case seen.Owner == backend.DiskUnowned:
		adopted := *seen
		d.disk.own = &adopted
		up := want
		up.Size = seen.Requested // grown by a change of its own, once adopted (ownerChange)
		d.disk.own.Owner, d.disk.own.KeptMark = owner(up), up.Keep
		msg := fmt.Sprintf("Adopting disk %s, which an earlier VM named %s kept", seen.Name, d.vm.Name()) + d.disk.growsNext(spec.RootDisk)
		if up.Keep {
			msg += fmt.Sprintf("; it stays kept when this VM is deleted (%s)%s", d.whyKept(spec), d.deleteHint(spec))
		} else {
			msg += "; it goes with this VM when the VM is deleted (reclaim policy Delete)"
		}
		d.plan.Disk = &DiskAction{Op: AdoptDisk, Spec: &up, Event: Event{Type: EventNormal, Reason: ReasonAdoptingDisk, Message: msg}}
		d.diskCondition(spec.RootDisk)
		d.classChange(spec)
		return d.firstServer(), true
	case seen.Deleting:
		d.disk.wait = fmt.Sprintf("Waiting for disk %s to be deleted before a new one is created", seen.Name)
		d.diskDeleting()
		return false, true
	}
	d.keepDisk(spec)
	d.classChange(spec)
	return d.firstServer(), true
}

// hadDisk is the disk the current status reports the VM had, bound, when the VM has no disk
// now: one that held data, and that someone else deleted, since the controller deletes a VM's
// disk only with the VM. nil when the status reports none (a new VM, or one whose status an
// earlier release wrote without a disk), or one never bound: the disk of a class change that
// the user deleted as the status said (classChange), which held no data, or one whose volume
// was lost (its data gone before the claim).
func (d *decision) hadDisk() *schema.RootDiskStatus {
	had := d.current.RootDisk
	if had == nil || had.ClaimName == "" || had.Capacity == "" || had.Phase != string(backend.DiskBound) {
		return nil
	}
	return had
}

// diskGoneEvent adds a Warning to the disk's Events when st, the status being written under
// claim, no longer reports the disk the current status reports the VM had, bound (hadDisk),
// and no disk of its name is left, while the VM is not being deleted and the plan makes no
// disk in its place (whose Event says the same: DiskRecreated). The controller deletes a VM's
// disk only with the VM, so someone else deleted it; without a server to hold it (a stopped
// VM) it went at once, and the status only dropped it: the owner learns of the loss now, not
// from a Normal CreatingDisk at the next start.
func (d *decision) diskGoneEvent(st schema.Status) {
	had := d.hadDisk()
	if !d.disk.claims || had == nil || st.RootDisk != nil || d.disk.seen != nil || d.vm.Deleting() || d.plan.Disk != nil {
		return
	}
	d.disk.events = append(d.disk.events, Event{Type: EventWarning, Reason: ReasonDiskDeleted, Message: fmt.Sprintf(
		"Disk %s (%s), which the VM had, was deleted, not by the controller: its data is gone, and the VM's next server gets a new, empty disk",
		had.ClaimName, had.Capacity)})
}

// diskDeleting says, for a VM that is to run, when its own disk, bound, is being deleted while
// a server holds it (for claims: the claim's protection keeps it until no pod uses it). The
// controller deletes a VM's disk only with the VM, so someone else deleted it; a deletion
// cannot be taken back, and once the server goes (a restart, a spec change, a failure, the node)
// the disk goes with its data, and the next server gets a new, empty one. Only a person can
// keep the data, by keeping the volume behind the claim, so the VM is Stalled with what to do,
// and a Warning says it once (stalledDiskEvent); the server runs on meanwhile, and the VM
// stays Active while it does. A disk not bound holds no data of the VM's (a class change's,
// deleted as the status said), and one without a server goes at once: neither says more than
// WaitingForDisk, and the new disk's Event says the data went (hadDisk).
func (d *decision) diskDeleting() {
	disk := d.disk.seen
	if d.srv == nil || disk.Phase != backend.DiskBound {
		return
	}
	d.disk.going = &lifecycleCondition{ReasonDiskDeleting, fmt.Sprintf(
		"Disk %s is being deleted, not by the controller: server %s holds it while it exists, and once no server uses it the disk and its data are gone; "+
			"the next server gets a new, empty disk. A deleted claim cannot be brought back; to keep its volume and data, set its PersistentVolume's reclaim policy to Retain "+
			"before the server stops: kubectl patch pv $(kubectl get pvc %s -n %s -o jsonpath='{.spec.volumeName}') -p '{\"spec\":{\"persistentVolumeReclaimPolicy\":\"Retain\"}}'",
		disk.Name, d.srv.Name, disk.Name, d.vm.Namespace())}
}

// classChange says, for a VM that is to run, when the spec names a storage class other than
// the one its disk was made in: a claim's class cannot change, so the change does not apply
// to the disk, and the controller does not make the disk again by itself, since a disk is its
// owner's data. The VM is Stalled (it gets nowhere the spec says without a person's change),
// with what to do: for a disk not bound, which holds no data unless it names a volume, delete
// it and the controller makes it again in the new class (it is waited for while it goes, then
// made as a new VM's); for a disk bound, set the class back, since a disk in another class is
// a new disk, to which the controller copies nothing. A spec that names no class asks for none
// (the disk was made in the default one, whose name the claim then carries). A stopped VM is
// not told until it is to run again: nothing waits on its disk meanwhile.
func (d *decision) classChange(spec schema.Spec) {
	disk := d.disk.own
	if disk == nil || disk.Deleting || spec.StorageClass == "" || spec.StorageClass == disk.StorageClass {
		return
	}
	path := d.vm.Fields().RootDiskStorageClass
	made, back := "without a storage class", "remove "+path
	if disk.StorageClass != "" {
		made = fmt.Sprintf("in storage class %q", disk.StorageClass)
		back = fmt.Sprintf("set %s back to %q", path, disk.StorageClass)
	}
	msg := fmt.Sprintf("%s %q does not apply to disk %s, made %s: a claim's storage class cannot change", path, spec.StorageClass, disk.Name, made)
	if disk.Phase == backend.DiskPending {
		del := fmt.Sprintf("kubectl delete pvc %s -n %s", disk.Name, d.vm.Namespace())
		if d.srv != nil {
			// Its server's pod holds the claim while it exists (the claim's protection).
			del = fmt.Sprintf("kubectl delete -n %s pvc/%s pod/%s: the server holds it while it exists", d.vm.Namespace(), disk.Name, d.srv.Name)
		}
		msg += fmt.Sprintf(". The disk is not bound: unless it names a volume (its spec.volumeName), it holds no data; delete it (%s) "+
			"and the controller makes it again in %q; or %s", del, spec.StorageClass, back)
	} else {
		msg += fmt.Sprintf(", and the disk keeps its class and its data: %s (a disk in another class is a new disk, to which the controller copies nothing)", back)
	}
	d.disk.class = &lifecycleCondition{ReasonDiskClassChangeRefused, msg}
}

// stalledDiskEvent adds the Warning of a class change that does not apply (classChange), or
// of a disk someone else deletes (diskDeleting), to the disk's Events when st, the status being
// written, turns Stalled for it.
func (d *decision) stalledDiskEvent(st schema.Status) {
	c := st.Condition(schema.ConditionStalled)
	if c == nil || c.Reason != ReasonDiskClassChangeRefused && c.Reason != ReasonDiskDeleting {
		return
	}
	if was := d.current.Condition(schema.ConditionStalled); was != nil && was.Reason == c.Reason {
		return
	}
	d.disk.events = append(d.disk.events, Event{Type: EventWarning, Reason: c.Reason, Message: c.Message})
}

// firstServer reports whether a VM without a server may have one made on the disk the plan
// leaves: once the disk is bound, or at once when it binds only with a server placed on a
// node (backend.Disk.BindsWithServer). A server made on a disk that binds by itself but is
// not bound yet is one the scheduler tries and fails to place (a FailedScheduling Warning,
// its status written, the try again), which on a cluster busy making many VMs costs more than
// the wait: the disk's binding brings the VM back (its claim's change), and the server follows.
// A VM that has a server keeps it whatever its disk does.
func (d *decision) firstServer() bool {
	disk := d.disk.own
	return d.srv != nil || disk == nil || disk.Phase == backend.DiskBound || disk.BindsWithServer && disk.Phase == backend.DiskPending
}

// keepDisk keeps the VM's own disk as its spec says: owned or kept as the reclaim policy
// says, grown to rootDisk where it can grow, and recording the VM's kind (recordDiskKind). An
// inactive VM's disk is kept so too.
func (d *decision) keepDisk(spec schema.Spec) {
	seen := d.disk.seen
	if seen == nil || !seen.Owner.Mine() {
		return
	}
	kept := *seen
	d.disk.own = &kept
	if seen.Deleting {
		return // someone deleted it; it goes once no server uses it
	}
	up := diskSpec(spec, seen)
	up.Size = seen.Requested // a change of owner or mark does not grow the disk (ownerChange)
	switch o := owner(up); {
	case up.Keep && (o != seen.Owner || !seen.KeptMark):
		// Owned until now, or kept by a version that did not mark it: marked, so that a
		// later spec that names no policy keeps it too.
		msg := fmt.Sprintf("Disk %s is kept when the VM is deleted (%s): the VM no longer owns it", seen.Name, d.whyKept(spec))
		if o == seen.Owner {
			msg = fmt.Sprintf("Disk %s is kept when the VM is deleted (%s): marked as kept", seen.Name, d.whyKept(spec))
		}
		msg += d.deleteHint(spec) + d.disk.growsNext(spec.RootDisk)
		d.plan.Disk = &DiskAction{Op: ReleaseDisk, Spec: &up, Event: Event{Type: EventNormal, Reason: ReasonRetainingDisk, Message: msg}}
		d.disk.own.Owner, d.disk.own.KeptMark = o, true
	case !up.Keep && (o != seen.Owner || seen.KeptMark):
		msg := fmt.Sprintf("Disk %s goes with the VM when it is deleted (reclaim policy Delete): the VM owns it again", seen.Name)
		if o == seen.Owner {
			msg = fmt.Sprintf("Disk %s goes with the VM when it is deleted (reclaim policy Delete): no longer marked as kept", seen.Name)
		}
		msg += d.disk.growsNext(spec.RootDisk)
		d.plan.Disk = &DiskAction{Op: AdoptDisk, Spec: &up, Event: Event{Type: EventNormal, Reason: ReasonAdoptingDisk, Message: msg}}
		d.disk.own.Owner, d.disk.own.KeptMark = o, false
	default:
		if size := d.disk.grow(spec.RootDisk); size.Cmp(seen.Requested) > 0 {
			up.Size = size
			d.plan.Disk = &DiskAction{Op: ExpandDisk, Spec: &up, Event: Event{Type: EventNormal, Reason: ReasonResizingDisk,
				Message: fmt.Sprintf("Growing disk %s from %s to %s", seen.Name, seen.Requested.String(), size.String())}}
			break
		}
		d.recordDiskKind(up)
	}
	d.disk.own.KindUnrecorded = false // each of the changes above records it
	d.diskCondition(spec.RootDisk)
}

// growsNext ends the Event of a change of the disk's owner or mark with the growth that
// follows it: a change of owner (adopted, released, kept, owned again) is written on its own,
// and the disk grown to rootDisk by the next decision (ExpandDisk), never in the same write.
// Sent together, a refusal of the growth (a quota on storage, which the API server answers
// for the whole patch) refused the change of owner too: a Retain set with a larger rootDisk
// was not in effect for as long as the quota stood (and a foreground deletion had the garbage
// collector delete the disk), and a kept disk was not adopted, its VM given no server. Alone,
// a refused growth is only that (GrowthRefused). "" when no growth follows.
func (dp *diskPart) growsNext(want resource.Quantity) string {
	disk := dp.own
	if want.Cmp(disk.Requested) <= 0 || disk.Phase != backend.DiskBound || !disk.CanGrow || disk.Deleting {
		return ""
	}
	dp.growthNext = true
	return fmt.Sprintf("; it grows from %s to %s next", disk.Requested.String(), want.String())
}

// recordDiskKind asks, when nothing else changes the VM's own disk, for it to record the
// VM's kind of resource if an earlier version made or kept it without (KindUnrecorded):
// a kept disk without it could be adopted by an object of another kind and of the VM's name
// (a controller run for another resource) while the VM still lives, and an owned one once a
// deletion that orphans it takes the owner reference off. up is the disk as it is, which the
// change leaves so. A disk that records the kind, the hot path, asks for nothing.
func (d *decision) recordDiskKind(up backend.DiskSpec) {
	if !d.disk.seen.KindUnrecorded {
		return
	}
	d.plan.Disk = &DiskAction{Op: RecordDiskKind, Spec: &up}
}

// grow is the size to ask of the disk dp.own stands for: want where it can grow to it now
// (bound, and its class lets it), else what it asks for already (a disk never shrinks). The
// disk the plan leaves then asks for that size.
func (dp *diskPart) grow(want resource.Quantity) resource.Quantity {
	disk := dp.own
	if want.Cmp(disk.Requested) <= 0 || disk.Phase != backend.DiskBound || !disk.CanGrow || disk.Deleting {
		return disk.Requested
	}
	disk.Requested = want
	// The storage has not answered yet: the growth is pending, with nothing to say.
	disk.Growth = backend.Growth{}
	return want
}

// diskGrowthReasons are the DiskResizing condition's reasons of a growth under way or refused
// by the storage, which end with DiskResized once the disk has its size.
var diskGrowthReasons = map[string]bool{ReasonDiskResizePending: true, ReasonDiskResizeInProgress: true, ReasonDiskResizeInfeasible: true}

// diskCondition sets the DiskResizing condition from the disk the plan leaves (d.disk.own) and
// the size the spec asks for, and the Events of its changes: a Warning when the storage
// refuses, the class does not let the disk grow, or rootDisk asks it to shrink; DiskResized
// when a growth is done.
func (d *decision) diskCondition(want resource.Quantity) {
	disk := d.disk.own
	c := func(reason, msg string) { d.disk.resizing = &lifecycleCondition{reason, msg} }
	switch {
	case want.Cmp(disk.Requested) < 0:
		c(ReasonDiskShrinkRefused, fmt.Sprintf("rootDisk %s is less than the %s of disk %s: a disk never shrinks; it keeps its size and data",
			want.String(), disk.Requested.String(), disk.Name))
	case want.Cmp(disk.Requested) > 0 && !disk.CanGrow && disk.Phase == backend.DiskBound && want.Cmp(disk.Capacity) <= 0:
		// The volume has that size already (storage that rounds up: 1G asked, 1Gi made):
		// nothing to grow, and nothing refused. The claim's request stays as it is: a class
		// without volume expansion refuses any larger one, even within the volume's size.
	case want.Cmp(disk.Requested) > 0 && !disk.CanGrow:
		class := "its storage class"
		if disk.StorageClass != "" {
			class = "its storage class " + disk.StorageClass
		}
		c(ReasonDiskNotExpandable, fmt.Sprintf("Disk %s cannot grow to %s: %s does not allow volume expansion; it keeps %s",
			disk.Name, want.String(), class, disk.Requested.String()))
	case want.Cmp(disk.Requested) > 0 && d.disk.growthNext:
		c(ReasonDiskResizePending, fmt.Sprintf("Growing disk %s to %s once its change of owner is written", disk.Name, want.String()))
	case want.Cmp(disk.Requested) > 0:
		c(ReasonDiskResizePending, fmt.Sprintf("Growing disk %s to %s once it is bound", disk.Name, want.String()))
	case disk.Phase == backend.DiskBound && !disk.GrowthDone():
		to := disk.Requested.String()
		kept := disk.Growth.Kept // the API server refused the growth, not the storage (GrowthRefused)
		switch {
		case kept != nil:
			c(ReasonDiskResizeInfeasible, fmt.Sprintf("Disk %s cannot grow to %s: the API server refused the claim's new size", disk.Name, to))
		case disk.Growth.State == backend.GrowthInProgress:
			c(ReasonDiskResizeInProgress, fmt.Sprintf("Growing disk %s to %s: in progress", disk.Name, to))
		case disk.Growth.State == backend.GrowthInfeasible:
			c(ReasonDiskResizeInfeasible, fmt.Sprintf("Disk %s cannot grow to %s: the storage refused", disk.Name, to))
		default:
			c(ReasonDiskResizePending, fmt.Sprintf("Growing disk %s to %s: waiting for the storage", disk.Name, to))
		}
		if m := disk.Growth.Message; m != "" {
			d.disk.resizing.message += " (" + m + ")"
		}
		if kept != nil {
			d.disk.resizing.message += d.refusedGrowthHint(*kept)
		}
	}
	was := d.current.Condition(schema.ConditionDiskResizing)
	now := d.disk.resizing
	switch {
	case now != nil && (was == nil || was.Reason != now.reason) &&
		(now.reason == ReasonDiskResizeInfeasible || now.reason == ReasonDiskNotExpandable || now.reason == ReasonDiskShrinkRefused):
		d.disk.events = append(d.disk.events, Event{Type: EventWarning, Reason: now.reason, Message: now.message})
	case now == nil && was != nil && diskGrowthReasons[was.Reason] && disk.GrowthDone():
		d.disk.events = append(d.disk.events, Event{Type: EventNormal, Reason: ReasonDiskResized,
			Message: fmt.Sprintf("Disk %s now has %s", disk.Name, disk.Capacity.String())})
	}
}

// conflict reports a disk of the VM's name that is another's: the VM is Failed, its server
// (if one runs, from before the disk was asked for) is left as it is, and the VM is looked at
// again at the pace of refusals, not in a storm.
func (d *decision) conflict() {
	seen := d.disk.seen
	d.report(schema.PhaseFailed, ReasonDiskConflict,
		fmt.Sprintf("Disk %s exists and is not this VM's (another object owns it, it is not labelled for this VM, or it was kept for another kind of resource): delete it (its data with it) or give the VM another name; the controller never takes it over",
			seen.Name), d.srv)
	d.plan.RequeueAfter = Duration(RejectedRetry)
}

// waitingForDisk is the status message of a VM whose server cannot start for its disk: it is
// not bound (with the binder's word for why, and what to do when the spec names another
// class: classChange), it lost its storage, or it is going away; "" when the disk is not what
// the server waits for (none, bound, or pending with nothing said of it: a disk on its way, as
// a server on its way says nothing either).
func (d *decision) waitingForDisk() string {
	if d.disk.wait != "" {
		return d.disk.wait
	}
	disk := d.disk.own
	if disk == nil || disk.Phase == backend.DiskBound {
		return ""
	}
	switch {
	case disk.Deleting:
		return fmt.Sprintf("Waiting for disk %s to be deleted before a new one is created", disk.Name)
	case disk.Phase == backend.DiskLost:
		del := fmt.Sprintf("kubectl delete pvc %s -n %s", disk.Name, d.vm.Namespace())
		if d.srv != nil {
			// Its server's pod holds the claim while it exists (the claim's protection).
			del = fmt.Sprintf("kubectl delete -n %s pvc/%s pod/%s: the server holds it while it exists", d.vm.Namespace(), disk.Name, d.srv.Name)
		}
		return fmt.Sprintf("Disk %s lost its storage: its volume is gone; restore the volume its claim names (spec.volumeName), "+
			"or delete the claim (%s) and the controller makes a new, empty disk", disk.Name, del)
	case disk.Pending != "" && d.disk.class != nil:
		return fmt.Sprintf("Waiting for disk %s to be bound: %s; %s", disk.Name, disk.Pending, d.disk.class.message)
	case disk.Pending != "":
		return fmt.Sprintf("Waiting for disk %s to be bound: %s", disk.Name, disk.Pending)
	case d.disk.class != nil:
		return fmt.Sprintf("Waiting for disk %s to be bound; %s", disk.Name, d.disk.class.message)
	}
	return ""
}

// rootDiskStatus is the disk as the status reports it: the VM's disk the plan leaves; nil
// when it has none, or the layout has no place for it. It records the size the disk asks for
// beside the size it has, where the layout has a place for it: storage that rounds a disk up
// (1G asked, 1Gi made) has the one below the other, and the CRD's rule on rootDisk lets it
// go back to either, so that a growth the class cannot make (DiskNotExpandable) is taken back
// to the size the disk asks for, which is no growth (keepDisk), rather than to its capacity,
// which would be one more growth the class cannot make.
func (d *decision) rootDiskStatus() *schema.RootDiskStatus {
	if d.disk.own == nil || !d.vm.Fields().HasRootDiskStatus() {
		return nil
	}
	st := &schema.RootDiskStatus{ClaimName: d.disk.own.Name, Phase: string(d.disk.own.Phase)}
	if !d.disk.own.Capacity.IsZero() {
		st.Capacity = d.disk.own.Capacity.String()
	}
	if d.vm.Fields().RootDiskRequest != "" && !d.disk.own.Requested.IsZero() {
		st.Request = d.disk.own.Requested.String()
	}
	return st
}

// onTheWay reports whether st differs from the current status only in what a VM on its way
// to Active records with the status's next write (the server starting, at the latest) rather
// than with one of its own, which would be one more write for every VM on its way: a disk that
// got bound, and the server made once it did, while the status still says ServerCreating.
// The price of the write saved: a server deleted by someone else before the status names it
// is not known to have been made (ClaimedServer), and the next one is made as the first was,
// under every run strategy and without ServerMissing (docs/disks.md).
func (d *decision) onTheWay(st schema.Status) bool {
	cur := d.current
	if cur.Reason != ReasonServerCreating || st.Reason != ReasonServerCreating {
		return false
	}
	if cur.RootDisk != nil && st.RootDisk != nil && cur.RootDisk.ClaimName == st.RootDisk.ClaimName &&
		cur.RootDisk.Phase == string(backend.DiskPending) && st.RootDisk.Phase == string(backend.DiskBound) {
		st.RootDisk = cur.RootDisk
	}
	if cur.Server == nil && st.Server != nil && st.Server.State == string(backend.StatePending) {
		st.Server = nil
	}
	return st.SameAs(cur)
}

// retainDisk lets go of the disk of a VM whose spec is invalid but whose reclaim policy keeps
// the disk (Retain, or a policy that is not one): the VM stops owning it, as keepDisk does for
// a valid spec. An invalid spec gets no other action, but without this one the disk would
// stay owned, and a foreground deletion of the VM (the garbage collector deletes what the VM
// owns before the VM) would take the disk the policy keeps.
func (d *decision) retainDisk() {
	seen := d.disk.seen
	if seen == nil || seen.Owner != backend.DiskOwned || seen.Deleting {
		return
	}
	spec, _ := d.vm.Spec()
	d.plan.Disk = &DiskAction{Op: ReleaseDisk, Spec: &backend.DiskSpec{Size: seen.Requested, Keep: true},
		Event: Event{Type: EventNormal, Reason: ReasonRetainingDisk,
			Message: fmt.Sprintf("Disk %s is kept when the VM is deleted (%s): the VM no longer owns it", seen.Name, d.whyKept(spec))}}
	d.disk.own.Owner, d.disk.own.KeptMark = backend.DiskKept, true
}

// deletingDisk: the VM is deleted and its server is gone. Its disk is deleted, or kept as the
// reclaim policy says (and when the policy cannot be read, kept: a disk is its owner's data),
// a disk marked kept by a VM that names no policy included (keeps). In a layout without a
// reclaim policy that disk is kept too, the safe side; its Event says how to delete it by
// hand, since no VM there can name Delete for it.
func (d *decision) deletingDisk() {
	disk := d.disk.own
	if disk == nil || disk.Deleting {
		return
	}
	spec, _ := d.vm.Spec()
	if !keeps(spec, disk, false) {
		d.plan.Disk = &DiskAction{Op: DeleteDisk, Event: Event{Type: EventNormal, Reason: ReasonDeletingDisk,
			Message: fmt.Sprintf("Deleting disk %s: the VM is deleted (reclaim policy Delete)", disk.Name)}}
		return
	}
	next := "keeps it unless that VM names reclaim policy Delete"
	if d.noReclaimField() {
		next = "keeps it; " + noReclaimHint(disk.Name, d.vm.Namespace(), "if the disk is not wanted, delete it by hand")
	}
	d.plan.Disk = &DiskAction{Op: ReleaseDisk, Spec: &backend.DiskSpec{Size: disk.Requested, Keep: true},
		Event: Event{Type: EventNormal, Reason: ReasonDiskRetained,
			Message: fmt.Sprintf("Keeping disk %s after the VM is deleted (%s): a new VM named %s adopts it, and %s",
				disk.Name, d.whyKept(spec), d.vm.Name(), next)}}
}

// DiskReleaseRefused is the plan for a deleted VM whose disk, in.Disk (what the refused
// release was decided on), the backend refused to release (backend.ErrRejected, why), at the
// time of the refusal (in.Now): the VM still owns the disk, and the garbage collector
// deletes what a VM owns once the VM is gone, so the finalizer stays and the VM with it.
// Terminating and stalled on the refusal, with a Warning, and another try after a while: the
// cause (the controller's permissions, an admission policy) is fixed by a person, as is a
// reclaim policy set to Delete, which lets the disk go with the VM (and brings the VM back
// at once, as every change does). A layout without a reclaim policy has none to set: there
// the message gives the claim's deletion, which lets the VM go as well.
func (p Policy) DiskReleaseRefused(in Input, why string) Plan {
	vm, disk := in.VM, ""
	if in.Disk != nil { // a release is decided on a disk; none leaves its name out
		disk = in.Disk.Name
	}
	d := decision{vm: vm, now: in.Now.UTC().Truncate(time.Second), current: vm.Status(), refusal: true}
	msg := fmt.Sprintf("The VM is deleted but stays until its disk %s is released: "+
		"the disk would be deleted with the VM, and its reclaim policy keeps it; the release was refused: %s. "+
		"Let the controller patch the claim, or set the VM's reclaim policy to Delete to let the disk go with it", disk, why)
	if d.noReclaimField() {
		// Kept only as a disk kept already (keeps): no policy to set, but the claim can go.
		spec, _ := vm.Spec()
		msg = fmt.Sprintf("The VM is deleted but stays until its disk %s is released: "+
			"the disk would be deleted with the VM, and it is kept (%s); the release was refused: %s. "+
			"Let the controller patch the claim, or delete the claim to let the disk go (the VM's resource has no reclaim policy field to set to Delete): "+
			"kubectl delete pvc %s -n %s", disk, d.whyKept(spec), why, disk, vm.Namespace())
	}
	d.report(schema.PhaseTerminating, ReasonDiskReleaseRefused, msg, nil)
	d.plan.RequeueAfter = Duration(RejectedRetry)
	return d.plan
}

// DiskRejected is the plan for a VM whose disk the backend refused to create or take
// (backend.ErrRejected; backend.ErrDiskConflict when the name is another's): Failed with the
// backend's reason, the server there is (if any) left as it is, and another try after a while
// rather than a retry storm. in is what the decision whose disk action was refused was given,
// at the time of the refusal (in.Now): its Server, and its Gone, a server gone while
// disrupted (as for Rejected: a move it began is kept); the refusal is made without its Disk
// and Budget (refused). conflict: the name is another's (ReasonDiskConflict).
func (p Policy) DiskRejected(in Input, why string, conflict bool) Plan {
	vm, srv := in.VM, in.Server
	d := p.refused(vm, srv, in.Gone, in.Now)
	reason := ReasonDiskRejected
	if conflict {
		reason = ReasonDiskConflict
	}
	d.report(schema.PhaseFailed, reason, "The disk was refused: "+why, srv)
	d.plan.RequeueAfter = Duration(RejectedRetry)
	return d.plan
}
