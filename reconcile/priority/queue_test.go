package priority

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// now is a rate limiter that lets every retry through at once, so that the tests see the
// order, not the delays.
func now() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](0, 0)
}

// drain takes every waiting item off q, marking each done, and returns them in order.
func drain(t *testing.T, q *Queue[string]) []string {
	t.Helper()
	var got []string
	for q.Len() > 0 {
		item, shutdown := q.Get()
		if shutdown {
			t.Fatal("shut down")
		}
		got = append(got, item)
		q.TakeUrgent(item)
		q.Done(item)
	}
	return got
}

// TestOrder: new work is handed out before the backlog, whenever it was added; each lane is
// first in, first out; an item added twice is queued once.
func TestOrder(t *testing.T) {
	tests := map[string]struct {
		add  func(q *Queue[string])
		want []string
	}{
		"backlog only, in order": {func(q *Queue[string]) {
			for _, k := range []string{"a", "b", "c"} {
				q.Add(k)
			}
		}, []string{"a", "b", "c"}},
		"new work ahead of the backlog": {func(q *Queue[string]) {
			q.Add("a")
			q.Add("b")
			q.AddUrgent("x")
			q.Add("c")
			q.AddUrgent("y")
		}, []string{"x", "y", "a", "b", "c"}},
		"a waiting item moves up, once": {func(q *Queue[string]) {
			q.Add("a")
			q.Add("b")
			q.Add("c")
			q.AddUrgent("b")
		}, []string{"b", "a", "c"}},
		"urgent stays urgent when added again as backlog": {func(q *Queue[string]) {
			q.Add("a")
			q.AddUrgent("x")
			q.Add("x")
		}, []string{"x", "a"}},
		"an item added twice is queued once": {func(q *Queue[string]) {
			q.AddUrgent("x")
			q.AddUrgent("x")
			q.Add("a")
			q.Add("a")
		}, []string{"x", "a"}},
		"moved up behind the new work before it": {func(q *Queue[string]) {
			q.Add("a")
			q.Add("b")
			q.AddUrgent("x")
			q.AddUrgent("a")
		}, []string{"x", "a", "b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q := New("", now())
			defer q.ShutDown()
			tc.add(q)
			if got := drain(t, q); !slices.Equal(got, tc.want) {
				t.Errorf("order %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInProcess: an item added as new work while a worker has it is handed out again, after
// Done, ahead of the backlog; and TakeUrgent tells the worker which lane its item came from.
func TestInProcess(t *testing.T) {
	q := New("", now())
	defer q.ShutDown()
	q.AddUrgent("x")
	q.Add("a")
	item, _ := q.Get()
	if item != "x" || !q.TakeUrgent(item) || q.TakeUrgent(item) {
		t.Fatalf("got %q: want x, from the urgent lane, told once", item)
	}
	q.AddUrgent("x") // changed again while its reconcile runs
	q.Add("b")
	if u, b := q.Lens(); u != 0 || b != 2 {
		t.Errorf("lanes %d, %d while x is in process: want x in neither", u, b)
	}
	q.Done("x")
	if got := drain(t, q); !slices.Equal(got, []string{"x", "a", "b"}) {
		t.Errorf("order %q, want x again ahead of the backlog", got)
	}
	q.Add("c")
	item, _ = q.Get()
	if q.TakeUrgent(item) {
		t.Errorf("%s came from the backlog, told urgent", item)
	}
	q.Done(item)
}

// TestRequeued: a retry or a requeue of new work is new work again, ahead of the backlog that
// waits; a plain one goes to the end of the backlog.
func TestRequeued(t *testing.T) {
	q := New("", now())
	defer q.ShutDown()
	for _, k := range []string{"a", "b"} {
		q.Add(k)
	}
	q.AddUrgentRateLimited("retried")
	q.AddUrgentAfter("later", time.Millisecond)
	q.AddRateLimited("plain")
	for deadline := time.Now().Add(10 * time.Second); q.Len() < 5; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d items queued, want 5", q.Len())
		}
	}
	got := drain(t, q)
	for i, k := range got[:2] {
		if k != "retried" && k != "later" {
			t.Errorf("item %d is %q: the requeued new work comes first (%q)", i, k, got)
		}
	}
	if !slices.Equal(got[2:], []string{"a", "b", "plain"}) {
		t.Errorf("order %q: want the backlog in order, the plain retry last", got)
	}
}

// TestLikeAModel runs random adds, gets and dones against the queue and against a plain
// model of it (one list, searched from the front): every Get must hand out what the model
// says, so that stale entries, promotions and the in-process rules never lose, repeat or
// reorder an item.
func TestLikeAModel(t *testing.T) {
	for seed := range uint64(50) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 1))
			q := New("", now())
			defer q.ShutDown()
			m := newModel()
			var held []string // handed out, not done
			for step := range 400 {
				switch op := r.IntN(10); {
				case op < 5:
					k := fmt.Sprintf("k%d", r.IntN(12))
					urgent := r.IntN(3) == 0
					if urgent {
						q.AddUrgent(k)
					} else {
						q.Add(k)
					}
					m.add(k, urgent)
				case op < 8 && q.Len() > 0:
					got, _ := q.Get()
					want, wantUrgent := m.get()
					if urgent := q.TakeUrgent(got); got != want || urgent != wantUrgent {
						t.Fatalf("step %d: Get %q (urgent %t), the model says %q (urgent %t)", step, got, urgent, want, wantUrgent)
					}
					held = append(held, got)
				case len(held) > 0:
					i := r.IntN(len(held))
					q.Done(held[i])
					m.done(held[i])
					held = slices.Delete(held, i, i+1)
				}
				if q.Len() != len(m.queued) {
					t.Fatalf("step %d: Len %d, the model has %d", step, q.Len(), len(m.queued))
				}
			}
		})
	}
}

