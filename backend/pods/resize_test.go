package pods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
)

var resizeOwner = backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "vm", UID: "vm-uid"}

// runningPod is the server pod of resizeOwner as a kubelet reports it: running, ready, with
// the resources in effect in its container status.
func runningPod(cpu, memory string) *corev1.Pod {
	spec := backend.Spec{CPU: resource.MustParse(cpu), Memory: resource.MustParse(memory), RootDisk: resource.MustParse("40G"), Image: "img:1"}
	p := newPod(resizeOwner, spec)
	p.UID, p.Generation = "pod-uid", 1
	p.Spec.NodeName = "node-1"
	p.Status.Phase = corev1.PodRunning
	p.Status.ObservedGeneration = 1
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	res := p.Spec.Containers[0].Resources.DeepCopy()
	delete(res.Requests, corev1.ResourceEphemeralStorage)
	delete(res.Limits, corev1.ResourceEphemeralStorage)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, Ready: true, Resources: res,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	return p
}

func withCondition(p *corev1.Pod, c corev1.PodCondition) *corev1.Pod {
	c.Status = corev1.ConditionTrue
	p.Status.Conditions = append(p.Status.Conditions, c)
	return p
}

// resized is p after the API server took the controller's resize to cpu and memory, before
// the kubelet acts.
func resized(p *corev1.Pod, cpu, memory string) *corev1.Pod {
	c := &p.Spec.Containers[0]
	for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		l[corev1.ResourceCPU], l[corev1.ResourceMemory] = resource.MustParse(cpu), resource.MustParse(memory)
	}
	p.Generation++
	p.ManagedFields = append(p.ManagedFields, resizeEntry(fieldManager))
	return p
}

