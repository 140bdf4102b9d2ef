package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// The pods' side of the stand-in kubelet: resize steps (decided by kubelet in kubelet.go),
// the removal of terminating pods, and the pods' cache.

// byNode indexes pods by the node they are bound to.
const byNode = "node"

// podNode is the byNode index of a pod.
func podNode(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}

// retryDeferred looks again at the deferred resizes on the node of a pod that changed or went:
// it may have freed room, as a kubelet retries deferred resizes when pods change.
func (r *resizer) retryDeferred(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return
	}
	others, _ := r.pods.GetIndexer().ByIndex(byNode, p.Spec.NodeName)
	for _, o := range others {
		op := o.(*corev1.Pod)
		if c := findCondition(op.Status, corev1.PodResizePending); c != nil && c.Reason == corev1.PodReasonDeferred && op.UID != p.UID {
			r.podQueue.Add(cache.MetaObjectToName(op))
		}
	}
}

// handlePod takes the next kubelet step for one pod and writes it, on the condition that the
// pod is still the version it was decided on; for a pod on a node that is not this program's
// (a real kubelet's, or a lost one) it does nothing.
func (r *resizer) handlePod(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	obj, ok, err := r.pods.GetIndexer().GetByKey(key.String())
	if err != nil || !ok {
		return 0, err
	}
	pod := obj.(*corev1.Pod)
	node, ok := r.node(pod.Spec.NodeName)
	if !ok || !r.ours(node) {
		return 0, nil
	}
	if pod.DeletionTimestamp != nil {
		return 0, r.remove(ctx, pod)
	}
	s := kubelet(pod, r.room(node, pod), time.Now(), r.actuate)
	if s.what == "" {
		return s.after, nil
	}
	patch, err := statusPatch(pod, s.status)
	if err != nil {
		return 0, err
	}
	_, err = r.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{FieldManager: "kwok-resizer"}, "status")
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("write status of pod %s: %w", key, err)
	}
	r.log.Info("Resize step", "pod", key.String(), "step", s.what)
	return s.after, nil
}

// remove ends a terminating pod as a kubelet does once its containers have stopped: deleted
// at once, on the condition that it is still the same pod (see removal).
func (r *resizer) remove(ctx context.Context, pod *corev1.Pod) error {
	err := r.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, removal(pod))
	switch {
	case apierrors.IsNotFound(err):
		return nil // gone already
	case apierrors.IsConflict(err):
		return nil // the name is a newer pod's now: not this one to delete
	case err != nil:
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	r.log.Info("Deleted pod", "pod", pod.Namespace+"/"+pod.Name, "uid", pod.UID)
	return nil
}

// removal is how a kubelet deletes a pod it has stopped: at once (grace period 0), and only
// if the name still belongs to the pod of that UID. kwok's own pod-delete stage deletes by
// name alone, so a delete it queued for a pod that has since gone can remove a new pod of the
// same name, such as the server vm-controller creates in place of a deleted one (the kubelet
// has used the UID since kubernetes/kubernetes#25224 for the same reason). cluster/cluster.sh
// leaves that stage out of kwok's configuration when this program runs.
func removal(pod *corev1.Pod) metav1.DeleteOptions {
	uid := pod.UID
	return metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid}}
}

// room is what node has for pod: its allocatable, and what its other pods that still run
// have been granted (allocated, else asked for).
func (r *resizer) room(node *corev1.Node, pod *corev1.Pod) room {
	rm := room{allocatable: node.Status.Allocatable, used: corev1.ResourceList{}}
	others, _ := r.pods.GetIndexer().ByIndex(byNode, node.Name)
	for _, o := range others {
		op := o.(*corev1.Pod)
		if op.UID == pod.UID || op.Status.Phase == corev1.PodSucceeded || op.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range op.Spec.Containers {
			granted := c.Resources.Requests
			for _, cs := range op.Status.ContainerStatuses {
				if cs.Name == c.Name && cs.AllocatedResources != nil {
					granted = cs.AllocatedResources
				}
			}
			addTo(rm.used, granted)
		}
	}
	return rm
}

// statusPatch is the strategic merge patch from pod's status to status, on the condition of
// pod's resourceVersion: conditions merge by type, so it touches only the ones the step
// changed and deletes the ones it removed; the container statuses go whole.
func statusPatch(pod *corev1.Pod, status corev1.PodStatus) ([]byte, error) {
	return versionedPatch(corev1.Pod{Status: pod.Status}, corev1.Pod{Status: status}, pod.ResourceVersion)
}

// slimPod keeps what the stand-in kubelet reads and writes of a pod: a cluster's worth of whole
// pods would be most of its memory.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		Generation: p.Generation, DeletionTimestamp: p.DeletionTimestamp,
	}}
	for _, a := range []string{AnswerAnnotation, UsageMemoryAnnotation} {
		if v, ok := p.Annotations[a]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[a] = v
		}
	}
	out.Spec.NodeName = p.Spec.NodeName
	// The claims it mounts, for the claims' stand-in kubelet (see mounted).
	for _, v := range p.Spec.Volumes {
		if c := v.PersistentVolumeClaim; c != nil {
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name,
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.ClaimName}}})
		}
	}
	for _, c := range p.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Resources: cpuMemory(c.Resources)})
	}
	// The container statuses stay whole: the API server replaces the list as one (listType
	// atomic), so a patch of one container's resources carries all of it.
	out.Status = corev1.PodStatus{Phase: p.Status.Phase, ObservedGeneration: p.Status.ObservedGeneration,
		Conditions: p.Status.Conditions, ContainerStatuses: p.Status.ContainerStatuses}
	return out, nil
}
