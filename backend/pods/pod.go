package pods

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// Labels on every server pod.
const (
	// LabelVMUID selects the pods of one VM incarnation; its presence selects them all.
	LabelVMUID = "cloudnative.czs/vm-uid"
	// LabelVM names the VM (when the name fits a label value), for kubectl users.
	LabelVM = "cloudnative.czs/vm"
	// ContainerName is the name of the server's container.
	ContainerName = "server"
	// AnnotationVM names the VM in full (a label value cannot hold every name), so that a pod
	// whose owner reference is gone still leads back to its VM.
	AnnotationVM = "cloudnative.czs/vm"
)

const nameSuffix = "-server"

// PodName is the name of the pod that serves the VM called vm. Names too long for the suffix
// are cut and made unique again with a hash of the whole name.
func PodName(vm string) string {
	if len(vm)+len(nameSuffix) <= validation.DNS1123SubdomainMaxLength {
		return vm + nameSuffix
	}
	sum := sha256.Sum256([]byte(vm))
	h := hex.EncodeToString(sum[:])[:10]
	keep := validation.DNS1123SubdomainMaxLength - len(nameSuffix) - len(h) - 1
	return strings.TrimRight(vm[:keep], "-.") + "-" + h + nameSuffix
}

// newPod builds the pod for vm.
func newPod(vm backend.Owner, spec backend.Spec) *corev1.Pod {
	res := corev1.ResourceList{
		corev1.ResourceCPU:              spec.CPU,
		corev1.ResourceMemory:           spec.Memory,
		corev1.ResourceEphemeralStorage: spec.RootDisk,
	}
	labels := map[string]string{LabelVMUID: string(vm.UID), "app.kubernetes.io/managed-by": "vm-controller"}
	if len(validation.IsValidLabelValue(vm.Name)) == 0 {
		labels[LabelVM] = vm.Name
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        PodName(vm.Name),
			Namespace:   vm.Namespace,
			Labels:      labels,
			Annotations: map[string]string{AnnotationVM: vm.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: vm.APIVersion, Kind: vm.Kind, Name: vm.Name, UID: vm.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:      ContainerName,
				Image:     spec.Image,
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()},
			}},
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
		},
	}
}

// serverOf reads a pod as a backend.Server, as far as the pod itself tells (its node's
// readiness is cachedPod.observed's).
func serverOf(pod *corev1.Pod) backend.Server {
	s := backend.Server{
		Name:     pod.Name,
		ID:       string(pod.UID),
		Detail:   string(pod.Status.Phase),
		Deleting: pod.DeletionTimestamp != nil,
		Resize:   resizeOf(pod),
	}
	for _, c := range pod.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		s.Spec = backend.Spec{
			CPU:      quantity(c.Resources.Limits, corev1.ResourceCPU),
			Memory:   quantity(c.Resources.Limits, corev1.ResourceMemory),
			RootDisk: quantity(c.Resources.Limits, corev1.ResourceEphemeralStorage),
			Image:    c.Image,
		}
	}
	switch pod.Status.Phase {
	case corev1.PodPending, "":
		s.State = backend.StatePending
		s.Message = pendingMessage(pod)
	case corev1.PodRunning:
		s.State = backend.StateStarting
		if condition(pod, corev1.PodReady) == corev1.ConditionTrue {
			s.State = backend.StateReady
		}
	case corev1.PodSucceeded:
		s.State, s.Since, s.Message = backend.StateStopped, finishedAt(pod), terminatedMessage(pod)
	case corev1.PodFailed:
		s.State, s.Since, s.Message = backend.StateFailed, finishedAt(pod), terminatedMessage(pod)
	default: // Unknown: the kubelet cannot be reached
		s.State, s.Message = backend.StateLost, pod.Status.Message
	}
	return s
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) resource.Quantity {
	if q, ok := l[name]; ok {
		return q
	}
	return resource.Quantity{}
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// pendingMessage says why a pod is not running yet: unschedulable, or its container waiting.
func pendingMessage(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return c.Message
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" {
			return strings.TrimSpace(w.Reason + " " + w.Message)
		}
	}
	return ""
}

// terminatedMessage says how a pod ended.
func terminatedMessage(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			return strings.TrimSpace(fmt.Sprintf("%s, exit code %d %s", t.Reason, t.ExitCode, t.Message))
		}
	}
	return strings.TrimSpace(pod.Status.Reason + " " + pod.Status.Message)
}

// finishedAt is when a pod ended: its container's finish time, else when it stopped being
// ready, else when it started.
func finishedAt(pod *corev1.Pod) time.Time {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil && !t.FinishedAt.IsZero() {
			return t.FinishedAt.UTC()
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.UTC()
		}
	}
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.UTC()
	}
	return pod.CreationTimestamp.UTC()
}
