package pods

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestDisruptionOf: the DisruptionTarget condition, when True, is the server's disruption;
// another condition, or one that is not True, is none.
func TestDisruptionOf(t *testing.T) {
	tests := map[string]struct {
		conds []corev1.PodCondition
		want  *backend.Disruption
	}{
		"none":  {nil, nil},
		"ready": {[]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, nil},
		"eviction": {[]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}},
			&backend.Disruption{Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}},
		"cleared": {[]corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionFalse, Reason: "EvictionByEvictionAPI"}}, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := disruptionOf(&corev1.Pod{Status: corev1.PodStatus{Conditions: tc.conds}})
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestCachedDisruption: a pod being evicted reads back from the cache as serverOf reads it,
// with its node and its disruption.
func TestCachedDisruption(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a",
		UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"}
	pod := newPod(vm, backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), RootDisk: resource.MustParse("1G"), Image: "img"})
	pod.UID, pod.ResourceVersion, pod.Spec.NodeName = "7d1b6c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f", "12", "node-a"
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}}
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	want := serverOf(pod)
	if want.Disruption == nil || want.Node != "node-a" {
		t.Fatalf("serverOf: %+v", want)
	}
	got := cachePod(pod).observed(nil)
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("cached\n%+v\nwant\n%+v", *got, want)
	}
	pod.Status.Conditions = pod.Status.Conditions[:1]
	if got := cachePod(pod).observed(nil); got.Node != "node-a" || got.Disruption != nil {
		t.Errorf("without the condition: %+v", got)
	}
}

