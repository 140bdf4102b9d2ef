package reconcile

import (
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// diskExpectations remember the disk actions this controller took until the backend's cache
// reflects them, as expectations do for servers: without them, a decision made between a
// create (or a growth, an adoption) and the cache seeing it would ask for it again, one more
// write, and on the way to Active a VM is decided on again at once (up to maxDecisions per
// reconcile), well inside that window.
type diskExpectations struct {
	mu sync.Mutex
	m  map[cache.ObjectName]diskExpectation
}

// diskExpectation is one action on a VM's disk that the cache has not shown yet.
type diskExpectation struct {
	// was is the version of the disk the action was decided on ("" for a create: there was
	// none); while the cache shows that version (or no disk, after a create), it lags.
	was string
	// disk is the disk as the action returned it; nil after a delete.
	disk *backend.Disk
	at   time.Time
}

func newDiskExpectations() *diskExpectations {
	return &diskExpectations{m: map[cache.ObjectName]diskExpectation{}}
}

// changed records that vm's disk, seen as was (nil: none), is now d.
func (e *diskExpectations) changed(vm cache.ObjectName, was, d *backend.Disk) {
	if d == nil {
		return
	}
	x := diskExpectation{disk: copyDisk(d), at: time.Now()}
	if was != nil {
		x.was = was.Version
	}
	e.mu.Lock()
	e.m[vm] = x
	e.mu.Unlock()
}

// deleted records that vm's disk, seen as was, has been asked to go.
func (e *diskExpectations) deleted(vm cache.ObjectName, was *backend.Disk) {
	if was == nil {
		return
	}
	e.mu.Lock()
	e.m[vm] = diskExpectation{was: was.Version, at: time.Now()}
	e.mu.Unlock()
}

func (e *diskExpectations) forget(vm cache.ObjectName) {
	e.mu.Lock()
	delete(e.m, vm)
	e.mu.Unlock()
}

// wait returns how long vm's expectation has left, or 0 when it has none (see
// expectations.wait).
func (e *diskExpectations) wait(vm cache.ObjectName) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[vm]
	if !ok {
		return 0
	}
	return max(time.Until(x.at.Add(expectTimeout)), time.Millisecond) + time.Second
}

// adjust returns what the controller knows of vm's disk: the observed one, unless the cache
// still shows it as it was before an action taken here.
func (e *diskExpectations) adjust(vm cache.ObjectName, observed *backend.Disk) *backend.Disk {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[vm]
	if !ok {
		return observed
	}
	stale := observed == nil && x.was == "" || observed != nil && x.was != "" && observed.Version == x.was
	if !stale || time.Since(x.at) > expectTimeout {
		delete(e.m, vm)
		return observed
	}
	if x.disk == nil { // deleted: going, as the cache will show it
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
