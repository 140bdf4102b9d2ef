package reconcile

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestControllerWayOutNoConflict: a deleted VM's way out while the cache lags the
// controller's own writes, as under a namespace's deletion: the first reconcile deletes the
// server and writes Terminating; the server's going, seen before the cache brings that write
// back, makes a second reconcile, which removes the finalizer conditional on the
// resourceVersion that write returned, not on the cache's older one. No write meets a
// conflict. (The informer is stopped after its first list, so that the cache stays behind.)
func TestControllerWayOutNoConflict(t *testing.T) {
	w := newWorld(t, "delete-with-server")
	_, srv := decidecase.Read(t, caseFile("delete-with-server"))
	owner := ownerOf(w.view(t, "delete-with-server"))
	w.servers.Set(owner, srv)
	c, r := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	c.vms.Load().stop() // the cache keeps the VM as first listed

	c.processNextItem(ctx)
	if s, _ := w.servers.Observe(owner); s == nil || !s.Deleting {
		t.Fatalf("server %+v after the first reconcile, want it being deleted", s)
	}
	ws := w.writes()
	if len(ws) != 1 || ws[0].subresource != "status" {
		t.Fatalf("writes %+v, want the status Terminating", ws)
	}
	terminating := w.vm(t, testVM.Namespace, testVM.Name).GetResourceVersion()

	w.servers.Set(owner, nil) // the server is gone
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
	}
	r.mu.Lock()
	outcomes := append([]string(nil), r.outcomes...)
	r.mu.Unlock()
	for _, o := range outcomes {
		if o != "success" && o != "requeue" {
			t.Errorf("outcomes %q: want no conflict, no error", outcomes)
			break
		}
	}
	ws = w.writes()
	lastWrite := ws[len(ws)-1]
	if lastWrite.subresource != "" || at(lastWrite.body, "metadata", "resourceVersion") != terminating {
		t.Errorf("last write %+v: want the finalizer's removal conditional on %s, the status write's", lastWrite, terminating)
	}
	if fs := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(); len(fs) != 0 {
		t.Errorf("finalizers %v left", fs)
	}
}

// TestNamespaceTerminating: a server the VM's namespace refuses because it is being deleted
// (its pods go before its VMs) ends the reconcile without an error, a retry, a status or an
// Event: the VM's deletion, which follows, is what the controller acts on next.
func TestNamespaceTerminating(t *testing.T) {
	w := newWorld(t, "active-steady") // its server went: the namespace's deletion took it
	c, r := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	terminating := apierrors.NewForbidden(k8sschema.GroupResource{Resource: "pods"}, "test-vm-server",
		errors.New("unable to create new content in namespace default because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace default is being terminated", Field: "metadata.namespace"}}
	w.servers.FailCreate(fmt.Errorf("create pod test-vm-server: namespace default is being deleted: %w", terminating))
	c.processNextItem(ctx)
	if got := r.last(); got != "success" {
		t.Errorf("result %q, want success", got)
	}
	if n := c.queue.NumRequeues(testVM) + c.cfg.ConflictRateLimiter.NumRequeues(testVM); n != 0 || c.queue.Len() != 0 {
		t.Errorf("retried: %d requeues, %d queued", n, c.queue.Len())
	}
	if ws := w.writes(); len(ws) != 0 {
		t.Errorf("writes %+v", ws)
	}
	if evs := w.events(); len(evs) != 0 {
		t.Errorf("events %q", evs)
	}
}
