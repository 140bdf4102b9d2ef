package reconcile

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// countedDelays is the usage poller's queue, counting what is scheduled on it.
type countedDelays struct {
	workqueue.TypedDelayingInterface[cache.ObjectName]
	scheduled atomic.Int32
}

func (q *countedDelays) AddAfter(item cache.ObjectName, d time.Duration) {
	q.scheduled.Add(1)
	q.TypedDelayingInterface.AddAfter(item, d)
}

// startStandby starts c's informers as a replica that does not lead does (Start, no
// RunWorkers), and waits for their first list.
func startStandby(t *testing.T, c *Controller) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.HasSynced) {
		t.Fatal("caches did not sync")
	}
	return ctx
}

// createVM creates the VM of a case under name, as a user does.
func createVM(t *testing.T, ctx context.Context, w *world, name, from string, change func(u *unstructured.Unstructured)) {
	t.Helper()
	u := caseObject(t, from)
	u.SetName(name)
	if change != nil {
		change(u)
	}
	if _, err := w.client.Resource(vmGVR).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// updateVM changes the VM name on the API server, as a user or another writer does.
func updateVM(t *testing.T, ctx context.Context, w *world, name string, change func(u *unstructured.Unstructured)) {
	t.Helper()
	u := w.vm(t, "default", name)
	change(u)
	if _, err := w.client.Resource(vmGVR).Namespace("default").Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestStandbyQueuesNothing: a replica that does not lead queues nothing, whatever its
// informers see: VMs created and deleted by the hundred, a VM whose spec changed, a server
// that changed, a VM that became Active (the usage poller's schedule). Its queue was every
// key it ever saw, deleted VMs included, almost all of it new work, unbounded with churn; at
// takeover a VM a user created waited behind all of it. What the backend remembers of a VM
// deleted meanwhile is forgotten, as the leader's reconcile of the gone VM forgets it, and the
// ledger holds nothing.
func TestStandbyQueuesNothing(t *testing.T) {
	const churn = 100
	w := newWorld(t)
	for _, name := range []string{"settled", "changed", "evicted"} {
		u := caseObject(t, "active-steady")
		u.SetName(name)
		if err := w.client.Tracker().Create(vmGVR, u, u.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	u := caseObject(t, "active-steady")
	u.SetName("becomes-active")
	if err := unstructured.SetNestedField(u.Object, string(schema.PhaseCreating), "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Tracker().Create(vmGVR, u, u.GetNamespace()); err != nil {
		t.Fatal(err)
	}
	// on-its-way is Creating, its status at its generation: its server, asked for by the
	// leader before, starts while this replica stands by.
	u = caseObject(t, "active-steady")
	u.SetName("on-its-way")
	if err := unstructured.SetNestedField(u.Object, string(schema.PhaseCreating), "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Tracker().Create(vmGVR, u, u.GetNamespace()); err != nil {
		t.Fatal(err)
	}
	c, _ := newController(t, w, decision.UsagePolicy{Interval: time.Hour, Threshold: 0.1, MaxInterval: time.Hour})
	usage := &countedDelays{TypedDelayingInterface: c.usage.queue}
	c.usage.queue = usage
	ctx := startStandby(t, c)

	evicted := ownerOf(cachedView(t, w.vm(t, "default", "evicted"), w.fields))
	w.servers.SetGone(evicted, &backend.Gone{Name: "evicted-server", ID: "pod-uid-9", Node: "node-1"})
	// In batches: the fake API server's watch holds 100 events.
	for batch := 0; batch < churn; batch += 20 {
		for i := batch; i < batch+20; i++ {
			createVM(t, ctx, w, fmt.Sprintf("churn-%03d", i), "create-new", nil)
		}
		last := cache.NewObjectName("default", fmt.Sprintf("churn-%03d", batch+19))
		eventually(t, "the informer has the batch", func() bool { _, ok := c.view(last); return ok })
		for i := batch; i < batch+20; i++ {
			if err := w.client.Resource(vmGVR).Namespace("default").Delete(ctx, fmt.Sprintf("churn-%03d", i), metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "the informer has the batch gone", func() bool { _, ok := c.view(last); return !ok })
	}
	if err := w.client.Resource(vmGVR).Namespace("default").Delete(ctx, "evicted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	updateVM(t, ctx, w, "changed", func(u *unstructured.Unstructured) { u.SetGeneration(2) })
	updateVM(t, ctx, w, "becomes-active", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, string(schema.PhaseActive), "status", "phase")
	})
	settled := ownerOf(cachedView(t, w.vm(t, "default", "settled"), w.fields))
	w.servers.Set(settled, &backend.Server{Name: "settled-server", State: backend.StateFailed})
	onItsWay := ownerOf(cachedView(t, w.vm(t, "default", "on-its-way"), w.fields))
	w.servers.Set(onItsWay, &backend.Server{Name: "on-its-way-server", State: backend.StateReady})
	createVM(t, ctx, w, "created", "create-new", nil)
	// The informer hands over events in order: once the last is cached, the handler has had
	// every one before it.
	eventually(t, "the informer has every change", func() bool {
		_, ok := c.view(cache.NewObjectName("default", "created"))
		return ok
	})

	if n := c.queue.Len(); n != 0 {
		u, b := c.queue.Lens()
		t.Errorf("a standby queued %d keys (%d new work, %d backlog), want none", n, u, b)
	}
	if n := usage.scheduled.Load(); n != 0 {
		t.Errorf("a standby scheduled %d usage samples, want none", n)
	}
	if g := w.servers.LastGone(evicted); g != nil {
		t.Errorf("the backend still remembers %+v of a VM deleted while standby", g)
	}
	if n := c.ledger.records(); n != 0 {
		t.Errorf("a standby's ledger holds %d records, want none", n)
	}

	// It takes over: the cache is queued as a cold start's first list is, new work (created,
	// or changed, since last reconciled, or on its way to a server: Creating) ahead of the
	// settled VMs, each lane in the order of the keys; the server's change while it stood by
	// is not known, as at a cold start, but a VM on its way waits for its server's.
	c.lead()
	c.queueCached()
	if u, b := c.queue.Lens(); u != 3 || b != 2 {
		t.Errorf("at takeover: %d new work, %d backlog; want 3 and 2", u, b)
	}
	var got []string
	for c.queue.Len() > 0 {
		got = append(got, next(t, c))
	}
	if want := []string{"changed", "created", "on-its-way", "becomes-active", "settled"}; !slices.Equal(got, want) {
		t.Errorf("order at takeover %q, want %q", got, want)
	}
	// From now on the handlers queue what they see.
	createVM(t, ctx, w, "created-after", "create-new", nil)
	eventually(t, "the leader queues a VM created", func() bool { u, _ := c.queue.Lens(); return u == 1 })
}

// TestStandbyRunWorkers: a standby that takes over (RunWorkers) reconciles the VMs created
// while it stood by, which it did not queue then.
func TestStandbyRunWorkers(t *testing.T) {
	w := newWorld(t)
	c, _ := newController(t, w, decision.UsagePolicy{})
	ctx := startStandby(t, c)
	createVM(t, ctx, w, testVM.Name, "create-new", nil)
	cachedAt(t, c, w, testVM)
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("a standby queued %d keys, want none", n)
	}
	leading, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.RunWorkers(leading, 1, time.Minute) }()
	eventually(t, "the VM created while standby is reconciled", func() bool {
		return status(t, w, testVM, "phase") == string(schema.PhaseCreating)
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunWorkers: %v", err)
	}
}

// records counts what the ledger holds, of every VM.
func (l ledger) records() int {
	n := 0
	count := func(mu *sync.Mutex, size func() int) {
		mu.Lock()
		n += size()
		mu.Unlock()
	}
	count(&l.expect.mu, func() int { return len(l.expect.m) })
	count(&l.expect.replaced.mu, func() int { return len(l.expect.replaced.m) })
	count(&l.disks.mu, func() int { return len(l.disks.m) })
	count(&l.echoes.mu, func() int { return len(l.echoes.m) + len(l.echoes.last) + len(l.echoes.done) })
	count(&l.passes.mu, func() int { return len(l.passes.m) })
	count(&l.notKept.mu, func() int { return len(l.notKept.m) })
	return n
}

// TestStandbyForgetsServerGoneAfterVM: a standby forgets what the backend remembers of a
// deleted VM's server (backend.Departures) even when the server goes after the VM: the
// garbage collector deletes an evicted pod once its VM is gone, and the backend records the
// pod's going from that delete event, after the VM's delete made the standby forget the VM.
// It was recorded again then, and kept until the backend's bound dropped it: no reconcile of
// the VM, gone from the cache, forgets it, on this replica or after it takes over. A VM
// still cached keeps its record.
func TestStandbyForgetsServerGoneAfterVM(t *testing.T) {
	w := newWorld(t)
	for _, name := range []string{"deleted", "kept"} {
		u := caseObject(t, "active-steady")
		u.SetName(name)
		if err := w.client.Tracker().Create(vmGVR, u, u.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := newController(t, w, decision.UsagePolicy{})
	ctx := startStandby(t, c)
	owners := map[string]backend.Owner{}
	for _, name := range []string{"deleted", "kept"} {
		owners[name] = ownerOf(cachedView(t, w.vm(t, "default", name), w.fields))
		// Evicted: marked by the eviction API, its deletion to follow.
		w.servers.Set(owners[name], &backend.Server{Name: name + "-server", ID: name + "-pod", Node: "node-a", State: backend.StateReady,
			Disruption: &backend.Disruption{Reason: "EvictionByEvictionAPI"}})
	}
	if err := w.client.Resource(vmGVR).Namespace("default").Delete(ctx, "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the informer has the VM gone", func() bool { _, ok := c.view(cache.NewObjectName("default", "deleted")); return !ok })
	// Then the servers go: the deleted VM's by the garbage collector, the other by the drain.
	w.servers.Set(owners["deleted"], nil)
	w.servers.Set(owners["kept"], nil)

	if g := w.servers.LastGone(owners["deleted"]); g != nil {
		t.Errorf("the backend remembers %+v of a VM deleted while standby, its server gone after it", *g)
	}
	if g := w.servers.LastGone(owners["kept"]); g == nil {
		t.Error("the backend forgot the eviction of a VM still there")
	}
	if n := c.queue.Len(); n != 0 {
		t.Errorf("a standby queued %d keys, want none", n)
	}
}
