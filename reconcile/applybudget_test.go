package reconcile

import (
	"context"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestControllerBudget: a VM of evictionStrategy Block gets its disruption budget in the
// reconcile that first sees it, with the Event CreatingBudget, and the reconciles after find
// nothing to do; once the budget is gone (someone deleted it), the next reconcile makes it
// again.
func TestControllerBudget(t *testing.T) {
	w := newWorld(t, "evict-block-new")
	vm := w.view(t, "evict-block-new")
	_, srv := decidecase.Read(t, caseFile("evict-block-new"))
	w.servers.Set(ownerOf(vm), srv)
	c, r := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	c.processNextItem(ctx)
	if got := r.last(); got != "success" {
		t.Fatalf("reconcile: %q", got)
	}
	b, err := w.servers.ObserveBudget(ownerOf(vm))
	if err != nil || b == nil {
		t.Fatalf("no budget after the reconcile: %+v, %v", b, err)
	}
	evs := strings.Join(w.events(), "\n")
	if !strings.Contains(evs, "Normal CreatingBudget ") {
		t.Errorf("events %q, want CreatingBudget", evs)
	}

	w.servers.SetBudget(ownerOf(vm), nil)
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
	}
	if b, _ := w.servers.ObserveBudget(ownerOf(vm)); b == nil {
		t.Error("the budget someone deleted was not made again")
	}
}

// TestApplyBudgetWithoutBackend: a plan's budget action on a backend that keeps no budgets
// is an error that says so, and nothing else of the plan is written after it.
func TestApplyBudgetWithoutBackend(t *testing.T) {
	w := newWorld(t, "evict-block-new")
	vm := w.view(t, "evict-block-new")
	a := w.applier()
	a.backend = serversOnly{w.servers}
	plan := decision.Plan{Budget: &decision.BudgetAction{Op: decision.CreateBudget,
		Event: decision.Event{Type: decision.EventNormal, Reason: decision.ReasonCreatingBudget, Message: "m"}}}
	_, err := a.apply(context.Background(), vm, ownerOf(vm), nil, nil, plan)
	if err == nil || !strings.Contains(err.Error(), "create budget: the backend keeps no disruption budgets") {
		t.Errorf("apply = %v, want the backend keeps no budgets", err)
	}
	if evs := w.events(); len(evs) != 0 {
		t.Errorf("events %q, want none", evs)
	}
}

// serversOnly is a backend with none of the optional interfaces.
type serversOnly struct{ backend.Backend }
