package pods

import (
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// goneVM is the VM of the tests of LastGone, ns/a.
var goneVM = backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a",
	UID: "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"}

// runningServerPod is goneVM's server pod of UID uid, running and ready on node-a, at version rv.
func runningServerPod(uid types.UID, rv string) *corev1.Pod {
	pod := newPod(goneVM, backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), RootDisk: resource.MustParse("1G"), Image: "img"})
	pod.UID, pod.ResourceVersion, pod.Spec.NodeName = uid, rv, "node-a"
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	return pod
}

// evictedPod is pod as the eviction API leaves it for its deletion: marked DisruptionTarget
// and being deleted, at version rv.
func evictedPod(pod *corev1.Pod, rv string) *corev1.Pod {
	p := pod.DeepCopy()
	p.ResourceVersion = rv
	now := metav1.Now()
	p.DeletionTimestamp = &now
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"})
	return p
}

// watchedPods is a fake clientset whose pod watches the test drives: each Watch returns a new
// FakeWatcher, handed to the test on watchers; a List returns what list holds.
type watchedPods struct {
	client   *kubefake.Clientset
	watchers chan *watch.FakeWatcher
	mu       sync.Mutex
	list     corev1.PodList
}

func newWatchedPods(pods ...corev1.Pod) *watchedPods {
	w := &watchedPods{client: kubefake.NewClientset(), watchers: make(chan *watch.FakeWatcher, 4),
		list: corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: pods}}
	w.client.PrependWatchReactor("pods", func(clienttesting.Action) (bool, watch.Interface, error) {
		fw := watch.NewFakeWithChanSize(8, false)
		w.watchers <- fw
		return true, fw, nil
	})
	w.client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, k8sruntime.Object, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return true, w.list.DeepCopy(), nil
	})
	return w
}

// setList makes the next List return pods, at version rv.
func (w *watchedPods) setList(rv string, pods ...corev1.Pod) {
	w.mu.Lock()
	w.list = corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: pods}
	w.mu.Unlock()
}

// nextWatch is the watch the informer opened next.
func (w *watchedPods) nextWatch(t *testing.T) *watch.FakeWatcher {
	t.Helper()
	select {
	case fw := <-w.watchers:
		return fw
	case <-time.After(30 * time.Second):
		t.Fatal("the informer opened no watch")
		return nil
	}
}

// lastGone is goneVM's LastGone, as a comparable value (zero: nil).
func lastGone(b *Backend, vm backend.Owner) backend.Gone {
	if g := b.LastGone(vm); g != nil {
		return *g
	}
	return backend.Gone{}
}

