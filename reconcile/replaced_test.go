package reconcile

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestControllerReplacementWriteLost: the controller deletes a VM's server to replace it (or
// to stop it), and the status write that goes with the delete meets a conflict (the VM changed
// meanwhile). The next decisions see a status that still names the old server, and the server
// going, then gone. They carry out what the lost write was part of: a spec change gets its new
// server, a restart is carried out once, a stop still stops; under no run strategy is the
// server taken for one someone else deleted (no Warning ServerMissing, no VM stopped for it).
func TestControllerReplacementWriteLost(t *testing.T) {
	tests := map[string]struct {
		strategy string // the VM's spec.action
		// change is the user's change of the stored VM that has the controller delete the
		// server (a spec change, a request).
		change func(o map[string]any) error
		// next says whether a new server follows, and with which image.
		next  bool
		image string
		// reason is the status's reason once the old server is gone and the next decided.
		reason string
		// shutdown: the server's guest shuts down (under Always it is replaced at once) in
		// place of the user's change.
		shutdown bool
	}{
		"spec change, Manual": {strategy: "manual", change: newImage, next: true, image: "example.com/vm:2", reason: decision.ReasonServerCreating},
		"spec change, Once":   {strategy: "once", change: newImage, next: true, image: "example.com/vm:2", reason: decision.ReasonServerCreating},
		"spec change, Always": {strategy: "active", change: newImage, next: true, image: "example.com/vm:2", reason: decision.ReasonServerCreating},
		"restart, Manual": {strategy: "manual", change: annotate(schema.AnnotationRestartedAt, "2026-06-01T11:59:00Z"),
			next: true, image: "registry.k8s.io/pause:3.10", reason: decision.ReasonServerCreating},
		"stop, Manual": {strategy: "manual", change: annotate(schema.AnnotationStopRequestedAt, "2026-06-01T11:59:00Z"),
			reason: decision.ReasonStopped},
		"shut down, Always": {strategy: "active", shutdown: true, next: true, image: "registry.k8s.io/pause:3.10", reason: decision.ReasonServerCreating},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "strategy-manual-running")
			owner, running := runningUnder(t, w, tc.strategy)
			c, _ := newController(t, w, decision.UsagePolicy{})
			ctx := start(t, c)
			work := func(what string, done func() bool) {
				t.Helper()
				eventually(t, what, func() bool {
					for c.queue.Len() > 0 {
						c.processNextItem(ctx)
					}
					return done()
				})
			}
			work("the VM is ready", func() bool { return status(t, w, testVM, "reason") == decision.ReasonServerReady })
			w.events()

			// The user's change; the status write after the controller's delete is refused.
			w.failNext("status", apierrors.NewConflict(vmGVR.GroupResource(), testVM.Name, errors.New("the VM changed")))
			if tc.shutdown {
				ended := *running
				ended.State, ended.Detail = backend.StateStopped, "Succeeded"
				w.servers.Set(owner, &ended)
			} else {
				obj := w.vm(t, testVM.Namespace, testVM.Name)
				if err := tc.change(obj.Object); err != nil {
					t.Fatal(err)
				}
				if err := w.client.Tracker().Update(vmGVR, obj, testVM.Namespace); err != nil {
					t.Fatal(err)
				}
			}
			work("the server is deleted and the VM decided on again", func() bool {
				srv, _ := w.servers.Observe(owner)
				return srv != nil && srv.Deleting && status(t, w, testVM, "reason") != decision.ReasonServerReady
			})
			w.servers.Set(owner, nil) // the old server's deletion ends
			work("the VM is decided on once the old server is gone", func() bool {
				srv, _ := w.servers.Observe(owner)
				r := status(t, w, testVM, "reason")
				return srv != nil || r == tc.reason || r == decision.ReasonServerMissing
			})

			srv, _ := w.servers.Observe(owner)
			switch {
			case tc.next && srv == nil:
				t.Errorf("no new server: the VM is %s (%s)", status(t, w, testVM, "phase"), status(t, w, testVM, "reason"))
			case tc.next && (srv.ID == running.ID || srv.Spec.Image != tc.image):
				t.Errorf("server %s with image %s, want a new server with image %s", srv.ID, srv.Spec.Image, tc.image)
			case !tc.next && srv != nil:
				t.Errorf("a new server %s, want none", srv.ID)
			}
			if got := status(t, w, testVM, "reason"); got != tc.reason {
				t.Errorf("reason %q, want %s", got, tc.reason)
			}
			evs := w.events()
			if i := slices.IndexFunc(evs, func(e string) bool { return strings.Contains(e, decision.ReasonServerMissing) }); i >= 0 {
				t.Errorf("event %q: the controller took its own delete for someone else's", evs[i])
			}
			if n := len(slices.DeleteFunc(slices.Clone(evs), func(e string) bool { return !strings.Contains(e, "Normal CreatingServer ") })); n > 1 {
				t.Errorf("events %q: %d servers created, want one at most", evs, n)
			}
		})
	}
}

