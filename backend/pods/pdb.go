package pods

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// A VM's disruption budget (backend.Budgets, the eviction strategy Block) is a
// PodDisruptionBudget in its namespace that selects its server pod by the VM's UID label and
// asks for one pod available: the eviction API refuses to evict the server, so a drain
// (kubectl drain, a cluster autoscaler, a node upgrade) waits until the VM's owner moves or
// stops it. Its name (BudgetName) and its annotation say which VM holds the drain and how to
// free it, for whoever finds it in a drain's output or in `kubectl get pdb`. The VM controls
// it, so it goes with the VM.
//
// A deletion that orphans the VM's dependents (kubectl delete --cascade=orphan) takes the
// owner reference off the budget before the VM goes. The budget still carries the VM's UID
// label, so it is still the VM's: the controller deletes it on the VM's way out. One left
// behind all the same, labelled for a VM of the same name and controlled by nothing, is
// adopted by the next VM of that name that needs one (its owner, labels and selector become
// the new VM's), as a kept disk is; a budget another object controls is never taken. As a
// claim does, a budget records the kind of resource its VM is (AnnotationOwnerKind): one left
// for another kind (a controller run with --api-version, --resource) is not adopted; one
// without the record (made by an earlier version) may be, and gets the adopter's kind. So a
// budget of an earlier version that its VM still holds gets the record too, once
// (RecordBudgetKind, asked for by the decision when ObserveBudget reports KindUnrecorded),
// before a deletion can leave it behind without it.
//
// This file also reads what the eviction strategies need of a server: the pod's
// DisruptionTarget condition (an eviction under way) and whether its node is cordoned.

// AnnotationBlocks is the annotation on a VM's PodDisruptionBudget that says which VM it
// keeps from being evicted and how to move it.
const AnnotationBlocks = "cloudnative.czs/blocks-eviction-of"

const budgetSuffix = "-block-eviction"

// BudgetName is the name of the PodDisruptionBudget of the VM called vm, by the rules of
// PodName.
func BudgetName(vm string) string { return nameFor(vm, budgetSuffix) }

var _ backend.Budgets = (*Backend)(nil)

// budgets is the backend's part for disruption budgets: the informer of the labelled
// PodDisruptionBudgets, and what the backend's own writes made or deleted until the informer
// shows it, so that a decision right after a write does not ask for it again.
type budgets struct {
	informer cache.SharedIndexInformer
	// written maps a budget's key (namespace/name) to what the backend's last write of it
	// left, until the informer brings an event of that key.
	written sync.Map
}

// writtenBudget is the budget a create, an adoption or a record of the kind returned for the
// VM of UID owner, with the kind it records (AnnotationOwnerKind), or nil after a delete.
type writtenBudget struct {
	owner  types.UID
	budget *backend.Budget
	kind   string
}

func newBudgets(cfg Config) *budgets {
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = LabelVMUID }
	inf := policyinformers.NewFilteredPodDisruptionBudgetInformer(cfg.Client, cfg.Namespace, cfg.Resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, tweak)
	return &budgets{informer: inf}
}

// startBudgets watches the VMs' budgets and notifies a VM whose budget changes (someone
// deleted it: the decision makes it again).
func (b *Backend) startBudgets(ctx context.Context, notify func(types.NamespacedName)) (cache.InformerSynced, error) {
	bs := b.budgets
	if err := bs.informer.SetTransform(toBudget); err != nil {
		return nil, fmt.Errorf("set budget transform: %w", err)
	}
	handled, err := bs.informer.AddEventHandler(bs.events(notify))
	if err != nil {
		return nil, fmt.Errorf("watch budgets: %w", err)
	}
	go bs.informer.RunWithContext(ctx)
	return handled.HasSynced, nil
}

