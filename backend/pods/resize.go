package pods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// A pod's cpu and memory change in place through its resize subresource (Kubernetes 1.33+, GA
// in 1.35): the API server takes the new resources into the pod's spec, and the node's kubelet
// then grants them (or reports PodResizePending with reason Deferred or Infeasible), applies
// them (PodResizeInProgress) and reports them in status.containerStatuses[].resources.
//
// The server pod's restartPolicy is Never, for which Kubernetes allows only the resizePolicy
// NotRequired (the default): no resize restarts the container. A memory decrease is then
// applied only once the container uses less than the new limit; until then the kubelet keeps
// the resize in progress with an error and retries.

var _ backend.Resizer = (*Backend)(nil)

// resizeSubresource is the pod subresource that takes resource changes.
const resizeSubresource = "resize"

// Causes of the Forbidden answer of the API server's PodResizeValidator admission (Kubernetes
// 1.36+), which refuses at once what a kubelet would mark Infeasible.
const (
	causeNodeCapacity        metav1.CauseType = "NodeCapacity"
	causeUnsupportedPlatform metav1.CauseType = "UnsupportedPlatform"
)

// Resize patches the cpu and memory of vm's pod through the resize subresource and returns the
// pod as the API server stored it. The patch names the pod's UID, so a pod that replaced the
// one in the cache, or the one read, is never resized by a decision made about the old one.
//
// The pod is the one the cache shows, or, when it shows none, one whose label was taken off
// as Get reads it (Unwatched): the cache never shows such a pod, and the controller decides on
// it as read, so a resize taken at the cache's word would fail for as long as the label stays
// off. A pod that is only not in the cache yet is not resized: the controller decides nothing
// on it until the cache shows it (backend.Reader). The read costs nothing while the cache
// shows the pod.
func (b *Backend) Resize(ctx context.Context, vm backend.Owner, spec backend.Spec) (*backend.Server, error) {
	srv, err := b.Observe(vm)
	if err != nil {
		return nil, err
	}
	if srv == nil {
		read, err := b.Get(ctx, vm)
		if err != nil {
			return nil, fmt.Errorf("resize server of %s/%s: %w", vm.Namespace, vm.Name, err)
		}
		if read != nil && read.Unwatched {
			srv = read
		}
	}
	if srv == nil || srv.Deleting {
		return nil, fmt.Errorf("resize server of %s/%s: no server pod to resize", vm.Namespace, vm.Name)
	}
	if srv.Spec.RootDisk.Cmp(spec.RootDisk) != 0 || srv.Spec.Image != spec.Image {
		return nil, fmt.Errorf("resize pod %s: only cpu and memory change in place: %w", srv.Name, backend.ErrResizeInfeasible)
	}
	if srv.Spec.Equal(spec) {
		return srv, nil // asked already: the kubelet's answer is in srv.Resize
	}
	patch, err := resizePatch(types.UID(srv.ID), spec)
	if err != nil {
		return nil, fmt.Errorf("render resize of pod %s: %w", srv.Name, err)
	}
	pod, err := b.cfg.Client.CoreV1().Pods(vm.Namespace).Patch(ctx, srv.Name, types.StrategicMergePatchType,
		patch, metav1.PatchOptions{FieldManager: fieldManager}, resizeSubresource)
	if err != nil {
		return nil, resizeError(srv.Name, err)
	}
	s := serverOf(pod)
	if s.Spec.CPU.Cmp(spec.CPU) == 0 && s.Spec.Memory.Cmp(spec.Memory) == 0 {
		return &s, nil
	}
	if cpu, memory := ownResources(pod); cpu.Cmp(spec.CPU) == 0 && memory.Cmp(spec.Memory) == 0 {
		return b.recordResources(ctx, pod, spec)
	}
	return nil, notTaken(pod, spec)
}

