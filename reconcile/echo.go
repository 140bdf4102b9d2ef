package reconcile

import (
	"slices"
	"sync"

	"k8s.io/client-go/tools/cache"
)

// maxEchoes bounds the resourceVersions remembered per VM: a reconcile writes a VM at most
// twice per decision, and echoes that never come (a relist folded them) must not pile up.
const maxEchoes = 8

// echoes remember the resourceVersions this controller's writes returned, for reconciles
// that decided on the VM as those writes left it (see Controller.reconcile). The informer
// brings each write back as an update; one whose resourceVersion is remembered brings nothing
// that was not decided on, and is dropped rather than queued: without this, every VM went
// through the queue once more for each of its writes, behind every other key in a burst.
//
// They also say when the cache is behind the controller's own writes (behind): a reconcile
// then waits for the echo instead of deciding on the older copy, whose write, conditional on
// the older resourceVersion, would be refused with 409 Conflict. The echo, or any newer
// version, wakes it (arrived).
type echoes struct {
	mu sync.Mutex
	m  map[cache.ObjectName][]string
	// waiting are the VMs whose reconcile found the cache behind their noted writes.
	waiting map[cache.ObjectName]struct{}
}

func newEchoes() *echoes {
	return &echoes{m: map[cache.ObjectName][]string{}, waiting: map[cache.ObjectName]struct{}{}}
}

// expect notes the resourceVersions of writes whose result has been decided on.
func (e *echoes) expect(key cache.ObjectName, rvs []string) {
	if len(rvs) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	l := append(e.m[key], rvs...)
	if len(l) > maxEchoes {
		l = append([]string(nil), l[len(l)-maxEchoes:]...)
	}
	e.m[key] = l
}

// arrived takes a version of key that the informer brings. echo: it is a noted write's
// (forgotten now, with every older one: a version newer than them has arrived, they will not).
// wake: a reconcile waits for the cache to catch up, and it has: this is the last noted write,
// or a version that is not noted at all. Versions of a VM arrive in order, and none comes
// between a write's base and the write (each is conditional on its base), so a version that is
// not noted is newer than every noted one: those were folded into it (a relist) or came
// before.
func (e *echoes) arrived(key cache.ObjectName, rv string) (echo, wake bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.m[key]
	i := slices.Index(l, rv)
	if i >= 0 && i < len(l)-1 {
		e.m[key] = l[i+1:]
		return true, false
	}
	delete(e.m, key)
	_, wake = e.waiting[key]
	delete(e.waiting, key)
	return i >= 0, wake
}

// behind reports whether the cache's copy of key, at resourceVersion rv, is older than a
// noted write, and if so marks the VM as waiting: arrived wakes it. A copy at a noted version
// is that write's echo, come before the write was noted: the notes up to it are dropped, and
// the copy is behind only if later writes are noted.
func (e *echoes) behind(key cache.ObjectName, rv string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.m[key]
	if len(l) == 0 {
		return false
	}
	i := slices.Index(l, rv)
	if i == len(l)-1 {
		delete(e.m, key)
		return false
	}
	if i >= 0 {
		e.m[key] = l[i+1:]
	}
	e.waiting[key] = struct{}{}
	return true
}

// forget drops what is noted of a VM that is gone.
func (e *echoes) forget(key cache.ObjectName) {
	e.mu.Lock()
	delete(e.m, key)
	delete(e.waiting, key)
	e.mu.Unlock()
}

// PassObserver, if the Observer implements it, is told how many reconciles each VM took from
// its first to the one that made it Active.
type PassObserver interface {
	PassesToActive(passes int)
}

// passCounter counts each VM's reconciles until it becomes Active.
type passCounter struct {
	mu sync.Mutex
	m  map[cache.ObjectName]int
}

// add counts a reconcile of key and returns its count so far.
func (p *passCounter) add(key cache.ObjectName) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.m[key]++
	return p.m[key]
}

// active reports the count of a VM that has just become Active, and starts it again.
func (p *passCounter) active(key cache.ObjectName, passes int, o Observer) {
	p.mu.Lock()
	delete(p.m, key)
	p.mu.Unlock()
	if po, ok := o.(PassObserver); ok {
		po.PassesToActive(passes)
	}
}

func (p *passCounter) forget(key cache.ObjectName) {
	p.mu.Lock()
	delete(p.m, key)
	p.mu.Unlock()
}
