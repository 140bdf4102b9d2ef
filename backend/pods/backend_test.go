package pods

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestBackendTyped runs the backend over the typed clientset: Create writes the pod, the
// informer brings it back, a change of it names its VM, Observe reads it as a server (lost once its node
// is not ready, or gone; back once the node is made again), a pod of the same name that another VM controls is rejected, and Delete
// removes the pod.
func TestBackendTyped(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	client := kubefake.NewClientset(node)
	b, notified := started(t, Config{Client: client, WatchNodes: true})
	ctx := t.Context()

	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	spec := backend.Spec{CPU: resource.MustParse("100m"), Memory: resource.MustParse("64Mi"), RootDisk: resource.MustParse("1Gi"), Image: "img:1"}
	created, err := b.Create(ctx, vm, spec)
	if err != nil {
		t.Fatal(err)
	}
	if created.Name != PodName("a") || !created.Spec.Equal(spec) {
		t.Errorf("created %+v", created)
	}
	// The informer brings the pod back as created: the VM is not notified of it (see echo).
	for {
		srv, err := b.Observe(vm)
		if err != nil {
			t.Fatal(err)
		}
		if srv != nil {
			if srv.Name != PodName("a") {
				t.Fatalf("observed %+v", srv)
			}
			break
		}
		runtime.Gosched()
	}

	// The pod runs on n1, which then stops being ready.
	pod, err := client.CoreV1().Pods("ns").Get(ctx, PodName("a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.NodeName, pod.ResourceVersion = "n1", "2"
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if _, err := client.CoreV1().Pods("ns").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The informer may also deliver the create's add as news, when its watch event outruns
	// Create's record of the echo; so read notifications until the one that shows the update.
	await(t, notified, func() bool { srv, _ := b.Observe(vm); return srv != nil && srv.State == backend.StateReady })
	node = node.DeepCopy()
	node.ResourceVersion, node.Status.Conditions[0].Status = "2", corev1.ConditionFalse
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, notified, func() bool { srv, _ := b.Observe(vm); return srv != nil && srv.State == backend.StateLost })

	// The node is deleted by hand (the server is lost: its node is gone), and its kubelet
	// registers it again before the pods bound to it are collected: the VM is told.
	if err := client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, notified, func() bool {
		srv, _ := b.Observe(vm)
		return srv != nil && srv.State == backend.StateLost && srv.Message == "node n1 is gone"
	})
	node = node.DeepCopy()
	node.ResourceVersion, node.Status.Conditions[0].Status = "3", corev1.ConditionTrue
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, notified, func() bool { srv, _ := b.Observe(vm); return srv != nil && srv.State == backend.StateReady })

	other := vm
	other.UID = "u-2"
	if _, err := b.Create(ctx, other, spec); !errors.Is(err, backend.ErrRejected) {
		t.Errorf("create over another VM's pod: %v, want ErrRejected", err)
	}

	// A stop's deletion, with the grace period it asked for.
	if err := b.DeleteGracefully(ctx, vm, 7*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if d, ok := a.(interface{ GetDeleteOptions() metav1.DeleteOptions }); ok && a.GetResource().Resource == "pods" {
			if g := d.GetDeleteOptions().GracePeriodSeconds; g == nil || *g != 7 {
				t.Errorf("the pod was deleted with grace period %v, want 7s", g)
			}
		}
	}
	await(t, notified, func() bool { srv, err := b.Observe(vm); return err == nil && srv == nil })
}

// started starts a backend of cfg until the test ends, waits for its caches, and returns it
// with the channel of the VMs it notifies.
func started(t *testing.T, cfg Config) (*Backend, <-chan types.NamespacedName) {
	t.Helper()
	b := New(cfg)
	notified := make(chan types.NamespacedName, 100)
	synced, err := b.Start(t.Context(), func(vm types.NamespacedName) { notified <- vm })
	if err != nil {
		t.Fatal(err)
	}
	if !cache.WaitForCacheSync(t.Context().Done(), synced) {
		t.Fatal("not synced")
	}
	return b, notified
}

// await reads notifications until done holds after one of them. Every notification must name
// VM ns/a; when the test's deadline comes first, it fails instead of hanging.
func await(t *testing.T, notified <-chan types.NamespacedName, done func() bool) {
	t.Helper()
	deadline, ok := t.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	timeout := time.After(time.Until(deadline) - time.Second)
	for {
		select {
		case got := <-notified:
			if got != (types.NamespacedName{Namespace: "ns", Name: "a"}) {
				t.Fatalf("notified %v, want ns/a", got)
			}
			if done() {
				return
			}
		case <-timeout:
			t.Fatal("no notification brought the expected state")
		}
	}
}

// TestEcho: the informer's add of a pod exactly as Create returned it is an echo, once; any
// other version, or a pod this backend did not create, is news.
func TestEcho(t *testing.T) {
	b := New(Config{Client: kubefake.NewClientset()})
	b.created.Store("ns/p", "5")
	b.created.Store("ns/q", "7")
	pod := func(name, rv string) *cachedPod {
		return cachePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}})
	}
	steps := []struct {
		obj  any
		want bool
	}{
		{pod("p", "5"), true},
		{pod("p", "5"), false}, // once only
		{pod("q", "8"), false}, // a newer version: news, and q is forgotten
		{pod("q", "7"), false},
		{pod("r", "1"), false}, // not created here
		{cache.DeletedFinalStateUnknown{Key: "ns/p"}, false},
	}
	for i, s := range steps {
		if got := b.echo(s.obj); got != s.want {
			t.Errorf("step %d: echo = %v, want %v", i, got, s.want)
		}
	}
}

