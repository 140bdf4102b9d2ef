package pods

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/cachemeta"
)

// A VM's disk is a PersistentVolumeClaim in the VM's namespace, of the VM's name with the
// suffix -rootdisk (ClaimName), labelled like its pods, annotated with the VM's full name, and
// controlled by the VM unless the VM keeps it (reclaim policy Retain), in which case it is
// annotated as kept (AnnotationKept), and annotated with the kind of resource the VM is
// (AnnotationOwnerKind). Every server pod of the VM mounts it (newPod); it outlives them all.
// A claim of the VM's that an earlier version made without the kind is reported
// KindUnrecorded, and gets it from the VM's next update (UpdateDisk).

// AnnotationKept marks a claim as kept (backend.Disk.KeptMark): the VM it was last made or
// updated for kept it (DiskSpec.Keep). A VM that names no reclaim policy keeps a claim so
// marked; the mark goes when a VM that names Delete owns the claim again.
const AnnotationKept = "cloudnative.czs/kept"

// AnnotationOwnerKind records the kind of resource, with its group (Kind.group, e.g.
// VirtualMachine.cloudnative.czs), whose object the claim was made, kept or adopted for. Only
// an object of that kind adopts the claim: a controller run for another resource
// (--api-version, --resource) whose object has the name of a kept disk's VM does not take the
// disk. A claim without it (made by an earlier version) may be adopted by any.
const AnnotationOwnerKind = "cloudnative.czs/owner-kind"

// ownerKind is vm's kind with its group, as AnnotationOwnerKind records it.
func ownerKind(vm backend.Owner) string {
	return schema.FromAPIVersionAndKind(vm.APIVersion, vm.Kind).GroupKind().String()
}

// newClaim builds vm's claim: ReadWriteOnce, of spec's size and class (none: the cluster's
// default, which the API server's admission fills in), controlled by vm unless spec.Keep,
// and then marked kept.
func newClaim(vm backend.Owner, spec backend.DiskSpec) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		TypeMeta: claimType,
		ObjectMeta: metav1.ObjectMeta{
			Name:        ClaimName(vm.Name),
			Namespace:   vm.Namespace,
			Labels:      labelsFor(vm),
			Annotations: map[string]string{AnnotationVM: vm.Name},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: spec.Size}},
		},
	}
	if spec.StorageClass != "" {
		c.Spec.StorageClassName = ptr.To(spec.StorageClass)
	}
	if kind := ownerKind(vm); kind != "" {
		c.Annotations[AnnotationOwnerKind] = kind
	}
	if spec.Keep {
		c.Annotations[AnnotationKept] = "true"
	} else {
		c.OwnerReferences = []metav1.OwnerReference{controllerRef(vm)}
	}
	return c
}

// cachedClaim is a VM's claim as the backend's informer keeps it: what a Disk report and the
// notices of changes need, compact like a cachedPod (one per VM, for the life of the
// controller), immutable once made.
type cachedClaim struct {
	cachemeta.Unkept
	name             string
	namespace, class interned
	vm               string   // the VM's full name (AnnotationVM); "" when the claim names none
	kind             interned // the kind of the VM's resource (AnnotationOwnerKind); none on an earlier version's claim
	// uid, controller (the UID of the claim's controlling owner) and label (LabelVMUID), in
	// 16 bytes each; exact holds those that are not UUIDs, and the claim's other owners.
	uid, controller, label uuid
	version                uint64 // resourceVersion, unless exact has it
	// requested and capacity are bytes, each with its format's code; exact holds a quantity
	// that does not read back so.
	requested, capacity int64
	formats             [2]uint8
	phase, growth       uint8 // codes in claimPhases and growthStates
	flags               claimFlags
	message             interned // the storage's word on a growth
	exact               *claimExact
}

type claimFlags uint8

const (
	claimDeleting claimFlags = 1 << iota
	claimControlled
	claimLabelled
	claimExactValues // exact holds the claim's identity and sizes, and its other owners
	claimKeptMark    // annotated as kept (AnnotationKept)
)

