package pods

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// The nodes as hosts of new servers (backend.Rooms): a snapshot of each node's allocatable
// cpu and memory, labels, taints and cordon, kept up to date by the node informer's handler
// (Config.WatchNodes) so that a reconcile reads one pointer. The snapshot is made anew, at the
// first read after, only when a node comes, goes, or changes in one of these; a heartbeat (a
// condition's time, the node's resourceVersion) keeps the one there is. Which of the nodes
// would take a server is the decision's to compute, for the spec of the server it is about to
// create (backend.Hosts.Room), on the path of a replacement only; DiskPinned matches a
// volume's node affinity against the same hosts (pinning.go), so that it lists no nodes. A
// node that is not Ready counts: it may come back, and leaving it out would turn a
// replacement into a kept server, and back, as a node flaps.

var _ backend.Rooms = (*Backend)(nil)

// Hosts returns the nodes as last seen, or nil when nodes are not watched or their first list
// is not in yet (backend.Rooms).
func (b *Backend) Hosts() *backend.Hosts {
	if b.rooms == nil || b.rooms.synced == nil || !b.rooms.synced() {
		return nil
	}
	return b.rooms.snapshot()
}

// rooms keeps each node as a host, and the snapshot of them all.
type rooms struct {
	// synced reports whether the node handler has had the first list (Start sets it).
	synced func() bool
	mu     sync.Mutex
	nodes  map[string]backend.Host // by node name
	// stale says that nodes changed since hosts was made: the next reader makes it anew.
	// The snapshot is made where it is read, not at each change, so that the first list of
	// N nodes costs one snapshot, not N snapshots of up to N hosts.
	stale atomic.Bool
	hosts atomic.Pointer[backend.Hosts]
}

func newRooms() *rooms {
	r := &rooms{nodes: map[string]backend.Host{}}
	r.hosts.Store(backend.NewHosts(nil))
	return r
}

// set records node n as it is now, or its deletion (n nil, name given), and marks the
// snapshot stale when that changes a host.
func (r *rooms) set(name string, n *corev1.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, had := r.nodes[name]
	if n == nil {
		if !had {
			return
		}
		delete(r.nodes, name)
	} else {
		now := host(n)
		if had && sameHost(old, now) {
			return // a heartbeat: nothing a host is matched on
		}
		r.nodes[name] = now
	}
	r.stale.Store(true)
}

// snapshot returns the hosts as the nodes are now: the snapshot there is, or, when a node
// changed since it was made, a new one (sorted by name, so that a decision reads the hosts in
// one order whatever the map's). A reader that finds it fresh pays one atomic load.
func (r *rooms) snapshot() *backend.Hosts {
	if !r.stale.Load() {
		return r.hosts.Load()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stale.Load() {
		hosts := slices.SortedFunc(maps.Values(r.nodes), func(a, b backend.Host) int { return strings.Compare(a.Name, b.Name) })
		r.hosts.Store(backend.NewHosts(hosts))
		r.stale.Store(false)
	}
	return r.hosts.Load()
}

// host is node n as a host. Its labels and taints are the informer's, shared, never changed.
func host(n *corev1.Node) backend.Host {
	return backend.Host{Name: n.Name, CPU: n.Status.Allocatable[corev1.ResourceCPU], Memory: n.Status.Allocatable[corev1.ResourceMemory],
		Labels: n.Labels, Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable}
}

// sameHost reports whether a and b are matched and counted alike: the same figures, labels,
// taints (key, value and effect; the time a NoExecute taint was added bears on no placement)
// and cordon.
func sameHost(a, b backend.Host) bool {
	return a.CPU.Cmp(b.CPU) == 0 && a.Memory.Cmp(b.Memory) == 0 && a.Unschedulable == b.Unschedulable &&
		maps.Equal(a.Labels, b.Labels) && slices.EqualFunc(a.Taints, b.Taints, func(x, y corev1.Taint) bool { return x.MatchTaint(&y) && x.Value == y.Value })
}
