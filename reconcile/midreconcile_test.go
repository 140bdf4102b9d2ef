package reconcile

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
	"weak"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The tests of this file are about the informer's updates of a VM that come while a reconcile
// of it runs: the echoes of its own writes, which bring nothing, and a user's edit, which must
// be reconciled.

// ownQuiet is the memory backend without the notice of its own creates, as the pods backend
// drops the informer's add of a pod exactly as its Create returned it: what queues a VM again
// after its reconcile is then the VM's own updates alone.
type ownQuiet struct {
	*memory.Backend
	mu       sync.Mutex
	creating map[types.NamespacedName]bool
}

func newOwnQuiet(b *memory.Backend) *ownQuiet {
	return &ownQuiet{Backend: b, creating: map[types.NamespacedName]bool{}}
}

func (b *ownQuiet) Start(ctx context.Context, notify func(types.NamespacedName)) (func() bool, error) {
	return b.Backend.Start(ctx, func(vm types.NamespacedName) {
		b.mu.Lock()
		quiet := b.creating[vm]
		b.mu.Unlock()
		if !quiet {
			notify(vm)
		}
	})
}

func (b *ownQuiet) Create(ctx context.Context, vm backend.Owner, s backend.Spec) (*backend.Server, error) {
	k := types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}
	b.mu.Lock()
	b.creating[k] = true
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.creating, k)
		b.mu.Unlock()
	}()
	return b.Backend.Create(ctx, vm, s)
}

// marker is a VM of the world that nothing reconciles after its first list, whose labels a test
// changes as a barrier on the VM informer (past).
type marker struct {
	c   *Controller
	w   *world
	key cache.ObjectName
	rv  int
}

// addMarker adds the marker VM to w, settled (an inactive VM with no server), before c starts.
func addMarker(t testing.TB, w *world, c *Controller) *marker {
	t.Helper()
	u := namedVM(t, "inactive-steady", "marker")
	if err := w.client.Tracker().Add(u); err != nil {
		t.Fatal(err)
	}
	rv, _ := strconv.Atoi(u.GetResourceVersion())
	return &marker{c: c, w: w, key: cache.NewObjectName(u.GetNamespace(), u.GetName()), rv: rv}
}

// past waits until the VM informer has handed every event made before it to its handler. It
// changes the marker's labels, which queue nothing, at a version noted beforehand as the echo of
// a write, and waits until the handler has taken it (echoes.seen forgets it): the informer
// hands its events over in the order they came, so those made before have been handed over
// too. Why not wait for the cache: the informer stores a batch of events before it hands the
// first of them to the handler.
func (m *marker) past(t testing.TB) {
	t.Helper()
	obj, err := m.w.client.Tracker().Get(vmGVR, m.key.Namespace, m.key.Name)
	if err != nil {
		t.Fatal(err)
	}
	u := obj.(*unstructured.Unstructured).DeepCopy()
	m.rv++
	rv := strconv.Itoa(m.rv)
	u.SetLabels(map[string]string{"barrier": rv})
	u.SetResourceVersion(rv)
	m.c.ledger.echoes.expect(m.key, []string{rv}, nil, nil)
	if err := m.w.client.Tracker().Update(vmGVR, u, m.key.Namespace); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); !m.taken(); time.Sleep(50 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatal("never: the informer hands the marker's change over")
		}
	}
}

// taken reports whether the handler has taken the marker's last change.
func (m *marker) taken() bool {
	e := m.c.ledger.echoes
	e.mu.Lock()
	defer e.mu.Unlock()
	_, waiting := e.m[m.key]
	return !waiting
}

// namedVM is the VM of the case as the API server would hold it, under name (and a UID of its
// own).
func namedVM(t testing.TB, cas, name string) *unstructured.Unstructured {
	t.Helper()
	u := caseObject(t, cas)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	return u
}

// promptEchoes is a writer after each of whose writes the VM informer has handed the write's
// echo to its handler (marker.past), as an informer that delivers at once would: the echo
// comes while the reconcile that wrote goes on.
type promptEchoes struct {
	vmWriter
	t      testing.TB
	marker *marker
}

func (p promptEchoes) patch(ctx context.Context, namespace, name string, patch []byte, subresources ...string) (written, error) {
	out, err := p.vmWriter.patch(ctx, namespace, name, patch, subresources...)
	if err == nil {
		p.marker.past(p.t)
	}
	return out, err
}

