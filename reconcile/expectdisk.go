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
// one, unless the cache still shows it as it was before an action taken here for that VM. An
// action another VM of the name took is dropped.
func (e *diskExpectations) adjust(vm cache.ObjectName, uid types.UID, observed *backend.Disk) *backend.Disk {
	x, ok := e.settle(vm, func(x diskExpectation) bool {
		return x.uid == uid && (observed == nil && x.was == "" || observed != nil && x.was != "" && observed.Version == x.was)
	})
	switch {
	case !ok:
		return observed
	case x.disk == nil: // deleted: going, as the cache will show it
		c := copyDisk(observed)
		c.Deleting = true
		return c
	}
	return copyDisk(x.disk)
}

func copyDisk(d *backend.Disk) *backend.Disk {
	c := *d
	return &c
}
