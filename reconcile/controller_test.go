package reconcile

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/priority"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// results records what the controller tells its Observer and UsageObserver.
type results struct {
	mu       sync.Mutex
	outcomes []string
	samples  []string
	gone     []string
}

func (r *results) Reconciled(result string, _ time.Duration) {
	r.mu.Lock()
	r.outcomes = append(r.outcomes, result)
	r.mu.Unlock()
}

func (r *results) UsageSampled(vm cache.ObjectName, _, _ float64) {
	r.mu.Lock()
	r.samples = append(r.samples, vm.String())
	r.mu.Unlock()
}

func (r *results) UsageGone(vm cache.ObjectName) {
	r.mu.Lock()
	r.gone = append(r.gone, vm.String())
	r.mu.Unlock()
}

func (r *results) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.outcomes) == 0 {
		return ""
	}
	return r.outcomes[len(r.outcomes)-1]
}

// newController builds a controller over w; its retries come after a millisecond.
func newController(t testing.TB, w *world, usage decision.UsagePolicy) (*Controller, *results) {
	t.Helper()
	return newControllerOver(t, w, w.servers, usage)
}

// newControllerOver is newController over servers b, a wrapper of w's that a test watches or
// makes fail.
func newControllerOver(t testing.TB, w *world, b backend.Backend, usage decision.UsagePolicy) (*Controller, *results) {
	t.Helper()
	r := &results{}
	c := New(Config{VMs: w.source(), Backend: b, Policy: serverPolicy, Usage: usage, Retry: quickRetry(),
		Report: w.report(r), Now: func() time.Time { return now }})
	return c, r
}

// processNextItem is one turn of a worker, as the tests take it: a key is taken while ctx
// lasts and reconciled under it.
func (c *Controller) processNextItem(ctx context.Context) bool { return c.processNext(ctx, ctx) }

// start starts c's informers as the leader's, and waits for their first list, queued as
// RunWorkers queues it; the test takes the work (processNextItem).
func start(t testing.TB, c *Controller) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c.lead()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.HasSynced) {
		t.Fatal("caches did not sync")
	}
	c.queueCached()
	return ctx
}

// runWorker starts c and one worker of it, which run until stop is called or the test ends;
// stop ends them and returns what RunWorkers did.
func runWorker(t *testing.T, c *Controller) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.RunWorkers(ctx, 1, time.Minute) }()
	stop = sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { _ = stop() })
	return stop
}

// eventually waits until cond holds. The informer delivers writes asynchronously; this is the
// barrier for that. The limit only stops a test that would otherwise hang.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// cachedAt waits until the controller's cache holds the VM as the API server does.
func cachedAt(t *testing.T, c *Controller, w *world, key cache.ObjectName) {
	t.Helper()
	eventually(t, "the cache catches up with the API", func() bool {
		vm, ok := c.view(key)
		cur := w.vm(t, key.Namespace, key.Name)
		return ok && cur != nil && vm.ResourceVersion() == cur.GetResourceVersion()
	})
}

func status(t *testing.T, w *world, key cache.ObjectName, path ...string) string {
	t.Helper()
	obj := w.vm(t, key.Namespace, key.Name)
	if obj == nil {
		return ""
	}
	s, _, _ := unstructured.NestedString(obj.Object, append([]string{"status"}, path...)...)
	return s
}

var testVM = cache.NewObjectName("default", "test-vm")

// TestControllerReconciles: a VM the informer lists is reconciled in one pass: finalizer,
// server and status written, then a second decision on the VM as the status write returned it
// finds nothing left (the memory backend shows the server at once, so nothing is expected
// of it either). What is queued after it finds nothing to do.
func TestControllerReconciles(t *testing.T) {
	w := newWorld(t, "create-new")
	c, r := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)

	if !c.processNextItem(ctx) {
		t.Fatal("queue shut down")
	}
	if got := r.last(); got != "success" {
		t.Errorf("first reconcile: %q, want success", got)
	}
	if phase := status(t, w, testVM, "phase"); phase != string(schema.PhaseCreating) {
		t.Errorf("phase %q, want Creating", phase)
	}
	if evs := w.events(); len(evs) != 1 {
		t.Errorf("events %q, want one", evs)
	}
	if c.ledger.expect.wait(testVM) != 0 {
		t.Error("a server the backend shows is still expected")
	}
	writes := w.writes()
	if len(writes) != 2 {
		t.Fatalf("writes %+v, want the finalizer and the status", writes)
	}

	// Whatever is queued now (the memory backend's notice of the server it created; the
	// echoes of the writes are dropped, those that came during the reconcile too) finds
	// nothing to do.
	cachedAt(t, c, w, testVM)
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
		if got := r.last(); got != "success" {
			t.Errorf("later reconcile: %q, want success", got)
		}
	}
	if len(w.writes()) != len(writes) {
		t.Errorf("later reconciles wrote %+v", w.writes()[len(writes):])
	}
	if got := c.PhaseCounts(); !reflect.DeepEqual(got, map[string]int{string(schema.PhaseCreating): 1}) {
		t.Errorf("PhaseCounts = %v", got)
	}
}