// quietWorld is a world whose VMs' own creates of servers queue nothing (ownQuiet), with a
// marker, and a controller of it started, the first list reconciled: a test then creates its
// VMs, as a user does.
func quietWorld(t *testing.T) (*world, *Controller, *results, *marker, context.Context) {
	t.Helper()
	w := newWorld(t)
	c, r := newControllerOver(t, w, newOwnQuiet(w.servers), decision.UsagePolicy{})
	m := addMarker(t, w, c)
	ctx := start(t, c)
	settle(t, ctx, c, m)
	r.mu.Lock()
	r.outcomes = nil
	r.mu.Unlock()
	return w, c, r, m, ctx
}

// settle reconciles what is queued until nothing is, every update the informer had to hand over
// handed over (past).
func settle(t testing.TB, ctx context.Context, c *Controller, m *marker) {
	t.Helper()
	for {
		for c.queue.Len() > 0 {
			c.processNextItem(ctx)
		}
		m.past(t)
		if c.queue.Len() == 0 {
			return
		}
	}
}

// userCreates creates the VM of the case under name, as a user does, and waits until the
// informer has queued it.
func userCreates(t testing.TB, w *world, m *marker, cas, name string) cache.ObjectName {
	t.Helper()
	u := namedVM(t, cas, name)
	if err := w.client.Tracker().Create(vmGVR, u, u.GetNamespace()); err != nil {
		t.Fatal(err)
	}
	m.past(t)
	return cache.NewObjectName(u.GetNamespace(), u.GetName())
}

// TestCreateReconcilesPerVM counts the reconciles of VMs created one after another, from their
// creation to Active: one that creates the server and says Creating (deciding again on its
// status write, which leaves nothing to do), one when the server is ready. The echoes of their
// writes bring nothing; each that came while its reconcile ran queued the VM once more. The
// count is logged (go test -run TestCreateReconcilesPerVM -v), for echoes that come at once
// (promptEchoes) and for echoes as the dynamic fake's watch brings them.
func TestCreateReconcilesPerVM(t *testing.T) {
	const vms = 20
	for name, prompt := range map[string]bool{"prompt echoes": true, "echoes as they come": false} {
		t.Run(name, func(t *testing.T) {
			w, c, r, m, ctx := quietWorld(t)
			if prompt {
				c.applier.writer = promptEchoes{vmWriter: c.applier.writer, t: t, marker: m}
			}
			for i := range vms {
				key := userCreates(t, w, m, "create-new", fmt.Sprintf("vm-%02d", i))
				settle(t, ctx, c, m)
				owner := ownerOf(cachedView(t, w.vm(t, key.Namespace, key.Name), w.fields))
				srv, _ := w.servers.Observe(owner)
				if srv == nil {
					t.Fatalf("%s: no server", key)
				}
				srv.State, srv.Detail = backend.StateReady, "Running"
				w.servers.Set(owner, srv)
				settle(t, ctx, c, m)
				if got := status(t, w, key, "phase"); got != string(schema.PhaseActive) {
					t.Fatalf("%s: phase %q, want Active", key, got)
				}
			}
			r.mu.Lock()
			n := len(r.outcomes)
			r.mu.Unlock()
			t.Logf("%d VMs created, %d reconciles: %.2f per VM", vms, n, float64(n)/vms)
			if n != 2*vms {
				t.Errorf("%d reconciles of %d VMs, want 2 per VM: an echo that came while its reconcile ran queued the VM again", n, vms)
			}
		})
	}
}

// TestEchoDuringReconcile: the informer hands over the echo of each write of a reconcile while
// the reconcile goes on (promptEchoes): the finalizer write's while the server is created, the
// status write's while the next round decides. Neither queues the VM again: its reconcile has
// decided on both. Queued before the reconcile noted them, each made the VM one more reconcile,
// with nothing to do.
func TestEchoDuringReconcile(t *testing.T) {
	tests := map[string]struct {
		cas    string
		writes int
	}{
		"created: finalizer and status": {cas: "create-new", writes: 2},
		"its server ready: status":      {cas: "ready", writes: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w, c, r, m, ctx := quietWorld(t)
			c.applier.writer = promptEchoes{vmWriter: c.applier.writer, t: t, marker: m}
			key := userCreates(t, w, m, tc.cas, testVM.Name)
			if _, srv := decidecase.Read(t, caseFile(tc.cas)); srv != nil {
				w.servers.Set(ownerOf(cachedView(t, w.vm(t, key.Namespace, key.Name), w.fields)), srv)
			}
			c.processNextItem(ctx)
			m.past(t)
			if got := len(w.writes()); got != tc.writes {
				t.Fatalf("%d writes, want %d", got, tc.writes)
			}
			if urgent, backlog := c.queue.Lens(); urgent+backlog != 0 {
				t.Errorf("after the reconcile, %d queued as new work and %d in the backlog; want nothing: its echoes bring nothing", urgent, backlog)
			}
			settle(t, ctx, c, m)
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.outcomes) != 1 {
				t.Errorf("%s reconciled %d times (%q), want once", key, len(r.outcomes), r.outcomes)
			}
		})
	}
}

