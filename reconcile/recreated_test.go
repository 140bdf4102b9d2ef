package reconcile

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/pods"
)

// TestRecreatedVMDoesNotInheritDiskExpectation: VM A (Retain, its claim kept and marked) is
// deleted, and its way out releases the claim: an update with nothing to write, recorded as a
// disk expectation under the VM's name at the claim's version, which the claim cache shows
// for as long as the expectation lasts. A VM B of the same name (another UID), made and
// reconciled before any reconcile saw the name gone, must see the claim as the cache tells it
// to B: an earlier VM's (Unowned), not as A saw it (its own, Kept). B is Halted with
// rootDiskReclaimPolicy Delete: it adopts nothing. Had it adopted the claim as its own, B,
// Halted without a server and so without a finalizer, would leave the claim to the garbage
// collector at its deletion: the disk A kept, deleted.
func TestRecreatedVMDoesNotInheritDiskExpectation(t *testing.T) {
	w, ownerA := deletedUnder(t, "Retain")
	claim := unlabelledClaim(ownerA)
	claim.OwnerReferences = nil
	claim.Labels = map[string]string{pods.LabelVMUID: string(ownerA.UID)}
	claim.Annotations[pods.AnnotationKept] = "true"
	kube := kubefake.NewClientset(claim)
	c := podsController(t, w, kube)
	ctx := start(t, c)

	c.processNextItem(ctx) // A's way out: DiskRetained, the finalizer off
	if !released(t, w) {
		t.Fatalf("A not released: %s", status(t, w, testVM, "reason"))
	}
	b := madeAgain(t, w, c, "inactive-new")
	ownerB := ownerOf(cachedView(t, b, w.fields))
	seen, err := c.cfg.Backend.(backend.Disks).ObserveDisk(ownerB)
	if err != nil {
		t.Fatal(err)
	}
	if seen == nil || seen.Owner != backend.DiskUnowned {
		t.Fatalf("the backend shows the claim to B as %+v, want Unowned", seen)
	}
	if d := c.ledger.disks.adjust(testVM, ownerB.UID, seen); d.Owner != backend.DiskUnowned {
		t.Errorf("the controller knows the claim to B as Owner=%s (what A's action left), want Unowned", d.Owner)
	}
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
	}
	got, err := kube.CoreV1().PersistentVolumeClaims(testVM.Namespace).Get(context.Background(), claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ownedBy(got, string(ownerB.UID)) || got.Annotations[pods.AnnotationKept] != "true" {
		t.Errorf("Halted VM B (finalizers %v) took the disk A kept: owners %v, kept=%q, want it left kept for A",
			w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(), got.OwnerReferences, got.Annotations[pods.AnnotationKept])
	}
}

// TestRecreatedVMAfterDiskDelete: VM A (reclaim policy Delete) is deleted, and its way out
// deletes its claim and lets A go; the claim cache has yet to show the deletion (the delete is
// accepted, its watch event not delivered: a delete that leaves the tracker as it is) when VM
// B, made again under the name, is reconciled. A's delete holds for B too: B waits for the
// earlier VM's disk to go, and is not Failed with DiskConflict, whose message tells the owner
// to delete the claim.
func TestRecreatedVMAfterDiskDelete(t *testing.T) {
	w, ownerA := deletedUnder(t, "Delete")
	claim := unlabelledClaim(ownerA)
	claim.Labels = map[string]string{pods.LabelVMUID: string(ownerA.UID)}
	kube := kubefake.NewClientset(claim)
	deletes := 0
	kube.PrependReactor("delete", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		deletes++
		return true, nil, nil // accepted; the cache has yet to show it
	})
	c := podsController(t, w, kube)
	ctx := start(t, c)

	c.processNextItem(ctx) // A's way out: the claim deleted, the finalizer off
	if deletes != 1 || !released(t, w) {
		t.Fatalf("A: %d claim deletes, released %t (reason %s)", deletes, released(t, w), status(t, w, testVM, "reason"))
	}
	madeAgain(t, w, c, "create-new")
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
	}
	if r := status(t, w, testVM, "reason"); r != "WaitingForDisk" {
		t.Errorf("B, made again while A's claim goes: %s %s (%s), want WaitingForDisk for the earlier VM's disk",
			status(t, w, testVM, "phase"), r, status(t, w, testVM, "message"))
	}
}

// madeAgain deletes test-vm, makes it again as the golden case name with another UID and
// rootDiskReclaimPolicy Delete, and returns it once the controller's cache shows it.
func madeAgain(t *testing.T, w *world, c *Controller, name string) *unstructured.Unstructured {
	t.Helper()
	if err := w.client.Tracker().Delete(vmGVR, testVM.Namespace, testVM.Name); err != nil {
		t.Fatal(err)
	}
	b := caseObject(t, name)
	b.SetUID("99999999-aaaa-bbbb-cccc-000000000002")
	b.SetResourceVersion("2000")
	if err := unstructured.SetNestedField(b.Object, "Delete", "spec", "rootDiskReclaimPolicy"); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Tracker().Create(vmGVR, b, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache shows the VM made again", func() bool {
		vm, ok := c.view(testVM)
		return ok && vm.UID() == b.GetUID()
	})
	return b
}