// TestControllerGone: a key whose VM is not in the cache ends quietly: no write, no event,
// no retry, and what the controller expected of it is forgotten.
func TestControllerGone(t *testing.T) {
	w := newWorld(t)
	c, r := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	gone := cache.NewObjectName("default", "gone")
	c.ledger.expect.deleted(gone, "old")
	c.queue.Add(gone)
	c.processNextItem(ctx)
	if got := r.last(); got != "success" {
		t.Errorf("result %q, want success", got)
	}
	if n := c.queue.NumRequeues(gone); n != 0 || c.queue.Len() != 0 {
		t.Errorf("requeued %d times, queue length %d", n, c.queue.Len())
	}
	if len(w.writes()) != 0 || len(w.events()) != 0 {
		t.Errorf("writes %+v, events %q", w.writes(), w.events())
	}
	if c.ledger.expect.wait(gone) != 0 {
		t.Error("the expectation of a VM that is gone is kept")
	}
}

// TestControllerRetries: a transient error and a conflict are retried, an error through the
// rate limiter, a conflict through the per-VM backoff alone (never the overall bucket); once
// the cause is gone, the next try succeeds and the failures are forgotten.
func TestControllerRetries(t *testing.T) {
	tests := map[string]struct {
		fail   func(w *world)
		heal   func(w *world)
		result string
		// requeues is the retries the kind of failure counts.
		requeues func(c *Controller) int
	}{
		"backend down": {func(w *world) { w.servers.FailCreate(errors.New("backend down")) }, func(w *world) { w.servers.FailCreate(nil) }, "error",
			func(c *Controller) int { return c.queue.NumRequeues(testVM) }},
		"conflict": {func(w *world) {
			w.failNext("status", apierrors.NewConflict(vmGVR.GroupResource(), "test-vm", errors.New("changed")))
		}, func(*world) {}, "conflict", func(c *Controller) int { return c.cfg.Retry.ConflictRateLimiter.NumRequeues(testVM) }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "create-new")
			c, r := newController(t, w, decision.UsagePolicy{})
			ctx := start(t, c)
			tc.fail(w)
			c.processNextItem(ctx)
			if got := r.last(); got != tc.result {
				t.Fatalf("result %q, want %q", got, tc.result)
			}
			if n := tc.requeues(c); n != 1 {
				t.Fatalf("requeues = %d, want 1", n)
			}
			tc.heal(w)
			for status(t, w, testVM, "phase") != string(schema.PhaseCreating) {
				cachedAt(t, c, w, testVM)
				c.processNextItem(ctx)
			}
			if n := tc.requeues(c); n != 0 {
				t.Errorf("requeues = %d after success, want 0", n)
			}
		})
	}
}

// closedBucket is an overall retry bucket that lets no retry through within a test, and
// counts the retries asked of it.
type closedBucket struct{ asked *atomic.Int32 }

func (b closedBucket) When(cache.ObjectName) time.Duration { b.asked.Add(1); return time.Hour }
func (closedBucket) Forget(cache.ObjectName)               {}
func (closedBucket) NumRequeues(cache.ObjectName) int      { return 0 }

// TestControllerConflictSkipsBucket: a VM whose write met a conflict is retried after its own
// backoff, without asking the overall retry bucket, which is closed; one whose reconcile
// failed asks it, and waits.
func TestControllerConflictSkipsBucket(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		result string
		asked  int32
	}{
		{"conflict", apierrors.NewConflict(vmGVR.GroupResource(), "test-vm", errors.New("changed")), "conflict", 0},
		{"error", errors.New("API server down"), "error", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "create-new")
			c, r := newController(t, w, decision.UsagePolicy{})
			bucket := closedBucket{asked: &atomic.Int32{}}
			c.queue = priority.New[cache.ObjectName]("", bucket)
			c.cfg.Retry.ConflictRateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Millisecond, time.Millisecond)
			ctx := start(t, c)
			w.failNext("status", tc.err)
			c.processNextItem(ctx)
			if got := r.last(); got != tc.result {
				t.Fatalf("result %q, want %s", got, tc.result)
			}
			if n := bucket.asked.Load(); n != tc.asked {
				t.Errorf("the overall bucket was asked %d times, want %d", n, tc.asked)
			}
			if tc.asked > 0 {
				return // its retry waits an hour
			}
			c.processNextItem(ctx) // returns once the retry is queued: within the VM's own backoff
			if got := r.last(); got != "success" && got != "requeue" {
				t.Errorf("the retry after the conflict: %q", got)
			}
		})
	}
}

