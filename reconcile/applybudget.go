package reconcile

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// applyBudget carries out the plan's action on the VM's disruption budget (backend.Budgets,
// the eviction strategy Block), if it has one. A budget the backend refuses (a name another
// holds, a policy that denies it), and an adoption that finds the budget changed, are errors,
// retried at the pace of the queue's backoff: the server runs on either way, and only the
// drain it would hold is at stake. The plan's status is written all the same (applyPlan), so
// that the retries do not act on the server again.
//
// On a deleted VM's way out (leaving: the plan takes the finalizer off), the finalizer stays
// while the budget's delete fails for a time (the API server does not answer), and the retry
// deletes it. A delete the backend refuses for good (its permissions, a policy that protects
// budgets) does not hold the VM, unlike a disk's release (applyDisk): a budget holds no data,
// and the server it held is gone. The Warning BudgetLeftBehind names the budget and the
// refusal, and the VM goes.
func (a applier) applyBudget(ctx context.Context, vm schema.VirtualMachine, owner backend.Owner, act *decision.BudgetAction, leaving bool) error {
	if act == nil {
		return nil
	}
	budgets := a.opt.budgets
	if budgets == nil {
		return fmt.Errorf("%s budget: the backend keeps no disruption budgets", act.Op)
	}
	// The budget as the action finds it, which its Events name (relatedBudget): the
	// backend's adoption, record of the kind and delete act on what it observes too, so that
	// this is the version they are conditional on. A cache read; nil for a create, whose
	// Event names the budget made, and on an error, whose Events then name none.
	seen, _ := budgets.ObserveBudget(owner)
	var got *backend.Budget
	var err error
	switch act.Op {
	case decision.CreateBudget:
		got, err = budgets.CreateBudget(ctx, owner)
	case decision.AdoptBudget:
		_, err = budgets.AdoptBudget(ctx, owner)
	case decision.RecordBudgetKind:
		_, err = budgets.RecordBudgetKind(ctx, owner)
	case decision.DeleteBudget:
		err = budgets.DeleteBudget(ctx, owner)
	default:
		return fmt.Errorf("act on budget: unknown operation %q", act.Op)
	}
	about := seen
	if act.Op == decision.CreateBudget && got != nil {
		about = got
	}
	related := a.relatedBudget(vm, about)
	switch {
	case errors.Is(err, backend.ErrRejected) && act.Op == decision.DeleteBudget && leaving:
		a.recordRelated(vm, related, decision.BudgetLeftBehind(vm, act.Name, err.Error()))
		return nil
	case errors.Is(err, backend.ErrRejected) && (act.Op == decision.CreateBudget || act.Op == decision.AdoptBudget):
		// Retried with backoff all the same (the policy may change, the name be freed), and
		// said on the VM: only the logs said it, and a drain took the server unannounced.
		a.recordRelated(vm, related, decision.BudgetRefused(act.Name, err.Error()))
		return fmt.Errorf("%s budget: %w", act.Op, err)
	case errors.Is(err, backend.ErrRejected) && act.Op == decision.RecordBudgetKind:
		// Bookkeeping, as a disk's (applyDisk): refused, the budget still holds the drain.
		a.warnRefused(vm, "record the kind on budget "+act.Name, err)
		return nil
	case err != nil:
		return fmt.Errorf("%s budget: %w", act.Op, err)
	}
	a.recordRelated(vm, related, act.Event)
	return nil
}

// observeBudget is the VM's disruption budget as the backend's cache shows it; nil when it
// has none or the backend keeps none (the decision then asks for one only under Block, and
// applying that says the backend cannot).
func (c *Controller) observeBudget(owner backend.Owner) (*backend.Budget, error) {
	if c.opt.budgets == nil {
		return nil, nil
	}
	b, err := c.opt.budgets.ObserveBudget(owner)
	if err != nil {
		return nil, fmt.Errorf("observe budget: %w", err)
	}
	return b, nil
}
