package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// The VM's identity and the marks vm-controller puts on its pods, repeated here rather than
// imported: the peer must not depend on the product.
var vmGVK = schema.GroupVersionKind{Group: "cloudnative.czs", Version: "v1alpha1", Kind: "VirtualMachine"}

const (
	finalizer  = "cloudnative.czs/server-cleanup"
	labelVMUID = "cloudnative.czs/vm-uid"
	labelVM    = "cloudnative.czs/vm"
)

type reconciler struct {
	client.Client
	image string
}

// Reconcile brings one VM's pod and status in line with its spec. A pod created here is seen
// again through its watch (Owns), which requeues the VM when the pod changes.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vm := newVM()
	if err := r.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pod := &corev1.Pod{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: vm.GetNamespace(), Name: vm.GetName() + "-server"}, pod); {
	case apierrors.IsNotFound(err):
		pod = nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("get pod: %w", err)
	case !metav1.IsControlledBy(pod, vm):
		return ctrl.Result{}, fmt.Errorf("pod %s belongs to another object", pod.Name)
	}

	if !vm.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, r.finalize(ctx, vm, pod)
	}
	if !controllerutil.ContainsFinalizer(vm, finalizer) {
		orig := vm.DeepCopy()
		controllerutil.AddFinalizer(vm, finalizer)
		if err := r.Patch(ctx, vm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	action, _, _ := unstructured.NestedString(vm.Object, "spec", "action")
	res, err := resources(vm)
	switch {
	case err != nil:
		return ctrl.Result{}, r.setStatus(ctx, vm, "Failed", "InvalidSpec", "Invalid spec: "+err.Error(), pod)
	case action == "inactive":
		if pod != nil && pod.DeletionTimestamp == nil {
			if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete pod: %w", err)
			}
		}
		return ctrl.Result{}, r.setStatus(ctx, vm, "Inactive", "ServerStopped", "The VM has no server (action is inactive)", nil)
	case pod == nil:
		pod = r.newPod(vm, res)
		if err := r.Create(ctx, pod); apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, nil // the cache is behind; the pod's watch event requeues the VM
		} else if err != nil {
			return ctrl.Result{}, fmt.Errorf("create pod: %w", err)
		}
	case pod.DeletionTimestamp == nil && !equalResources(pod.Spec.Containers[0].Resources.Limits, res):
		if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete pod: %w", err)
		}
		return ctrl.Result{}, r.setStatus(ctx, vm, "Creating", "ServerReplacing", "Replacing the server: its resources changed", pod)
	}
	phase, reason, msg := observe(pod)
	return ctrl.Result{}, r.setStatus(ctx, vm, phase, reason, msg, pod)
}

// finalize deletes the VM's pod and releases the finalizer once the pod is gone.
func (r *reconciler) finalize(ctx context.Context, vm *unstructured.Unstructured, pod *corev1.Pod) error {
	if !controllerutil.ContainsFinalizer(vm, finalizer) {
		return nil
	}
	if pod != nil {
		if pod.DeletionTimestamp == nil {
			if err := r.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete pod: %w", err)
			}
		}
		return nil // the pod's delete event requeues the VM
	}
	orig := vm.DeepCopy()
	controllerutil.RemoveFinalizer(vm, finalizer)
	if err := r.Patch(ctx, vm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}

// resources reads spec.resource as the pod's requests and limits.
func resources(vm *unstructured.Unstructured) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for field, name := range map[string]corev1.ResourceName{"cpu": corev1.ResourceCPU, "memory": corev1.ResourceMemory, "rootDisk": corev1.ResourceEphemeralStorage} {
		s, _, _ := unstructured.NestedString(vm.Object, "spec", "resource", field)
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, fmt.Errorf("spec.resource.%s %q: %w", field, s, err)
		}
		out[name] = q
	}
	return out, nil
}

