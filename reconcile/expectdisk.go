package reconcile

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// diskExpectations remember the disk actions this controller took until the backend's cache
// reflects them, as expectations do for servers: without them, a decision made between a
// create (or a growth, an adoption) and the cache seeing it would ask for it again, one more
// write, and on the way to Active a VM is decided on again at once (up to maxDecisions per
// reconcile), well inside that window.
type diskExpectations struct{ expectTable[diskExpectation] }

// diskExpectation is one action on a VM's disk that the cache has not shown yet.
type diskExpectation struct {
	// uid is the VM that took the action. The table is keyed by the VM's name, and a disk's
	// owner (backend.Disk.Owner) is told relative to one VM: a VM deleted and made again
	// under its name before a reconcile saw the name gone would otherwise take the disk as
	// the earlier VM saw it (its own, kept) where the cache tells the new one it is an
	// earlier VM's, and a stopped VM would adopt, as its own, a disk its predecessor kept.
	uid types.UID
	// was is the version of the disk the action was decided on ("" for a create: there was
	// none); while the cache shows that version (or no disk, after a create), it lags.
	was string
	// disk is the disk as the action returned it; nil after a delete.
	disk *backend.Disk
}

func newDiskExpectations() *diskExpectations {
	return &diskExpectations{newExpectTable[diskExpectation]()}
}

// changed records that the disk of vm, the VM of UID uid, seen as was (nil: none), is now d.
func (e *diskExpectations) changed(vm cache.ObjectName, uid types.UID, was, d *backend.Disk) {
	if d == nil {
		return
	}
	x := diskExpectation{uid: uid, disk: copyDisk(d)}
	if was != nil {
		x.was = was.Version
	}
	e.put(vm, x)
}

// deleted records that the disk of vm, the VM of UID uid, seen as was, has been asked to go.
func (e *diskExpectations) deleted(vm cache.ObjectName, uid types.UID, was *backend.Disk) {
	if was == nil {
		return
	}
	e.put(vm, diskExpectation{uid: uid, was: was.Version})
}

// adjust returns what the controller knows of the disk of vm, the VM of UID uid: the observed
// one, unless the cache still shows it as it was before an action taken here. The disk an
// action left is told as whose it is to the VM that asks: an earlier VM of the name (deleted,
// and the VM made again before a reconcile saw the name gone) kept it or owned it, which
// makes it, to this VM, one to adopt or another's (toSuccessor), not its own.
func (e *diskExpectations) adjust(vm cache.ObjectName, uid types.UID, observed *backend.Disk) *backend.Disk {
	x, ok := e.settle(vm, func(x diskExpectation) bool {
		return observed == nil && x.was == "" || observed != nil && x.was != "" && observed.Version == x.was
	})
	switch {
	case !ok:
		return observed
	case x.disk == nil: // deleted: going, as the cache will show it, to any VM of the name
		c := copyDisk(observed)
		c.Deleting = true
		return c
	}
	c := copyDisk(x.disk)
	if x.uid != uid {
		c.Owner = toSuccessor(c.Owner)
	}
	return c
}

// toSuccessor is whose a disk is, as its owner o to the VM that acted on it, to a later VM of
// the name: a disk the earlier VM kept is one a later VM may adopt, one it owned is another's
// (the garbage collector's, with the earlier VM), as the backend tells a later VM once its
// cache shows the action.
func toSuccessor(o backend.DiskOwner) backend.DiskOwner {
	switch o {
	case backend.DiskKept:
		return backend.DiskUnowned
	case backend.DiskOwned:
		return backend.DiskOther
	}
	return o
}

func copyDisk(d *backend.Disk) *backend.Disk {
	c := *d
	return &c
}
