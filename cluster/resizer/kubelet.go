package main

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudnative-czs/vm-controller/cluster"
)

// Annotations a test puts on a pod to steer this stand-in kubelet.
const (
	// AnswerAnnotation makes every resize of the pod end as its value says: Infeasible or
	// Deferred (a PodResizePending condition with that reason), or Error (a
	// PodResizeInProgress condition with reason Error that never clears). Removing it lets the
	// resize go ahead.
	AnswerAnnotation = "resize.kwok.cloudnative.czs/answer"
	// UsageMemoryAnnotation is kwok's simulated memory usage of the pod (cluster/usage.yaml);
	// as the kubelet does, a memory limit is not lowered below it.
	UsageMemoryAnnotation = "kwok.x-k8s.io/usage-memory"
)

// defaultUsageMemory is the usage kwok reports for a pod without UsageMemoryAnnotation, read
// from cluster/usage.yaml so that the two cannot differ: a decrease below it fails as one
// below an annotated usage does.
var defaultUsageMemory = func() resource.Quantity {
	q, err := cluster.DefaultMemoryUsage()
	if err != nil {
		panic(err) // the file is embedded: TestDefaultMemoryUsage catches it before any run
	}
	return q
}()

// room is what a node has for a pod's resize: its allocatable cpu and memory, and what the
// other pods on it have been granted.
type room struct {
	allocatable corev1.ResourceList
	used        corev1.ResourceList
}

// step is the kubelet's next status for a pod, and when to look again.
type step struct {
	what   string           // what it does, for the log; "" when nothing is to be written
	status corev1.PodStatus // the status to write
	after  time.Duration    // look again after this long; zero: when something changes
}

// kubelet decides the next step of in-place resize for a running pod, as a kubelet does
// (pkg/kubelet/allocation and kuberuntime): report the resources of running containers;
// when the spec asks for others, check them against the node (PodResizePending Infeasible
// or Deferred), grant them (PodResizeInProgress, status.containerStatuses[].allocatedResources),
// and after actuate apply them (status.containerStatuses[].resources) and clear the condition.
// It is pure: the caller writes the status and looks again.
func kubelet(pod *corev1.Pod, node room, now time.Time, actuate time.Duration) step {
	st := *pod.Status.DeepCopy()
	var s step // nothing to write
	// write is the step that writes st as it is by then, with the generation it answers.
	write := func(what string, after time.Duration) step {
		st.ObservedGeneration = pod.Generation
		return step{what: what, status: st, after: after}
	}
	if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return s
	}
	desired := map[string]corev1.ResourceRequirements{}
	for _, c := range pod.Spec.Containers {
		desired[c.Name] = cpuMemory(c.Resources)
	}
	// A kubelet reports the resources of every running container; the API server refuses a
	// resize of a running pod whose status does not (a node without resize support).
	reported := false
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		if want, ok := desired[cs.Name]; ok && cs.Resources == nil && cs.State.Running != nil {
			cs.Resources, cs.AllocatedResources = want.DeepCopy(), want.Requests.DeepCopy()
			reported = true
		}
	}
	if reported {
		return write("report", 0)
	}

	resizing := false
	for _, cs := range st.ContainerStatuses {
		if want, ok := desired[cs.Name]; ok && cs.Resources != nil && !sameResources(want, *cs.Resources) {
			resizing = true
		}
	}
	pending, progress := findCondition(st, corev1.PodResizePending), findCondition(st, corev1.PodResizeInProgress)
	if !resizing {
		if pending == nil && progress == nil {
			if st.ObservedGeneration != pod.Generation {
				return write("observe", 0)
			}
			return s
		}
		st.Conditions = dropConditions(st.Conditions, corev1.PodResizePending, corev1.PodResizeInProgress)
		return write("settle", 0)
	}

	// What the resize asks of the node, against what the node has.
	req := corev1.ResourceList{}
	for _, r := range desired {
		addTo(req, r.Requests)
	}
	reason, message := "", ""
	switch answer := pod.Annotations[AnswerAnnotation]; answer {
	case corev1.PodReasonInfeasible, corev1.PodReasonDeferred:
		reason, message = answer, fmt.Sprintf("answered %s by the annotation %s", answer, AnswerAnnotation)
	case "":
		reason, message = fits(req, node)
	}
	if reason != "" {
		if pending != nil && pending.Reason == reason && pending.ObservedGeneration == pod.Generation {
			return s
		}
		st.Conditions = setCondition(st.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
			Reason: reason, Message: message, ObservedGeneration: pod.Generation, LastTransitionTime: metav1.NewTime(now)})
		return write("pending "+reason, 0)
	}

	// Grant: allocate what the spec asks and show the resize in progress.
	granted := true
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		if want, ok := desired[cs.Name]; ok && !sameList(cs.AllocatedResources, want.Requests) {
			cs.AllocatedResources = want.Requests.DeepCopy()
			granted = false
		}
	}
	if !granted || progress == nil || pending != nil {
		st.Conditions = dropConditions(st.Conditions, corev1.PodResizePending)
		if progress == nil {
			st.Conditions = setCondition(st.Conditions, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue,
				ObservedGeneration: pod.Generation, LastTransitionTime: metav1.NewTime(now)})
		}
		return write("allocate", actuate)
	}

	// Actuate, once the resize has been seen in progress for a while.
	if wait := progress.LastTransitionTime.Add(actuate).Sub(now); wait > 0 {
		return step{after: wait}
	}
	if msg := actuationError(pod, desired); msg != "" {
		if progress.Reason == corev1.PodReasonError && progress.Message == msg {
			return s
		}
		st.Conditions = setCondition(st.Conditions, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue,
			Reason: corev1.PodReasonError, Message: msg, ObservedGeneration: progress.ObservedGeneration, LastTransitionTime: progress.LastTransitionTime})
		return write("error", 0)
	}
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		if want, ok := desired[cs.Name]; ok {
			cs.Resources = want.DeepCopy()
		}
	}
	st.Conditions = dropConditions(st.Conditions, corev1.PodResizeInProgress)
	return write("actuate", 0)
}