// TestBudgets runs the budgets over the typed clientset: a budget is created as the VM's,
// observed at once (before the informer brings it) and from the cache after; a create again
// returns it; a budget of the name that another VM controls is refused and not observed; a
// delete removes it, and a server on a cordoned node says so.
func TestBudgets(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"}, Spec: corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	client := kubefake.NewClientset(node)
	b, notified := started(t, Config{Client: client, WatchNodes: true, Budgets: true})
	ctx := t.Context()
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	if got, err := b.ObserveBudget(vm); err != nil || got != nil {
		t.Fatalf("before: %+v, %v", got, err)
	}
	made, err := b.CreateBudget(ctx, vm)
	if err != nil {
		t.Fatal(err)
	}
	if made.Name != "a-block-eviction" {
		t.Errorf("made %+v", made)
	}
	if got, err := b.ObserveBudget(vm); err != nil || got == nil || *got != *made {
		t.Errorf("right after the create: %+v, %v", got, err)
	}
	pdb, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(ctx, made.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 ||
		!reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, map[string]string{LabelVMUID: "u-1"}) ||
		!controlledBy(pdb.OwnerReferences, vm) || pdb.Annotations[AnnotationBlocks] == "" {
		t.Errorf("budget %+v", pdb)
	}
	await(t, notified, func() bool {
		_, written := b.budgets.written.Load("ns/" + made.Name)
		return !written
	})
	if got, err := b.ObserveBudget(vm); err != nil || got == nil || got.Name != made.Name {
		t.Errorf("from the cache: %+v, %v", got, err)
	}
	if again, err := b.CreateBudget(ctx, vm); err != nil || again.Name != made.Name {
		t.Errorf("create again: %+v, %v", again, err)
	}

	other := backend.Owner{APIVersion: vm.APIVersion, Kind: vm.Kind, Namespace: "ns", Name: "a", UID: "u-2"}
	if got, err := b.ObserveBudget(other); err != nil || got != nil {
		t.Errorf("another VM of the name observes %+v, %v", got, err)
	}
	if _, err := b.CreateBudget(ctx, other); !errors.Is(err, backend.ErrRejected) {
		t.Errorf("create over another's budget: %v, want ErrRejected", err)
	}

	if err := b.DeleteBudget(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.ObserveBudget(vm); got != nil {
		t.Errorf("right after the delete: %+v", got)
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(ctx, made.Name, metav1.GetOptions{}); err == nil {
		t.Error("the budget is still there")
	}
	if err := b.DeleteBudget(ctx, vm); err != nil {
		t.Errorf("delete of a budget gone: %v", err)
	}

	// A server on the cordoned node n1.
	if _, err := b.Create(ctx, vm, backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"),
		RootDisk: resource.MustParse("1G"), Image: "img"}); err != nil {
		t.Fatal(err)
	}
	pod, err := client.CoreV1().Pods("ns").Get(ctx, PodName("a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.NodeName, pod.ResourceVersion = "n1", "2"
	if _, err := client.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		srv, err := b.Observe(vm)
		if err != nil {
			t.Fatal(err)
		}
		if srv != nil && srv.Node == "n1" {
			if !srv.Cordoned {
				t.Errorf("server on a cordoned node: %+v", srv)
			}
			break
		}
		runtime.Gosched()
	}
}

// TestBudgetEchoBeforeTheWriteReturns: the informer brings a budget's create, then its delete,
// back before the write returns (here the fake's reactors wait for it; on a busy controller the
// handler can simply run first). The backend's note of each write must not outlive the event:
// nothing else would drop it, and it would stand in for the cache until the budget's next
// event (TestBudgets hung on exactly that in CI).
func TestBudgetEchoBeforeTheWriteReturns(t *testing.T) {
	client := kubefake.NewClientset()
	b, notified := started(t, Config{Client: client, Budgets: true})
	ctx := t.Context()
	// Each write goes through the tracker as the fake's own reactor would, and returns only
	// once the informer's handler has had the event.
	gvr := policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
	echoed := func() error {
		select {
		case <-notified:
			return nil
		case <-time.After(time.Minute):
			return errors.New("the informer did not bring the write back")
		}
	}
	client.PrependReactor("create", "poddisruptionbudgets", func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		obj := action.(k8stesting.CreateAction).GetObject()
		if err := client.Tracker().Create(gvr, obj, action.GetNamespace()); err != nil {
			return true, nil, err
		}
		got, err := client.Tracker().Get(gvr, action.GetNamespace(), obj.(*policyv1.PodDisruptionBudget).Name)
		if err != nil {
			return true, nil, err
		}
		return true, got, echoed()
	})
	client.PrependReactor("delete", "poddisruptionbudgets", func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		if err := client.Tracker().Delete(gvr, action.GetNamespace(), action.(k8stesting.DeleteAction).GetName()); err != nil {
			return true, nil, err
		}
		return true, nil, echoed()
	})

	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	key := "ns/" + BudgetName(vm.Name)
	made, err := b.CreateBudget(ctx, vm)
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := b.budgets.written.Load(key); ok {
		t.Errorf("after a create the cache already had: the note %+v stands", w)
	}
	if got, err := b.ObserveBudget(vm); err != nil || got == nil || got.Name != made.Name {
		t.Errorf("observed %+v, %v, want %s from the cache", got, err, made.Name)
	}
	if err := b.DeleteBudget(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if w, ok := b.budgets.written.Load(key); ok {
		t.Errorf("after a delete the cache already had: the note %+v stands", w)
	}
	if got, err := b.ObserveBudget(vm); err != nil || got != nil {
		t.Errorf("observed %+v, %v after the delete, want none", got, err)
	}
}

// orphan takes every owner reference off the budget name, as the garbage collector does to
// a VM's dependents when the VM is deleted with kubectl delete --cascade=orphan, and waits
// until the cache shows it.
func orphan(t *testing.T, b *Backend, client *kubefake.Clientset, notified <-chan types.NamespacedName, name string) {
	t.Helper()
	ctx := t.Context()
	pdb, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.OwnerReferences, pdb.ResourceVersion = nil, "2"
	if _, err := client.PolicyV1().PodDisruptionBudgets("ns").Update(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, notified, func() bool {
		obj, ok, _ := b.budgets.informer.GetIndexer().GetByKey("ns/" + name)
		_, written := b.budgets.written.Load("ns/" + name)
		return ok && len(obj.(*policyv1.PodDisruptionBudget).OwnerReferences) == 0 && !written
	})
}

// TestBudgetOrphanedByDeletion: a VM deleted with kubectl delete --cascade=orphan loses the
// owner reference of its budget before it goes. The budget is still the VM's (its UID
// label): observed, and deleted on the VM's way out. One left behind all the same is not
// in the way of the next VM of the name: that VM's create adopts it (its controller, labels
// and selector become the new VM's), so that its server is held by it.
func TestBudgetOrphanedByDeletion(t *testing.T) {
	client := kubefake.NewClientset()
	b, notified := started(t, Config{Client: client, Budgets: true})
	ctx := t.Context()
	old := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	made, err := b.CreateBudget(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	orphan(t, b, client, notified, made.Name)

	// The way out of the deleted VM.
	if got, err := b.ObserveBudget(old); err != nil || got == nil || got.Name != made.Name || got.Unowned {
		t.Errorf("the deleted VM observes %+v, %v; want its budget %s, though nothing controls it", got, err, made.Name)
	}
	if err := b.DeleteBudget(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(ctx, made.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the orphaned budget is still there after the VM's way out: %v", err)
	}
	await(t, notified, func() bool {
		_, ok, _ := b.budgets.informer.GetIndexer().GetByKey("ns/" + made.Name)
		return !ok
	})

	// A budget left behind (by an older controller) and a VM created again with the name.
	made, err = b.CreateBudget(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	orphan(t, b, client, notified, made.Name)
	again := backend.Owner{APIVersion: old.APIVersion, Kind: old.Kind, Namespace: "ns", Name: "a", UID: "u-2"}
	got, err := b.CreateBudget(ctx, again)
	if err != nil {
		t.Fatalf("the VM created again with the name: create budget: %v", err)
	}
	if got.Name != made.Name {
		t.Errorf("budget %+v, want %s adopted", got, made.Name)
	}
	pdb, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(ctx, made.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !controlledBy(pdb.OwnerReferences, again) || len(pdb.OwnerReferences) != 1 || pdb.Labels[LabelVMUID] != "u-2" ||
		!reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, map[string]string{LabelVMUID: "u-2"}) || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("adopted budget: owners %+v, labels %v, spec %+v; want the new VM's", pdb.OwnerReferences, pdb.Labels, pdb.Spec)
	}
}

// TestBudgetAdoption: the budget of a VM's name, by who holds it, as the VM of UID u-2
// observes it and as AdoptBudget and DeleteBudget treat it. Only one labelled for the name
// and controlled by nothing is adopted; none that is not the VM's is ever deleted.
func TestBudgetAdoption(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-2"}
	earlier := backend.Owner{APIVersion: vm.APIVersion, Kind: vm.Kind, Namespace: "ns", Name: "a", UID: "u-1"}
	machine := backend.Owner{APIVersion: "other.example.org/v1", Kind: "Machine", Namespace: "ns", Name: "a", UID: "m-1"}
	tests := map[string]struct {
		budget  func() *policyv1.PodDisruptionBudget // the budget of the name before
		observe string                               // what the VM observes: none, mine or unowned
		adopt   bool                                 // AdoptBudget makes it the VM's (else ErrRejected)
	}{
		"left by an earlier VM": {func() *policyv1.PodDisruptionBudget {
			p := newBudget(earlier)
			p.OwnerReferences = nil
			return p
		}, "unowned", true},
		"left by an earlier version, no kind recorded": {func() *policyv1.PodDisruptionBudget {
			p := newBudget(earlier)
			p.OwnerReferences = nil
			delete(p.Annotations, AnnotationOwnerKind)
			return p
		}, "unowned", true},
		"left for another kind of object": {func() *policyv1.PodDisruptionBudget {
			p := newBudget(machine)
			p.OwnerReferences = nil
			return p
		}, "none", false},
		"controlled by an earlier VM": {func() *policyv1.PodDisruptionBudget { return newBudget(earlier) }, "none", false},
		"controlled by another object": {func() *policyv1.PodDisruptionBudget {
			p := newBudget(earlier)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "d-1", Controller: ptr.To(true)}}
			return p
		}, "none", false},
		"labelled for another VM's name": {func() *policyv1.PodDisruptionBudget {
			p := newBudget(backend.Owner{Namespace: "ns", Name: "b", UID: "u-9"})
			p.Name, p.OwnerReferences = BudgetName("a"), nil
			return p
		}, "none", false},
		"the VM's own, orphaned": {func() *policyv1.PodDisruptionBudget {
			p := newBudget(vm)
			p.OwnerReferences = nil
			return p
		}, "mine", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			before := tc.budget()
			before.UID, before.ResourceVersion = "pdb-1", "1"
			client := kubefake.NewClientset(before)
			b, _ := started(t, Config{Client: client, Budgets: true})
			ctx := t.Context()
			got, err := b.ObserveBudget(vm)
			if err != nil {
				t.Fatal(err)
			}
			observed := "none"
			switch {
			case got != nil && got.Unowned:
				observed = "unowned"
			case got != nil:
				observed = "mine"
			}
			if observed != tc.observe {
				t.Errorf("observed %s (%+v), want %s", observed, got, tc.observe)
			}
			if observed != "mine" {
				if err := b.DeleteBudget(ctx, vm); err != nil {
					t.Fatal(err)
				}
				if _, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(ctx, before.Name, metav1.GetOptions{}); err != nil {
					t.Fatalf("a budget that is not the VM's was deleted: %v", err)
				}
			}
			adopted, err := b.AdoptBudget(ctx, vm)
			after, gerr := client.PolicyV1().PodDisruptionBudgets("ns").Get(ctx, before.Name, metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			if !tc.adopt {
				if !errors.Is(err, backend.ErrRejected) {
					t.Errorf("adopt: %+v, %v; want ErrRejected", adopted, err)
				}
				if !reflect.DeepEqual(after.OwnerReferences, before.OwnerReferences) || !reflect.DeepEqual(after.Spec, before.Spec) ||
					!reflect.DeepEqual(after.Annotations, before.Annotations) {
					t.Errorf("a budget that is not the VM's was changed: %+v", after)
				}
				return
			}
			if err != nil || adopted.ID != "pdb-1" {
				t.Fatalf("adopt: %+v, %v", adopted, err)
			}
			if !controlledBy(after.OwnerReferences, vm) || after.Labels[LabelVMUID] != "u-2" ||
				!reflect.DeepEqual(after.Spec.Selector.MatchLabels, map[string]string{LabelVMUID: "u-2"}) {
				t.Errorf("adopted: owners %+v, labels %v, selector %+v", after.OwnerReferences, after.Labels, after.Spec.Selector)
			}
			if kind := after.Annotations[AnnotationOwnerKind]; kind != "VirtualMachine.cloudnative.czs" {
				t.Errorf("adopted: the budget records the kind %q, want VirtualMachine.cloudnative.czs", kind)
			}
			if got, err := b.ObserveBudget(vm); err != nil || got == nil || got.Unowned || got.ID != "pdb-1" {
				t.Errorf("right after the adoption: %+v, %v; want the VM's", got, err)
			}
		})
	}
}

// TestBudgetKind: a budget records the kind of resource its VM is (AnnotationOwnerKind), so
// that a controller run for another resource (--api-version, --resource) does not take the
// budget a VirtualMachine of the same name left or still holds by its UID label: CreateBudget
// over it is refused as AdoptBudget is, and it is left as it was. CreateBudget over a budget
// an earlier version left (no kind recorded) adopts it and records the kind, and a budget made
// anew carries the record.
func TestBudgetKind(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	machine := backend.Owner{APIVersion: "other.example.org/v1", Kind: "Machine", Namespace: "ns", Name: "a", UID: "m-1"}
	get := func(t *testing.T, client *kubefake.Clientset) *policyv1.PodDisruptionBudget {
		t.Helper()
		p, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(t.Context(), BudgetName("a"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("made anew", func(t *testing.T) {
		client := kubefake.NewClientset()
		b, _ := started(t, Config{Client: client, Budgets: true})
		if _, err := b.CreateBudget(t.Context(), machine); err != nil {
			t.Fatal(err)
		}
		if kind := get(t, client).Annotations[AnnotationOwnerKind]; kind != "Machine.other.example.org" {
			t.Errorf("the budget records the kind %q, want Machine.other.example.org", kind)
		}
	})

	t.Run("a VirtualMachine's, to a Machine of the same name", func(t *testing.T) {
		before := newBudget(vm)
		before.OwnerReferences = nil // a --cascade=orphan deletion took it off; the VM still holds it by its label
		before.UID, before.ResourceVersion = "pdb-1", "1"
		client := kubefake.NewClientset(before)
		b, _ := started(t, Config{Client: client, Budgets: true})
		ctx := t.Context()
		if got, _ := b.ObserveBudget(vm); got == nil || got.Unowned {
			t.Fatalf("the VirtualMachine observes %+v, want its own", got)
		}
		if got, err := b.ObserveBudget(machine); err != nil || got != nil {
			t.Errorf("the Machine observes %+v, %v; want none", got, err)
		}
		if got, err := b.AdoptBudget(ctx, machine); !errors.Is(err, backend.ErrRejected) {
			t.Errorf("adopt for the Machine: %+v, %v; want ErrRejected", got, err)
		}
		if got, err := b.CreateBudget(ctx, machine); !errors.Is(err, backend.ErrRejected) {
			t.Errorf("create for the Machine: %+v, %v; want ErrRejected", got, err)
		}
		if err := b.DeleteBudget(ctx, machine); err != nil {
			t.Fatal(err)
		}
		after := get(t, client)
		if after.UID != "pdb-1" || !reflect.DeepEqual(after.ObjectMeta.Annotations, before.Annotations) ||
			!reflect.DeepEqual(after.Labels, before.Labels) || len(after.OwnerReferences) != 0 || !reflect.DeepEqual(after.Spec, before.Spec) {
			t.Errorf("the VirtualMachine's budget was changed: %+v", after)
		}
		if got, _ := b.ObserveBudget(vm); got == nil || got.Unowned || got.ID != "pdb-1" {
			t.Errorf("the VirtualMachine observes %+v after the Machine's requests, want its own", got)
		}
	})

	t.Run("an earlier version's, created over", func(t *testing.T) {
		earlier := vm
		earlier.UID = "u-0"
		before := newBudget(earlier)
		before.OwnerReferences = nil
		delete(before.Annotations, AnnotationOwnerKind)
		before.UID, before.ResourceVersion = "pdb-1", "1"
		client := kubefake.NewClientset(before)
		b, _ := started(t, Config{Client: client, Budgets: true})
		got, err := b.CreateBudget(t.Context(), machine)
		if err != nil || got.ID != "pdb-1" {
			t.Fatalf("create for the Machine: %+v, %v; want the budget left behind adopted", got, err)
		}
		after := get(t, client)
		if !controlledBy(after.OwnerReferences, machine) || after.Annotations[AnnotationOwnerKind] != "Machine.other.example.org" {
			t.Errorf("adopted: owners %+v, annotations %v; want the Machine's and its kind", after.OwnerReferences, after.Annotations)
		}
	})
}

// TestBudgetKindRecorded: a budget an earlier version made without the kind of its VM's
// resource, which the VM controls, is reported KindUnrecorded, and RecordBudgetKind records the
// kind in one patch of that annotation alone, conditional on the budget's resourceVersion as
// the cache shows it. It is observed recorded at once (before the informer brings the patch)
// and after; a second RecordBudgetKind, and observing a budget that records the kind, ask
// nothing of the API server. Left behind by a --cascade=orphan deletion afterwards, the budget
// is not taken by a Machine of the same name, as it would have been without the record.
func TestBudgetKindRecorded(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	machine := backend.Owner{APIVersion: "other.example.org/v1", Kind: "Machine", Namespace: "ns", Name: "a", UID: "m-1"}
	before := newBudget(vm)
	delete(before.Annotations, AnnotationOwnerKind)
	before.UID, before.ResourceVersion = "pdb-1", "1"
	client := kubefake.NewClientset(before)
	sent := preconditioned(t, client, "1")
	b, notified := started(t, Config{Client: client, Budgets: true})
	ctx := t.Context()
	client.ClearActions()

	got, err := b.ObserveBudget(vm)
	if err != nil || got == nil || got.ID != "pdb-1" || got.Unowned || !got.KindUnrecorded {
		t.Fatalf("observed %+v, %v; want the VM's budget, its kind unrecorded", got, err)
	}
	if got, err := b.RecordBudgetKind(ctx, vm); err != nil || got.ID != "pdb-1" || got.KindUnrecorded {
		t.Fatalf("record: %+v, %v", got, err)
	}
	if got, _ := b.ObserveBudget(vm); got == nil || got.KindUnrecorded {
		t.Errorf("right after the record: %+v, want it recorded", got)
	}
	if len(*sent) != 1 {
		t.Fatalf("patches %+v, want one", *sent)
	}
	var patch map[string]any
	if err := json.Unmarshal([]byte((*sent)[0]), &patch); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"metadata": map[string]any{"resourceVersion": "1",
		"annotations": map[string]any{AnnotationOwnerKind: "VirtualMachine.cloudnative.czs"}}}
	if !reflect.DeepEqual(patch, want) {
		t.Errorf("patch %s, want only the kind, on resourceVersion 1", (*sent)[0])
	}
	after, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(ctx, before.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.Annotations[AnnotationOwnerKind] != "VirtualMachine.cloudnative.czs" || !reflect.DeepEqual(after.OwnerReferences, before.OwnerReferences) ||
		!reflect.DeepEqual(after.Labels, before.Labels) || !reflect.DeepEqual(after.Spec, before.Spec) {
		t.Errorf("budget after the record: %+v", after)
	}
	await(t, notified, func() bool {
		_, written := b.budgets.written.Load("ns/" + before.Name)
		return !written
	})
	client.ClearActions()
	if got, _ := b.ObserveBudget(vm); got == nil || got.KindUnrecorded {
		t.Errorf("from the cache: %+v, want it recorded", got)
	}
	if got, err := b.RecordBudgetKind(ctx, vm); err != nil || got.KindUnrecorded {
		t.Errorf("record again: %+v, %v", got, err)
	}
	if acts := client.Actions(); len(acts) != 0 {
		t.Errorf("observing and recording a budget that records the kind asked %v of the API server, want nothing", acts)
	}

	orphan(t, b, client, notified, before.Name)
	if got, err := b.ObserveBudget(machine); err != nil || got != nil {
		t.Errorf("left behind, the budget is observed by the Machine: %+v, %v; want none", got, err)
	}
	if got, err := b.AdoptBudget(ctx, machine); !errors.Is(err, backend.ErrRejected) {
		t.Errorf("left behind, the budget is adopted by the Machine: %+v, %v; want ErrRejected", got, err)
	}
}

// TestRecordBudgetKindRefused: RecordBudgetKind writes only the VM's own budget, and only as
// the decision could have seen it: one another object controls, or that an earlier VM left
// (Unowned: its adoption records the kind), is refused with no request; a budget changed since
// the cache showed it gets the API server's Conflict (the patch carries the cached
// resourceVersion), and one the API server refuses for good is ErrRejected.
func TestRecordBudgetKindRefused(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-2"}
	unrecorded := func(owner backend.Owner) *policyv1.PodDisruptionBudget {
		p := newBudget(owner)
		delete(p.Annotations, AnnotationOwnerKind)
		p.UID, p.ResourceVersion = "pdb-1", "1"
		return p
	}
	tests := map[string]struct {
		cached  *policyv1.PodDisruptionBudget // as the cache shows it
		now     string                        // its resourceVersion on the API server
		refuse  error                         // the API server's answer to a patch
		check   func(error) bool
		request bool // a patch is sent
	}{
		"another's": {cached: func() *policyv1.PodDisruptionBudget {
			p := unrecorded(vm)
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "d-1", Controller: ptr.To(true)}}
			return p
		}(), now: "1", check: func(err error) bool { return errors.Is(err, backend.ErrRejected) }},
		"an earlier VM's": {cached: func() *policyv1.PodDisruptionBudget {
			p := unrecorded(backend.Owner{APIVersion: vm.APIVersion, Kind: vm.Kind, Namespace: "ns", Name: "a", UID: "u-1"})
			p.OwnerReferences = nil
			return p
		}(), now: "1", check: func(err error) bool { return errors.Is(err, backend.ErrRejected) }},
		"changed since": {cached: unrecorded(vm), now: "2", check: apierrors.IsConflict, request: true},
		"forbidden": {cached: unrecorded(vm), now: "1", refuse: apierrors.NewForbidden(policyv1.Resource("poddisruptionbudgets"), "a-block-eviction",
			errors.New("denied")), check: func(err error) bool { return errors.Is(err, backend.ErrRejected) }, request: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			live := tc.cached.DeepCopy()
			live.ResourceVersion = tc.now
			client := kubefake.NewClientset(live)
			preconditioned(t, client, tc.now)
			if tc.refuse != nil {
				client.PrependReactor("patch", "poddisruptionbudgets", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
					return true, nil, tc.refuse
				})
			}
			b := New(Config{Client: client, Budgets: true}) // not started: the cache holds what the test puts there
			if err := b.budgets.informer.GetIndexer().Add(tc.cached); err != nil {
				t.Fatal(err)
			}
			got, err := b.RecordBudgetKind(t.Context(), vm)
			if !tc.check(err) {
				t.Errorf("record: %+v, %v", got, err)
			}
			patched := false
			for _, a := range client.Actions() {
				patched = patched || a.GetVerb() == "patch"
			}
			if patched != tc.request {
				t.Errorf("a patch sent: %v (%v), want %v", patched, client.Actions(), tc.request)
			}
			after, err := client.PolicyV1().PodDisruptionBudgets("ns").Get(t.Context(), live.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(after.Annotations, live.Annotations) {
				t.Errorf("the budget was written: %v", after.Annotations)
			}
		})
	}
}

// preconditioned makes client answer a budget patch whose resourceVersion is not rv with a
// Conflict, as the API server does (the fake clientset takes it as one more field to set), and
// returns the patches sent, in order.
func preconditioned(t *testing.T, client *kubefake.Clientset, rv string) *[]string {
	t.Helper()
	var mu sync.Mutex
	sent := &[]string{}
	client.PrependReactor("patch", "poddisruptionbudgets", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		p := a.(k8stesting.PatchAction)
		var body struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			t.Error(err)
		}
		mu.Lock()
		*sent = append(*sent, string(p.GetPatch()))
		mu.Unlock()
		if body.Metadata.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(policyv1.Resource("poddisruptionbudgets"), p.GetName(),
				fmt.Errorf("the object has been modified (%s, not %s)", rv, body.Metadata.ResourceVersion))
		}
		return false, nil, nil
	})
	return sent
}

