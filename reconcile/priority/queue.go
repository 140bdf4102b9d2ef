package priority

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Queue is client-go's rate-limiting work queue with new work first: Add, AddAfter and
// AddRateLimited queue an item in the backlog, the Urgent variants ahead of it (see the
// package comment for which is which). Everything else is the stock queue's.
type Queue[T comparable] struct {
	workqueue.TypedRateLimitingInterface[T]
	lanes *lanes[T]
	// queue is the workqueue under the delays, which Add and AddUrgent add to directly: an
	// add that goes through the delays (dueQueue) is a delayed one coming due.
	queue workqueue.TypedInterface[T]
}

// New makes a Queue whose metrics carry name and whose retries limiter paces.
func New[T comparable](name string, limiter workqueue.TypedRateLimiter[T]) *Queue[T] {
	return newQueue(name, limiter, clock.RealClock{})
}

// newQueue is New on clk: the tests' fake clock decides when a delayed add comes due.
func newQueue[T comparable](name string, limiter workqueue.TypedRateLimiter[T], clk clock.WithTicker) *Queue[T] {
	l := newLanes[T]()
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[T]{Name: name, Queue: l, Clock: clk})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[T]{Name: name, Queue: dueQueue[T]{q, l}, Clock: clk})
	return &Queue[T]{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[T]{Name: name, DelayingQueue: delaying}),
		lanes: l,
		queue: q,
	}
}

// Add queues item in the backlog.
func (q *Queue[T]) Add(item T) { q.queue.Add(item) }

// AddUrgent queues item ahead of the backlog; an item waiting in the backlog moves up.
func (q *Queue[T]) AddUrgent(item T) {
	q.lanes.mark(item)
	q.queue.Add(item)
}

// AddUrgentAfter queues item ahead of the backlog once d has passed.
func (q *Queue[T]) AddUrgentAfter(item T, d time.Duration) {
	q.lanes.markDue(item)
	q.AddAfter(item, d)
}

// AddUrgentRateLimited queues item ahead of the backlog once the rate limiter allows.
func (q *Queue[T]) AddUrgentRateLimited(item T) {
	q.lanes.markDue(item)
	q.AddRateLimited(item)
}

// dueQueue is the workqueue as the delays see it: every Add that reaches it is a delayed add
// (AddAfter, AddRateLimited, theirs Urgent) coming due, as Queue's own adds bypass it.
//
// Why the mark of a delayed add is set as it comes due, not when it is made: marked at once,
// it was taken by the item's next entry into the queue, whatever caused it. A plain add
// before the requeue was due (someone else's write) took it and went out as new work, and the
// requeue, when it came due, found no mark and went to the end of the backlog: new work that
// needed another pass waited behind a start's whole backlog.
//
// The delays keep one entry per item, the soonest: a delayed add made while another of the item
// waits comes due with it. So the mark is the item's (markDue), taken by whichever comes due
// next, and an urgent requeue folded into a sooner plain one comes due urgent, sooner. One made
// just as the item's entry comes due, before that entry's Add reaches here, may be taken by it
// and its own entry, later, go to the backlog: the item went out as new work all the same.
type dueQueue[T comparable] struct {
	workqueue.TypedInterface[T]
	lanes *lanes[T]
}

func (d dueQueue[T]) Add(item T) {
	d.lanes.cameDue(item)
	d.TypedInterface.Add(item)
}

// TakeUrgent reports whether item, just handed out by Get, came from the urgent lane, so that
// the worker can requeue unfinished new work as new work. It answers once per Get.
func (q *Queue[T]) TakeUrgent(item T) bool { return q.lanes.takePopped(item) }

// Lens is the number of items waiting in each lane.
func (q *Queue[T]) Lens() (urgent, backlog int) { return q.lanes.lens() }

