package pods

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/cachemeta"
)

// cachedPod is a server pod as the backend's informer keeps it: the pod already read as a
// server, and the little else the backend asks of it (whose it is, where it runs).
//
// Why not the typed pod: with the spec defaults, tolerations and status a kubelet writes, a
// corev1.Pod holds kilobytes per server, of which Observe reads a few fields. Reading the pod
// once, when the informer stores it, keeps the cache small.
//
// Why not a backend.Server either: with its five resource.Quantity values (each with its own
// text), a time, and strings the decoder allocates for each pod, a pod cached as a Server takes
// several times the heap of the compact form (BenchmarkCachedPodHeap measures it). The cache
// holds every server pod for the life of the controller, so its form is compact and the
// Server is made again on each Observe, which costs a few small allocations per reconcile:
//   - what many pods share (namespace, node, image, messages) is interned;
//   - UIDs are 16 bytes, the resourceVersion a number, the owner's name a part of the pod's;
//   - quantities are whole numbers of millicores or bytes with the code of their format; the
//     states and the phase are codes into tables (compact.go);
//   - what a running, ready pod with nothing under way does not have is behind one pointer
//     (notes), nil for such a pod.
//
// Each compact field reads back exactly what the pod had: cachePod keeps what would not (a UID
// a test made up, a quantity written "+1Gi") as it was read, behind another pointer (exact).
//
// A cachedPod is immutable once made, so it is shared, never copied: DeepCopyObject returns it.
type cachedPod struct {
	cachemeta.Unkept       // client-go reads the keys and version below in place
	name                   string
	namespace, node, image interned
	version                uint64 // resourceVersion, unless exact has it
	// ip is the pod's IP as 16 bytes (podIPv4 or podIPv6 says which kind, neither: none),
	// unless exact has the server, rather than a string each pod holds alone.
	ip  [16]byte
	uid uuid // unless exact has it
	// ownerUID is the UID of the VM that controls the pod or, once the garbage collector
	// has removed the owner reference (a deletion with --cascade=orphan), the VM UID of its
	// label; the owner's name, from the reference or the annotation, is the pod's name
	// without its suffix (PodName) unless exact has it.
	ownerUID uuid
	// cpu (in millicores), memory and rootDisk (in bytes) are the server's spec, each with
	// its format in formats, unless exact has the server.
	cpu, memory, rootDisk int64
	formats               [3]uint8
	state, phase, resize  uint8 // codes in serverStates, podPhases, resizeStates
	flags                 podFlags
	notes                 *podNotes // nil when the server has nothing more to say
	exact                 *podExact // nil when all is in the compact fields
	// placement is the pod's AnnotationPlacement and the tolerations admission gave it beyond
	// it (none when they were changed since, podTolerationsChanged), which many pods share:
	// read into the server on each Observe (placementOf, admitted), and only for a pod that
	// has them.
	placement placed
	// restart is the server's restart mark (AnnotationRestart), when podRestart says it has
	// one, as seconds since the epoch: the mark is the time of a request, which `kubectl vm
	// restart` and the restart hint write in RFC 3339 in UTC to the second; any other text
	// keeps the server as read (exact). The field fits in the padding of the pod's size class:
	// the cached pod takes no more heap for it (BenchmarkCachedPodHeap).
	restart int64
}

type podFlags uint16

const (
	podDeleting podFlags = 1 << iota
	// podDisk: the server mounts its VM's disk, the claim of ClaimName(ownerName()).
	podDisk
	// cpuInEffect, memoryInEffect: the resources in effect are the spec's.
	cpuInEffect
	memoryInEffect
	// The fields exact holds.
	exactUID
	exactOwnerUID
	exactOwnerName
	exactVersion
	exactServer
	// podIPv4, podIPv6: ip holds the pod's IP, of that kind.
	podIPv4
	podIPv6
	// podRestart: restart holds the server's restart mark.
	podRestart
	// podLingers: the server ended in a pod that runs on (backend.Server.Lingers).
	podLingers
	// podTolerationsChanged: someone changed the pod's tolerations after it was made
	// (backend.Server.TolerationsChanged); placement then holds none beyond its own.
	podTolerationsChanged
)

// podNotes are the parts of a server that a running, ready pod with nothing under way does
// not have.
type podNotes struct {
	message, resizeMessage interned
	since                  time.Time
	// why a pending pod waits (backend.Waiting): its reason's code in waitReasons, the
	// scheduler's or kubelet's message, since when, and whether the kubelet backs off.
	wait        uint8
	waitBackOff bool
	waitMessage interned
	waitSince   time.Time
	// cpu and memory in effect, when they are set and not the spec's.
	cpu, memory resource.Quantity
	// keptBy is what keeps a server that lingers running (backend.Server.KeptBy), its names
	// joined by commas (keptByText): the same sidecars are injected into many pods, so a
	// fleet of ended servers that a mesh keeps running shares one string.
	keptBy interned
}

