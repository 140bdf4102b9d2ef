package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// goingNamespaces is Namespaces with every namespace live until going is set.
type goingNamespaces struct{ going atomic.Bool }

func (n *goingNamespaces) Start(context.Context) (func() bool, error) {
	return func() bool { return true }, nil
}

func (n *goingNamespaces) Terminating(string) bool { return n.going.Load() }

// TestControllerNamespaceGoing: an Active VM whose namespace is being deleted sees its server
// go, as a namespace's deletion takes its pods before its VMs. It writes nothing, records
// nothing, makes no server and reads nothing past the cache; once the VM's own deletion
// comes, the finalizer's removal is its one write. The same steps in a live namespace write
// the status, make the server again and record ServerMissing, then write the status of the
// VM's deletion: what the first half saves.
func TestControllerNamespaceGoing(t *testing.T) {
	for _, going := range []bool{true, false} {
		name := "live"
		if going {
			name = "going"
		}
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "create-new")
			lag := &laggingBackend{Backend: w.servers}
			namespaces := &goingNamespaces{}
			c, r := newControllerOver(t, w, lag, decision.UsagePolicy{})
			c.cfg.Namespaces = namespaces
			ctx := start(t, c)

			owner, srv := toActive(t, ctx, c, w)
			before := len(w.writes())
			w.events()

			// The namespace is deleted: its pods go first.
			namespaces.going.Store(going)
			srv.Deleting = true
			w.servers.Set(owner, srv)
			c.processNextItem(ctx)
			w.servers.Set(owner, nil)
			for c.queue.Len() > 0 {
				cachedAt(t, c, w, testVM)
				c.processNextItem(ctx)
			}
			remade, _ := w.servers.Observe(owner)
			serverWrites := w.writes()[before:]
			serverEvents := w.events()
			if going {
				if len(serverWrites) != 0 || len(serverEvents) != 0 || remade != nil || lag.gets.Load() != 0 {
					t.Errorf("server gone in a namespace being deleted: writes %+v, events %q, server %+v, %d reads past the cache; want none",
						serverWrites, serverEvents, remade, lag.gets.Load())
				}
			} else if len(serverWrites) == 0 || remade == nil || !strings.Contains(strings.Join(serverEvents, "\n"), decision.ReasonServerMissing) {
				t.Errorf("server gone in a live namespace: writes %+v, events %q, server %+v; want the status, a new server, ServerMissing",
					serverWrites, serverEvents, remade)
			}

			// Then its VMs: the VM's deletion. Its server goes (the namespace's deletion takes
			// it, or the controller does), then the finalizer comes off.
			before = len(w.writes())
			u := w.vm(t, testVM.Namespace, testVM.Name)
			u.SetDeletionTimestamp(&metav1.Time{Time: now})
			rv, _ := strconv.Atoi(u.GetResourceVersion())
			u.SetResourceVersion(strconv.Itoa(rv + 1)) // as the API server's write would
			if err := w.client.Tracker().Update(vmGVR, u, testVM.Namespace); err != nil {
				t.Fatal(err)
			}
			cachedAt(t, c, w, testVM)
			c.queue.Add(testVM) // the informer's update queues it too, maybe a moment later
			for c.queue.Len() > 0 {
				c.processNextItem(ctx)
				if s, _ := w.servers.Observe(owner); s != nil && s.Deleting {
					w.servers.Set(owner, nil) // gone, which queues the VM again
				}
				cachedAt(t, c, w, testVM)
			}
			if got := r.last(); got != "success" {
				t.Errorf("last reconcile %q, want success", got)
			}
			var kinds []string
			for _, wr := range w.writes()[before:] {
				kinds = append(kinds, "patch"+map[string]string{"": "", "status": "/status"}[wr.subresource])
			}
			want := "patch"
			if !going {
				want = "patch/status,patch"
			}
			if got := strings.Join(kinds, ","); got != want {
				t.Errorf("writes of the VM's deletion: %s, want %s", got, want)
			}
			if fs := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(); len(fs) != 0 {
				t.Errorf("finalizers %v, want none", fs)
			}
		})
	}
}

// TestNamespaceWatch: a namespace is terminating once it has a deletionTimestamp (or the
// Terminating phase); a live one, and one the cache does not hold, are not.
func TestNamespaceWatch(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "live"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "going", DeletionTimestamp: &metav1.Time{Time: now}, Finalizers: []string{"kubernetes"}},
			Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "phase-only"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}},
	)
	w := NewNamespaceWatch(client, "", slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	synced, err := w.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		t.Fatal("never synced")
	}
	for ns, want := range map[string]bool{"live": false, "going": true, "phase-only": true, "unknown": false} {
		if got := w.Terminating(ns); got != want {
			t.Errorf("Terminating(%s) = %v, want %v", ns, got, want)
		}
	}

	// A namespace deleted later is seen so.
	ns, err := client.CoreV1().Namespaces().Get(ctx, "live", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.DeletionTimestamp = &metav1.Time{Time: now}
	if _, err := client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the namespace's deletion is seen", func() bool { return w.Terminating("live") })

	// The cache keeps only what Terminating reads.
	obj, _, _ := w.informer.GetIndexer().GetByKey("going")
	if kept := obj.(*corev1.Namespace); len(kept.Finalizers) != 0 || kept.Name != "going" {
		t.Errorf("cached %+v, want the name and deletion only", kept)
	}
}

