package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
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
	if n := c.queue.NumRequeues(testVM) + c.cfg.Retry.ConflictRateLimiter.NumRequeues(testVM); n != 0 || c.queue.Len() != 0 {
		t.Errorf("retried: %d requeues, %d queued", n, c.queue.Len())
	}
	if ws := w.writes(); len(ws) != 0 {
		t.Errorf("writes %+v", ws)
	}
	if evs := w.events(); len(evs) != 0 {
		t.Errorf("events %q", evs)
	}
}

// TestControllerWayOutDiskForbidden: under --root-disk claim, the API server forbids a call
// that a deleted VM's way out makes on its claim (the controller's role lost a verb on
// persistentvolumeclaims): the read, past the cache, of a claim the cache does not show (here
// one whose label someone took off, which the VM still owns), or the delete of one it shows.
// The claim is left as it is and the VM stays, its finalizer on; its status says why
// (Terminating, DiskReleaseRefused, Stalled, a message that quotes the refusal) with one Warning
// Event however often it is looked at again, which is every minute (a requeue, not an error
// retried at the queue's pace). Once the verb is granted again, the next look carries out the
// way out as the reclaim policy says, and the VM goes.
func TestControllerWayOutDiskForbidden(t *testing.T) {
	tests := map[string]struct {
		policy   string // the VM's reclaim policy
		labelled bool   // the claim carries its label, so that the cache shows it
		verb     string // the verb the API server forbids on claims
	}{
		"read, retain": {policy: "Retain", verb: "get"},
		"read, delete": {policy: "Delete", verb: "get"},
		"delete":       {policy: "Delete", labelled: true, verb: "delete"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w, owner := deletedUnder(t, tc.policy)
			claim := unlabelledClaim(owner)
			if tc.labelled {
				claim.Labels = map[string]string{pods.LabelVMUID: string(owner.UID)}
			}
			kube := kubefake.NewClientset(claim)
			var forbid atomic.Bool
			forbid.Store(true)
			kube.PrependReactor(tc.verb, "persistentvolumeclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if !forbid.Load() {
					return false, nil, nil
				}
				return true, nil, apierrors.NewForbidden(k8sschema.GroupResource{Resource: "persistentvolumeclaims"}, claim.Name,
					fmt.Errorf(`User "system:serviceaccount:vm-system:vm-controller" cannot %s resource "persistentvolumeclaims" in API group "" in the namespace "default"`, tc.verb))
			})
			r := &results{}
			c := New(Config{VMs: w.source(), Backend: pods.New(pods.Config{Client: kube, Disks: true}),
				Policy: decision.DefaultPolicy, Retry: quickRetry(), Report: w.report(r),
				Now: func() time.Time { return now }})
			ctx := start(t, c)
			if d, _ := c.cfg.Backend.(backend.Disks).ObserveDisk(owner); (d != nil) != tc.labelled {
				t.Fatalf("the cache shows the claim as %+v, want it shown: %v", d, tc.labelled)
			}

			c.processNextItem(ctx)
			if got := r.last(); got != "requeue" {
				t.Errorf("result %q, want requeue: looked at again after a while, not retried as an error", got)
			}
			if n := c.queue.NumRequeues(testVM); n != 0 {
				t.Errorf("%d retries at the queue's pace, want none", n)
			}
			if fs := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(); len(fs) == 0 {
				t.Fatal("the finalizer came off while the claim could not be read or deleted")
			}
			got, err := kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), claim.Name, metav1.GetOptions{})
			if forbid.Load() && tc.verb == "get" {
				forbid.Store(false) // the test's own read
				got, err = kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), claim.Name, metav1.GetOptions{})
				forbid.Store(true)
			}
			if err != nil || got.ResourceVersion != claim.ResourceVersion || got.DeletionTimestamp != nil {
				t.Fatalf("claim %+v (%v): want it as it was", got, err)
			}
			phase, reason, msg := status(t, w, testVM, "phase"), status(t, w, testVM, "reason"), status(t, w, testVM, "message")
			if phase != string(schema.PhaseTerminating) || reason != decision.ReasonDiskReleaseRefused || !strings.Contains(msg, "forbidden") {
				t.Errorf("status %s %s %q: want Terminating %s and the refusal quoted", phase, reason, msg, decision.ReasonDiskReleaseRefused)
			}
			if cond := condition(t, w, schema.ConditionStalled); cond == nil || cond["status"] != "True" {
				t.Errorf("Stalled condition %v, want True", cond)
			}

			cachedAt(t, c, w, testVM)
			writes := len(w.writes())
			after, err := c.reconcile(ctx, testVM, c.log, false)
			if want := time.Duration(decision.DefaultPolicy.DiskReleaseRefused(decision.Input{VM: w.view(t, "delete-without-server"), Now: now}, "").RequeueAfter); err != nil || after != want {
				t.Errorf("looked at again: after %s, err %v; want after %s, no error", after, err, want)
			}
			if n := len(w.writes()); n != writes {
				t.Errorf("looked at again, wrote %+v", w.writes()[writes:])
			}
			if evs := w.events(); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning "+decision.ReasonDiskReleaseRefused) {
				t.Errorf("events %q, want one Warning %s", evs, decision.ReasonDiskReleaseRefused)
			}

			forbid.Store(false)
			c.queue.Add(testVM)
			c.processNextItem(ctx)
			if fs := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(); len(fs) != 0 {
				t.Errorf("finalizers %v once the verb is granted, want none (status %s)", fs, status(t, w, testVM, "reason"))
			}
			got, err = kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), claim.Name, metav1.GetOptions{})
			switch {
			case tc.policy == "Retain" && (err != nil || len(got.OwnerReferences) != 0):
				t.Errorf("claim %+v (%v), want it kept, released", got, err)
			case tc.policy == "Delete" && !apierrors.IsNotFound(err) && (err != nil || got.DeletionTimestamp == nil):
				t.Errorf("claim %+v (%v), want it deleted", got, err)
			}
		})
	}
}
