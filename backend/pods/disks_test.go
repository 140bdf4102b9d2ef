package pods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// diskVM is the VM of the disk tests: ns/a (await's).
var diskVM = backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "7c433542-8907-45fe-887a-7813523dba9e"}

// diskBackend starts a backend that keeps disks over client and returns the channel of its
// notices.
func diskBackend(t *testing.T, client *kubefake.Clientset) (*Backend, <-chan types.NamespacedName) {
	t.Helper()
	return started(t, Config{Client: client, Disks: true})
}

func storageClass(name string, grows bool) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}, Provisioner: "kubernetes.io/host-path",
		AllowVolumeExpansion: ptr.To(grows)}
}

func diskLine(d *backend.Disk) string {
	if d == nil {
		return "none"
	}
	line := fmt.Sprintf("%s %s %s %s/%s grow=%v %s %q %q del=%v", d.Name, d.Owner, d.Phase, d.Requested.String(), d.Capacity.String(),
		d.CanGrow, d.Growth.State, d.Growth.Message, d.Pending, d.Deleting)
	if d.KeptMark {
		line += " marked"
	}
	return line
}

// awaitDisk waits until the disk of diskVM, as ObserveDisk shows it, is want. With notice, a
// change of others' must have notified the VM by then (the backend's own writes need not:
// their echoes bring nothing new, see echo). Every notice must name diskVM.
func awaitDisk(t *testing.T, b *Backend, notified <-chan types.NamespacedName, want string, notice bool) {
	t.Helper()
	noticed := false
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		for len(notified) > 0 {
			if got := <-notified; got != (types.NamespacedName{Namespace: "ns", Name: "a"}) {
				t.Fatalf("notified %v, want ns/a", got)
			}
			noticed = true
		}
		d, _ := b.ObserveDisk(diskVM)
		if diskLine(d) == want && (noticed || !notice) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the disk is %s (noticed: %v), want %s", diskLine(d), noticed, want)
		}
	}
}

