package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// writes records the writes a reconciler makes, one line each: the verb, the object and,
// for a patch, its body.
type writes struct{ lines []string }

// take returns the writes recorded since the last take.
func (w *writes) take() []string {
	out := w.lines
	w.lines = nil
	return out
}

func (w *writes) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.lines = append(w.lines, fmt.Sprintf("create %T %s", obj, obj.GetName()))
			if pod, ok := obj.(*corev1.Pod); ok && pod.Status.Phase == "" {
				pod.Status.Phase = corev1.PodPending // as the API server's pod strategy sets it
			}
			return c.Create(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.lines = append(w.lines, fmt.Sprintf("delete %T %s", obj, obj.GetName()))
			return c.Delete(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.lines = append(w.lines, fmt.Sprintf("update %T %s", obj, obj.GetName()))
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			body, _ := patch.Data(obj)
			w.lines = append(w.lines, fmt.Sprintf("patch %s %s", obj.GetName(), body))
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			body, _ := patch.Data(obj)
			w.lines = append(w.lines, fmt.Sprintf("patch %s/%s %s", obj.GetName(), sub, body))
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// newFake is a fake client that knows VirtualMachines as unstructured objects with a status
// subresource, as the API server serves them, and records the writes made through it.
func newFake(t *testing.T, objs ...client.Object) (client.Client, *writes) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s.AddKnownTypeWithName(vmGVK, &unstructured.Unstructured{})
	s.AddKnownTypeWithName(vmGVK.GroupVersion().WithKind("VirtualMachineList"), &unstructured.UnstructuredList{})
	w := &writes{}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(newVM()).
		WithInterceptorFuncs(w.funcs()).Build()
	return c, w
}

func testVM(spec map[string]any) *unstructured.Unstructured {
	vm := newVM()
	vm.SetNamespace("ns")
	vm.SetName("vm-1")
	vm.SetUID("uid-1")
	vm.SetGeneration(1)
	vm.Object["spec"] = spec
	return vm
}

var activeSpec = map[string]any{"action": "active", "resource": map[string]any{"cpu": "100m", "memory": "16Mi", "rootDisk": "100Mi"}}

// clock is the reconciler's time: fixed, so that status patches can be compared whole.
var clock = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)

func newReconciler(c client.Client) *reconciler {
	return &reconciler{Client: c, image: "img", now: func() time.Time { return clock }}
}

var (
	req    = ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "vm-1"}}
	podKey = types.NamespacedName{Namespace: "ns", Name: "vm-1-server"}
	// podUID is the UID the fake client gave the pod, as it appears in a status patch.
	podUID = regexp.MustCompile(`"id":"[^"]*"`)
	// rv is a resourceVersion in a patch.
	rv = regexp.MustCompile(`"resourceVersion":"[^"]*"`)
)

// normalize replaces what the fake client makes up (UIDs, resourceVersions) in recorded writes.
func normalize(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = rv.ReplaceAllString(podUID.ReplaceAllString(l, `"id":"POD-UID"`), `"resourceVersion":"RV"`)
	}
	return out
}

func getVM(t *testing.T, c client.Client) *unstructured.Unstructured {
	t.Helper()
	vm := newVM()
	if err := c.Get(context.Background(), req.NamespacedName, vm); err != nil {
		t.Fatal(err)
	}
	return vm
}

func reconcileOnce(t *testing.T, r *reconciler) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// created is a fake client holding one VM that a first pass has taken to Creating (its
// writes taken), and the reconciler that did it.
func created(t *testing.T) (client.Client, *writes, *reconciler) {
	t.Helper()
	c, w := newFake(t, testVM(activeSpec))
	r := newReconciler(c)
	reconcileOnce(t, r)
	w.take()
	return c, w, r
}

func getPod(t *testing.T, c client.Client) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{}
	if err := c.Get(context.Background(), podKey, pod); err != nil {
		t.Fatalf("get pod: %v", err)
	}
	return pod
}

