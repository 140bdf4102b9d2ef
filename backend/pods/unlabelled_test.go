package pods

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/access"
	"github.com/cloudnative-czs/vm-controller/backend"
)

// The claim of a VM whose label LabelVMUID someone took off by hand: the label-selected cache
// drops it, though the claim is still there and the VM may still control it.

// unlabelled is diskVM's claim, bound at 30G, made as CreateDisk makes it (kept when keep)
// and then stripped of its labels.
func unlabelled(keep bool) *corev1.PersistentVolumeClaim {
	c := newClaim(diskVM, backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard", Keep: keep})
	c.ResourceVersion, c.UID, c.Labels = "5", "11111111-2222-3333-4444-555555555555", nil
	c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("30G")}}
	return c
}

// claimPatches records the bodies of the patches of claims client receives.
func claimPatches(client *kubefake.Clientset) *[]map[string]any {
	var patches []map[string]any
	client.PrependReactor("patch", "persistentvolumeclaims", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		var body map[string]any
		_ = json.Unmarshal(a.(clienttesting.PatchAction).GetPatch(), &body)
		patches = append(patches, body)
		return false, nil, nil
	})
	return &patches
}

// TestDiskUnlabelled: a claim the VM controls but that lost its label is not in the cache
// (ObserveDisk: none); ReadDisk reads it from the API server, owned by the VM; CreateDisk, which
// a decision on the cache's "none" asks for, finds it and labels it again in one patch
// conditional on its resourceVersion, so that the cache shows it again, the same claim. A kept
// claim that lost its label (controlled by nothing) cannot be told from one made by hand: it is
// another's to ReadDisk, and CreateDisk over it is a conflict that leaves it untouched.
func TestDiskUnlabelled(t *testing.T) {
	ctx := context.Background()
	t.Run("owned", func(t *testing.T) {
		claim := unlabelled(false)
		client := kubefake.NewClientset(storageClass("standard", true), claim)
		patches := claimPatches(client)
		b, notified := diskBackend(t, client)
		awaitDisk(t, b, notified, "none", false)

		read, err := b.ReadDisk(ctx, diskVM)
		if err != nil || read == nil || read.Owner != backend.DiskOwned || read.ID != string(claim.UID) || read.Version != "5" {
			t.Fatalf("ReadDisk: %+v, %v; want the claim, owned, at version 5", read, err)
		}
		created, err := b.CreateDisk(ctx, diskVM, backend.DiskSpec{Size: resource.MustParse("40G"), StorageClass: "standard"})
		if err != nil {
			t.Fatal(err)
		}
		if want := "a-rootdisk Owned Bound 30G/30G grow=true  \"\" \"\" del=false"; diskLine(created) != want || created.ID != string(claim.UID) {
			t.Errorf("created %s (%s), want %s, the same claim", diskLine(created), created.ID, want)
		}
		if len(*patches) != 1 {
			t.Fatalf("patches %v, want one", *patches)
		}
		if meta := (*patches)[0]["metadata"].(map[string]any); meta["resourceVersion"] != "5" || len((*patches)[0]) != 1 {
			t.Errorf("patch %v: want labels and the annotation only, conditional on version 5", (*patches)[0])
		}
		got, _ := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "a-rootdisk", metav1.GetOptions{})
		if got.UID != claim.UID || got.Labels[LabelVMUID] != string(diskVM.UID) || got.Labels[LabelVM] != "a" ||
			metav1.GetControllerOf(got) == nil || got.Spec.Resources.Requests.Storage().String() != "30G" {
			t.Errorf("claim %+v: want the same one, labelled again, owned, its size as it was", got.ObjectMeta)
		}
		awaitDisk(t, b, notified, "a-rootdisk Owned Bound 30G/30G grow=true  \"\" \"\" del=false", false)
	})
	t.Run("kept", func(t *testing.T) {
		client := kubefake.NewClientset(storageClass("standard", true), unlabelled(true))
		patches := claimPatches(client)
		b, notified := diskBackend(t, client)
		awaitDisk(t, b, notified, "none", false)

		if read, err := b.ReadDisk(ctx, diskVM); err != nil || read == nil || read.Owner != backend.DiskOther {
			t.Errorf("ReadDisk: %+v, %v; want the claim, another's", read, err)
		}
		if _, err := b.CreateDisk(ctx, diskVM, backend.DiskSpec{Size: resource.MustParse("30G"), Keep: true}); !errors.Is(err, backend.ErrDiskConflict) {
			t.Errorf("CreateDisk: %v, want ErrDiskConflict", err)
		}
		if len(*patches) != 0 {
			t.Errorf("patches %v of a claim that is not the VM's", *patches)
		}
	})
	t.Run("none", func(t *testing.T) {
		b, _ := diskBackend(t, kubefake.NewClientset())
		if read, err := b.ReadDisk(ctx, diskVM); err != nil || read != nil {
			t.Errorf("ReadDisk: %+v, %v; want none", read, err)
		}
	})
}

// TestClaimsOnlyUnlabelled: under --root-disk ephemeral (ClaimsOnly), with the RBAC of that
// mode and nothing more, the way out of a VM whose claim lost its label: ReadDisk reads the
// claim, owned, and UpdateDisk on it releases it (Retain) and labels it again.
func TestClaimsOnlyUnlabelled(t *testing.T) {
	client := kubefake.NewClientset(unlabelled(false))
	gvr := schema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1alpha1", Resource: "virtualmachines"}
	authz := enforceRBAC(client, access.Rules(access.Needs{GVR: gvr}))
	b, notified := started(t, Config{Client: client, Disks: true, ClaimsOnly: true})
	awaitDisk(t, b, notified, "none", false)
	ctx := context.Background()

	read, err := b.ReadDisk(ctx, diskVM)
	if err != nil || read == nil || read.Owner != backend.DiskOwned {
		t.Fatalf("ReadDisk: %+v, %v; want the claim, owned", read, err)
	}
	if _, err := b.UpdateDisk(ctx, diskVM, read, backend.DiskSpec{Size: read.Requested, Keep: true}); err != nil {
		t.Fatalf("release: %v", err)
	}
	got, _ := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "a-rootdisk", metav1.GetOptions{})
	if len(got.OwnerReferences) != 0 || got.Labels[LabelVMUID] != string(diskVM.UID) || got.Annotations[AnnotationKept] != "true" {
		t.Errorf("claim owners %v, labels %v, annotations %v: want released, labelled, marked kept", got.OwnerReferences, got.Labels, got.Annotations)
	}
	awaitDisk(t, b, notified, "a-rootdisk Kept Bound 30G/30G grow=false  \"\" \"\" del=false marked", false)
	authz.check(t, []string{"list persistentvolumeclaims", "get persistentvolumeclaims", "patch persistentvolumeclaims"})
}
