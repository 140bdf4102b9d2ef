package reconcile

import (
	"slices"
	"testing"

	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
)

func keys(names ...string) []cache.ObjectName {
	var out []cache.ObjectName
	for _, n := range names {
		out = append(out, cache.NewObjectName("ns", n))
	}
	return out
}

// TestLanes: the storage alone, as the workqueue drives it. Preferred keys come out first, in
// the order they were preferred; a queued key preferred again moves up once; every key comes
// out once, however it moved.
func TestLanes(t *testing.T) {
	type op struct {
		prefer bool
		touch  bool // added again while queued
		key    string
	}
	tests := []struct {
		name string
		ops  []op
		want []string
	}{
		{"first in, first out without preference", []op{{key: "a"}, {key: "b"}, {key: "c"}}, []string{"a", "b", "c"}},
		{"a preferred key goes first", []op{{key: "a"}, {key: "b"}, {prefer: true, key: "c"}}, []string{"c", "a", "b"}},
		{"preferred keys keep their order", []op{{key: "a"}, {prefer: true, key: "b"}, {prefer: true, key: "c"}}, []string{"b", "c", "a"}},
		{"a queued key preferred moves up", []op{{key: "a"}, {key: "b"}, {key: "c"}, {prefer: true, touch: true, key: "b"}}, []string{"b", "a", "c"}},
		{"a queued key added again without preference stays", []op{{key: "a"}, {key: "b"}, {touch: true, key: "a"}}, []string{"a", "b"}},
		{"a key in the first lane preferred again stays", []op{{prefer: true, key: "a"}, {prefer: true, key: "b"}, {prefer: true, touch: true, key: "a"}}, []string{"a", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLanes()
			for _, o := range tc.ops {
				k := cache.NewObjectName("ns", o.key)
				if o.prefer {
					l.prefer(k)
				}
				if o.touch {
					l.Touch(k)
				} else {
					l.Push(k)
				}
			}
			var got []cache.ObjectName
			for l.Len() > 0 {
				got = append(got, l.Pop())
			}
			if want := keys(tc.want...); !slices.Equal(got, want) {
				t.Errorf("popped %v, want %v", got, want)
			}
		})
	}
}

// TestLanesRequeued: a key that moved lanes and came out can be queued again in either lane;
// the entry it left behind is not taken for it.
func TestLanesRequeued(t *testing.T) {
	l := newLanes()
	a, b := cache.NewObjectName("ns", "a"), cache.NewObjectName("ns", "b")
	l.Push(a)
	l.Push(b)
	l.prefer(b)
	l.Touch(b) // b: first lane, its second-lane entry left behind
	if got := l.Pop(); got != b {
		t.Fatalf("first pop %v, want %v", got, b)
	}
	l.Push(b) // b again, in the second lane, behind a and its old entry
	var got []cache.ObjectName
	for l.Len() > 0 {
		got = append(got, l.Pop())
	}
	if want := []cache.ObjectName{a, b}; !slices.Equal(got, want) {
		t.Errorf("then popped %v, want %v", got, want)
	}
	if len(l.first)+len(l.second) != 0 {
		t.Errorf("entries left behind: %v, %v", l.first, l.second)
	}
}

// TestControllerServerChangeGoesFirst: through the controller's own queue (client-go's, over
// the lanes), a VM whose server changed is taken before VMs queued earlier, also when it was
// queued already, and when it was being reconciled at the time (it comes back first on Done).
func TestControllerServerChangeGoesFirst(t *testing.T) {
	w := newWorld(t)
	c, _ := newController(t, w, UsagePolicy{})
	start(t, c)
	a, b, d, e := cache.NewObjectName("default", "a"), cache.NewObjectName("default", "b"),
		cache.NewObjectName("default", "d"), cache.NewObjectName("default", "e")
	serverChanged := func(k cache.ObjectName) {
		w.servers.Set(backend.Owner{Namespace: k.Namespace, Name: k.Name}, &backend.Server{Name: k.Name})
	}
	get := func() cache.ObjectName {
		t.Helper()
		k, shutdown := c.queue.Get()
		if shutdown {
			t.Fatal("queue shut down")
		}
		return k
	}

	// e is being reconciled when its server changes.
	c.queue.Add(e)
	if k := get(); k != e {
		t.Fatalf("got %v, want %v", k, e)
	}
	c.queue.Add(a)
	c.queue.Add(b)
	serverChanged(d) // not queued: into the first lane
	serverChanged(b) // queued in the second lane: moves up
	serverChanged(e) // being reconciled: queued again on Done
	c.queue.Done(e)

	var got []cache.ObjectName
	for c.queue.Len() > 0 {
		k := get()
		got = append(got, k)
		c.queue.Done(k)
	}
	if want := []cache.ObjectName{d, b, e, a}; !slices.Equal(got, want) {
		t.Errorf("taken in the order %v, want %v", got, want)
	}
}
