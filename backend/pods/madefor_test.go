package pods

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// What mutating admission does to a server pod at its create, in the ways seen in clusters.
var (
	// pinDigest: Kyverno's verifyImages with mutateDigest (its default), or any policy that
	// pins an image to the digest it resolved.
	pinDigest = func(p *corev1.Pod) {
		p.Spec.Containers[0].Image += "@sha256:0b6f1c1e5d5e4c6a9d7e1a2b3c4d5e6f0b6f1c1e5d5e4c6a9d7e1a2b3c4d5e6f"
	}
	// mirror: a policy that sends every pull to a registry mirror.
	mirror = func(p *corev1.Pod) {
		p.Spec.Containers[0].Image = "mirror.example.org/library/" + p.Spec.Containers[0].Image
	}
	// roundUp: a platform that sells cpu and memory in steps and ratios (GKE Autopilot): 500m
	// and 1Gi become 1 and 2Gi, requests and limits.
	roundUp = func(p *corev1.Pod) {
		r := &p.Spec.Containers[0].Resources
		for _, l := range []corev1.ResourceList{r.Requests, r.Limits} {
			l[corev1.ResourceCPU], l[corev1.ResourceMemory] = resource.MustParse("1"), resource.MustParse("2Gi")
		}
	}
	// dropCPULimit: a policy that takes cpu limits off (no throttling).
	dropCPULimit = func(p *corev1.Pod) { delete(p.Spec.Containers[0].Resources.Limits, corev1.ResourceCPU) }
	// defaultStorage: a LimitRange with a default ephemeral-storage, which a pod on its VM's
	// disk does not set.
	defaultStorage = func(p *corev1.Pod) {
		r := &p.Spec.Containers[0].Resources
		r.Requests[corev1.ResourceEphemeralStorage], r.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi"), resource.MustParse("2Gi")
	}
)

// admittedSpec is what the VM of the tests below asks of its server.
var admittedSpec = backend.Spec{CPU: resource.MustParse("500m"), Memory: resource.MustParse("1Gi"), RootDisk: resource.MustParse("10G"), Image: "nginx:1.25"}

// kubeletReports has the kubelet report p running and ready, with the resources of its spec
// in effect in its container status.
func kubeletReports(p *corev1.Pod) {
	p.Spec.NodeName = "node-1"
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	res := p.Spec.Containers[0].Resources.DeepCopy()
	delete(res.Requests, corev1.ResourceEphemeralStorage)
	delete(res.Limits, corev1.ResourceEphemeralStorage)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, Ready: true, Resources: res,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
}