// TestDisksTyped walks a VM's claim through the typed clientset: CreateDisk writes it
// (labelled, annotated, controlled by the VM, ReadWriteOnce, of the size and class asked); the
// binder's Event on it says why it is not bound; bound, it has its capacity; UpdateDisk grows
// it, keeps it (the owner reference removed, the labels kept, marked kept) and owns it again
// (the mark removed), each a strategic merge patch, and writes nothing when it is as asked; a StorageClass that starts
// allowing expansion notifies the VM; DeleteDisk deletes it on its UID and resourceVersion as observed. Each change reaches the
// VM's notify.
func TestDisksTyped(t *testing.T) {
	client := kubefake.NewClientset(storageClass("standard", true), storageClass("fixed", false))
	b, notified := diskBackend(t, client)
	ctx := context.Background()
	claims := client.CoreV1().PersistentVolumeClaims("ns")

	created, err := b.CreateDisk(ctx, diskVM, backend.DiskSpec{Size: resource.MustParse("40G"), StorageClass: "standard"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "a-rootdisk Owned Pending 40G/0 grow=true  \"\" \"\" del=false"; diskLine(created) != want {
		t.Errorf("created %s, want %s", diskLine(created), want)
	}
	pvc, err := claims.Get(ctx, "a-rootdisk", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := metav1.GetControllerOf(pvc)
	if pvc.Labels[LabelVMUID] != string(diskVM.UID) || pvc.Labels[LabelVM] != "a" || pvc.Annotations[AnnotationVM] != "a" ||
		pvc.Annotations[AnnotationOwnerKind] != "VirtualMachine.cloudnative.czs" ||
		ref == nil || ref.UID != diskVM.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) ||
		len(pvc.Spec.AccessModes) != 1 || pvc.Spec.AccessModes[0] != corev1.ReadWriteOnce || ptr.Deref(pvc.Spec.StorageClassName, "") != "standard" {
		t.Errorf("claim %+v", pvc.ObjectMeta)
	}
	awaitDisk(t, b, notified, "a-rootdisk Owned Pending 40G/0 grow=true  \"\" \"\" del=false", false)

	// The binder says why it is not bound: the latest Event on the claim, but the one that
	// says its volume was made; Events on other objects or claims are not its.
	event := func(name, reason, message string, at time.Time, kind string, uid types.UID) {
		t.Helper()
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Reason: reason, Message: message, Type: corev1.EventTypeWarning,
			InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: "ns", Name: "a-rootdisk", UID: uid}, LastTimestamp: metav1.NewTime(at)}
		if _, err := client.CoreV1().Events("ns").Create(ctx, e, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	event("e1", "ProvisioningFailed", `storageclass.storage.k8s.io "standard" not found`, at, "PersistentVolumeClaim", pvc.UID)
	awaitDisk(t, b, notified, "a-rootdisk Owned Pending 40G/0 grow=true  \"\" \"storageclass.storage.k8s.io \\\"standard\\\" not found\" del=false", true)
	event("e2", provisioned, "Successfully provisioned volume pvc-1", at.Add(time.Second), "PersistentVolumeClaim", pvc.UID)
	event("e3", "Scheduled", "on another kind", at.Add(2*time.Second), "Pod", pvc.UID)
	event("e4", "ProvisioningFailed", "of an earlier claim of the name", at.Add(3*time.Second), "PersistentVolumeClaim", "old-uid")
	if d, _ := b.ObserveDisk(diskVM); d.Pending != `storageclass.storage.k8s.io "standard" not found` {
		t.Errorf("the binder's word is %q", d.Pending)
	}

	// Bound, with its capacity; the binder's word is over.
	// Each write of another's carries a version of its own, as the API server gives every
	// write: the fake clientset keeps the version a write sends, and the backend tells the
	// echo of its own write by its version (echo), so another's write of the same version
	// could pass for one.
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("40G")}}
	pvc.ResourceVersion = "100"
	if pvc, err = claims.UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitDisk(t, b, notified, "a-rootdisk Owned Bound 40G/40G grow=true  \"\" \"\" del=false", true)

	// Grown, kept, owned again: each one patch; nothing to change, no patch.
	patches := 0
	client.PrependReactor("patch", "persistentvolumeclaims", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		if p := a.(clienttesting.PatchAction); p.GetPatchType() != types.StrategicMergePatchType {
			t.Errorf("patch of type %s", p.GetPatchType())
		}
		patches++
		return false, nil, nil
	})
	steps := []struct {
		spec     backend.DiskSpec
		want     string
		patches  int
		owned    bool
		requests string
	}{
		{backend.DiskSpec{Size: resource.MustParse("50G")}, "a-rootdisk Owned Bound 50G/40G grow=true  \"\" \"\" del=false", 1, true, "50G"},
		{backend.DiskSpec{Size: resource.MustParse("50G"), Keep: true}, "a-rootdisk Kept Bound 50G/40G grow=true  \"\" \"\" del=false marked", 2, false, "50G"},
		{backend.DiskSpec{Size: resource.MustParse("10G"), Keep: true}, "a-rootdisk Kept Bound 50G/40G grow=true  \"\" \"\" del=false marked", 2, false, "50G"},
		{backend.DiskSpec{Size: resource.MustParse("50G")}, "a-rootdisk Owned Bound 50G/40G grow=true  \"\" \"\" del=false", 3, true, "50G"},
	}
	for i, s := range steps {
		seen, _ := b.ObserveDisk(diskVM)
		d, err := b.UpdateDisk(ctx, diskVM, seen, s.spec)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if diskLine(d) != s.want || patches != s.patches {
			t.Errorf("step %d: returned %s after %d patches, want %s after %d", i, diskLine(d), patches, s.want, s.patches)
		}
		awaitDisk(t, b, notified, s.want, false)
		got, _ := claims.Get(ctx, "a-rootdisk", metav1.GetOptions{})
		_, marked := got.Annotations[AnnotationKept]
		if owned := metav1.GetControllerOf(got) != nil; owned != s.owned || got.Labels[LabelVMUID] != string(diskVM.UID) ||
			got.Annotations[AnnotationVM] != "a" || marked == s.owned || got.Spec.Resources.Requests.Storage().String() != s.requests {
			t.Errorf("step %d: claim owned %v, labels %v, annotations %v, requests %s", i, owned, got.Labels, got.Annotations, got.Spec.Resources.Requests.Storage())
		}
	}

	// The class of the claim starts to say no: the VM hears of it.
	pvc, _ = claims.Get(ctx, "a-rootdisk", metav1.GetOptions{})
	pvc.Spec.StorageClassName = ptr.To("fixed")
	pvc.ResourceVersion = "200"
	if _, err := claims.Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitDisk(t, b, notified, "a-rootdisk Owned Bound 50G/40G grow=false  \"\" \"\" del=false", true)
	if _, err := client.StorageV1().StorageClasses().Update(ctx, storageClass("fixed", true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitDisk(t, b, notified, "a-rootdisk Owned Bound 50G/40G grow=true  \"\" \"\" del=false", true)
	// Deleted, and made again under its name (how a class that is to allow expansion is changed,
	// most of its fields being fixed): the VM hears of each.
	if err := client.StorageV1().StorageClasses().Delete(ctx, "fixed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitDisk(t, b, notified, "a-rootdisk Owned Bound 50G/40G grow=false  \"\" \"\" del=false", true)
	if _, err := client.StorageV1().StorageClasses().Create(ctx, storageClass("fixed", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitDisk(t, b, notified, "a-rootdisk Owned Bound 50G/40G grow=true  \"\" \"\" del=false", true)

	// Another VM of the name (another UID) sees another's claim, and cannot take or delete it.
	other := diskVM
	other.UID = "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"
	if d, _ := b.ObserveDisk(other); d == nil || d.Owner != backend.DiskOther {
		t.Errorf("another VM of the name sees %s", diskLine(d))
	}
	seen, _ := b.ObserveDisk(other)
	if _, err := b.UpdateDisk(ctx, other, seen, backend.DiskSpec{Size: resource.MustParse("50G")}); !errors.Is(err, backend.ErrDiskConflict) {
		t.Errorf("update of another's: %v, want ErrDiskConflict", err)
	}
	if err := b.DeleteDisk(ctx, other, seen); err != nil {
		t.Fatal(err)
	}
	if _, err := claims.Get(ctx, "a-rootdisk", metav1.GetOptions{}); err != nil {
		t.Fatalf("another VM deleted the claim: %v", err)
	}

	seen, _ = b.ObserveDisk(diskVM)
	if err := b.DeleteDisk(ctx, diskVM, seen); err != nil {
		t.Fatal(err)
	}
	awaitDisk(t, b, notified, "none", true)
}

// TestDisksAdoptAndConflict: a claim kept by an earlier VM of the name (labelled for the name,
// no controller, marked kept) is unowned to the new VM, which adopts it in one patch, owned
// and no longer marked (a VM that names reclaim policy Delete); a claim of the name
// that the backend did not make is not in the cache, and creating the disk over it is a
// conflict, never a takeover; a claim of the VM's own that the cache does not show yet is
// returned by CreateDisk as it is.
func TestDisksAdoptAndConflict(t *testing.T) {
	kept := newClaim(backend.Owner{Namespace: "ns", Name: "a", UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"},
		backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard", Keep: true})
	kept.ResourceVersion, kept.UID = "5", "11111111-2222-3333-4444-555555555555"
	kept.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("30G")}}
	foreign := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "b-rootdisk", Namespace: "ns", ResourceVersion: "6"}}
	client := kubefake.NewClientset(storageClass("standard", true), kept, foreign)
	b, notified := diskBackend(t, client)
	ctx := context.Background()

	awaitDisk(t, b, notified, "a-rootdisk Unowned Bound 30G/30G grow=true  \"\" \"\" del=false marked", true)
	seen, _ := b.ObserveDisk(diskVM)
	adopted, err := b.UpdateDisk(ctx, diskVM, seen, backend.DiskSpec{Size: resource.MustParse("40G")})
	if err != nil {
		t.Fatal(err)
	}
	if want := "a-rootdisk Owned Bound 40G/30G grow=true  \"\" \"\" del=false"; diskLine(adopted) != want {
		t.Errorf("adopted %s, want %s", diskLine(adopted), want)
	}
	got, _ := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "a-rootdisk", metav1.GetOptions{})
	if _, marked := got.Annotations[AnnotationKept]; marked {
		t.Errorf("adopted and owned, the claim is still marked kept: %v", got.Annotations)
	}
	if ref := metav1.GetControllerOf(got); ref == nil || ref.UID != diskVM.UID || got.Labels[LabelVMUID] != string(diskVM.UID) {
		t.Errorf("adopted claim %+v", got.ObjectMeta)
	}
	if again, err := b.CreateDisk(ctx, diskVM, backend.DiskSpec{Size: resource.MustParse("40G")}); err != nil || again.Owner != backend.DiskOwned {
		t.Errorf("create over its own claim: %s, %v", diskLine(again), err)
	}

	vmB := backend.Owner{Namespace: "ns", Name: "b", UID: diskVM.UID}
	if d, _ := b.ObserveDisk(vmB); d != nil {
		t.Errorf("an unlabelled claim is in the cache: %s", diskLine(d))
	}
	_, err = b.CreateDisk(ctx, vmB, backend.DiskSpec{Size: resource.MustParse("40G")})
	if !errors.Is(err, backend.ErrDiskConflict) || !errors.Is(err, backend.ErrRejected) {
		t.Errorf("create over a claim the VM does not own: %v, want ErrDiskConflict", err)
	}
	// The message of the VM's status (DiskConflict), after "The disk was refused: ".
	if want := "claim b-rootdisk exists and is not this VM's (another object owns it, it is not labelled for this VM, " +
		"or it was kept for another kind of resource): delete it (its data with it) or give the VM another name; the controller never takes it over"; err == nil || err.Error() != want {
		t.Errorf("create over a claim the VM does not own: %v\nwant the message %s", err, want)
	}
	if f, _ := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "b-rootdisk", metav1.GetOptions{}); len(f.Labels) != 0 || len(f.OwnerReferences) != 0 {
		t.Errorf("the other claim was touched: %+v", f.ObjectMeta)
	}

	// The same claim on its way out (an earlier VM's, deleted with it, gone from the cache):
	// no conflict, a transient error until it is gone.
	f, _ := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "b-rootdisk", metav1.GetOptions{})
	f.DeletionTimestamp, f.Finalizers = &metav1.Time{Time: time.Now()}, []string{"kubernetes.io/pvc-protection"}
	if _, err := client.CoreV1().PersistentVolumeClaims("ns").Update(ctx, f, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = b.CreateDisk(ctx, vmB, backend.DiskSpec{Size: resource.MustParse("40G")})
	if err == nil || errors.Is(err, backend.ErrDiskConflict) || errors.Is(err, backend.ErrRejected) {
		t.Errorf("create over another's claim being deleted: %v, want a transient error", err)
	}
}

