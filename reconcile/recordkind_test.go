package reconcile

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// policyDenied is an admission policy's refusal of a write, as the backends report it.
func policyDenied(resource, name string) error {
	forbidden := apierrors.NewForbidden(k8sschema.GroupResource{Resource: resource}, name,
		errors.New(`admission webhook "policy.example.com" denied the request`))
	return fmt.Errorf("update %s: %w: %w", name, backend.ErrRejected, forbidden)
}

// TestApplyRecordDiskKindRefused: the record of the kind on a running VM's disk, which an
// earlier version made without it, refused by a policy: bookkeeping the VM does not need, so
// the plan carries on and the VM stays as it is, not Failed with DiskRejected as a refused
// create would make it.
func TestApplyRecordDiskKindRefused(t *testing.T) {
	w, vm, srv, seen, plan := kindUnrecorded(t)
	owner := ownerOf(vm)
	if plan.Disk == nil || plan.Disk.Op != decision.RecordDiskKind {
		t.Fatalf("plan %+v, want the kind recorded", plan)
	}
	w.servers.FailDisks(policyDenied("persistentvolumeclaims", "test-vm-rootdisk"))
	a := w.diskApplier()
	a.policy = serverPolicy
	if _, err := a.apply(context.Background(), vm, owner, srv, seen, plan); err != nil {
		t.Fatalf("apply = %v, want the refusal carried past", err)
	}
	if phase := status(t, w, testVM, "phase"); phase == "Failed" {
		t.Errorf("phase %s (%s), events %v: a running VM reported Failed over its disk's kind", phase, status(t, w, testVM, "reason"), w.reasons())
	}
	if got, _ := w.servers.Observe(owner); got == nil || got.ID != srv.ID {
		t.Errorf("server %+v, want %s kept", got, srv.ID)
	}
}

// TestApplyRecordBudgetKindRefused: the same for the budget of a VM under Block: the refusal
// is no error for the queue to retry with backoff, and the rest of the plan is carried out.
func TestApplyRecordBudgetKindRefused(t *testing.T) {
	w := newWorld(t, "evict-block-new")
	vm := w.view(t, "evict-block-new")
	a := w.applier()
	a.useBackend(refusingKind{w.servers})
	plan := decision.Plan{Budget: &decision.BudgetAction{Op: decision.RecordBudgetKind, Name: "test-vm-block-eviction"}}
	if _, err := a.apply(context.Background(), vm, ownerOf(vm), nil, nil, plan); err != nil {
		t.Errorf("apply = %v, want the refusal carried past", err)
	}
	if evs := w.events(); len(evs) != 0 {
		t.Errorf("events %q, want none", evs)
	}
}

// refusingKind is the memory backend whose budgets a policy keeps from being annotated.
type refusingKind struct{ *memory.Backend }

func (refusingKind) RecordBudgetKind(context.Context, backend.Owner) (*backend.Budget, error) {
	return nil, policyDenied("poddisruptionbudgets", "test-vm-block-eviction")
}
