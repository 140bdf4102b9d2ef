package reconcile

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// The tests of a deleted VM's way out on caches that are behind the API server: no stale
// view of the VM or of its claim lets the controller delete a disk the VM's reclaim policy
// keeps, nor let the VM go while its claim, which the garbage collector then deletes, still
// names it its owner (docs/disks.md).

// setPolicy sets the reclaim policy of test-vm on the API server, as a user's patch does:
// the VM gets a new resourceVersion, which no cache of the controller has seen.
func setPolicy(t *testing.T, w *world, policy string) {
	t.Helper()
	u := w.vm(t, testVM.Namespace, testVM.Name)
	if err := unstructured.SetNestedField(u.Object, policy, "spec", "rootDiskReclaimPolicy"); err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(u.GetResourceVersion())
	if err != nil {
		t.Fatal(err)
	}
	u.SetResourceVersion(strconv.Itoa(n + 1))
	if err := w.client.Tracker().Update(vmGVR, u, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
}

// released reports whether test-vm is let go: gone, or without a finalizer.
func released(t *testing.T, w *world) bool {
	t.Helper()
	vm := w.vm(t, testVM.Namespace, testVM.Name)
	return vm == nil || len(vm.GetFinalizers()) == 0
}

// ownedBy reports whether the claim names uid among its owners: the garbage collector deletes
// a dependent once every owner it names is gone, controller or not.
func ownedBy(claim *corev1.PersistentVolumeClaim, uid string) bool {
	return slices.ContainsFunc(claim.OwnerReferences, func(r metav1.OwnerReference) bool { return string(r.UID) == uid })
}

// unchangedPatches returns the patches that left the VM as it was, in order.
func (w *world) unchangedPatches() []write {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.unchanged)
}

// TestControllerStalePolicyOnTheWayOut: a VM deleted under Delete is given Retain while its
// server is still going (the API server accepts the edit on a Terminating VM), and the
// controller's VM cache has yet to show the edit when the server goes. The claim is not
// deleted on the cache's Delete: the apply step makes sure the VM is still as decided on
// before the delete, meets a Conflict, and the VM is decided again (a conflict, not an
// error, and the finalizer on). Once the cache shows Retain, the claim is kept (DiskRetained,
// no owner reference) and the VM goes.
func TestControllerStalePolicyOnTheWayOut(t *testing.T) {
	w, owner := deletedUnder(t, "Delete")
	claim := unlabelledClaim(owner)
	claim.Labels = map[string]string{pods.LabelVMUID: string(owner.UID)}
	kube := kubefake.NewClientset(claim)
	c := podsController(t, w, kube)
	r := &results{}
	c.cfg.Report.Observer = r
	ctx := start(t, c)
	c.vms.Load().stop() // the VM cache keeps the VM as first listed: policy Delete
	if d, _ := c.cfg.Backend.(backend.Disks).ObserveDisk(owner); d == nil || d.Owner != backend.DiskOwned {
		t.Fatalf("the cache shows the claim as %+v, want it owned", d)
	}
	decided := w.vm(t, testVM.Namespace, testVM.Name).GetResourceVersion()
	setPolicy(t, w, "Retain")

	c.processNextItem(ctx)
	got, err := kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), claim.Name, metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp != nil {
		t.Fatalf("the API server's VM says Retain, and the claim was deleted on the cache's Delete (%v)", err)
	}
	if released(t, w) {
		t.Fatal("the VM was let go on the cache's Delete")
	}
	if got := r.last(); got != "conflict" {
		t.Errorf("result %q, want conflict: decided again on the VM as it now is", got)
	}
	if evs := w.reasons(); len(evs) != 0 {
		t.Errorf("events %v, want none", evs)
	}
	if ws := w.writes(); len(ws) != 1 || !reflect.DeepEqual(ws[0].body, map[string]any{"metadata": map[string]any{"resourceVersion": decided}}) {
		t.Errorf("writes %+v: want the precondition alone, at the resourceVersion decided on (%s), refused", ws, decided)
	}

	if err := c.startVMs(ctx); err != nil { // the cache catches up
		t.Fatal(err)
	}
	cachedAt(t, c, w, testVM)
	c.queue.Add(testVM)
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
	}
	got, err = kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), claim.Name, metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp != nil || len(got.OwnerReferences) != 0 || got.Annotations[pods.AnnotationKept] != "true" {
		t.Fatalf("claim %+v (%v): want it kept, released", got, err)
	}
	if !released(t, w) {
		t.Errorf("the VM keeps its finalizer (status %s)", status(t, w, testVM, "reason"))
	}
	if evs := strings.Join(w.reasons(), ","); evs != decision.ReasonDiskRetained {
		t.Errorf("events %s, want %s", evs, decision.ReasonDiskRetained)
	}
}