// editVM changes the world's VM as a user or another writer does, at a version of its own.
func editVM(t *testing.T, w *world, edit func(u *unstructured.Unstructured)) {
	t.Helper()
	u := w.vm(t, testVM.Namespace, testVM.Name)
	edit(u)
	n, _ := strconv.Atoi(u.GetResourceVersion())
	u.SetResourceVersion(strconv.Itoa(n + 1))
	if err := w.client.Tracker().Update(vmGVR, u, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
}

// TestEditDuringReconcile: while a reconcile of a new VM goes on after its status write, the
// informer hands over that write's echo and the finalizer write's, then someone's change of
// the VM. The echoes bring nothing, the change does: the VM is queued again (as new work for
// what a user changes, in the backlog for status someone else wrote), and its next reconcile
// decides on the change. An echo never hides a change that came after it.
func TestEditDuringReconcile(t *testing.T) {
	tests := map[string]struct {
		edit   func(u *unstructured.Unstructured)
		urgent bool
		// done reports whether the VM's second reconcile decided on the edit.
		done func(t *testing.T, w *world) bool
	}{
		"spec": {
			edit: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "inactive", "spec", "action")
				u.SetGeneration(u.GetGeneration() + 1)
			},
			urgent: true,
			done: func(t *testing.T, w *world) bool {
				srv, _ := w.servers.Observe(ownerOf(cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields)))
				gen, observed, _ := generations(t, w)
				return (srv == nil || srv.Deleting) && observed == gen
			},
		},
		"a restart asked for": {
			edit: func(u *unstructured.Unstructured) {
				u.SetAnnotations(map[string]string{schema.AnnotationRestartedAt: "2026-06-01T12:00:00Z"})
			},
			urgent: true,
			done: func(t *testing.T, w *world) bool {
				return status(t, w, testVM, "restartedAt") == "2026-06-01T12:00:00Z"
			},
		},
		"status someone else wrote": {
			edit: func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "written by someone else", "status", "message")
			},
			done: func(t *testing.T, w *world) bool {
				return status(t, w, testVM, "message") != "written by someone else"
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w, c, _, m, ctx := quietWorld(t)
			c.applier.writer = &afterStatus{vmWriter: c.applier.writer, hook: func() {
				m.past(t) // the finalizer write's echo and the status write's are handed over
				editVM(t, w, tc.edit)
				m.past(t) // and so is the edit
			}}
			userCreates(t, w, m, "create-new", testVM.Name)
			c.processNextItem(ctx)
			m.past(t)
			urgent, backlog := c.queue.Lens()
			if tc.urgent && (urgent != 1 || backlog != 0) || !tc.urgent && (urgent != 0 || backlog != 1) {
				t.Fatalf("after the reconcile, %d queued as new work and %d in the backlog; want the VM queued again, as new work: %t",
					urgent, backlog, tc.urgent)
			}
			settle(t, ctx, c, m)
			if !tc.done(t, w) {
				t.Error("the edit made while the VM was reconciled is not carried out")
			}
		})
	}
}