func equalResources(a, b corev1.ResourceList) bool {
	for name, q := range b {
		if have, ok := a[name]; !ok || have.Cmp(q) != 0 {
			return false
		}
	}
	return len(a) == len(b)
}

// newPod is the pod vm-controller's pods backend makes for a VM (the same labels, owner and
// settings), so that both controllers ask the API server and the scheduler for the same work.
func (r *reconciler) newPod(vm *unstructured.Unstructured, res corev1.ResourceList) *corev1.Pod {
	image, _, _ := unstructured.NestedString(vm.Object, "spec", "image")
	if image == "" {
		image = r.image
	}
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.GetName() + "-server", Namespace: vm.GetNamespace(),
			Labels:      map[string]string{labelVMUID: string(vm.GetUID()), labelVM: vm.GetName(), "app.kubernetes.io/managed-by": "vm-peer"},
			Annotations: map[string]string{labelVM: vm.GetName()},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "server", Image: image,
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()}}},
			RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: &no, EnableServiceLinks: &no,
		},
	}
	_ = controllerutil.SetControllerReference(vm, pod, r.Scheme()) // cannot fail: a new pod has no controller
	return pod
}

// observe maps the pod's state to the VM's phase, reason and message.
func observe(pod *corev1.Pod) (phase, reason, msg string) {
	switch {
	case pod.DeletionTimestamp != nil:
		return "Creating", "ServerReplacing", fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", pod.Name)
	case pod.Status.Phase == corev1.PodRunning && podReady(pod):
		return "Active", "ServerReady", fmt.Sprintf("Server %s is running and ready", pod.Name)
	case pod.Status.Phase == corev1.PodRunning:
		return "Creating", "ServerStarting", fmt.Sprintf("Server %s is running and not ready yet", pod.Name)
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		return "Failed", "ServerFailed", fmt.Sprintf("Server %s ended (%s)", pod.Name, pod.Status.Phase)
	case pod.Status.Phase == corev1.PodUnknown:
		return "Unknown", "NodeLost", fmt.Sprintf("The node of server %s does not answer", pod.Name)
	}
	return "Creating", "ServerCreating", "Waiting for the server to start"
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setStatus writes the status vm-controller writes (phase, reason, message, server, observed
// generation, update time, Ready condition) when it says something new.
func (r *reconciler) setStatus(ctx context.Context, vm *unstructured.Unstructured, phase, reason, msg string, pod *corev1.Pod) error {
	var server map[string]any
	if pod != nil {
		server = map[string]any{"name": pod.Name, "id": string(pod.UID), "state": string(pod.Status.Phase)}
	}
	cur, _, _ := unstructured.NestedMap(vm.Object, "status")
	curServer, _, _ := unstructured.NestedMap(cur, "server")
	if cur["phase"] == phase && cur["reason"] == reason && cur["message"] == msg && cur["observedGeneration"] == vm.GetGeneration() &&
		fmt.Sprint(curServer) == fmt.Sprint(server) {
		return nil
	}
	now := time.Now().UTC().Format(time.RFC3339)
	ready := map[string]any{"type": "Ready", "status": "False", "reason": reason, "message": msg,
		"observedGeneration": vm.GetGeneration(), "lastTransitionTime": now}
	if phase == "Active" {
		ready["status"] = "True"
	}
	if conds, _, _ := unstructured.NestedSlice(cur, "conditions"); len(conds) > 0 {
		if old, ok := conds[0].(map[string]any); ok && old["status"] == ready["status"] {
			ready["lastTransitionTime"] = old["lastTransitionTime"]
		}
	}
	status := map[string]any{"phase": phase, "reason": reason, "message": msg, "observedGeneration": vm.GetGeneration(),
		"lastUpdateTime": now, "conditions": []any{ready}}
	if server != nil {
		status["server"] = server
	}
	orig := vm.DeepCopy()
	vm.Object["status"] = status
	if err := r.Status().Patch(ctx, vm, client.MergeFrom(orig)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}
