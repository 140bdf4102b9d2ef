package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/priority"
	"github.com/cloudnative-czs/vm-controller/schema"
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

// TestControllerRecordsBudgetKind: a Block VM whose budget an earlier version made without the
// VM's kind has it recorded by the reconcile that first sees it, with no Event and no other
// write; the reconciles after ask nothing of the budget. A VM whose budget records its kind,
// the steady case, asks nothing of it from the first.
func TestControllerRecordsBudgetKind(t *testing.T) {
	const name = "evict-block-kind-unrecorded"
	tests := map[string]struct {
		unrecorded bool     // the budget does not record the kind
		want       []string // the budget writes of all the reconciles
	}{
		"made by an earlier version": {unrecorded: true, want: []string{"record-kind"}},
		"recording the kind":         {unrecorded: false, want: nil},
	}
	for tname, tc := range tests {
		t.Run(tname, func(t *testing.T) {
			w := newWorld(t, name)
			vm := w.view(t, name)
			owner := ownerOf(vm)
			_, srv := decidecase.Read(t, caseFile(name))
			w.servers.Set(owner, srv)
			budget := decidecase.Budget(t, caseFile(name))
			budget.KindUnrecorded = tc.unrecorded
			w.servers.SetBudget(owner, budget)
			counted := &countedBudgets{Backend: w.servers}
			c, r := newControllerOver(t, w, counted, decision.UsagePolicy{})
			ctx := start(t, c)
			for round := range 3 {
				if round > 0 {
					c.queue.Add(cache.NewObjectName(owner.Namespace, owner.Name)) // a resync
				}
				for c.queue.Len() > 0 {
					c.processNextItem(ctx)
				}
				if got := r.last(); got != "success" {
					t.Fatalf("round %d: reconcile %q", round, got)
				}
			}
			if got := counted.all(); !slices.Equal(got, tc.want) {
				t.Errorf("budget writes %q, want %q", got, tc.want)
			}
			if b, _ := w.servers.ObserveBudget(owner); b == nil || b.ID != budget.ID || b.KindUnrecorded {
				t.Errorf("budget %+v, want %s recording the kind", b, budget.ID)
			}
			if evs := w.events(); len(evs) != 0 {
				t.Errorf("events %q, want none", evs)
			}
			if writes := w.writes(); len(writes) != 0 {
				t.Errorf("VM writes %+v, want none", writes)
			}
		})
	}
}

// countedBudgets is the memory backend that keeps the operations on budgets asked of it.
type countedBudgets struct {
	*memory.Backend
	mu  sync.Mutex
	ops []string
}

func (c *countedBudgets) count(op decision.BudgetOp) {
	c.mu.Lock()
	c.ops = append(c.ops, string(op))
	c.mu.Unlock()
}

func (c *countedBudgets) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ops)
}

func (c *countedBudgets) CreateBudget(ctx context.Context, vm backend.Owner) (*backend.Budget, error) {
	c.count(decision.CreateBudget)
	return c.Backend.CreateBudget(ctx, vm)
}

func (c *countedBudgets) AdoptBudget(ctx context.Context, vm backend.Owner) (*backend.Budget, error) {
	c.count(decision.AdoptBudget)
	return c.Backend.AdoptBudget(ctx, vm)
}

func (c *countedBudgets) RecordBudgetKind(ctx context.Context, vm backend.Owner) (*backend.Budget, error) {
	c.count(decision.RecordBudgetKind)
	return c.Backend.RecordBudgetKind(ctx, vm)
}

func (c *countedBudgets) DeleteBudget(ctx context.Context, vm backend.Owner) error {
	c.count(decision.DeleteBudget)
	return c.Backend.DeleteBudget(ctx, vm)
}