// TestBackendGet: Get reads the pod from the API server whether or not the cache has it yet,
// as Observe would show it; no pod, or another VM's, is no server.
func TestBackendGet(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	spec := backend.Spec{CPU: resource.MustParse("100m"), Memory: resource.MustParse("64Mi"), RootDisk: resource.MustParse("1Gi"), Image: "img:1"}
	pod := newPod(vm, spec)
	pod.UID, pod.Spec.NodeName = "pod-1", "n1"
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	b := New(Config{Client: kubefake.NewClientset(pod)}) // not started: its cache is empty

	if srv, err := b.Observe(vm); err != nil || srv != nil {
		t.Fatalf("Observe = %+v, %v; want nothing from an empty cache", srv, err)
	}
	srv, err := b.Get(context.Background(), vm)
	if err != nil {
		t.Fatal(err)
	}
	if srv == nil || srv.Name != PodName("a") || srv.ID != "pod-1" || srv.State != backend.StateReady || !srv.Spec.Equal(spec) {
		t.Errorf("Get = %+v, want the running pod", srv)
	}

	other := vm
	other.Name, other.UID = "b", "u-2"
	if srv, err := b.Get(context.Background(), other); err != nil || srv != nil {
		t.Errorf("Get of a VM without a pod = %+v, %v; want nil, nil", srv, err)
	}
	other.Name = "a"
	if srv, err := b.Get(context.Background(), other); err != nil || srv != nil {
		t.Errorf("Get of another VM's pod = %+v, %v; want nil, nil", srv, err)
	}
}

// TestSyncedAfterHandlers: Start's synced holds only once every pod of the initial list has
// named its VM, not when the informer has merely stored the list. While the handler holds up
// the first notification, synced stays false; once it is let through, synced follows with
// every VM notified.
func TestSyncedAfterHandlers(t *testing.T) {
	spec := backend.Spec{CPU: resource.MustParse("100m"), Memory: resource.MustParse("64Mi"), RootDisk: resource.MustParse("1Gi"), Image: "img:1"}
	var objs []k8sruntime.Object
	for _, name := range []string{"a", "b", "c"} {
		objs = append(objs, newPod(backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: name, UID: types.UID("u-" + name)}, spec))
	}
	b := New(Config{Client: kubefake.NewClientset(objs...)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	entered := make(chan struct{}, len(objs))
	release := make(chan struct{})
	notified := make(chan types.NamespacedName, len(objs))
	synced, err := b.Start(ctx, func(vm types.NamespacedName) {
		entered <- struct{}{}
		<-release
		notified <- vm
	})
	if err != nil {
		t.Fatal(err)
	}
	<-entered // the informer has the list, and its handler the first pod of it
	if synced() {
		t.Fatal("synced while the handler still holds the initial list")
	}
	close(release)
	if !cache.WaitForCacheSync(ctx.Done(), synced) {
		t.Fatal("not synced after the handler was let through")
	}
	got := map[string]bool{}
	for range objs {
		got[(<-notified).Name] = true
	}
	if len(got) != len(objs) {
		t.Errorf("notified %v, want a, b and c", got)
	}
}

// TestBackendDeleteUncached: Delete deletes vm's pod that the cache does not show (created a
// moment ago, or its label taken off), by its UID, and only vm's; a delete the API server
// forbids is a refusal (ErrRejected: the role, an admission policy), not an error to retry at
// once. Get says an owned pod without its label is one the cache never shows (Unwatched).
func TestBackendDeleteUncached(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	spec := backend.Spec{CPU: resource.MustParse("100m"), Memory: resource.MustParse("64Mi"), RootDisk: resource.MustParse("1Gi"), Image: "img:1"}
	pod := newPod(vm, spec)
	pod.UID = "pod-1"
	delete(pod.Labels, LabelVMUID)
	client := kubefake.NewClientset(pod)
	b := New(Config{Client: client}) // not started: its cache is empty
	ctx := context.Background()

	if srv, err := b.Get(ctx, vm); err != nil || srv == nil || !srv.Unwatched {
		t.Fatalf("Get = %+v, %v; want the pod, unwatched", srv, err)
	}
	other := vm
	other.UID = "u-2" // a VM of the name made again: the pod is not its
	if err := b.Delete(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("ns").Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("another VM's pod was deleted: %v", err)
	}

	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), pod.Name, errors.New("the role has no delete"))
	})
	if err := b.Delete(ctx, vm); !errors.Is(err, backend.ErrRejected) {
		t.Errorf("a forbidden delete: %v, want ErrRejected", err)
	}
	client.ReactionChain = client.ReactionChain[1:]
	if err := b.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("ns").Get(ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod the cache does not show is still there: %v", err)
	}
}
