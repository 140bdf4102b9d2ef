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

// expectations remember the server actions this controller took until the backend's cache
// reflects them, in the manner of kube-controller-manager's ControllerExpectations. Without
// them, a reconcile that runs between a create and the informer seeing the new server would
// find no server and ask for it again: a wasted API call and a duplicate Event.
type expectations struct {
	mu sync.Mutex
	m  map[cache.ObjectName]expectation
}

type expectation struct {
	created   *backend.Server // created, not yet in the cache
	deletedID string          // deletion asked for, not yet seen in the cache
	at        time.Time
}

func newExpectations() *expectations {
	return &expectations{m: map[cache.ObjectName]expectation{}}
}

func (e *expectations) created(vm cache.ObjectName, s *backend.Server) {
	if s.Deleting {
		return // nothing to wait for: the cache will show it going, or gone
	}
	c := *s
	e.mu.Lock()
	e.m[vm] = expectation{created: &c, at: time.Now()}
	e.mu.Unlock()
}

func (e *expectations) deleted(vm cache.ObjectName, id string) {
	e.mu.Lock()
	e.m[vm] = expectation{deletedID: id, at: time.Now()}
	e.mu.Unlock()
}

func (e *expectations) forget(vm cache.ObjectName) {
	e.mu.Lock()
	delete(e.m, vm)
	e.mu.Unlock()
}

// wait returns how long vm's expectation has left, or 0 when it has none. A reconcile that
// leaned on an expectation looks again when it runs out: if the server it expects never shows
// (created and deleted before the cache saw it), no event would come to say so.
func (e *expectations) wait(vm cache.ObjectName) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[vm]
	if !ok {
		return 0
	}
	return max(time.Until(x.at.Add(expectTimeout)), time.Millisecond) + time.Second
}

// adjust returns what the controller knows of vm's server: the observed one, unless the cache
// has not yet caught up with an action taken here.
func (e *expectations) adjust(vm cache.ObjectName, observed *backend.Server) *backend.Server {
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[vm]
	if !ok {
		return observed
	}
	if time.Since(x.at) > expectTimeout {
		delete(e.m, vm)
		return observed
	}
	switch {
	case x.created != nil:
		if observed == nil {
			c := *x.created
			return &c
		}
		delete(e.m, vm)
	case observed == nil || observed.ID != x.deletedID || observed.Deleting:
		delete(e.m, vm)
	default:
		c := *observed
		c.Deleting = true
		return &c
	}
	return observed
}
