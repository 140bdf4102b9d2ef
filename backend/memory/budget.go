package memory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/strictyaml"
)

// The backend's disruption budgets (backend.Budgets): a table by the VM they are for, kept
// in the same lock as the servers. The plan command shows the budget a plan makes, and the
// golden cases of the eviction strategies (testdata/decide/evict-*) observe one.

var _ backend.Budgets = (*Backend)(nil)

// BudgetName is the name the backend gives the disruption budget of the VM called vm.
func BudgetName(vm string) string { return vm + "-block-eviction" }

// ObserveBudget returns a copy of vm's budget, or nil.
func (b *Backend) ObserveBudget(vm backend.Owner) (*backend.Budget, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	got, ok := b.budgets[key(vm)]
	if !ok {
		return nil, nil
	}
	c := *got
	return &c, nil
}

// CreateBudget adds vm's budget, with an ID that counts creations; one that exists is
// returned as it is, adopted first if it is Unowned.
func (b *Backend) CreateBudget(ctx context.Context, vm backend.Owner) (*backend.Budget, error) {
	b.mu.Lock()
	k := key(vm)
	if got, ok := b.budgets[k]; ok {
		unowned := got.Unowned
		c := *got
		b.mu.Unlock()
		if unowned {
			return b.AdoptBudget(ctx, vm)
		}
		return &c, nil
	}
	b.madeBudgets++
	got := &backend.Budget{Name: BudgetName(vm.Name), ID: fmt.Sprintf("budget-%d", b.madeBudgets)}
	b.budgets[k] = got
	c := *got
	b.mu.Unlock()
	b.changed(k)
	return &c, nil
}

// AdoptBudget makes vm's the Unowned budget of its name (the budget table holds one budget
// per VM name, as the pods backend one PodDisruptionBudget); one already vm's is returned
// as it is, and none is an error.
func (b *Backend) AdoptBudget(_ context.Context, vm backend.Owner) (*backend.Budget, error) {
	b.mu.Lock()
	k := key(vm)
	got, ok := b.budgets[k]
	if !ok {
		b.mu.Unlock()
		return nil, fmt.Errorf("adopt budget %s: there is none", BudgetName(vm.Name))
	}
	adopted := got.Unowned
	got.Unowned = false
	c := *got
	b.mu.Unlock()
	if adopted {
		b.changed(k)
	}
	return &c, nil
}

// RecordBudgetKind clears KindUnrecorded on vm's budget; one that records the kind already is
// returned as it is, and an Unowned one (not vm's), or none, is an error.
func (b *Backend) RecordBudgetKind(_ context.Context, vm backend.Owner) (*backend.Budget, error) {
	b.mu.Lock()
	k := key(vm)
	got, ok := b.budgets[k]
	switch {
	case !ok:
		b.mu.Unlock()
		return nil, fmt.Errorf("record kind on budget %s: there is none", BudgetName(vm.Name))
	case got.Unowned:
		b.mu.Unlock()
		return nil, fmt.Errorf("record kind on budget %s: it is not this VM's: %w", got.Name, backend.ErrRejected)
	}
	recorded := got.KindUnrecorded
	got.KindUnrecorded = false
	c := *got
	b.mu.Unlock()
	if recorded {
		b.changed(k)
	}
	return &c, nil
}

// DeleteBudget removes vm's budget; one already gone is not an error, and an Unowned one
// (not vm's) stays.
func (b *Backend) DeleteBudget(_ context.Context, vm backend.Owner) error {
	b.mu.Lock()
	k := key(vm)
	got, ok := b.budgets[k]
	if ok && got.Unowned {
		b.mu.Unlock()
		return nil
	}
	delete(b.budgets, k)
	b.mu.Unlock()
	if ok {
		b.changed(k)
	}
	return nil
}

// SetBudget puts a budget in place of vm's (nil removes it), as if someone had changed it.
func (b *Backend) SetBudget(vm backend.Owner, got *backend.Budget) {
	b.mu.Lock()
	k := key(vm)
	if got == nil {
		delete(b.budgets, k)
	} else {
		c := *got
		b.budgets[k] = &c
	}
	b.mu.Unlock()
	b.changed(k)
}

// budgetTable is the backend's budgets by VM, and how many it made (for their IDs).
type budgetTable = map[types.NamespacedName]*backend.Budget

// ParseBudget reads a budget written down as YAML, in the golden cases of the decision and
// for the plan command's --budget:
//
//	name: test-vm-block-eviction
//	id: pdb-uid-1
//	unowned: true   # an earlier VM's of the name, controlled by nothing (optional)
//	kindUnrecorded: true   # the VM's own, made by a version that did not record its kind (optional)
//
// Unknown keys are errors; a budget needs a name.
func ParseBudget(data []byte) (*backend.Budget, error) {
	var in backend.Budget
	dec := strictyaml.NewDecoder(data)
	if err := dec.Decode(&in); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the budget is empty")
		}
		return nil, errors.New(strings.ReplaceAll(budgetTerms.Replace(err.Error()), "\n", " "))
	}
	if in.Name == "" {
		return nil, errors.New("a budget needs a name")
	}
	return &in, nil
}

// budgetTerms rewrites yaml.v3's messages, which name Go types, in the terms of the file.
var budgetTerms = strings.NewReplacer(
	"yaml: unmarshal errors:\n  ", "", "\n  ", "; ", "yaml: ", "",
	" not found in type backend.Budget", " is not a key of a budget (name, id, unowned, kindUnrecorded)",
	" into backend.Budget", " into a budget (want a mapping)",
)