// podExact holds, as read, what the compact fields could not hold exactly; flags say which.
type podExact struct {
	uid, ownerUID              types.UID
	ownerName, resourceVersion string
	server                     backend.Server
}

var (
	_ runtime.Object = (*cachedPod)(nil)
	_ metav1.Object  = (*cachedPod)(nil)
)

// GetNamespace, GetName, GetUID and GetResourceVersion are how client-go (meta.Accessor)
// reads the pod's keys and version, in place (cachemeta).
func (p *cachedPod) GetNamespace() string { return p.namespace.String() }

// GetName is the pod's name.
func (p *cachedPod) GetName() string { return p.name }

// GetUID is the pod's UID.
func (p *cachedPod) GetUID() types.UID { return p.podUID() }

// GetResourceVersion is the pod's resourceVersion.
func (p *cachedPod) GetResourceVersion() string { return p.resourceVersion() }

// GetObjectKind has nothing to tell: every cachedPod is a pod.
func (p *cachedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns p itself: a cachedPod is never modified after it is made.
func (p *cachedPod) DeepCopyObject() runtime.Object { return p }

// cachePod makes the cached form of a pod.
func cachePod(pod *corev1.Pod) *cachedPod {
	p := &cachedPod{name: pod.Name, namespace: intern(pod.Namespace), node: intern(pod.Spec.NodeName)}
	ownerUID, ownerName := types.UID(pod.Labels[LabelVMUID]), pod.Annotations[AnnotationVM]
	if ref := metav1.GetControllerOf(pod); ref != nil {
		ownerUID, ownerName = ref.UID, ref.Name
	}
	var ok bool
	if p.uid, ok = parseUUID(string(pod.UID)); !ok {
		p.exactly().uid, p.flags = pod.UID, p.flags|exactUID
	}
	if p.ownerUID, ok = parseUUID(string(ownerUID)); !ok {
		p.exactly().ownerUID, p.flags = ownerUID, p.flags|exactOwnerUID
	}
	if p.version, ok = parseVersion(pod.ResourceVersion); !ok {
		p.exactly().resourceVersion, p.flags = pod.ResourceVersion, p.flags|exactVersion
	}
	if base, ok := strings.CutSuffix(pod.Name, nameSuffix); !ok || base != ownerName || ownerName == "" {
		p.exactly().ownerName, p.flags = ownerName, p.flags|exactOwnerName
	}
	s := serverOf(pod)
	if p.placement, ok = internPlaced(pod.Annotations[AnnotationPlacement], s.AdmittedTolerations); !ok || !p.compact(s) {
		p.exactly().server, p.flags = s, p.flags|exactServer
	}
	return p
}

// compact puts s, which serverOf made of the pod p is made of, into p's compact fields if they
// make s again exactly, and reports whether they do. s.Name, s.ID and s.Version are the pod's
// name, UID and resourceVersion, which p has already.
func (p *cachedPod) compact(s backend.Server) bool {
	state, okState := index(serverStates[:], s.State)
	phase, okPhase := index(podPhases[:], s.Detail)
	resize, okResize := index(resizeStates[:], s.Resize.State)
	wait, okWait := index(waitReasons[:], s.Waiting.Reason)
	ip, ipKind, okIP := parseIP(s.IP)
	var scratch [32]byte
	cpu, cpuFormat, okCPU := compactQuantity(s.Spec.CPU, cpuScale, scratch[:0])
	memory, memoryFormat, okMemory := compactQuantity(s.Spec.Memory, bytesScale, scratch[:0])
	rootDisk, rootDiskFormat, okRootDisk := compactQuantity(s.Spec.RootDisk, bytesScale, scratch[:0])
	// A server mounts its VM's claim, of the name ClaimName gives, or none; any other claim
	// is kept as read.
	disk := s.Disk != "" && s.Spec.Disk && s.Disk == ClaimName(p.ownerName())
	okDisk := disk || s.Disk == "" && !s.Spec.Disk
	okDisruption := s.Disruption == nil // a pod being evicted is rare: it is kept as read
	keptBy, okKept := keptByText(s.KeptBy)
	restart, okRestart := parseRestart(s.Spec.Restart)
	if !okState || !okPhase || !okResize || !okCPU || !okMemory || !okRootDisk || !okDisk || !okWait || !okIP || !okDisruption || !okKept || !okRestart ||
		s.Node != p.node.String() {
		return false
	}
	if s.Spec.Restart != "" {
		p.restart, p.flags = restart, p.flags|podRestart
	}
	p.state, p.phase, p.resize = state, phase, resize
	p.cpu, p.memory, p.rootDisk = cpu, memory, rootDisk
	p.formats = [3]uint8{cpuFormat, memoryFormat, rootDiskFormat}
	p.image = intern(s.Spec.Image)
	p.ip, p.flags = ip, p.flags|ipKind
	if s.Deleting {
		p.flags |= podDeleting
	}
	if disk {
		p.flags |= podDisk
	}
	if s.Lingers {
		p.flags |= podLingers
	}
	if s.TolerationsChanged {
		p.flags |= podTolerationsChanged
	}
	notes := podNotes{message: intern(s.Message), resizeMessage: intern(s.Resize.Message), since: s.Since,
		wait: wait, waitBackOff: s.Waiting.BackOff, waitMessage: intern(s.Waiting.Message), waitSince: s.Waiting.Since,
		keptBy: keptBy}
	// The resources in effect cost nothing when they are unset or the spec's, as they are
	// when no resize is under way (a kubelet that reports them does so for every pod).
	switch unset, same := inEffect(s.Resize.CPU, s.Spec.CPU, p.cpu, p.formats[0], cpuScale, scratch[:0]); {
	case same:
		p.flags |= cpuInEffect
	case !unset:
		notes.cpu = s.Resize.CPU
	}
	switch unset, same := inEffect(s.Resize.Memory, s.Spec.Memory, p.memory, p.formats[1], bytesScale, scratch[:0]); {
	case same:
		p.flags |= memoryInEffect
	case !unset:
		notes.memory = s.Resize.Memory
	}
	if notes != (podNotes{}) {
		kept := notes // only a pod with notes pays for them
		p.notes = &kept
	}
	return true
}

// inEffect tells how q, the cpu or memory in effect, stands to spec, the one asked for, which
// the compact fields hold as v and format: unset, or the same (quantityOf(v, format) makes q
// again), or neither.
func inEffect(q, spec resource.Quantity, v int64, format uint8, scale resource.Scale, scratch []byte) (unset, same bool) {
	if q == spec { // as decoded from the same text: no need to look further
		return format == 0, format != 0
	}
	qv, qf, ok := compactQuantity(q, scale, scratch)
	return ok && qf == 0, ok && qf != 0 && qv == v && qf == format
}

// toCachedPod is the pod informer's transform. Tombstones and cached pods pass through.
func toCachedPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return cachePod(pod), nil
}

