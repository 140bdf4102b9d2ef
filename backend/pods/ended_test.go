package pods

import (
	"slices"
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

// TestServerEndedInLivePod: a pod's server is ended once its server container has terminated,
// whatever the pod's phase and readiness say while another container runs (a sidecar a mesh
// or a logging agent injected, a native sidecar the kubelet has not stopped yet): with
// restartPolicy Never the server will not run again, and read as Starting or Ready it would
// never be replaced nor the VM reported stopped or failed. Exit code 0 is a clean shutdown,
// any other a failure, with the server container's finish time and end, not the sidecar's. A
// pod that failed only because a sidecar did reads by its server too, unless the pod's own
// reason says something outside ended it. A server that runs while a sidecar has ended reads
// as before. A server that ended in a pod still Running lingers (backend.Server.Lingers): the
// pod holds its node, and the eviction API asks its budget about it; one whose pod is
// terminal, or Pending, does not. A server that lingers names the containers that keep it
// running (backend.Server.KeptBy): every other container that has not terminated, running or
// waiting to run again, native sidecars among them, in order of name whatever the order of
// the pod's status, so that its VM can say what holds the node; read from the cache as from
// the pod.
func TestServerEndedInLivePod(t *testing.T) {
	finished := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC))
	sidecarFinished := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 9, 0, time.UTC))
	terminated := func(name, reason string, code int32, at metav1.Time) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			Reason: reason, ExitCode: code, FinishedAt: at}}}
	}
	running := func(name string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	}
	ready := func(s corev1.ConditionStatus) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}
	}
	nodeDown := func(string) (bool, bool) { return false, true }
	tests := map[string]struct {
		status  corev1.PodStatus
		nodes   func(string) (bool, bool)
		state   backend.State
		message string
		since   time.Time
		lingers bool
		keptBy  []string
	}{
		"server exited 0, sidecar runs": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionFalse),
			ContainerStatuses: []corev1.ContainerStatus{running("istio-proxy"), terminated(ContainerName, "Completed", 0, finished)}},
			state: backend.StateStopped, message: "Completed, exit code 0", since: finished.Time, lingers: true, keptBy: []string{"istio-proxy"}},
		"server exited 1, sidecar runs": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionFalse),
			ContainerStatuses: []corev1.ContainerStatus{terminated(ContainerName, "Error", 1, finished), running("log-agent")}},
			state: backend.StateFailed, message: "Error, exit code 1", since: finished.Time, lingers: true, keptBy: []string{"log-agent"}},
		"server OOMKilled, sidecar runs": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionFalse),
			ContainerStatuses: []corev1.ContainerStatus{terminated(ContainerName, "OOMKilled", 137, finished), running("istio-proxy")}},
			state: backend.StateFailed, message: "OOMKilled, exit code 137", since: finished.Time, lingers: true, keptBy: []string{"istio-proxy"}},
		// Before the kubelet writes the pod's readiness again.
		"server ended, pod still ready": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionTrue),
			ContainerStatuses: []corev1.ContainerStatus{terminated(ContainerName, "Error", 2, finished), running("istio-proxy")}},
			state: backend.StateFailed, message: "Error, exit code 2", since: finished.Time, lingers: true, keptBy: []string{"istio-proxy"}},
		// Ended is ended on a node that does not answer too: not lost.
		"server ended, node not ready": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionFalse),
			ContainerStatuses: []corev1.ContainerStatus{terminated(ContainerName, "Completed", 0, finished), running("istio-proxy")}},
			nodes: nodeDown, state: backend.StateStopped, message: "Completed, exit code 0", since: finished.Time, lingers: true, keptBy: []string{"istio-proxy"}},
		// A native sidecar (an init container with restartPolicy Always) runs on until the
		// kubelet stops it after the server.
		"server ended, native sidecar runs": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionFalse),
			InitContainerStatuses: []corev1.ContainerStatus{terminated("istio-init", "Completed", 0, finished), running("istio-proxy")},
			ContainerStatuses:     []corev1.ContainerStatus{terminated(ContainerName, "Completed", 0, finished), running("log-agent")}},
			state: backend.StateStopped, message: "Completed, exit code 0", since: finished.Time, lingers: true, keptBy: []string{"istio-proxy", "log-agent"}},
		// The same containers as the kubelet may list them otherwise: the same names.
		"server ended, sidecars listed in another order": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionFalse),
			InitContainerStatuses: []corev1.ContainerStatus{running("vault-agent"), terminated("istio-init", "Completed", 0, finished)},
			ContainerStatuses:     []corev1.ContainerStatus{running("log-agent"), terminated(ContainerName, "Completed", 0, finished), running("istio-proxy")}},
			state: backend.StateStopped, message: "Completed, exit code 0", since: finished.Time, lingers: true, keptBy: []string{"istio-proxy", "log-agent", "vault-agent"}},
		// A sidecar that restarts waits between its runs (CrashLoopBackOff) and keeps the pod
		// Running all the while: it is named as when it runs.
		"server ended, sidecar restarting": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionFalse),
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "istio-proxy", State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}},
			ContainerStatuses: []corev1.ContainerStatus{terminated(ContainerName, "Error", 1, finished),
				{Name: "log-agent", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}},
			state: backend.StateFailed, message: "Error, exit code 1", since: finished.Time, lingers: true, keptBy: []string{"istio-proxy", "log-agent"}},
		// The kubelet says Pending while a container has not started (a sidecar's image not
		// pulled), even when the server has run and ended.
		"server ended, sidecar waits": {status: corev1.PodStatus{Phase: corev1.PodPending,
			ContainerStatuses: []corev1.ContainerStatus{terminated(ContainerName, "Error", 1, finished),
				{Name: "istio-proxy", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}},
			state: backend.StateFailed, message: "Error, exit code 1", since: finished.Time},
		"pod failed by its sidecar": {status: corev1.PodStatus{Phase: corev1.PodFailed,
			ContainerStatuses: []corev1.ContainerStatus{terminated(ContainerName, "Completed", 0, finished), terminated("istio-proxy", "OOMKilled", 137, sidecarFinished)}},
			state: backend.StateStopped, message: "Completed, exit code 0", since: finished.Time},
		// The server exited 0 when the kubelet stopped it: the eviction ended it.
		"pod evicted, server exited 0": {status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory",
			ContainerStatuses: []corev1.ContainerStatus{terminated(ContainerName, "Completed", 0, finished)}},
			state: backend.StateFailed, message: "Evicted: low on memory; the server: Completed, exit code 0", since: finished.Time},
		"server runs, sidecar ended": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionFalse),
			ContainerStatuses: []corev1.ContainerStatus{running(ContainerName), terminated("istio-proxy", "Error", 1, sidecarFinished)}},
			state: backend.StateStarting},
		"server runs and is ready, sidecar ended": {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionTrue),
			ContainerStatuses: []corev1.ContainerStatus{running(ContainerName), terminated("istio-proxy", "Completed", 0, sidecarFinished)}},
			state: backend.StateReady},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := newPod(backend.Owner{Name: "vm", UID: "u"}, backend.Spec{Image: "i"})
			p.UID, p.Spec.NodeName, p.Status = "pod-uid", "n1", tc.status
			s := cachePod(p).observed(tc.nodes)
			if s.State != tc.state || s.Message != tc.message || !s.Since.Equal(tc.since) {
				t.Errorf("state %s, message %q, since %v; want %s, %q, %v", s.State, s.Message, s.Since, tc.state, tc.message, tc.since)
			}
			if s.Detail != string(tc.status.Phase) {
				t.Errorf("detail %q, want the pod's phase %s", s.Detail, tc.status.Phase)
			}
			if s.Lingers != tc.lingers {
				t.Errorf("lingers %v, want %v", s.Lingers, tc.lingers)
			}
			if direct := serverOf(p); direct.Lingers != tc.lingers {
				t.Errorf("serverOf: lingers %v, want %v", direct.Lingers, tc.lingers)
			}
			if !slices.Equal(s.KeptBy, tc.keptBy) || !slices.Equal(serverOf(p).KeptBy, tc.keptBy) {
				t.Errorf("kept by %q (serverOf: %q), want %q", s.KeptBy, serverOf(p).KeptBy, tc.keptBy)
			}
		})
	}
}