// TestControllerRuns: RunWorkers reconciles until the context ends; the backend's changes
// bring the VM to Active, the usage poller reports its usage without a reconcile, and the
// workers return with the queue shut down.
func TestControllerRuns(t *testing.T) {
	w := newWorld(t, "create-new")
	c, r := newController(t, w, decision.UsagePolicy{Interval: time.Millisecond, Threshold: 0.1, MaxInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- c.RunWorkers(ctx, 2, time.Minute) }()

	eventually(t, "a server is created", func() bool { s, _ := w.servers.Observe(ownerOf(w.view(t, "create-new"))); return s != nil })
	owner := ownerOf(w.view(t, "create-new"))
	srv, _ := w.servers.Observe(owner)
	srv.State, srv.Detail = backend.StateReady, "Running"
	w.servers.SetUsage(owner, backend.Usage{CPU: resource.MustParse("250m"), Memory: resource.MustParse("64Mi")}, nil)
	w.servers.Set(owner, srv)
	eventually(t, "the VM is Active", func() bool { return status(t, w, testVM, "phase") == string(schema.PhaseActive) })
	eventually(t, "usage is reported", func() bool { return status(t, w, testVM, "server", "usage", "cpu") == "250m" })
	eventually(t, "the phase is counted", func() bool {
		return reflect.DeepEqual(c.PhaseCounts(), map[string]int{string(schema.PhaseActive): 1})
	})
	r.mu.Lock()
	sampled := slices.Contains(r.samples, testVM.String())
	r.mu.Unlock()
	if !sampled {
		t.Error("the usage observer saw no sample")
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunWorkers: %v", err)
	}
	// Keys may be left queued (the backlog is not reconciled once ctx has ended), but the
	// queue is shut down: nothing is added any more.
	if !c.queue.ShuttingDown() {
		t.Error("the queue is not shut down after RunWorkers returned")
	}
}

// TestControllerNotServed: while the resource is not served the informer is stopped, the
// controller is not ready and a key ends without a read; when it is back, the informer lists
// every VM again.
func TestControllerNotServed(t *testing.T) {
	w := newWorld(t, "create-new")
	var told []bool
	c, r := newController(t, w, decision.UsagePolicy{})
	c.cfg.CRD.OnServed = func(s bool) { told = append(told, s) }
	ctx := start(t, c)
	c.onServed(ctx, false)
	if c.HasSynced() || len(c.PhaseCounts()) != 0 {
		t.Error("ready without an informer")
	}
	if _, ok := c.view(testVM); ok {
		t.Error("a view without an informer")
	}
	c.processNextItem(ctx) // the key the first list enqueued
	if got := r.last(); got != "success" || len(w.writes()) != 0 {
		t.Errorf("result %q, writes %+v: want success without a write", got, w.writes())
	}
	c.onServed(ctx, true)
	if !cache.WaitForCacheSync(ctx.Done(), c.HasSynced) {
		t.Fatal("caches did not sync again")
	}
	c.processNextItem(ctx)
	if phase := status(t, w, testVM, "phase"); phase != string(schema.PhaseCreating) {
		t.Errorf("phase %q after the resource came back, want Creating", phase)
	}
	if !reflect.DeepEqual(told, []bool{false, true}) {
		t.Errorf("OnServed told %v", told)
	}
}

// laggingBackend is the memory backend behind a cache of servers that can fall behind: while
// hidden, Observe (the cache) shows no server and Get (a read past it) the real one.
type laggingBackend struct {
	*memory.Backend
	hidden atomic.Bool
	gets   atomic.Int32
	getErr atomic.Pointer[error]
}

func (b *laggingBackend) Observe(vm backend.Owner) (*backend.Server, error) {
	if b.hidden.Load() {
		return nil, nil
	}
	return b.Backend.Observe(vm)
}

func (b *laggingBackend) Get(_ context.Context, vm backend.Owner) (*backend.Server, error) {
	b.gets.Add(1)
	if err := b.getErr.Load(); err != nil {
		return nil, *err
	}
	return b.Backend.Observe(vm)
}

// toActive takes the new VM of the world's create-new case to Active: its server is created,
// then runs; then what that queued is worked off. It returns the VM's owner and its server.
func toActive(t *testing.T, ctx context.Context, c *Controller, w *world) (backend.Owner, *backend.Server) {
	t.Helper()
	c.processNextItem(ctx)
	owner := ownerOf(w.view(t, "create-new"))
	srv, _ := w.servers.Observe(owner)
	srv.State, srv.Detail = backend.StateReady, "Running"
	w.servers.Set(owner, srv)
	for status(t, w, testVM, "phase") != string(schema.PhaseActive) {
		cachedAt(t, c, w, testVM)
		c.processNextItem(ctx)
	}
	cachedAt(t, c, w, testVM)
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
	}
	return owner, srv
}