// recordResources writes spec's cpu and memory into AnnotationResources of pod, which has
// them already: admission gave them to it at its create, for others that it was made for (a
// VM set to the size its platform rounded it up to), so the resize patch changed nothing. The
// pod is then the server spec asks for as it stands, and no resize (and no replacement: a
// resize that changes nothing cannot report the size asked for, notTaken) is needed. The
// patch names the pod's UID and resourceVersion, so it writes nothing on a pod that changed
// since it was read: a conflict, retried with the pod read again. Refused (no patch on pods in
// the controller's RBAC), the resize is infeasible, as it was before the record.
func (b *Backend) recordResources(ctx context.Context, pod *corev1.Pod, spec backend.Spec) (*backend.Server, error) {
	var rootDisk *resource.Quantity
	if !spec.Disk {
		rootDisk = &spec.RootDisk
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid": pod.UID, "resourceVersion": pod.ResourceVersion,
		"annotations": map[string]string{AnnotationResources: resourcesText(spec.CPU, spec.Memory, rootDisk)},
	}})
	if err != nil {
		return nil, fmt.Errorf("render the resources of pod %s: %w", pod.Name, err)
	}
	out, err := b.cfg.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager})
	if apierrors.IsForbidden(err) {
		// Without the right to patch pods (an RBAC from before it), it is as before: the
		// resize changed nothing, and a new server made for spec ends it.
		return nil, fmt.Errorf("%w (and recording them was refused: %w)", notTaken(pod, spec), err)
	}
	if err != nil {
		return nil, fmt.Errorf("record cpu %s, memory %s on pod %s, which has them: %w", spec.CPU.String(), spec.Memory.String(), pod.Name, err)
	}
	s := serverOf(out)
	if s.Spec.CPU.Cmp(spec.CPU) != 0 || s.Spec.Memory.Cmp(spec.Memory) != 0 {
		return nil, notTaken(out, spec)
	}
	return &s, nil
}

// ownResources are the cpu and memory of pod's server container, as the pod has them.
func ownResources(pod *corev1.Pod) (cpu, memory resource.Quantity) {
	for _, c := range pod.Spec.Containers {
		if c.Name == ContainerName {
			cpu, memory = limitOrRequest(c.Resources, corev1.ResourceCPU), limitOrRequest(c.Resources, corev1.ResourceMemory)
		}
	}
	return cpu, memory
}

// notTaken is the error of a resize of pod to spec that the pod did not take as asked:
// admission rewrote the resize (a webhook or policy that names pods/resize). The pod cannot
// report spec's cpu and memory as the ones it was asked for (madefor.go): asked again, it
// would be resized again, at every look, for ever. ErrResizeInfeasible: the --resize policy
// decides, and a new server, made for spec, ends it. (A pod that has spec's cpu and memory
// already, from admission at its create, takes them into its record instead:
// recordResources.)
func notTaken(pod *corev1.Pod, spec backend.Spec) error {
	cpu, memory := ownResources(pod)
	return fmt.Errorf("resize pod %s to cpu %s, memory %s: the pod has cpu %s, memory %s after it, which admission gave it: %w",
		pod.Name, spec.CPU.String(), spec.Memory.String(), cpu.String(), memory.String(), backend.ErrResizeInfeasible)
}

// resizePatch is the strategic merge patch that sets the server container's cpu and memory,
// requests equal to limits so that the pod stays Guaranteed (a resize may not change the QoS
// class). The container is matched by name, so its other resources (ephemeral-storage) stay.
// metadata.uid makes the patch fail on any other pod of the same name.
func resizePatch(uid types.UID, spec backend.Spec) ([]byte, error) {
	res := corev1.ResourceList{corev1.ResourceCPU: spec.CPU, corev1.ResourceMemory: spec.Memory}
	type container struct {
		Name      string                      `json:"name"`
		Resources corev1.ResourceRequirements `json:"resources"`
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"spec": map[string]any{"containers": []container{{
			Name:      ContainerName,
			Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
		}}},
	})
}

