package backend

import "context"

// Budgets is implemented by backends that can keep a VM's server from being evicted by a
// node's drain: for pods, a PodDisruptionBudget that selects the server pod and allows no
// disruption, so that a drain waits until the VM's owner moves or stops it (the eviction
// strategy Block, docs/eviction.md). A budget belongs to its VM, and one VM has at most one;
// the backend names it, as it names the server. A budget goes with its VM: the VM owns it, and
// the controller deletes it on the VM's way out, since a deletion that orphans the VM's
// dependents (kubectl delete --cascade=orphan) would leave it behind, holding the name. One
// that was left behind all the same (by an older controller, say) is adopted by the next VM of
// the name that needs a budget, as a kept disk is.
type Budgets interface {
	// ObserveBudget returns vm's budget as last seen, or nil when it has none: one vm
	// controls, or one made for vm that nothing controls any more. A budget of vm's name
	// that an earlier VM of the name left, controlled by nothing, is reported Unowned. Any
	// other budget of the name is not reported: it is none of the controller's business.
	// It must be cheap (a cache read): it runs on every reconcile.
	ObserveBudget(vm Owner) (*Budget, error)
	// CreateBudget makes vm's budget and returns it. It is idempotent: a budget that
	// already is vm's is returned, not an error, and one vm may adopt (what ObserveBudget
	// reports Unowned) is adopted. A name another holds is ErrRejected.
	CreateBudget(ctx context.Context, vm Owner) (*Budget, error)
	// AdoptBudget makes the budget of vm's name that is controlled by nothing vm's, in one
	// change conditional on the budget being as last observed, and returns it: controlled
	// by vm and holding vm's server. A budget already vm's is returned as it is; one that is
	// another's is ErrRejected.
	AdoptBudget(ctx context.Context, vm Owner) (*Budget, error)
	// RecordBudgetKind records on vm's own budget the kind of resource vm is
	// (Budget.KindUnrecorded), in one change conditional on the budget being as last
	// observed, and returns it. A budget that records it already is returned as it is; one
	// that is not vm's is ErrRejected.
	RecordBudgetKind(ctx context.Context, vm Owner) (*Budget, error)
	// DeleteBudget asks for vm's budget to go away; one already gone is not an error. A
	// budget that is not vm's (Unowned, or another's) is never deleted. A delete the backend
	// refuses for good (its permissions, a policy) is ErrRejected.
	DeleteBudget(ctx context.Context, vm Owner) error
}

// Budget is a backend's report on a VM's budget.
type Budget struct {
	Name string `yaml:"name"` // the backend's name for it (for pods: the PodDisruptionBudget's)
	ID   string `yaml:"id"`   // a unique identity (for pods: the UID)
	// Version changes with every change of the budget (for pods: the resourceVersion); ""
	// if none is kept.
	Version string `yaml:"version,omitempty"`
	// Unowned: not the VM's but an earlier VM's of its name, left controlled by nothing
	// (a deletion that orphaned that VM's dependents). It holds no server of this VM; the VM
	// adopts it when it needs a budget and otherwise leaves it alone.
	Unowned bool `yaml:"unowned,omitempty"`
	// KindUnrecorded: the VM's own budget, which does not record the kind of resource the
	// VM is (made by an earlier version). Only a budget left for the VM's kind, or for none,
	// is adopted by a later VM of the name; without the record, a budget left behind (a
	// deletion that orphaned it, a refused delete) could be taken by an object of another
	// kind and name (a controller run for another resource), so the VM records it.
	KindUnrecorded bool `yaml:"kindUnrecorded,omitempty"`
}

// Disruption says a server is being taken away by someone other than the controller: an
// eviction (a node's drain), a preemption, the node's own pressure. For pods it is the
// DisruptionTarget condition, which the API server sets before it deletes the pod.
type Disruption struct {
	Reason  string `yaml:"reason"`            // the backend's word for the cause (for pods: EvictionByEvictionAPI, ...)
	Message string `yaml:"message,omitempty"` // what the backend says of it
}
