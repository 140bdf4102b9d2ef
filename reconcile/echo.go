package reconcile

import (
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
type echoes struct {
	mu sync.Mutex
	m  map[cache.ObjectName][]string
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

// seen reports whether rv is the echo of a noted write, and forgets it and every older one
// (a version newer than them has arrived: they will not).
func (e *echoes) seen(key cache.ObjectName, rv string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	l, ok := e.m[key]
	if !ok {
		return false
	}
	for i, v := range l {
		if v == rv {
			if i == len(l)-1 {
				delete(e.m, key)
			} else {
				e.m[key] = l[i+1:]
			}
			return true
		}
	}
	return false
}

// forget drops what is noted of a VM that is gone.
func (e *echoes) forget(key cache.ObjectName) {
	e.mu.Lock()
	delete(e.m, key)
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
