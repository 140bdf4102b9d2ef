package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// The tests of a claim someone took the label LabelVMUID off by hand: the pod backend
// watches only the labelled claims, so its cache no longer shows the VM's disk, though the
// claim is still there, owned by the VM. They run the loop over the pod backend and client-go's
// fake clientset (the memory backend has no cache to fall out of).

// unlabelledClaim is test-vm's claim, bound at 40G, as the backend made it (owned by the VM,
// annotated with its name and kind) but without its labels.
func unlabelledClaim(vm backend.Owner) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pods.ClaimName(vm.Name), Namespace: vm.Namespace, UID: "11111111-2222-3333-4444-555555555555",
			ResourceVersion: "5",
			Annotations:     map[string]string{pods.AnnotationVM: vm.Name, pods.AnnotationOwnerKind: "VirtualMachine.cloudnative.czs"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: vm.APIVersion, Kind: vm.Kind, Name: vm.Name, UID: vm.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("40G")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound,
			Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("40G")}},
	}
}

// podsController builds a controller over w's VMs under --root-disk claim whose backend is the
// pod backend over kube.
func podsController(t *testing.T, w *world, kube *kubefake.Clientset) *Controller {
	t.Helper()
	return New(Config{VMs: w.source(), Backend: pods.New(pods.Config{Client: kube, Disks: true}),
		Policy: decision.DefaultPolicy, Retry: quickRetry(), Report: w.report(nil),
		Now: func() time.Time { return now }})
}

// TestControllerUnlabelledClaimDeleted: a deleted VM whose claim lost its label (so the
// backend's cache shows no disk) is not let go on the cache's word. Under Retain the claim is
// released first (no owner reference, marked kept, its labels back): let go while the claim
// still names the VM its controller, the VM would leave it to the garbage collector, which
// deletes what a deleted VM owns, the owner's data with it. Under Delete the claim is deleted,
// as a labelled one is.
func TestControllerUnlabelledClaimDeleted(t *testing.T) {
	tests := map[string]struct {
		policy string
		event  string
	}{
		"retain": {"Retain", decision.ReasonDiskRetained},
		"delete": {"Delete", decision.ReasonDeletingDisk},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w, owner := deletedUnder(t, tc.policy)
			kube := kubefake.NewClientset(unlabelledClaim(owner))
			c := podsController(t, w, kube)
			ctx := start(t, c)
			if d, _ := c.cfg.Backend.(backend.Disks).ObserveDisk(owner); d != nil {
				t.Fatalf("the cache shows the unlabelled claim: %+v", d)
			}

			c.processNextItem(ctx)
			claim, err := kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), pods.ClaimName(owner.Name), metav1.GetOptions{})
			released := w.vm(t, testVM.Namespace, testVM.Name) == nil || len(w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers()) == 0
			switch tc.policy {
			case "Retain":
				if err != nil {
					t.Fatalf("the kept claim: %v", err)
				}
				if released && len(claim.OwnerReferences) != 0 {
					t.Fatalf("the VM was let go while its claim still names it its owner (%v): the garbage collector deletes the claim", claim.OwnerReferences)
				}
				if len(claim.OwnerReferences) != 0 || claim.Annotations[pods.AnnotationKept] != "true" || claim.Labels[pods.LabelVMUID] != string(owner.UID) {
					t.Errorf("claim owners %v, annotations %v, labels %v: want released, marked kept, labelled again",
						claim.OwnerReferences, claim.Annotations, claim.Labels)
				}
			case "Delete":
				if err == nil && claim.DeletionTimestamp == nil {
					t.Errorf("claim %+v left: want it deleted", claim.ObjectMeta)
				} else if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
			if !released {
				t.Errorf("the VM keeps its finalizer (status %s)", status(t, w, testVM, "reason"))
			}
			if got := strings.Join(w.reasons(), ","); got != tc.event {
				t.Errorf("events %s, want %s", got, tc.event)
			}
		})
	}
}

// TestControllerUnlabelledClaimLive: a live VM whose claim lost its label puts the label back
// (CreateDisk finds the claim of its name, which the VM controls), so that the cache shows the
// disk again and the VM is decided on it, rather than asking to create it once more each time
// its expectation runs out.
func TestControllerUnlabelledClaimLive(t *testing.T) {
	w := newWorld(t, "create-new")
	owner := ownerOf(w.view(t, "create-new"))
	kube := kubefake.NewClientset(unlabelledClaim(owner))
	c := podsController(t, w, kube)
	ctx := start(t, c)

	c.processNextItem(ctx)
	claim, err := kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), pods.ClaimName(owner.Name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if claim.UID != "11111111-2222-3333-4444-555555555555" || claim.Labels[pods.LabelVMUID] != string(owner.UID) {
		t.Fatalf("claim %s labelled %v: want the same claim, labelled for the VM again", claim.UID, claim.Labels)
	}
	eventually(t, "the cache shows the disk again", func() bool {
		d, _ := c.cfg.Backend.(backend.Disks).ObserveDisk(owner)
		return d != nil && d.Owner == backend.DiskOwned && d.ID == string(claim.UID)
	})
	if ref := metav1.GetControllerOf(claim); ref == nil || ref.UID != owner.UID {
		t.Errorf("claim controlled by %v, want the VM", ref)
	}
}

// TestControllerUnlabelledClaimNotGone: a VM whose status reports its disk bound, and whose
// claim lost its label, is not told its disk was deleted (DiskDeleted, for a stopped VM) or
// made again empty (DiskRecreated, for one to run): the claim is there, with its data. A VM
// to run puts the label back, as one with no disk reported does.
func TestControllerUnlabelledClaimNotGone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		relabels bool
	}{{"claim/inactive-disk-deleted", false}, {"claim/disk-recreated", true}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.name)
			owner := ownerOf(w.view(t, tc.name))
			kube := kubefake.NewClientset(unlabelledClaim(owner))
			c := podsController(t, w, kube)
			ctx := start(t, c)
			c.processNextItem(ctx)
			reasons := w.reasons()
			for _, r := range reasons {
				if r == decision.ReasonDiskDeleted || r == decision.ReasonDiskRecreated {
					t.Errorf("events %v: a Warning that the disk went, and its claim is there", reasons)
				}
			}
			claim, err := kube.CoreV1().PersistentVolumeClaims(owner.Namespace).Get(context.Background(), pods.ClaimName(owner.Name), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if claim.UID != "11111111-2222-3333-4444-555555555555" {
				t.Fatalf("claim %s, want the VM's own", claim.UID)
			}
			if labelled := claim.Labels[pods.LabelVMUID] == string(owner.UID); labelled != tc.relabels {
				t.Errorf("claim labelled for the VM: %t, want %t", labelled, tc.relabels)
			}
			if !tc.relabels {
				if d := status(t, w, testVM, "rootDisk", "claimName"); d != claim.Name {
					t.Errorf("status.rootDisk.claimName %q, want the claim kept in the status", d)
				}
			}
		})
	}
}
