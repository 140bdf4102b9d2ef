package webhook

import (
	"container/list"
	"context"
	"fmt"
	"sync"
)

// InFlight bounds the bytes of review bodies that requests hold at once, across requests: a
// request takes its body's size from it before reading the body and gives it back once
// answered. MaxBytes bounds one review; what the webhook holds grows with every review it
// handles at the same time, and the API server sends them concurrently (a list, a watch
// event and a get of different clients each come in a review of their own).
//
// A request goes as soon as its bytes are free, whether or not others wait; when bytes are
// given back, the waiting requests are let in oldest first, each that fits in what is free.
// So small reviews (an object of a get, a watch event) keep flowing past a large one that
// waits for others to finish, rather than queueing behind it as they would with a strictly
// first-in-first-out semaphore such as golang.org/x/sync/semaphore. The price is that a
// stream of small reviews could keep a large one waiting: it goes once what the others hold
// falls to the total less its size, so smaller reviews keep it out only by holding more than
// that at every moment (with the defaults, over 16 MiB of them in flight without a pause),
// and it waits no longer than Handler.MaxWait in any case.
type InFlight struct {
	total int64

	mu      sync.Mutex
	used    int64
	waiters list.List // of *waiter, oldest first; none fits in what is free
	// queued, if set, is called with mu held when a request of n bytes starts waiting:
	// tests learn that a request waits without sleeping.
	queued func(n int64)
	// taken, if set, is called with mu held when a request's n bytes are taken, at once or
	// after a wait: tests learn that a request holds its share without sleeping.
	taken func(n int64)
	// leaving, if set, is called without mu when a waiting request's context has ended,
	// before it takes mu to leave: tests let it in at that moment, which the race between
	// its context and release would otherwise decide.
	leaving func(n int64)
}

type waiter struct {
	n     int64
	ready chan struct{} // closed once the bytes are the waiter's
}

// NewInFlight bounds the bytes in flight at total, which must be positive.
func NewInFlight(total int64) *InFlight {
	if total <= 0 {
		panic(fmt.Sprintf("webhook: in-flight bound %d is not positive", total))
	}
	return &InFlight{total: total}
}

// Total is the bound.
func (b *InFlight) Total() int64 { return b.total }

// errNeverFits is what acquire says of more bytes than the bound: waiting could not help.
type errNeverFits struct{ n, total int64 }

func (e errNeverFits) Error() string {
	return fmt.Sprintf("%d bytes is more than the %d bytes all reviews in flight may hold", e.n, e.total)
}

// acquire takes n bytes: at once if they are free, else once others give enough back. It
// returns the context's error if the context ends first, having taken nothing; and at once
// an error when n is more than the bound, which no amount of waiting would make free.
func (b *InFlight) acquire(ctx context.Context, n int64) error {
	if n > b.total {
		return errNeverFits{n, b.total}
	}
	b.mu.Lock()
	if b.total-b.used >= n {
		b.used += n
		if b.taken != nil {
			b.taken(n)
		}
		b.mu.Unlock()
		return nil
	}
	w := &waiter{n: n, ready: make(chan struct{})}
	e := b.waiters.PushBack(w)
	if b.queued != nil {
		b.queued(n)
	}
	b.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	if b.leaving != nil {
		b.leaving(n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready:
		// Let in as the context ended: the bytes are taken, so keep them rather than
		// give back what the caller would then have to be told it does not have.
		return nil
	default:
	}
	// Taking nothing, the waiter's leaving frees nothing: no one else can go now who could
	// not before.
	b.waiters.Remove(e)
	return fmt.Errorf("wait for %d bytes: %w", n, context.Cause(ctx))
}

// release gives back n bytes that acquire took and lets in the waiters that now fit.
func (b *InFlight) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic("webhook: released more bytes than were acquired")
	}
	for e := b.waiters.Front(); e != nil; {
		next := e.Next()
		if w := e.Value.(*waiter); b.total-b.used >= w.n {
			b.used += w.n
			b.waiters.Remove(e)
			if b.taken != nil {
				b.taken(w.n)
			}
			close(w.ready)
		}
		e = next
	}
}

// inUse is the bytes held now, for the log line of a request that could not get its turn.
func (b *InFlight) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