// TestLastGoneDeleted: a pod the informer last saw running, whose delete event brings its
// final state marked DisruptionTarget (deleted at once after the eviction marked it: no
// update showed the mark), is gone while disrupted: LastGone reports its name, UID, node and
// disruption once the cache has dropped it, to its VM only (not to another VM of the name),
// until a new pod of the VM shows; that one, deleted undisrupted, is no eviction. Forget ends
// what is remembered.
func TestLastGoneDeleted(t *testing.T) {
	pods := newWatchedPods()
	b, notified := started(t, Config{Client: pods.client})
	fw := pods.nextWatch(t)

	first := runningServerPod("7d1b6c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f", "11")
	fw.Add(first)
	await(t, notified, func() bool { s, _ := b.Observe(goneVM); return s != nil })
	if g := b.LastGone(goneVM); g != nil {
		t.Fatalf("LastGone of a VM whose server runs: %+v", *g)
	}

	fw.Delete(evictedPod(first, "12"))
	await(t, notified, func() bool { s, _ := b.Observe(goneVM); return s == nil })
	want := backend.Gone{Name: PodName("a"), ID: string(first.UID), Node: "node-a",
		Disruption: backend.Disruption{Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}
	if got := lastGone(b, goneVM); got != want {
		t.Fatalf("LastGone after the evicted pod's delete = %+v, want %+v", got, want)
	}
	again := goneVM
	again.UID = "9e2c7d2f-6e6f-4d7b-8e8f-2b3c4d5e6f70" // a VM of the name made again
	if g := b.LastGone(again); g != nil {
		t.Errorf("LastGone of another VM of the name: %+v", *g)
	}

	second := runningServerPod("8e2c7d2f-6e6f-4d7b-8e8f-2b3c4d5e6f70", "13")
	fw.Add(second)
	await(t, notified, func() bool { s, _ := b.Observe(goneVM); return s != nil })
	if g := b.LastGone(goneVM); g != nil {
		t.Errorf("LastGone once a new server shows: %+v", *g)
	}
	fw.Delete(second)
	await(t, notified, func() bool { s, _ := b.Observe(goneVM); return s == nil })
	if g := b.LastGone(goneVM); g != nil {
		t.Errorf("LastGone of a server deleted undisrupted: %+v", *g)
	}

	third := runningServerPod("9f2c7d2f-6e6f-4d7b-8e8f-2b3c4d5e6f70", "14")
	fw.Add(third)
	await(t, notified, func() bool { s, _ := b.Observe(goneVM); return s != nil })
	fw.Delete(evictedPod(third, "15"))
	await(t, notified, func() bool { s, _ := b.Observe(goneVM); return s == nil })
	if got := lastGone(b, goneVM); got.ID != string(third.UID) {
		t.Fatalf("LastGone after the third pod's eviction = %+v", got)
	}
	b.Forget(types.NamespacedName{Namespace: "ns", Name: "a"})
	if g := b.LastGone(goneVM); g != nil {
		t.Errorf("LastGone after Forget: %+v", *g)
	}
}

// TestLastGoneBeforeItsDelete: a pod that an update showed marked DisruptionTarget is
// reported gone as soon as the cache has dropped it, before the delete handler runs: client-go
// drops it first, and a reconcile in between must not read "no server" alone.
func TestLastGoneBeforeItsDelete(t *testing.T) {
	pods := newWatchedPods()
	b, notified := started(t, Config{Client: pods.client})
	fw := pods.nextWatch(t)
	pod := runningServerPod("7d1b6c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f", "11")
	fw.Add(pod)
	await(t, notified, func() bool { s, _ := b.Observe(goneVM); return s != nil })
	fw.Modify(evictedPod(pod, "12"))
	await(t, notified, func() bool { s, _ := b.Observe(goneVM); return s != nil && s.Disruption != nil })
	if g := b.LastGone(goneVM); g != nil {
		t.Fatalf("LastGone while the evicted pod is still there: %+v", *g)
	}

	// What the informer does first on the pod's delete event: drop it from the cache.
	obj, ok, err := b.pods.GetByKey("ns/" + PodName("a"))
	if err != nil || !ok {
		t.Fatalf("the pod is not cached: %v", err)
	}
	if err := b.pods.Delete(obj); err != nil {
		t.Fatal(err)
	}
	if got := lastGone(b, goneVM); got.ID != string(pod.UID) || got.Disruption.Reason != "EvictionByEvictionAPI" {
		t.Errorf("LastGone with the pod out of the cache, its delete not handled yet = %+v", got)
	}
}

// TestLastGoneTombstone: a pod the informer last saw marked DisruptionTarget, whose deletion
// it missed (the watch broke, and the list it made again has no such pod), goes in the
// relist's tombstone, which holds the pod as last seen: gone while disrupted. A pod last seen
// undisrupted that goes the same way is not.
func TestLastGoneTombstone(t *testing.T) {
	evicted := evictedPod(runningServerPod("7d1b6c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f", "11"), "12")
	otherVM := backend.Owner{APIVersion: goneVM.APIVersion, Kind: goneVM.Kind, Namespace: "ns", Name: "b", UID: "1c7f2d2f-6e6f-4d7b-8e8f-2b3c4d5e6f70"}
	plain := newPod(otherVM, backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), RootDisk: resource.MustParse("1G"), Image: "img"})
	plain.UID, plain.ResourceVersion, plain.Spec.NodeName = "2d8f3e3f-6e6f-4d7b-8e8f-2b3c4d5e6f70", "9", "node-a"
	pods := newWatchedPods(*evicted, *plain)
	b := New(Config{Client: pods.client})
	gone := make(chan types.NamespacedName, 16)
	synced, err := b.Start(t.Context(), func(vm types.NamespacedName) { gone <- vm })
	if err != nil {
		t.Fatal(err)
	}
	fw := pods.nextWatch(t)
	for !synced() {
		time.Sleep(time.Millisecond)
	}
	if s, _ := b.Observe(goneVM); s == nil || s.Disruption == nil {
		t.Fatalf("the evicted pod is not observed as evicted: %+v", s)
	}

	// The watch expires; the list made again has neither pod.
	pods.setList("20")
	fw.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
	pods.nextWatch(t) // opened after the relist
	for {
		a, _ := b.Observe(goneVM)
		o, _ := b.Observe(otherVM)
		if a == nil && o == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	want := backend.Gone{Name: PodName("a"), ID: string(evicted.UID), Node: "node-a",
		Disruption: backend.Disruption{Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}
	if got := lastGone(b, goneVM); got != want {
		t.Errorf("LastGone after the tombstone = %+v, want %+v", got, want)
	}
	if g := b.LastGone(otherVM); g != nil {
		t.Errorf("LastGone of a pod last seen undisrupted: %+v", *g)
	}
}

// TestDeparturesBound: past maxDepartures records, the oldest goes first.
func TestDeparturesBound(t *testing.T) {
	var d departures
	pod := func(i int) *cachedPod {
		p := evictedPod(runningServerPod("", "1"), "2")
		p.Name = PodName("vm-" + strconv.Itoa(i))
		return cachePod(p)
	}
	for i := range maxDepartures + 1 {
		d.seen(pod(i))
	}
	if n := int(d.n.Load()); n != maxDepartures {
		t.Fatalf("%d records, want %d", n, maxDepartures)
	}
	if _, ok := d.record("ns", pod(0).name); ok {
		t.Error("the oldest record was kept past the bound")
	}
	if _, ok := d.record("ns", pod(maxDepartures).name); !ok {
		t.Error("the newest record was dropped")
	}
}

// TestSeenCostsNoAllocation: every pod event goes through departures.seen, so for a pod that
// is not disrupted it allocates nothing, whether records are held or not.
func TestSeenCostsNoAllocation(t *testing.T) {
	var d departures
	plain := cachePod(runningServerPod("7d1b6c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f", "11"))
	if n := testing.AllocsPerRun(100, func() { d.seen(plain) }); n != 0 {
		t.Errorf("seen allocates %v times with no record held, want 0", n)
	}
	other := evictedPod(runningServerPod("8e2c7d2f-6e6f-4d7b-8e8f-2b3c4d5e6f70", "1"), "2")
	other.Name = PodName("b")
	d.seen(cachePod(other))
	if n := testing.AllocsPerRun(100, func() { d.seen(plain) }); n != 0 {
		t.Errorf("seen allocates %v times with a record held, want 0", n)
	}
}
