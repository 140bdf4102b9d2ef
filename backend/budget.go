package backend

import "context"

// Budgets is implemented by backends that can keep a VM's server from being evicted by a
// node's drain: for pods, a PodDisruptionBudget that selects the server pod and allows no
// disruption, so that a drain waits until the VM's owner moves or stops it (the eviction
// strategy Block, docs/eviction.md). A budget belongs to its VM (it goes with the VM), and
// one VM has at most one; the backend names it, as it names the server.
type Budgets interface {
	// ObserveBudget returns vm's budget as last seen, or nil when it has none. A budget of
	// its name that is not vm's is not reported: it is none of the controller's business.
	// It must be cheap (a cache read): it runs on every reconcile.
	ObserveBudget(vm Owner) (*Budget, error)
	// CreateBudget makes vm's budget and returns it. It is idempotent: a budget that
	// already is vm's is returned, not an error. A name another holds is ErrRejected.
	CreateBudget(ctx context.Context, vm Owner) (*Budget, error)
	// DeleteBudget asks for vm's budget to go away; one already gone is not an error.
	DeleteBudget(ctx context.Context, vm Owner) error
}

// Budget is a backend's report on a VM's budget.
type Budget struct {
	Name string `yaml:"name"` // the backend's name for it (for pods: the PodDisruptionBudget's)
	ID   string `yaml:"id"`   // a unique identity (for pods: the UID)
}

// Disruption says a server is being taken away by someone other than the controller: an
// eviction (a node's drain), a preemption, the node's own pressure. For pods it is the
// DisruptionTarget condition, which the API server sets before it deletes the pod.
type Disruption struct {
	Reason  string `yaml:"reason"`            // the backend's word for the cause (for pods: EvictionByEvictionAPI, ...)
	Message string `yaml:"message,omitempty"` // what the backend says of it
}
