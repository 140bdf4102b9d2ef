package reconcile

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
)

// TestEchoes: a noted write's echo is seen once, older noted ones go with it, a version
// never noted is not an echo, and what is noted stays bounded.
func TestEchoes(t *testing.T) {
	a, b := cache.NewObjectName("ns", "a"), cache.NewObjectName("ns", "b")
	e := newEchoes()
	e.expect(a, []string{"10", "11", "12"}, nil, nil)
	e.expect(b, nil, nil, nil)
	steps := []struct {
		key  cache.ObjectName
		rv   string
		want bool
	}{
		{a, "9", false},  // someone else's write
		{a, "11", true},  // ours; 10 will not come now
		{a, "10", false}, // forgotten with 11
		{b, "11", false}, // another VM's
		{a, "12", true},
		{a, "12", false}, // seen once only
	}
	for i, s := range steps {
		if got := e.seen(s.key, s.rv); got != s.want {
			t.Errorf("step %d: seen(%v, %s) = %v, want %v", i, s.key, s.rv, got, s.want)
		}
	}
	if len(e.m) != 0 {
		t.Errorf("left %v", e.m)
	}
	for i := range 20 {
		e.expect(a, []string{string(rune('a' + i))}, nil, nil)
	}
	if n := len(e.m[a]); n != maxEchoes {
		t.Errorf("noted %d, want at most %d", n, maxEchoes)
	}
	e.forget(a)
	if e.seen(a, "t") {
		t.Error("a forgotten VM's write is still an echo")
	}
}

// TestEchoesLatest: the VM as the last noted write returned it is the newer one while the
// cache shows a version it follows (the one decided on first, or an earlier write of the
// reconcile); it goes when the cache brings that write back, when someone else's write
// arrives, before the write is noted too (its echo and that write came first), when a write
// is noted without it (a usage write), and with the VM.
func TestEchoesLatest(t *testing.T) {
	a := cache.NewObjectName("ns", "a")
	w := written{raw: []byte(`{}`), rv: "12"}
	tests := map[string]struct {
		then   func(e *echoes)
		cached string // the cache's resourceVersion afterwards
		newer  bool
	}{
		"cache behind":           {func(*echoes) {}, "10", true},
		"cache at the write":     {func(*echoes) {}, "12", false},
		"an older echo comes":    {func(e *echoes) { e.seen(a, "11") }, "11", true},
		"the write's echo comes": {func(e *echoes) { e.seen(a, "12") }, "12", false},
		"someone else's write":   {func(e *echoes) { e.seen(a, "13") }, "13", false},
		// The write's echo and someone else's write came before the reconcile noted it.
		"someone else's write first": {func(*echoes) {}, "13", false},
		"a usage write noted after":  {func(e *echoes) { e.expect(a, []string{"14"}, nil, nil) }, "10", false},
		"the VM is gone":             {func(e *echoes) { e.forget(a) }, "10", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEchoes()
			e.expect(a, []string{"11", "12"}, &w, []string{"10"})
			tc.then(e)
			got, ok := e.latest(a, tc.cached)
			if ok != tc.newer || ok && got.rv != "12" {
				t.Errorf("latest = %+v, %t; want the write's VM: %t", got, ok, tc.newer)
			}
		})
	}
	e := newEchoes()
	e.expect(a, []string{"11", "12"}, &written{rv: "11"}, []string{"10"})
	if _, ok := e.latest(a, "10"); ok {
		t.Error("a VM that is not the last write's is kept as the latest")
	}
	// A reconcile that decided on the latest VM carries what it follows over to its own write:
	// the cache may still show the version the first reconcile started from.
	e.expect(a, []string{"11", "12"}, &w, []string{"10"})
	l, _ := e.latest(a, "10")
	e.expect(a, []string{"13"}, &written{raw: []byte(`{}`), rv: "13"}, append(l.over, l.rv))
	for _, rv := range []string{"10", "11", "12"} {
		if got, ok := e.latest(a, rv); !ok || got.rv != "13" {
			t.Errorf("cache at %s: latest = %+v, %t; want the second reconcile's write", rv, got, ok)
		}
	}
}

// TestEchoesReleased: a released VM is released for its UID only (a new VM of the name is
// not), through the echoes of other writes, until the cache lets it go.
func TestEchoesReleased(t *testing.T) {
	key := cache.NewObjectName("ns", "vm")
	e := newEchoes()
	if e.isReleased(key, "u1") {
		t.Fatal("released before anything was noted")
	}
	e.released(key, "u1")
	e.expect(key, []string{"5"}, nil, nil)
	e.seen(key, "5")
	e.seen(key, "6")
	if !e.isReleased(key, "u1") || e.isReleased(key, "u2") {
		t.Errorf("released u1: %v, u2: %v; want u1 only", e.isReleased(key, "u1"), e.isReleased(key, "u2"))
	}
	e.forget(key)
	if e.isReleased(key, "u1") {
		t.Error("still released after the VM is gone")
	}
}