// TestDisksAdoptKept: a claim kept by an earlier VM of the name is adopted as kept (a VM that
// names no reclaim policy, or Retain) in one patch: labelled with the new VM's UID, owned by
// nothing, marked kept; a claim kept by a version that did not mark it is marked then.
func TestDisksAdoptKept(t *testing.T) {
	for name, marked := range map[string]bool{"marked": true, "kept by an earlier version": false} {
		t.Run(name, func(t *testing.T) {
			kept := newClaim(backend.Owner{Namespace: "ns", Name: "a", UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"},
				backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard", Keep: true})
			kept.ResourceVersion, kept.UID = "5", "11111111-2222-3333-4444-555555555555"
			kept.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("30G")}}
			want := "a-rootdisk Unowned Bound 30G/30G grow=true  \"\" \"\" del=false"
			if marked {
				want += " marked"
			} else {
				delete(kept.Annotations, AnnotationKept)
			}
			client := kubefake.NewClientset(storageClass("standard", true), kept)
			var patches []string
			client.PrependReactor("patch", "persistentvolumeclaims", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
				patches = append(patches, string(a.(clienttesting.PatchAction).GetPatch()))
				return false, nil, nil
			})
			b, notified := diskBackend(t, client)
			ctx := context.Background()
			awaitDisk(t, b, notified, want, true)

			seen, _ := b.ObserveDisk(diskVM)
			adopted, err := b.UpdateDisk(ctx, diskVM, seen, backend.DiskSpec{Size: resource.MustParse("30G"), Keep: true})
			if err != nil {
				t.Fatal(err)
			}
			if want := "a-rootdisk Kept Bound 30G/30G grow=true  \"\" \"\" del=false marked"; diskLine(adopted) != want {
				t.Errorf("adopted %s, want %s", diskLine(adopted), want)
			}
			got, _ := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "a-rootdisk", metav1.GetOptions{})
			if len(got.OwnerReferences) != 0 || got.Labels[LabelVMUID] != string(diskVM.UID) || got.Annotations[AnnotationKept] != "true" {
				t.Errorf("adopted claim %+v", got.ObjectMeta)
			}
			if len(patches) != 1 {
				t.Errorf("adopted in %d patches (%q), want 1", len(patches), patches)
			}
		})
	}
}

