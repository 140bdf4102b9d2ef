package main

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// newFake is a fake client that knows VirtualMachines as unstructured objects with a status
// subresource, as the API server serves them.
func newFake(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypeWithName(vmGVK, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(vmGVK.GroupVersion().WithKind("VirtualMachineList"), &unstructured.UnstructuredList{})
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(newVM()).Build()
}

func testVM(spec map[string]any) *unstructured.Unstructured {
	vm := newVM()
	vm.SetNamespace("ns")
	vm.SetName("vm-1")
	vm.SetUID("uid-1")
	vm.SetGeneration(1)
	vm.Object["spec"] = spec
	return vm
}

var activeSpec = map[string]any{"action": "active", "resource": map[string]any{"cpu": "100m", "memory": "16Mi", "rootDisk": "100Mi"}}

// TestLifecycle takes one VM from created to Active and through its deletion, checking after
// each reconcile what the API holds.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	c := newFake(t, testVM(activeSpec))
	r := &reconciler{Client: c, image: "img"}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "vm-1"}}
	podKey := types.NamespacedName{Namespace: "ns", Name: "vm-1-server"}
	get := func() *unstructured.Unstructured {
		vm := newVM()
		if err := c.Get(ctx, req.NamespacedName, vm); err != nil {
			t.Fatal(err)
		}
		return vm
	}
	phase := func(vm *unstructured.Unstructured) string {
		p, _, _ := unstructured.NestedString(vm.Object, "status", "phase")
		return p
	}

	// One pass: finalizer, pod, status Creating.
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	vm := get()
	if !controllerutil.ContainsFinalizer(vm, finalizer) {
		t.Errorf("finalizers %v, want %s", vm.GetFinalizers(), finalizer)
	}
	if p := phase(vm); p != "Creating" {
		t.Errorf("phase %q after the first pass, want Creating", p)
	}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, podKey, pod); err != nil {
		t.Fatalf("get pod: %v", err)
	}
	if !metav1.IsControlledBy(pod, vm) || pod.Labels[labelVMUID] != "uid-1" || pod.Spec.Containers[0].Image != "img" ||
		pod.Spec.Containers[0].Resources.Limits.Cpu().String() != "100m" {
		t.Errorf("pod %+v: want owned by the VM, labelled with its UID, image img, cpu 100m", pod.ObjectMeta)
	}
	rv := get().GetResourceVersion()

	// Nothing changed: no write.
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if got := get().GetResourceVersion(); got != rv {
		t.Errorf("a reconcile with nothing to do wrote the VM (resourceVersion %s -> %s)", rv, got)
	}

	// The pod runs and is ready: Active.
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if p := phase(get()); p != "Active" {
		t.Errorf("phase %q with the pod ready, want Active", p)
	}

	// Deleted: the pod goes first, then the finalizer, then the VM.
	if err := c.Delete(ctx, get()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, podKey, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod after the VM's delete: %v, want NotFound", err)
	}
	if !controllerutil.ContainsFinalizer(get(), finalizer) {
		t.Fatal("the finalizer went in the same pass as the pod's delete, before the pod was seen gone")
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, req.NamespacedName, newVM()); !apierrors.IsNotFound(err) {
		t.Errorf("VM after its pod is gone: %v, want NotFound (finalizer released)", err)
	}
}

// TestObserve maps pod states to the VM's phase and reason.
func TestObserve(t *testing.T) {
	now := metav1.Now()
	tests := map[string]struct {
		pod           corev1.PodStatus
		deleting      bool
		phase, reason string
	}{
		"just created":      {pod: corev1.PodStatus{Phase: corev1.PodPending}, phase: "Creating", reason: "ServerCreating"},
		"running not ready": {pod: corev1.PodStatus{Phase: corev1.PodRunning}, phase: "Creating", reason: "ServerStarting"},
		"ready": {pod: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
			phase: "Active", reason: "ServerReady"},
		"failed":   {pod: corev1.PodStatus{Phase: corev1.PodFailed}, phase: "Failed", reason: "ServerFailed"},
		"unknown":  {pod: corev1.PodStatus{Phase: corev1.PodUnknown}, phase: "Unknown", reason: "NodeLost"},
		"deleting": {pod: corev1.PodStatus{Phase: corev1.PodRunning}, deleting: true, phase: "Creating", reason: "ServerReplacing"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: tt.pod}
			if tt.deleting {
				pod.DeletionTimestamp = &now
			}
			if phase, reason, _ := observe(pod); phase != tt.phase || reason != tt.reason {
				t.Errorf("observe = %s/%s, want %s/%s", phase, reason, tt.phase, tt.reason)
			}
		})
	}
}
