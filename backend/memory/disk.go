package memory

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
)

var _ backend.Disks = (*Backend)(nil)

// disks is the backend's table of disks, by the name of the VM they are for, and how its
// storage answers.
type disks struct {
	table map[types.NamespacedName]*backend.Disk
	// vms is the UID of the VM each disk of the table is Owner of as recorded there (owned or
	// kept): the disk is that VM's only. To a later VM of the name, the same disk is another's
	// (owned: the owner reference names the earlier VM) or unowned (kept, adoptable), as a
	// claim is to the pods backend, which tells by the UIDs in its owner reference and label.
	vms     map[types.NamespacedName]types.UID
	made    int // disks created, for their IDs
	changes int // changes of any disk, for their versions
	// bind makes a new disk Bound at once, with its size; otherwise it stays Pending until
	// Bind.
	bind bool
	// growth is how the storage answers a larger size: the zero answer grows the disk at
	// once.
	growth backend.Growth
	// fixed are the classes that do not let a disk grow.
	fixed map[string]bool
	err   error // what every disk operation returns, when set
}

// DiskName is the name the backend gives the disk of the VM called vm.
func DiskName(vm string) string { return vm + "-rootdisk" }

// ObserveDisk returns a copy of the disk of vm's name as vm sees it (seenBy), or nil.
func (b *Backend) ObserveDisk(vm backend.Owner) (*backend.Disk, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.disks.table[key(vm)]
	if !ok {
		return nil, nil
	}
	c := b.seenBy(d, vm)
	return &c, nil
}

// seenBy is a copy of d, the disk of vm's name in the table, as vm sees it: one owned or kept
// by an earlier VM of the name (another UID) is another's, or, kept, unowned. The caller holds
// the lock.
func (b *Backend) seenBy(d *backend.Disk, vm backend.Owner) backend.Disk {
	c := *d
	if uid := b.disks.vms[key(vm)]; c.Owner.Mine() && uid != vm.UID {
		c.Owner = backend.DiskOther
		if d.Owner == backend.DiskKept {
			c.Owner = backend.DiskUnowned
		}
		c.KindUnrecorded = false
	}
	return c
}

// record makes the disk of vm's name vm's in the table, when d says it is (owned or kept).
// The caller holds the lock.
func (b *Backend) record(vm backend.Owner, d *backend.Disk) {
	if d.Owner.Mine() {
		b.disks.vms[key(vm)] = vm.UID
	} else {
		delete(b.disks.vms, key(vm))
	}
}

// ReadDisk is ObserveDisk: the memory backend has no cache to read past.
func (b *Backend) ReadDisk(_ context.Context, vm backend.Owner) (*backend.Disk, error) {
	return b.ObserveDisk(vm)
}

// CreateDisk adds a Pending disk for vm (Bound at once after BindDisks(true)), marked kept
// when spec.Keep. A disk of that
// name is returned as it is when it is vm's or adoptable, and is ErrDiskConflict when it is
// another's.
func (b *Backend) CreateDisk(_ context.Context, vm backend.Owner, spec backend.DiskSpec) (*backend.Disk, error) {
	b.mu.Lock()
	if err := b.disks.err; err != nil {
		b.mu.Unlock()
		return nil, err
	}
	k := key(vm)
	if d, ok := b.disks.table[k]; ok {
		c := b.seenBy(d, vm)
		b.mu.Unlock()
		if c.Owner == backend.DiskOther {
			return nil, fmt.Errorf("disk %s exists and is not this VM's: %w", c.Name, backend.ErrDiskConflict)
		}
		return &c, nil
	}
	b.disks.made++
	d := &backend.Disk{Name: DiskName(vm.Name), ID: fmt.Sprintf("disk-%d", b.disks.made), Phase: backend.DiskPending,
		Requested: spec.Size, StorageClass: spec.StorageClass, CanGrow: !b.disks.fixed[spec.StorageClass], Owner: owner(spec),
		KeptMark: spec.Keep}
	if b.disks.bind {
		d.Phase, d.Capacity = backend.DiskBound, spec.Size
	}
	b.stamp(d)
	b.disks.table[k] = d
	b.record(vm, d)
	c := *d
	b.mu.Unlock()
	b.changed(k)
	return &c, nil
}