// TestDisksKeptForAnotherKind: the claim a VirtualMachine keeps records its kind, and an
// object of another resource (a controller run with --api-version and --resource for a
// Machine) of the same name, in the same namespace, sees it as another's: it neither adopts
// nor deletes it. A claim without the record (an earlier version's) may be adopted by any; an
// adoption records the adopter's kind.
func TestDisksKeptForAnotherKind(t *testing.T) {
	machine := backend.Owner{APIVersion: "compute.example.org/v1", Kind: "Machine", Namespace: "ns", Name: "a", UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"}
	for name, recorded := range map[string]bool{"recorded": true, "an earlier version's": false} {
		t.Run(name, func(t *testing.T) {
			kept := newClaim(diskVM, backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard", Keep: true})
			kept.ResourceVersion, kept.UID = "5", "11111111-2222-3333-4444-555555555555"
			kept.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("30G")}}
			if !recorded {
				delete(kept.Annotations, AnnotationOwnerKind)
			}
			vmOther := diskVM
			vmOther.UID = "22222222-3333-4444-5555-666666666666" // a later VirtualMachine of the name
			if got := cacheClaim(kept).owner(vmOther); got != backend.DiskUnowned {
				t.Errorf("to a later VirtualMachine of the name the kept claim is %s, want Unowned", got)
			}
			client := kubefake.NewClientset(storageClass("standard", true), kept)
			b, _ := diskBackend(t, client)
			ctx := context.Background()
			claims := client.CoreV1().PersistentVolumeClaims("ns")
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
				if d, _ := b.ObserveDisk(machine); d != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the claim never reached the cache")
				}
			}
			d, _ := b.ObserveDisk(machine)
			if !recorded {
				if d.Owner != backend.DiskUnowned {
					t.Fatalf("an earlier version's kept claim is %s to a Machine of the name, want Unowned", d.Owner)
				}
				if _, err := b.UpdateDisk(ctx, machine, d, backend.DiskSpec{Size: resource.MustParse("30G"), Keep: true}); err != nil {
					t.Fatal(err)
				}
				if got, _ := claims.Get(ctx, "a-rootdisk", metav1.GetOptions{}); got.Annotations[AnnotationOwnerKind] != "Machine.compute.example.org" {
					t.Errorf("the adopted claim records the kind %q", got.Annotations[AnnotationOwnerKind])
				}
				return
			}
			if d.Owner != backend.DiskOther {
				t.Errorf("a VirtualMachine's kept claim is %s to a Machine of the same name, want Other", d.Owner)
			}
			if _, err := b.UpdateDisk(ctx, machine, d, backend.DiskSpec{Size: resource.MustParse("30G")}); !errors.Is(err, backend.ErrDiskConflict) {
				t.Errorf("a Machine's adoption of a VirtualMachine's kept claim: %v, want ErrDiskConflict", err)
			}
			if _, err := b.CreateDisk(ctx, machine, backend.DiskSpec{Size: resource.MustParse("30G")}); !errors.Is(err, backend.ErrDiskConflict) {
				t.Errorf("a Machine's create over a VirtualMachine's kept claim: %v, want ErrDiskConflict", err)
			}
			if err := b.DeleteDisk(ctx, machine, d); err != nil {
				t.Fatal(err)
			}
			got, err := claims.Get(ctx, "a-rootdisk", metav1.GetOptions{})
			if err != nil || got.Labels[LabelVMUID] != string(diskVM.UID) || len(got.OwnerReferences) != 0 || got.DeletionTimestamp != nil {
				t.Errorf("the VirtualMachine's kept claim was touched: %v %+v", err, got.ObjectMeta)
			}
		})
	}
}

// TestDiskKindRecorded: a claim of the VM's own that an earlier version made or kept without
// the kind of the VM's resource is reported KindUnrecorded (and no other claim is), and an
// UpdateDisk that changes nothing else of it (the decision's record-kind) writes that
// annotation alone, on the resourceVersion seen. Without the record, a Machine of the VM's
// name takes the kept claim as one it may adopt, and the owned one once a --cascade=orphan
// deletion takes the owner reference off; with it, neither.
func TestDiskKindRecorded(t *testing.T) {
	machine := backend.Owner{APIVersion: "compute.example.org/v1", Kind: "Machine", Namespace: "ns", Name: "a", UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"}
	earlier := diskVM
	earlier.UID = "22222222-3333-4444-5555-666666666666"
	tests := map[string]struct {
		owner    backend.Owner // whom the claim was made for
		keep     bool          // kept (no owner reference, marked kept)
		recorded bool          // it records the kind
		want     backend.DiskOwner
	}{
		"owned, an earlier version's": {owner: diskVM, want: backend.DiskOwned},
		"kept, an earlier version's":  {owner: diskVM, keep: true, want: backend.DiskKept},
		"owned, recorded":             {owner: diskVM, recorded: true, want: backend.DiskOwned},
		"kept, recorded":              {owner: diskVM, keep: true, recorded: true, want: backend.DiskKept},
		"an earlier VM's":             {owner: earlier, keep: true, want: backend.DiskUnowned},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := newClaim(tc.owner, backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard", Keep: tc.keep})
			claim.ResourceVersion, claim.UID = "5", "11111111-2222-3333-4444-555555555555"
			claim.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("30G")}}
			if !tc.recorded {
				delete(claim.Annotations, AnnotationOwnerKind)
			}
			client := kubefake.NewClientset(storageClass("standard", true), claim)
			var patches []string
			client.PrependReactor("patch", "persistentvolumeclaims", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
				patches = append(patches, string(a.(clienttesting.PatchAction).GetPatch()))
				return false, nil, nil
			})
			b := New(Config{Client: client, Disks: true}) // not started: the cache holds what the test puts there
			if err := b.disks.claims.GetIndexer().Add(cacheClaim(claim)); err != nil {
				t.Fatal(err)
			}
			seen, _ := b.ObserveDisk(diskVM)
			if seen == nil || seen.Owner != tc.want {
				t.Fatalf("observed %s, want %s", diskLine(seen), tc.want)
			}
			unrecorded := tc.want.Mine() && !tc.recorded
			if seen.KindUnrecorded != unrecorded {
				t.Errorf("KindUnrecorded %v, want %v", seen.KindUnrecorded, unrecorded)
			}
			if !unrecorded {
				return
			}
			if got := cacheClaim(orphaned(claim)).owner(machine); got != backend.DiskUnowned {
				t.Fatalf("without the record, the claim let go of is %s to a Machine of the name, want Unowned (the gap)", got)
			}
			// The decision's record-kind: the disk as it is.
			got, err := b.UpdateDisk(context.Background(), diskVM, seen, backend.DiskSpec{Size: seen.Requested, Keep: tc.keep})
			if err != nil || got.KindUnrecorded || got.Owner != tc.want {
				t.Fatalf("update: %s (kind unrecorded: %v), %v", diskLine(got), got != nil && got.KindUnrecorded, err)
			}
			want := `{"metadata":{"annotations":{"cloudnative.czs/owner-kind":"VirtualMachine.cloudnative.czs"},"resourceVersion":"5"}}`
			if len(patches) != 1 || patches[0] != want {
				t.Errorf("patches %q, want only %s", patches, want)
			}
			after, err := client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), claim.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(after.OwnerReferences, claim.OwnerReferences) || !equality.Semantic.DeepEqual(after.Labels, claim.Labels) ||
				!equality.Semantic.DeepEqual(after.Spec, claim.Spec) || after.Annotations[AnnotationKept] != claim.Annotations[AnnotationKept] {
				t.Errorf("the update changed more than the kind: %+v", after)
			}
			if got := cacheClaim(orphaned(after)).owner(machine); got != backend.DiskOther {
				t.Errorf("with the record, the claim let go of is %s to a Machine of the name, want Other", got)
			}
		})
	}
}