// fits answers as a kubelet's admission of a resize: more than the node has at all is
// Infeasible (a 1.36 API server refuses it before it gets here), more than it has free now is
// Deferred.
func fits(req corev1.ResourceList, node room) (reason, message string) {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		want, ok := req[name]
		if !ok {
			continue
		}
		capacity, used := node.allocatable[name], node.used[name]
		switch {
		case want.Cmp(capacity) > 0:
			return corev1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: %s, requested: %d, capacity: %d",
				name, amount(name, want), amount(name, capacity))
		case amount(name, want)+amount(name, used) > amount(name, capacity):
			return corev1.PodReasonDeferred, fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				name, amount(name, want), amount(name, used), amount(name, capacity))
		}
	}
	return "", ""
}

// actuationError is why applying the resources fails: a test's Error answer, or a memory
// limit lowered below what the pod uses (kwok's simulated usage: the annotation, else
// usage.yaml's default), which a kubelet will not do.
func actuationError(pod *corev1.Pod, desired map[string]corev1.ResourceRequirements) string {
	if pod.Annotations[AnswerAnnotation] == corev1.PodReasonError {
		return fmt.Sprintf("answered Error by the annotation %s", AnswerAnnotation)
	}
	usage := defaultUsageMemory
	if v, ok := pod.Annotations[UsageMemoryAnnotation]; ok {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return "" // kwok cannot evaluate it either: no usage to judge by
		}
		usage = q
	}
	for _, cs := range pod.Status.ContainerStatuses {
		want, ok := desired[cs.Name]
		if !ok || cs.Resources == nil {
			continue
		}
		limit, had := want.Limits[corev1.ResourceMemory], cs.Resources.Limits[corev1.ResourceMemory]
		if !limit.IsZero() && limit.Cmp(had) < 0 && usage.Cmp(limit) >= 0 {
			return fmt.Sprintf("cannot decrease memory limits: attempting to set container %q memory limit (%d) below current usage (%d)",
				cs.Name, limit.Value(), usage.Value())
		}
	}
	return ""
}

// cpuMemory is the cpu and memory part of r: the part a resize changes.
func cpuMemory(r corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := corev1.ResourceRequirements{}
	for _, l := range []struct {
		from corev1.ResourceList
		to   *corev1.ResourceList
	}{{r.Requests, &out.Requests}, {r.Limits, &out.Limits}} {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := l.from[name]; ok {
				if *l.to == nil {
					*l.to = corev1.ResourceList{}
				}
				(*l.to)[name] = q.DeepCopy()
			}
		}
	}
	return out
}

func sameResources(a, b corev1.ResourceRequirements) bool {
	return sameList(a.Requests, cpuMemory(b).Requests) && sameList(a.Limits, cpuMemory(b).Limits)
}

// sameList compares the cpu and memory of two lists by value.
func sameList(a, b corev1.ResourceList) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		x, okx := a[name]
		y, oky := b[name]
		if okx != oky || x.Cmp(y) != 0 {
			return false
		}
	}
	return true
}

func addTo(sum, l corev1.ResourceList) {
	for name, q := range l {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			continue
		}
		v := sum[name]
		v.Add(q)
		sum[name] = v
	}
}

// amount is cpu in millicores, memory in bytes, as the kubelet's messages give them.
func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func findCondition(st corev1.PodStatus, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t && st.Conditions[i].Status == corev1.ConditionTrue {
			return &st.Conditions[i]
		}
	}
	return nil
}

func setCondition(cs []corev1.PodCondition, c corev1.PodCondition) []corev1.PodCondition {
	for i := range cs {
		if cs[i].Type == c.Type {
			cs[i] = c
			return cs
		}
	}
	return append(cs, c)
}

func dropConditions(cs []corev1.PodCondition, types ...corev1.PodConditionType) []corev1.PodCondition {
	out := cs[:0:0]
	for _, c := range cs {
		drop := false
		for _, t := range types {
			drop = drop || c.Type == t
		}
		if !drop {
			out = append(out, c)
		}
	}
	return out
}
