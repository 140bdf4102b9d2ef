package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/priority"
)

// roundsBackend is the memory backend counting Observe, which each decision round calls once.
type roundsBackend struct {
	*memory.Backend
	rounds atomic.Int32
}

func (b *roundsBackend) Observe(vm backend.Owner) (*backend.Server, error) {
	b.rounds.Add(1)
	return b.Backend.Observe(vm)
}

// logRecords keeps every record logged, by level and message.
type logRecords struct {
	mu      sync.Mutex
	records []string
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecords) WithGroup(string) slog.Handler            { return h }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r.Level.String()+" "+r.Message)
	h.mu.Unlock()
	return nil
}

// count is how many records of level were logged; with msg, of that message only.
func (h *logRecords) count(level slog.Level, msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r == level.String()+" "+msg || (msg == "" && len(r) > len(level.String()) && r[:len(level.String())+1] == level.String()+" ") {
			n++
		}
	}
	return n
}

// fencedByTransport is a write's error as client-go returns it when the fence's transport
// refused the request: a *url.Error around it.
func fencedByTransport() error {
	return &url.Error{Op: "Patch", URL: "https://api/apis/cloudnative.czs/v1alpha1/namespaces/default/virtualmachines/test-vm/status",
		Err: fmt.Errorf("PATCH /status: %w", ErrFenced)}
}

// TestControllerFencedWrite: a write that the fence refused (this replica's Lease is not
// fresh: it may have been paused while another leads) ends the reconcile at once: no further
// decision round decides on what it saw before, and the VM comes back after fencedWait, not
// through the error backoff or the overall retry bucket, without an error logged.
func TestControllerFencedWrite(t *testing.T) {
	w := newWorld(t, "create-new")
	rb := &roundsBackend{Backend: w.servers}
	c, r := newControllerOver(t, w, rb, decision.UsagePolicy{})
	logs := &logRecords{}
	c.log = slog.New(logs)
	bucket := closedBucket{asked: &atomic.Int32{}}
	c.queue = priority.New[cache.ObjectName]("", bucket)
	c.cfg.Retry.ConflictRateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Hour, time.Hour)
	ctx := start(t, c)

	w.failNext("status", fencedByTransport())
	c.processNextItem(ctx)
	if got := r.last(); got != "fenced" {
		t.Fatalf("result %q, want fenced", got)
	}
	if n := rb.rounds.Load(); n != 1 {
		t.Errorf("%d decision rounds, want 1: none after the fenced write", n)
	}
	writes := w.writes()
	if len(writes) == 0 || writes[len(writes)-1].subresource != "status" {
		t.Fatalf("writes %v: want the refused status write last", writes)
	}
	if n := bucket.asked.Load(); n != 0 {
		t.Errorf("the overall retry bucket was asked %d times, want 0", n)
	}
	if n := c.queue.NumRequeues(testVM) + c.cfg.Retry.ConflictRateLimiter.NumRequeues(testVM); n != 0 {
		t.Errorf("%d backoff requeues, want 0", n)
	}
	if n := logs.count(slog.LevelError, "") + logs.count(slog.LevelWarn, ""); n != 0 {
		t.Errorf("%d errors and warnings logged, want none: %q", n, logs.records)
	}
}

// TestControllerFenceBeforeRound: a fence that closes while a reconcile is under way stops it
// before its next decision round, which would decide on the VM as this replica's own write
// returned it, however stale that is by then; the writes of the round before stand.
func TestControllerFenceBeforeRound(t *testing.T) {
	w := newWorld(t, "create-new")
	rb := &roundsBackend{Backend: w.servers}
	c, r := newControllerOver(t, w, rb, decision.UsagePolicy{})
	var asked atomic.Int32
	c.cfg.Fence = func() error {
		if asked.Add(1) > 1 {
			return fmt.Errorf("%w: renewal too old", ErrFenced)
		}
		return nil
	}
	ctx := start(t, c)

	c.processNextItem(ctx)
	if got := r.last(); got != "fenced" {
		t.Fatalf("result %q, want fenced", got)
	}
	if n := rb.rounds.Load(); n != 1 {
		t.Errorf("%d decision rounds, want 1: the second is fenced", n)
	}
	if len(w.writes()) == 0 {
		t.Error("the first round wrote nothing")
	}
	before := len(w.writes())
	// Closed from the start: not even a first round.
	c.queue.Add(testVM)
	c.processNextItem(ctx)
	if n := rb.rounds.Load(); n != 1 {
		t.Errorf("%d decision rounds, want still 1: a fenced reconcile decides nothing", n)
	}
	if n := len(w.writes()); n != before {
		t.Errorf("%d writes after the fence closed, want none", n-before)
	}
}