// orphaned is c without its owner reference, as a --cascade=orphan deletion of its VM leaves
// it (a kept claim has none to lose).
func orphaned(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	c = c.DeepCopy()
	c.OwnerReferences = nil
	return c
}

// TestDeleteDiskPreconditions: DeleteDisk deletes the claim on the UID and resourceVersion
// of the claim the decision saw (version 5), whatever the cache shows when the delete runs. A
// claim changed since (marked kept, let go of by someone who keeps it, taken by another
// object), whether or not the informer has brought the change to the cache yet, is not
// deleted on the stale view: the API server's Conflict comes back as an error
// (apierrors.IsConflict: the VM is decided again), not as a claim gone. A claim as seen is
// deleted.
func TestDeleteDiskPreconditions(t *testing.T) {
	const uid = "11111111-2222-3333-4444-555555555555"
	tests := map[string]struct {
		change func(*corev1.PersistentVolumeClaim) // nil: unchanged since seen
		cached bool                                // the cache shows the change before the delete
	}{
		"as seen": {},
		"let go of since, cache behind": {change: func(c *corev1.PersistentVolumeClaim) {
			c.OwnerReferences = nil
			delete(c.Labels, LabelVMUID)
		}},
		"marked kept since, cache behind": {change: func(c *corev1.PersistentVolumeClaim) { c.Annotations[AnnotationKept] = "true" }},
		"marked kept since, cache caught up": {change: func(c *corev1.PersistentVolumeClaim) { c.Annotations[AnnotationKept] = "true" },
			cached: true},
		"kept since, cache caught up": {change: func(c *corev1.PersistentVolumeClaim) {
			c.OwnerReferences = nil
			c.Annotations[AnnotationKept] = "true"
		}, cached: true},
		"taken by another since, cache caught up": {change: func(c *corev1.PersistentVolumeClaim) {
			c.OwnerReferences[0].UID = "another"
		}, cached: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			owned := newClaim(diskVM, backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard"})
			owned.ResourceVersion, owned.UID = "5", uid
			now := owned.DeepCopy()
			if tt.change != nil {
				tt.change(now)
				now.ResourceVersion = "9"
			}
			client := kubefake.NewClientset(now)
			var got *metav1.Preconditions
			// The fake clientset does not check preconditions: this reactor does, as the
			// API server would.
			client.PrependReactor("delete", "persistentvolumeclaims", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
				got = a.(clienttesting.DeleteActionImpl).DeleteOptions.Preconditions
				if got != nil && (got.ResourceVersion != nil && *got.ResourceVersion != now.ResourceVersion || got.UID != nil && *got.UID != now.UID) {
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "persistentvolumeclaims"}, now.Name,
						fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s)", *got.ResourceVersion, now.ResourceVersion))
				}
				return false, nil, nil
			})
			b := New(Config{Client: client, Disks: true}) // not started: the cache holds what the test puts there
			if err := b.disks.claims.GetIndexer().Add(cacheClaim(owned)); err != nil {
				t.Fatal(err)
			}
			seen, _ := b.ObserveDisk(diskVM) // what the decision to delete is made on
			if seen == nil || seen.Owner != backend.DiskOwned || seen.KeptMark || seen.Version != "5" || seen.ID != uid {
				t.Fatalf("seen %+v, want the owned claim at version 5", seen)
			}
			if tt.cached {
				if err := b.disks.claims.GetIndexer().Update(cacheClaim(now)); err != nil {
					t.Fatal(err)
				}
			}
			err := b.DeleteDisk(context.Background(), diskVM, seen)
			if got == nil || got.UID == nil || *got.UID != uid || got.ResourceVersion == nil || *got.ResourceVersion != "5" {
				t.Errorf("preconditions %+v, want the UID and resourceVersion 5 the decision saw", got)
			}
			_, getErr := client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "a-rootdisk", metav1.GetOptions{})
			changed := tt.change != nil
			switch {
			case changed && !apierrors.IsConflict(err):
				t.Errorf("delete of a claim changed since it was seen: %v, want a Conflict", err)
			case changed && getErr != nil:
				t.Errorf("a claim changed since it was seen was deleted: %v", getErr)
			case !changed && (err != nil || !apierrors.IsNotFound(getErr)):
				t.Errorf("delete of the claim as seen: %v, then %v", err, getErr)
			}
		})
	}
}

