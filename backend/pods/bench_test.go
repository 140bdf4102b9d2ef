package pods

import (
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// benchPod is a running server pod as the API server sends it: scheduled, ready, with the
// defaults and status a kubelet adds.
func benchPod() *corev1.Pod {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "bench", Name: "vm-00042", UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"}
	p := newPod(vm, backend.Spec{CPU: resource.MustParse("100m"), Memory: resource.MustParse("64Mi"), RootDisk: resource.MustParse("1Gi"), Image: "registry.k8s.io/pause:3.10"})
	p.UID, p.ResourceVersion, p.Spec.NodeName = "7c433542-8907-45fe-887a-7813523dba9e", "123456", "kwok-node-17"
	p.CreationTimestamp = metav1.Now()
	p.Spec.Tolerations = []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.42", HostIP: "10.1.0.17", StartTime: &p.CreationTimestamp,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "server", Ready: true, Image: "registry.k8s.io/pause:3.10",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: p.CreationTimestamp}}}}}
	return p
}

// BenchmarkDecodePod is what one pod costs from the bytes of a watch event's object to the
// cached server form. unstructured is the path before: JSON into maps, then the
// reflection-based converter into a typed pod. protobuf is the typed informer's.
func BenchmarkDecodePod(b *testing.B) {
	pod := benchPod()
	js, err := json.Marshal(pod)
	if err != nil {
		b.Fatal(err)
	}
	pb, err := pod.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("unstructured", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(js); err != nil {
				b.Fatal(err)
			}
			p := &corev1.Pod{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
				b.Fatal(err)
			}
			cachePod(p)
		}
	})
	b.Run("protobuf", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := &corev1.Pod{}
			if err := p.Unmarshal(pb); err != nil {
				b.Fatal(err)
			}
			cachePod(p)
		}
	})
}

// BenchmarkCachedPodHeap is the live heap that the informer's cache holds per server pod: 10,000
// pods as a burst of VMs makes them (distinct names and UIDs, 100 nodes, one namespace and
// image) decoded from their protobuf bytes through the informer's transform and kept. The
// figure excludes the informer's own maps (keys and the node index), which do not depend on
// the cached form.
func BenchmarkCachedPodHeap(b *testing.B) {
	const n = 10000
	raw := make([][]byte, n)
	for i := range raw {
		p := benchPod()
		p.Name = PodName(fmt.Sprintf("vm-%05d", i))
		p.UID = benchUID(i)
		p.ResourceVersion = fmt.Sprint(200000 + i)
		p.Spec.NodeName = fmt.Sprintf("kwok-node-%d", i%100)
		p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = fmt.Sprintf("vm-%05d", i), benchUID(n+i)
		p.Labels[LabelVMUID], p.Labels[LabelVM], p.Annotations[AnnotationVM] = string(benchUID(n+i)), p.OwnerReferences[0].Name, p.OwnerReferences[0].Name
		var err error
		if raw[i], err = p.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	var perPod float64
	for b.Loop() {
		kept := make([]any, n)
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		for i, pb := range raw {
			p := &corev1.Pod{}
			if err := p.Unmarshal(pb); err != nil {
				b.Fatal(err)
			}
			obj, err := toCachedPod(p)
			if err != nil {
				b.Fatal(err)
			}
			kept[i] = obj
		}
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		goruntime.KeepAlive(kept)
		perPod = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	}
	b.ReportMetric(perPod, "B/pod")
}

// benchUID is a distinct UID in the form the API server gives them.
func benchUID(i int) types.UID {
	return types.UID(fmt.Sprintf("7c433542-8907-45fe-887a-%012x", i))
}
