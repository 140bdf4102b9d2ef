package reconcile

import (
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// maxEchoes bounds the resourceVersions remembered per VM: a reconcile writes a VM at most
// twice per decision, and echoes that never come (a relist folded them) must not pile up.
const maxEchoes = 8

// echoWait bounds how long a reconcile waits for the echo of its VM's last write rather than
// decide on the older cached VM (see echoes.pending).
const echoWait = 10 * time.Second

// echoes remember the resourceVersions this controller's writes returned, for reconciles
// that decided on the VM as those writes left it (see Controller.reconcile). The informer
// brings each write back as an update; one whose resourceVersion is remembered brings nothing
// that was not decided on, and is dropped rather than queued: without this, every VM went
// through the queue once more for each of its writes, behind every other key in a burst.
//
// While a VM's writes are not back, its cached VM is older than what the API server holds: a
// reconcile then (a change of its server, say) would decide on it and fail with a conflict.
// It waits instead, and the echo it waits for is queued rather than dropped.
type echoes struct {
	mu sync.Mutex
	m  map[cache.ObjectName]*pendingEchoes
}

type pendingEchoes struct {
	rvs    []string
	at     time.Time // of the last write noted
	wanted bool      // a reconcile waits for the last one
}

// expect notes the resourceVersions of writes whose result has been decided on.
func (e *echoes) expect(key cache.ObjectName, rvs []string) {
	if len(rvs) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.m[key]
	if p == nil {
		p = &pendingEchoes{}
		e.m[key] = p
	}
	p.rvs = append(p.rvs, rvs...)
	if len(p.rvs) > maxEchoes {
		p.rvs = append([]string(nil), p.rvs[len(p.rvs)-maxEchoes:]...)
	}
	p.at = time.Now()
}

// seen reports whether an update that brings rv is the echo of a noted write that nobody
// waits for, and forgets it and every older one (a version newer than them has arrived: they
// will not). An update that is not an echo ends what is noted of the VM: it is news, queued
// anyway, and the writes still to come back can no longer be told from the ones before them.
func (e *echoes) seen(key cache.ObjectName, rv string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.m[key]
	if !ok {
		return false
	}
	for i, v := range p.rvs {
		if v == rv {
			if i == len(p.rvs)-1 {
				delete(e.m, key)
				return !p.wanted
			}
			p.rvs = p.rvs[i+1:]
			return true
		}
	}
	delete(e.m, key)
	return false
}

// pending reports whether the VM's last noted write has yet to come back, not long ago; if
// so, its echo will be queued.
func (e *echoes) pending(key cache.ObjectName) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.m[key]
	if !ok {
		return false
	}
	if time.Since(p.at) > echoWait {
		delete(e.m, key)
		return false
	}
	p.wanted = true
	return true
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