// runningUnder sets the run strategy of the world's VM (of the case strategy-manual-running)
// to strategy (spec.action's word) and gives it the case's running server, which it returns
// with the VM as the backend's owner.
func runningUnder(t *testing.T, w *world, strategy string) (backend.Owner, *backend.Server) {
	t.Helper()
	obj := w.vm(t, testVM.Namespace, testVM.Name)
	if err := unstructured.SetNestedField(obj.Object, strategy, "spec", "action"); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Tracker().Update(vmGVR, obj, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(cachedView(t, obj, w.fields))
	_, running := decidecase.Read(t, caseFile("strategy-manual-running"))
	w.servers.Set(owner, running)
	return owner, running
}

// newImage changes the VM's image, which no server takes in place: a new generation of the
// spec.
func newImage(o map[string]any) error {
	if err := unstructured.SetNestedField(o, "example.com/vm:2", "spec", "image"); err != nil {
		return err
	}
	return unstructured.SetNestedField(o, int64(2), "metadata", "generation")
}

// annotate sets the annotation key to value.
func annotate(key, value string) func(o map[string]any) error {
	return func(o map[string]any) error {
		return unstructured.SetNestedField(o, value, "metadata", "annotations", key)
	}
}

// TestReplacements: the record of a server deleted to replace it is given to the decision for
// that server going or gone, with what the backend remembers of it; it stays through status
// writes that still name the server (a lost write leaves none), and goes with the first that
// does not, with the VM, and for a VM made again under the name.
func TestReplacements(t *testing.T) {
	key := cache.NewObjectName("ns", "vm")
	old := &backend.Server{Name: "vm-server", ID: "pod-1", Node: "node-a"}
	going := *old
	going.Deleting = true
	evicted := &backend.Gone{Name: "vm-server", ID: "pod-1", Node: "node-a", Disruption: backend.Disruption{Reason: "EvictionByEvictionAPI"}}
	claiming := schema.Status{Reason: decision.ReasonServerReady, Server: &schema.ServerStatus{Name: "vm-server", ID: "pod-1"}}
	replacing := schema.Status{Reason: decision.ReasonServerReplacing, Server: &schema.ServerStatus{Name: "vm-server", ID: "pod-1"}}

	var r replacements
	if g := r.gone(key, "uid-1", nil, nil); g != nil {
		t.Fatalf("nothing recorded: got %+v", *g)
	}
	r.deleted(key, "uid-1", old)
	want := backend.Gone{Name: "vm-server", ID: "pod-1", Node: "node-a", Replaced: true}
	for name, srv := range map[string]*backend.Server{"going": &going, "gone": nil} {
		if g := r.gone(key, "uid-1", srv, nil); g == nil || *g != want {
			t.Errorf("%s: got %+v, want %+v", name, g, want)
		}
	}
	if g := r.gone(key, "uid-1", &backend.Server{Name: "vm-server", ID: "pod-2"}, nil); g != nil {
		t.Errorf("beside another server: got %+v, want nothing", *g)
	}
	if g := r.gone(key, "uid-1", nil, evicted); g == nil || !g.Replaced || g.Disruption != evicted.Disruption {
		t.Errorf("evicted as well: got %+v, want both", g)
	}
	r.written(key, claiming)
	if r.gone(key, "uid-1", nil, nil) == nil {
		t.Fatal("forgotten after a write that still names the server")
	}
	r.written(key, replacing)
	if g := r.gone(key, "uid-1", nil, nil); g != nil {
		t.Errorf("kept after a write that says the replacement: %+v", *g)
	}

	r.deleted(key, "uid-1", old)
	if g := r.gone(key, "uid-2", nil, nil); g != nil {
		t.Errorf("given to a VM made again under the name: %+v", *g)
	}
	if g := r.gone(key, "uid-1", nil, nil); g != nil {
		t.Errorf("kept once a VM made again under the name was seen: %+v", *g)
	}
	r.deleted(key, "uid-1", old)
	r.forget(key)
	if g := r.gone(key, "uid-1", nil, nil); g != nil {
		t.Errorf("kept after the VM went: %+v", *g)
	}
}

// refusingDeletes is the memory backend refusing the next delete of a server, as the API server
// does when a write does not get through (or the fence refuses it: fence_test.go).
type refusingDeletes struct {
	*memory.Backend
	refuse atomic.Int32
}

func (b *refusingDeletes) Delete(ctx context.Context, vm backend.Owner) error {
	if b.refuse.Add(-1) >= 0 {
		return fencedByTransport()
	}
	return b.Backend.Delete(ctx, vm)
}

// TestControllerReplacementNewLeader: a replica replacing a VM's server for a spec change stops
// in the middle (its Lease lost, a kill -9: its next write never gets through), and another
// replica, which remembers nothing of it, takes over. The server is never gone while the status
// still says it runs: the status that says it is being replaced goes first, and the delete after
// it. So the new replica carries the replacement on, under every run strategy: the new server
// has the new spec, and no one's delete is taken for someone else's (ServerMissing, which under
// Manual and Once stopped the VM). The cases where the status write fails fail on the order of
// before (delete, then status); those where the delete fails hold the other half of the order:
// the status is on record before the delete, and the next replica deletes.
func TestControllerReplacementNewLeader(t *testing.T) {
	tests := map[string]struct {
		strategy string // the VM's spec.action
		// stops makes the first replica's next write after the user's change fail: "status"
		// (its status write) or "delete" (its delete of the server).
		stops string
		// shutdown: what the first replica replaces the server for is its guest's clean
		// shutdown under Always, not a change of the image.
		shutdown bool
	}{
		"Manual, the status write fails":            {strategy: "manual", stops: "status"},
		"Once, the status write fails":              {strategy: "once", stops: "status"},
		"Always, the status write fails":            {strategy: "active", stops: "status"},
		"Manual, the delete fails":                  {strategy: "manual", stops: "delete"},
		"Once, the delete fails":                    {strategy: "once", stops: "delete"},
		"Always, shut down, the status write fails": {strategy: "active", stops: "status", shutdown: true},
		"Always, shut down, the delete fails":       {strategy: "active", stops: "delete", shutdown: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "strategy-manual-running")
			owner, running := runningUnder(t, w, tc.strategy)
			refusing := &refusingDeletes{Backend: w.servers}
			first, _ := newControllerOver(t, w, refusing, decision.UsagePolicy{})
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			first.lead()
			if err := first.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if !cache.WaitForCacheSync(ctx.Done(), first.HasSynced) {
				t.Fatal("caches did not sync")
			}
			first.queueCached()
			work := func(c *Controller, ctx context.Context, what string, done func() bool) {
				t.Helper()
				eventually(t, what, func() bool {
					for c.queue.Len() > 0 {
						c.processNextItem(ctx)
					}
					return done()
				})
			}
			work(first, ctx, "the VM is ready", func() bool { return status(t, w, testVM, "reason") == decision.ReasonServerReady })
			w.events()

			// The user's change; the first replica's next write fails, and it stops there.
			switch tc.stops {
			case "status":
				w.failNext("status", fencedByTransport())
			case "delete":
				refusing.refuse.Store(1)
			}
			image := "example.com/vm:2"
			if tc.shutdown {
				image = running.Spec.Image
				ended := *running
				ended.State, ended.Detail = backend.StateStopped, "Succeeded"
				w.servers.Set(owner, &ended)
				eventually(t, "the shutdown is queued", func() bool { return first.queue.Len() > 0 })
			} else {
				obj := w.vm(t, testVM.Namespace, testVM.Name)
				if err := newImage(obj.Object); err != nil {
					t.Fatal(err)
				}
				if err := w.client.Tracker().Update(vmGVR, obj, testVM.Namespace); err != nil {
					t.Fatal(err)
				}
				cachedAt(t, first, w, testVM)
			}
			first.processNextItem(ctx)
			stop()
			if r := status(t, w, testVM, "reason"); tc.stops == "delete" && r != decision.ReasonServerReplacing {
				t.Fatalf("reason %q after the failed delete, want %s written before it", r, decision.ReasonServerReplacing)
			}
			if srv, _ := w.servers.Observe(owner); srv != nil && srv.Deleting {
				w.servers.Set(owner, nil) // a delete that got through ends
			}

			next, _ := newController(t, w, decision.UsagePolicy{})
			nextCtx := start(t, next)
			work(next, nextCtx, "the new replica decides on the VM", func() bool {
				srv, _ := w.servers.Observe(owner)
				if srv != nil && srv.Deleting {
					w.servers.Set(owner, nil)
				}
				r := status(t, w, testVM, "reason")
				return srv != nil && srv.ID != running.ID || r == decision.ReasonServerMissing
			})

			srv, _ := w.servers.Observe(owner)
			switch {
			case srv == nil:
				t.Errorf("no new server: the VM is %s (%s)", status(t, w, testVM, "phase"), status(t, w, testVM, "reason"))
			case srv.ID == running.ID || srv.Spec.Image != image:
				t.Errorf("server %s with image %s, want a new server with image %s", srv.ID, srv.Spec.Image, image)
			}
			if got := status(t, w, testVM, "reason"); got != decision.ReasonServerCreating {
				t.Errorf("reason %q, want %s", got, decision.ReasonServerCreating)
			}
			if evs := w.events(); slices.ContainsFunc(evs, func(e string) bool { return strings.Contains(e, decision.ReasonServerMissing) }) {
				t.Errorf("events %q: the controller took its own delete for someone else's", evs)
			}
		})
	}
}
