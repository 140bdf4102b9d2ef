package pods

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// The claim that names its VM among its owners without naming it its controller: an owner
// reference with the VM's UID and no controller: true, which a user or a tool added. The
// garbage collector deletes it with the VM all the same, so the VM owns it, and a release
// (reclaim policy Retain) must take that reference off too.

// plainRef is an owner reference to vm that does not say it controls (controller as given:
// nil or false).
func plainRef(vm backend.Owner, controller *bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: vm.APIVersion, Kind: vm.Kind, Name: vm.Name, UID: vm.UID, Controller: controller}
}

// backupRef is an owner reference of another object (a backup tool's, say), which no VM's
// release may take off.
var backupRef = metav1.OwnerReference{APIVersion: "backup.example/v1", Kind: "Backup", Name: "nightly",
	UID: "99999999-8888-7777-6666-555555555555"}

// plainOwned is diskVM's claim, bound at 30G, made as CreateDisk makes it for a VM that names
// Delete, whose owner references someone then replaced with refs.
func plainOwned(refs ...metav1.OwnerReference) *corev1.PersistentVolumeClaim {
	c := newClaim(diskVM, backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard"})
	c.ResourceVersion, c.UID, c.OwnerReferences = "5", "11111111-2222-3333-4444-555555555555", refs
	c.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("30G")}}
	return c
}

// refUIDs are the UIDs of the claim's owner references, in order.
func refUIDs(c *corev1.PersistentVolumeClaim) []types.UID {
	var out []types.UID
	for _, r := range c.OwnerReferences {
		out = append(out, r.UID)
	}
	return out
}

// TestClaimPlainOwner: whose a claim is, as seen from diskVM, when an owner reference names
// the VM without saying it controls the claim: the VM's own (Owned), labelled or not,
// labelled for an earlier VM or not; another's when another object controls it. A reference
// of another object that does not control changes nothing. The cached claim that gains or
// loses such a reference is not the same disk (the VM is decided again).
func TestClaimPlainOwner(t *testing.T) {
	other := backend.Owner{APIVersion: diskVM.APIVersion, Kind: diskVM.Kind, Namespace: "ns", Name: "b", UID: "22222222-3333-4444-5555-666666666666"}
	tests := []struct {
		name  string
		claim func() *corev1.PersistentVolumeClaim
		want  backend.DiskOwner
	}{
		{"the VM's plain owner reference", func() *corev1.PersistentVolumeClaim {
			return plainOwned(plainRef(diskVM, nil))
		}, backend.DiskOwned},
		{"controller false, beside another object's", func() *corev1.PersistentVolumeClaim {
			return plainOwned(backupRef, plainRef(diskVM, ptr.To(false)))
		}, backend.DiskOwned},
		{"kept, marked, then named an owner", func() *corev1.PersistentVolumeClaim {
			c := plainOwned(plainRef(diskVM, nil))
			c.Annotations[AnnotationKept] = "true"
			return c
		}, backend.DiskOwned},
		{"unlabelled", func() *corev1.PersistentVolumeClaim {
			c := plainOwned(plainRef(diskVM, nil))
			c.Labels = nil
			return c
		}, backend.DiskOwned},
		{"labelled for an earlier VM of the name", func() *corev1.PersistentVolumeClaim {
			c := plainOwned(plainRef(diskVM, nil))
			c.Labels[LabelVMUID] = "33333333-4444-5555-6666-777777777777"
			return c
		}, backend.DiskOwned},
		{"a test's UIDs, not UUIDs", func() *corev1.PersistentVolumeClaim {
			c := plainOwned(plainRef(diskVM, nil))
			c.UID, c.ResourceVersion = "claim-1", "v7"
			return c
		}, backend.DiskOwned},
		{"controlled by another VM, the VM a plain owner", func() *corev1.PersistentVolumeClaim {
			return plainOwned(plainRef(diskVM, nil), controllerRef(other))
		}, backend.DiskOther},
		{"another object's plain reference only, kept", func() *corev1.PersistentVolumeClaim {
			c := plainOwned(backupRef)
			c.Annotations[AnnotationKept] = "true"
			return c
		}, backend.DiskKept},
		{"an earlier VM of the name's plain reference, labelled for it", func() *corev1.PersistentVolumeClaim {
			earlier := diskVM
			earlier.UID = "33333333-4444-5555-6666-777777777777"
			c := plainOwned(plainRef(earlier, nil))
			c.Labels[LabelVMUID] = string(earlier.UID)
			return c
		}, backend.DiskOther},
		{"labelled for an earlier VM of the name, another object's plain reference", func() *corev1.PersistentVolumeClaim {
			c := plainOwned(backupRef)
			c.Labels[LabelVMUID] = "33333333-4444-5555-6666-777777777777"
			return c
		}, backend.DiskOther},
		{"another VM's plain reference, unlabelled", func() *corev1.PersistentVolumeClaim {
			c := plainOwned(plainRef(other, nil))
			c.Labels = nil
			return c
		}, backend.DiskOther},
	}
	for _, tc := range tests {
		pvc := tc.claim()
		c := cacheClaim(pvc)
		d := c.disk(diskVM, true, "")
		if d.Owner != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, d.Owner, tc.want)
		}
		if d.ID != string(pvc.UID) || d.Version != pvc.ResourceVersion || c.GetUID() != pvc.UID || d.Requested.String() != "30G" {
			t.Errorf("%s: read back as %+v", tc.name, d)
		}
		if !c.same(cacheClaim(pvc)) {
			t.Errorf("%s: not the same as itself", tc.name)
		}
		bare := pvc.DeepCopy()
		bare.OwnerReferences = nil
		if c.same(cacheClaim(bare)) || cacheClaim(bare).same(c) {
			t.Errorf("%s: the same disk without its owner references", tc.name)
		}
	}
	// Two claims that both keep their values exactly differ in whose owners they name.
	a, b := plainOwned(plainRef(diskVM, nil)), plainOwned(plainRef(other, nil))
	a.UID, b.UID = "claim-1", "claim-1"
	if cacheClaim(a).same(cacheClaim(b)) {
		t.Errorf("claims of different owners read as the same disk")
	}
}

