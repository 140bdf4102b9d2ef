package pods

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/cachemeta"
)

// The VMs' disks (backend.Disks): the claims, watched by an informer of the labelled claims
// (every claim the backend makes carries LabelVMUID, and a kept one keeps it); the
// StorageClasses, cluster-wide, for whether a claim's class lets it grow; and the Events on
// claims, for the binder's word on a claim that does not bind (the persistent-volume
// controller's and the provisioners' Events: "storageclass.storage.k8s.io \"x\" not found",
// "waiting for first consumer to be created before binding"). The Events' field selector
// leaves every other Event out on the API server (involvedObject.kind=PersistentVolumeClaim),
// and the one Event of every claim that binds at once, which says its volume was made
// (reason!=ProvisioningSucceeded): the cache holds the Events of claims that wait.

// Indexes of the disks' caches.
const (
	byClass = "class" // claims by their StorageClass: a class's change reaches their VMs
	byClaim = "claim" // Events by the claim they are about (namespace/name)
)

// provisioned is the reason of the Event that says a claim's volume was made: the claim is
// about to be bound, which is no word on why it is not.
const provisioned = "ProvisioningSucceeded"

var _ backend.Disks = (*Backend)(nil)

// disks are the informers of the disks; nil unless Config.Disks.
type disks struct {
	claims, classes, events cache.SharedIndexInformer
}

func newDisks(cfg Config) *disks {
	labelled := func(o *metav1.ListOptions) { o.LabelSelector = LabelVMUID }
	aboutClaims := func(o *metav1.ListOptions) {
		o.FieldSelector = "involvedObject.kind=PersistentVolumeClaim,reason!=" + provisioned
	}
	return &disks{
		claims: coreinformers.NewFilteredPersistentVolumeClaimInformer(cfg.Client, cfg.Namespace, cfg.Resync,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, labelled),
		classes: storageinformers.NewStorageClassInformer(cfg.Client, cfg.Resync, cache.Indexers{}),
		events:  coreinformers.NewFilteredEventInformer(cfg.Client, cfg.Namespace, cfg.Resync, cache.Indexers{}, aboutClaims),
	}
}