// TestDeleteBudgetRefused: a delete of the VM's budget that the API server refuses for good
// (a Role without delete, an admission policy that protects budgets, an invalid request) is
// ErrRejected, which lets a deleted VM go without it; one that fails for a time (no answer, a
// timeout) is not, and is retried. Either way the budget is still observed.
func TestDeleteBudgetRefused(t *testing.T) {
	gr := policyv1.Resource("poddisruptionbudgets")
	tests := map[string]struct {
		answer   error
		rejected bool
	}{
		"forbidden":   {apierrors.NewForbidden(gr, "a-block-eviction", errors.New("denied by protect-pdbs")), true},
		"invalid":     {apierrors.NewInvalid(policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget").GroupKind(), "a-block-eviction", nil), true},
		"unavailable": {apierrors.NewServiceUnavailable("the server is currently unable to handle the request"), false},
		"timeout":     {apierrors.NewTimeoutError("request did not complete", 1), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
			pdb := newBudget(vm)
			pdb.UID, pdb.ResourceVersion = "pdb-1", "1"
			client := kubefake.NewClientset(pdb)
			client.PrependReactor("delete", "poddisruptionbudgets", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
				return true, nil, tc.answer
			})
			b, _ := started(t, Config{Client: client, Budgets: true})
			err := b.DeleteBudget(t.Context(), vm)
			if err == nil || errors.Is(err, backend.ErrRejected) != tc.rejected {
				t.Errorf("delete = %v, want an error, ErrRejected: %v", err, tc.rejected)
			}
			if got, _ := b.ObserveBudget(vm); got == nil || got.ID != "pdb-1" {
				t.Errorf("after the failed delete the VM observes %+v, want its budget", got)
			}
		})
	}
}

