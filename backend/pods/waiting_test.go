package pods

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestWaitingOf: a pending pod says why it does not run, as the scheduler and the kubelet
// put it: unschedulable since the scheduler said so; an image not pulled with no time, as the
// kubelet gives none (the pod's start is when the pull began, which may be long before it
// failed: the decision counts from when it first reports the wait), and marked as a back-off
// when the kubelet only says it waits to try again; an init container's wait before the
// server's PodInitializing, which hides it; anything else as a plain message, and nothing of
// a claim (the disk says it).
func TestWaitingOf(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	marked := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC))
	started := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC))
	scheduled := func(reason, message string, at metav1.Time) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: message, LastTransitionTime: at}}
		}
	}
	waiting := func(reason, message string, start *metav1.Time) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.StartTime = start
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
		}
	}
	initWaiting := func(reason, message string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.StartTime = &started
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{
				{Name: "setup", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}},
				{Name: "istio-init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
		}
	}
	tests := map[string]struct {
		edit    func(*corev1.Pod)
		want    backend.Waiting
		message string
	}{
		"nothing yet": {edit: func(*corev1.Pod) {}},
		"not ready to start containers on its node": {edit: func(p *corev1.Pod) {
			p.Spec.NodeName = "node-a"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: marked},
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse}}
			waiting("ContainerCreating", "", &started)(p)
		}, want: backend.Waiting{Reason: backend.WaitStart, Since: marked.Time}},
		// Its image being pulled: the pod is ready to start containers, and this is no wait
		// for its node (a large image takes long to pull).
		"ready to start containers, its image pulled": {edit: func(p *corev1.Pod) {
			p.Spec.NodeName = "node-a"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: marked},
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}}
			waiting("ContainerCreating", "", &started)(p)
		}},
		"unschedulable": {edit: scheduled("Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.", marked),
			want: backend.Waiting{Reason: backend.WaitUnschedulable, Message: "0/3 nodes are available: 3 Insufficient cpu.", Since: marked.Time}},
		"unschedulable, no transition time": {edit: scheduled("Unschedulable", "0/3 nodes are available", metav1.Time{}),
			want: backend.Waiting{Reason: backend.WaitUnschedulable, Message: "0/3 nodes are available", Since: created.Time}},
		"scheduling gated": {edit: scheduled("SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates", marked),
			message: "Scheduling is blocked due to non-empty scheduling gates"},
		"a claim not bound": {edit: scheduled("Unschedulable", "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.", marked)},
		"ErrImagePull": {edit: waiting("ErrImagePull", "lookup pull-fails.invalid: no such host", &started),
			want: backend.Waiting{Reason: backend.WaitImage, Message: "ErrImagePull: lookup pull-fails.invalid: no such host"}},
		"ImagePullBackOff": {edit: waiting("ImagePullBackOff", `Back-off pulling image "x"`, &started),
			want: backend.Waiting{Reason: backend.WaitImage, Message: `ImagePullBackOff: Back-off pulling image "x"`, BackOff: true}},
		"InvalidImageName, not started": {edit: waiting("InvalidImageName", "", nil),
			want: backend.Waiting{Reason: backend.WaitImage, Message: "InvalidImageName"}},
		"init container image": {edit: initWaiting("ImagePullBackOff", `Back-off pulling image "bad"`),
			want: backend.Waiting{Reason: backend.WaitImage, Message: `init container istio-init: ImagePullBackOff: Back-off pulling image "bad"`, BackOff: true}},
		"init container, another wait": {edit: initWaiting("CreateContainerConfigError", `secret "x" not found`),
			message: `init container istio-init: CreateContainerConfigError secret "x" not found`},
		"initializing": {edit: func(p *corev1.Pod) {
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "setup", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
		}, message: "PodInitializing"},
		"another wait":       {edit: waiting("CreateContainerConfigError", "secret x not found", &started), message: "CreateContainerConfigError secret x not found"},
		"container creating": {edit: waiting("ContainerCreating", "", &started)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := newPod(backend.Owner{Name: "vm", UID: "u"}, backend.Spec{Image: "i"})
			p.CreationTimestamp, p.Status.Phase = created, corev1.PodPending
			tc.edit(p)
			w, msg := waitingOf(p)
			if w != tc.want || msg != tc.message {
				t.Errorf("waiting %+v, message %q; want %+v, %q", w, msg, tc.want, tc.message)
			}
			s := serverOf(p)
			if s.State != backend.StatePending || s.Waiting != tc.want || s.Message != tc.message {
				t.Errorf("server %+v", s)
			}
		})
	}
}