// startDisks starts the informers of the disks and calls notify with the VM of each claim that
// changes in a way its Disk report shows, of each claim whose class changes whether it may
// grow, and of each claim not yet bound that an Event is about. It returns their handlers'
// sync checks.
func (b *Backend) startDisks(ctx context.Context, notify func(types.NamespacedName)) ([]cache.InformerSynced, error) {
	d := b.disks
	if err := d.claims.SetTransform(toCachedClaim); err != nil {
		return nil, fmt.Errorf("set claim transform: %w", err)
	}
	if err := d.claims.AddIndexers(cache.Indexers{byClass: func(obj any) ([]string, error) {
		if c, ok := obj.(*cachedClaim); ok && c.class != (interned{}) {
			return []string{c.class.String()}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("index claims by class: %w", err)
	}
	if err := d.classes.SetTransform(toClass); err != nil {
		return nil, fmt.Errorf("set class transform: %w", err)
	}
	if err := d.events.SetTransform(toClaimEvent); err != nil {
		return nil, fmt.Errorf("set event transform: %w", err)
	}
	if err := d.events.AddIndexers(cache.Indexers{byClaim: func(obj any) ([]string, error) {
		if e, ok := obj.(*claimEvent); ok && e.claim != "" {
			return []string{e.namespace + "/" + e.claim}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("index events by claim: %w", err)
	}
	owner := func(obj any) { notifyVM(obj, notify) }
	claimsHandled, err := d.claims.AddEventHandler(b.vmHandlers(notify, func(old, cur any) bool {
		return !old.(*cachedClaim).same(cur.(*cachedClaim))
	}))
	if err != nil {
		return nil, fmt.Errorf("watch claims: %w", err)
	}
	if b.cfg.ClaimsOnly {
		go d.claims.RunWithContext(ctx)
		return []cache.InformerSynced{claimsHandled.HasSynced}, nil
	}
	ofClass := func(name string) {
		claims, _ := d.claims.GetIndexer().ByIndex(byClass, name)
		for _, obj := range claims {
			owner(obj)
		}
	}
	classesHandled, err := d.classes.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		// A class made again under its name (most of a class's fields cannot change, so a
		// class that is to allow expansion is deleted and made again) is news to the VMs
		// whose disks are of it, as its deletion is; the first list is not.
		AddFunc: func(obj any, isInInitialList bool) {
			if c, ok := obj.(*class); ok && !isInInitialList {
				ofClass(c.GetName())
			}
		},
		UpdateFunc: func(old, cur any) {
			o, c := old.(*class), cur.(*class)
			if o.grows == c.grows {
				return
			}
			ofClass(c.GetName())
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if c, ok := obj.(*class); ok {
				ofClass(c.GetName())
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch storage classes: %w", err)
	}
	onEvent := func(obj any) {
		e, ok := obj.(*claimEvent)
		if !ok || e.claim == "" || e.reason == provisioned {
			return
		}
		if c, ok, _ := d.claims.GetIndexer().GetByKey(e.namespace + "/" + e.claim); ok && claimPhases[c.(*cachedClaim).phase] == backend.DiskPending {
			owner(c)
		}
	}
	eventsHandled, err := d.events.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onEvent,
		UpdateFunc: func(_, cur any) { onEvent(cur) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch claim events: %w", err)
	}
	for _, inf := range []cache.SharedIndexInformer{d.claims, d.classes, d.events} {
		go inf.RunWithContext(ctx)
	}
	return []cache.InformerSynced{claimsHandled.HasSynced, classesHandled.HasSynced, eventsHandled.HasSynced}, nil
}

// ObserveDisk returns the claim of vm's name from the cache as a disk, whoever's it is (a
// claim the backend did not make, which carries no label, is not in the cache: CreateDisk
// finds it).
func (b *Backend) ObserveDisk(vm backend.Owner) (*backend.Disk, error) {
	c, err := b.cachedClaim(vm)
	if err != nil || c == nil {
		return nil, err
	}
	return b.diskOf(c, vm), nil
}

func (b *Backend) cachedClaim(vm backend.Owner) (*cachedClaim, error) {
	if b.disks == nil {
		return nil, nil
	}
	obj, ok, err := b.disks.claims.GetIndexer().GetByKey(vm.Namespace + "/" + ClaimName(vm.Name))
	if err != nil {
		return nil, fmt.Errorf("read claim cache: %w", err)
	}
	if !ok {
		return nil, nil
	}
	return obj.(*cachedClaim), nil
}

// diskOf is c as vm's disk, with its class's word on growing and the binder's on binding.
func (b *Backend) diskOf(c *cachedClaim, vm backend.Owner) *backend.Disk {
	var cl class
	if obj, ok, _ := b.disks.classes.GetIndexer().GetByKey(c.class.String()); ok && c.class != (interned{}) {
		cl = *obj.(*class)
	}
	pending := ""
	if claimPhases[c.phase] == backend.DiskPending {
		pending = b.binderWord(c)
	}
	d := c.disk(vm, cl.grows, pending)
	d.BindsWithServer = cl.late
	return d
}

// binderWord is the message of the latest Event on c, but one that says its volume was made.
func (b *Backend) binderWord(c *cachedClaim) string {
	evs, _ := b.disks.events.GetIndexer().ByIndex(byClaim, c.namespace.String()+"/"+c.name)
	uid := c.ids().uid
	var latest *claimEvent
	for _, obj := range evs {
		e := obj.(*claimEvent)
		if e.claimUID != uid || e.reason == provisioned {
			continue
		}
		if latest == nil || e.at.After(latest.at) || e.at.Equal(latest.at) && e.warning && !latest.warning {
			latest = e
		}
	}
	if latest == nil {
		return ""
	}
	return latest.message.String()
}

// ReadDisk reads the claim of vm's name from the API server, past the label-selected cache
// ObserveDisk reads (backend.Disks): a claim whose label LabelVMUID someone removed is not in
// the cache, though the VM may still own it. A claim without the label is reported as owned
// only when one of its owner references carries the VM's UID (the VM's controller reference,
// or one without controller: true that a user or a tool added: the garbage collector deletes
// the claim with the VM either way); one kept, and so owned by nothing, is another's to a VM
// that cannot tell it from a claim made by hand, and is left alone.
func (b *Backend) ReadDisk(ctx context.Context, vm backend.Owner) (*backend.Disk, error) {
	if b.disks == nil {
		return nil, nil
	}
	name := ClaimName(vm.Name)
	pvc, err := b.cfg.Client.CoreV1().PersistentVolumeClaims(vm.Namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read claim %s: %w", name, err)
	}
	return b.diskOf(cacheClaim(pvc), vm), nil
}

// CreateDisk creates vm's claim. A claim of that name that is vm's, or one vm may adopt, is
// returned as it is, except that one vm owns (controls, or is named an owner of: owner) but
// that lost its label LabelVMUID is labelled again (relabel); one that is another's is
// ErrDiskConflict, unless it is being deleted (a transient error); one the API server refuses is ErrRejected, except when only the namespace
// is being deleted (a transient error).
func (b *Backend) CreateDisk(ctx context.Context, vm backend.Owner, spec backend.DiskSpec) (*backend.Disk, error) {
	claim := newClaim(vm, spec)
	client := b.cfg.Client.CoreV1().PersistentVolumeClaims(vm.Namespace)
	out, err := client.Create(ctx, claim, metav1.CreateOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err):
		existing, err := client.Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get existing claim %s: %w", claim.Name, err)
		}
		c := cacheClaim(existing)
		switch o := c.owner(vm); {
		case o == backend.DiskOther && existing.DeletionTimestamp != nil:
			// Another's claim on its way out (an earlier VM's of the name, deleted with it,
			// that the cache no longer shows): no conflict, which would report the VM Failed
			// and tell its owner to delete a claim that is going. A transient error: the
			// create is tried again, with backoff, until the claim is gone.
			return nil, fmt.Errorf("claim %s exists and is being deleted: a new one is made once it is gone", claim.Name)
		case o == backend.DiskOther:
			return nil, fmt.Errorf("claim %s exists and is not this VM's (another object owns it, it is not labelled for this VM, or it was kept for another kind of resource): %w",
				claim.Name, backend.ErrDiskConflict)
		case o == backend.DiskOwned && c.ids().label != vm.UID:
			return b.relabel(ctx, vm, existing)
		}
		return b.diskOf(c, vm), nil
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, fmt.Errorf("create claim %s: namespace %s is being deleted: %w", claim.Name, vm.Namespace, err)
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err):
		return nil, fmt.Errorf("create claim %s: %w: %w", claim.Name, backend.ErrRejected, err)
	default:
		return nil, fmt.Errorf("create claim %s: %w", claim.Name, err)
	}
	b.created.Store(out.Namespace+"/"+out.Name, out.ResourceVersion)
	return b.diskOf(cacheClaim(out), vm), nil
}

// relabel gives pvc, a claim vm owns (owner), the labels and the name annotation the backend
// makes its claims with, in one strategic merge patch conditional on pvc's resourceVersion.
// Someone took its label LabelVMUID off: the cache, which holds only the labelled claims,
// lost the claim, and without the label back every decision would find no disk and ask to
// create it again, while the VM still owns the claim (a reclaim policy Retain would not be
// carried out before the VM's deletion, and the garbage collector deletes what a deleted VM
// owns). Only the label and the annotation are written; the rest is the decision's business,
// once the cache shows the claim again.
func (b *Backend) relabel(ctx context.Context, vm backend.Owner, pvc *corev1.PersistentVolumeClaim) (*backend.Disk, error) {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": pvc.ResourceVersion,
		"labels": labelsFor(vm), "annotations": map[string]any{AnnotationVM: vm.Name}}})
	if err != nil {
		return nil, fmt.Errorf("render claim patch: %w", err)
	}
	out, err := b.cfg.Client.CoreV1().PersistentVolumeClaims(vm.Namespace).Patch(ctx, pvc.Name, types.StrategicMergePatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err):
		return nil, fmt.Errorf("label claim %s: %w: %w", pvc.Name, backend.ErrRejected, err)
	default:
		return nil, fmt.Errorf("label claim %s: %w", pvc.Name, err)
	}
	b.created.Store(out.Namespace+"/"+out.Name, out.ResourceVersion)
	return b.diskOf(cacheClaim(out), vm), nil
}

