package reconcile

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// maxEchoes bounds the resourceVersions remembered per VM: a reconcile writes a VM at most
// twice per decision, and echoes that never come (a relist folded them) must not pile up.
const maxEchoes = 8

// maxFollowed bounds the versions a last write is known to follow (lastWrite.over). They are
// the writes the cache has yet to show, from the version it shows on (latest cuts the older
// ones), so they grow only while the informer lags behind one VM's writes: by four per
// reconcile that decides on the last write. Cut at maxEchoes, a burst's lag of three such
// reconciles dropped the version the cache still showed, and the next decision was made on
// the cache, older than the controller's own writes. Past this bound the write is given up
// for the cache, whose writes then meet a conflict and are decided again.
const maxFollowed = 64

// echoes remember the resourceVersions this controller's writes returned, for reconciles
// that decided on the VM as those writes left it (see Controller.reconcile). The informer
// brings each write back as an update; one whose resourceVersion is remembered brings nothing
// that was not decided on, and is dropped rather than queued: without this, every VM went
// through the queue once more for each of its writes, behind every other key in a burst.
//
// They also keep the VM as the last of those writes returned it (latest), until the informer
// brings it back: a reconcile in between (a server's change, queued before the cache caught
// up) decides on that VM instead of the older one in the cache, so that its writes are
// conditional on the resourceVersion the API server gave last, not on one it has moved past.
// Deciding on the cache there made the way out meet conflicts of its own making: the status
// write of a deletion, then the server's deletion seen before that write's echo, and the
// finalizer's removal refused as made on a stale VM.
//
// That VM is newer than the cache only while the cache shows a version it follows: the one
// its decisions started from, or one of the writes since (lastWrite.over). Writes are noted
// when a reconcile ends, and the cache may show their echoes, and someone else's write after
// them, before that (the informer stores an update before it hands it to the handler, which
// holds it: reconciling): a version the cache shows that is none of those is newer than the
// write (every write is conditional on the version decided on, so none comes in between).
// Taking the write there decided on a VM older than the cache: a user's edit made during a
// reconcile went unseen until the VM's next update, or every retry's write was refused as
// made on a stale VM. Versions are compared for equality only: they are opaque.
type echoes struct {
	mu sync.Mutex
	m  map[cache.ObjectName][]string
	// last is the VM as the last noted write returned it, while that write's echo is due.
	last map[cache.ObjectName]lastWrite
	// done holds the UID of a VM whose finalizer this controller removed, until the cache
	// lets it go: a reconcile in between (the server's or the disk's going, queued before
	// the cache caught up) would decide on a VM that still holds the finalizer and take the
	// way out a second time, with its Events (DiskRetained twice) and a write refused.
	done map[cache.ObjectName]types.UID
}

// lastWrite is the VM as a write returned it, and the versions of the VM it is known to
// follow: the one its decisions started from, what that one followed, and the writes since.
type lastWrite struct {
	written
	over []string
}

// follows reports whether the VM at rv is one the write is known to follow.
func (l lastWrite) follows(rv string) bool { return rv != l.rv && slices.Contains(l.over, rv) }

func newEchoes() *echoes {
	return &echoes{m: map[cache.ObjectName][]string{}, last: map[cache.ObjectName]lastWrite{}, done: map[cache.ObjectName]types.UID{}}
}

// released notes that the finalizer of the VM of key and uid is removed: nothing is left to
// do for it (no finalizer can be added to a VM being deleted, and a new VM of the name has
// another UID).
func (e *echoes) released(key cache.ObjectName, uid types.UID) {
	e.mu.Lock()
	e.done[key] = uid
	e.mu.Unlock()
}

// isReleased reports whether the VM of key and uid was released (released) and the cache
// has yet to let it go.
func (e *echoes) isReleased(key cache.ObjectName, uid types.UID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	got, ok := e.done[key]
	return ok && got == uid
}