// TestApplyDiskDeletionPrecondition: the apply step deletes a deleted VM's disk only while the
// VM is, on the API server, the one the plan was decided on. It asks with a patch of that
// resourceVersion alone, which writes nothing, then deletes the disk and takes the finalizer
// off. A VM changed since (its reclaim policy set to Retain) is a Conflict, with the disk and
// the finalizer left as they were and no Event; a VM gone leaves the disk to its owner
// references, with no error.
func TestApplyDiskDeletionPrecondition(t *testing.T) {
	tests := map[string]struct {
		change func(t *testing.T, w *world) // what happens to the VM after the decision
		gone   bool                         // the disk is deleted, the finalizer off
	}{
		"unchanged": {change: func(*testing.T, *world) {}, gone: true},
		"retain since": {change: func(t *testing.T, w *world) {
			setPolicy(t, w, "Retain")
		}},
		"vm gone": {change: func(t *testing.T, w *world) {
			if err := w.client.Tracker().Delete(vmGVR, testVM.Namespace, testVM.Name); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w, owner := deletedWithDisk(t, "Delete", backend.DiskOwned)
			vm := cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields)
			seen, _ := w.servers.ObserveDisk(owner)
			plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Disk: seen, Now: now})
			if plan.Disk == nil || plan.Disk.Op != decision.DeleteDisk || plan.Finalizer != decision.RemoveFinalizer {
				t.Fatalf("plan %+v does not delete the disk and release the VM", plan)
			}
			tc.change(t, w)

			_, err := w.diskApplier().apply(context.Background(), vm, owner, nil, seen, plan)
			after, _ := w.servers.ObserveDisk(owner)
			if after == nil || after.Deleting != tc.gone {
				t.Errorf("disk %+v, want it deleted: %v", after, tc.gone)
			}
			unchanged := w.unchangedPatches()
			switch name {
			case "unchanged":
				if err != nil {
					t.Fatal(err)
				}
				if len(unchanged) != 1 || at(unchanged[0].body, "metadata", "resourceVersion") != vm.ResourceVersion() {
					t.Errorf("patches that changed nothing %+v, want the precondition at %s", unchanged, vm.ResourceVersion())
				}
				if !released(t, w) {
					t.Error("the finalizer stays")
				}
				if evs := strings.Join(w.reasons(), ","); evs != decision.ReasonDeletingDisk {
					t.Errorf("events %s, want %s", evs, decision.ReasonDeletingDisk)
				}
			case "retain since":
				if !apierrors.IsConflict(err) {
					t.Errorf("apply: %v, want a Conflict", err)
				}
				if released(t, w) {
					t.Error("the finalizer came off")
				}
				if evs := w.reasons(); len(evs) != 0 {
					t.Errorf("events %v, want none", evs)
				}
			case "vm gone":
				if err != nil {
					t.Errorf("apply: %v, want no error", err)
				}
			}
		})
	}
}

