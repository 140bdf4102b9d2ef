package pods

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// A server pod that goes while disrupted (backend.Departures): the eviction API marks a pod
// with the DisruptionTarget condition, then deletes it. The decision moves the VM under the
// eviction strategy Replace when it sees the mark; a pod deleted before any decision saw it
// (with grace period 0, by a quick kubelet, while the controller was busy) would leave the
// decision with "no server" alone. The pod informer sees every state of the pod all the same,
// the last one in its delete event (or, after a watch that broke, in the tombstone of the
// relist), so the backend keeps the disruption of each VM's server from the moment a pod event
// shows it, and reports it once the pod is gone from the cache (LastGone).
//
// Why from the first event that shows it, not from the delete's only: client-go drops the pod
// from the cache before it calls the delete handler, so a reconcile in between would observe
// no server and nothing remembered, and under Once or Manual would stop the VM for good.
//
// What is remembered goes when a pod of the VM shows no disruption (a new server, or the
// condition taken off a pod that was not deleted), when the VM goes (Forget), and, past
// maxDepartures, the oldest first. A controller that restarts remembers nothing: the decision
// then reads a server gone unseen as it did before.

var _ backend.Departures = (*Backend)(nil)

// maxDepartures bounds what is remembered: one record per VM whose server is disrupted or went
// so, each gone once a new server of the VM shows or the VM goes; the bound is for VMs that
// neither get a new server nor are deleted (a VM under the strategy None that stays stopped).
const maxDepartures = 4096

// departures is what the backend remembers of the servers disrupted, by the pod's namespace
// and name (a VM's pod has one name, PodName).
type departures struct {
	// n is len(byPod), read without the lock: on every pod event that shows no disruption
	// the backend forgets the pod's record, and with none at all (n 0, the common case)
	// it takes no lock.
	n     atomic.Int32
	mu    sync.Mutex
	seq   uint64 // counts records, so that the bound drops the oldest
	byPod map[podKey]departure
}

// podKey is a pod's namespace and name, as a map key made without an allocation.
type podKey struct{ namespace, name string }

// departure is the record of one VM's disrupted server.
type departure struct {
	vm   types.UID // the VM that owned the pod: a VM of the name made again is another
	gone backend.Gone
	seq  uint64
}

// seen takes a pod event's object (a tombstone's included) into what is remembered: a pod
// disrupted is recorded as its VM's, one that is not ends its VM's record. The handlers of
// the pod informer call it for every add, update and delete, before they notify the VM.
func (d *departures) seen(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj // the pod as last seen: a relist found it gone
	}
	p, ok := obj.(*cachedPod)
	if !ok {
		return
	}
	dis := p.disruption()
	if dis == nil {
		if d.n.Load() == 0 {
			return
		}
		d.mu.Lock()
		delete(d.byPod, podKey{p.namespace.String(), p.name})
		d.n.Store(int32(len(d.byPod)))
		d.mu.Unlock()
		return
	}
	rec := departure{vm: p.ownerUIDText(), gone: backend.Gone{Name: p.name, ID: string(p.podUID()), Node: p.node.String(), Disruption: *dis}}
	k := podKey{p.namespace.String(), p.name}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byPod == nil {
		d.byPod = map[podKey]departure{}
	}
	if _, ok := d.byPod[k]; !ok && len(d.byPod) >= maxDepartures {
		d.dropOldestLocked()
	}
	d.seq++
	rec.seq = d.seq
	d.byPod[k] = rec
	d.n.Store(int32(len(d.byPod)))
}

// dropOldestLocked drops the record made first. It walks every record, which is cheap next to
// how seldom the bound is reached. d.mu is held.
func (d *departures) dropOldestLocked() {
	var oldest podKey
	first := true
	var at uint64
	for k, r := range d.byPod {
		if first || r.seq < at {
			oldest, at, first = k, r.seq, false
		}
	}
	delete(d.byPod, oldest)
}

// record returns what is remembered of the pod ns/name, if anything.
func (d *departures) record(ns, name string) (departure, bool) {
	if d.n.Load() == 0 {
		return departure{}, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.byPod[podKey{ns, name}]
	return r, ok
}

// LastGone returns vm's last server, when its pod went while disrupted: remembered as vm's,
// and that pod no longer in the cache. A read of memory: no call to the API server.
func (b *Backend) LastGone(vm backend.Owner) *backend.Gone {
	name := PodName(vm.Name)
	r, ok := b.departures.record(vm.Namespace, name)
	if !ok || r.vm != vm.UID {
		return nil
	}
	if obj, ok, err := b.pods.GetByKey(vm.Namespace + "/" + name); err == nil && ok && string(obj.(*cachedPod).podUID()) == r.gone.ID {
		return nil // still there: Observe shows it, disruption and all
	}
	g := r.gone
	return &g
}

// Forget drops what is remembered of the VM named vm's server: the VM is gone.
func (b *Backend) Forget(vm types.NamespacedName) {
	d := &b.departures
	if d.n.Load() == 0 {
		return
	}
	d.mu.Lock()
	delete(d.byPod, podKey{vm.Namespace, PodName(vm.Name)})
	d.n.Store(int32(len(d.byPod)))
	d.mu.Unlock()
}

// handlers are h with seen called first on every event, so that what is
// remembered is up to date before the VM is notified.
func (d *departures) handlers(h cache.ResourceEventHandlerFuncs) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			d.seen(obj)
			h.AddFunc(obj)
		},
		UpdateFunc: func(old, cur any) {
			d.seen(cur)
			h.UpdateFunc(old, cur)
		},
		DeleteFunc: func(obj any) {
			d.seen(obj)
			h.DeleteFunc(obj)
		},
	}
}