// events is the budget informer's handler: an event of a budget ends what the backend's own
// write of it left (written), the informer having caught up, and notifies its VM. A resync
// (--resync) hands every budget to it again, unchanged, as both old and new: it is neither,
// and is dropped. Taken for an event, it made every VM of eviction strategy Block reconcile
// at each resync for nothing, and one between a write and its echo made the next read come
// from the cache, which did not have the write yet.
func (bs *budgets) events(notify func(types.NamespacedName)) cache.ResourceEventHandlerFuncs {
	owner := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		pdb, ok := obj.(*policyv1.PodDisruptionBudget)
		if !ok {
			return
		}
		bs.written.Delete(pdb.Namespace + "/" + pdb.Name)
		if vm := pdb.Annotations[AnnotationVM]; vm != "" {
			notify(types.NamespacedName{Namespace: pdb.Namespace, Name: vm})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: owner,
		UpdateFunc: func(old, cur any) {
			if old == cur { // a resync: the informer's transform skips it, and hands the cached object
				return
			}
			owner(cur)
		},
		DeleteFunc: owner,
	}
}

// toBudget keeps what the backend reads of a PodDisruptionBudget: its identity, labels,
// annotations and owners. Tombstones pass through.
func toBudget(obj any) (any, error) {
	pdb, ok := obj.(*policyv1.PodDisruptionBudget)
	if !ok {
		return obj, nil
	}
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: pdb.Name, Namespace: pdb.Namespace, UID: pdb.UID,
		ResourceVersion: pdb.ResourceVersion, Labels: pdb.Labels, Annotations: pdb.Annotations, OwnerReferences: pdb.OwnerReferences}}, nil
}

// ObserveBudget returns vm's PodDisruptionBudget as the cache shows it, or as the backend's
// own write left it when the cache has not caught up; nil when vm has none. A budget of the
// name is vm's when vm controls it, or when nothing does and it carries vm's UID label; one an
// earlier VM of the name left controlled by nothing is reported Unowned; any other is not
// reported (budgetOwnerOf).
func (b *Backend) ObserveBudget(vm backend.Owner) (*backend.Budget, error) {
	if b.budgets == nil {
		return nil, nil
	}
	key := vm.Namespace + "/" + BudgetName(vm.Name)
	if w, ok := b.budgets.written.Load(key); ok && w.(writtenBudget).owner == vm.UID {
		if w.(writtenBudget).budget == nil {
			return nil, nil
		}
		got := *w.(writtenBudget).budget
		return &got, nil
	}
	obj, ok, err := b.budgets.informer.GetIndexer().GetByKey(key)
	if err != nil {
		return nil, fmt.Errorf("read budget cache: %w", err)
	}
	if !ok {
		return nil, nil
	}
	pdb := obj.(*policyv1.PodDisruptionBudget)
	switch o := budgetOwnerOf(pdb, vm); o {
	case budgetMine, budgetUnowned:
		return budgetReport(pdb, vm, o), nil
	}
	return nil, nil
}

// budgetReport is pdb as vm's Budget, o saying whose it is (budgetMine or budgetUnowned): an
// own budget that does not record vm's kind is KindUnrecorded. It reads only what the cache
// keeps (toBudget), so that observing a VM whose budget records its kind asks for nothing.
func budgetReport(pdb *policyv1.PodDisruptionBudget, vm backend.Owner, o budgetOwner) *backend.Budget {
	got := &backend.Budget{Name: pdb.Name, ID: string(pdb.UID), Version: pdb.ResourceVersion, Unowned: o == budgetUnowned}
	if kind := ownerKind(vm); o == budgetMine && kind != "" && pdb.Annotations[AnnotationOwnerKind] != kind {
		got.KindUnrecorded = true
	}
	return got
}

// budgetOwner is whose a PodDisruptionBudget of a VM's name is, seen from that VM.
type budgetOwner int

// Who holds a budget.
const (
	// budgetOther: another object controls it, it is not labelled for the VM's name, or it
	// was left for another kind of resource (AnnotationOwnerKind): never reported, taken or
	// deleted.
	budgetOther budgetOwner = iota
	// budgetMine: the VM controls it, or nothing does and it carries the VM's UID (a deletion
	// of the VM that orphaned its dependents took the owner reference off).
	budgetMine
	// budgetUnowned: made for an earlier VM of the name (its annotation names the VM) of the
	// VM's kind, or of no recorded kind, and controlled by nothing: the VM may adopt it.
	budgetUnowned
)

