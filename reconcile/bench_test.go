package reconcile

import (
	"testing"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// BenchmarkReconcileNoop is one pass through the queue of a VM with nothing to do: take the
// key, read the cache and the server, decide, log and observe. It is what every resync and
// every echo of a write cost before echoes were dropped.
func BenchmarkReconcileNoop(b *testing.B) {
	w := newWorld(b, "inactive-steady")
	c, r := newController(b, w, decision.UsagePolicy{})
	ctx := start(b, c)
	c.processNextItem(ctx) // the informer's first add
	b.ReportAllocs()
	for b.Loop() {
		c.queue.Add(testVM)
		c.processNextItem(ctx)
	}
	if got := r.last(); got != "success" {
		b.Fatalf("reconcile: %s", got)
	}
}