// UpdateDisk brings vm's claim to spec in one strategic merge patch, conditional on the claim
// still being seen, the claim the decision saw: the patch carries seen's resourceVersion
// (Disk.Version), never the one the cache shows when the update runs, and is worked out from
// seen's claim: labelled with vm's UID, controlled by vm unless spec.Keep (then every owner
// reference with vm's UID, controller or not, removed by that UID, so that others' are kept),
// annotated as kept if and only if spec.Keep, annotated with vm's kind, and asking for
// spec.Size when it asks for less. A claim that is already so is not written. seen another's
// is ErrDiskConflict.
//
// What the patch needs beyond a Disk report (the claim's labels and annotations) is read from
// the cached claim, and only when the cache holds seen's claim itself (its UID and
// resourceVersion), so that the patch is worked out from the claim the decision saw. A cache
// that holds another version of the claim, another claim or none, is answered with a
// Conflict and nothing is asked: a claim changed since the decision saw it (marked kept, its
// owner reference taken off, taken by another) or gone is not patched on the decision's
// stale view, whether the cache shows the change already (this Conflict) or not yet (the API
// server's, on seen's resourceVersion); nor is one the cache shows only as it was before the
// controller's own write that seen is. Either way the VM is decided again on the claim as it
// now is.
func (b *Backend) UpdateDisk(ctx context.Context, vm backend.Owner, seen *backend.Disk, spec backend.DiskSpec) (*backend.Disk, error) {
	name := ClaimName(vm.Name)
	switch {
	case seen == nil:
		return nil, fmt.Errorf("update claim %s: no claim seen", name)
	case seen.Owner == backend.DiskOther:
		return nil, fmt.Errorf("claim %s is not this VM's: %w", name, backend.ErrDiskConflict)
	}
	c, err := b.cachedClaim(vm)
	if err != nil {
		return nil, err
	}
	var ids claimIDs
	if c != nil {
		ids = c.ids()
	}
	if c == nil || string(ids.uid) != seen.ID || ids.version != seen.Version {
		// The cache is behind the claim seen (seen is the answer of the controller's own last
		// write of it, which the cache has yet to show), or ahead of it: the claim is read as
		// it is, and the patch is worked out from it only if it is the one seen. Worked out
		// from the cache's older claim, it would leave out what that write changed.
		live, err := b.cfg.Client.CoreV1().PersistentVolumeClaims(vm.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			live = nil
		case err != nil:
			return nil, fmt.Errorf("read claim %s: %w", name, err)
		}
		if live == nil || string(live.UID) != seen.ID || live.ResourceVersion != seen.Version {
			now := "no claim"
			if live != nil {
				now = fmt.Sprintf("claim %s at resourceVersion %s", live.UID, live.ResourceVersion)
			}
			return nil, apierrors.NewConflict(schema.GroupResource{Resource: "persistentvolumeclaims"}, name,
				fmt.Errorf("the API server has %s, not %s at resourceVersion %s as seen", now, seen.ID, seen.Version))
		}
		c = cacheClaim(live)
		ids = c.ids()
	}
	meta := map[string]any{"resourceVersion": seen.Version}
	annotations := map[string]any{}
	changed := false
	if ids.label != vm.UID || c.vm != vm.Name {
		meta["labels"] = labelsFor(vm)
		annotations[AnnotationVM] = vm.Name
	}
	if kind := ownerKind(vm); kind != "" && c.kind.String() != kind {
		annotations[AnnotationOwnerKind] = kind
	}
	switch marked := c.flags&claimKeptMark != 0; {
	case spec.Keep && !marked:
		annotations[AnnotationKept] = "true"
	case !spec.Keep && marked:
		annotations[AnnotationKept] = nil // removed
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
		changed = true
	}
	// seen is not another's: a controller is vm. Kept, the claim loses every owner reference
	// with vm's UID, the controller's and any other (owner): the garbage collector deletes a
	// claim with the last owner it names, and "$patch: delete" by uid takes each reference
	// with that UID off, others' left as they are. Owned, it is controlled by vm: a reference
	// with vm's UID that did not say so is merged (by uid) into the controller's.
	controlled := c.flags&claimControlled != 0
	switch {
	case !spec.Keep && !controlled:
		meta["ownerReferences"] = []metav1.OwnerReference{controllerRef(vm)}
		changed = true
	case spec.Keep && (controlled || c.plainOwner(vm.UID)):
		meta["ownerReferences"] = []map[string]any{{"$patch": "delete", "uid": string(vm.UID)}}
		changed = true
	}
	patch := map[string]any{"metadata": meta}
	if spec.Size.Cmp(ids.requested) > 0 {
		patch["spec"] = map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": spec.Size.String()}}}
		changed = true
	}
	if !changed {
		return b.diskOf(c, vm), nil
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("render claim patch: %w", err)
	}
	out, err := b.cfg.Client.CoreV1().PersistentVolumeClaims(vm.Namespace).Patch(ctx, c.name, types.StrategicMergePatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err):
		// The API server's admission refuses a growth its class does not allow, and a size
		// past a quota: not fixed by asking again.
		return nil, fmt.Errorf("update claim %s: %w: %w", c.name, backend.ErrRejected, err)
	default:
		return nil, fmt.Errorf("update claim %s: %w", c.name, err)
	}
	b.created.Store(out.Namespace+"/"+out.Name, out.ResourceVersion)
	return b.diskOf(cacheClaim(out), vm), nil
}