// resizeError sorts the API server's refusals: what no retry changes is ErrResizeInfeasible
// (the node's allocatable, a platform without resize, a change validation forbids, an API
// server without the subresource); a pod that is not the one asked about, a conflict or a
// missing permission is returned as it is, to be retried.
func resizeError(pod string, err error) error {
	var status apierrors.APIStatus
	details := (*metav1.StatusDetails)(nil)
	if errors.As(err, &status) {
		details = status.Status().Details
	}
	switch {
	case apierrors.IsForbidden(err) && hasCause(details, func(c metav1.StatusCause) bool {
		return c.Type == causeNodeCapacity || c.Type == causeUnsupportedPlatform
	}):
		return fmt.Errorf("resize pod %s: %w: %w", pod, backend.ErrResizeInfeasible, err)
	case apierrors.IsInvalid(err) && hasCause(details, func(c metav1.StatusCause) bool { return c.Field == "metadata.uid" }):
		return fmt.Errorf("resize pod %s: the pod was replaced: %w", pod, err)
	case apierrors.IsInvalid(err):
		return fmt.Errorf("resize pod %s: %w: %w", pod, backend.ErrResizeInfeasible, err)
	case apierrors.IsNotFound(err) && (details == nil || details.Name == ""):
		// No object named: the path itself is unknown, so the API server predates pods/resize.
		return fmt.Errorf("resize pod %s: the API server has no pods/resize (Kubernetes 1.33+): %w: %w", pod, backend.ErrResizeInfeasible, err)
	}
	return fmt.Errorf("resize pod %s: %w", pod, err)
}

func hasCause(d *metav1.StatusDetails, match func(metav1.StatusCause) bool) bool {
	if d == nil {
		return false
	}
	for _, c := range d.Causes {
		if match(c) {
			return true
		}
	}
	return false
}

// resizeOf reads from a pod how far the resize of its server container has got and what cpu
// and memory are in effect. It is pure: serverOf's caller, the informer's transform, can keep
// the result in the cached form.
//
// The kubelet's conditions say it when present: PodResizePending (Infeasible, or Deferred for
// any other reason) and PodResizeInProgress. Without them, a container whose reported
// resources differ from its spec has a resize the kubelet has not taken up yet. A
// PodResizePending that answers an earlier generation of the pod than the current one is about
// an earlier request, so the current one is still pending.
func resizeOf(pod *corev1.Pod) backend.Resize {
	var r backend.Resize
	if pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
		return r // a finished pod resizes nothing
	}
	var want *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == ContainerName {
			want = &pod.Spec.Containers[i]
		}
	}
	if want == nil {
		return r
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == ContainerName && cs.Resources != nil {
			r.CPU = limitOrRequest(*cs.Resources, corev1.ResourceCPU)
			r.Memory = limitOrRequest(*cs.Resources, corev1.ResourceMemory)
		}
	}
	var pending, progress *corev1.PodCondition
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PodResizePending:
			pending = c
		case corev1.PodResizeInProgress:
			progress = c
		}
	}
	differs := func() bool {
		wantCPU, wantMem := limitOrRequest(want.Resources, corev1.ResourceCPU), limitOrRequest(want.Resources, corev1.ResourceMemory)
		return (!r.CPU.IsZero() && r.CPU.Cmp(wantCPU) != 0) || (!r.Memory.IsZero() && r.Memory.Cmp(wantMem) != 0)
	}
	switch {
	case pending != nil && pending.ObservedGeneration != 0 && pending.ObservedGeneration < pod.Generation:
		r.State = backend.ResizePending
	case pending != nil:
		// Both conditions: a new resize came while one was being applied; the pending one
		// is about the latest request.
		r.State, r.Message = backend.ResizeDeferred, pending.Message
		if pending.Reason == corev1.PodReasonInfeasible {
			r.State = backend.ResizeInfeasible
		}
	case progress != nil:
		r.State, r.Message = backend.ResizeInProgress, progress.Message
		if progress.Reason == corev1.PodReasonError && progress.Message == "" {
			r.Message = progress.Reason
		}
	case differs():
		r.State = backend.ResizePending
	case pod.Status.ObservedGeneration != 0 && pod.Status.ObservedGeneration < pod.Generation &&
		pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil:
		// The kubelet has not seen the latest spec yet; of a running server pod that is not
		// being deleted, only a resize changes the spec (and so the generation).
		r.State = backend.ResizePending
	}
	return r
}

// limitOrRequest is a resource's limit, or its request when it has no limit.
func limitOrRequest(rr corev1.ResourceRequirements, name corev1.ResourceName) resource.Quantity {
	if v, ok := rr.Limits[name]; ok {
		return v
	}
	return quantity(rr.Requests, name)
}
