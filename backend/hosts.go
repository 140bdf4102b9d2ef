package backend

import (
	"iter"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Rooms is implemented by backends that know the hosts a new server could be placed on (for
// pods: the nodes, when they are watched). The decision reads it before it replaces a running
// server for a change of its spec, or moves it for a migration: a replacement that no host
// would take would end a running server for one that never starts.
type Rooms interface {
	// Hosts returns the hosts as last seen, or nil when the backend does not know them (not
	// watched, not listed yet). It must be cheap (for pods: a pointer, the snapshot made
	// anew at the first read after a host changed): it runs on every reconcile.
	Hosts() *Hosts
}

// Hosts is a snapshot of the hosts a server could be placed on: what of each the scheduler's
// filters for placement read (labels, taints, the cordon) and its allocatable cpu and memory.
// It is never changed once made (NewHosts): a backend makes a new one after a host changes in
// one of these, so that a reader holds a consistent view without a lock. The figures a spec
// is matched against are computed on demand (Room), on the path of a replacement only.
type Hosts struct {
	hosts []Host
}

// Host is one host as Hosts keeps it (for pods: a node).
type Host struct {
	Name string
	// CPU and Memory are what it offers servers (for pods: the node's allocatable).
	CPU, Memory resource.Quantity
	Labels      map[string]string
	Taints      []corev1.Taint
	// Unschedulable says it is cordoned (for pods: spec.unschedulable), which the scheduler
	// reads as the taint node.kubernetes.io/unschedulable:NoSchedule.
	Unschedulable bool
}

// NewHosts makes a snapshot of hosts. It takes hosts and what they hold as its own: the
// caller changes none of it afterwards.
func NewHosts(hosts []Host) *Hosts { return &Hosts{hosts: hosts} }

// Len is how many hosts h has.
func (h *Hosts) Len() int { return len(h.hosts) }

// All yields the hosts, in the order they were given; they are not to be changed.
func (h *Hosts) All() iter.Seq[Host] { return slices.Values(h.hosts) }

// Room is the largest allocatable cpu and the largest allocatable memory among the hosts that
// would admit a server of spec, each taken on its own: they may be two hosts' figures. A host
// admits it, as the scheduler's filters for placement tell (component-helpers, their own
// code): its labels (and name) match the placement's node selector and required node
// affinity; the placement's tolerations, with admitted (the tolerations admission gave the
// server that runs now beyond them, Server.AdmittedTolerations, which it gives the next one
// too), tolerate each of its NoSchedule and NoExecute taints, the cordon counted as the taint
// node.kubernetes.io/unschedulable:NoSchedule as the scheduler counts it; and it is not
// spec.AvoidNode. The passing taints (passing) are not counted for a replacement; for a move
// they are, and only the placement's own tolerations take them: admission gives every server
// tolerations of the node's passing states for a while (DefaultTolerationSeconds), and a
// tolerate-all one (an empty key, Exists) may come with it, neither of which says the owner
// wants the VM moved onto a node that is down.
//
// Not looked at: pod affinity and anti-affinity, topology spread, and what already runs on a
// host, which only the scheduler weighs as it places the server. Room says what no host can
// take, not what one will.
func (h *Hosts) Room(spec Spec, admitted []corev1.Toleration) Room {
	return h.RoomWithin(spec, admitted, nil)
}

// RoomWithin is Room among the hosts that within also admits: the required node affinity of
// the storage the server mounts (Disk.NodeAffinity: a zone's disk, a local volume, a TopoLVM
// one), matched against each host's labels and name by the scheduler's own rules, as its
// VolumeBinding filter matches a bound volume's. A server whose disk cannot be reached from a
// host never runs there, whatever room the host has: one check answers both, so that a move
// or a replacement is not judged possible by a host the disk rules out, nor by a disk whose
// other hosts the placement or a cordon rule out. A node affinity that does not parse admits
// no host, as the scheduler's refusal of it would. nil: no bound (no disk, one not bound yet,
// one reached from every host, or not looked up), and the room is Room's.
func (h *Hosts) RoomWithin(spec Spec, admitted []corev1.Toleration, within *corev1.NodeSelector) Room {
	var r Room
	var reach *nodeaffinity.LazyErrorNodeSelector
	if within != nil {
		reach = nodeaffinity.NewLazyErrorNodeSelector(within)
	}
	pl := spec.Placement
	if pl == nil {
		pl = &Placement{}
	}
	tolerations := pl.Tolerations
	if len(admitted) > 0 {
		tolerations = append(slices.Clip(tolerations), admitted...)
	}
	affinity := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: corev1.PodSpec{NodeSelector: pl.NodeSelector, Affinity: pl.Affinity}})
	move := spec.AvoidNode != ""
	var node corev1.Node // each host in turn, as the matchers read a node
	for i := range h.hosts {
		o := &h.hosts[i]
		if o.Name == spec.AvoidNode && spec.AvoidNode != "" {
			continue
		}
		r.Known++
		node.Name, node.Labels = o.Name, o.Labels
		if reach != nil {
			if ok, err := reach.Match(&node); err != nil || !ok {
				continue
			}
		}
		r.Within++
		if !o.admits(&node, affinity, tolerations, pl.Tolerations, move) {
			continue
		}
		r.Hosts++
		if o.CPU.Cmp(r.CPU) > 0 {
			r.CPU = o.CPU
		}
		if o.Memory.Cmp(r.Memory) > 0 {
			r.Memory = o.Memory
		}
	}
	return r
}