// claimExact holds, as read, the claim's identity and sizes when a compact field could not,
// and the UIDs of the owners that do not control the claim (owner references without
// controller: true, which a user or a tool adds; the backend never makes one): the garbage
// collector deletes a claim once every owner it names is gone, controller or not, so a VM
// named there owns the claim (owner). Rare, they cost the common claim nothing.
type claimExact struct {
	uid, controller, label types.UID
	version                string
	requested, capacity    resource.Quantity
	others                 []types.UID
}

var (
	_ runtime.Object = (*cachedClaim)(nil)
	_ metav1.Object  = (*cachedClaim)(nil)
)

// GetNamespace, GetName, GetUID and GetResourceVersion are how client-go reads the claim's
// keys and version, in place (cachemeta).
func (c *cachedClaim) GetNamespace() string { return c.namespace.String() }

// GetName is the claim's name.
func (c *cachedClaim) GetName() string { return c.name }

// GetUID is the claim's UID.
func (c *cachedClaim) GetUID() types.UID { return c.ids().uid }

// GetResourceVersion is the claim's resourceVersion.
func (c *cachedClaim) GetResourceVersion() string { return c.ids().version }

// GetObjectKind has nothing to tell: every cachedClaim is a claim.
func (c *cachedClaim) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns c itself: a cachedClaim is never modified after it is made.
func (c *cachedClaim) DeepCopyObject() runtime.Object { return c }

// The claim's phases and growth states, by code.
var (
	claimPhases  = [...]backend.DiskPhase{backend.DiskPending, backend.DiskBound, backend.DiskLost}
	growthStates = [...]backend.GrowthState{backend.GrowthNone, backend.GrowthPending, backend.GrowthInProgress, backend.GrowthInfeasible}
)

// cacheClaim makes the cached form of a claim.
func cacheClaim(pvc *corev1.PersistentVolumeClaim) *cachedClaim {
	c := &cachedClaim{name: pvc.Name, namespace: intern(pvc.Namespace), vm: pvc.Annotations[AnnotationVM],
		kind: intern(pvc.Annotations[AnnotationOwnerKind])}
	if pvc.Spec.StorageClassName != nil {
		c.class = intern(*pvc.Spec.StorageClassName)
	}
	if pvc.DeletionTimestamp != nil {
		c.flags |= claimDeleting
	}
	if pvc.Annotations[AnnotationKept] == "true" {
		c.flags |= claimKeptMark
	}
	var controller, label types.UID
	var others []types.UID
	for _, ref := range pvc.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && c.flags&claimControlled == 0 {
			c.flags |= claimControlled
			controller = ref.UID
			continue
		}
		others = append(others, ref.UID)
	}
	if l, ok := pvc.Labels[LabelVMUID]; ok {
		c.flags |= claimLabelled
		label = types.UID(l)
	}
	switch pvc.Status.Phase {
	case corev1.ClaimBound:
		c.phase = 1
	case corev1.ClaimLost:
		c.phase = 2
	}
	g := growthOf(pvc)
	c.growth, _ = index(growthStates[:], g.State)
	c.message = intern(g.Message)

	requested := quantity(pvc.Spec.Resources.Requests, corev1.ResourceStorage)
	capacity := quantity(pvc.Status.Capacity, corev1.ResourceStorage)
	var scratch [32]byte
	var okReq, okCap bool
	c.requested, c.formats[0], okReq = compactQuantity(requested, bytesScale, scratch[:0])
	c.capacity, c.formats[1], okCap = compactQuantity(capacity, bytesScale, scratch[:0])
	uid, okUID := parseUUID(string(pvc.UID))
	ctl, okCtl := parseUUID(string(controller))
	lbl, okLbl := parseUUID(string(label))
	version, okVersion := parseVersion(pvc.ResourceVersion)
	okCtl = okCtl || controller == ""
	okLbl = okLbl || label == ""
	if !okReq || !okCap || !okUID || !okCtl || !okLbl || !okVersion || len(others) > 0 {
		c.flags |= claimExactValues
		c.exact = &claimExact{uid: pvc.UID, controller: controller, label: label, version: pvc.ResourceVersion,
			requested: requested, capacity: capacity, others: others}
		return c
	}
	c.uid, c.controller, c.label, c.version = uid, ctl, lbl, version
	return c
}

