package reconcile

import (
	"reflect"
	"slices"
	"testing"

	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestLedgerForgetsGoneVM: once a VM is deleted, the reconcile that finds it gone leaves
// nothing of it in any record of the ledger. Each record is filled for the VM first, every part
// of it, after a reconcile of the VM through the loop has filled what it does; a record of the
// ledger this test does not know of fails it, so that a record added to the ledger is checked
// to be forgotten with the others.
func TestLedgerForgetsGoneVM(t *testing.T) {
	w := newWorld(t, "create-new")
	c, r := newController(t, w, decision.UsagePolicy{})
	ctx := start(t, c)
	c.processNextItem(ctx)
	if got := r.last(); got != ResultSuccess {
		t.Fatalf("first reconcile: %s", got)
	}
	cachedAt(t, c, w, testVM)
	for c.queue.Len() > 0 {
		c.processNextItem(ctx)
	}

	vm, ok := c.view(testVM)
	if !ok {
		t.Fatal("the VM is not cached")
	}
	uid := vm.UID()
	l := c.ledger
	// records fills each record of the ledger, by its field's name, for testVM, every part of
	// it, and says which of its parts hold testVM.
	records := map[string]struct {
		fill  func()
		held  func() []string
		parts []string // what held says once filled
	}{
		"expect": {func() {
			l.expect.deleted(testVM, "server-id")
			l.expect.replaced.deleted(testVM, uid, &backend.Server{Name: "test-vm", ID: "server-id"})
		}, func() []string { return l.expect.held(testVM) }, []string{"expectation", "replaced"}},
		"disks": {func() {
			l.disks.changed(testVM, uid, nil, &backend.Disk{Name: "test-vm-root", Version: "1"})
		}, func() []string { return l.disks.held(testVM) }, []string{"expectation"}},
		"echoes": {func() {
			l.echoes.expect(testVM, []string{"1000"}, &written{rv: "1000"}, []string{vm.ResourceVersion()})
			l.echoes.released(testVM, uid)
		}, func() []string { return l.echoes.held(testVM) }, []string{"last", "released", "versions"}},
		"passes": {func() { l.passes.add(testVM) }, func() []string { return l.passes.held(testVM) }, []string{"passes"}},
		"notKept": {func() {
			l.notKept.note(testVM, "1000", schema.Status{Phase: schema.PhaseCreating})
		}, func() []string { return l.notKept.held(testVM) }, []string{"status"}},
	}
	fields := reflect.TypeFor[ledger]()
	for i := range fields.NumField() {
		name := fields.Field(i).Name
		x, ok := records[name]
		if !ok {
			t.Fatalf("ledger.%s: not known to this test; fill it here, for its forget to be checked", name)
		}
		x.fill()
		if held := x.held(); !slices.Equal(held, x.parts) {
			t.Fatalf("ledger.%s holds %v of the VM once filled, want %v", name, held, x.parts)
		}
	}

	// The informer drops the VM from its cache, then queues it: the reconcile taken next
	// finds it gone.
	if err := w.client.Tracker().Delete(vmGVR, testVM.Namespace, testVM.Name); err != nil {
		t.Fatal(err)
	}
	c.processNextItem(ctx)
	if _, ok := c.view(testVM); ok {
		t.Fatal("reconciled while the cache still held the VM")
	}
	for name, x := range records {
		if held := x.held(); len(held) > 0 {
			t.Errorf("ledger.%s still holds %v of the VM once it is gone", name, held)
		}
	}
}

// held names the parts of e that hold vm.
func (e *expectations) held(vm cache.ObjectName) []string {
	var out []string
	if e.expectTable.holds(vm) {
		out = append(out, "expectation")
	}
	e.replaced.mu.Lock()
	if _, ok := e.replaced.m[vm]; ok {
		out = append(out, "replaced")
	}
	e.replaced.mu.Unlock()
	return out
}

func (e *diskExpectations) held(vm cache.ObjectName) []string {
	if e.expectTable.holds(vm) {
		return []string{"expectation"}
	}
	return nil
}

func (t *expectTable[T]) holds(vm cache.ObjectName) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[vm]
	return ok
}

func (e *echoes) held(vm cache.ObjectName) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for name, ok := range map[string]bool{"versions": has(e.m, vm), "last": has(e.last, vm), "released": has(e.done, vm)} {
		if ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (p *passCounter) held(vm cache.ObjectName) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if has(p.m, vm) {
		return []string{"passes"}
	}
	return nil
}

func (n *notKept) held(vm cache.ObjectName) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if has(n.m, vm) {
		return []string{"status"}
	}
	return nil
}

func has[V any](m map[cache.ObjectName]V, vm cache.ObjectName) bool {
	_, ok := m[vm]
	return ok
}
