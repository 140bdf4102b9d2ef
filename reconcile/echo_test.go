package reconcile

import (
	"testing"

	"k8s.io/client-go/tools/cache"
)

// TestEchoes: a noted write's echo is seen once, older noted ones go with it, a version
// never noted is not an echo, and what is noted stays bounded.
func TestEchoes(t *testing.T) {
	a, b := cache.NewObjectName("ns", "a"), cache.NewObjectName("ns", "b")
	e := newEchoes()
	e.expect(a, []string{"10", "11", "12"}, nil)
	e.expect(b, nil, nil)
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
		e.expect(a, []string{string(rune('a' + i))}, nil)
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
// cache shows another version; it goes when the cache brings that write back, when someone
// else's write arrives, when a write is noted without it (a usage write), and with the VM.
func TestEchoesLatest(t *testing.T) {
	a := cache.NewObjectName("ns", "a")
	w := written{raw: []byte(`{}`), rv: "12"}
	tests := map[string]struct {
		then   func(e *echoes)
		cached string // the cache's resourceVersion afterwards
		newer  bool
	}{
		"cache behind":              {func(*echoes) {}, "10", true},
		"cache at the write":        {func(*echoes) {}, "12", false},
		"an older echo comes":       {func(e *echoes) { e.seen(a, "11") }, "11", true},
		"the write's echo comes":    {func(e *echoes) { e.seen(a, "12") }, "12", false},
		"someone else's write":      {func(e *echoes) { e.seen(a, "13") }, "13", false},
		"a usage write noted after": {func(e *echoes) { e.expect(a, []string{"14"}, nil) }, "10", false},
		"the VM is gone":            {func(e *echoes) { e.forget(a) }, "10", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newEchoes()
			e.expect(a, []string{"11", "12"}, &w)
			tc.then(e)
			got, ok := e.latest(a, tc.cached)
			if ok != tc.newer || ok && got.rv != "12" {
				t.Errorf("latest = %+v, %t; want the write's VM: %t", got, ok, tc.newer)
			}
		})
	}
	e := newEchoes()
	e.expect(a, []string{"11", "12"}, &written{rv: "11"})
	if _, ok := e.latest(a, "10"); ok {
		t.Error("a VM that is not the last write's is kept as the latest")
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
	e.expect(key, []string{"5"}, nil)
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
