package reconcile

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestControllerPlainOwnerDeleted: a deleted VM whose claim names it among its owners without
// naming it its controller (an owner reference with the VM's UID and no controller: true,
// which a user or a tool added), labelled or not. The garbage collector deletes such a claim
// with the VM as it does one the VM controls, so under Retain the reference is taken off
// (the claim marked kept, labelled for the VM, a backup tool's reference left) before the VM
// is let go; under Delete the claim is deleted, as an owned one is.
func TestControllerPlainOwnerDeleted(t *testing.T) {
	backup := metav1.OwnerReference{APIVersion: "backup.example/v1", Kind: "Backup", Name: "nightly", UID: "99999999-8888-7777-6666-555555555555"}
	for _, policy := range []string{"Retain", "Delete"} {
		for _, labelled := range []bool{true, false} {
			name := policy + "/unlabelled"
			if labelled {
				name = policy + "/labelled"
			}
			t.Run(name, func(t *testing.T) {
				w, owner := deletedUnder(t, policy)
				claim := unlabelledClaim(owner)
				claim.OwnerReferences[0].Controller, claim.OwnerReferences[0].BlockOwnerDeletion = nil, nil
				claim.OwnerReferences = append(claim.OwnerReferences, backup)
				if labelled {
					claim.Labels = map[string]string{pods.LabelVMUID: string(owner.UID), pods.LabelVM: owner.Name}
				}
				kube := kubefake.NewClientset(claim)
				c := podsController(t, w, kube)
				ctx := start(t, c)

				c.processNextItem(ctx)
				got, err := kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), claim.Name, metav1.GetOptions{})
				vm := w.vm(t, testVM.Namespace, testVM.Name)
				released := vm == nil || len(vm.GetFinalizers()) == 0
				if !released {
					t.Errorf("the VM keeps its finalizer (status %s)", status(t, w, testVM, "reason"))
				}
				want := decision.ReasonDeletingDisk
				switch policy {
				case "Retain":
					want = decision.ReasonDiskRetained
					if err != nil {
						t.Fatalf("the kept claim: %v", err)
					}
					if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != backup.UID {
						t.Errorf("the VM let go while its claim names owners %v: the garbage collector deletes the claim; want the backup's reference alone",
							got.OwnerReferences)
					}
					if got.Annotations[pods.AnnotationKept] != "true" || got.Labels[pods.LabelVMUID] != string(owner.UID) {
						t.Errorf("claim annotations %v, labels %v: want marked kept, labelled for the VM", got.Annotations, got.Labels)
					}
				case "Delete":
					if err == nil && got.DeletionTimestamp == nil {
						t.Errorf("claim %+v left: want it deleted", got.ObjectMeta)
					} else if err != nil && !apierrors.IsNotFound(err) {
						t.Fatal(err)
					}
				}
				if got := strings.Join(w.reasons(), ","); got != want {
					t.Errorf("events %s, want %s", got, want)
				}
			})
		}
	}
}

// TestControllerPlainOwnerOfAnother: a deleted VM under Retain whose claim's name is its disk's
// but which another VM controls, naming the deleted VM as a plain owner too, is let go with
// the claim untouched: it is another's (the garbage collector keeps it while its controller
// lives).
func TestControllerPlainOwnerOfAnother(t *testing.T) {
	w, owner := deletedUnder(t, "Retain")
	claim := unlabelledClaim(owner)
	claim.OwnerReferences[0].Controller, claim.OwnerReferences[0].BlockOwnerDeletion = nil, nil
	claim.OwnerReferences = append(claim.OwnerReferences, metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: owner.Kind,
		Name: "other", UID: "22222222-3333-4444-5555-666666666666", Controller: ptr.To(true)})
	claim.Labels = map[string]string{pods.LabelVMUID: string(owner.UID), pods.LabelVM: owner.Name}
	kube := kubefake.NewClientset(claim)
	c := podsController(t, w, kube)
	ctx := start(t, c)

	c.processNextItem(ctx)
	got, err := kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != claim.ResourceVersion || len(got.OwnerReferences) != 2 {
		t.Errorf("claim %+v: want it untouched", got.ObjectMeta)
	}
	if vm := w.vm(t, testVM.Namespace, testVM.Name); vm != nil && len(vm.GetFinalizers()) != 0 {
		t.Errorf("the VM keeps its finalizer (status %s)", status(t, w, testVM, "reason"))
	}
	if len(w.reasons()) != 0 {
		t.Errorf("events %v, want none", w.reasons())
	}
}

// TestControllerPlainOwnerLive: a live VM under Retain whose claim names it among its owners
// without naming it its controller releases the claim at once, as it does one it controls:
// the reference taken off, the claim marked kept, so that a deletion of the VM later (a
// foreground one included) leaves the garbage collector nothing of the VM's to delete.
func TestControllerPlainOwnerLive(t *testing.T) {
	w := newWorld(t, "create-new")
	u := w.vm(t, testVM.Namespace, testVM.Name)
	if err := unstructured.SetNestedField(u.Object, "Retain", "spec", "rootDiskReclaimPolicy"); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Tracker().Update(vmGVR, u, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
	owner := ownerOf(cachedView(t, u, w.fields))
	claim := unlabelledClaim(owner)
	claim.OwnerReferences[0].Controller, claim.OwnerReferences[0].BlockOwnerDeletion = ptr.To(false), nil
	claim.Labels = map[string]string{pods.LabelVMUID: string(owner.UID), pods.LabelVM: owner.Name}
	kube := kubefake.NewClientset(claim)
	c := podsController(t, w, kube)
	ctx := start(t, c)

	c.processNextItem(ctx)
	got, err := kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.OwnerReferences) != 0 || got.Annotations[pods.AnnotationKept] != "true" {
		t.Errorf("claim owners %v, annotations %v: want no owner, marked kept", got.OwnerReferences, got.Annotations)
	}
	if !slices.Contains(w.reasons(), decision.ReasonRetainingDisk) {
		t.Errorf("events %v, want %s", w.reasons(), decision.ReasonRetainingDisk)
	}
}