// toCachedClaim is the claim informer's transform. Tombstones and cached claims pass through.
func toCachedClaim(obj any) (any, error) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return obj, nil
	}
	return cacheClaim(pvc), nil
}

// claimIDs are a claim's identity and sizes, read from the compact fields or exact.
type claimIDs struct {
	uid, controller, label types.UID
	version                string
	requested, capacity    resource.Quantity
}

func (c *cachedClaim) ids() claimIDs {
	if c.flags&claimExactValues != 0 {
		e := c.exact
		return claimIDs{e.uid, e.controller, e.label, e.version, e.requested, e.capacity}
	}
	out := claimIDs{uid: types.UID(c.uid.String()), version: strconv.FormatUint(c.version, 10),
		requested: quantityOf(c.requested, c.formats[0], bytesScale), capacity: quantityOf(c.capacity, c.formats[1], bytesScale)}
	if c.flags&claimControlled != 0 {
		out.controller = types.UID(c.controller.String())
	}
	if c.flags&claimLabelled != 0 {
		out.label = types.UID(c.label.String())
	}
	return out
}

// vmName is the name of the VM the claim is the disk of: the one it names, else its own name
// without the suffix.
func (c *cachedClaim) vmName() string {
	if c.vm != "" {
		return c.vm
	}
	if n := len(c.name) - len(claimSuffix); n > 0 && c.name[n:] == claimSuffix {
		return c.name[:n]
	}
	return ""
}

// plainOwned reports whether the claim has an owner that does not control it.
func (c *cachedClaim) plainOwned() bool { return c.exact != nil && len(c.exact.others) > 0 }

// plainOwner reports whether uid is the UID of one of the claim's owners that do not control it.
func (c *cachedClaim) plainOwner(uid types.UID) bool {
	return c.exact != nil && slices.Contains(c.exact.others, uid)
}

// owner is whose the claim is, as seen from vm: a claim another object controls, that is not
// labelled for vm's name, or that was kept for another kind of resource, is another's.
//
// So is a claim of vm's name labelled for another VM (an earlier one of the name) that names
// any owner without naming it its controller: the garbage collector deletes it once those
// owners are gone (an earlier VM whose finalizer was taken off, so that its way out never
// released the claim; a tool's object), whatever vm's reclaim policy says. Adopted, it would be
// a disk said to be kept that goes all the same, with what vm wrote on it; as another's, the
// VM waits (DiskConflict) until the claim is gone or its references are taken off.
//
// A claim that names vm among its owners without naming it its controller (an owner reference
// with vm's UID and no controller: true, which a user or a tool added) is owned by vm, as one
// vm controls is, labelled or not and whatever its kind annotation says: the garbage collector
// deletes it with vm all the same. So it is neither kept nor adoptable: under reclaim policy
// Retain the decision releases it (UpdateDisk then removes every owner reference with vm's
// UID, controller or not), under Delete it goes with vm as an owned claim does, and one that
// lost its label is read past the cache and labelled again (ReadDisk, CreateDisk). A claim
// another object controls stays another's even when it names vm too: the garbage collector
// keeps it while that controller lives, and the VM never touches it.
func (c *cachedClaim) owner(vm backend.Owner) backend.DiskOwner {
	ids := c.ids()
	switch {
	case c.flags&claimControlled != 0 && ids.controller == vm.UID:
		return backend.DiskOwned
	case c.flags&claimControlled != 0:
		return backend.DiskOther
	case c.plainOwner(vm.UID):
		return backend.DiskOwned
	case c.flags&claimLabelled != 0 && ids.label == vm.UID:
		return backend.DiskKept
	case c.flags&claimLabelled != 0 && c.vm == vm.Name && (c.kind == interned{} || c.kind.String() == ownerKind(vm)) && !c.plainOwned():
		return backend.DiskUnowned
	}
	return backend.DiskOther
}