// TestNamespaceWatchOne: watching one namespace lists that namespace alone, by a field
// selector on its name (which RBAC's resourceNames can then limit).
func TestNamespaceWatchOne(t *testing.T) {
	client := fake.NewClientset()
	selectors := make(chan string, 4)
	client.PrependReactor("list", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		selectors <- a.(k8stesting.ListAction).GetListRestrictions().Fields.String()
		return false, nil, nil
	})
	w := NewNamespaceWatch(client, "vms", slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-selectors; got != "metadata.name=vms" {
		t.Errorf("listed with field selector %q, want metadata.name=vms", got)
	}
}

// TestNamespaceWatchForbidden: without the RBAC rule (a deployment whose manifests predate
// it) the watch does not hold the controller's start: it counts as synced after the first
// refusal, says so once, and knows no namespace as terminating.
func TestNamespaceWatchForbidden(t *testing.T) {
	client := fake.NewClientset()
	var lists atomic.Int32
	client.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return true, nil, apierrors.NewForbidden(corev1.Resource("namespaces"), "", errors.New("RBAC: no rule"))
	})
	var logged syncBuffer // the informer's goroutine writes it while the test reads
	w := NewNamespaceWatch(client, "", slog.New(slog.NewTextHandler(&logged, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	synced, err := w.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		t.Fatal("a refused list held the start")
	}
	if lists.Load() == 0 {
		t.Error("synced before the list was refused")
	}
	if w.Terminating("default") {
		t.Error("a namespace is terminating with nothing listed")
	}
	if n := strings.Count(logged.String(), "Cannot list namespaces"); n != 1 {
		t.Errorf("said %d times that namespaces cannot be listed, want once:\n%s", n, logged.String())
	}
}

// TestPollerNamespaceGoing: the usage poller stops sampling an Active VM once its namespace is
// being deleted (its server goes with the namespace's pods), writing nothing; in a live
// namespace the same VM is sampled, its usage written, and sampled again.
func TestPollerNamespaceGoing(t *testing.T) {
	for _, going := range []bool{false, true} {
		w := newWorld(t, "active-steady")
		w.servers.SetUsage(ownerOf(w.view(t, "active-steady")), backend.Usage{CPU: resource.MustParse("250m"), Memory: resource.MustParse("64Mi")}, nil)
		c, _ := newController(t, w, decision.UsagePolicy{Interval: time.Minute, Threshold: 0.1, MaxInterval: 10 * time.Minute})
		namespaces := &goingNamespaces{}
		namespaces.going.Store(going)
		c.cfg.Namespaces = namespaces
		start(t, c)
		again := c.usage.sample(context.Background(), testVM)
		if writes := len(w.writes()); going && (again || writes != 0) {
			t.Errorf("namespace being deleted: sampled again %t, %d writes; want neither", again, writes)
		} else if !going && (!again || writes != 1) {
			t.Errorf("live namespace: sampled again %t, %d writes; want again, one write", again, writes)
		}
	}
}

// TestControllerNamespaceGoingPaused: a paused VM deleted with its namespace still says why
// it, and so the namespace, waits: the Paused condition turns to DeletionPaused, and the
// finalizer and the server stay.
func TestControllerNamespaceGoingPaused(t *testing.T) {
	w := newWorld(t, "paused-deleting")
	c, _ := newController(t, w, decision.UsagePolicy{})
	namespaces := &goingNamespaces{}
	namespaces.going.Store(true)
	c.cfg.Namespaces = namespaces
	_, srv := decidecase.Read(t, caseFile("paused-deleting"))
	w.servers.Set(ownerOf(w.view(t, "paused-deleting")), srv)
	ctx := start(t, c)
	c.processNextItem(ctx)
	ws := w.writes()
	if len(ws) != 1 || ws[0].subresource != "status" {
		t.Fatalf("writes %+v, want the status alone", ws)
	}
	u := w.vm(t, testVM.Namespace, testVM.Name)
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	reason := ""
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == string(schema.ConditionPaused) {
			reason, _ = m["reason"].(string)
		}
	}
	if reason != decision.ReasonDeletionPaused || len(u.GetFinalizers()) == 0 {
		t.Errorf("Paused reason %q, finalizers %v; want %s, the finalizer kept", reason, u.GetFinalizers(), decision.ReasonDeletionPaused)
	}
	if s, _ := w.servers.Observe(ownerOf(w.view(t, "paused-deleting"))); s == nil || s.Deleting {
		t.Errorf("server %+v, want it left as it is", s)
	}
}
