package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func resources(cpu, memory string) corev1.ResourceRequirements {
	l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
}

// kwokPod is a pod as kwok leaves it once running: container statuses without resources.
func kwokPod(cpu, memory string) *corev1.Pod {
	r := resources(cpu, memory)
	r.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("40G")
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-server", Namespace: "ns", UID: "pod-uid", Generation: 1},
		Spec:       corev1.PodSpec{NodeName: "kwok-node-0", Containers: []corev1.Container{{Name: "server", Image: "img:1", Resources: r}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "server", Image: "img:1", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
		},
	}
}

func resize(p *corev1.Pod, cpu, memory string) {
	r := resources(cpu, memory)
	for n, q := range r.Requests {
		p.Spec.Containers[0].Resources.Requests[n] = q
		p.Spec.Containers[0].Resources.Limits[n] = q
	}
	p.Generation++
}

// describe is what a test reads of a pod's resize: the conditions, allocated and reported
// resources of the container, and the observed generation.
func describe(p *corev1.Pod) string {
	var b strings.Builder
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
			fmt.Fprintf(&b, "%s(%s) ", c.Type, c.Reason)
		}
	}
	cs := p.Status.ContainerStatuses[0]
	alloc := cs.AllocatedResources[corev1.ResourceCPU]
	res := "-"
	if cs.Resources != nil {
		q := cs.Resources.Limits[corev1.ResourceCPU]
		m := cs.Resources.Limits[corev1.ResourceMemory]
		res = q.String() + "/" + m.String()
	}
	fmt.Fprintf(&b, "allocated %s resources %s gen %d", alloc.String(), res, p.Status.ObservedGeneration)
	return b.String()
}

var roomy = room{
	allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi")},
	used:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
}