// exactly returns p's exact part, made on first use.
func (p *cachedPod) exactly() *podExact {
	if p.exact == nil {
		p.exact = &podExact{}
	}
	return p.exact
}

// podUID is the pod's UID.
func (p *cachedPod) podUID() types.UID {
	if p.flags&exactUID != 0 {
		return p.exact.uid
	}
	return types.UID(p.uid.String())
}

// resourceVersion is the pod's resourceVersion.
func (p *cachedPod) resourceVersion() string {
	if p.flags&exactVersion != 0 {
		return p.exact.resourceVersion
	}
	return strconv.FormatUint(p.version, 10)
}

// hasVersion reports whether rv is p's resourceVersion, without making its text.
func (p *cachedPod) hasVersion(rv string) bool {
	if p.flags&exactVersion != 0 {
		return p.exact.resourceVersion == rv
	}
	v, ok := parseVersion(rv)
	return ok && v == p.version
}

// sameVersion reports whether p and o are the same version of a pod (the informer's no-op
// updates of a resync).
func (p *cachedPod) sameVersion(o *cachedPod) bool {
	if (p.flags|o.flags)&exactVersion != 0 {
		return p.resourceVersion() == o.resourceVersion()
	}
	return p.version == o.version
}

// ownerName is the name of the VM whose server p is ("" when the pod names none).
func (p *cachedPod) ownerName() string {
	if p.flags&exactOwnerName != 0 {
		return p.exact.ownerName
	}
	return p.name[:len(p.name)-len(nameSuffix)]
}

// deleting reports whether the pod's deletion has begun.
func (p *cachedPod) deleting() bool {
	if p.flags&exactServer != 0 {
		return p.exact.server.Deleting
	}
	return p.flags&podDeleting != 0
}

// detail is the server's Detail, the pod's phase.
func (p *cachedPod) detail() string {
	if p.flags&exactServer != 0 {
		return p.exact.server.Detail
	}
	return podPhases[p.phase]
}

// owns reports whether p is vm's server: vm controls it, or, once the garbage collector has
// removed the owner reference (a deletion with --cascade=orphan), the pod still carries the
// label with vm's UID. Without the second, such a pod would look like no VM's, the finalizer
// would come off, and the pod would be left behind.
func (p *cachedPod) owns(vm backend.Owner) bool {
	if p.flags&exactOwnerUID != 0 {
		return p.exact.ownerUID == vm.UID
	}
	return p.ownerUID.String() == string(vm.UID)
}

