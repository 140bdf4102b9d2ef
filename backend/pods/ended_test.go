package pods

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestEndedPodMessage: a pod that something outside its containers ended (a kubelet's
// eviction under memory pressure, a node's shutdown) reads as a failed server whose message
// leads with the pod's reason and message, the cause, and gives the server container's end
// after it: the container's own state then is only the aftermath (an evicted container reads
// ContainerStatusUnknown, exit code 137), and alone it hides why the VM's server went. The
// detail is the server container's, found by its name, not a sidecar's that ended otherwise;
// a server that never ran because an init container failed gets that init container's, so
// that the VM's Failed status says what failed instead of nothing. The pod states are those
// the kubelet leaves.
func TestEndedPodMessage(t *testing.T) {
	finished := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC))
	initFinished := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 2, 0, time.UTC))
	terminated := func(name, reason string, code int32, message string, at metav1.Time) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: reason, ExitCode: code, Message: message, FinishedAt: at}}}
	}
	initializing := corev1.ContainerStatus{Name: ContainerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
	tests := map[string]struct {
		status  corev1.PodStatus
		message string
		since   time.Time
	}{
		// What a kubelet under memory pressure leaves on the pod it evicts (Kubernetes 1.22 on).
		"kubelet eviction": {status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
			Message:    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi.",
			Conditions: []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", Message: "The node was low on resource: memory."}},
			ContainerStatuses: []corev1.ContainerStatus{terminated(ContainerName, "ContainerStatusUnknown", 137,
				"The container could not be located when the pod was terminated", finished)}},
			message: "Evicted: The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi; " +
				"the server: ContainerStatusUnknown, exit code 137 The container could not be located when the pod was terminated",
			since: finished.Time},
		"node shutdown": {status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Terminated",
			Message:           "Pod was terminated in response to imminent node shutdown.",
			ContainerStatuses: []corev1.ContainerStatus{terminated(ContainerName, "Error", 137, "", finished)}},
			message: "Terminated: Pod was terminated in response to imminent node shutdown; the server: Error, exit code 137",
			since:   finished.Time},
		"evicted, no container state": {status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"},
			message: "Evicted: low on memory"},
		// The server's own end, not a sidecar's listed first.
		"server and sidecar ended": {status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
			terminated("istio-proxy", "Completed", 0, "", initFinished), terminated(ContainerName, "Error", 3, "out of disk", finished)}},
			message: "Error, exit code 3 out of disk", since: finished.Time},
		"init container failed": {status: corev1.PodStatus{Phase: corev1.PodFailed,
			InitContainerStatuses: []corev1.ContainerStatus{terminated("setup", "Completed", 0, "", initFinished), terminated("init", "Error", 1, "", finished)},
			ContainerStatuses:     []corev1.ContainerStatus{initializing}},
			message: "init container init: Error, exit code 1", since: finished.Time},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := newPod(backend.Owner{Name: "vm", UID: "u"}, backend.Spec{Image: "i"})
			p.UID, p.Spec.NodeName, p.Status = "pod-uid", "n1", tc.status
			s := cachePod(p).observed(nil)
			if s.State != backend.StateFailed || s.Message != tc.message {
				t.Errorf("state %s, message %q; want Failed, %q", s.State, s.Message, tc.message)
			}
			if !tc.since.IsZero() && !s.Since.Equal(tc.since) {
				t.Errorf("since %v, want the finish time %v", s.Since, tc.since)
			}
		})
	}
}