// TestServerAsMadeFor: a server pod that admission changed at its create (an image pinned to
// its digest, a mirror's registry, cpu and memory rounded up, a cpu limit dropped, a default
// ephemeral-storage) reports the spec it was made for, pending or running, with the resources
// in effect its spec's: the decision finds nothing to replace or resize. What someone changed
// after (the image by hand, a resize) reports the pod's own, as does a pod made before the
// record or whose record was edited into one that does not read. Read from the pod, from its
// cached form, and from its cached form as the watch decodes it.
func TestServerAsMadeFor(t *testing.T) {
	onDisk := admittedSpec
	onDisk.RootDisk, onDisk.Disk = resource.Quantity{}, true
	entry := func(manager, subresource, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}, Subresource: subresource}
	}
	// The managedFields as the API server writes them: the create's entry owns the image it
	// set, whatever admission made of it; kubectl set image takes it over.
	created := entry("vm-controller", "", `{"f:metadata":{"f:annotations":{}},"f:spec":{"f:containers":{"k:{\"name\":\"server\"}":{".":{},"f:image":{},"f:resources":{}}}}}`)
	setImage := entry("kubectl-set", "", `{"f:spec":{"f:containers":{"k:{\"name\":\"server\"}":{"f:image":{}}}}}`)
	setSidecarImage := entry("kubectl-set", "", `{"f:spec":{"f:containers":{"k:{\"name\":\"istio-proxy\"}":{"f:image":{}}}}}`)
	resizedByHand := entry("kubectl-patch", "resize", `{"f:spec":{"f:containers":{"k:{\"name\":\"server\"}":{"f:resources":{"f:limits":{"f:cpu":{}}}}}}}`)
	sidecarResized := entry("kubectl-patch", "resize", `{"f:spec":{"f:containers":{"k:{\"name\":\"istio-proxy\"}":{"f:resources":{"f:limits":{"f:cpu":{}}}}}}}`)
	// Changes of the spec that are no resize, each of which counts the generation up: Kueue
	// taking its scheduling gate off, kubectl debug adding an ephemeral container.
	ungated := entry("kueue-admission", "", `{"f:spec":{"f:schedulingGates":{}}}`)
	debugged := entry("kubectl-debug", "ephemeralcontainers", `{"f:spec":{"f:ephemeralContainers":{"k:{\"name\":\"debugger-x7k2p\"}":{".":{},"f:image":{},"f:name":{}}}}}`)
	// The create's entry, folded with others into ancient-changes once ten update managers
	// have written the pod.
	ancient := entry("ancient-changes", "", `{"f:metadata":{"f:labels":{"f:team":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"server\"}":{".":{},"f:image":{},"f:resources":{}}}}}`)
	status := entry("kubelet", "status", `{"f:status":{"f:phase":{},"f:containerStatuses":{}}}`)

	for name, tc := range map[string]struct {
		spec   backend.Spec          // asked
		admit  func(*corev1.Pod)     // at the create
		after  func(*corev1.Pod)     // since
		want   func(*backend.Server) // how the server differs from spec; nil: it does not
		kept   bool                  // the watch keeps a managedFields entry (or resizeMarker)
		before bool                  // a pod made before the record: none on it
	}{
		"digest pinned, pending": {spec: admittedSpec, admit: pinDigest},
		"digest pinned, running": {spec: admittedSpec, admit: pinDigest, after: kubeletReports},
		"mirrored":               {spec: admittedSpec, admit: mirror, after: kubeletReports},
		"rounded up, pending":    {spec: admittedSpec, admit: roundUp},
		"rounded up, running":    {spec: admittedSpec, admit: roundUp, after: kubeletReports},
		"cpu limit dropped":      {spec: admittedSpec, admit: dropCPULimit, after: kubeletReports},
		"all of it": {spec: admittedSpec, admit: func(p *corev1.Pod) { mirror(p); pinDigest(p); roundUp(p) }, after: func(p *corev1.Pod) {
			kubeletReports(p)
			p.ManagedFields = []metav1.ManagedFieldsEntry{created, status}
		}},
		"default storage, on its disk": {spec: onDisk, admit: defaultStorage, after: kubeletReports},

		// Changed since it was made: the pod's own.
		"image set by hand": {spec: admittedSpec, admit: pinDigest, after: func(p *corev1.Pod) {
			kubeletReports(p)
			p.Spec.Containers[0].Image, p.Generation = "nginx:1.24", 2
			p.ManagedFields = []metav1.ManagedFieldsEntry{created, status, setImage}
		}, want: func(s *backend.Server) { s.Spec.Image = "nginx:1.24" }, kept: true},
		"a sidecar's image set by hand": {spec: admittedSpec, admit: pinDigest, after: func(p *corev1.Pod) {
			kubeletReports(p)
			p.Generation = 2
			p.ManagedFields = []metav1.ManagedFieldsEntry{created, status, setSidecarImage}
		}, kept: true},
		"resized since": {spec: admittedSpec, admit: roundUp, after: func(p *corev1.Pod) {
			kubeletReports(p)
			r := &p.Spec.Containers[0].Resources
			r.Requests[corev1.ResourceCPU], r.Limits[corev1.ResourceCPU] = resource.MustParse("3"), resource.MustParse("3")
			p.Generation, p.Status.ObservedGeneration = 2, 2
			p.ManagedFields = []metav1.ManagedFieldsEntry{created, status, resizedByHand}
		}, want: func(s *backend.Server) {
			s.Spec.CPU, s.Spec.Memory = resource.MustParse("3"), resource.MustParse("2Gi")
			s.Resize = backend.Resize{State: backend.ResizePending, CPU: resource.MustParse("1"), Memory: resource.MustParse("2Gi")}
		}, kept: true},
		// Changed since, but not resized: generation 2, the cpu and memory it was made for.
		"ungated by Kueue, rounded up, pending": {spec: admittedSpec, admit: roundUp, after: func(p *corev1.Pod) {
			p.Generation = 2
			p.ManagedFields = []metav1.ManagedFieldsEntry{created, ungated}
		}},
		"debugged, rounded up, running": {spec: admittedSpec, admit: roundUp, after: func(p *corev1.Pod) {
			kubeletReports(p)
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger-x7k2p", Image: "busybox"}}}
			p.Generation, p.Status.ObservedGeneration = 2, 2
			p.ManagedFields = []metav1.ManagedFieldsEntry{created, status, debugged}
		}},
		"a sidecar resized, rounded up": {spec: admittedSpec, admit: roundUp, after: func(p *corev1.Pod) {
			kubeletReports(p)
			p.Generation, p.Status.ObservedGeneration = 2, 2
			p.ManagedFields = []metav1.ManagedFieldsEntry{created, status, sidecarResized}
		}},
		// The create's entry folded into ancient-changes is no change of the image.
		"image owned by ancient-changes": {spec: admittedSpec, admit: func(p *corev1.Pod) { mirror(p); pinDigest(p) }, after: func(p *corev1.Pod) {
			kubeletReports(p)
			p.ManagedFields = []metav1.ManagedFieldsEntry{ancient, status}
		}, kept: true},
		"resized by the controller": {spec: admittedSpec, admit: roundUp, after: func(p *corev1.Pod) {
			kubeletReports(p)
			r := &p.Spec.Containers[0].Resources
			r.Requests[corev1.ResourceCPU], r.Limits[corev1.ResourceCPU] = resource.MustParse("3"), resource.MustParse("3")
			p.Generation, p.Status.ObservedGeneration = 2, 2
			p.ManagedFields = []metav1.ManagedFieldsEntry{created, status, resizeEntry(fieldManager)}
		}, want: func(s *backend.Server) {
			s.Spec.CPU, s.Spec.Memory = resource.MustParse("3"), resource.MustParse("2Gi")
			s.Resize = backend.Resize{State: backend.ResizePending, CPU: resource.MustParse("1"), Memory: resource.MustParse("2Gi")}
		}, kept: true},
		"made before the record": {spec: admittedSpec, admit: func(p *corev1.Pod) { pinDigest(p); roundUp(p) }, before: true, want: func(s *backend.Server) {
			s.Spec.Image += "@sha256:0b6f1c1e5d5e4c6a9d7e1a2b3c4d5e6f0b6f1c1e5d5e4c6a9d7e1a2b3c4d5e6f"
			s.Spec.CPU, s.Spec.Memory = resource.MustParse("1"), resource.MustParse("2Gi")
		}},
		"cpu limit dropped, made before the record": {spec: admittedSpec, admit: dropCPULimit, before: true, after: kubeletReports},
		"a record edited": {spec: admittedSpec, admit: roundUp, after: func(p *corev1.Pod) { p.Annotations[AnnotationResources] = "cpu=1,gpu=1" },
			want: func(s *backend.Server) {
				s.Spec.CPU, s.Spec.Memory = resource.MustParse("1"), resource.MustParse("2Gi")
			}},
	} {
		t.Run(name, func(t *testing.T) {
			pod := newPod(resizeOwner, tc.spec)
			pod.UID, pod.ResourceVersion, pod.Generation = "7c433542-8907-45fe-887a-7813523dba9e", "5", 1
			tc.admit(pod)
			if tc.before {
				delete(pod.Annotations, AnnotationImage)
				delete(pod.Annotations, AnnotationResources)
			}
			if tc.after != nil {
				tc.after(pod)
			}
			want := backend.Server{Spec: tc.spec}
			if tc.want != nil {
				tc.want(&want)
			}
			d := newPodWatchDecoder(io.NopCloser(bytes.NewReader(watchStream(t, watch.Event{Type: watch.Added, Object: pod}))))
			_, obj, err := d.Decode()
			if err != nil {
				t.Fatal(err)
			}
			if kept := obj.(*corev1.Pod).ManagedFields; tc.kept != (len(kept) > 0) {
				t.Errorf("the watch kept the managedFields %+v; want them: %v", kept, tc.kept)
			}
			for name, srv := range map[string]backend.Server{"serverOf": serverOf(pod), "cached": cachePod(pod).server(),
				"watched": cachePod(obj.(*corev1.Pod)).server()} {
				if !srv.Spec.Equal(want.Spec) || srv.Spec.Image != want.Spec.Image {
					t.Errorf("%s: spec %+v, want %+v", name, srv.Spec, want.Spec)
				}
				if got := srv.Spec.Equal(tc.spec); got != (tc.want == nil) {
					t.Errorf("%s: the server is the one asked for: %v, want %v", name, got, tc.want == nil)
				}
				// In effect: what the resize reports, else the spec's.
				inEffect := func(q, spec resource.Quantity) string {
					if q.IsZero() {
						return spec.String()
					}
					return q.String()
				}
				r := srv.Resize
				got := fmt.Sprintf("%s %s/%s", r.State, inEffect(r.CPU, srv.Spec.CPU), inEffect(r.Memory, srv.Spec.Memory))
				if w := fmt.Sprintf("%s %s/%s", want.Resize.State, inEffect(want.Resize.CPU, want.Spec.CPU), inEffect(want.Resize.Memory, want.Spec.Memory)); got != w {
					t.Errorf("%s: resize %s in effect, want %s", name, got, w)
				}
				if tc.want == nil && !r.Done(srv.Spec) {
					t.Errorf("%s: resize %+v is not done: the decision would see one under way for ever", name, r)
				}
			}
		})
	}
}