// TestKubelet walks pods through the steps of a resize, each step applied before the next, and
// checks every write and every wait in order.
func TestKubelet(t *testing.T) {
	type want struct {
		what  string        // the step taken ("" none)
		after time.Duration // when to look again
		pod   string        // describe() of the pod after it
	}
	type stepT struct {
		at     time.Duration     // since t0
		change func(*corev1.Pod) // what the API server or a test did before the step
		want   want
	}
	type caseT struct {
		pod   *corev1.Pod
		node  room
		steps []stepT
	}
	tests := map[string]caseT{}
	grow := func(p *corev1.Pod) { resize(p, "3", "4G") }
	tests["cpu 2 to 3"] = caseT{kwokPod("2", "4G"), roomy, []stepT{
		{0, nil, want{"report", 0, "allocated 2 resources 2/4G gen 1"}},
		{0, nil, want{"", 0, "allocated 2 resources 2/4G gen 1"}},
		{0, grow, want{"allocate", time.Second, "PodResizeInProgress() allocated 3 resources 2/4G gen 2"}},
		{500 * time.Millisecond, nil, want{"", 500 * time.Millisecond, "PodResizeInProgress() allocated 3 resources 2/4G gen 2"}},
		{time.Second, nil, want{"actuate", 0, "allocated 3 resources 3/4G gen 2"}},
		{time.Second, nil, want{"", 0, "allocated 3 resources 3/4G gen 2"}},
	}}
	tests["deferred, then room"] = caseT{kwokPod("2", "4G"), room{allocatable: roomy.allocatable, used: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("30")}}, []stepT{
		{0, nil, want{"report", 0, "allocated 2 resources 2/4G gen 1"}},
		{0, grow, want{"pending Deferred", 0, "PodResizePending(Deferred) allocated 2 resources 2/4G gen 2"}},
		{0, nil, want{"", 0, "PodResizePending(Deferred) allocated 2 resources 2/4G gen 2"}},
	}}
	tests["infeasible beyond allocatable"] = caseT{kwokPod("2", "4G"), roomy, []stepT{
		{0, nil, want{"report", 0, "allocated 2 resources 2/4G gen 1"}},
		{0, func(p *corev1.Pod) { resize(p, "64", "4G") }, want{"pending Infeasible", 0, "PodResizePending(Infeasible) allocated 2 resources 2/4G gen 2"}},
		// Asked back to what is in effect: the condition goes.
		{0, func(p *corev1.Pod) { resize(p, "2", "4G") }, want{"settle", 0, "allocated 2 resources 2/4G gen 3"}},
	}}
	answer := func(v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{AnswerAnnotation: v}
			if p.Spec.Containers[0].Resources.Limits.Cpu().String() == "2" {
				grow(p)
			}
		}
	}
	tests["answered Infeasible, then let go"] = caseT{kwokPod("2", "4G"), roomy, []stepT{
		{0, nil, want{"report", 0, "allocated 2 resources 2/4G gen 1"}},
		{0, answer("Infeasible"), want{"pending Infeasible", 0, "PodResizePending(Infeasible) allocated 2 resources 2/4G gen 2"}},
		{0, func(p *corev1.Pod) { p.Annotations = nil }, want{"allocate", time.Second, "PodResizeInProgress() allocated 3 resources 2/4G gen 2"}},
		{2 * time.Second, nil, want{"actuate", 0, "allocated 3 resources 3/4G gen 2"}},
	}}
	tests["answered Deferred"] = caseT{kwokPod("2", "4G"), roomy, []stepT{
		{0, nil, want{"report", 0, "allocated 2 resources 2/4G gen 1"}},
		{0, answer("Deferred"), want{"pending Deferred", 0, "PodResizePending(Deferred) allocated 2 resources 2/4G gen 2"}},
	}}
	tests["answered Error"] = caseT{kwokPod("2", "4G"), roomy, []stepT{
		{0, nil, want{"report", 0, "allocated 2 resources 2/4G gen 1"}},
		{0, answer("Error"), want{"allocate", time.Second, "PodResizeInProgress() allocated 3 resources 2/4G gen 2"}},
		{time.Second, nil, want{"error", 0, "PodResizeInProgress(Error) allocated 3 resources 2/4G gen 2"}},
		{2 * time.Second, nil, want{"", 0, "PodResizeInProgress(Error) allocated 3 resources 2/4G gen 2"}},
		{2 * time.Second, func(p *corev1.Pod) { p.Annotations = nil }, want{"actuate", 0, "allocated 3 resources 3/4G gen 2"}},
	}}
	tests["memory below usage"] = caseT{kwokPod("2", "4G"), roomy, []stepT{
		{0, nil, want{"report", 0, "allocated 2 resources 2/4G gen 1"}},
		{0, func(p *corev1.Pod) {
			p.Annotations = map[string]string{UsageMemoryAnnotation: "3G"}
			resize(p, "2", "2G")
		}, want{"allocate", time.Second, "PodResizeInProgress() allocated 2 resources 2/4G gen 2"}},
		{time.Second, nil, want{"error", 0, "PodResizeInProgress(Error) allocated 2 resources 2/4G gen 2"}},
		{time.Second, func(p *corev1.Pod) { p.Annotations[UsageMemoryAnnotation] = "1G" }, want{"actuate", 0, "allocated 2 resources 2/2G gen 2"}},
	}}
	// Without the annotation kwok reports usage.yaml's default (32Mi): 20Mi is below it.
	tests["memory below the default usage"] = caseT{kwokPod("2", "64Mi"), roomy, []stepT{
		{0, nil, want{"report", 0, "allocated 2 resources 2/64Mi gen 1"}},
		{0, func(p *corev1.Pod) { resize(p, "2", "20Mi") }, want{"allocate", time.Second, "PodResizeInProgress() allocated 2 resources 2/64Mi gen 2"}},
		{time.Second, nil, want{"error", 0, "PodResizeInProgress(Error) allocated 2 resources 2/64Mi gen 2"}},
		{time.Second, func(p *corev1.Pod) { p.Annotations = map[string]string{UsageMemoryAnnotation: "16Mi"} }, want{"actuate", 0, "allocated 2 resources 2/20Mi gen 2"}},
	}}
	tests["not running"] = caseT{func() *corev1.Pod { p := kwokPod("2", "4G"); p.Status.Phase = corev1.PodPending; return p }(), roomy, []stepT{
		{0, nil, want{"", 0, "allocated 0 resources - gen 0"}},
	}}

	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := tc.pod
			for i, st := range tc.steps {
				if st.change != nil {
					st.change(pod)
				}
				s := kubelet(pod, tc.node, t0.Add(st.at), time.Second)
				if s.what != "" {
					pod.Status = s.status
				}
				if got := (want{s.what, s.after, describe(pod)}); got != st.want {
					t.Fatalf("step %d: %+v, want %+v", i, got, st.want)
				}
			}
		})
	}
}

func TestFitsMessage(t *testing.T) {
	reason, msg := fits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}, room{
		allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		used:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")},
	})
	if reason != "Deferred" || msg != "Node didn't have enough resource: cpu, requested: 3000, used: 1500, capacity: 4000" {
		t.Errorf("%s: %s", reason, msg)
	}
}

// TestStatusPatch: the patch deletes a removed condition by its type, carries the container
// statuses whole (the API server replaces that list as one) and names the resourceVersion.
func TestStatusPatch(t *testing.T) {
	pod := kwokPod("2", "4G")
	pod.ResourceVersion = "42"
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue})
	next := *pod.Status.DeepCopy()
	next.Conditions = dropConditions(next.Conditions, corev1.PodResizeInProgress)
	r := resources("3", "4G")
	next.ContainerStatuses[0].Resources = &r
	patch, err := statusPatch(pod, next)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := json.Marshal(pod)
	merged, err := strategicpatch.StrategicMergePatch(old, patch, corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(merged, &got); err != nil {
		t.Fatal(err)
	}
	if d := describe(&got); d != "allocated 0 resources 3/4G gen 0" || len(got.Status.Conditions) != 1 || got.Status.ContainerStatuses[0].Image != "img:1" {
		t.Errorf("patched pod: %s, conditions %v, image %q\npatch %s", d, got.Status.Conditions, got.Status.ContainerStatuses[0].Image, patch)
	}
	if !strings.Contains(string(patch), `"resourceVersion":"42"`) {
		t.Errorf("patch without the resourceVersion: %s", patch)
	}
}
