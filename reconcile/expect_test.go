package reconcile

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestExpectations: until the cache shows what the controller did, the controller's own
// record stands in for it; once the cache catches up, the cache is believed again.
func TestExpectations(t *testing.T) {
	key := cache.NewObjectName("ns", "vm")
	e := newExpectations()
	if got := e.adjust(key, nil); got != nil {
		t.Fatalf("no expectation: got %+v", got)
	}

	e.created(key, &backend.Server{ID: "new", State: backend.StatePending})
	if got := e.adjust(key, nil); got == nil || got.ID != "new" {
		t.Fatalf("created, cache behind: got %+v, want the created server", got)
	}
	if got := e.adjust(key, &backend.Server{ID: "new", State: backend.StateReady}); got.State != backend.StateReady {
		t.Fatalf("created, cache caught up: got %+v", got)
	}
	if got := e.adjust(key, nil); got != nil {
		t.Fatalf("expectation kept after the cache caught up: %+v", got)
	}

	e.deleted(key, "old")
	if got := e.adjust(key, &backend.Server{ID: "old"}); got == nil || !got.Deleting {
		t.Fatalf("deleted, cache behind: got %+v, want it marked deleting", got)
	}
	if got := e.adjust(key, &backend.Server{ID: "old", Deleting: true}); !got.Deleting {
		t.Fatalf("deleted, cache caught up: %+v", got)
	}
	if got := e.adjust(key, &backend.Server{ID: "old"}); got.Deleting {
		t.Fatalf("expectation kept after the cache caught up: %+v", got)
	}

	e.created(key, &backend.Server{ID: "x"})
	e.forget(key)
	if got := e.adjust(key, nil); got != nil {
		t.Fatalf("forgotten expectation still applies: %+v", got)
	}
}

// TestExpectationsWait: while an expectation stands, a reconcile asks to look again when it
// runs out, so a server created and gone before the cache saw it is not waited for forever.
func TestExpectationsWait(t *testing.T) {
	key := cache.NewObjectName("ns", "vm")
	e := newExpectations()
	if w := e.wait(key); w != 0 {
		t.Fatalf("no expectation: wait %s", w)
	}
	e.created(key, &backend.Server{ID: "new"})
	if w := e.wait(key); w <= 0 || w > expectTimeout+time.Second {
		t.Fatalf("wait %s, want at most the timeout %s plus a second", w, expectTimeout)
	}
	e.adjust(key, &backend.Server{ID: "new"}) // the cache caught up
	if w := e.wait(key); w != 0 {
		t.Fatalf("a met expectation still waits %s", w)
	}
}
