package reconcile

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
)

// ephemeralPodsController is a controller over w under --root-disk ephemeral whose backend is
// the pod backend over kube.
func ephemeralPodsController(t *testing.T, w *world, kube *kubefake.Clientset) *Controller {
	t.Helper()
	return New(Config{VMs: w.source(), Backend: pods.New(pods.Config{Client: kube}), Policy: serverPolicy,
		Retry: quickRetry(), Report: w.report(nil), Now: func() time.Time { return now }})
}

// podCalls are the verbs of the calls on pods made through kube, other than its informer's.
func podCalls(kube *kubefake.Clientset) []string {
	var verbs []string
	for _, a := range kube.Actions() {
		if a.GetResource().Resource == "pods" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			verbs = append(verbs, a.GetVerb())
		}
	}
	return verbs
}

// TestControllerDeletedDuringCreate: the user deletes the VM while its server's pod is being
// created (kubectl apply, then kubectl delete), and the cache of pods has not shown the pod
// when the VM is decided on again (here it never does). The pod is deleted before the VM is
// let go. Before, the backend deleted what its cache showed, nothing, and the finalizer came
// off with the pod running: the garbage collector took it later, or, with --cascade=orphan,
// nothing ever did, and it kept its claim.
func TestControllerDeletedDuringCreate(t *testing.T) {
	w := newWorld(t, "create-finalizer-present")
	kube := kubefake.NewClientset()
	kube.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil // the cache of pods lags: it never shows the pod
	})
	kube.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		u := w.vm(t, testVM.Namespace, testVM.Name)
		u.Object["metadata"].(map[string]any)["deletionTimestamp"] = "2026-06-01T12:00:00Z"
		if err := w.client.Tracker().Update(vmGVR, u, testVM.Namespace); err != nil {
			t.Error(err)
		}
		return false, nil, nil // the create goes on
	})
	c := ephemeralPodsController(t, w, kube)
	ctx := start(t, c)
	c.processNextItem(ctx)
	cachedAt(t, c, w, testVM)
	for i := 0; i < 10 && c.queue.Len() > 0; i++ {
		c.processNextItem(ctx)
	}
	if calls := podCalls(kube); !slices.Contains(calls, "delete") {
		vm := w.vm(t, testVM.Namespace, testVM.Name)
		t.Errorf("calls on pods %v: the pod was never deleted (the VM let go: %v)", calls, vm == nil || len(vm.GetFinalizers()) == 0)
	}
}

// TestControllerUnlabelledPod: the label cloudnative.czs/vm-uid was taken off a VM's server
// pod (kubectl label pod X key-, a tool that rewrites labels): the cache of pods, which
// selects on it, drops the pod, which the VM still owns. The VM is decided on the pod as read
// past the cache: deleted, its pod is deleted and then it goes. Before, the controller waited
// for the cache to show the pod, every 5 s, for ever: the VM stayed Terminating, its status
// "running and ready", with nothing said.
func TestControllerUnlabelledPod(t *testing.T) {
	w := newWorld(t, "delete-with-server")
	owner := ownerOf(w.view(t, "delete-with-server"))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pods.PodName(owner.Name), Namespace: owner.Namespace, UID: "pod-uid-1", ResourceVersion: "3",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	kube := kubefake.NewClientset(pod)
	c := ephemeralPodsController(t, w, kube)
	ctx := start(t, c)
	var waits []time.Duration
	for range 3 {
		after, err := c.reconcile(ctx, testVM, c.log, false)
		if err != nil {
			t.Fatal(err)
		}
		waits = append(waits, after)
		if _, err := kube.CoreV1().Pods(owner.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			break // deleted (the fake has no grace period)
		}
	}
	if calls := podCalls(kube); !slices.Contains(calls, "delete") {
		t.Fatalf("calls on pods %v, reconciles' waits %v: the pod was never deleted", calls, waits)
	}
	// Its deletion seen (the pod is gone), the VM is let go.
	if _, err := c.reconcile(ctx, testVM, c.log, false); err != nil {
		t.Fatal(err)
	}
	if vm := w.vm(t, testVM.Namespace, testVM.Name); vm != nil && len(vm.GetFinalizers()) != 0 {
		t.Errorf("the VM keeps its finalizer once its pod is gone: %s %s", status(t, w, testVM, "phase"), status(t, w, testVM, "reason"))
	}
}
