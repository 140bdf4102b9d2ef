package reconcile

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestControllerLateUsageOfNotActive: the poller's usage write, which carries no
// resourceVersion, may land after the reconcile that took the VM out of Active removed the
// usage (the poller read the VM while it was Active). The VM informer drops the poller's
// usage-only updates, as they change nothing a decision reads, but not those of a VM that is
// not Active: the reconcile they bring removes the late usage again, as a VM that is not
// Active reports none.
func TestControllerLateUsageOfNotActive(t *testing.T) {
	w := newWorld(t, "create-new")
	c, _ := newController(t, w, decision.UsagePolicy{Interval: time.Hour, Threshold: 0.1, MaxInterval: time.Hour})
	runWorker(t, c)

	eventually(t, "a server is created", func() bool { s, _ := w.servers.Observe(ownerOf(w.view(t, "create-new"))); return s != nil })
	owner := ownerOf(w.view(t, "create-new"))
	srv, _ := w.servers.Observe(owner)
	srv.State, srv.Detail = backend.StateReady, "Running"
	w.servers.Set(owner, srv)
	eventually(t, "the VM is Active", func() bool { return status(t, w, testVM, "phase") == string(schema.PhaseActive) })
	srv.State, srv.Message = backend.StateLost, "node kwok-node-1 is not ready"
	w.servers.Set(owner, srv)
	eventually(t, "the VM is Unknown", func() bool { return status(t, w, testVM, "phase") == string(schema.PhaseUnknown) })

	late := []byte(`{"status":{"server":{"usage":{"cpu":"250m","memory":"64Mi"}}}}`)
	if _, err := w.client.Resource(vmGVR).Namespace(testVM.Namespace).Patch(t.Context(), testVM.Name, types.MergePatchType, late, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the late usage of a VM that is not Active is removed", func() bool {
		return status(t, w, testVM, "server", "usage", "cpu") == "" && status(t, w, testVM, "phase") == string(schema.PhaseUnknown)
	})
}