// TestApplyBudgetWithoutBackend: a plan's budget action on a backend that keeps no budgets
// is an error that says so, and nothing else of the plan is written after it.
func TestApplyBudgetWithoutBackend(t *testing.T) {
	w := newWorld(t, "evict-block-new")
	vm := w.view(t, "evict-block-new")
	a := w.applier()
	a.useBackend(serversOnly{w.servers})
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

// refusingBudgets is the memory backend whose budgets the cluster refuses (a policy engine
// that denies budgets which hold drains, a budget of the name another holds, RBAC without
// them).
type refusingBudgets struct{ *memory.Backend }

func (refusingBudgets) CreateBudget(context.Context, backend.Owner) (*backend.Budget, error) {
	return nil, fmt.Errorf("PodDisruptionBudget test-vm-block-eviction already exists and this VM does not control it: %w", backend.ErrRejected)
}

// TestApplyBudgetRefusedKeepsRequeue: a Block VM whose budget is refused (a Warning
// BudgetRefused says so), its failed server waiting out a backoff. The plan's time to look again (the backoff's end) comes back with the
// budget's error, and the loop queues the VM for it as well as for the error's backoff: a
// budget refused at every try, whose backoff grows to minutes, does not put the server's
// replacement off with it.
func TestApplyBudgetRefusedKeepsRequeue(t *testing.T) {
	const name = "failed-backoff-wait"
	w := newWorld(t, name)
	_, srv := decidecase.Read(t, caseFile(name))
	p := serverPolicy
	p.Eviction = schema.EvictionBlock
	a := w.applier()
	a.useBackend(refusingBudgets{w.servers})
	a.policy = p
	vm := cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields)
	w.servers.Set(ownerOf(vm), srv)
	plan := p.Decide(decision.Input{VM: vm, Server: srv, Now: now})
	if plan.RequeueAfter == 0 || plan.Budget == nil || plan.Budget.Op != decision.CreateBudget {
		t.Fatalf("plan %+v, want a budget's create and a time to look again", plan)
	}
	after, err := a.apply(context.Background(), vm, ownerOf(vm), srv, nil, plan)
	if !errors.Is(err, backend.ErrRejected) {
		t.Fatalf("apply: %v, want the budget's refusal", err)
	}
	if after != time.Duration(plan.RequeueAfter) {
		t.Errorf("after %v with the budget's error, want the plan's %v", after, time.Duration(plan.RequeueAfter))
	}
	if evs := w.events(); !slices.ContainsFunc(evs, func(e string) bool {
		return strings.HasPrefix(e, "Warning BudgetRefused The VM's disruption budget was refused (PodDisruptionBudget test-vm-block-eviction already exists")
	}) {
		t.Errorf("events %q, want the Warning BudgetRefused quoting the refusal", evs)
	}

	// Through the loop: the reconcile's error comes with the plan's time, which processNext
	// queues the VM for beside the error's backoff (the queue keeps the sooner).
	c, _ := newController(t, w, decision.UsagePolicy{})
	c.cfg.Backend, c.applier.policy, c.cfg.Policy = a.backend, p, p
	c.applier.useBackend(a.backend)
	c.opt = c.applier.opt
	ctx := start(t, c)
	after, err = c.reconcileRecovered(ctx, testVM, c.log, false)
	if !errors.Is(err, backend.ErrRejected) || after != time.Duration(plan.RequeueAfter) {
		t.Errorf("reconcile: after %v, error %v; want the plan's %v with the budget's refusal", after, err, time.Duration(plan.RequeueAfter))
	}

	// And a worker queues the VM for it: 1 s before the backoff's end (the clock moved on),
	// under an error backoff of an hour, the VM comes back.
	later := func() time.Time { return now.Add(time.Duration(plan.RequeueAfter) - time.Second) }
	c.cfg.Now, c.applier.now = later, later
	c.queue = priority.New[cache.ObjectName]("", workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Hour, time.Hour))
	c.queue.Add(testVM)
	c.processNextItem(ctx)
	if n := c.queue.NumRequeues(testVM); n != 1 {
		t.Fatalf("%d retries after the budget's error, want 1", n)
	}
	back := make(chan cache.ObjectName, 1)
	go func() {
		k, _ := c.queue.Get()
		back <- k
	}()
	select {
	case k := <-back:
		c.queue.Done(k)
	case <-time.After(30 * time.Second): // a guard against a hang only: the hour's backoff is the failure
		t.Fatal("the VM was not queued again for the plan's time, only after the error's backoff")
	}
}

// TestApplyBudgetRefusedWritesStatus: a Block VM whose budget is refused, asked once to
// migrate. The migration's delete is done and its status written though the budget fails
// (the error comes back for a retry), so that the retries do not delete the server again:
// one request, one delete, over rounds in which the world moves on (the old server goes, the
// next one runs on another node).
func TestApplyBudgetRefusedWritesStatus(t *testing.T) {
	const name = "evict-block-migrate-nobudget"
	w := newWorld(t, name)
	_, srv := decidecase.Read(t, caseFile(name))
	a := w.applier()
	b := refusingBudgets{w.servers}
	a.useBackend(b)
	deletes, errs := 0, 0
	for round := range 8 {
		vm := cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields) // as the API holds it
		owner := ownerOf(vm)
		if round == 0 {
			w.servers.Set(owner, srv)
		}
		s, _ := w.servers.Observe(owner)
		budget, _ := b.ObserveBudget(owner)
		plan := serverPolicy.Decide(decision.Input{VM: vm, Server: s, Budget: budget, Now: now})
		if plan.Server != nil && plan.Server.Op == decision.DeleteServer {
			deletes++
		}
		if _, err := a.apply(context.Background(), vm, owner, s, nil, plan); err != nil {
			if !errors.Is(err, backend.ErrRejected) {
				t.Fatalf("round %d: %v", round, err)
			}
			errs++
		}
		switch s, _ := w.servers.Observe(owner); {
		case s == nil:
		case s.Deleting:
			w.servers.Set(owner, nil)
		case s.State == backend.StatePending:
			s.State, s.Detail, s.Node = backend.StateReady, "Running", "node-b"
			w.servers.Set(owner, s)
		}
	}
	if deletes != 1 || errs == 0 {
		t.Errorf("one migration request deleted the server %d times (the budget refused %d times), want once", deletes, errs)
	}
	if got := status(t, w, testVM, "migration", "phase"); got != string(schema.MigrationSucceeded) {
		t.Errorf("migration %q, want %s", got, schema.MigrationSucceeded)
	}
}