// TestControllerServerNotCachedYet: an Active VM whose server the cache of servers does not
// show yet (VMs restored before their servers, a watch of servers that restarted) is not
// reported missing: the controller reads the server past the cache, finds it, and waits for
// the cache without a write or an Event; when that read fails, the reconcile is retried
// without a write. A server that is really gone is recreated, with the ServerMissing warning,
// after the same one read.
func TestControllerServerNotCachedYet(t *testing.T) {
	w := newWorld(t, "create-new")
	lag := &laggingBackend{Backend: w.servers}
	c, r := newControllerOver(t, w, lag, decision.UsagePolicy{})
	ctx := start(t, c)

	owner, _ := toActive(t, ctx, c, w)
	if n := lag.gets.Load(); n != 0 {
		t.Fatalf("%d reads past the cache while it showed the server, want 0", n)
	}
	writes := len(w.writes())
	w.events() // drained: what follows is new

	// The read past the cache fails: the reconcile is retried, having written nothing.
	lag.hidden.Store(true)
	down := errors.New("API server down")
	lag.getErr.Store(&down)
	c.queue.Add(testVM)
	c.processNextItem(ctx)
	if got := r.last(); got != "error" {
		t.Errorf("reconcile with the read failing: %q, want error", got)
	}
	lag.getErr.Store(nil)

	c.processNextItem(ctx) // the retry
	if got := r.last(); got != "requeue" {
		t.Errorf("reconcile of a server not cached yet: %q, want requeue", got)
	}
	if n := lag.gets.Load(); n != 2 {
		t.Errorf("%d reads past the cache, want 2", n)
	}
	if got := w.writes()[writes:]; len(got) != 0 {
		t.Errorf("a server only not cached yet brought writes %+v", got)
	}
	if got := w.events(); len(got) != 0 {
		t.Errorf("a server only not cached yet brought events %q", got)
	}
	if phase := status(t, w, testVM, "phase"); phase != string(schema.PhaseActive) {
		t.Errorf("phase %q, want Active", phase)
	}

	// The cache catches up: nothing to do, and no read past it.
	lag.hidden.Store(false)
	c.queue.Add(testVM)
	c.processNextItem(ctx)
	if got := r.last(); got != "success" || lag.gets.Load() != 2 || len(w.writes()) != writes {
		t.Errorf("with the server cached: %q, %d reads past the cache, writes %+v", got, lag.gets.Load(), w.writes()[writes:])
	}

	// Really gone: the read past the cache finds nothing either.
	lag.hidden.Store(true)
	w.servers.Set(owner, nil)
	for c.queue.Len() > 0 { // the backend's notice of the change
		c.processNextItem(ctx)
	}
	if n := lag.gets.Load(); n != 3 {
		t.Errorf("%d reads past the cache, want 3", n)
	}
	if got := w.events(); len(got) != 2 || !strings.Contains(strings.Join(got, "\n"), decision.ReasonServerMissing) {
		t.Errorf("events %q, want ServerMissing and CreatingServer", got)
	}
	if phase := status(t, w, testVM, "phase"); phase != string(schema.PhaseCreating) {
		t.Errorf("phase %q, want Creating", phase)
	}
}

// heldController is the VMs' informer, its initial list not yet handed to the handler.
type heldController struct{ cache.Controller }

func (heldController) HasSynced() bool { return false }

// TestControllerSyncedAfterHandlers: the controller is synced only once its handler of the
// VMs has queued the initial list, not when the informer has merely stored it; workers started
// earlier would reconcile a VM that its server's add then queues again. The informer's own
// sync is the handler's: the first time it says synced, every VM of the list is queued.
func TestControllerSyncedAfterHandlers(t *testing.T) {
	const n = 2000
	client, _ := coldSyncServer(t, n)
	cold, cancel := startColdSync(t, client)
	defer cancel()
	if !cache.WaitForCacheSync(t.Context().Done(), cold.vms.Load().ctrl.HasSynced) {
		t.Fatal("the VM informer did not sync")
	}
	if got := cold.queue.Len(); got != n {
		t.Errorf("%d VMs queued when the informer first said synced, want all %d", got, n)
	}

	w := newWorld(t, "active-steady")
	c, _ := newController(t, w, decision.UsagePolicy{})
	start(t, c)
	vms := c.vms.Load()
	held := *vms
	held.ctrl = heldController{vms.ctrl}
	c.vms.Store(&held)
	if c.HasSynced() {
		t.Error("controller synced while its handler of the VMs has not the list")
	}
	c.vms.Store(vms)
	if !c.HasSynced() {
		t.Error("not synced once the handler has the list")
	}
}
