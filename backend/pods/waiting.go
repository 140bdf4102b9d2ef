package pods

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// What a pending pod says about why it does not run: the scheduler's PodScheduled condition
// and the kubelet's waiting reasons, read as backend.Waiting so that the decision can name the
// cause (Unschedulable, ImagePullFailing) without knowing pods.

// imagePullReasons are the kubelet's waiting reasons of a container whose image cannot be
// had. The kubelet goes back and forth between ErrImagePull and ImagePullBackOff as it
// retries; the others do not change by retrying.
var imagePullReasons = map[string]bool{
	"ErrImagePull":        true,
	"ImagePullBackOff":    true,
	"InvalidImageName":    true,
	"ErrImageNeverPull":   true,
	"RegistryUnavailable": true,
}

// waitingOf says why a pending pod does not run: unschedulable or its image not pulled, as a
// backend.Waiting; any other cause the pod states (a container waiting for another reason, a
// scheduler's word other than Unschedulable) comes back as a plain message.
//
// What the scheduler says of the pod's claim (not bound yet, not found, being deleted, bound
// to a volume that is gone) is left out: the VM's disk says it (backend.Disk), and the
// scheduler's word stays on the pod until it schedules it, after the claim is bound, which
// would report a disk problem that is over.
func waitingOf(pod *corev1.Pod) (backend.Waiting, string) {
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse || c.Message == "" {
			continue
		}
		if strings.Contains(strings.ToLower(c.Message), "persistentvolumeclaim") {
			return backend.Waiting{}, ""
		}
		if c.Reason == corev1.PodReasonUnschedulable {
			since := c.LastTransitionTime.UTC()
			if c.LastTransitionTime.IsZero() {
				since = pod.CreationTimestamp.UTC()
			}
			return backend.Waiting{Reason: backend.WaitUnschedulable, Message: c.Message, Since: since}, ""
		}
		return backend.Waiting{}, c.Message
	}
	// The init containers run first: one that waits keeps the server's container waiting
	// too, as PodInitializing, which says nothing of why. A container other than the server's
	// (an init container, a sidecar something injected) is named in the message.
	for _, l := range []struct {
		kind     string
		statuses []corev1.ContainerStatus
	}{{"init container", pod.Status.InitContainerStatuses}, {"container", pod.Status.ContainerStatuses}} {
		for _, cs := range l.statuses {
			w := cs.State.Waiting
			if w == nil || w.Reason == "" || w.Reason == "ContainerCreating" {
				continue
			}
			who := ""
			if cs.Name != ContainerName && cs.Name != "" {
				who = l.kind + " " + cs.Name + ": "
			}
			if imagePullReasons[w.Reason] {
				msg := who + w.Reason
				if w.Message != "" {
					msg += ": " + w.Message
				}
				// No Since: the waiting state has no time, and the pod's start is when the
				// pull began, not when it failed (a large image pulled for minutes before
				// one error the kubelet retries would be past --stalled-after at once). The
				// decision counts from when it first reports the wait.
				return backend.Waiting{Reason: backend.WaitImage, Message: msg, BackOff: w.Reason == "ImagePullBackOff"}, ""
			}
			return backend.Waiting{}, strings.TrimSpace(who + w.Reason + " " + w.Message)
		}
	}
	// Bound to a node whose kubelet says the pod is not ready to start containers
	// (PodReadyToStartContainers False: its volumes not attached or mounted, its sandbox not
	// made). An image pull comes after that, with the condition True, and is not this wait;
	// a kubelet that does not set the condition says nothing. Why it takes long
	// (FailedAttachVolume, FailedMount) is in the pod's Events only; the time the pod was
	// bound is the scheduler's, on its PodScheduled condition. The decision words it (stuck.go).
	if pod.Spec.NodeName == "" || condition(pod, corev1.PodReadyToStartContainers) != corev1.ConditionFalse {
		return backend.Waiting{}, ""
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return backend.Waiting{Reason: backend.WaitStart, Since: c.LastTransitionTime.UTC()}, ""
		}
	}
	return backend.Waiting{}, ""
}