// TestControllerFencedQuietly: while the fence is closed, every VM reconciled is fenced, and
// the log says so once, not once per VM; once the fence opens again (the Lease renewed), it
// says that once, and the VMs are reconciled.
func TestControllerFencedQuietly(t *testing.T) {
	const vms = 20
	w := newWorld(t)
	for i := range vms {
		u := caseObject(t, "create-new")
		u.SetName(fmt.Sprintf("vm-%02d", i))
		if err := w.client.Tracker().Create(vmGVR, u, u.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	c, r := newController(t, w, decision.UsagePolicy{})
	logs := &logRecords{}
	c.log = slog.New(logs)
	var closed atomic.Bool
	closed.Store(true)
	c.cfg.Fence = func() error {
		if closed.Load() {
			return fmt.Errorf("%w: renewal too old", ErrFenced)
		}
		return nil
	}
	ctx := start(t, c)
	for range vms {
		c.processNextItem(ctx)
	}
	r.mu.Lock()
	fenced := 0
	for _, o := range r.outcomes {
		if o == "fenced" {
			fenced++
		}
	}
	r.mu.Unlock()
	if fenced != vms {
		t.Errorf("%d of %d reconciles fenced", fenced, vms)
	}
	if n := len(w.writes()); n != 0 {
		t.Errorf("%d writes while fenced, want none", n)
	}
	if n := logs.count(slog.LevelInfo, "Writes fenced: the leader Lease was not renewed in time; holding reconciles until it is"); n != 1 {
		t.Errorf("the fence logged %d times, want once: %q", n, logs.records)
	}
	if n := logs.count(slog.LevelError, "") + logs.count(slog.LevelWarn, ""); n != 0 {
		t.Errorf("%d errors and warnings logged, want none", n)
	}

	// Nothing but the fence's requeue brings them back (nothing was written), after
	// fencedWait.
	closed.Store(false)
	for range vms {
		c.processNextItem(ctx)
	}
	if n := logs.count(slog.LevelInfo, "Writes no longer fenced: the leader Lease was renewed"); n != 1 {
		t.Errorf("the fence's opening logged %d times, want once: %q", n, logs.records)
	}
	if n := len(w.writes()); n == 0 {
		t.Error("nothing written once the fence opened")
	}
	if errors.Is(c.checkFence(), ErrFenced) {
		t.Error("checkFence fenced with the fence open")
	}
}

// TestControllerFencedPassesUncounted: a fenced reconcile decides nothing, so it is no pass
// towards Active (vmcontroller_reconcile_passes_to_active): a VM fenced five times and then
// reconciled counts as a VM reconciled once.
func TestControllerFencedPassesUncounted(t *testing.T) {
	counts := func(fenced int) (pending int, reported []int) {
		w := newWorld(t, "create-new")
		c, _ := newController(t, w, decision.UsagePolicy{})
		pr := &passRecorder{}
		c.cfg.Report.Observer = pr
		var n atomic.Int32
		c.cfg.Fence = func() error {
			if int(n.Add(1)) <= fenced {
				return fmt.Errorf("%w: renewal too old", ErrFenced)
			}
			return nil
		}
		ctx := start(t, c)
		for range fenced + 1 {
			if c.queue.Len() == 0 {
				c.queue.Add(testVM)
			}
			c.processNextItem(ctx)
		}
		c.ledger.passes.mu.Lock()
		defer c.ledger.passes.mu.Unlock()
		return c.ledger.passes.m[testVM], pr.passes
	}
	wantPending, wantReported := counts(0)
	if wantPending+len(wantReported) == 0 {
		t.Fatal("a reconcile of a new VM counted no pass")
	}
	pending, reported := counts(5)
	if pending != wantPending || fmt.Sprint(reported) != fmt.Sprint(wantReported) {
		t.Errorf("fenced 5 times, then reconciled: %d passes pending, %v reported; want %d, %v as without the fence",
			pending, reported, wantPending, wantReported)
	}
}
