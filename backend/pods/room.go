package pods

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// The room of the nodes (backend.Rooms): the largest allocatable cpu and memory among the
// nodes that take new pods, kept up to date by the node informer's handler (Config.WatchNodes)
// so that a reconcile reads one pointer. A cordoned node (spec.unschedulable) takes no new pod
// and is left out: a server replaced for a resize its node refused cannot go there. A node
// that is not Ready counts: it may come back, and leaving it out would turn a replacement
// into a kept server, and back, as a node flaps. Taints and a VM's placement are not looked
// at: the room says what no node can take, not what one will.

var _ backend.Rooms = (*Backend)(nil)

// Room returns the room of the nodes that take new pods, or nil when nodes are not watched
// or their first list is not in yet (backend.Rooms).
func (b *Backend) Room() *backend.Room {
	if b.rooms == nil || b.rooms.synced == nil || !b.rooms.synced() {
		return nil
	}
	c := *b.rooms.room.Load() // a copy: a Quantity caches its string as it is printed
	return &c
}

// rooms keeps each schedulable node's allocatable cpu and memory, and their largest.
type rooms struct {
	// synced reports whether the node handler has had the first list (Start sets it).
	synced func() bool
	mu     sync.Mutex
	nodes  map[string]nodeRoom // by node name; cordoned nodes are not in it
	room   atomic.Pointer[backend.Room]
}

// nodeRoom is a node's allocatable cpu and memory.
type nodeRoom struct{ cpu, memory resource.Quantity }

func newRooms() *rooms {
	r := &rooms{nodes: map[string]nodeRoom{}}
	r.room.Store(&backend.Room{})
	return r
}

// set records node n as it is now, or its deletion (n nil, name given). The largest is
// computed again over every node only when the node that held it shrinks, is cordoned or
// goes; otherwise a node's change costs a comparison.
func (r *rooms) set(name string, n *corev1.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, had := r.nodes[name]
	var now nodeRoom
	has := n != nil && !n.Spec.Unschedulable
	if has {
		now = nodeRoom{cpu: n.Status.Allocatable[corev1.ResourceCPU], memory: n.Status.Allocatable[corev1.ResourceMemory]}
		if had && old.cpu.Cmp(now.cpu) == 0 && old.memory.Cmp(now.memory) == 0 {
			return // a heartbeat, a label: nothing the room depends on
		}
		r.nodes[name] = now
	} else {
		if !had {
			return
		}
		delete(r.nodes, name)
	}
	cur := r.room.Load()
	next := backend.Room{CPU: cur.CPU, Memory: cur.Memory, Hosts: len(r.nodes)}
	if had && (old.cpu.Cmp(cur.CPU) == 0 && (!has || now.cpu.Cmp(old.cpu) < 0) ||
		old.memory.Cmp(cur.Memory) == 0 && (!has || now.memory.Cmp(old.memory) < 0)) {
		// The node that held a largest figure shrank or went: another may hold it now.
		next.CPU, next.Memory = resource.Quantity{}, resource.Quantity{}
		for _, o := range r.nodes {
			grow(&next, o)
		}
	} else if has {
		grow(&next, now)
	}
	r.room.Store(&next)
}

// grow raises room's figures to o's where o's are larger.
func grow(room *backend.Room, o nodeRoom) {
	if o.cpu.Cmp(room.CPU) > 0 {
		room.CPU = o.cpu
	}
	if o.memory.Cmp(room.Memory) > 0 {
		room.Memory = o.memory
	}
}