// ownerUIDText is the UID of the VM whose server p is, as owns compares it.
func (p *cachedPod) ownerUIDText() types.UID {
	if p.flags&exactOwnerUID != 0 {
		return p.exact.ownerUID
	}
	return types.UID(p.ownerUID.String())
}

// disruption is the pod's DisruptionTarget condition, nil when it has none: read in place,
// without making the server, since every pod event asks (gone.go). A disrupted pod keeps its
// server as read (compact), so the compact fields never hold one.
func (p *cachedPod) disruption() *backend.Disruption {
	if p.flags&exactServer == 0 {
		return nil
	}
	return p.exact.server.Disruption
}

// server is p read as a server, before its node's readiness is taken into account: serverOf
// of the pod it was made from.
func (p *cachedPod) server() backend.Server {
	if p.flags&exactServer != 0 {
		return p.exact.server
	}
	s := backend.Server{
		Name:     p.name,
		ID:       string(p.podUID()),
		Version:  p.resourceVersion(),
		State:    serverStates[p.state],
		Detail:   podPhases[p.phase],
		Deleting: p.flags&podDeleting != 0,
		Lingers:  p.flags&podLingers != 0,
		Spec: backend.Spec{
			CPU:      quantityOf(p.cpu, p.formats[0], cpuScale),
			Memory:   quantityOf(p.memory, p.formats[1], bytesScale),
			RootDisk: quantityOf(p.rootDisk, p.formats[2], bytesScale),
			Image:    p.image.String(),
			// Placement: the annotation read again, as serverOf reads it.
			Placement: placementOf(p.placement.annotation()),
		},
		AdmittedTolerations: p.placement.admitted(),
		TolerationsChanged:  p.flags&podTolerationsChanged != 0,
		Resize:              backend.Resize{State: resizeStates[p.resize]},
		Node:                p.node.String(),
	}
	switch {
	case p.flags&podIPv4 != 0:
		s.IP = netip.AddrFrom16(p.ip).Unmap().String()
	case p.flags&podIPv6 != 0:
		s.IP = netip.AddrFrom16(p.ip).String()
	}
	if p.flags&podDisk != 0 {
		s.Disk, s.Spec.Disk = ClaimName(p.ownerName()), true
	}
	if p.flags&podRestart != 0 {
		s.Spec.Restart = restartText(p.restart)
	}
	if n := p.notes; n != nil {
		s.Message, s.Since = n.message.String(), n.since
		s.Resize.Message, s.Resize.CPU, s.Resize.Memory = n.resizeMessage.String(), n.cpu, n.memory
		if n.wait != 0 || n.waitBackOff || n.waitMessage != (interned{}) || !n.waitSince.IsZero() {
			s.Waiting = backend.Waiting{Reason: waitReasons[n.wait], Message: n.waitMessage.String(), Since: n.waitSince, BackOff: n.waitBackOff}
		}
		if t := n.keptBy.String(); t != "" {
			s.KeptBy = strings.Split(t, ",")
		}
	}
	if p.flags&cpuInEffect != 0 {
		s.Resize.CPU = s.Spec.CPU
	}
	if p.flags&memoryInEffect != 0 {
		s.Resize.Memory = s.Spec.Memory
	}
	return s
}

// observed is p as a server now: a ready or starting server on a node that is gone or not
// ready is lost. So is one still Pending on such a node once it is being deleted (by the taint
// manager after the node's toleration, by a replacement, a stop): its kubelet, which may have
// started its container since it last reported, is the one to confirm the deletion, which
// cannot finish while the node does not answer. Without it such a server was taken for gone
// when it went, or for one someone else deleted (under Once and Manual a VM stopped for good).
// One not being deleted stays Pending: it has not run as far as anyone knows, and a node's
// blip of a few seconds is no news for a server whose image is being pulled. nodeReady is nil
// when nodes are not watched.
func (p *cachedPod) observed(nodeReady func(name string) (ready bool, known bool)) *backend.Server {
	s := p.server()
	node := p.node.String()
	if nodeReady == nil || node == "" {
		return &s
	}
	switch {
	case s.State == backend.StateReady || s.State == backend.StateStarting || s.State == backend.StatePending && s.Deleting:
		if ready, known := nodeReady(node); !known {
			s.State, s.Message, s.NodeGone = backend.StateLost, fmt.Sprintf("node %s is gone", node), true
		} else if !ready {
			s.State, s.Message = backend.StateLost, fmt.Sprintf("node %s is not ready", node)
		}
	case s.State == backend.StatePending:
		if ready, known := nodeReady(node); !known || !ready {
			s.NodeSilent = true // still Pending, but its delete waits for the node (backend.Server.NodeSilent)
		}
	}
	return &s
}