// bind places the VM's pod on node, as the scheduler does.
func bind(t *testing.T, c client.Client, node string) {
	t.Helper()
	pod := getPod(t, c)
	pod.Spec.NodeName = node
	if err := c.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

// markReady makes the VM's pod running and ready, with an address, as kwok does.
func markReady(t *testing.T, c client.Client) {
	t.Helper()
	pod := getPod(t, c)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if err := c.Status().Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

// TestLifecycle takes one VM from created to Active and through its deletion, checking the
// writes of each reconcile: vm-controller's four on the way to Active (the finalizer patch
// conditional on the resourceVersion, the pod create, status Creating, status Active), none
// when nothing changed, and on the way out status Terminating, the pod's delete and, once the
// pod is gone, the finalizer's release.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	c, w := newFake(t, testVM(activeSpec))
	r := newReconciler(c)
	const (
		creating = `patch vm-1/status {"status":{"phase":"Creating","reason":"ServerCreating","message":"Waiting for the server to start",` +
			`"server":{"name":"vm-1-server","id":"POD-UID","state":"Pending","node":null,"ip":null},"observedGeneration":1,"lastUpdateTime":"2026-11-26T09:00:00Z",` +
			`"conditions":[{"type":"Ready","status":"False","observedGeneration":1,"lastTransitionTime":"2026-11-26T09:00:00Z",` +
			`"reason":"ServerCreating","message":"Waiting for the server to start"},` +
			`{"type":"Reconciling","status":"True","observedGeneration":1,"lastTransitionTime":"2026-11-26T09:00:00Z",` +
			`"reason":"ServerCreating","message":"Waiting for the server to start"}]}}`
		active = `patch vm-1/status {"status":{"phase":"Active","reason":"ServerReady","message":"Server vm-1-server is running and ready",` +
			`"server":{"name":"vm-1-server","id":"POD-UID","state":"Running","node":"node-1","ip":"10.0.0.7"},"observedGeneration":1,"lastUpdateTime":"2026-11-26T09:00:00Z",` +
			`"conditions":[{"type":"Ready","status":"True","observedGeneration":1,"lastTransitionTime":"2026-11-26T09:00:00Z",` +
			`"reason":"ServerReady","message":"Server vm-1-server is running and ready"}]}}`
		terminating = `patch vm-1/status {"status":{"phase":"Terminating","reason":"ServerDeleting","message":"Waiting for server vm-1-server to be deleted before the VM is removed",` +
			`"server":{"name":"vm-1-server","id":"POD-UID","state":"Running","node":"node-1","ip":"10.0.0.7"},"observedGeneration":1,"lastUpdateTime":"2026-11-26T09:00:00Z",` +
			`"conditions":[{"type":"Ready","status":"False","observedGeneration":1,"lastTransitionTime":"2026-11-26T09:00:00Z",` +
			`"reason":"ServerDeleting","message":"Waiting for server vm-1-server to be deleted before the VM is removed"},` +
			`{"type":"Reconciling","status":"True","observedGeneration":1,"lastTransitionTime":"2026-11-26T09:00:00Z",` +
			`"reason":"ServerDeleting","message":"Waiting for server vm-1-server to be deleted before the VM is removed"}]}}`
	)
	step := func(name string, want ...string) {
		t.Helper()
		reconcileOnce(t, r)
		if got := normalize(w.take()); !slices.Equal(got, want) {
			t.Errorf("%s: writes\n%q\nwant\n%q", name, got, want)
		}
	}

	step("created", `patch vm-1 {"metadata":{"finalizers":["cloudnative.czs/server-cleanup"],"resourceVersion":"RV"}}`,
		"create *v1.Pod vm-1-server", creating)
	pod, vm := getPod(t, c), getVM(t, c)
	if !metav1.IsControlledBy(pod, vm) || pod.Labels[labelVMUID] != "uid-1" || pod.Labels[labelVM] != "vm-1" ||
		pod.Annotations[labelVM] != "vm-1" || pod.Annotations["cloudnative.czs/image"] != "img" ||
		!strings.HasPrefix(pod.Annotations["cloudnative.czs/resources"], "cpu=100m,memory=") || pod.Spec.Containers[0].Image != "img" ||
		pod.Spec.Containers[0].Resources.Limits.Cpu().String() != "100m" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod %+v: want owned by the VM, labelled with its UID and name, image img, cpu 100m, what it was made for annotated, never restarted", pod)
	}
	step("nothing changed")

	bind(t, c, "node-1")
	w.take() // the test's own update
	step("pod placed: its node waits for the write that Active brings")

	markReady(t, c)
	step("pod ready", active)
	step("nothing changed after Active")

	if err := c.Delete(ctx, getVM(t, c)); err != nil {
		t.Fatal(err)
	}
	w.take()
	step("deleted", terminating, "delete *v1.Pod vm-1-server")
	if err := c.Get(ctx, podKey, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pod after the VM's delete: %v, want NotFound", err)
	}
	if !controllerutil.ContainsFinalizer(getVM(t, c), finalizer) {
		t.Fatal("the finalizer went in the same pass as the pod's delete, before the pod was seen gone")
	}
	step("pod gone", `patch vm-1 {"metadata":{"finalizers":[],"resourceVersion":"RV"}}`)
	if err := c.Get(ctx, req.NamespacedName, newVM()); !apierrors.IsNotFound(err) {
		t.Errorf("VM after its pod is gone: %v, want NotFound (finalizer released)", err)
	}
}