type passRecorder struct {
	results
	passes []int
}

func (p *passRecorder) PassesToActive(n int) { p.passes = append(p.passes, n) }

// TestPassCounter: passes are counted per VM until it becomes Active, then start again.
func TestPassCounter(t *testing.T) {
	a, b := cache.NewObjectName("ns", "a"), cache.NewObjectName("ns", "b")
	p := &passCounter{m: map[cache.ObjectName]int{}}
	o := &passRecorder{}
	p.add(a)
	p.add(b)
	p.active(a, p.add(a), o)
	p.active(b, p.add(b), o)
	p.active(a, p.add(a), o)
	if want := []int{2, 2, 1}; len(o.passes) != 3 || o.passes[0] != want[0] || o.passes[1] != want[1] || o.passes[2] != want[2] {
		t.Errorf("passes %v, want %v", o.passes, want)
	}
	p.add(a)
	p.forget(a)
	if len(p.m) != 0 {
		t.Errorf("left %v", p.m)
	}
}

// midCreate is a backend that runs hook once, inside the first Create: in the middle of a
// reconcile, after its finalizer write and before its status write.
type midCreate struct {
	*memory.Backend
	once sync.Once
	hook func()
}

func (b *midCreate) Create(ctx context.Context, vm backend.Owner, s backend.Spec) (*backend.Server, error) {
	b.once.Do(b.hook)
	return b.Backend.Create(ctx, vm, s)
}

// afterStatus is a writer that runs hook once, after the first status write it carries out:
// inside the reconcile, before the reconcile notes its writes (echoes.expect).
type afterStatus struct {
	vmWriter
	once sync.Once
	hook func()
}

func (h *afterStatus) patch(ctx context.Context, namespace, name string, patch []byte, subresources ...string) (written, error) {
	out, err := h.vmWriter.patch(ctx, namespace, name, patch, subresources...)
	if err == nil && len(subresources) > 0 {
		h.once.Do(h.hook)
	}
	return out, err
}

// setAction sets spec.action in the API, as a user's kubectl edit would.
func setAction(t *testing.T, w *world, action string) {
	t.Helper()
	u := w.vm(t, "default", "test-vm")
	if err := unstructured.SetNestedField(u.Object, action, "spec", "action"); err != nil {
		t.Fatal(err)
	}
	u.SetGeneration(u.GetGeneration() + 1)
	n, _ := strconv.Atoi(u.GetResourceVersion())
	u.SetResourceVersion(strconv.Itoa(n + 1))
	if err := w.client.Tracker().Update(vmGVR, u, "default"); err != nil {
		t.Fatal(err)
	}
}

// TestControllerEditDuringReconcile: a user stops the VM (spec.action: inactive) while the
// reconcile that wrote its status is still deciding, and the cache brings the status write's
// echo and the edit before the reconcile notes its writes. The reconcile the edit queued
// decides on the edit, not on the VM as the status write returned it (which the cache has
// moved past): the server is stopped and the new generation observed.
func TestControllerEditDuringReconcile(t *testing.T) {
	w := newWorld(t, "create-new")
	c, _ := newController(t, w, decision.UsagePolicy{})
	c.applier.writer = &afterStatus{vmWriter: c.applier.writer, hook: func() {
		cachedAt(t, c, w, testVM)   // the status write's echo is in the cache
		setAction(t, w, "inactive") // the user stops the VM
		cachedAt(t, c, w, testVM)   // and the cache shows it
	}}
	ctx := start(t, c)
	c.processNextItem(ctx)
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
	}
	srv, _ := w.servers.Observe(ownerOf(w.view(t, "create-new")))
	if gen, observed, _ := generations(t, w); srv != nil && !srv.Deleting || observed != gen {
		t.Errorf("server left running: %t, observedGeneration %d of %d: want the server stopped and the edit observed",
			srv != nil && !srv.Deleting, observed, gen)
	}
}

// TestControllerEditBetweenWrites: a user's edit lands between the reconcile's finalizer
// write and its status write, after the finalizer write's echo; the status write meets a
// conflict. The retry decides on the edit in the cache, not on the VM as the finalizer write
// returned it, and writes the status; deciding on that older VM, every retry met the same
// conflict.
func TestControllerEditBetweenWrites(t *testing.T) {
	w := newWorld(t, "create-new")
	var c *Controller
	b := &midCreate{Backend: w.servers, hook: func() {
		cachedAt(t, c, w, testVM) // the finalizer write's echo is in the cache
		editSpec(t, w, "3")       // a user's edit
		cachedAt(t, c, w, testVM) // and the cache shows it
	}}
	c, r := newControllerOver(t, w, b, decision.UsagePolicy{})
	ctx := start(t, c)
	c.processNextItem(ctx)
	if got := r.last(); got != "conflict" {
		t.Fatalf("first reconcile: %q, want a conflict", got)
	}
	for i := 0; status(t, w, testVM, "phase") == ""; i++ {
		if i == 8 {
			r.mu.Lock()
			t.Fatalf("no status after %d retries: %q", i, r.outcomes)
		}
		c.processNextItem(ctx)
	}
	if gen, observed, _ := generations(t, w); observed != gen {
		t.Errorf("observedGeneration %d, want %d: the edit", observed, gen)
	}
}