// resizeEntry is the managedFields entry the API server writes for a resize by manager that
// changes the server container's cpu and memory.
func resizeEntry(manager string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		FieldsType: "FieldsV1", Subresource: resizeSubresource, FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:spec":{"f:containers":{"k:{\"name\":\"server\"}":{"f:resources":{"f:limits":{"f:cpu":{},"f:memory":{}},"f:requests":{"f:cpu":{},"f:memory":{}}}}}}}`)}}
}

func TestResizeOf(t *testing.T) {
	tests := map[string]struct {
		pod  *corev1.Pod
		want string // state/message/cpu/memory
	}{
		"steady": {runningPod("2", "4G"), "//2/4G"},
		"cpu in millicores": {func() *corev1.Pod {
			p := resized(runningPod("2", "4G"), "2000m", "4G")
			p.Generation-- // the API server counts only semantic changes
			return p
		}(), "//2/4G"},
		"asked, not taken up":   {resized(runningPod("2", "4G"), "3", "4G"), "Pending//2/4G"},
		"memory asked":          {resized(runningPod("2", "4G"), "2", "8G"), "Pending//2/4G"},
		"in progress":           {withCondition(resized(runningPod("2", "4G"), "3", "4G"), corev1.PodCondition{Type: corev1.PodResizeInProgress, ObservedGeneration: 2}), "InProgress//2/4G"},
		"in progress, failing":  {withCondition(resized(runningPod("2", "4G"), "2", "1G"), corev1.PodCondition{Type: corev1.PodResizeInProgress, Reason: corev1.PodReasonError, Message: "cannot decrease memory limits"}), "InProgress/cannot decrease memory limits/2/4G"},
		"error without message": {withCondition(resized(runningPod("2", "4G"), "2", "1G"), corev1.PodCondition{Type: corev1.PodResizeInProgress, Reason: corev1.PodReasonError}), "InProgress/Error/2/4G"},
		"deferred":              {withCondition(resized(runningPod("2", "4G"), "3", "4G"), corev1.PodCondition{Type: corev1.PodResizePending, Reason: corev1.PodReasonDeferred, Message: "Node didn't have enough resource: cpu", ObservedGeneration: 2}), "Deferred/Node didn't have enough resource: cpu/2/4G"},
		"infeasible":            {withCondition(resized(runningPod("2", "4G"), "64", "4G"), corev1.PodCondition{Type: corev1.PodResizePending, Reason: corev1.PodReasonInfeasible, Message: "too big", ObservedGeneration: 2}), "Infeasible/too big/2/4G"},
		"other pending reason":  {withCondition(resized(runningPod("2", "4G"), "3", "4G"), corev1.PodCondition{Type: corev1.PodResizePending, Reason: "OutOfcpu"}), "Deferred//2/4G"},
		// Infeasible answered generation 2; generation 3 asks again and is not answered yet.
		"infeasible, asked again": {withCondition(resized(resized(runningPod("2", "4G"), "64", "4G"), "3", "4G"), corev1.PodCondition{Type: corev1.PodResizePending, Reason: corev1.PodReasonInfeasible, ObservedGeneration: 2}), "Pending//2/4G"},
		"pending during progress": {withCondition(withCondition(resized(runningPod("2", "4G"), "3", "4G"), corev1.PodCondition{Type: corev1.PodResizeInProgress}),
			corev1.PodCondition{Type: corev1.PodResizePending, Reason: corev1.PodReasonDeferred, ObservedGeneration: 3}), "Deferred//2/4G"},
		"condition False is none": {func() *corev1.Pod {
			p := runningPod("2", "4G")
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionFalse, Reason: corev1.PodReasonInfeasible})
			return p
		}(), "//2/4G"},
		"kubelet has not seen the spec": {func() *corev1.Pod {
			p := resized(runningPod("2", "4G"), "2", "4G") // back to what is in effect
			return p
		}(), "Pending//2/4G"},
		"no status resources": {func() *corev1.Pod {
			p := resized(runningPod("2", "4G"), "3", "4G")
			p.Status.ContainerStatuses[0].Resources = nil
			p.Status.ObservedGeneration = 0
			return p
		}(), "///"},
		"finished": {func() *corev1.Pod {
			p := withCondition(resized(runningPod("2", "4G"), "3", "4G"), corev1.PodCondition{Type: corev1.PodResizeInProgress})
			p.Status.Phase = corev1.PodFailed
			return p
		}(), "///"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := resizeOf(tc.pod)
			got := fmt.Sprintf("%s/%s/%s/%s", r.State, r.Message, nonZero(r.CPU), nonZero(r.Memory))
			if got != tc.want {
				t.Errorf("resize %s, want %s", got, tc.want)
			}
		})
	}
}

func nonZero(q resource.Quantity) string {
	if q.IsZero() {
		return ""
	}
	return q.String()
}

// resizingAPIServer makes client answer PATCH pods/resize as the API server does: a strategic
// merge patch applied to the typed pod, the pod's UID immutable, the generation counted up
// when the spec changed.
// refuse, when not nil, answers instead.
func resizingAPIServer(t *testing.T, client *kubefake.Clientset, refuse error) {
	if refuse != nil {
		client.PrependReactor("patch", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
			if action.(clienttesting.PatchAction).GetSubresource() != resizeSubresource {
				return false, nil, nil
			}
			return true, nil, refuse
		})
		return
	}
	client.PrependReactor("patch", "pods", resizeReactor(client, nil))
}

// resizeReactor answers PATCH pods/resize as resizingAPIServer says, with admit, when not
// nil, run on the patched pod as a mutating admission of the subresource would; the
// generation counts only a change of the spec, as the API server's does.
func resizeReactor(client *kubefake.Clientset, admit func(*corev1.Pod)) clienttesting.ReactionFunc {
	return func(action clienttesting.Action) (bool, runtime.Object, error) {
		patch := action.(clienttesting.PatchAction)
		if patch.GetSubresource() != resizeSubresource {
			return false, nil, nil
		}
		obj, err := client.Tracker().Get(podsGVR, patch.GetNamespace(), patch.GetName())
		if err != nil {
			return true, nil, err
		}
		old, err := json.Marshal(obj)
		if err != nil {
			return true, nil, err
		}
		merged, err := strategicpatch.StrategicMergePatch(old, patch.GetPatch(), corev1.Pod{})
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		var before, after corev1.Pod
		if err := json.Unmarshal(old, &before); err != nil {
			return true, nil, err
		}
		if err := json.Unmarshal(merged, &after); err != nil {
			return true, nil, err
		}
		if after.UID != before.UID {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, before.Name,
				field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), after.UID, "field is immutable")})
		}
		if admit != nil {
			admit(&after)
		}
		changed := !apiequality.Semantic.DeepEqual(before.Spec, after.Spec)
		if changed {
			after.Generation++
		}
		// The fake's tracker keeps managedFields of its own (no subresource's): the pod
		// returned has the API server's, the fields a resize changes moved to the entry of
		// its manager and the subresource.
		if err := client.Tracker().Update(podsGVR, after.DeepCopy(), patch.GetNamespace()); err != nil {
			return true, nil, err
		}
		after.ManagedFields = before.ManagedFields
		if changed {
			after.ManagedFields = append(after.ManagedFields, resizeEntry(patch.(clienttesting.PatchActionImpl).GetPatchOptions().FieldManager))
		}
		return true, &after, nil
	}
}

// cachedBackend is a pod backend over client whose cache holds pods, as its informer would
// have them (the informer itself is not run: the test decides what the cache shows).
func cachedBackend(t *testing.T, client *kubefake.Clientset, pods ...*corev1.Pod) *Backend {
	t.Helper()
	b := New(Config{Client: client})
	for _, p := range pods {
		if err := b.pods.Add(cachePod(p)); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func fakeClient(t *testing.T, pods ...*corev1.Pod) *kubefake.Clientset {
	t.Helper()
	var objs []runtime.Object
	for _, p := range pods {
		objs = append(objs, p.DeepCopy())
	}
	return kubefake.NewClientset(objs...)
}

// podsGVR is where the fake's tracker keeps pods.
var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// TestResizePatch checks the one request a resize makes: a strategic merge patch of the
// resize subresource that names the pod's UID and sets the server container's cpu and memory,
// requests equal to limits; and what the API server makes of it: the rest of the pod as it
// was, the new size pending until the kubelet takes it up.
func TestResizePatch(t *testing.T) {
	client := fakeClient(t, runningPod("2", "4G"))
	resizingAPIServer(t, client, nil)
	b := cachedBackend(t, client, runningPod("2", "4G"))
	want := backend.Spec{CPU: resource.MustParse("3"), Memory: resource.MustParse("8G"), RootDisk: resource.MustParse("40G"), Image: "img:1"}

	srv, err := b.Resize(context.Background(), resizeOwner, want)
	if err != nil {
		t.Fatal(err)
	}
	var patches []clienttesting.PatchAction
	for _, a := range client.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok {
			patches = append(patches, p)
		}
	}
	if len(patches) != 1 {
		t.Fatalf("%d patches, want 1: %v", len(patches), client.Actions())
	}
	p := patches[0]
	if p.GetSubresource() != "resize" || p.GetPatchType() != types.StrategicMergePatchType || p.GetName() != "vm-server" || p.GetNamespace() != "ns" {
		t.Errorf("patch of %s/%s subresource %q type %s, want ns/vm-server resize strategic", p.GetNamespace(), p.GetName(), p.GetSubresource(), p.GetPatchType())
	}
	const body = `{"metadata":{"uid":"pod-uid"},"spec":{"containers":[{"name":"server","resources":{"limits":{"cpu":"3","memory":"8G"},"requests":{"cpu":"3","memory":"8G"}}}]}}`
	if string(p.GetPatch()) != body {
		t.Errorf("patch\n%s\nwant\n%s", p.GetPatch(), body)
	}

	if srv.ID != "pod-uid" || srv.Name != "vm-server" {
		t.Errorf("server %s %s, want the same pod", srv.Name, srv.ID)
	}
	if !srv.Spec.Equal(want) {
		t.Errorf("spec %+v, want %+v (root disk and image kept)", srv.Spec, want)
	}
	if srv.Resize.State != backend.ResizePending || srv.Resize.CPU.String() != "2" || srv.Resize.Memory.String() != "4G" {
		t.Errorf("resize %+v, want Pending with 2/4G in effect", srv.Resize)
	}
	obj, err := client.Tracker().Get(podsGVR, "ns", "vm-server")
	if err != nil {
		t.Fatal(err)
	}
	stored := obj.(*corev1.Pod)
	c := stored.Spec.Containers[0]
	if q := c.Resources.Limits[corev1.ResourceEphemeralStorage]; q.String() != "40G" || c.Image != "img:1" {
		t.Errorf("stored container lost its root disk (%s) or image (%s)", q.String(), c.Image)
	}
	if req, lim := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Limits[corev1.ResourceCPU]; req.String() != "3" || lim.String() != "3" {
		t.Errorf("stored cpu requests %s limits %s, want 3 and 3", req.String(), lim.String())
	}
}

// TestResizeRefused sorts the API server's answers into infeasible (the fallback policy
// applies) and transient (retried), and checks that what cannot be resized is never sent.
func TestResizeRefused(t *testing.T) {
	podGR := schema.GroupResource{Resource: "pods"}
	forbidden := func(cause metav1.CauseType) error {
		err := apierrors.NewForbidden(podGR, "vm-server", errors.New("node didn't have enough allocatable resources: cpu, requested: 64000, allocatable: 8000"))
		if cause != "" {
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: cause})
		}
		return err
	}
	invalid := func(path *field.Path, msg string) error {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "vm-server", field.ErrorList{field.Forbidden(path, msg)})
	}
	spec := backend.Spec{CPU: resource.MustParse("64"), Memory: resource.MustParse("4G"), RootDisk: resource.MustParse("40G"), Image: "img:1"}
	tests := map[string]struct {
		pods       []*corev1.Pod
		spec       backend.Spec
		answer     error
		infeasible bool
		sent       bool // a PATCH was made
	}{
		"node capacity":        {[]*corev1.Pod{runningPod("2", "4G")}, spec, forbidden(causeNodeCapacity), true, true},
		"unsupported platform": {[]*corev1.Pod{runningPod("2", "4G")}, spec, forbidden(causeUnsupportedPlatform), true, true},
		"no permission":        {[]*corev1.Pod{runningPod("2", "4G")}, spec, forbidden(""), false, true},
		"validation":           {[]*corev1.Pod{runningPod("2", "4G")}, spec, invalid(field.NewPath("spec"), "Pod running on node without support for resize"), true, true},
		"pod replaced":         {[]*corev1.Pod{runningPod("2", "4G")}, spec, invalid(field.NewPath("metadata", "uid"), "field is immutable"), false, true},
		"pod gone":             {[]*corev1.Pod{runningPod("2", "4G")}, spec, apierrors.NewNotFound(podGR, "vm-server"), false, true},
		"no subresource":       {[]*corev1.Pod{runningPod("2", "4G")}, spec, apierrors.NewNotFound(schema.GroupResource{}, ""), true, true},
		"conflict":             {[]*corev1.Pod{runningPod("2", "4G")}, spec, apierrors.NewConflict(podGR, "vm-server", errors.New("changed")), false, true},
		"root disk":            {[]*corev1.Pod{runningPod("2", "4G")}, backend.Spec{CPU: spec.CPU, Memory: spec.Memory, RootDisk: resource.MustParse("80G"), Image: "img:1"}, nil, true, false},
		"image":                {[]*corev1.Pod{runningPod("2", "4G")}, backend.Spec{CPU: spec.CPU, Memory: spec.Memory, RootDisk: spec.RootDisk, Image: "img:2"}, nil, true, false},
		"no pod":               {nil, spec, nil, false, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := fakeClient(t, tc.pods...)
			resizingAPIServer(t, client, tc.answer)
			b := cachedBackend(t, client, tc.pods...)
			_, err := b.Resize(context.Background(), resizeOwner, tc.spec)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, backend.ErrResizeInfeasible); got != tc.infeasible {
				t.Errorf("infeasible %v, want %v: %v", got, tc.infeasible, err)
			}
			sent := false
			for _, a := range client.Actions() {
				sent = sent || a.GetVerb() == "patch"
			}
			if sent != tc.sent {
				t.Errorf("patch sent %v, want %v", sent, tc.sent)
			}
		})
	}
}

// TestResizeAskedAlready: a resize to the size the pod already asks for sends nothing.
func TestResizeAskedAlready(t *testing.T) {
	pod := resized(runningPod("2", "4G"), "3", "4G")
	client := fakeClient(t, pod)
	resizingAPIServer(t, client, nil)
	b := cachedBackend(t, client, pod)
	srv, err := b.Resize(context.Background(), resizeOwner, backend.Spec{CPU: resource.MustParse("3"), Memory: resource.MustParse("4G"), RootDisk: resource.MustParse("40G"), Image: "img:1"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("%d requests, want none: %v", n, client.Actions())
	}
	if srv.ID != "pod-uid" || srv.Spec.CPU.String() != "3" {
		t.Errorf("server %s with cpu %s, want the cached pod-uid with 3", srv.ID, srv.Spec.CPU.String())
	}
}

// TestResizeOtherPod: the cache still shows a pod that has since been replaced by one of the
// same name; the patch names the old pod's UID, so the new pod is left alone.
func TestResizeOtherPod(t *testing.T) {
	newer := runningPod("2", "4G")
	newer.UID = "pod-uid-2"
	client := fakeClient(t, newer)
	resizingAPIServer(t, client, nil)
	b := cachedBackend(t, client, runningPod("2", "4G"))
	_, err := b.Resize(context.Background(), resizeOwner, backend.Spec{CPU: resource.MustParse("3"), Memory: resource.MustParse("4G"), RootDisk: resource.MustParse("40G"), Image: "img:1"})
	if err == nil || errors.Is(err, backend.ErrResizeInfeasible) {
		t.Fatalf("error %v, want a transient error", err)
	}
	obj, err := client.Tracker().Get(podsGVR, "ns", "vm-server")
	if err != nil {
		t.Fatal(err)
	}
	stored := obj.(*corev1.Pod)
	if cpu := stored.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; stored.UID != "pod-uid-2" || cpu.String() != "2" {
		t.Errorf("the newer pod %s was changed: cpu %s", stored.UID, cpu.String())
	}
}

// TestResizeUnwatched: a pod whose label LabelVMUID was taken off is never in the cache, and
// the controller decides on it as Get reads it (Unwatched); Resize reads it the same way and
// resizes it by its UID. The read is made only when the cache shows no pod: a cached pod costs
// the patch alone. A pod that is neither cached nor found, one that is only not in the cache
// yet (labelled: the controller waits for the cache), and another VM's are not resized.
func TestResizeUnwatched(t *testing.T) {
	unlabelled := func(owner types.UID) *corev1.Pod {
		p := runningPod("2", "4G")
		delete(p.Labels, LabelVMUID)
		p.OwnerReferences[0].UID = owner
		return p
	}
	tests := map[string]struct {
		stored *corev1.Pod // on the API server
		cached *corev1.Pod // in the cache
		ok     bool
		verbs  string // the requests made
	}{
		"unlabelled":        {stored: unlabelled(resizeOwner.UID), ok: true, verbs: "get patch"},
		"cached":            {stored: runningPod("2", "4G"), cached: runningPod("2", "4G"), ok: true, verbs: "patch"},
		"none":              {verbs: "get"},
		"not in the cache":  {stored: runningPod("2", "4G"), verbs: "get"},
		"another VM's, too": {stored: unlabelled("other-vm-uid"), verbs: "get"},
	}
	want := backend.Spec{CPU: resource.MustParse("3"), Memory: resource.MustParse("8G"), RootDisk: resource.MustParse("40G"), Image: "img:1"}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stored, cached []*corev1.Pod
			if tc.stored != nil {
				stored = append(stored, tc.stored)
			}
			if tc.cached != nil {
				cached = append(cached, tc.cached)
			}
			client := fakeClient(t, stored...)
			resizingAPIServer(t, client, nil)
			b := cachedBackend(t, client, cached...)

			srv, err := b.Resize(context.Background(), resizeOwner, want)
			var verbs []string
			for _, a := range client.Actions() {
				verbs = append(verbs, a.GetVerb())
			}
			if got := strings.Join(verbs, " "); got != tc.verbs {
				t.Errorf("requests %q, want %q", got, tc.verbs)
			}
			if !tc.ok {
				if err == nil || errors.Is(err, backend.ErrResizeInfeasible) || !strings.Contains(err.Error(), "no server pod to resize") {
					t.Fatalf("error %v, want no server pod to resize (retried)", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if srv.ID != "pod-uid" || !srv.Spec.Equal(want) || srv.Resize.State != backend.ResizePending {
				t.Errorf("server %s with spec %+v, resize %+v: want pod-uid at 3/8G, pending", srv.ID, srv.Spec, srv.Resize)
			}
			for _, a := range client.Actions() {
				if p, ok := a.(clienttesting.PatchAction); ok && !strings.Contains(string(p.GetPatch()), `"uid":"pod-uid"`) {
					t.Errorf("patch %s does not name the pod's UID", p.GetPatch())
				}
			}
			obj, err := client.Tracker().Get(podsGVR, "ns", "vm-server")
			if err != nil {
				t.Fatal(err)
			}
			if cpu := obj.(*corev1.Pod).Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; cpu.String() != "3" {
				t.Errorf("stored cpu %s, want 3", cpu.String())
			}
		})
	}
}