// TestCreateAsMadeFor: the pod backend creates a server that admission changes (an image
// pinned to its digest, a registry mirror's, cpu and memory rounded up), and the server it
// returns, and the one the cache shows, is the one asked for; a spec that asks for another
// image, or other resources, is not.
func TestCreateAsMadeFor(t *testing.T) {
	client := fakeClient(t)
	client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pod := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod)
		mirror(pod)
		pinDigest(pod)
		roundUp(pod)
		return false, nil, nil // the create goes on, admitted
	})
	created, err := New(Config{Client: client}).Create(context.Background(), resizeOwner, admittedSpec)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := client.CoreV1().Pods(resizeOwner.Namespace).Get(context.Background(), PodName(resizeOwner.Name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pod.Spec.Containers[0].Image, "mirror.example.org/library/nginx:1.25@sha256:") {
		t.Fatalf("the admission of the test did not run: image %s", pod.Spec.Containers[0].Image)
	}
	pod.UID = "7c433542-8907-45fe-887a-7813523dba9e"
	seen, err := cachedBackend(t, client, pod).Observe(resizeOwner)
	if err != nil || seen == nil {
		t.Fatalf("observe: %+v, %v", seen, err)
	}
	for name, srv := range map[string]*backend.Server{"created": created, "observed": seen} {
		if !srv.Spec.Equal(admittedSpec) {
			t.Errorf("%s: spec %+v, want the one asked for %+v", name, srv.Spec, admittedSpec)
		}
		newImage, bigger := admittedSpec, admittedSpec
		newImage.Image, bigger.CPU = "nginx:1.26", resource.MustParse("2")
		if srv.Spec.Equal(newImage) || !backend.ResizeOnly(srv.Spec, bigger) {
			t.Errorf("%s: spec %+v is the one asked for with image nginx:1.26 too, or cannot be resized to cpu 2", name, srv.Spec)
		}
	}
}

