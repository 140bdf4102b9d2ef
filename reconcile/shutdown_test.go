package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// heldBackend is the memory backend whose first Observe waits until released: a reconcile
// held in flight for as long as the test needs.
type heldBackend struct {
	*memory.Backend
	once    sync.Once
	entered chan string   // receives the VM of the first Observe, once it waits
	release chan struct{} // closed to let it go on
}

func (b *heldBackend) Observe(vm backend.Owner) (*backend.Server, error) {
	b.once.Do(func() {
		b.entered <- vm.Name
		<-b.release
	})
	return b.Backend.Observe(vm)
}

// TestControllerShutdownTakesNoWork: once RunWorkers' context ends (SIGTERM, a lost Lease),
// the reconcile in flight finishes, with its writes, and none of the VMs still queued is
// reconciled. The workqueue's ShutDown alone would not do: Get goes on handing out what is
// queued, and the whole backlog would be reconciled, with its writes, for up to the drain.
func TestControllerShutdownTakesNoWork(t *testing.T) {
	const vms = 20
	w := newWorld(t)
	for i := range vms {
		u := caseObject(t, "create-new")
		u.SetName(fmt.Sprintf("vm-%02d", i))
		if err := w.client.Tracker().Create(vmGVR, u, u.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	held := &heldBackend{Backend: w.servers, entered: make(chan string, 1), release: make(chan struct{})}
	c, r := newControllerOver(t, w, held, decision.UsagePolicy{})
	// The informers run on a context of their own, as in the process, where they outlive
	// the leadership that RunWorkers' context stands for.
	start(t, c)
	leading, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.RunWorkers(leading, 1, time.Minute) }()

	var first string
	select {
	case first = <-held.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconcile started")
	}
	if n := c.queue.Len(); n != vms-1 {
		t.Fatalf("%d keys queued behind the reconcile in flight, want %d", n, vms-1)
	}
	cancel()
	close(held.release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("RunWorkers: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunWorkers did not return")
	}

	// RunWorkers has returned: every reconcile there will be has been counted.
	r.mu.Lock()
	outcomes := slices.Clone(r.outcomes)
	r.mu.Unlock()
	if !slices.Equal(outcomes, []string{"success"}) {
		t.Errorf("%d reconciles %q, want the one in flight only, a success", len(outcomes), outcomes)
	}
	if phase := status(t, w, cache.NewObjectName("default", first), "phase"); phase != string(schema.PhaseCreating) {
		t.Errorf("the reconcile in flight (%s) left phase %q, want Creating: it finishes its writes", first, phase)
	}
	var others []string
	for _, wr := range w.writes() {
		if wr.name != first && !slices.Contains(others, wr.name) {
			others = append(others, wr.name)
		}
	}
	if len(others) > 0 {
		t.Errorf("VMs written after the context ended, besides the one in flight (%s): %q", first, others)
	}
}

// endsAfterGet is a context that is live when first asked and ended from then on: the
// leadership ends while the worker waits in Get.
type endsAfterGet struct {
	context.Context
	mu    sync.Mutex
	asked bool
}

func (e *endsAfterGet) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.asked {
		e.asked = true
		return nil
	}
	return context.Canceled
}

// TestProcessNextEndedInGet: a key that Get hands out after the leadership ended is let go
// unreconciled, and the worker stops; the queue holds nothing of it: the key is not in
// process (it is queued again when added) and has no lane noted.
func TestProcessNextEndedInGet(t *testing.T) {
	w := newWorld(t, "create-new")
	c, r := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	if urgent, _ := c.queue.Lens(); urgent != 1 {
		t.Fatalf("%d keys of new work queued, want the VM's", urgent)
	}

	if c.processNext(&endsAfterGet{Context: ctx}, ctx) {
		t.Error("the worker goes on after the leadership ended")
	}
	r.mu.Lock()
	outcomes := slices.Clone(r.outcomes)
	r.mu.Unlock()
	if len(outcomes) != 0 || len(w.writes()) != 0 {
		t.Errorf("reconciled after the leadership ended: outcomes %q, writes %+v", outcomes, w.writes())
	}
	if c.queue.TakeUrgent(testVM) {
		t.Error("the key's lane is still noted")
	}
	c.queue.Add(testVM)
	if n := c.queue.Len(); n != 1 {
		t.Errorf("%d keys queued after adding the key again, want 1: it is still in process", n)
	}
}

// hangingCreates is the memory backend with a Create that ignores its context and returns
// only once release is closed: a call no deadline ends.
type hangingCreates struct {
	*memory.Backend
	called  chan struct{}
	release chan struct{}
}

func (b hangingCreates) Create(ctx context.Context, vm backend.Owner, spec backend.Spec) (*backend.Server, error) {
	b.called <- struct{}{}
	<-b.release
	return b.Backend.Create(ctx, vm, spec)
}

// TestRunWorkersLeavesStuckWorkers: a reconcile whose call ignores its context holds its
// worker past the drain and past the cancel that ends it. RunWorkers returns all the same,
// with ErrWorkersStuck, so that the process exits (after a lost Lease, a replica that never
// campaigned again stayed up with its health check passing; after SIGTERM, it waited for
// SIGKILL with the Lease held).
func TestRunWorkersLeavesStuckWorkers(t *testing.T) {
	w := newWorld(t, "create-new")
	hanging := hangingCreates{Backend: w.servers, called: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(hanging.release)
	c, _ := newControllerOver(t, w, hanging, decision.UsagePolicy{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.RunWorkers(ctx, 1, time.Millisecond) }()
	<-hanging.called // the worker is in the call
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrWorkersStuck) {
			t.Errorf("RunWorkers: %v, want %v", err, ErrWorkersStuck)
		}
	case <-time.After(time.Minute):
		t.Fatal("RunWorkers did not return while a worker was stuck")
	}
}