// DeleteDisk deletes vm's claim, on the condition that it is still seen, the claim the
// decision saw, and that seen is vm's: a claim of that name that is another's is never
// deleted. The delete is conditional on seen's UID and resourceVersion (Disk.ID,
// Disk.Version), not on the cache as it is when the delete runs, so that a claim changed
// since the decision saw it (kept, its owner reference taken off, taken by another), even one
// whose change the cache already shows, is not deleted on the decision's stale view: the API
// server's Conflict is returned, and the VM is decided again on the claim as it now is.
func (b *Backend) DeleteDisk(ctx context.Context, vm backend.Owner, seen *backend.Disk) error {
	if b.disks == nil || seen == nil || !seen.Owner.Mine() || seen.Deleting {
		return nil
	}
	name := ClaimName(vm.Name)
	uid, version := types.UID(seen.ID), seen.Version
	err := b.cfg.Client.CoreV1().PersistentVolumeClaims(vm.Namespace).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &version},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete claim %s: %w", name, err)
	}
	return nil
}

// objectKeys are the keys of a small cached object (a StorageClass, an Event), which
// client-go's informer reads in place (cachemeta).
type objectKeys struct {
	cachemeta.Unkept
	namespace, name, version string
	uid                      types.UID
}

func (k *objectKeys) GetNamespace() string       { return k.namespace }
func (k *objectKeys) GetName() string            { return k.name }
func (k *objectKeys) GetUID() types.UID          { return k.uid }
func (k *objectKeys) GetResourceVersion() string { return k.version }

