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
	now   func() time.Time
}

// Reconcile brings one VM's pod and status in line with its spec.
//
// The cache hands out its own objects (UnsafeDisableDeepCopy, main.go): vm and pod are read
// here and never changed; every write is a patch, create or delete of an object of its own.
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vm := newVM()
	if err := r.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pod := &corev1.Pod{}
	switch err := r.Get(ctx, types.NamespacedName{Namespace: vm.GetNamespace(), Name: podName(vm)}, pod); {
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
		if err := r.setFinalizer(ctx, vm, true); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	action, _, _ := unstructured.NestedString(vm.Object, "spec", "action")
	res, err := resources(vm)
	switch {
	case err != nil:
		return ctrl.Result{}, r.setStatus(ctx, vm, report(vm, "Failed", "InvalidSpec", "Invalid spec: "+err.Error(), pod, r.now()))
	case action == "inactive":
		if pod != nil && pod.DeletionTimestamp == nil {
			if err := r.deletePod(ctx, pod); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, r.setStatus(ctx, vm, report(vm, "Inactive", "ServerStopped", "The VM has no server (action is inactive)", nil, r.now()))
	case pod == nil:
		pod = r.newPod(vm, res)
		switch err := r.Create(ctx, pod); {
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			// The namespace is being deleted, and the VM with it (a namespace's delete
			// takes the pods and the VMs in either order): its deletion event brings it
			// back (vmEvents), and a retry could only fail again. Kubernetes' own
			// controllers (the ReplicaSet's) give up the create the same way.
			return ctrl.Result{}, nil
		case err != nil:
			// AlreadyExists too: the pod cache is behind. The create's own event is not
			// watched (podEvents), so a retry, not that event, brings the VM back.
			return ctrl.Result{}, fmt.Errorf("create pod: %w", err)
		}
	case pod.DeletionTimestamp == nil && !equalResources(pod.Spec.Containers[0].Resources.Limits, res):
		if err := r.deletePod(ctx, pod); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.setStatus(ctx, vm, report(vm, "Creating", "ServerReplacing",
			fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", pod.Name), pod, r.now()))
	}
	phase, reason, msg := observe(pod)
	return ctrl.Result{}, r.setStatus(ctx, vm, report(vm, phase, reason, msg, pod, r.now()))
}

// finalize deletes the VM's pod, reporting Terminating meanwhile, and releases the finalizer
// once the pod's delete event shows it gone.
func (r *reconciler) finalize(ctx context.Context, vm *unstructured.Unstructured, pod *corev1.Pod) error {
	if !controllerutil.ContainsFinalizer(vm, finalizer) {
		return nil
	}
	if pod == nil {
		if err := r.setFinalizer(ctx, vm, false); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove finalizer: %w", err)
		}
		return nil
	}
	// The status vm-controller reports, with the server as it is once its delete is asked
	// for. It is written before the delete so that its echo reaches the VM cache ahead of
	// the pod's deletion event, whose reconcile then finds it there and writes nothing.
	if err := r.setStatus(ctx, vm, report(vm, "Terminating", "ServerDeleting",
		fmt.Sprintf("Waiting for server %s to be deleted before the VM is removed", pod.Name), pod, r.now())); err != nil {
		return err
	}
	if pod.DeletionTimestamp == nil {
		return r.deletePod(ctx, pod)
	}
	return nil
}

// setFinalizer adds or removes the finalizer by a merge patch conditional on the
// resourceVersion the decision was made on (finalizerPatch).
func (r *reconciler) setFinalizer(ctx context.Context, vm *unstructured.Unstructured, add bool) error {
	patch, err := finalizerPatch(vm, add)
	if err != nil {
		return err
	}
	return r.Patch(ctx, target(vm), client.RawPatch(types.MergePatchType, patch))
}

// setStatus writes st through the status subresource, unless the VM already says it.
func (r *reconciler) setStatus(ctx context.Context, vm *unstructured.Unstructured, st status) error {
	if st.sameAs(vm) {
		return nil
	}
	patch, err := st.patch()
	if err != nil {
		return err
	}
	if err := r.Status().Patch(ctx, target(vm), client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// deletePod deletes this incarnation of the pod (a UID precondition, as vm-controller's): a
// pod of the same name made since is not touched.
func (r *reconciler) deletePod(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	err := r.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s: %w", pod.Name, err)
	}
	return nil
}

// target is a fresh object naming vm, for a patch to decode the API server's answer into, so
// that the cached vm is never written to.
func target(vm *unstructured.Unstructured) *unstructured.Unstructured {
	t := newVM()
	t.SetNamespace(vm.GetNamespace())
	t.SetName(vm.GetName())
	return t
}

// podName is the name of the VM's pod, as vm-controller names it (for names that fit).
func podName(vm *unstructured.Unstructured) string { return vm.GetName() + "-server" }

// resources reads spec.resource as the pod's requests and limits; a quantity may be a string
// or a number, as the CRD allows.
func resources(vm *unstructured.Unstructured) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for field, name := range map[string]corev1.ResourceName{"cpu": corev1.ResourceCPU, "memory": corev1.ResourceMemory, "rootDisk": corev1.ResourceEphemeralStorage} {
		v, _, _ := unstructured.NestedFieldNoCopy(vm.Object, "spec", "resource", field)
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case int64, float64:
			s = fmt.Sprint(v)
		}
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

// newPod is the pod vm-controller's pods backend makes for a VM (backend/pods/pod.go: the
// same labels, annotations, owner and settings; only app.kubernetes.io/managed-by names the
// peer), so that both controllers ask the API server and the scheduler for the same work.
func (r *reconciler) newPod(vm *unstructured.Unstructured, res corev1.ResourceList) *corev1.Pod {
	image, _, _ := unstructured.NestedString(vm.Object, "spec", "image")
	if image == "" {
		image = r.image
	}
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: podName(vm), Namespace: vm.GetNamespace(),
			Labels:      map[string]string{labelVMUID: string(vm.GetUID()), labelVM: vm.GetName(), "app.kubernetes.io/managed-by": "vm-peer"},
			Annotations: map[string]string{labelVM: vm.GetName(), "cloudnative.czs/image": image, "cloudnative.czs/resources": madeFor(res)},
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

// madeFor is the cloudnative.czs/resources annotation vm-controller's pods backend writes on
// a server pod (backend/pods/madefor.go): the cpu and memory it was made for, and its root
// disk of its own (ephemeral-storage) where it has one.
func madeFor(res corev1.ResourceList) string {
	text := "cpu=" + res.Cpu().String() + ",memory=" + res.Memory().String()
	if disk, ok := res[corev1.ResourceEphemeralStorage]; ok {
		text += ",ephemeral-storage=" + disk.String()
	}
	return text
}

// observe maps the pod's state to the VM's phase, reason and message, in vm-controller's words.
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