// TestObjectKinds: the kinds the backend gives its servers, disks and budgets, which the
// controller's Events name as their related objects, are the API's own kinds of what it makes
// of them: an Event that named another kind would point kubectl at no object.
func TestObjectKinds(t *testing.T) {
	b := New(Config{Client: kubefake.NewClientset()})
	for _, tc := range []struct {
		what string
		kind func() (string, string)
		obj  k8sruntime.Object
	}{
		{"server", b.ServerKind, &corev1.Pod{}},
		{"disk", b.DiskKind, &corev1.PersistentVolumeClaim{}},
		{"budget", b.BudgetKind, &policyv1.PodDisruptionBudget{}},
	} {
		gvks, _, err := scheme.Scheme.ObjectKinds(tc.obj)
		if err != nil || len(gvks) != 1 {
			t.Fatalf("%s: %v, %v", tc.what, gvks, err)
		}
		apiVersion, kind := gvks[0].ToAPIVersionAndKind()
		if gotVersion, gotKind := tc.kind(); gotVersion != apiVersion || gotKind != kind {
			t.Errorf("%s kind %s %s, want %s %s", tc.what, gotVersion, gotKind, apiVersion, kind)
		}
	}
}

// TestBudgetVersion: a budget is reported at its resourceVersion, which the Events of actions
// on it name, so that an action on the budget as it was is told from one on it since changed.
func TestBudgetVersion(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	pdb := newBudget(vm)
	pdb.UID, pdb.ResourceVersion = "b-1", "42"
	got := budgetReport(pdb, vm, budgetMine)
	if got.ID != "b-1" || got.Version != "42" {
		t.Errorf("reported %+v, want ID b-1 at version 42", got)
	}
	kept, err := toBudget(pdb)
	if err != nil {
		t.Fatal(err)
	}
	if cached := budgetReport(kept.(*policyv1.PodDisruptionBudget), vm, budgetMine); *cached != *got {
		t.Errorf("from the cache %+v, want %+v", cached, got)
	}
}