// GetObjectKind has nothing to tell: the informer knows what it caches.
func (k *objectKeys) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// class is a StorageClass as the disks need it: whether its claims may grow, and whether they
// are bound only once a pod that mounts them is scheduled. Immutable once made, so
// DeepCopyObject returns it.
type class struct {
	objectKeys
	grows bool
	late  bool // volumeBindingMode WaitForFirstConsumer
}

func (c *class) DeepCopyObject() runtime.Object { return c }

// toClass keeps a StorageClass's name, allowVolumeExpansion and volumeBindingMode. Tombstones
// pass through.
func toClass(obj any) (any, error) {
	sc, ok := obj.(*storagev1.StorageClass)
	if !ok {
		return obj, nil
	}
	return &class{objectKeys: objectKeys{name: sc.Name, version: sc.ResourceVersion, uid: sc.UID},
		grows: sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion,
		late:  sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer}, nil
}

// claimEvent is an Event on a claim (in the claim's namespace) as the disks need it: which
// claim (by name and UID), why, and when it last happened. Immutable once made.
type claimEvent struct {
	objectKeys
	claim    string
	claimUID types.UID
	reason   string
	message  interned
	warning  bool
	at       time.Time
}

func (e *claimEvent) DeepCopyObject() runtime.Object { return e }

// toClaimEvent keeps what binderWord reads of an Event. Tombstones pass through.
func toClaimEvent(obj any) (any, error) {
	e, ok := obj.(*corev1.Event)
	if !ok {
		return obj, nil
	}
	at := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(at) {
		at = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(at) {
		at = e.EventTime.Time
	}
	if at.IsZero() {
		at = e.CreationTimestamp.Time
	}
	ce := &claimEvent{objectKeys: objectKeys{namespace: e.Namespace, name: e.Name, version: e.ResourceVersion, uid: e.UID},
		reason: e.Reason, message: intern(e.Message), warning: e.Type == corev1.EventTypeWarning, at: at}
	// The field selector leaves out Events on other objects; a server that does not apply
	// it (a fake one) must not make them a claim's.
	if e.InvolvedObject.Kind == "PersistentVolumeClaim" {
		ce.claim, ce.claimUID = e.InvolvedObject.Name, e.InvolvedObject.UID
	}
	return ce, nil
}
