package reconcile

import (
	"errors"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// cached is the VM of a case as the informer caches it.
func cached(t *testing.T, w *world, u *unstructured.Unstructured) *vmcache.Object {
	t.Helper()
	o, err := vmcache.Compact(u, w.fields)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestUnsettled: of the VMs a start lists, those a user created, deleted or changed while no
// controller ran are new work; one whose status is up to date, whatever its phase, is backlog.
func TestUnsettled(t *testing.T) {
	tests := map[string]bool{
		"create-new":            true,  // no status
		"delete-with-server":    true,  // deleted
		"active-new-generation": true,  // spec changed
		"restart-once":          true,  // restart asked for
		"restart-recorded":      false, // restart done
		"migrate-requested":     true,  // migration asked for
		"migrate-done-steady":   false, // migration done
		"active-steady":         false,
		"inactive-steady":       false,
		"failed-backoff-wait":   false, // Failed, its status up to date: the requeue brings it back
	}
	w := newWorld(t)
	for name, want := range tests {
		if got := unsettled(cached(t, w, caseObject(t, name))); got != want {
			t.Errorf("%s: unsettled = %t, want %t", name, got, want)
		}
	}
}

// TestUserChange: an update is new work when it changes the spec, the deletion, the
// finalizers or a request annotation (a restart, start, stop or migration request, a pause:
// each of schema.RequestAnnotations); not when only the status or another annotation
// changed. A stop that waited behind a start's backlog was one such request left out.
func TestUserChange(t *testing.T) {
	tests := map[string]struct {
		change func(u *unstructured.Unstructured)
		want   bool
	}{
		"spec": {func(u *unstructured.Unstructured) { u.SetGeneration(2) }, true},
		"deleted": {func(u *unstructured.Unstructured) {
			u.Object["metadata"].(map[string]any)["deletionTimestamp"] = "2026-06-01T12:00:00Z"
		}, true},
		"finalizers": {func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }, true},
		"restart": {func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"cloudnative.czs/restartedAt": "2026-06-01T12:00:00Z"})
		}, true},
		"migrate": {func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"cloudnative.czs/migrateRequestedAt": "2026-06-01T12:00:00Z"})
		}, true},
		"paused": {func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"cloudnative.czs/paused": "true"})
		}, true},
		"start": {func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"cloudnative.czs/startRequestedAt": "2026-06-01T12:00:00Z"})
		}, true},
		"stop": {func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"cloudnative.czs/stopRequestedAt": "2026-06-01T12:00:00Z"})
		}, true},
		"another annotation": {func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{"example.com/note": "x"})
		}, false},
		"status only": {func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "someone else's", "status", "message")
		}, false},
	}
	for _, a := range schema.RequestAnnotations {
		tests["request "+a] = struct {
			change func(u *unstructured.Unstructured)
			want   bool
		}{func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{a: "true"}) }, true}
	}
	w := newWorld(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old := caseObject(t, "active-steady")
			cur := old.DeepCopy()
			tc.change(cur)
			if got := userChange(cached(t, w, old), cached(t, w, cur), w.fields); got != tc.want {
				t.Errorf("userChange = %t, want %t", got, tc.want)
			}
		})
	}
}

// next takes the next key off c's queue and marks it done, without reconciling it.
func next(t *testing.T, c *Controller) string {
	t.Helper()
	key, shutdown := c.queue.Get()
	if shutdown {
		t.Fatal("queue shut down")
	}
	c.queue.TakeUrgent(key)
	c.queue.Done(key)
	return key.Name
}

// settledVMs makes in w, before the controller starts, a VM of the case active-steady (settled:
// its first list puts it in the backlog) for each of names.
func settledVMs(t *testing.T, w *world, names ...string) {
	t.Helper()
	for _, name := range names {
		u := caseObject(t, "active-steady")
		u.SetName(name)
		if err := w.client.Tracker().Create(vmGVR, u, u.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestControllerNewWorkFirst: after a start, the queue hands out new work before the VMs of
// the first list that are settled: a VM of that list never reconciled, then (in the order
// they came) a VM created after the start and a server that changed after it; the settled
// VMs follow in their list's order.
func TestControllerNewWorkFirst(t *testing.T) {
	w := newWorld(t)
	settledVMs(t, w, "settled-1", "settled-2", "settled-3")
	u := caseObject(t, "create-new")
	u.SetName("created-while-down")
	if err := w.client.Tracker().Create(vmGVR, u, u.GetNamespace()); err != nil {
		t.Fatal(err)
	}
	c, _ := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	if urgent, backlog := c.queue.Lens(); urgent != 1 || backlog != 3 {
		t.Fatalf("after the first list: %d new, %d backlog; want 1 and 3", urgent, backlog)
	}

	u = caseObject(t, "create-new")
	u.SetName("created-now")
	if _, err := w.client.Resource(vmGVR).Namespace("default").Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the informer queues the new VM", func() bool { urgent, _ := c.queue.Lens(); return urgent == 2 })
	settled3 := ownerOf(w.view(t, "active-steady"))
	settled3.Name = "settled-3"
	w.servers.Set(settled3, &backend.Server{Name: "settled-3-server", State: backend.StateFailed})

	var got []string
	for c.queue.Len() > 0 {
		got = append(got, next(t, c))
	}
	want := []string{"created-while-down", "created-now", "settled-3", "settled-1", "settled-2"}
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

// TestControllerNewWorkRetried: new work whose reconcile meets a conflict is retried ahead of
// the backlog, not behind it.
func TestControllerNewWorkRetried(t *testing.T) {
	w := newWorld(t)
	settledVMs(t, w, "settled-1", "settled-2")
	c, r := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	if _, err := w.client.Resource(vmGVR).Namespace("default").Create(ctx, caseObject(t, "create-new"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the informer queues the new VM", func() bool { urgent, _ := c.queue.Lens(); return urgent == 1 })
	w.failNext("main", apierrors.NewConflict(vmGVR.GroupResource(), testVM.Name, errors.New("changed")))
	c.processNextItem(ctx)
	if got := r.last(); got != "conflict" {
		t.Fatalf("result %q, want conflict", got)
	}
	eventually(t, "the retry is queued", func() bool { urgent, _ := c.queue.Lens(); return urgent == 1 })
	if got := next(t, c); got != testVM.Name {
		t.Errorf("next %q, want the retried %s ahead of the backlog", got, testVM.Name)
	}
}