// owner is whose a disk made or updated to spec is.
func owner(spec backend.DiskSpec) backend.DiskOwner {
	if spec.Keep {
		return backend.DiskKept
	}
	return backend.DiskOwned
}

// UpdateDisk makes vm's disk (or an unowned one of its name) vm's, owned unless spec.Keep
// (and marked kept if and only if spec.Keep), recording vm's kind, and asks for spec.Size when it is larger: the
// storage answers as AnswerGrowth says. As a claim's patch, it is conditional on seen, the
// disk the decision saw: a disk whose ID or Version is not seen's, or one gone, is left as it
// is and the update is a Conflict (apierrors.IsConflict), as the API server answers. seen
// another's is ErrDiskConflict.
func (b *Backend) UpdateDisk(_ context.Context, vm backend.Owner, seen *backend.Disk, spec backend.DiskSpec) (*backend.Disk, error) {
	b.mu.Lock()
	if err := b.disks.err; err != nil {
		b.mu.Unlock()
		return nil, err
	}
	k := key(vm)
	d, ok := b.disks.table[k]
	switch {
	case seen == nil:
		b.mu.Unlock()
		return nil, fmt.Errorf("update disk of %s/%s: no disk seen", vm.Namespace, vm.Name)
	case seen.Owner == backend.DiskOther:
		b.mu.Unlock()
		return nil, fmt.Errorf("disk %s is not this VM's: %w", seen.Name, backend.ErrDiskConflict)
	case !ok:
		b.mu.Unlock()
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "disks"}, DiskName(vm.Name),
			fmt.Errorf("no disk, not %s at version %s as seen", seen.ID, seen.Version))
	case d.ID != seen.ID || d.Version != seen.Version:
		name, id, version := d.Name, d.ID, d.Version
		b.mu.Unlock()
		return nil, apierrors.NewConflict(schema.GroupResource{Resource: "disks"}, name,
			fmt.Errorf("the disk is %s at version %s, not %s at version %s as seen", id, version, seen.ID, seen.Version))
	case d.Deleting:
		b.mu.Unlock()
		return nil, fmt.Errorf("update disk of %s/%s: no disk to update", vm.Namespace, vm.Name)
	case b.seenBy(d, vm).Owner == backend.DiskOther:
		b.mu.Unlock()
		return nil, fmt.Errorf("disk %s is not this VM's: %w", d.Name, backend.ErrDiskConflict)
	}
	d.Owner, d.KeptMark, d.KindUnrecorded = owner(spec), spec.Keep, false
	b.record(vm, d)
	if spec.Size.Cmp(d.Requested) > 0 {
		d.Requested = spec.Size
		d.Growth = b.disks.growth
		if d.Growth.State == backend.GrowthNone && d.Phase == backend.DiskBound {
			d.Capacity = spec.Size
		}
	}
	b.stamp(d)
	c := *d
	b.mu.Unlock()
	b.changed(k)
	return &c, nil
}