// TestBudgetResyncDropped: a resync hands a budget to the handler again, unchanged, as both
// old and new: no VM is notified, and what the backend's own write left stays, where a change
// of the budget notifies its VM and lets the write go.
func TestBudgetResyncDropped(t *testing.T) {
	var notified []types.NamespacedName
	bs := &budgets{}
	h := bs.events(func(vm types.NamespacedName) { notified = append(notified, vm) })
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1-budget", ResourceVersion: "5",
		Annotations: map[string]string{AnnotationVM: "vm1"}}}
	bs.written.Store("ns/vm1-budget", &writtenBudget{owner: "uid-1"})
	h.OnUpdate(pdb, pdb)
	if _, kept := bs.written.Load("ns/vm1-budget"); !kept || len(notified) != 0 {
		t.Fatalf("a resync: written kept %t, notified %v; want it kept and no VM notified", kept, notified)
	}
	changed := pdb.DeepCopy()
	changed.ResourceVersion = "6"
	h.OnUpdate(pdb, changed)
	if _, kept := bs.written.Load("ns/vm1-budget"); kept || !slices.Equal(notified, []types.NamespacedName{{Namespace: "ns", Name: "vm1"}}) {
		t.Fatalf("a change: written kept %t, notified %v; want it let go and vm1 notified", kept, notified)
	}
}