// budgetOwnerOf says whose pdb is, seen from vm.
func budgetOwnerOf(pdb *policyv1.PodDisruptionBudget, vm backend.Owner) budgetOwner {
	ref := metav1.GetControllerOfNoCopy(pdb)
	switch {
	case ref != nil && ref.UID == vm.UID:
		return budgetMine
	case ref != nil:
		return budgetOther
	case pdb.Labels[LabelVMUID] == string(vm.UID):
		return budgetMine
	case pdb.Labels[LabelVMUID] != "" && pdb.Annotations[AnnotationVM] == vm.Name && ofKind(pdb.Annotations, vm):
		return budgetUnowned
	}
	return budgetOther
}

// ofKind reports whether annotations record vm's kind of resource (AnnotationOwnerKind), or
// none (an earlier version's object), as a claim's owner does.
func ofKind(annotations map[string]string, vm backend.Owner) bool {
	kind := annotations[AnnotationOwnerKind]
	return kind == "" || kind == ownerKind(vm)
}

// controlledBy reports whether vm is the controller among refs.
func controlledBy(refs []metav1.OwnerReference, vm backend.Owner) bool {
	return controllerIs(refs, vm.UID)
}

// controllerIs reports whether the controller among refs has the UID uid.
func controllerIs(refs []metav1.OwnerReference, uid types.UID) bool {
	ref := metav1.GetControllerOfNoCopy(&metav1.ObjectMeta{OwnerReferences: refs})
	return ref != nil && ref.UID == uid
}

// newBudget builds vm's PodDisruptionBudget: one server pod of the VM's UID available,
// recording vm's kind of resource (AnnotationOwnerKind).
func newBudget(vm backend.Owner) *policyv1.PodDisruptionBudget {
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta: budgetType,
		ObjectMeta: metav1.ObjectMeta{
			Name:      BudgetName(vm.Name),
			Namespace: vm.Namespace,
			Labels:    labelsFor(vm),
			Annotations: map[string]string{
				AnnotationVM: vm.Name,
				AnnotationBlocks: fmt.Sprintf("VirtualMachine %s has evictionStrategy Block: its server is not evicted; move it with "+
					"kubectl vm migrate %s -n %s, or stop it", vm.Name, vm.Name, vm.Namespace),
			},
			OwnerReferences: []metav1.OwnerReference{controllerRef(vm)},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &one,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{LabelVMUID: string(vm.UID)}},
		},
	}
	if kind := ownerKind(vm); kind != "" {
		pdb.Annotations[AnnotationOwnerKind] = kind
	}
	return pdb
}

// CreateBudget creates vm's PodDisruptionBudget. One that vm already controls is returned;
// one of the name that nothing controls and that is vm's or an earlier VM's of the name is
// adopted (adoptBudget); any other is ErrRejected, as is a budget the API server refuses.
func (b *Backend) CreateBudget(ctx context.Context, vm backend.Owner) (*backend.Budget, error) {
	if b.budgets == nil {
		return nil, fmt.Errorf("create budget: the backend keeps no budgets: %w", backend.ErrRejected)
	}
	pdb := newBudget(vm)
	client := b.cfg.Client.PolicyV1().PodDisruptionBudgets(vm.Namespace)
	out, err := client.Create(ctx, pdb, metav1.CreateOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
	case apierrors.IsAlreadyExists(err):
		existing, err := client.Get(ctx, pdb.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get existing budget %s: %w", pdb.Name, err)
		}
		if !controlledBy(existing.OwnerReferences, vm) {
			return b.adoptBudget(ctx, vm, existing)
		}
		out = existing
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return nil, fmt.Errorf("create budget %s: namespace %s is being deleted: %w", pdb.Name, vm.Namespace, err)
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err):
		return nil, fmt.Errorf("create budget %s: %w: %w", pdb.Name, backend.ErrRejected, err)
	default:
		return nil, fmt.Errorf("create budget %s: %w", pdb.Name, err)
	}
	return b.budgets.wrote(out, vm), nil
}

// AdoptBudget makes the PodDisruptionBudget of vm's name that nothing controls vm's, on the
// condition that it is still as the cache shows it (adoptBudget).
func (b *Backend) AdoptBudget(ctx context.Context, vm backend.Owner) (*backend.Budget, error) {
	if b.budgets == nil {
		return nil, fmt.Errorf("adopt budget: the backend keeps no budgets: %w", backend.ErrRejected)
	}
	pdb, err := b.cachedBudget(vm, "adopt")
	if err != nil {
		return nil, err
	}
	return b.adoptBudget(ctx, vm, pdb)
}