// TestResizeAsMadeFor: a pod that admission gave more cpu and memory than it was made for is
// resized from what it was made for: to a size it does not have, it takes the resize and then
// reports its own (the resize's entry in its managedFields says it was resized). To the size
// admission gave it, it is not resized but takes that size into its record
// (AnnotationResources): it is then the server asked for, neither resized nor replaced (before,
// the resize changed nothing, was infeasible, and the server was replaced). To one that
// admission of the resize rewrites, it reports another size than asked: asked again it would
// be resized again for ever, so the resize is infeasible and the --resize policy decides. A
// resize by hand is undone by a resize to the VM's size.
func TestResizeAsMadeFor(t *testing.T) {
	size := func(cpu, memory string) backend.Spec {
		s := admittedSpec
		s.CPU, s.Memory = resource.MustParse(cpu), resource.MustParse(memory)
		return s
	}
	for name, tc := range map[string]struct {
		to         backend.Spec
		before     func(*corev1.Pod) // since the create
		admit      func(*corev1.Pod) // at the resize
		infeasible bool
		record     string // the pod's AnnotationResources after
		resizes    bool   // the pod is resized (else only its record changes)
		refused    bool   // RBAC without patch on pods
	}{
		"larger":                 {to: size("3", "4Gi"), record: "cpu=500m,memory=1Gi,ephemeral-storage=10G", resizes: true},
		"to what admission gave": {to: size("1", "2Gi"), record: "cpu=1,memory=2Gi,ephemeral-storage=10G"},
		"to what admission gave, recording refused": {to: size("1", "2Gi"), refused: true, infeasible: true},
		"rewritten by its admission":                {to: size("1500m", "2Gi"), admit: roundUp, infeasible: true},
		"undone after one by hand": {to: admittedSpec, before: func(p *corev1.Pod) {
			resized(p, "3", "2Gi")
			p.ManagedFields[len(p.ManagedFields)-1].Manager = "kubectl-patch"
		}, record: "cpu=500m,memory=1Gi,ephemeral-storage=10G", resizes: true},
	} {
		t.Run(name, func(t *testing.T) {
			pod := newPod(resizeOwner, admittedSpec)
			roundUp(pod)
			kubeletReports(pod)
			pod.UID, pod.Generation = "pod-uid", 1
			want := admittedSpec
			if tc.before != nil {
				tc.before(pod)
				want = serverOf(pod).Spec
			}
			client := fakeClient(t, pod)
			client.PrependReactor("patch", "pods", resizeReactor(client, tc.admit))
			if tc.refused {
				client.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
					if a.GetSubresource() != "" {
						return false, nil, nil
					}
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, pod.Name, errors.New("RBAC: patch pods is not granted"))
				})
			}
			b := cachedBackend(t, client, pod)
			if seen, _ := b.Observe(resizeOwner); seen == nil || !seen.Spec.Equal(want) || tc.before != nil && seen.Spec.Equal(admittedSpec) {
				t.Fatalf("observed %+v, want %+v", seen, want)
			}
			srv, err := b.Resize(context.Background(), resizeOwner, tc.to)
			if tc.infeasible {
				if !errors.Is(err, backend.ErrResizeInfeasible) || !strings.Contains(err.Error(), "which admission gave it") {
					t.Fatalf("resize: %+v, %v; want infeasible", srv, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !srv.Spec.Equal(tc.to) {
				t.Errorf("resized: spec %+v, want %+v", srv.Spec, tc.to)
			}
			stored, err := client.CoreV1().Pods(resizeOwner.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := stored.Annotations[AnnotationResources]; got != tc.record {
				t.Errorf("record %q, want %q", got, tc.record)
			}
			// The pod as the cache then shows it, the resize's entry in its managedFields where
			// the API server writes one (the fake's tracker keeps none).
			stored.ManagedFields = pod.ManagedFields
			if tc.resizes {
				stored.ManagedFields = append(stored.ManagedFields, resizeEntry(fieldManager))
			}
			// The API server counts the generation up on a change of the spec, a resize.
			if resized := stored.Generation > pod.Generation; resized != tc.resizes {
				t.Errorf("generation %d after %d: resized %v, want %v", stored.Generation, pod.Generation, resized, tc.resizes)
			}
			if again := serverOf(stored); !again.Spec.Equal(tc.to) {
				t.Errorf("read again: spec %+v, want %+v", again.Spec, tc.to)
			}
		})
	}
}
