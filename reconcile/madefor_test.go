package reconcile

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestControllerAdmissionRewritesServer: a mutating admission rewrites every server pod the
// controller makes, as clusters do: its image pinned to a digest on a registry mirror
// (Kyverno's verifyImages with mutateDigest, a mirror policy), its cpu and memory rounded up
// (GKE Autopilot). The server is the one the VM asks for, pending or running with what
// admission gave it in effect: it is neither replaced nor resized. Before, its image and
// resources were read back from the pod and differed from the VM's, and a pending server was
// replaced at once, under every --resize policy, by another that admission rewrote the same
// way, for ever. A real change of the VM's image still replaces it, and the Event names the
// image it was made for, not the digest.
func TestControllerAdmissionRewritesServer(t *testing.T) {
	w := newWorld(t, "create-finalizer-present")
	obj := w.vm(t, testVM.Namespace, testVM.Name)
	if err := unstructured.SetNestedField(obj.Object, "example.com/vm:1", "spec", "image"); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Tracker().Update(vmGVR, obj, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
	kube := kubefake.NewClientset()
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		c := &pod.Spec.Containers[0]
		c.Image = "mirror.example.org/" + c.Image + "@sha256:0b6f1c1e5d5e4c6a9d7e1a2b3c4d5e6f0b6f1c1e5d5e4c6a9d7e1a2b3c4d5e6f"
		for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			l[corev1.ResourceCPU], l[corev1.ResourceMemory] = resource.MustParse("2250m"), resource.MustParse("4Gi")
		}
		return false, nil, nil // the create goes on, admitted
	})
	c := ephemeralPodsController(t, w, kube)
	ctx := start(t, c)
	owner := ownerOf(cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields))
	// work processes what is queued until done holds, and keeps the Events recorded (evs); a
	// bounded number at a time, the Events drained each time, so that a VM requeued for ever
	// (a server replaced over and over) fails the test, not hangs it.
	var evs []string
	work := func(what string, done func() bool) {
		t.Helper()
		eventually(t, what, func() bool {
			for i := 0; i < 20 && c.queue.Len() > 0; i++ {
				c.processNextItem(ctx)
				evs = append(evs, w.events()...)
			}
			return done()
		})
	}
	cached := func(state func(*corev1.Pod) bool) func() bool {
		return func() bool {
			srv, _ := c.cfg.Backend.Observe(owner)
			if srv == nil {
				return false
			}
			obj, err := kube.Tracker().Get(podsGVR, testVM.Namespace, srv.Name)
			return err == nil && state(obj.(*corev1.Pod)) && srv.Version == obj.(*corev1.Pod).ResourceVersion
		}
	}
	kept := func(when string) {
		t.Helper()
		// Decided on again, as a resync would, with the pod as the cache shows it.
		c.queue.Add(testVM)
		work("the VM decided on again", func() bool { return true })
		if calls := podCalls(kube); slices.Contains(calls, "delete") || slices.Contains(calls, "patch") {
			t.Fatalf("%s: calls on pods %v: the server admission rewrote was replaced or resized (%s: %s)", when, calls,
				status(t, w, testVM, "reason"), status(t, w, testVM, "message"))
		}
		for _, e := range evs {
			if strings.Contains(e, decision.ReasonReplacingServer) || strings.Contains(e, decision.ReasonResizingServer) {
				t.Errorf("%s: event %q", when, e)
			}
		}
		evs = nil
	}

	work("the server is created and cached", cached(func(*corev1.Pod) bool { return true }))
	kept("pending")
	if r := status(t, w, testVM, "reason"); r == decision.ReasonServerReplacing {
		t.Errorf("pending: reason %s (%s)", r, status(t, w, testVM, "message"))
	}
	// change writes pod anew with edit made, its generation counted up as the API server does
	// on any change of a pod's spec, and waits for the cache to show it.
	change := func(what, version string, edit func(*corev1.Pod)) {
		t.Helper()
		srv, _ := c.cfg.Backend.Observe(owner)
		got, err := kube.Tracker().Get(podsGVR, testVM.Namespace, srv.Name)
		if err != nil {
			t.Fatal(err)
		}
		pod := got.(*corev1.Pod).DeepCopy()
		pod.ResourceVersion, pod.Generation = version, max(pod.Generation, 1)+1 // the fake keeps none: 1 at the create
		edit(pod)
		if err := kube.Tracker().Update(podsGVR, pod, testVM.Namespace); err != nil {
			t.Fatal(err)
		}
		eventually(t, what, cached(func(p *corev1.Pod) bool { return p.ResourceVersion == version }))
	}
	// Another controller takes its scheduling gate off (Kueue): a change of the spec that is
	// no resize. Before, the generation past 1 made the server report the cpu and memory
	// admission gave it, and a pending one was replaced at once.
	change("the gate taken off is cached", "2", func(p *corev1.Pod) { p.Spec.SchedulingGates = nil })
	kept("pending, its gate taken off")

	// The kubelet runs it, with what admission gave it in effect.
	srv, _ := c.cfg.Backend.Observe(owner)
	got, err := kube.Tracker().Get(podsGVR, testVM.Namespace, srv.Name)
	if err != nil {
		t.Fatal(err)
	}
	pod := got.(*corev1.Pod).DeepCopy()
	pod.ResourceVersion = "3"
	pod.Spec.NodeName, pod.Status.Phase = "node-1", corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	res := pod.Spec.Containers[0].Resources.DeepCopy()
	delete(res.Requests, corev1.ResourceEphemeralStorage)
	delete(res.Limits, corev1.ResourceEphemeralStorage)
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pods.ContainerName, Ready: true, Resources: res,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	if err := kube.Tracker().Update(podsGVR, pod, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
	work("the VM is ready", func() bool { return status(t, w, testVM, "reason") == decision.ReasonServerReady })
	kept("running")
	// kubectl debug adds an ephemeral container: no resize either. Before, the server was
	// resized back to the VM's cpu and memory, which an admission of pods/resize refuses,
	// and then replaced.
	change("the debugger is cached", "4", func(p *corev1.Pod) {
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger-x7k2p", Image: "busybox"}}}
		p.Status.ObservedGeneration = p.Generation
	})
	kept("running, debugged")
	vm := w.vm(t, testVM.Namespace, testVM.Name)
	conditions, _, _ := unstructured.NestedSlice(vm.Object, "status", "conditions")
	for _, cond := range conditions {
		if typ := cond.(map[string]any)["type"]; typ == schema.ConditionResizing || typ == schema.ConditionRestartRequired {
			t.Errorf("running: condition %v: the server runs with the spec it was made for", cond)
		}
	}

	// A real change of the image replaces the server.
	vm = w.vm(t, testVM.Namespace, testVM.Name)
	if err := newImage(vm.Object); err != nil {
		t.Fatal(err)
	}
	vm.SetResourceVersion(vm.GetResourceVersion() + "1") // a write of its own, which the cache shows
	if err := w.client.Tracker().Update(vmGVR, vm, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
	cachedAt(t, c, w, testVM)
	work("the server is replaced", func() bool { return slices.Contains(podCalls(kube), "delete") })
	if !slices.ContainsFunc(evs, func(e string) bool {
		return strings.Contains(e, decision.ReasonReplacingServer) && strings.Contains(e, "image example.com/vm:1 -> example.com/vm:2")
	}) {
		t.Errorf("events %q, want ReplacingServer for image example.com/vm:1 -> example.com/vm:2", evs)
	}
}

// podsGVR is where the fake clientset's tracker keeps pods.
var podsGVR = k8sschema.GroupVersionResource{Version: "v1", Resource: "pods"}