// cachedBudget is the budget of vm's name as the cache shows it, for the operation op (in
// its error when there is none).
func (b *Backend) cachedBudget(vm backend.Owner, op string) (*policyv1.PodDisruptionBudget, error) {
	name := BudgetName(vm.Name)
	obj, ok, err := b.budgets.informer.GetIndexer().GetByKey(vm.Namespace + "/" + name)
	switch {
	case err != nil:
		return nil, fmt.Errorf("read budget cache: %w", err)
	case !ok:
		return nil, fmt.Errorf("%s budget %s: not in the cache", op, name)
	}
	return obj.(*policyv1.PodDisruptionBudget), nil
}

// patchBudget sends patch, a strategic merge patch of pdb whose metadata is meta, for the
// operation op, conditional on pdb's resourceVersion as the cache shows it, and notes the
// budget it returns as vm's (budgets.wrote). A refusal (invalid, forbidden) is ErrRejected;
// a conflict (the budget changed since it was read) or a budget gone is returned as it is,
// and the next decision sees the budget as it is now.
func (b *Backend) patchBudget(ctx context.Context, vm backend.Owner, pdb *policyv1.PodDisruptionBudget, op string, patch, meta map[string]any) (*backend.Budget, error) {
	if pdb.ResourceVersion != "" {
		meta["resourceVersion"] = pdb.ResourceVersion
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("render budget patch: %w", err)
	}
	out, err := b.cfg.Client.PolicyV1().PodDisruptionBudgets(vm.Namespace).Patch(ctx, pdb.Name, types.StrategicMergePatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err):
		return nil, fmt.Errorf("%s budget %s: %w: %w", op, pdb.Name, backend.ErrRejected, err)
	default:
		return nil, fmt.Errorf("%s budget %s: %w", op, pdb.Name, err)
	}
	return b.budgets.wrote(out, vm), nil
}

// adoptBudget makes pdb, a budget of vm's name, vm's in one strategic merge patch
// conditional on its resourceVersion: vm's controller reference, labels and annotations, and
// a selector of vm's server (the one it has selects an earlier VM's); its annotations then
// record vm's kind. One vm already controls is returned as it is; one another object
// controls, not labelled for vm's name, or left for another kind of resource, is ErrRejected
// and left alone.
func (b *Backend) adoptBudget(ctx context.Context, vm backend.Owner, pdb *policyv1.PodDisruptionBudget) (*backend.Budget, error) {
	switch {
	case budgetOwnerOf(pdb, vm) == budgetOther:
		return nil, fmt.Errorf("PodDisruptionBudget %s already exists and is not this VM's (another object controls it, it is not labelled for this VM, or it was left for another kind of resource): %w",
			pdb.Name, backend.ErrRejected)
	case controlledBy(pdb.OwnerReferences, vm):
		return budgetReport(pdb, vm, budgetMine), nil
	}
	want := newBudget(vm)
	meta := map[string]any{"labels": want.Labels, "annotations": want.Annotations, "ownerReferences": want.OwnerReferences}
	patch := map[string]any{"metadata": meta, "spec": map[string]any{
		"minAvailable":   want.Spec.MinAvailable,
		"maxUnavailable": nil,
		"selector":       map[string]any{"$patch": "replace", "matchLabels": want.Spec.Selector.MatchLabels},
	}}
	return b.patchBudget(ctx, vm, pdb, "adopt", patch, meta)
}

// RecordBudgetKind records vm's kind of resource (AnnotationOwnerKind) on vm's own budget,
// which an earlier version made without it, in one strategic merge patch of that annotation
// conditional on the budget's resourceVersion as the cache shows it: a budget changed since
// (let go of, taken) is not written on a stale view, and the Conflict has the VM decided
// again. A budget that records the kind already is returned as it is, with no request; one
// that is not vm's (budgetOwnerOf), or none, is refused. Nothing else of the budget changes.
func (b *Backend) RecordBudgetKind(ctx context.Context, vm backend.Owner) (*backend.Budget, error) {
	if b.budgets == nil {
		return nil, fmt.Errorf("record kind on budget: the backend keeps no budgets: %w", backend.ErrRejected)
	}
	pdb, err := b.cachedBudget(vm, "record kind on")
	if err != nil {
		return nil, err
	}
	if budgetOwnerOf(pdb, vm) != budgetMine {
		return nil, fmt.Errorf("record kind on budget %s: it is not this VM's: %w", pdb.Name, backend.ErrRejected)
	}
	got := budgetReport(pdb, vm, budgetMine)
	if !got.KindUnrecorded {
		return got, nil
	}
	meta := map[string]any{"annotations": map[string]string{AnnotationOwnerKind: ownerKind(vm)}}
	return b.patchBudget(ctx, vm, pdb, "record kind on", map[string]any{"metadata": meta}, meta)
}