// model is the queue as a plain list, with the workqueue's rules written out.
type model struct {
	queued     []modelEntry // in order of entry
	dirty      map[string]bool
	processing map[string]bool
	marked     map[string]bool
}

type modelEntry struct {
	key    string
	urgent bool
}

func newModel() *model {
	return &model{dirty: map[string]bool{}, processing: map[string]bool{}, marked: map[string]bool{}}
}

func (m *model) add(k string, urgent bool) {
	if urgent {
		m.marked[k] = true
	}
	if m.dirty[k] {
		if !m.processing[k] && m.marked[k] {
			delete(m.marked, k)
			i := slices.IndexFunc(m.queued, func(e modelEntry) bool { return e.key == k })
			if !m.queued[i].urgent {
				m.queued = slices.Delete(m.queued, i, i+1)
				m.queued = append(m.queued, modelEntry{k, true})
			}
		}
		return
	}
	m.dirty[k] = true
	if !m.processing[k] {
		m.push(k)
	}
}

func (m *model) push(k string) {
	m.queued = append(m.queued, modelEntry{k, m.marked[k]})
	delete(m.marked, k)
}

// get hands out the first urgent entry, else the first.
func (m *model) get() (string, bool) {
	i := slices.IndexFunc(m.queued, func(e modelEntry) bool { return e.urgent })
	if i < 0 {
		i = 0
	}
	e := m.queued[i]
	m.queued = slices.Delete(m.queued, i, i+1)
	delete(m.dirty, e.key)
	m.processing[e.key] = true
	return e.key, e.urgent
}

func (m *model) done(k string) {
	delete(m.processing, k)
	if m.dirty[k] {
		m.push(k)
	}
}

// due waits until n items are queued: a delayed add comes due on the delaying queue's own
// goroutine once the fake clock has stepped past it.
func due(t *testing.T, q *Queue[string], n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); q.Len() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d items queued, want %d", q.Len(), n)
		}
	}
}

// TestUrgentRequeueKeepsItsLane: a requeue of new work is new work when it comes due, whatever
// was added of the item before then. Its mark was set at once and taken by the next entry of
// the item into the queue, whatever caused it: a plain add before the requeue was due (someone
// else's write) went out as new work, and the requeue, when it came due, went to the end of
// the backlog. A plain add before then is backlog; the requeue, due, moves the item up (or
// queues it ahead of the backlog).
func TestUrgentRequeueKeepsItsLane(t *testing.T) {
	const wait = time.Minute
	tests := map[string]struct {
		requeue func(q *Queue[string])
		// taken: the item is handed out (in process) when the requeue is made, and done
		// after the plain add, as a reconcile that requeues its VM is.
		taken bool
	}{
		"after":                          {requeue: func(q *Queue[string]) { q.AddUrgentAfter("x", wait) }},
		"rate-limited":                   {requeue: func(q *Queue[string]) { q.AddUrgentRateLimited("x") }},
		"after, while in process":        {requeue: func(q *Queue[string]) { q.AddUrgentAfter("x", wait) }, taken: true},
		"rate-limited, while in process": {requeue: func(q *Queue[string]) { q.AddUrgentRateLimited("x") }, taken: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			q := newQueue("", workqueue.NewTypedItemExponentialFailureRateLimiter[string](wait, wait), clk)
			defer q.ShutDown()
			if tc.taken {
				q.AddUrgent("x")
				if item, _ := q.Get(); item != "x" || !q.TakeUrgent(item) {
					t.Fatalf("got %q, want x from the urgent lane", item)
				}
			}
			q.Add("a")
			tc.requeue(q)
			q.Add("x") // someone else's write, before the requeue is due
			if tc.taken {
				q.Done("x")
			}
			if u, b := q.Lens(); u != 0 || b != 2 {
				t.Errorf("lanes %d, %d before the requeue is due: want x in the backlog, behind a", u, b)
			}
			if got := drain(t, q); !slices.Equal(got, []string{"a", "x"}) {
				t.Errorf("order %q before the requeue is due, want [a x]", got)
			}

			q.Add("b")
			clk.Step(wait)
			due(t, q, 2)
			if u, b := q.Lens(); u != 1 || b != 1 {
				t.Errorf("lanes %d, %d once the requeue is due: want x new work, b backlog", u, b)
			}
			if got := drain(t, q); !slices.Equal(got, []string{"x", "b"}) {
				t.Errorf("order %q once the requeue is due, want x ahead of the backlog", got)
			}
		})
	}
}

// TestUrgentRequeueFolded: the delays keep one entry per item, the soonest; an urgent requeue
// made while a plain one of the item waits comes due with it, as new work. Its mark does not
// outlive it: the item's next plain requeue comes due in the backlog.
func TestUrgentRequeueFolded(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	q := newQueue("", now(), clk)
	defer q.ShutDown()
	q.Add("a")
	q.AddAfter("x", time.Minute)
	q.AddUrgentAfter("x", time.Hour)
	clk.Step(time.Minute)
	due(t, q, 2)
	if got := drain(t, q); !slices.Equal(got, []string{"x", "a"}) {
		t.Errorf("order %q, want x new work, sooner", got)
	}

	q.Add("b")
	q.AddAfter("x", time.Minute)
	clk.Step(time.Hour)
	due(t, q, 2)
	if got := drain(t, q); !slices.Equal(got, []string{"b", "x"}) {
		t.Errorf("order %q, want the plain requeue in the backlog", got)
	}
}