// TestDeletedWithPodGoing: a VM deleted while its pod is already being deleted (a namespace's
// delete takes both) reports Terminating and asks for no second delete.
func TestDeletedWithPodGoing(t *testing.T) {
	ctx := context.Background()
	c, w, r := created(t)
	pod := getPod(t, c)
	// A finalizer of someone else's keeps the deleted pod visible, as a pod is until its
	// kubelet (kwok) has stopped it.
	pod.Finalizers = []string{"example.com/hold"}
	if err := c.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, getVM(t, c)); err != nil {
		t.Fatal(err)
	}
	w.take()
	reconcileOnce(t, r)
	got := w.take()
	if len(got) != 1 || !regexp.MustCompile(`^patch vm-1/status .*"phase":"Terminating"`).MatchString(got[0]) {
		t.Errorf("writes %q, want only the Terminating status", got)
	}
	reconcileOnce(t, r)
	if got := w.take(); len(got) != 0 {
		t.Errorf("writes %q on the next pass with nothing new, want none", got)
	}
}

// TestNamespaceTerminating: a pod gone before its VM's deletion, when the namespace's delete
// takes both: the create that would replace it is refused, and the VM waits for its deletion
// event instead of retrying (no error), then releases its finalizer.
func TestNamespaceTerminating(t *testing.T) {
	ctx := context.Background()
	c, w, _ := created(t)
	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm-1-server"}}); err != nil {
		t.Fatal(err)
	}
	terminating := apierrors.NewForbidden(corev1.Resource("pods"), "vm-1-server", errors.New("unable to create new content in namespace ns because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated"}}
	refusing := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return terminating
		},
	})
	w.take()
	if _, err := newReconciler(refusing).Reconcile(ctx, req); err != nil {
		t.Errorf("Reconcile with the namespace terminating: %v, want nil (no retry)", err)
	}
	if err := c.Delete(ctx, getVM(t, c)); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, newReconciler(refusing))
	if err := c.Get(ctx, req.NamespacedName, newVM()); !apierrors.IsNotFound(err) {
		t.Errorf("VM after its deletion: %v, want NotFound (finalizer released)", err)
	}
}

// TestStaleFinalizerPatch: the finalizer patch carries the resourceVersion the decision saw, so
// a decision on a stale VM fails with a conflict instead of overwriting the finalizers.
func TestStaleFinalizerPatch(t *testing.T) {
	ctx := context.Background()
	c, _ := newFake(t, testVM(activeSpec))
	stale := getVM(t, c)
	fresh := getVM(t, c)
	fresh.SetFinalizers([]string{"example.com/other"})
	if err := c.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	err := newReconciler(c).setFinalizer(ctx, stale, true)
	if !apierrors.IsConflict(err) {
		t.Fatalf("finalizer patch from a stale view: %v, want a conflict", err)
	}
	if got := getVM(t, c).GetFinalizers(); !slices.Equal(got, []string{"example.com/other"}) {
		t.Errorf("finalizers %v after the refused patch, want the other controller's kept", got)
	}
}

// TestCacheNotWritten: Reconcile never changes the objects the cache hands out. The fake
// client's Get here shares the stored maps with the caller, as the cache does with
// UnsafeDisableDeepCopy, and the objects are compared with copies taken before.
func TestCacheNotWritten(t *testing.T) {
	c, _, r := created(t)
	markReady(t, c)
	cachedVM, cachedPod := getVM(t, c), getPod(t, c)
	vmBefore, podBefore := cachedVM.DeepCopy(), cachedPod.DeepCopy()
	shared := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, _ client.WithWatch, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
			switch o := obj.(type) {
			case *unstructured.Unstructured:
				o.Object = cachedVM.Object
			case *corev1.Pod:
				*o = *cachedPod // a shallow copy: maps and slices shared
			}
			return nil
		},
	})
	r.Client = shared
	reconcileOnce(t, r) // writes Active
	if !reflect.DeepEqual(cachedVM, vmBefore) {
		t.Errorf("the cached VM was changed:\n%v\nwas\n%v", cachedVM.Object, vmBefore.Object)
	}
	if !reflect.DeepEqual(cachedPod, podBefore) {
		t.Errorf("the cached pod was changed")
	}
	if p, _, _ := unstructured.NestedString(getVM(t, c).Object, "status", "phase"); p != "Active" {
		t.Errorf("phase %q, want the pass to have written Active", p)
	}
}