// expect notes the resourceVersions of writes whose result has been decided on, and last,
// the VM as the last of them returned it (nil: not known, as for a usage write; an older one
// noted before is dropped, being older than these writes). from are the versions the writes'
// decisions started from (see lastWrite.over): last is taken over the cache only while the
// cache shows one of them or one of rvs.
func (e *echoes) expect(key cache.ObjectName, rvs []string, last *written, from []string) {
	if len(rvs) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[key] = bounded(append(e.m[key], rvs...))
	if last != nil && last.rv == rvs[len(rvs)-1] {
		over := append(append([]string(nil), from...), rvs[:len(rvs)-1]...)
		if len(over) > maxFollowed {
			over = over[len(over)-maxFollowed:]
		}
		e.last[key] = lastWrite{written: *last, over: over}
	} else {
		delete(e.last, key)
	}
}

// bounded keeps the newest maxEchoes of versions l, in a slice of its own when it cuts.
func bounded(l []string) []string {
	if len(l) > maxEchoes {
		return append([]string(nil), l[len(l)-maxEchoes:]...)
	}
	return l
}

// seen reports whether rv is the echo of a noted write, and forgets it and every older one
// (a version newer than them has arrived: they will not). A version that is not an echo is
// someone else's write, newer than the latest of this controller's: the cache has moved past
// it, and latest forgets it; but a version the last write follows (the cache's own, handed
// over again by a relist) is no news, and the write is kept.
func (e *echoes) seen(key cache.ObjectName, rv string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	l, ok := e.m[key]
	if !ok {
		delete(e.last, key)
		return false
	}
	for i, v := range l {
		if v == rv {
			if i == len(l)-1 {
				delete(e.m, key)
				delete(e.last, key)
			} else {
				e.m[key] = l[i+1:]
			}
			return true
		}
	}
	if w, ok := e.last[key]; ok && slices.Contains(w.over, rv) {
		// A version the last write follows, handed over again (a relist the watch cache
		// served from before the write): no news, and the write is still the newer.
		return false
	}
	delete(e.last, key)
	return false
}

// latest returns the VM as this controller's last write of it returned it, when the cache,
// at cachedRV, shows a version that write follows: it is the newer of the two. A cache at the
// write, or past it (a version the write does not follow), is the newer, and the write is
// forgotten.
func (e *echoes) latest(key cache.ObjectName, cachedRV string) (lastWrite, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w, ok := e.last[key]
	if !ok {
		return lastWrite{}, false
	}
	if !w.follows(cachedRV) {
		delete(e.last, key)
		return lastWrite{}, false
	}
	if i := slices.Index(w.over, cachedRV); i > 0 {
		// The cache has shown the versions before this one: it will not show them again.
		w.over = w.over[i:]
		e.last[key] = w
	}
	return w, true
}

// stale drops the latest VM of key: a write made since has no answer to replace it with.
func (e *echoes) stale(key cache.ObjectName) {
	e.mu.Lock()
	delete(e.last, key)
	e.mu.Unlock()
}

// forget drops what is noted of a VM that is gone.
func (e *echoes) forget(key cache.ObjectName) {
	e.mu.Lock()
	delete(e.m, key)
	delete(e.last, key)
	delete(e.done, key)
	e.mu.Unlock()
}

