package reconcile

import (
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// expectTimeout bounds how long the controller trusts its own memory over the cache; after
// it, the cache is believed again (a watch event was lost, or someone else acted).
const expectTimeout = 30 * time.Second

// expectTable is a VM-keyed table of actions this controller took that its cache has not
// shown yet, each trusted for expectTimeout: the shared part of the expectations of servers
// (expectations) and of disks (diskExpectations).
type expectTable[T any] struct {
	mu sync.Mutex
	m  map[cache.ObjectName]expected[T]
}

type expected[T any] struct {
	action T
	at     time.Time
}

func newExpectTable[T any]() expectTable[T] {
	return expectTable[T]{m: map[cache.ObjectName]expected[T]{}}
}

func (t *expectTable[T]) put(vm cache.ObjectName, action T) {
	t.mu.Lock()
	t.m[vm] = expected[T]{action: action, at: time.Now()}
	t.mu.Unlock()
}

func (t *expectTable[T]) forget(vm cache.ObjectName) {
	t.mu.Lock()
	delete(t.m, vm)
	t.mu.Unlock()
}

// wait returns how long vm's expectation has left, or 0 when it has none. A reconcile that
// leaned on an expectation looks again when it runs out: if what it expects never shows
// (a server created and deleted before the cache saw it), no event would come to say so.
func (t *expectTable[T]) wait(vm cache.ObjectName) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	x, ok := t.m[vm]
	if !ok {
		return 0
	}
	return max(time.Until(x.at.Add(expectTimeout)), time.Millisecond) + time.Second
}

// settle hands vm's expectation, if it has one not older than expectTimeout, to still,
// which reports whether the cache still lags it; one that no longer holds is dropped.
func (t *expectTable[T]) settle(vm cache.ObjectName, still func(T) bool) (T, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	x, ok := t.m[vm]
	if ok && time.Since(x.at) <= expectTimeout && still(x.action) {
		return x.action, true
	}
	delete(t.m, vm)
	var zero T
	return zero, false
}

// expectations remember the server actions this controller took until the backend's cache
// reflects them, in the manner of kube-controller-manager's ControllerExpectations. Without
// them, a reconcile that runs between a create and the informer seeing the new server would
// find no server and ask for it again: a wasted API call and a duplicate Event. replaced
// remembers a server deleted to replace it until the VM's status does (replaced.go).
type expectations struct {
	expectTable[expectation]
	replaced replacements
}

type expectation struct {
	created   *backend.Server // created, not yet in the cache
	deletedID string          // deletion asked for, not yet seen in the cache
}

func newExpectations() *expectations {
	return &expectations{expectTable: newExpectTable[expectation]()}
}

// forget drops everything remembered of vm: it is gone.
func (e *expectations) forget(vm cache.ObjectName) {
	e.expectTable.forget(vm)
	e.replaced.forget(vm)
}

func (e *expectations) created(vm cache.ObjectName, s *backend.Server) {
	if s.Deleting {
		return // nothing to wait for: the cache will show it going, or gone
	}
	c := *s
	e.put(vm, expectation{created: &c})
}

func (e *expectations) deleted(vm cache.ObjectName, id string) {
	e.put(vm, expectation{deletedID: id})
}

// adjust returns what the controller knows of vm's server: the observed one, unless the cache
// has not yet caught up with an action taken here.
func (e *expectations) adjust(vm cache.ObjectName, observed *backend.Server) *backend.Server {
	x, ok := e.settle(vm, func(x expectation) bool {
		if x.created != nil {
			return observed == nil // created, and the cache shows none yet
		}
		return observed != nil && observed.ID == x.deletedID && !observed.Deleting
	})
	switch {
	case !ok:
		return observed
	case x.created != nil:
		c := *x.created
		return &c
	default:
		c := *observed
		c.Deleting = true
		return &c
	}
}