// TestUpdateDiskReleasesPlainOwner: a claim that names diskVM among its owners without naming
// it its controller, beside a backup tool's reference, is the VM's own (ObserveDisk, or
// ReadDisk when it lost its label); kept (reclaim policy Retain), one patch conditional on the
// version seen takes the VM's reference off, leaves the other object's, marks the claim kept
// and labels it for the VM, so that the garbage collector does not delete it with the VM.
// Owned again (Delete), the VM becomes its controller, the other reference still there.
func TestUpdateDiskReleasesPlainOwner(t *testing.T) {
	ctx := context.Background()
	for name, labelled := range map[string]bool{"labelled": true, "unlabelled": false} {
		t.Run(name, func(t *testing.T) {
			claim := plainOwned(backupRef, plainRef(diskVM, ptr.To(false)))
			if !labelled {
				claim.Labels = nil
			}
			client := kubefake.NewClientset(storageClass("standard", true), claim)
			patches := claimPatches(client)
			b, notified := diskBackend(t, client)

			var seen *backend.Disk
			if labelled {
				awaitDisk(t, b, notified, "a-rootdisk Owned Bound 30G/30G grow=true  \"\" \"\" del=false", false)
				seen, _ = b.ObserveDisk(diskVM)
			} else {
				awaitDisk(t, b, notified, "none", false)
				var err error
				if seen, err = b.ReadDisk(ctx, diskVM); err != nil || seen == nil || seen.Owner != backend.DiskOwned {
					t.Fatalf("ReadDisk: %s, %v; want the claim, owned", diskLine(seen), err)
				}
			}
			kept, err := b.UpdateDisk(ctx, diskVM, seen, backend.DiskSpec{Size: resource.MustParse("30G"), Keep: true})
			if err != nil {
				t.Fatal(err)
			}
			if want := "a-rootdisk Kept Bound 30G/30G grow=true  \"\" \"\" del=false marked"; diskLine(kept) != want {
				t.Errorf("kept %s, want %s", diskLine(kept), want)
			}
			got, _ := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "a-rootdisk", metav1.GetOptions{})
			if uids := refUIDs(got); !slices.Equal(uids, []types.UID{backupRef.UID}) {
				t.Errorf("kept claim's owners %v, want the backup's alone: the garbage collector deletes a claim that names the deleted VM", uids)
			}
			if got.Annotations[AnnotationKept] != "true" || got.Labels[LabelVMUID] != string(diskVM.UID) {
				t.Errorf("kept claim %+v: want marked kept, labelled for the VM", got.ObjectMeta)
			}
			if len(*patches) != 1 || (*patches)[0]["metadata"].(map[string]any)["resourceVersion"] != "5" {
				t.Errorf("patches %v, want one, conditional on version 5", *patches)
			}

			// And owned again, as a VM that names Delete asks.
			again, err := b.UpdateDisk(ctx, diskVM, kept, backend.DiskSpec{Size: resource.MustParse("30G")})
			if err != nil {
				t.Fatal(err)
			}
			got, _ = client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "a-rootdisk", metav1.GetOptions{})
			if ref := metav1.GetControllerOf(got); again.Owner != backend.DiskOwned || ref == nil || ref.UID != diskVM.UID ||
				!slices.Contains(refUIDs(got), backupRef.UID) || len(got.OwnerReferences) != 2 {
				t.Errorf("owned again: %s, owners %+v; want controlled by the VM, the backup's reference kept", diskLine(again), got.OwnerReferences)
			}
		})
	}
}

