package pods

import (
	"bytes"
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// What a server pod was made for, kept on the pod beside what admission made of it.
//
// The decision compares the spec a VM asks for with the spec its server reports, and replaces
// (or resizes) a server whose spec differs. Mutating admission changes a pod at its create in
// ways that change nothing of what was asked: a policy that pins an image to its digest
// (Kyverno's verifyImages with mutateDigest turns nginx:1.25 into nginx:1.25@sha256:...), one
// that rewrites the registry to a mirror, one that rounds cpu and memory up to the sizes its
// platform sells (GKE Autopilot), or drops cpu limits. Read back from the pod, such a server
// would differ from its VM for ever, and so would every server made for it: a pending one is
// replaced at once under every --resize policy, a running one resized for nothing. So the pod
// carries what it was made for (AnnotationImage, AnnotationResources), as it carries its
// placement (AnnotationPlacement), and the server reports that, where it is still the truth:
//
//   - the image: the one asked for, unless someone changed the container's image after the
//     pod was made (imageChanged): the VM's image is then not what runs, and a new server
//     puts it back, as it did before the record;
//   - cpu and memory: the ones asked for unless the pod was resized since it was made
//     (resizedSince); after that, the pod's own. A pod's resources change after its create
//     only through its resize subresource (pods/resize, Kubernetes 1.33+); the rest of its
//     spec changing (a scheduling gate taken off by Kueue, an ephemeral container of kubectl
//     debug, a toleration patched) says nothing of them, though it counts
//     metadata.generation up as a resize does. A resize is the controller's own or someone's
//     by hand: the controller's asks for the VM's cpu and memory and is not rewritten by
//     admission (a webhook for pods does not see the subresource unless it names it; Resize
//     refuses a resize it sees rewritten, ErrResizeInfeasible), and one by hand is to be
//     undone. The annotation cannot follow a resize: the subresource changes nothing but
//     resources. A VM set to the very cpu and memory admission gave its pod needs no resize:
//     Resize writes them into the annotation instead (recordResources);
//   - the root disk of its own (ephemeral-storage): the one asked for; no resize changes it.
//
// A pod made before the record has none, and reports its own, as before.

// Annotations on every server pod the backend makes.
const (
	// AnnotationImage is the image the server was made for: the VM's, or --server-image.
	AnnotationImage = "cloudnative.czs/image"
	// AnnotationResources is the cpu and memory the server was made for, and its root disk of
	// its own where it has one, as pod resource names and quantities in kubectl set
	// resources' form: "cpu=2,memory=4G" or "cpu=2,memory=4G,ephemeral-storage=40G".
	AnnotationResources = "cloudnative.czs/resources"
)

// madeFor writes spec's image and resources into pod's annotations (newPod).
func madeFor(pod *corev1.Pod, spec backend.Spec) {
	pod.Annotations[AnnotationImage] = spec.Image
	var rootDisk *resource.Quantity
	if !spec.Disk {
		rootDisk = &spec.RootDisk
	}
	pod.Annotations[AnnotationResources] = resourcesText(spec.CPU, spec.Memory, rootDisk)
}

// resourcesText is AnnotationResources for cpu and memory, and a root disk of its own unless
// rootDisk is nil.
func resourcesText(cpu, memory resource.Quantity, rootDisk *resource.Quantity) string {
	text := "cpu=" + cpu.String() + ",memory=" + memory.String()
	if rootDisk != nil {
		text += ",ephemeral-storage=" + rootDisk.String()
	}
	return text
}

// madeResources are the resources a pod was made for (AnnotationResources).
type madeResources struct {
	cpu, memory, rootDisk resource.Quantity
}

// resourcesOf reads AnnotationResources; ok is false when the pod has none, or one that does
// not read (someone edited it): the pod's own resources are then the server's, as for a pod
// made before the annotation. A name other than cpu, memory and ephemeral-storage, one named
// twice, or cpu or memory missing, is one that does not read.
func resourcesOf(text string) (r madeResources, ok bool) {
	if text == "" {
		return madeResources{}, false
	}
	var seen [3]bool
	for item := range strings.SplitSeq(text, ",") {
		name, value, found := strings.Cut(item, "=")
		if !found {
			return madeResources{}, false
		}
		var i int
		var q *resource.Quantity
		switch corev1.ResourceName(name) {
		case corev1.ResourceCPU:
			i, q = 0, &r.cpu
		case corev1.ResourceMemory:
			i, q = 1, &r.memory
		case corev1.ResourceEphemeralStorage:
			i, q = 2, &r.rootDisk
		default:
			return madeResources{}, false
		}
		v, err := resource.ParseQuantity(value)
		if err != nil || seen[i] {
			return madeResources{}, false
		}
		*q, seen[i] = v, true
	}
	return r, seen[0] && seen[1]
}

// resizeMarker is what the watch decoder keeps of the managedFields of a pod resized since it
// was made (resizedSince), in place of the entries themselves: one entry of the resize that
// owns the server container's resources, shared by every such pod, which nothing modifies.
var resizeMarker = metav1.ManagedFieldsEntry{Subresource: resizeSubresource, FieldsType: "FieldsV1",
	FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:containers":{"` + strings.ReplaceAll(serverContainerKey, `"`, `\"`) + `":{"f:resources":{}}}}}`)}}

// resizedSince reports whether the server container's resources were changed since the pod
// was made: an entry of the resize subresource (anyone's, the controller's own included) owns
// them in managedFields. The API server records the fields a resize changes under its
// manager and the subresource, and nothing else changes a pod's resources after its create.
// A resize that changed nothing (to the resources the pod has) records nothing, and the
// create's entry owns the resources admission rounded, whatever they are.
//
// What it cannot tell: a resize whose entry the API server folded into ancient-changes (it
// keeps ten update managers, and folds the oldest past them into one entry without a
// subresource) reads as none. The annotation is then read where the pod's own would be;
// the VM's resize to its own cpu and memory changes nothing of the pod and writes them into
// the annotation instead (Resize): the server is then its VM's again, neither replaced nor
// rebooted on a guess. A pod without managedFields reads as not resized.
func resizedSince(managed []metav1.ManagedFieldsEntry) bool {
	for i := range managed {
		e := &managed[i]
		if e.Subresource == resizeSubresource && e.FieldsV1 != nil && bytes.Contains(e.FieldsV1.Raw, fieldResources) &&
			ownsServerResources(e.FieldsV1.Raw) {
			return true
		}
	}
	return false
}

// asMadeFor puts into s, the server read from pod's own fields, what pod was made for, where
// that is the truth (the comment at the top of this file says where): the image of
// AnnotationImage, the cpu and memory of AnnotationResources, and its root disk. The cpu and
// memory in effect (s.Resize) that are the pod's own, which is what admission gave for what
// was asked, read as what was asked, so that the server runs with its spec and no resize
// seems under way.
func asMadeFor(s *backend.Server, pod *corev1.Pod) {
	if image := pod.Annotations[AnnotationImage]; image != "" && !imageChanged(pod.ManagedFields) {
		s.Spec.Image = image
	}
	made, ok := resourcesOf(pod.Annotations[AnnotationResources])
	if !ok {
		return
	}
	s.Spec.RootDisk = made.rootDisk
	if resizedSince(pod.ManagedFields) {
		return
	}
	if !s.Resize.CPU.IsZero() && s.Resize.CPU.Cmp(s.Spec.CPU) == 0 {
		s.Resize.CPU = made.cpu
	}
	if !s.Resize.Memory.IsZero() && s.Resize.Memory.Cmp(s.Spec.Memory) == 0 {
		s.Resize.Memory = made.memory
	}
	s.Spec.CPU, s.Spec.Memory = made.cpu, made.memory
}

// fieldImage and fieldResources are how a pod's managedFields name a container's image and
// resources (FieldsV1).
var (
	fieldImage     = []byte(`"f:image"`)
	fieldResources = []byte(`"f:resources"`)
)

// ancientChanges is the manager under which the API server folds the oldest update entries of
// managedFields past the ten it keeps (the field managers' ancient-changes bucket): the
// controller's own create among them, once ten others have written the pod. Its fields are no
// evidence of anyone's change (imageChanged, tolerationsChanged).
const ancientChanges = "ancient-changes"

// serverContainerKey is how a pod's managedFields name the server container in
// spec.containers, a list keyed by name.
const serverContainerKey = `k:{"name":"` + ContainerName + `"}`

// imageChanged reports whether someone other than the controller changed the server
// container's image after the pod was made: a field manager other than the controller's
// owns spec.containers[name=server].image, in an entry of the pod itself. A pod's image can
// be changed in place (kubectl set image, kubectl edit), and the kubelet then runs the new
// one: the image the pod was made for is not the server's any more.
//
// Why that tells: the API server computes a create's managedFields before mutating admission
// runs (tolerationsChanged says more), so the image admission rewrites at the create (a digest
// pinned, a mirror's registry) is owned by the controller's entry, which set it. An update
// that changes it moves it to the updater's manager; one that admission rewrites at an update
// is not seen, nor a change by a client that names itself vm-controller; a pod without
// managedFields reads as not changed, and so does an image owned by ancientChanges, which may
// be the create's entry folded in: a changed image replaces the server, so a guess keeps it.
func imageChanged(managed []metav1.ManagedFieldsEntry) bool {
	for i := range managed {
		e := &managed[i]
		if e.Manager != fieldManager && e.Manager != ancientChanges && e.Subresource == "" && e.FieldsV1 != nil && bytes.Contains(e.FieldsV1.Raw, fieldImage) &&
			ownsServerImage(e.FieldsV1.Raw) {
			return true
		}
	}
	return false
}

// ownsServerImage reports whether fields, a managedFields entry's FieldsV1, name the server
// container's image; fields that do not read name nothing.
func ownsServerImage(fields []byte) bool {
	var f struct {
		Spec struct {
			Containers map[string]struct {
				Image *struct{} `json:"f:image"`
			} `json:"f:containers"`
		} `json:"f:spec"`
	}
	if json.Unmarshal(fields, &f) != nil {
		return false
	}
	return f.Spec.Containers[serverContainerKey].Image != nil
}

// ownsServerResources reports whether fields, a managedFields entry's FieldsV1, name the
// server container's resources; fields that do not read name nothing.
func ownsServerResources(fields []byte) bool {
	var f struct {
		Spec struct {
			Containers map[string]struct {
				Resources *struct{} `json:"f:resources"`
			} `json:"f:containers"`
		} `json:"f:spec"`
	}
	if json.Unmarshal(fields, &f) != nil {
		return false
	}
	return f.Spec.Containers[serverContainerKey].Resources != nil
}