// disk is the claim as vm's disk: canGrow is whether its class allows volume expansion, and
// pending the binder's last word on it while it is not bound.
func (c *cachedClaim) disk(vm backend.Owner, canGrow bool, pending string) *backend.Disk {
	ids := c.ids()
	d := &backend.Disk{Name: c.name, ID: string(ids.uid), Version: ids.version, Phase: claimPhases[c.phase],
		Requested: ids.requested, Capacity: ids.capacity, StorageClass: c.class.String(), CanGrow: canGrow,
		Growth: backend.Growth{State: growthStates[c.growth], Message: c.message.String()}, Owner: c.owner(vm),
		KeptMark: c.flags&claimKeptMark != 0, Deleting: c.flags&claimDeleting != 0}
	if kind := ownerKind(vm); d.Owner.Mine() && kind != "" && c.kind.String() != kind {
		// The VM's own, made or kept by an earlier version: the decision has it recorded
		// (UpdateDisk), before a kept claim can be taken by another kind's object of the name.
		d.KindUnrecorded = true
	}
	if d.Phase == backend.DiskPending {
		d.Pending = pending
	}
	return d
}

// sameVersion reports whether c and o are the same version of a claim.
func (c *cachedClaim) sameVersion(o *cachedClaim) bool {
	if (c.flags|o.flags)&claimExactValues != 0 {
		return c.ids().version == o.ids().version
	}
	return c.version == o.version
}

// same reports whether c and o report the same disk, whatever else changed (a version, an
// annotation): a change that a decision cannot see is no reason to look at the VM again.
func (c *cachedClaim) same(o *cachedClaim) bool {
	a, b := *c, *o
	a.version, b.version = 0, 0
	if a.exact != nil && b.exact != nil {
		ea, eb := *a.exact, *b.exact
		ea.version, eb.version = "", ""
		if ea.uid != eb.uid || ea.controller != eb.controller || ea.label != eb.label ||
			ea.requested.Cmp(eb.requested) != 0 || ea.capacity.Cmp(eb.capacity) != 0 || !slices.Equal(ea.others, eb.others) {
			return false
		}
		a.exact, b.exact = nil, nil
	}
	return a == b
}

// growthOf is how far the expansion of a claim has got, from its allocatedResourceStatuses
// (Kubernetes 1.36's RecoverVolumeExpansionFailure, GA) and the storage's word in its
// conditions: the driver's part, then the node's (which waits for a pod to mount the claim).
func growthOf(pvc *corev1.PersistentVolumeClaim) backend.Growth {
	var g backend.Growth
	word := func(types ...corev1.PersistentVolumeClaimConditionType) {
		for _, c := range pvc.Status.Conditions {
			for _, t := range types {
				if c.Type == t && c.Status == corev1.ConditionTrue && c.Message != "" {
					g.Message = c.Message
				}
			}
		}
	}
	switch state, ok := pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; {
	case !ok:
	case state == corev1.PersistentVolumeClaimControllerResizeInProgress, state == corev1.PersistentVolumeClaimNodeResizeInProgress:
		g.State = backend.GrowthInProgress
	case state == corev1.PersistentVolumeClaimControllerResizeInfeasible, state == corev1.PersistentVolumeClaimNodeResizeInfeasible:
		g.State = backend.GrowthInfeasible
		word(corev1.PersistentVolumeClaimControllerResizeError, corev1.PersistentVolumeClaimNodeResizeError)
	case state == corev1.PersistentVolumeClaimNodeResizePending:
		g.State = backend.GrowthPending
		word(corev1.PersistentVolumeClaimFileSystemResizePending)
	default: // a state of a newer Kubernetes: under way, as far as this backend can tell
		g.State = backend.GrowthPending
	}
	return g
}
