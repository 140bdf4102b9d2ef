package pods

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// cachedPod is a server pod as the backend's informer keeps it: the pod already read as a
// server, and the little else the backend asks of it (whose it is, where it runs).
//
// Why not the typed pod: with the spec defaults, tolerations and status a kubelet writes, a
// corev1.Pod holds about 4 KB per server, of which Observe reads a few fields. Reading the pod
// once, when the informer stores it, keeps the cache to a few hundred bytes per server.
//
// A cachedPod is immutable once made, so it is shared, never copied: DeepCopyObject returns it.
type cachedPod struct {
	namespace, name, resourceVersion string
	uid                              types.UID
	// ownerUID is the UID of the VM that controls the pod or, once the garbage collector
	// has removed the owner reference (a deletion with --cascade=orphan), the VM UID of its
	// label; ownerName is that VM's name, from the reference or the annotation.
	ownerUID  types.UID
	ownerName string
	node      string
	// server is the pod read as a server, before its node's readiness is taken into account.
	server backend.Server
}

var (
	_ runtime.Object            = (*cachedPod)(nil)
	_ metav1.ObjectMetaAccessor = (*cachedPod)(nil)
)

// GetObjectMeta is how client-go (meta.Accessor) reads the pod's keys and version; it is made
// on each call rather than kept, since it would be the larger part of a cachedPod.
func (p *cachedPod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.namespace, Name: p.name, UID: p.uid, ResourceVersion: p.resourceVersion}
}

// GetObjectKind has nothing to tell: every cachedPod is a pod.
func (p *cachedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns p itself: a cachedPod is never modified after it is made.
func (p *cachedPod) DeepCopyObject() runtime.Object { return p }

// cachePod makes the cached form of a pod.
func cachePod(pod *corev1.Pod) *cachedPod {
	p := &cachedPod{
		namespace: pod.Namespace, name: pod.Name, uid: pod.UID, resourceVersion: pod.ResourceVersion,
		ownerUID:  types.UID(pod.Labels[LabelVMUID]),
		ownerName: pod.Annotations[AnnotationVM],
		node:      pod.Spec.NodeName,
		server:    serverOf(pod),
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		p.ownerUID, p.ownerName = ref.UID, ref.Name
	}
	return p
}

// toCachedPod is the pod informer's transform. Tombstones and cached pods pass through.
func toCachedPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return cachePod(pod), nil
}

// owns reports whether p is vm's server: vm controls it, or, once the garbage collector has
// removed the owner reference (a deletion with --cascade=orphan), the pod still carries the
// label with vm's UID. Without the second, such a pod would look like no VM's, the finalizer
// would come off, and the pod would be left behind.
func (p *cachedPod) owns(vm backend.Owner) bool { return p.ownerUID == vm.UID }

// observed is p as a server now: a ready or starting server on a node that is gone or not
// ready is lost. nodeReady is nil when nodes are not watched.
func (p *cachedPod) observed(nodeReady func(name string) (ready bool, known bool)) *backend.Server {
	s := p.server
	if (s.State == backend.StateReady || s.State == backend.StateStarting) && nodeReady != nil && p.node != "" {
		if ready, known := nodeReady(p.node); !known {
			s.State, s.Message = backend.StateLost, fmt.Sprintf("node %s is gone", p.node)
		} else if !ready {
			s.State, s.Message = backend.StateLost, fmt.Sprintf("node %s is not ready", p.node)
		}
	}
	return &s
}