// reconciling holds the informer's updates of the VMs whose reconcile is under way, from the
// worker's Get of the key until the reconcile has noted its writes (echoes.expect), and then
// hands them, in order, to what the handler does with an update (Controller.queueUpdate): an
// echo of the reconcile's own writes is dropped, anything else queued.
//
// Why: an echo the informer handed over while its reconcile went on (the finalizer write's
// while the server was being created, the status write's while the next round decided) came
// before its write was noted, and queued the VM: the workqueue marks a key added while it is
// being processed and hands it out again once it is done, so every such echo cost one more
// reconcile, which found nothing to do. Held until the writes are noted, it is known for an
// echo. Nothing else waits longer than it did: an update queued while its VM's reconcile runs
// is handed out after that reconcile ends in any case. A user's edit is queued as it was, as
// new work; so is the echo of a write the reconcile did not note (it panicked, or took the
// finalizer off), as before.
//
// Why not note each write as soon as it returns: the watch may hand the echo over before the
// worker has read the write's answer, so the race would be narrowed, not closed; and an update
// that is not an echo (a user's edit) is never dropped either way, as seen knows only the
// versions this controller's writes returned.
//
// What is held of an update is a held record, not the update's two objects: what the update
// asks of the queue depends on them alone, and is worked out when it comes (Controller.laneOf);
// only whether it is an echo must wait. Holding the objects kept every version of the VM the
// cache had already replaced, whole, for as long as the reconcile ran (up to
// --reconcile-timeout) while someone else wrote the VM, however often.
//
// Why a record per update, not one per VM (a set of versions and the strongest lane): which
// updates are echoes is known only from the versions noted when the reconcile ends, and seen,
// each time it matches, forgets every version noted before the match; so each version is
// checked in the order it came, and queues the VM in the lane of its own update, as before.
// Folded per VM, a change that queues nothing (a label) would be queued in the lane of an echo
// beside it, and an echo checked out of turn would make seen forget the earlier ones, which
// would then be queued. A record is a string header and a byte; its string is the one the
// Object read (a few bytes of their own), not the Object; and a VM holds at most maxHeld.
//
// The zero reconciling holds nothing and is ready to use.
type reconciling struct {
	mu sync.Mutex
	// m holds, for each VM whose reconcile is under way, the updates handed over meanwhile,
	// oldest first (nil: none yet).
	m map[cache.ObjectName][]held
}

// held is what is kept of an update of a VM held until its reconcile ends: the updated VM's
// resourceVersion, which only then can be told an echo or not (echoes.seen), and the lane
// the update is queued in if it is not one, worked out from the update when it came.
type held struct {
	rv   string
	lane lane
}

// lane is what an update asks of the queue, echoes aside: nothing, a place in the backlog, or
// one ahead of it (urgency.go).
type lane uint8

const (
	// laneNone: the update changes nothing a decision reads (vmcache.Same, a usage write).
	// Its version is checked all the same: seen forgets the echoes older than the one it is.
	laneNone lane = iota
	laneBacklog
	laneUrgent
)

// begin notes that a reconcile of key is under way.
func (r *reconciling) begin(key cache.ObjectName) {
	r.mu.Lock()
	if r.m == nil {
		r.m = map[cache.ObjectName][]held{}
	}
	r.m[key] = nil
	r.mu.Unlock()
}

// underway reports whether a reconcile of key is under way: an update of it then is held
// (hold), and what it asks is worked out for that, while its objects are at hand.
func (r *reconciling) underway(key cache.ObjectName) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.m[key]
	return ok
}

// maxHeld bounds the records held for one VM. A reconcile writes a VM a few times, so more
// updates than this while it runs are someone else's writes, however many (two writers
// fighting over a field, for as long as --reconcile-timeout lets a reconcile run): past it the
// records are folded into one (fold), which keeps memory per VM bounded at the cost of the
// echoes among them, which then queue the VM once more.
const maxHeld = 64

// hold keeps u, an update of key, for the end of the key's reconcile if one is under way, and
// reports whether it did. Past maxHeld records the ones held are folded into one first.
func (r *reconciling) hold(key cache.ObjectName, u held) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.m[key]
	if ok {
		if len(l) >= maxHeld {
			l = append(l[:0], fold(l))
		}
		r.m[key] = append(l, u)
	}
	return ok
}

// fold is one record standing for the records l: no version (no echo is told among them,
// and seen takes one it does not know for a sign that the cache is past the last write, as it
// is: someone else wrote the VM since), in the strongest lane any of them asks for, so that
// the VM is queued as the most pressing of them would have queued it.
func fold(l []held) held {
	f := held{}
	for _, h := range l {
		f.lane = max(f.lane, h.lane)
	}
	return f
}

// end hands the updates held for key to handle, oldest first, and notes that its reconcile is
// over. One handed over while handle runs is held too, and handled next, so that the updates
// of a VM are handled in the order they came (seen forgets the writes older than an echo).
func (r *reconciling) end(key cache.ObjectName, handle func(cache.ObjectName, held)) {
	for {
		r.mu.Lock()
		l := r.m[key]
		if len(l) == 0 {
			delete(r.m, key)
			r.mu.Unlock()
			return
		}
		r.m[key] = nil
		r.mu.Unlock()
		for _, u := range l {
			handle(key, u)
		}
	}
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