// TestUpdateDiskPreconditions: UpdateDisk patches the claim on the resourceVersion of the
// claim the decision saw (version 5), worked out from that claim, whatever the cache shows
// when the update runs. The decisions: adopt a claim kept by an earlier VM of the name, owned
// (so that the garbage collector would delete it with the VM) and grown; grow the VM's own
// claim. A claim changed since (marked kept, its owner reference taken off, taken by another
// object) is not adopted or grown on the stale view: when the cache shows the change already,
// nothing is asked and the backend answers a Conflict; when it does not yet, the patch carries
// version 5 and the API server's Conflict comes back (apierrors.IsConflict either way: the VM
// is decided again). A claim as seen is patched.
func TestUpdateDiskPreconditions(t *testing.T) {
	const uid = "11111111-2222-3333-4444-555555555555"
	earlier := backend.Owner{APIVersion: diskVM.APIVersion, Kind: diskVM.Kind, Namespace: "ns", Name: "a", UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"}
	leftBehind := func() *corev1.PersistentVolumeClaim { // kept by an earlier VM of the name: Unowned
		c := newClaim(earlier, backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard", Keep: true})
		delete(c.Annotations, AnnotationKept) // kept by a version that did not mark it
		return c
	}
	own := func() *corev1.PersistentVolumeClaim { // diskVM's, owned
		return newClaim(diskVM, backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard"})
	}
	adopt := backend.DiskSpec{Size: resource.MustParse("40G")} // owned, grown
	markKept := func(c *corev1.PersistentVolumeClaim) { c.Annotations[AnnotationKept] = "true" }
	keep := func(c *corev1.PersistentVolumeClaim) {
		c.OwnerReferences = nil
		c.Annotations[AnnotationKept] = "true"
	}
	takeOver := func(c *corev1.PersistentVolumeClaim) {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "another", Controller: ptr.To(true)}}
	}
	tests := map[string]struct {
		claim  func() *corev1.PersistentVolumeClaim // as the decision saw it, at version 5
		change func(*corev1.PersistentVolumeClaim)  // since, at version 9; nil: unchanged
		cached bool                                 // the cache shows the change before the update
	}{
		"adopt, as seen": {claim: leftBehind},
		"adopt, marked kept since, cache caught up":      {claim: leftBehind, change: markKept, cached: true},
		"adopt, marked kept since, cache behind":         {claim: leftBehind, change: markKept},
		"adopt, taken by another since, cache caught up": {claim: leftBehind, change: takeOver, cached: true},
		"adopt, taken by another since, cache behind":    {claim: leftBehind, change: takeOver},
		"grow, as seen":                                 {claim: own},
		"grow, kept since, cache caught up":             {claim: own, change: keep, cached: true},
		"grow, kept since, cache behind":                {claim: own, change: keep},
		"grow, taken by another since, cache caught up": {claim: own, change: takeOver, cached: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			seenClaim := tt.claim()
			seenClaim.ResourceVersion, seenClaim.UID = "5", uid
			now := seenClaim.DeepCopy()
			if tt.change != nil {
				tt.change(now)
				now.ResourceVersion = "9"
			}
			client := kubefake.NewClientset(now)
			// The fake clientset takes a patch's resourceVersion as one more field to set,
			// never as a condition: this reactor answers a Conflict on a mismatch, as the API
			// server does.
			var sent []string
			client.PrependReactor("patch", "persistentvolumeclaims", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
				var body struct {
					Metadata struct {
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				}
				if err := json.Unmarshal(a.(clienttesting.PatchAction).GetPatch(), &body); err != nil {
					t.Fatal(err)
				}
				rv := body.Metadata.ResourceVersion
				sent = append(sent, rv)
				if rv != now.ResourceVersion {
					return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "persistentvolumeclaims"}, now.Name,
						fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again (%s, not %s)", now.ResourceVersion, rv))
				}
				return false, nil, nil
			})
			b := New(Config{Client: client, Disks: true}) // not started: the cache holds what the test puts there
			if err := b.disks.claims.GetIndexer().Add(cacheClaim(seenClaim)); err != nil {
				t.Fatal(err)
			}
			seen, _ := b.ObserveDisk(diskVM) // what the decision to adopt or grow is made on
			if seen == nil || !(seen.Owner == backend.DiskUnowned || seen.Owner == backend.DiskOwned) || seen.KeptMark || seen.Version != "5" || seen.ID != uid {
				t.Fatalf("seen %s at %s, want the claim unowned or owned, unmarked, at version 5", diskLine(seen), seen.Version)
			}
			if tt.cached {
				if err := b.disks.claims.GetIndexer().Update(cacheClaim(now)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := b.UpdateDisk(context.Background(), diskVM, seen, adopt)
			after, getErr := client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), "a-rootdisk", metav1.GetOptions{})
			if getErr != nil {
				t.Fatal(getErr)
			}
			for _, rv := range sent {
				if rv != "5" {
					t.Errorf("patched on resourceVersion %s, want 5, the decision's", rv)
				}
			}
			if tt.change == nil {
				if err != nil || got == nil || got.Owner != backend.DiskOwned || len(sent) != 1 {
					t.Fatalf("update of the claim as seen: %s, %v after patches %q", diskLine(got), err, sent)
				}
				if ref := metav1.GetControllerOf(after); ref == nil || ref.UID != diskVM.UID || after.Labels[LabelVMUID] != string(diskVM.UID) ||
					after.Spec.Resources.Requests.Storage().String() != "40G" {
					t.Errorf("the claim updated as seen is %+v, %v", after.ObjectMeta, after.Spec.Resources.Requests)
				}
				return
			}
			if !apierrors.IsConflict(err) || got != nil {
				t.Errorf("update of a claim changed since it was seen: %s, %v; want a Conflict", diskLine(got), err)
			}
			if tt.cached && len(sent) != 0 {
				t.Errorf("patches %q of a claim the cache shows changed since it was seen, want none", sent)
			}
			if after.ResourceVersion != "9" || !equality.Semantic.DeepEqual(after.ObjectMeta.OwnerReferences, now.OwnerReferences) ||
				!equality.Semantic.DeepEqual(after.Annotations, now.Annotations) || !equality.Semantic.DeepEqual(after.Labels, now.Labels) ||
				after.Spec.Resources.Requests.Storage().String() != "30G" {
				t.Errorf("the claim changed since it was seen is now %+v, %v", after.ObjectMeta, after.Spec.Resources.Requests)
			}
		})
	}
}