// lanes is the workqueue.Queue under Queue: two FIFO lanes, the urgent one served first.
//
// An item promoted from the backlog leaves a stale entry behind, skipped when it comes up,
// rather than being cut out of the middle of a slice: each queued item's live entry is known
// by a sequence number (where).
type lanes[T comparable] struct {
	mu              sync.Mutex
	urgent, backlog lane[T]
	where           map[T]position // every queued item: its lane and live entry
	marked          map[T]struct{} // items whose next push or touch is urgent
	markedDue       map[T]struct{} // items whose delayed add is urgent when it comes due
	popped          map[T]struct{} // items handed out from the urgent lane, until taken
	seq             uint64
	nUrgent         int // items whose live entry is in the urgent lane
}

// position is where an item's live entry is.
type position struct {
	urgent bool
	seq    uint64
}

// entry is one slot of a lane; it is stale when its item's position has another seq.
type entry[T comparable] struct {
	item T
	seq  uint64
}

// lane is a FIFO of entries.
type lane[T comparable] []entry[T]

var _ workqueue.Queue[string] = (*lanes[string])(nil)

func newLanes[T comparable]() *lanes[T] {
	return &lanes[T]{where: map[T]position{}, marked: map[T]struct{}{}, markedDue: map[T]struct{}{}, popped: map[T]struct{}{}}
}

func (l *lanes[T]) mark(item T) {
	l.mu.Lock()
	l.marked[item] = struct{}{}
	l.mu.Unlock()
}

// markDue marks item's delayed add, to be marked when it comes due (cameDue).
func (l *lanes[T]) markDue(item T) {
	l.mu.Lock()
	l.markedDue[item] = struct{}{}
	l.mu.Unlock()
}

// cameDue is told of a delayed add of item coming due, just before it is added: an urgent one
// marks the item.
func (l *lanes[T]) cameDue(item T) {
	l.mu.Lock()
	if _, ok := l.markedDue[item]; ok {
		delete(l.markedDue, item)
		l.marked[item] = struct{}{}
	}
	l.mu.Unlock()
}

// Push queues a new item, in the urgent lane if it is marked.
func (l *lanes[T]) Push(item T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, urgent := l.marked[item]
	delete(l.marked, item)
	l.put(item, urgent)
}

// Touch is told of an item added again while it waits: a marked one in the backlog moves to
// the end of the urgent lane. Nothing moves down.
func (l *lanes[T]) Touch(item T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, urgent := l.marked[item]; !urgent {
		return
	}
	delete(l.marked, item)
	if p, ok := l.where[item]; ok && !p.urgent {
		l.put(item, true) // the backlog's entry is stale from now on
	}
}

func (l *lanes[T]) put(item T, urgent bool) {
	l.seq++
	l.where[item] = position{urgent: urgent, seq: l.seq}
	e := entry[T]{item: item, seq: l.seq}
	if urgent {
		l.nUrgent++
		l.urgent = append(l.urgent, e)
	} else {
		l.backlog = append(l.backlog, e)
	}
}

// Len is the number of items waiting, stale entries left out.
func (l *lanes[T]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.where)
}

// Pop hands out the first item of the urgent lane, else of the backlog. The workqueue calls it
// only when Len is above zero.
func (l *lanes[T]) Pop() T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if item, ok := l.urgent.pop(l.where); ok {
		l.nUrgent--
		l.popped[item] = struct{}{}
		return item
	}
	item, _ := l.backlog.pop(l.where)
	return item
}

// pop takes the first live entry off the lane and forgets its item's position.
func (q *lane[T]) pop(where map[T]position) (T, bool) {
	for len(*q) > 0 {
		e := (*q)[0]
		(*q)[0] = entry[T]{} // let the item go
		*q = (*q)[1:]
		if p, ok := where[e.item]; ok && p.seq == e.seq {
			delete(where, e.item)
			return e.item, true
		}
	}
	var zero T
	return zero, false
}

func (l *lanes[T]) takePopped(item T) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.popped[item]
	delete(l.popped, item)
	return ok
}

func (l *lanes[T]) lens() (urgent, backlog int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nUrgent, len(l.where) - l.nUrgent
}