// TestResyncKeepsCreateEcho: a resync hands a pod (or claim) over again as both old and new
// while the echo of the backend's own write of it is still to come: no VM is notified, and the
// write's entry stays, so that its echo is still known for one when it comes.
func TestResyncKeepsCreateEcho(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "vm1", UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"}
	pod := newPod(vm, backend.Spec{Image: "img"})
	pod.ResourceVersion = "5"
	cached := cachePod(pod)
	b := &Backend{}
	b.created.Store("ns/"+pod.Name, "6") // the backend's write, whose echo is to come
	var notified []types.NamespacedName
	h := b.vmHandlers(func(vm types.NamespacedName) { notified = append(notified, vm) }, func(old, cur any) bool { return true })
	h.OnUpdate(cached, cached)
	if _, kept := b.created.Load("ns/" + pod.Name); !kept || len(notified) != 0 {
		t.Fatalf("a resync: the write's entry kept %t, notified %v; want it kept and no VM notified", kept, notified)
	}
	pod.ResourceVersion = "6"
	h.OnUpdate(cached, cachePod(pod))
	if _, kept := b.created.Load("ns/" + pod.Name); kept || len(notified) != 0 {
		t.Errorf("the write's echo: entry kept %t, notified %v; want it taken and no VM notified", kept, notified)
	}
}