// TestDeleteDiskNotAsked: DeleteDisk asks nothing of the API server for a disk seen as
// another's, as already being deleted, or not seen at all.
func TestDeleteDiskNotAsked(t *testing.T) {
	claim := newClaim(diskVM, backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard"})
	claim.ResourceVersion, claim.UID = "5", "11111111-2222-3333-4444-555555555555"
	client := kubefake.NewClientset(claim)
	client.PrependReactor("delete", "persistentvolumeclaims", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
		t.Errorf("deleted %s", a.(clienttesting.DeleteActionImpl).Name)
		return true, nil, nil
	})
	b := New(Config{Client: client, Disks: true})
	for _, seen := range []*backend.Disk{
		nil,
		{Name: claim.Name, ID: string(claim.UID), Version: "5", Owner: backend.DiskOther},
		{Name: claim.Name, ID: string(claim.UID), Version: "5", Owner: backend.DiskUnowned},
		{Name: claim.Name, ID: string(claim.UID), Version: "5", Owner: backend.DiskOwned, Deleting: true},
	} {
		if err := b.DeleteDisk(context.Background(), diskVM, seen); err != nil {
			t.Errorf("%+v: %v", seen, err)
		}
	}
}

// TestGrowthOf reads the expansion of a claim as Kubernetes 1.36 reports it.
func TestGrowthOf(t *testing.T) {
	cond := func(t corev1.PersistentVolumeClaimConditionType, msg string) corev1.PersistentVolumeClaimCondition {
		return corev1.PersistentVolumeClaimCondition{Type: t, Status: corev1.ConditionTrue, Message: msg}
	}
	tests := map[string]struct {
		state corev1.ClaimResourceStatus
		conds []corev1.PersistentVolumeClaimCondition
		want  backend.Growth
	}{
		"none":               {"", nil, backend.Growth{}},
		"driver at work":     {corev1.PersistentVolumeClaimControllerResizeInProgress, []corev1.PersistentVolumeClaimCondition{cond(corev1.PersistentVolumeClaimResizing, "")}, backend.Growth{State: backend.GrowthInProgress}},
		"driver refused":     {corev1.PersistentVolumeClaimControllerResizeInfeasible, []corev1.PersistentVolumeClaimCondition{cond(corev1.PersistentVolumeClaimControllerResizeError, "OutOfRange")}, backend.Growth{State: backend.GrowthInfeasible, Message: "OutOfRange"}},
		"node to do":         {corev1.PersistentVolumeClaimNodeResizePending, []corev1.PersistentVolumeClaimCondition{cond(corev1.PersistentVolumeClaimFileSystemResizePending, "Waiting for user to (re-)start a pod")}, backend.Growth{State: backend.GrowthPending, Message: "Waiting for user to (re-)start a pod"}},
		"node at work":       {corev1.PersistentVolumeClaimNodeResizeInProgress, nil, backend.Growth{State: backend.GrowthInProgress}},
		"node refused":       {corev1.PersistentVolumeClaimNodeResizeInfeasible, []corev1.PersistentVolumeClaimCondition{cond(corev1.PersistentVolumeClaimNodeResizeError, "no room")}, backend.Growth{State: backend.GrowthInfeasible, Message: "no room"}},
		"a state of a later": {"ControllerResizePaused", nil, backend.Growth{State: backend.GrowthPending}},
	}
	for name, tc := range tests {
		pvc := &corev1.PersistentVolumeClaim{Status: corev1.PersistentVolumeClaimStatus{Conditions: tc.conds}}
		if tc.state != "" {
			pvc.Status.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{corev1.ResourceStorage: tc.state}
		}
		if got := growthOf(pvc); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
}

// TestCachedClaimReadsBack: the compact form of a claim reports the disk the claim is,
// identities and sizes that do not compact included, and the size the claim asks for apart
// from the size it has: storage that rounds a disk up has the one below the other, and the
// VM's status records both (the CRD lets rootDisk go back to the request).
func TestCachedClaimReadsBack(t *testing.T) {
	base := newClaim(diskVM, backend.DiskSpec{Size: resource.MustParse("40G"), StorageClass: "standard"})
	base.UID, base.ResourceVersion = "11111111-2222-3333-4444-555555555555", "42"
	for name, change := range map[string]func(*corev1.PersistentVolumeClaim){
		"as made":        func(*corev1.PersistentVolumeClaim) {},
		"a test's UID":   func(c *corev1.PersistentVolumeClaim) { c.UID = "claim-1" },
		"a text version": func(c *corev1.PersistentVolumeClaim) { c.ResourceVersion = "v7" },
		"a fraction": func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("0.5")
		},
		"going":          func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = ptr.To(metav1.Now()) },
		"lost, no class": func(c *corev1.PersistentVolumeClaim) { c.Status.Phase, c.Spec.StorageClassName = corev1.ClaimLost, nil },
		"bound, rounded up": func(c *corev1.PersistentVolumeClaim) {
			c.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1G")
			c.Status.Phase = corev1.ClaimBound
			c.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
		},
		"another's, owned": func(c *corev1.PersistentVolumeClaim) { c.OwnerReferences[0].UID = "someone" },
	} {
		pvc := base.DeepCopy()
		change(pvc)
		c := cacheClaim(pvc)
		d := c.disk(diskVM, true, "")
		wantPhase := backend.DiskPending
		switch pvc.Status.Phase {
		case corev1.ClaimLost:
			wantPhase = backend.DiskLost
		case corev1.ClaimBound:
			wantPhase = backend.DiskBound
		}
		wantOwner := backend.DiskOwned
		if pvc.OwnerReferences[0].UID != diskVM.UID {
			wantOwner = backend.DiskOther
		}
		if d.ID != string(pvc.UID) || d.Version != pvc.ResourceVersion || d.Requested.Cmp(pvc.Spec.Resources.Requests[corev1.ResourceStorage]) != 0 ||
			d.Requested.String() != ptr.To(pvc.Spec.Resources.Requests[corev1.ResourceStorage]).String() ||
			d.Capacity.Cmp(pvc.Status.Capacity[corev1.ResourceStorage]) != 0 ||
			d.Capacity.String() != ptr.To(pvc.Status.Capacity[corev1.ResourceStorage]).String() ||
			d.StorageClass != ptr.Deref(pvc.Spec.StorageClassName, "") || d.Phase != wantPhase || d.Owner != wantOwner ||
			d.Deleting != (pvc.DeletionTimestamp != nil) || c.GetUID() != pvc.UID || c.GetResourceVersion() != pvc.ResourceVersion {
			t.Errorf("%s: read back as %+v", name, d)
		}
		if !c.same(cacheClaim(pvc)) {
			t.Errorf("%s: not the same as itself", name)
		}
	}
}