// wrote notes out, the budget a write of vm's returned (a create, an adoption, a record of the
// kind), until the informer shows it, and returns it as vm's Budget.
func (bs *budgets) wrote(out *policyv1.PodDisruptionBudget, vm backend.Owner) *backend.Budget {
	got := budgetReport(out, vm, budgetMine)
	bs.note(out.Namespace+"/"+out.Name, writtenBudget{owner: vm.UID, budget: got, kind: out.Annotations[AnnotationOwnerKind]}, out.UID)
	c := *got
	return &c
}

// note remembers what a write of the budget of key left (w), until the informer brings the
// budget's next event. The informer can bring the write's own event before note is called,
// and its handler then had no note to drop: the note would stand until some later event of
// the budget, which may never come. So once it is stored, the cache is read again: when it
// already shows the write (the budget of uid, controlled by w's VM and recording w's kind,
// after a create, an adoption or a record of the kind; no budget of uid after a delete), the
// note goes. The handler drops notes after
// updating the cache, so one of the two sees the other's work.
func (bs *budgets) note(key string, w writtenBudget, uid types.UID) {
	bs.written.Store(key, w)
	obj, ok, err := bs.informer.GetIndexer().GetByKey(key)
	if err != nil {
		return
	}
	cached, _ := obj.(*policyv1.PodDisruptionBudget)
	there := ok && cached != nil && cached.UID == uid &&
		(w.budget == nil || controllerIs(cached.OwnerReferences, w.owner) && cached.Annotations[AnnotationOwnerKind] == w.kind)
	if there == (w.budget != nil) {
		bs.written.CompareAndDelete(key, w)
	}
}

// DeleteBudget deletes vm's PodDisruptionBudget, on the condition that it is the one that is
// vm's as the cache shows it (ObserveBudget); one already gone (or replaced) is not an error,
// and one that is not vm's is left alone. A delete the API server refuses (Forbidden: the
// controller's Role, an admission policy that protects budgets; Invalid) is ErrRejected.
func (b *Backend) DeleteBudget(ctx context.Context, vm backend.Owner) error {
	got, err := b.ObserveBudget(vm)
	if err != nil || got == nil || got.Unowned {
		return err
	}
	uid := types.UID(got.ID)
	err = b.cfg.Client.PolicyV1().PodDisruptionBudgets(vm.Namespace).Delete(ctx, got.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err):
		return fmt.Errorf("delete budget %s: %w: %w", got.Name, backend.ErrRejected, err)
	default:
		return fmt.Errorf("delete budget %s: %w", got.Name, err)
	}
	b.budgets.note(vm.Namespace+"/"+got.Name, writtenBudget{owner: vm.UID}, uid)
	return nil
}

// disruptionOf is the pod's DisruptionTarget condition as a backend.Disruption: the API
// server sets it (True) before it deletes a pod for an eviction (reason
// EvictionByEvictionAPI), a preemption or a node's taint, and the kubelet before it ends one
// under pressure; nil when the pod has none.
func disruptionOf(pod *corev1.Pod) *backend.Disruption {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return &backend.Disruption{Reason: c.Reason, Message: c.Message}
		}
	}
	return nil
}

// cordoned marks s as on a cordoned node when nodes are watched and its node is
// unschedulable (a drain cordons the node first).
func (b *Backend) cordoned(s *backend.Server) {
	if b.nodes == nil || s == nil || s.Node == "" {
		return
	}
	if obj, ok, err := b.nodes.GetIndexer().GetByKey(s.Node); err == nil && ok {
		s.Cordoned = obj.(*corev1.Node).Spec.Unschedulable
	}
}