// TestWayOutDeletesBudget: a deleted Block VM whose server is gone (deleted with
// kubectl delete --cascade=orphan, which takes the owner reference off its budget) has its
// budget deleted, with the Event DeletingBudget, before its finalizer comes off. When the
// delete fails for a time, the finalizer stays for the retry; when the backend refuses it for
// good, the VM goes all the same, with the Warning BudgetLeftBehind naming the budget and the
// refusal: a budget holds no data.
func TestWayOutDeletesBudget(t *testing.T) {
	const name = "evict-block-deleted-server-gone"
	tests := map[string]struct {
		backend   func(*memory.Backend) backend.Backend // the backend as the test sees it
		err       bool                                  // apply returns an error, for a retry
		finalizer bool                                  // the finalizer stays
		budget    bool                                  // the budget stays
		event     string                                // an Event recorded, type and reason
		note      []string                              // what its note says, besides
	}{
		"deleted": {backend: func(m *memory.Backend) backend.Backend { return m }, event: "Normal DeletingBudget"},
		"fails for a time": {backend: func(m *memory.Backend) backend.Backend { return failingBudgetDelete{m} },
			err: true, finalizer: true, budget: true},
		"refused": {backend: func(m *memory.Backend) backend.Backend { return refusingBudgetDelete{m} },
			budget: true, event: "Warning BudgetLeftBehind", note: []string{"test-vm-block-eviction", `"protect-pdbs.example.org" denied the request`}},
	}
	for tname, tc := range tests {
		t.Run(tname, func(t *testing.T) {
			w := newWorld(t, name)
			vm := w.view(t, name)
			owner := ownerOf(vm)
			w.servers.SetBudget(owner, decidecase.Budget(t, caseFile(name)))
			a := w.applier()
			a.useBackend(tc.backend(w.servers))
			budget, _ := w.servers.ObserveBudget(owner)
			plan := serverPolicy.Decide(decision.Input{VM: vm, Budget: budget, Now: now})
			_, err := a.apply(context.Background(), vm, owner, nil, nil, plan)
			if (err != nil) != tc.err {
				t.Errorf("apply = %v, want an error: %v", err, tc.err)
			}
			if finalizers := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(); (len(finalizers) != 0) != tc.finalizer {
				t.Errorf("finalizers %v, want the finalizer kept: %v", finalizers, tc.finalizer)
			}
			if left, _ := w.servers.ObserveBudget(owner); (left != nil) != tc.budget {
				t.Errorf("budget %+v, want it kept: %v", left, tc.budget)
			}
			evs := strings.Join(w.events(), "\n")
			switch {
			case tc.event == "" && evs != "":
				t.Errorf("events %q, want none", evs)
			case tc.event != "" && !strings.Contains(evs, tc.event+" "):
				t.Errorf("events %q, want %s", evs, tc.event)
			}
			for _, n := range tc.note {
				if !strings.Contains(evs, n) {
					t.Errorf("events %q do not say %q", evs, n)
				}
			}
		})
	}
}

// failingBudgetDelete is the memory backend whose budget deletes fail (the API server does
// not answer).
type failingBudgetDelete struct{ *memory.Backend }

func (failingBudgetDelete) DeleteBudget(context.Context, backend.Owner) error {
	return errors.New("delete budget: the server is currently unable to handle the request")
}

// refusingBudgetDelete is the memory backend whose budget deletes are refused for good (a
// Role without delete, an admission policy that protects budgets).
type refusingBudgetDelete struct{ *memory.Backend }

func (refusingBudgetDelete) DeleteBudget(context.Context, backend.Owner) error {
	return fmt.Errorf("%w: admission webhook \"protect-pdbs.example.org\" denied the request", backend.ErrRejected)
}
