package pods

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestClaimsOnly: a backend with Disks and ClaimsOnly (--root-disk ephemeral) syncs with read
// access to claims alone (StorageClasses and Events forbidden, as its RBAC has them), shows a
// VM's claim left from --root-disk claim, lets go of it (Retain) and deletes it (Delete).
func TestClaimsOnly(t *testing.T) {
	claim := newClaim(diskVM, backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard"})
	claim.ResourceVersion, claim.UID = "5", "11111111-2222-3333-4444-555555555555"
	claim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("30G")}}
	client := kubefake.NewClientset(claim)
	for _, res := range []string{"storageclasses", "events"} {
		client.PrependReactor("*", res, func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
			t.Errorf("%s %s: a backend of claims only reads nothing but claims", a.GetVerb(), res)
			return true, nil, apierrors.NewForbidden(k8sschema.GroupResource{Resource: res}, "", nil)
		})
	}
	b := New(Config{Client: client, Disks: true, ClaimsOnly: true})
	synced, err := b.Start(t.Context(), func(types.NamespacedName) {})
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if !cache.WaitForCacheSync(wait.Done(), synced) {
		t.Fatal("not synced: the backend waits for what it cannot read")
	}
	ctx := context.Background()

	d, err := b.ObserveDisk(diskVM)
	if err != nil || d == nil || d.Owner != backend.DiskOwned || d.Phase != backend.DiskBound {
		t.Fatalf("ObserveDisk: %+v, %v; want the VM's bound claim, owned", d, err)
	}
	if _, err := b.UpdateDisk(ctx, diskVM, d, backend.DiskSpec{Size: d.Requested, Keep: true}); err != nil {
		t.Fatalf("release: %v", err)
	}
	got, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, ClaimName(diskVM.Name), metav1.GetOptions{})
	if err != nil || len(got.OwnerReferences) != 0 || got.Labels[LabelVMUID] != string(diskVM.UID) {
		t.Fatalf("released claim: owners %v, labels %v, %v; want no owner, the VM's label", got.OwnerReferences, got.Labels, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if d, _ = b.ObserveDisk(diskVM); d != nil && d.Owner == backend.DiskKept {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache does not show the claim kept")
		}
	}
	if err := b.DeleteDisk(ctx, diskVM, d); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, ClaimName(diskVM.Name), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim after DeleteDisk: %v, want it deleted", err)
	}
}