// TestReconcilingHolds: an update of a VM whose reconcile is under way is held until it ends,
// then handed over with the others, in the order they came, each with its own lane, those that
// come meanwhile too; an update of another VM is not held, nor one of the VM once its
// reconcile has ended.
func TestReconcilingHolds(t *testing.T) {
	a, b := cache.NewObjectName("ns", "a"), cache.NewObjectName("ns", "b")
	var r reconciling
	if r.underway(a) {
		t.Error("a VM is under way before its reconcile begins")
	}
	r.begin(a)
	if !r.underway(a) || r.underway(b) {
		t.Errorf("under way: a %t, b %t; want a alone", r.underway(a), r.underway(b))
	}
	if r.hold(b, held{rv: "1", lane: laneUrgent}) {
		t.Error("an update of a VM not being reconciled is held")
	}
	for _, u := range []held{{rv: "2", lane: laneUrgent}, {rv: "3", lane: laneNone}} {
		if !r.hold(a, u) {
			t.Fatalf("update %s of the VM being reconciled is not held", u.rv)
		}
	}
	var got []string
	r.end(a, func(key cache.ObjectName, u held) {
		got = append(got, fmt.Sprintf("%s@%s:%d", key.Name, u.rv, u.lane))
		if u.rv == "2" && !r.hold(a, held{rv: "4", lane: laneBacklog}) {
			t.Error("an update that comes while the held ones are handed over is not held")
		}
	})
	want := []string{
		fmt.Sprintf("a@2:%d", laneUrgent),
		fmt.Sprintf("a@3:%d", laneNone),
		fmt.Sprintf("a@4:%d", laneBacklog),
	}
	if !slices.Equal(got, want) {
		t.Errorf("handed over %q, want %q", got, want)
	}
	if r.hold(a, held{rv: "5"}) || r.underway(a) {
		t.Error("an update of a VM whose reconcile ended is held")
	}
	if len(r.m) != 0 {
		t.Errorf("left %v", r.m)
	}
}

// TestHeldUpdatesKeepNoObjects: the updates of a VM held while it is reconciled keep neither
// version of the VM. Another writer's many updates during one reconcile leave at most maxHeld
// records, each a version and a lane, and every version the cache has replaced can be collected; the VM is
// queued once at the end, in the lane they asked for. Held whole, each update kept both of its
// objects until the reconcile ended (up to --reconcile-timeout): memory grew with the rate of
// the updates times the length of the reconcile.
func TestHeldUpdatesKeepNoObjects(t *testing.T) {
	const updates = 1000
	w := newWorld(t)
	c, _ := newControllerOver(t, w, w.servers, decision.UsagePolicy{})
	start(t, c)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c.reconciling.begin(testVM)
	versions := holdVersions(t, c, w, updates)
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := 0
	for _, v := range versions {
		if v.Value() != nil {
			kept++
		}
	}
	if kept > 0 {
		t.Errorf("%d of the %d versions of the VM handed over during its reconcile are kept, want none: held updates keep only their version and lane", kept, len(versions))
	}
	c.reconciling.mu.Lock()
	n := len(c.reconciling.m[testVM])
	c.reconciling.mu.Unlock()
	if n == 0 || n > maxHeld {
		t.Errorf("%d records held for %d updates, want 1 to %d (maxHeld)", n, updates, maxHeld)
	}
	t.Logf("about %d bytes of heap per held update", (int64(after.HeapAlloc)-int64(before.HeapAlloc))/updates)

	c.reconciling.end(testVM, c.queueUpdate)
	if urgent, backlog := c.queue.Lens(); urgent != 0 || backlog != 1 {
		t.Errorf("after the reconcile, %d queued as new work and %d in the backlog; want the VM once in the backlog (status someone else wrote)", urgent, backlog)
	}
	if len(c.reconciling.m) != 0 {
		t.Errorf("left %v held", c.reconciling.m)
	}
}

// holdVersions hands c's VM informer handler the updates of the VM that another writer's
// status messages make, each at a version of its own, and returns weak pointers to every
// version: the caller finds out which of them something still keeps.
func holdVersions(t *testing.T, c *Controller, w *world, updates int) []weak.Pointer[vmcache.Object] {
	t.Helper()
	u := namedVM(t, "ready", testVM.Name)
	versions := make([]weak.Pointer[vmcache.Object], 0, updates+1)
	version := func(i int) *vmcache.Object {
		v := u.DeepCopy()
		v.SetResourceVersion(strconv.Itoa(1000 + i))
		if err := unstructured.SetNestedField(v.Object, fmt.Sprintf("written by someone else, %d", i), "status", "message"); err != nil {
			t.Fatal(err)
		}
		o, err := vmcache.Compact(v, w.fields)
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, weak.Make(o))
		return o
	}
	old := version(0)
	for i := 1; i <= updates; i++ {
		cur := version(i)
		c.onVMUpdate(old, cur)
		old = cur
	}
	return versions
}

// panicsOnce is panickyBackend with a hook run in the reconcile that panics, before the panic:
// it makes the updates that are held meanwhile.
type panicsOnce struct {
	*panickyBackend
	once sync.Once
	hook func()
}

func (b *panicsOnce) Observe(vm backend.Owner) (*backend.Server, error) {
	if vm.Name == b.name && b.armed.Load() {
		b.once.Do(b.hook)
	}
	return b.panickyBackend.Observe(vm)
}