// TestControllerStaleClaimCacheOnTheWayOut: a deleted VM under Retain whose claim the cache
// shows as it was before the VM made it its own: the VM, then under Delete, adopted it (owned,
// the kept mark removed), and the claim informer has not brought that write back (its watch
// here delivers nothing) past the expectation of it (dropped here, as expectTimeout drops it).
// The cache shows the claim unowned (an earlier VM's, adoptable) or kept; either way the way
// out would ask nothing of the API server about it. The VM is not let go on the cache's word:
// the claim is read past the cache, found owned by the VM, and released (DiskRetained, no
// owner reference, marked kept) before the finalizer comes off; let go with the owner
// reference on, the garbage collector would delete it.
func TestControllerStaleClaimCacheOnTheWayOut(t *testing.T) {
	tests := map[string]struct {
		label  string            // the claim's LabelVMUID as the cache shows it; "": the VM's
		cached backend.DiskOwner // the claim as the cache shows it
	}{
		"adopted, cached unowned": {label: "99999999-0000-0000-0000-000000000000", cached: backend.DiskUnowned},
		"owned, cached kept":      {cached: backend.DiskKept},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w, owner := deletedUnder(t, "Retain")
			claim := unlabelledClaim(owner)
			claim.OwnerReferences = nil
			claim.Labels = map[string]string{pods.LabelVMUID: string(owner.UID)}
			if tc.label != "" {
				claim.Labels[pods.LabelVMUID] = tc.label
			}
			claim.Annotations[pods.AnnotationKept] = "true"
			kube := kubefake.NewClientset(claim)
			var frozen atomic.Bool
			frozen.Store(true)
			kube.PrependWatchReactor("persistentvolumeclaims", func(k8stesting.Action) (bool, watch.Interface, error) {
				if frozen.Load() {
					return true, watch.NewFake(), nil // a watch that delivers nothing
				}
				return false, nil, nil
			})
			c := podsController(t, w, kube)
			ctx := start(t, c)
			if d, _ := c.cfg.Backend.(backend.Disks).ObserveDisk(owner); d == nil || d.Owner != tc.cached {
				t.Fatalf("the cache shows the claim as %+v, want it %s", d, tc.cached)
			}

			// The VM's adoption of its claim, which the cache does not see.
			adopted := claim.DeepCopy()
			adopted.ResourceVersion = "6"
			adopted.Labels[pods.LabelVMUID] = string(owner.UID)
			delete(adopted.Annotations, pods.AnnotationKept)
			adopted.OwnerReferences = unlabelledClaim(owner).OwnerReferences
			if err := kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), adopted, owner.Namespace); err != nil {
				t.Fatal(err)
			}
			c.ledger.disks.forget(testVM) // the expectation of the adoption has run out

			c.processNextItem(ctx)
			got, err := kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), claim.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if released(t, w) && ownedBy(got, string(owner.UID)) {
				t.Fatalf("the VM was let go while its claim names it an owner (%v): the garbage collector deletes the claim under Retain", got.OwnerReferences)
			}
			if ownedBy(got, string(owner.UID)) || got.Annotations[pods.AnnotationKept] != "true" || got.DeletionTimestamp != nil {
				t.Errorf("claim owners %v, annotations %v: want it kept, released", got.OwnerReferences, got.Annotations)
			}
			if !released(t, w) {
				t.Errorf("the VM keeps its finalizer (status %s)", status(t, w, testVM, "reason"))
			}
			if evs := strings.Join(w.reasons(), ","); evs != decision.ReasonDiskRetained {
				t.Errorf("events %s, want %s", evs, decision.ReasonDiskRetained)
			}
		})
	}
}

// TestControllerLiveNoClaimRead: the read past the claim cache is the way out's alone: a live
// VM's reconcile, whatever the cache shows of its claim (here kept, which the way out would
// read), reads no claim from the API server.
func TestControllerLiveNoClaimRead(t *testing.T) {
	w := newWorld(t, "create-new")
	setPolicy(t, w, "Retain")
	owner := ownerOf(cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields))
	claim := unlabelledClaim(owner)
	claim.OwnerReferences = nil
	claim.Labels = map[string]string{pods.LabelVMUID: string(owner.UID)}
	claim.Annotations[pods.AnnotationKept] = "true"
	kube := kubefake.NewClientset(claim)
	c := podsController(t, w, kube)
	ctx := start(t, c)
	kube.ClearActions()

	c.processNextItem(ctx)
	for _, a := range kube.Actions() {
		if a.GetResource().Resource == "persistentvolumeclaims" && a.GetVerb() == "get" {
			t.Errorf("a live VM's reconcile read its claim: %s", fmt.Sprint(a))
		}
	}
	if released(t, w) {
		t.Error("the live VM was let go")
	}
}