// TestDiskBindsWithServer: a claim of a WaitForFirstConsumer class is a disk that binds only
// with a server placed (the decision then makes the server at once); one of an Immediate class,
// or of a class the cache does not know, binds by itself (the server waits for it).
func TestDiskBindsWithServer(t *testing.T) {
	late := storageClass("late", true)
	late.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	now := storageClass("now", true)
	now.VolumeBindingMode = ptr.To(storagev1.VolumeBindingImmediate)
	for class, want := range map[string]bool{"late": true, "now": false, "unknown": false} {
		t.Run(class, func(t *testing.T) {
			client := kubefake.NewClientset(late, now)
			b, _ := diskBackend(t, client)
			d, err := b.CreateDisk(context.Background(), diskVM, backend.DiskSpec{Size: resource.MustParse("1Gi"), StorageClass: class})
			if err != nil {
				t.Fatal(err)
			}
			if d.BindsWithServer != want {
				t.Errorf("created in class %s: BindsWithServer %v, want %v", class, d.BindsWithServer, want)
			}
		})
	}
}

// TestUpdateDiskOnOwnAnswer: the disk seen may be the answer of the controller's own last
// write of it, which the cache has yet to show (reconcile's disk expectations decide on it
// then). UpdateDisk works out its patch from the claim as it is on the API server when that is
// the claim seen, on its version; a claim changed since then is a Conflict, nothing written.
// Worked out from the cache's older claim, a release after a write that changed the mark or
// the owner would leave that change out; refused, the release waited for a backoff timer.
func TestUpdateDiskOnOwnAnswer(t *testing.T) {
	pvcs := corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	for name, changedSince := range map[string]bool{"the claim as answered": false, "the claim changed since": true} {
		t.Run(name, func(t *testing.T) {
			claim := newClaim(diskVM, backend.DiskSpec{Size: resource.MustParse("30G"), StorageClass: "standard"})
			claim.ResourceVersion, claim.UID = "5", "11111111-2222-3333-4444-555555555555"
			client := kubefake.NewClientset(claim.DeepCopy())
			var sent []string // the resourceVersion each patch carries
			client.PrependReactor("patch", "persistentvolumeclaims", func(a clienttesting.Action) (bool, k8sruntime.Object, error) {
				var body struct {
					Metadata struct {
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				}
				if err := json.Unmarshal(a.(clienttesting.PatchAction).GetPatch(), &body); err != nil {
					return true, nil, err
				}
				sent = append(sent, body.Metadata.ResourceVersion)
				return false, nil, nil
			})
			b := New(Config{Client: client, Disks: true}) // not started: the cache keeps the claim at 5
			if err := b.disks.claims.GetIndexer().Add(cacheClaim(claim)); err != nil {
				t.Fatal(err)
			}
			seen, _ := b.ObserveDisk(diskVM)
			grown, err := b.UpdateDisk(context.Background(), diskVM, seen, backend.DiskSpec{Size: resource.MustParse("40G"), StorageClass: "standard"})
			if err != nil {
				t.Fatal(err)
			}
			// The API server gives the write a version of its own (the fake keeps the one sent).
			stored := func(rv string) {
				got, _ := client.Tracker().Get(pvcs, "ns", claim.Name)
				pvc := got.(*corev1.PersistentVolumeClaim)
				pvc.ResourceVersion = rv
				if err := client.Tracker().Update(pvcs, pvc, "ns"); err != nil {
					t.Fatal(err)
				}
			}
			stored("6")
			grown.Version = "6"
			if changedSince {
				stored("7")
			}
			sent = nil
			kept, err := b.UpdateDisk(context.Background(), diskVM, grown, backend.DiskSpec{Size: resource.MustParse("40G"), StorageClass: "standard", Keep: true})
			got, _ := client.CoreV1().PersistentVolumeClaims("ns").Get(context.Background(), claim.Name, metav1.GetOptions{})
			_, marked := got.Annotations[AnnotationKept]
			if changedSince {
				if !apierrors.IsConflict(err) || len(sent) != 0 || marked || metav1.GetControllerOf(got) == nil {
					t.Fatalf("release of a claim changed since: %v, patches %v, marked %v, owner %v; want a Conflict and nothing written", err, sent, marked, metav1.GetControllerOf(got))
				}
				return
			}
			if err != nil || len(sent) != 1 || sent[0] != "6" {
				t.Fatalf("release on the answer: %v, patches on %v; want one on 6", err, sent)
			}
			if kept.Owner != backend.DiskKept || !marked || metav1.GetControllerOf(got) != nil ||
				got.Spec.Resources.Requests.Storage().String() != "40G" {
				t.Errorf("released %s; claim marked %v, owner %v, requests %s", diskLine(kept), marked, metav1.GetControllerOf(got), got.Spec.Resources.Requests.Storage())
			}
		})
	}
}
