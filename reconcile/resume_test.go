package reconcile

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestControllerResumeBeforeList: the VM resource is served again (the CRD made again, a
// version served again), and a key is reconciled before the fresh informer's first list is
// in (queued by its server's change). It is left to that list, which enqueues it again: what
// is remembered of the VM (an expectation, the backend's record of its server evicted and
// gone, without which a VM under Once or Manual stops for good) is kept. Before, the VM was
// taken for gone from the empty cache, and all of it forgotten.
func TestControllerResumeBeforeList(t *testing.T) {
	w := newWorld(t, "active-steady")
	owner := ownerOf(w.view(t, "active-steady"))
	c, _ := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	w.servers.SetGone(owner, &backend.Gone{Name: "test-vm-server", ID: "pod-uid-1", Disruption: backend.Disruption{Reason: "EvictionByEvictionAPI"}})
	c.ledger.expect.deleted(testVM, "pod-uid-1")

	block := make(chan struct{})
	defer close(block)
	w.client.PrependReactor("list", "virtualmachines", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-block // the fresh informer's first list waits
		return false, nil, nil
	})
	c.onServed(ctx, false)
	c.onServed(ctx, true)
	if c.HasSynced() {
		t.Fatal("synced before the list")
	}
	if _, err := c.reconcile(context.Background(), testVM, c.log, false); err != nil {
		t.Fatal(err)
	}
	if _, kept := c.ledger.expect.m[testVM]; !kept {
		t.Error("the VM's expectation was forgotten")
	}
	if w.servers.LastGone(owner) == nil {
		t.Error("the backend's record of the evicted server was forgotten")
	}
}