// TestRelistKeepsWriteEcho: a relist hands the version of a pod (or claim) the cache holds over
// again, decoded anew, while the echo of the backend's own write of it is still to come: no VM
// is notified, and the write's entry stays, so that its echo is known for one when it comes.
func TestRelistKeepsWriteEcho(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "vm1", UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"}
	pod := newPod(vm, backend.Spec{Image: "img"})
	claim := newClaim(vm, backend.DiskSpec{Size: resource.MustParse("10Gi")})
	for name, at := range map[string]func(rv string) any{
		"pod":         func(rv string) any { pod.ResourceVersion = rv; return cachePod(pod) },
		"claim":       func(rv string) any { claim.ResourceVersion = rv; return cacheClaim(claim) },
		"exact claim": func(rv string) any { claim.ResourceVersion = "v" + rv; return cacheClaim(claim) },
	} {
		t.Run(name, func(t *testing.T) {
			key := "ns/" + pod.Name
			if name != "pod" {
				key = "ns/" + claim.Name
			}
			written := "6"
			if name == "exact claim" {
				written = "v6"
			}
			b := &Backend{}
			b.created.Store(key, written) // the backend's write, whose echo is to come
			var notified []types.NamespacedName
			h := b.vmHandlers(func(vm types.NamespacedName) { notified = append(notified, vm) }, func(old, cur any) bool { return true })
			h.OnUpdate(at("5"), at("5"))
			if _, kept := b.created.Load(key); !kept || len(notified) != 0 {
				t.Fatalf("a relist: the write's entry kept %t, notified %v; want it kept and no VM notified", kept, notified)
			}
			h.OnUpdate(at("5"), at("6"))
			if _, kept := b.created.Load(key); kept || len(notified) != 0 {
				t.Errorf("the write's echo: entry kept %t, notified %v; want it taken and no VM notified", kept, notified)
			}
		})
	}
}