// DeleteDisk marks vm's disk as being deleted, as storage that waits for the last server
// using it would; SetDisk(vm, nil) then removes it. As a claim's delete, it is conditional
// on seen, the disk the decision saw: a disk whose ID or Version is not seen's is left alone
// and the delete is a Conflict (apierrors.IsConflict), as the API server answers; a disk
// already gone is not an error. Another's disk (seen or now) is left alone.
func (b *Backend) DeleteDisk(_ context.Context, vm backend.Owner, seen *backend.Disk) error {
	b.mu.Lock()
	if err := b.disks.err; err != nil {
		b.mu.Unlock()
		return err
	}
	if seen == nil || !seen.Owner.Mine() || seen.Deleting {
		b.mu.Unlock()
		return nil
	}
	k := key(vm)
	d, ok := b.disks.table[k]
	if ok && (d.ID != seen.ID || d.Version != seen.Version) {
		name, id, version := d.Name, d.ID, d.Version
		b.mu.Unlock()
		return apierrors.NewConflict(schema.GroupResource{Resource: "disks"}, name,
			fmt.Errorf("the disk is %s at version %s, not %s at version %s as seen", id, version, seen.ID, seen.Version))
	}
	if ok && b.seenBy(d, vm).Owner.Mine() && !d.Deleting {
		d.Deleting = true
		b.stamp(d)
	} else {
		ok = false
	}
	b.mu.Unlock()
	if ok {
		b.changed(k)
	}
	return nil
}

// stamp gives d a new version, as a change to it; the caller holds the lock.
func (b *Backend) stamp(d *backend.Disk) {
	b.disks.changes++
	d.Version = strconv.Itoa(b.disks.changes)
}

// SetDisk puts a disk in place of the one of vm's name (nil removes it), as if the storage
// had changed it; d's Owner is as vm sees it (an owned or kept disk is vm's, by its UID).
func (b *Backend) SetDisk(vm backend.Owner, d *backend.Disk) {
	b.mu.Lock()
	k := key(vm)
	if d == nil {
		delete(b.disks.table, k)
		delete(b.disks.vms, k)
	} else {
		c := *d
		b.stamp(&c)
		b.disks.table[k] = &c
		b.record(vm, &c)
	}
	b.mu.Unlock()
	b.changed(k)
}

// BindDisks says whether a disk created from now on is Bound at once, with its size, or
// stays Pending until Bind.
func (b *Backend) BindDisks(at bool) {
	b.mu.Lock()
	b.disks.bind = at
	b.mu.Unlock()
}

// Bind gives vm's disk its storage: Bound, with the size it asks for.
func (b *Backend) Bind(vm backend.Owner) error {
	b.mu.Lock()
	k := key(vm)
	d, ok := b.disks.table[k]
	if !ok {
		b.mu.Unlock()
		return fmt.Errorf("bind disk of %s/%s: no disk", vm.Namespace, vm.Name)
	}
	d.Phase, d.Capacity, d.Pending = backend.DiskBound, d.Requested, ""
	b.stamp(d)
	b.mu.Unlock()
	b.changed(k)
	return nil
}

// AnswerGrowth sets how the storage answers a larger size from now on: the zero Growth
// grows a bound disk at once; a state leaves the growth there, with its message, until Grow.
func (b *Backend) AnswerGrowth(g backend.Growth) {
	b.mu.Lock()
	b.disks.growth = g
	b.mu.Unlock()
}

// Grow moves the growth of vm's disk on, as its storage would: to another state with a
// message, or, with GrowthNone, done (the capacity is the size asked for).
func (b *Backend) Grow(vm backend.Owner, g backend.Growth) error {
	b.mu.Lock()
	k := key(vm)
	d, ok := b.disks.table[k]
	if !ok {
		b.mu.Unlock()
		return fmt.Errorf("grow disk of %s/%s: no disk", vm.Namespace, vm.Name)
	}
	d.Growth = g
	if g.State == backend.GrowthNone {
		d.Capacity = d.Requested
	}
	b.stamp(d)
	b.mu.Unlock()
	b.changed(k)
	return nil
}

// FixedClass makes disks created in class from now on unable to grow (a class without
// volume expansion).
func (b *Backend) FixedClass(class string) {
	b.mu.Lock()
	b.disks.fixed[class] = true
	b.mu.Unlock()
}

// FailDisks makes every disk operation (create, update, delete) return err, until it is
// called again with nil.
func (b *Backend) FailDisks(err error) {
	b.mu.Lock()
	b.disks.err = err
	b.mu.Unlock()
}