// TestUpdateDiskMergesPlainOwner: a VM that names Delete and owns its claim by a reference
// that does not say it controls, asked to own it (a kept mark removed), becomes its
// controller: the reference is merged by its UID, not doubled.
func TestUpdateDiskMergesPlainOwner(t *testing.T) {
	ctx := context.Background()
	claim := plainOwned(plainRef(diskVM, nil))
	claim.Annotations[AnnotationKept] = "true"
	client := kubefake.NewClientset(storageClass("standard", true), claim)
	b, notified := diskBackend(t, client)
	awaitDisk(t, b, notified, "a-rootdisk Owned Bound 30G/30G grow=true  \"\" \"\" del=false marked", false)
	seen, _ := b.ObserveDisk(diskVM)
	if _, err := b.UpdateDisk(ctx, diskVM, seen, backend.DiskSpec{Size: resource.MustParse("30G")}); err != nil {
		t.Fatal(err)
	}
	got, _ := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "a-rootdisk", metav1.GetOptions{})
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != diskVM.UID || len(got.OwnerReferences) != 1 || got.Annotations[AnnotationKept] != "" {
		t.Errorf("claim %+v: want controlled by the VM, one reference, not marked kept", got.ObjectMeta)
	}
}

// TestDeleteDiskPlainOwner: under reclaim policy Delete, the claim that names the VM among
// its owners goes with the VM as an owned one does, labelled or not (the unlabelled one read
// past the cache).
func TestDeleteDiskPlainOwner(t *testing.T) {
	ctx := context.Background()
	for name, labelled := range map[string]bool{"labelled": true, "unlabelled": false} {
		t.Run(name, func(t *testing.T) {
			claim := plainOwned(plainRef(diskVM, nil))
			if !labelled {
				claim.Labels = nil
			}
			client := kubefake.NewClientset(storageClass("standard", true), claim)
			b, _ := diskBackend(t, client)
			seen, err := b.ReadDisk(ctx, diskVM)
			if err != nil || seen == nil || seen.Owner != backend.DiskOwned {
				t.Fatalf("ReadDisk: %s, %v; want the claim, owned", diskLine(seen), err)
			}
			if err := b.DeleteDisk(ctx, diskVM, seen); err != nil {
				t.Fatal(err)
			}
			if _, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "a-rootdisk", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("claim after DeleteDisk: %v, want it gone", err)
			}
		})
	}
}

// TestPlainOwnerOfAnother: a claim another VM controls, which names diskVM too without saying
// it controls, is another's: neither released, taken nor deleted, and nothing is written.
func TestPlainOwnerOfAnother(t *testing.T) {
	ctx := context.Background()
	other := backend.Owner{APIVersion: diskVM.APIVersion, Kind: diskVM.Kind, Namespace: "ns", Name: "b", UID: "22222222-3333-4444-5555-666666666666"}
	claim := plainOwned(plainRef(diskVM, nil), controllerRef(other))
	client := kubefake.NewClientset(storageClass("standard", true), claim)
	patches := claimPatches(client)
	b, notified := diskBackend(t, client)
	awaitDisk(t, b, notified, "a-rootdisk Other Bound 30G/30G grow=true  \"\" \"\" del=false", false)
	seen, _ := b.ObserveDisk(diskVM)
	if _, err := b.UpdateDisk(ctx, diskVM, seen, backend.DiskSpec{Size: resource.MustParse("30G"), Keep: true}); !errors.Is(err, backend.ErrDiskConflict) {
		t.Errorf("UpdateDisk: %v, want ErrDiskConflict", err)
	}
	if _, err := b.CreateDisk(ctx, diskVM, backend.DiskSpec{Size: resource.MustParse("30G"), Keep: true}); !errors.Is(err, backend.ErrDiskConflict) {
		t.Errorf("CreateDisk: %v, want ErrDiskConflict", err)
	}
	if err := b.DeleteDisk(ctx, diskVM, seen); err != nil {
		t.Errorf("DeleteDisk: %v", err)
	}
	got, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "a-rootdisk", metav1.GetOptions{})
	if err != nil || len(got.OwnerReferences) != 2 || len(*patches) != 0 {
		t.Errorf("claim %v (%v), patches %v: want it untouched", got, err, *patches)
	}
}