// TestSpecChange: a new generation is a new status (observedGeneration), and a resource change
// replaces the pod.
func TestSpecChange(t *testing.T) {
	c, w, r := created(t)
	vm := getVM(t, c)
	_ = unstructured.SetNestedField(vm.Object, "200m", "spec", "resource", "cpu")
	vm.SetGeneration(2)
	if err := c.Update(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	w.take()
	reconcileOnce(t, r)
	got := w.take()
	if len(got) != 2 || got[0] != "delete *v1.Pod vm-1-server" ||
		!regexp.MustCompile(`"reason":"ServerReplacing".*"observedGeneration":2`).MatchString(got[1]) {
		t.Errorf("writes %q, want the pod's delete and status ServerReplacing at generation 2", got)
	}
}

// TestStatus: a status patch has exactly vm-controller's fields, and sameAs ignores only the
// times.
func TestStatus(t *testing.T) {
	vm := testVM(activeSpec)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vm-1-server", UID: "p-1"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	st := report(vm, "Creating", "ServerCreating", "Waiting for the server to start", pod, clock)
	b, err := st.patch()
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Status map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(b, &patch); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range patch.Status {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"conditions", "lastUpdateTime", "message", "observedGeneration", "phase", "reason", "server"}; !slices.Equal(keys, want) {
		t.Errorf("status patch fields %v, want %v", keys, want)
	}
	if st.sameAs(vm) {
		t.Error("a VM without status says the same as Creating")
	}
	// Stored: as the API would hold it, decoded from JSON.
	stored := testVM(activeSpec)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	stored.Object["status"] = jsonInts(m["status"])
	later := report(stored, "Creating", "ServerCreating", "Waiting for the server to start", pod, clock.Add(time.Hour))
	if !later.sameAs(stored) {
		t.Error("the same status an hour later is not the same: a reconcile would write it again")
	}
	if later.Conditions[0].LastTransitionTime != "2026-11-26T09:00:00Z" {
		t.Errorf("Ready's transition time %s, want it kept while its status stays", later.Conditions[0].LastTransitionTime)
	}
	stored.SetGeneration(2)
	if report(stored, "Creating", "ServerCreating", "Waiting for the server to start", pod, clock).sameAs(stored) {
		t.Error("a new generation is the same status: observedGeneration would stay behind")
	}
	stored.SetGeneration(1)
	placed := pod.DeepCopy()
	placed.Spec.NodeName, placed.Status.PodIP = "node-1", "10.0.0.7"
	if !report(stored, "Creating", "ServerCreating", "Waiting for the server to start", placed, clock).sameAs(stored) {
		t.Error("a Creating VM whose pod was placed is not the same: its node would cost a write of its own")
	}
	placed.Status.Phase = corev1.PodRunning
	active := report(stored, "Active", "ServerReady", "Server vm-1-server is running and ready", placed, clock)
	if b, _ := active.patch(); !regexp.MustCompile(`"node":"node-1","ip":"10.0.0.7"`).Match(b) {
		t.Errorf("Active status %s, want the pod's node and address", b)
	}
	stored.Object["status"] = jsonInts(mustJSON(t, active)["status"])
	moved := placed.DeepCopy()
	moved.Spec.NodeName = "node-2"
	if report(stored, "Active", "ServerReady", "Server vm-1-server is running and ready", moved, clock).sameAs(stored) {
		t.Error("an Active VM whose pod runs elsewhere is the same: its status would keep the old node")
	}
	readdressed := placed.DeepCopy()
	readdressed.Status.PodIP = "10.0.0.8"
	if report(stored, "Active", "ServerReady", "Server vm-1-server is running and ready", readdressed, clock).sameAs(stored) {
		t.Error("an Active VM whose pod has a new address is the same: its status would keep the old one")
	}
	// A condition whose status changes takes the time of the change.
	lost := report(stored, "Unknown", "NodeLost", "The node of server vm-1-server does not answer", placed, clock.Add(time.Hour))
	if c := lost.Conditions[0]; c.Status != "Unknown" || c.LastTransitionTime != "2026-11-26T10:00:00Z" {
		t.Errorf("Ready after its status changed %+v, want Unknown since the change", c)
	}
	gone := report(stored, "Inactive", "ServerStopped", "The VM has no server (action is inactive)", nil, clock)
	if b, _ := gone.patch(); !regexp.MustCompile(`"server":null`).Match(b) || !regexp.MustCompile(`"conditions":null`).Match(b) {
		t.Errorf("status without a server %s, want server null so that the old one goes, and no conditions (at rest)", b)
	}
	failed := report(stored, "Failed", "InvalidSpec", "Invalid spec: x", nil, clock)
	if types := condTypes(failed); !slices.Equal(types, []string{"Ready", "Stalled"}) {
		t.Errorf("Failed conditions %v, want Ready and Stalled", types)
	}
	if types := condTypes(active); !slices.Equal(types, []string{"Ready"}) {
		t.Errorf("Active conditions %v, want Ready alone", types)
	}
	// The Reconciling condition keeps its transition time while the VM stays on its way.
	creating := report(testVM(activeSpec), "Creating", "ServerCreating", "Waiting for the server to start", pod, clock)
	onWay := testVM(activeSpec)
	onWay.Object["status"] = jsonInts(mustJSON(t, creating)["status"])
	later = report(onWay, "Creating", "ServerStarting", "Server vm-1-server is running and not ready yet", placed, clock.Add(time.Minute))
	if c := later.Conditions[1]; c.Type != "Reconciling" || c.LastTransitionTime != "2026-11-26T09:00:00Z" || c.Reason != "ServerStarting" {
		t.Errorf("Reconciling later %+v, want its first transition time and the new reason", c)
	}
}

// condTypes is the types of st's conditions, in order.
func condTypes(st status) []string {
	var out []string
	for _, c := range st.Conditions {
		out = append(out, c.Type)
	}
	return out
}

// mustJSON is st's patch decoded as the API would hold it.
func mustJSON(t *testing.T, st status) map[string]any {
	t.Helper()
	b, err := st.patch()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// jsonInts turns the float64 numbers of encoding/json into int64, as the API machinery's
// decoder gives them to unstructured objects.
func jsonInts(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonInts(e)
		}
	case []any:
		for i, e := range v {
			v[i] = jsonInts(e)
		}
	case float64:
		return int64(v)
	}
	return v
}