// TestPanicWithUpdatesHeld: a reconcile that panics while updates of its VM are held (a
// user's spec edit, a change of labels) ends as any other does: nothing is held after it, the
// edit is queued as new work, not left to the panic's retry (whose backoff here never comes
// due), and the worker goes on to the next reconcile, which carries the edit out.
func TestPanicWithUpdatesHeld(t *testing.T) {
	w := newWorld(t)
	buggy := &panicsOnce{panickyBackend: &panickyBackend{Backend: w.servers, name: testVM.Name}}
	r := &results{}
	never := workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Hour, time.Hour)
	c := New(Config{VMs: w.source(), Backend: buggy, Policy: serverPolicy, Retry: Retry{RateLimiter: never},
		Report: w.report(r), Now: func() time.Time { return now }})
	m := addMarker(t, w, c)
	ctx := start(t, c)
	settle(t, ctx, c, m)
	key := userCreates(t, w, m, "create-new", testVM.Name)
	buggy.hook = func() {
		editVM(t, w, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "inactive", "spec", "action")
			u.SetGeneration(u.GetGeneration() + 1)
		})
		editVM(t, w, func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"team": "a"}) })
		m.past(t)
		c.reconciling.mu.Lock()
		n := len(c.reconciling.m[key])
		c.reconciling.mu.Unlock()
		if n != 2 {
			t.Errorf("%d updates held while the VM is reconciled, want 2", n)
		}
	}
	buggy.armed.Store(true)
	if !c.processNextItem(ctx) {
		t.Fatal("the worker stopped at the panic")
	}
	if got := r.last(); got != ResultPanic {
		t.Fatalf("the reconcile ended %q, want %q", got, ResultPanic)
	}
	c.reconciling.mu.Lock()
	left := len(c.reconciling.m)
	c.reconciling.mu.Unlock()
	if left != 0 {
		t.Errorf("after the panic, updates of %d VMs still held, want none", left)
	}
	if urgent, backlog := c.queue.Lens(); urgent != 1 || backlog != 0 {
		t.Fatalf("after the panic, %d queued as new work and %d in the backlog; want the edit queued as new work", urgent, backlog)
	}

	buggy.armed.Store(false)
	if !c.processNextItem(ctx) {
		t.Fatal("the worker stopped after the panic")
	}
	if got := r.last(); got != ResultSuccess {
		t.Fatalf("the reconcile after the panic ended %q, want %q", got, ResultSuccess)
	}
	if srv, _ := w.servers.Observe(ownerOf(cachedView(t, w.vm(t, key.Namespace, key.Name), w.fields))); srv != nil {
		t.Errorf("a server %s for a VM made inactive before its first reconcile ended", srv.Name)
	}
	if got := status(t, w, key, "phase"); got != string(schema.PhaseInactive) {
		t.Errorf("phase %q, want %s: the edit held during the reconcile that panicked is not carried out", got, schema.PhaseInactive)
	}
}

// TestHeldFoldKeepsStrongestLane: past maxHeld records, the ones held fold into one that
// asks for the strongest lane among them and names no version, and the updates after the fold
// are held one by one, in order.
func TestHeldFoldKeepsStrongestLane(t *testing.T) {
	var r reconciling
	key := cache.ObjectName{Namespace: "default", Name: "vm"}
	r.begin(key)
	r.hold(key, held{rv: "edit", lane: laneUrgent})
	const n = 3 * maxHeld
	for i := range n {
		r.hold(key, held{rv: strconv.Itoa(i), lane: laneBacklog})
	}
	r.mu.Lock()
	kept := len(r.m[key])
	r.mu.Unlock()
	if kept > maxHeld {
		t.Fatalf("%d records held, want at most %d", kept, maxHeld)
	}
	var got []held
	r.end(key, func(_ cache.ObjectName, h held) { got = append(got, h) })
	if len(got) != kept || got[0] != (held{lane: laneUrgent}) {
		t.Fatalf("handed %d records, the first %+v; want %d, the first a fold in the urgent lane", len(got), got[0], kept)
	}
	for i, h := range got[1:] {
		if want := strconv.Itoa(n - len(got) + 1 + i); h.rv != want || h.lane != laneBacklog {
			t.Errorf("record %d after the fold is %+v, want version %s in the backlog lane", i, h, want)
		}
	}
	if r.underway(key) {
		t.Error("still under way after end")
	}
}
