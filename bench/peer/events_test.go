package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// TestVMEvents: of a VM's updates, only a spec change, the start of its deletion and the loss
// of the finalizer reconcile it; the echoes of the peer's own finalizer and status patches do
// not. Its create and delete always do.
func TestVMEvents(t *testing.T) {
	now := metav1.Now()
	base := func() *unstructured.Unstructured {
		vm := testVM(activeSpec)
		vm.SetResourceVersion("10")
		return vm
	}
	withFinalizer := func(vm *unstructured.Unstructured) *unstructured.Unstructured {
		vm.SetFinalizers([]string{finalizer})
		return vm
	}
	tests := map[string]struct {
		old, new func() *unstructured.Unstructured
		want     bool
	}{
		"the peer's finalizer added (its echo)": {old: base, new: func() *unstructured.Unstructured { return withFinalizer(base()) }, want: false},
		"the peer's status written (its echo)": {old: func() *unstructured.Unstructured { return withFinalizer(base()) }, new: func() *unstructured.Unstructured {
			vm := withFinalizer(base())
			vm.Object["status"] = map[string]any{"phase": "Active"}
			vm.SetResourceVersion("11")
			return vm
		}, want: false},
		"a label added": {old: base, new: func() *unstructured.Unstructured {
			vm := base()
			vm.SetLabels(map[string]string{"team": "a"})
			return vm
		}, want: false},
		"the spec changed": {old: base, new: func() *unstructured.Unstructured {
			vm := base()
			vm.SetGeneration(2)
			return vm
		}, want: true},
		"deleted (deletionTimestamp set)": {old: func() *unstructured.Unstructured { return withFinalizer(base()) }, new: func() *unstructured.Unstructured {
			vm := withFinalizer(base())
			vm.SetDeletionTimestamp(&now)
			return vm
		}, want: true},
		"another finalizer released while deleting": {old: func() *unstructured.Unstructured {
			vm := base()
			vm.SetFinalizers([]string{finalizer, "example.com/other"})
			vm.SetDeletionTimestamp(&now)
			return vm
		}, new: func() *unstructured.Unstructured {
			vm := withFinalizer(base())
			vm.SetDeletionTimestamp(&now)
			return vm
		}, want: false},
		"the finalizer taken off by someone else": {old: func() *unstructured.Unstructured { return withFinalizer(base()) }, new: base, want: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := vmEvents.Update(event.UpdateEvent{ObjectOld: tt.old(), ObjectNew: tt.new()}); got != tt.want {
				t.Errorf("Update = %v, want %v", got, tt.want)
			}
		})
	}
	if !vmEvents.Create(event.CreateEvent{Object: base()}) || !vmEvents.Delete(event.DeleteEvent{Object: base()}) {
		t.Error("a VM's create or delete does not reconcile it")
	}
}

// TestPodEvents: of a pod's updates, only those that move its VM's phase (phase, readiness,
// deletion) reconcile the VM; the pod's create (the peer's own) does not; its delete does.
func TestPodEvents(t *testing.T) {
	now := metav1.Now()
	pending := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vm-1-server", Namespace: "ns", ResourceVersion: "5"},
			Status: corev1.PodStatus{Phase: corev1.PodPending}}
	}
	running := func(ready corev1.ConditionStatus) func() *corev1.Pod {
		return func() *corev1.Pod {
			p := pending()
			p.Spec.NodeName = "node-1"
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
			return p
		}
	}
	tests := map[string]struct {
		old, new func() *corev1.Pod
		want     bool
	}{
		"bound to a node (the scheduler)": {old: pending, new: func() *corev1.Pod {
			p := pending()
			p.Spec.NodeName = "node-1"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
			return p
		}, want: false},
		"running and ready":   {old: pending, new: running(corev1.ConditionTrue), want: true},
		"running, not ready":  {old: pending, new: running(corev1.ConditionFalse), want: true},
		"ready after running": {old: running(corev1.ConditionFalse), new: running(corev1.ConditionTrue), want: true},
		"ready, a condition's time": {old: running(corev1.ConditionTrue), new: func() *corev1.Pod {
			p := running(corev1.ConditionTrue)()
			p.Status.Conditions[0].LastProbeTime = now
			return p
		}, want: false},
		"failed":                      {old: running(corev1.ConditionTrue), new: func() *corev1.Pod { p := running(corev1.ConditionFalse)(); p.Status.Phase = corev1.PodFailed; return p }, want: true},
		"deleted (deletionTimestamp)": {old: running(corev1.ConditionTrue), new: func() *corev1.Pod { p := running(corev1.ConditionTrue)(); p.DeletionTimestamp = &now; return p }, want: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := podEvents.Update(event.UpdateEvent{ObjectOld: tt.old(), ObjectNew: tt.new()}); got != tt.want {
				t.Errorf("Update = %v, want %v", got, tt.want)
			}
		})
	}
	var p predicate.Predicate = podEvents
	if p.Create(event.CreateEvent{Object: pending()}) {
		t.Error("the pod's create (the peer's own) reconciles its VM")
	}
	if !p.Delete(event.DeleteEvent{Object: client.Object(pending())}) {
		t.Error("the pod's delete does not reconcile its VM (the finalizer would never be released)")
	}
}