// TestResources: quantities may be strings or numbers; anything else is an invalid spec.
func TestResources(t *testing.T) {
	vm := testVM(map[string]any{"resource": map[string]any{"cpu": int64(2), "memory": "4G", "rootDisk": "40G"}})
	res, err := resources(vm)
	if err != nil || res.Cpu().String() != "2" || res.Memory().String() != "4G" {
		t.Errorf("resources = %v, %v; want cpu 2, memory 4G", res, err)
	}
	if _, err := resources(testVM(map[string]any{"resource": map[string]any{"cpu": "two", "memory": "4G", "rootDisk": "40G"}})); err == nil {
		t.Error("cpu two: no error")
	}
}

// TestObserve maps pod states to the VM's phase and reason.
func TestObserve(t *testing.T) {
	now := metav1.Now()
	tests := map[string]struct {
		pod           corev1.PodStatus
		deleting      bool
		phase, reason string
	}{
		"just created":      {pod: corev1.PodStatus{Phase: corev1.PodPending}, phase: "Creating", reason: "ServerCreating"},
		"running not ready": {pod: corev1.PodStatus{Phase: corev1.PodRunning}, phase: "Creating", reason: "ServerStarting"},
		"ready": {pod: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
			phase: "Active", reason: "ServerReady"},
		"failed":   {pod: corev1.PodStatus{Phase: corev1.PodFailed}, phase: "Failed", reason: "ServerFailed"},
		"unknown":  {pod: corev1.PodStatus{Phase: corev1.PodUnknown}, phase: "Unknown", reason: "NodeLost"},
		"deleting": {pod: corev1.PodStatus{Phase: corev1.PodRunning}, deleting: true, phase: "Creating", reason: "ServerReplacing"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: tt.pod}
			if tt.deleting {
				pod.DeletionTimestamp = &now
			}
			if phase, reason, _ := observe(pod); phase != tt.phase || reason != tt.reason {
				t.Errorf("observe = %s/%s, want %s/%s", phase, reason, tt.phase, tt.reason)
			}
		})
	}
}
