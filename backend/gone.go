package backend

import "k8s.io/apimachinery/pkg/types"

// Departures is implemented by backends that remember, once a VM's server is gone, that it
// went while being disrupted (Server.Disruption: for pods, evicted by a node's drain).
//
// Why: the decision moves a VM under the eviction strategy Replace when it sees its server
// being evicted. A server can be gone before any decision saw it so: deleted at once, a
// kubelet that is quick, or a controller busy or restarting between the eviction's mark and
// the deletion. Observe then has nothing to show, and "no server" reads as a server deleted
// by someone else, which a VM under Once or Manual does not survive (it stays stopped). The
// backend saw the server's last state all the same (for pods, the informer's delete event
// carries it), so it keeps that for the decision.
//
// What a backend remembers is lost when the controller restarts; the decision then falls back
// to "no server".
type Departures interface {
	// LastGone returns what is remembered of vm's last server when that server is gone and
	// went while disrupted; nil otherwise: the server is still there, went undisrupted,
	// or a server of vm came after it. It must be cheap (a memory read): the controller asks
	// on every reconcile that observes no server.
	LastGone(vm Owner) *Gone
	// Forget drops what is remembered for the VM named vm: it is gone, and what a backend
	// remembers must not outlive it.
	Forget(vm types.NamespacedName)
}

// Gone is a VM's server that went while disrupted, as the backend last saw it; or (Replaced)
// one the controller deleted itself to replace it, as the controller remembers it.
type Gone struct {
	Name string `yaml:"name"`           // the backend's name for it
	ID   string `yaml:"id"`             // its unique identity (for pods: the UID)
	Node string `yaml:"node,omitempty"` // the host it ran on; "" if it was never placed
	// Disruption is what took it (for pods: its DisruptionTarget condition); zero for a server
	// that went only by the controller's delete (Replaced).
	Disruption Disruption `yaml:"disruption,omitempty"`
	// Replaced: the controller deleted it to replace it (a spec change, a restart, a
	// migration: a new server follows), and no status write has recorded that since: the
	// write that went with the delete was lost (a conflict: someone wrote the VM
	// meanwhile). The controller sets it from its own memory of its deletes, for a server
	// going or gone; a backend never does (LastGone leaves it false).
	Replaced bool `yaml:"replaced,omitempty"`
}
