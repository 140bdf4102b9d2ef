package reconcile

import (
	"strconv"
	"testing"

	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestEchoes: a noted write's echo is taken once, older noted ones go with it; a version
// never noted is not an echo and means the noted ones will not come; what is noted stays
// bounded.
func TestEchoes(t *testing.T) {
	a, b := cache.NewObjectName("ns", "a"), cache.NewObjectName("ns", "b")
	e := newEchoes()
	e.expect(a, []string{"10", "11", "12"})
	e.expect(b, nil)
	steps := []struct {
		key    cache.ObjectName
		rv     string
		expect []string // noted before the step
		want   bool
	}{
		{a, "11", nil, true},                  // ours; 10 will not come now
		{b, "11", nil, false},                 // another VM's
		{a, "12", []string{"13", "14"}, true}, // the rest stay noted
		{a, "13", nil, true},
		{a, "20", nil, false}, // newer than 14: 14 was folded into it
		{a, "14", nil, false}, // so it is forgotten
	}
	for i, s := range steps {
		e.expect(s.key, s.expect)
		if got, _ := e.arrived(s.key, s.rv); got != s.want {
			t.Errorf("step %d: arrived(%v, %s) echo = %v, want %v", i, s.key, s.rv, got, s.want)
		}
	}
	if len(e.m) != 0 {
		t.Errorf("left %v", e.m)
	}
	for i := range 20 {
		e.expect(a, []string{string(rune('a' + i))})
	}
	if n := len(e.m[a]); n != maxEchoes {
		t.Errorf("noted %d, want at most %d", n, maxEchoes)
	}
	e.forget(a)
	if echo, _ := e.arrived(a, "t"); echo {
		t.Error("a forgotten VM's write is still an echo")
	}
}

// TestEchoesBehind: a cached copy older than a noted write is behind, and the VM waits; the
// echo of an earlier write does not wake it, that of the last one does, and so does a version
// never noted (the noted ones were folded into it); a copy at a noted version is not behind.
func TestEchoesBehind(t *testing.T) {
	a := cache.NewObjectName("ns", "a")
	tests := []struct {
		name     string
		noted    []string
		cached   string
		behind   bool
		arrivals []string // versions the informer brings next
		wakes    []bool   // whether each wakes the VM
	}{
		{"nothing noted", nil, "5", false, []string{"6"}, []bool{false}},
		{"the cache has the last write", []string{"10", "11"}, "11", false, []string{"12"}, []bool{false}},
		{"the cache has an earlier write", []string{"10", "11"}, "10", true, []string{"11"}, []bool{true}},
		{"the cache is behind every write", []string{"10", "11"}, "9", true, []string{"10", "11"}, []bool{false, true}},
		{"a newer version than the writes", []string{"10", "11"}, "9", true, []string{"15"}, []bool{true}},
		{"woken once", []string{"10"}, "9", true, []string{"10", "16"}, []bool{true, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEchoes()
			e.expect(a, tc.noted)
			if got := e.behind(a, tc.cached); got != tc.behind {
				t.Fatalf("behind(%s) = %v, want %v", tc.cached, got, tc.behind)
			}
			for i, rv := range tc.arrivals {
				if _, wake := e.arrived(a, rv); wake != tc.wakes[i] {
					t.Errorf("arrived(%s) wake = %v, want %v", rv, wake, tc.wakes[i])
				}
			}
		})
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

// TestControllerWaitsForOwnWrite: a VM whose cached copy is older than a write the controller
// noted is not decided on (no write); the echo of that write, which the handler otherwise
// drops, queues it, and then it is reconciled on the newer copy.
func TestControllerWaitsForOwnWrite(t *testing.T) {
	w := newWorld(t, "create-new")
	c, r := newController(t, w, UsagePolicy{})
	ctx := start(t, c)
	cachedAt(t, c, w, testVM)
	cur := w.vm(t, testVM.Namespace, testVM.Name)
	n, _ := strconv.Atoi(cur.GetResourceVersion())
	ours := strconv.Itoa(n + 5) // a write of ours the cache has not brought back
	c.echoes.expect(testVM, []string{ours})

	if !c.processNextItem(ctx) {
		t.Fatal("queue shut down")
	}
	if got := r.last(); got != "success" {
		t.Errorf("reconcile behind the cache: %q, want success", got)
	}
	if writes := w.writes(); len(writes) != 0 {
		t.Fatalf("decided on a copy older than its own write: %+v", writes)
	}
	if c.queue.Len() != 0 {
		t.Fatal("queued again without the echo")
	}

	cur.SetResourceVersion(ours) // the echo arrives
	if err := w.client.Tracker().Update(vmGVR, cur, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the echo queues the VM", func() bool { return c.queue.Len() == 1 })
	c.processNextItem(ctx)
	if writes := w.writes(); len(writes) != 2 {
		t.Errorf("writes %+v, want the finalizer and the status", writes)
	}
	if phase := status(t, w, testVM, "phase"); phase != string(schema.PhaseCreating) {
		t.Errorf("phase %q, want Creating", phase)
	}
}