// admits reports whether o, as node (its name and labels), takes a server of the required node
// affinity and the tolerations given, by the scheduler's filters NodeAffinity,
// TaintToleration (NoSchedule and NoExecute taints keep a server off; the passing ones only
// for a move, and for it only own, the placement's tolerations, take them) and
// NodeUnschedulable. A selector that does not parse admits nothing, as the scheduler's
// refusal of it would.
func (o *Host) admits(node *corev1.Node, affinity nodeaffinity.RequiredNodeAffinity, tolerations, own []corev1.Toleration, move bool) bool {
	if ok, err := affinity.Match(node); err != nil || !ok {
		return false
	}
	// The zero logger: with comparison operators off, matching a toleration logs nothing.
	var log klog.Logger
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(log, o.Taints, tolerations, keepsOff, false); untolerated {
		return false
	}
	if move {
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(log, o.Taints, own, keepsOffPassing, false); untolerated {
			return false
		}
	}
	return !o.Unschedulable || corev1helpers.TolerationsTolerateTaint(log, tolerations, &unschedulable, false)
}

// unschedulable is the taint the scheduler reads a cordon as (its NodeUnschedulable filter).
var unschedulable = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

// keepsOffNow reports whether a taint keeps a server that does not tolerate it off its host
// (PreferNoSchedule only discourages it), the passing ones with the rest.
func keepsOffNow(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// keepsOff is keepsOffNow but for the passing taints: the rule of a replacement, and of a
// move for the other taints.
func keepsOff(t *corev1.Taint) bool { return keepsOffNow(t) && !passing[t.Key] }

// keepsOffPassing is keepsOffNow for the passing taints alone: the rest of a move's rule,
// which a node that is down now must not take.
func keepsOffPassing(t *corev1.Taint) bool { return keepsOffNow(t) && passing[t.Key] }

// PassingTaint reports whether key is the key of one of the passing taints (passing), which
// say how a node is now, not where a server may go.
func PassingTaint(key string) bool { return passing[key] }

// passing are the taints that say how a node is now, not where a server may go: those the
// node lifecycle controller sets from the node's conditions (not ready, unreachable, under
// pressure, without network) and the one a cloud provider sets while it initializes a new
// node. They come and go with the node's state. For the replacement of a server for a new
// spec, a node that has one counts, as a node that is not Ready counts: counted out, a
// kubelet's restart or a node still initializing as the change is decided would keep the
// server for the whole generation of the spec (the record stays), where its replacement would
// have waited a moment for the node and run. A move (spec.AvoidNode) counts them: it ends a
// running server at once, and a refusal costs its owner no more than asking again, where a
// move onto a node that is down would leave the VM down until the move gives up. A cloud's
// shutdown taint is not among them: a machine shut down may stay so.
var passing = map[string]bool{
	corev1.TaintNodeNotReady:           true,
	corev1.TaintNodeUnreachable:        true,
	corev1.TaintNodeMemoryPressure:     true,
	corev1.TaintNodeDiskPressure:       true,
	corev1.TaintNodePIDPressure:        true,
	corev1.TaintNodeNetworkUnavailable: true,
	// k8s.io/cloud-provider's TaintExternalCloudProvider.
	"node.cloudprovider.kubernetes.io/uninitialized": true,
}

// Room is what Hosts.Room finds for a spec.
type Room struct {
	// CPU and Memory are the largest allocatable cpu and memory among the hosts that admit
	// the spec.
	CPU    resource.Quantity
	Memory resource.Quantity
	// Hosts is how many hosts admit the spec (and are within the disk's node affinity, for
	// RoomWithin); Known how many there are, the spec's AvoidNode not counted; Within how
	// many of those Known the disk's node affinity admits (Known when there is none).
	Hosts, Known, Within int
}

// Fits reports whether a server asking for cpu and memory could be placed on some host as far
// as r tells: false only when no host admits it, or it asks for more than every host that
// does offers. One that asks for less may still fit none (the cpu of one host, the memory of
// another, what runs there already), which only the scheduler tells.
func (r Room) Fits(cpu, memory resource.Quantity) bool {
	return r.Hosts > 0 && cpu.Cmp(r.CPU) <= 0 && memory.Cmp(r.Memory) <= 0
}