// TestEchoesLatestUnderLag: while the informer lags behind one VM's writes, each reconcile
// decides on the last write and carries what it follows over to its own; the version the
// cache still shows must stay among them however many reconciles that takes (within
// maxFollowed writes), and what the cache has shown since is let go. A cut at eight writes
// dropped it after three reconciles, and the fourth decided on the stale cache.
func TestEchoesLatestUnderLag(t *testing.T) {
	a := cache.NewObjectName("ns", "a")
	e := newEchoes()
	rv := 10
	next := func() string { rv++; return strconv.Itoa(rv) }
	cached := "10"
	e.expect(a, []string{next(), next(), next(), next()}, &written{raw: []byte(`{}`), rv: "14"}, []string{cached})
	for r := 2; r <= 20; r++ {
		if r == 12 {
			cached = "20" // the informer catches up with part of the writes
		}
		w, ok := e.latest(a, cached)
		if !ok || w.rv != strconv.Itoa(rv) {
			t.Fatalf("reconcile %d, the cache at %s: latest = %s, %t; want the last write, %d", r, cached, w.rv, ok, rv)
		}
		if w.over[0] != cached {
			t.Fatalf("reconcile %d: the write follows %v, want them from the cache's %s on", r, w.over, cached)
		}
		rvs := []string{next(), next()}
		e.expect(a, rvs, &written{raw: []byte(`{}`), rv: rvs[1]}, append(slices.Clip(w.over), w.rv))
	}
	if w, ok := e.latest(a, strconv.Itoa(rv)); ok {
		t.Errorf("the cache at the last write: latest = %s, want the cache", w.rv)
	}
}

// TestControllerResyncKeepsLastWrite: a resync hands the cached VM to the handler again while
// the echo of the controller's last write of it is still to come. The resync is no echo: the
// last write stays the newer version, which the next reconcile decides on; taken for an echo,
// the write was forgotten, and the next reconcile decided on the older cache and met a
// conflict. The write's own echo then lets it go.
func TestControllerResyncKeepsLastWrite(t *testing.T) {
	w := newWorld(t, "create-new")
	c, _ := newController(t, w, decision.UsagePolicy{})
	start(t, c)
	key := cache.NewObjectName(testVM.Namespace, testVM.Name)
	obj, ok, err := c.vms.Load().store.GetByKey(key.String())
	if err != nil || !ok {
		t.Fatalf("the VM is not in the cache: %v", err)
	}
	cached := obj.(*vmcache.Object)
	rv := cached.GetResourceVersion()
	c.ledger.echoes.expect(key, []string{"9001"}, &written{raw: []byte(`{}`), rv: "9001"}, []string{rv})
	c.onVMUpdate(obj, obj) // the resync
	if w, ok := c.ledger.echoes.latest(key, rv); !ok || w.rv != "9001" {
		t.Fatalf("after a resync, latest = %q, %t; want the last write, 9001", w.rv, ok)
	}
	echo := *cached
	echo.SetResourceVersion("9001")
	c.onVMUpdate(obj, &echo) // the write's echo
	if _, ok := c.ledger.echoes.latest(key, "9001"); ok {
		t.Error("after the write's echo, the write is still kept as the newer version")
	}
}

// TestEchoesRelistKeepsLastWrite: a relist the watch cache serves from before the write hands
// the cache's own version over again, as a new object: it is no news, and the write, which
// follows it, stays the newer; someone else's version, which the write does not follow, lets
// the write go.
func TestEchoesRelistKeepsLastWrite(t *testing.T) {
	a := cache.NewObjectName("ns", "a")
	e := newEchoes()
	e.expect(a, []string{"12"}, &written{raw: []byte(`{}`), rv: "12"}, []string{"10"})
	if e.seen(a, "10") {
		t.Fatal("the cache's own version taken for an echo")
	}
	if w, ok := e.latest(a, "10"); !ok || w.rv != "12" {
		t.Fatalf("after a relist at 10, latest = %q, %t; want the write, 12", w.rv, ok)
	}
	if e.seen(a, "11") {
		t.Fatal("someone else's version taken for an echo")
	}
	if w, ok := e.latest(a, "11"); ok {
		t.Errorf("after someone else's version, latest = %q; want the cache", w.rv)
	}
}
