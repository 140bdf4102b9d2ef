// Package memory is a backend that keeps servers in a table in memory. It serves the golden
// tests, the unit tests of the controller's loop and offline planning: it creates and deletes
// instantly and lets a test set a server's state, its usage and the errors Create and Delete
// return, so every decision and every way of carrying it out can be exercised without a
// cluster.
package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// Backend is an in-memory backend.Backend. It is safe for concurrent use.
type Backend struct {
	mu        sync.Mutex
	servers   map[types.NamespacedName]*backend.Server
	usage     map[types.NamespacedName]usage
	created   int
	notify    func(types.NamespacedName)
	createErr error
	deleteErr error
	resize    ResizeAnswer                           // how Resize answers (resize.go)
	disks     disks                                  // the disks of backend.Disks (disk.go)
	graces    map[types.NamespacedName]time.Duration // the grace periods of DeleteGracefully
	// budgets are the disruption budgets of backend.Budgets (budget.go), madeBudgets how
	// many it created.
	budgets     budgetTable
	madeBudgets int
	// departed remembers the servers that went while disrupted (backend.Departures, gone.go).
	departed map[types.NamespacedName]departed
	// hosts are the hosts of backend.Rooms (room.go); nil: none known.
	hosts *backend.Hosts
}

// usage is what Usage reports for one VM.
type usage struct {
	u   backend.Usage
	err error
}

// New returns an empty in-memory backend.
func New() *Backend {
	return &Backend{servers: map[types.NamespacedName]*backend.Server{}, usage: map[types.NamespacedName]usage{},
		disks: disks{table: map[types.NamespacedName]*backend.Disk{}, vms: map[types.NamespacedName]types.UID{}, fixed: map[string]bool{}}, budgets: budgetTable{},
		departed: map[types.NamespacedName]departed{}}
}

var (
	_ backend.Backend     = (*Backend)(nil)
	_ backend.UsageReader = (*Backend)(nil)
)

func key(vm backend.Owner) types.NamespacedName {
	return types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}
}

// Start records notify; the table is always in sync.
func (b *Backend) Start(_ context.Context, notify func(types.NamespacedName)) (func() bool, error) {
	b.mu.Lock()
	b.notify = notify
	b.mu.Unlock()
	return func() bool { return true }, nil
}

// Observe returns a copy of vm's server, or nil.
func (b *Backend) Observe(vm backend.Owner) (*backend.Server, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.servers[key(vm)]
	if !ok {
		return nil, nil
	}
	c := *s
	return &c, nil
}

// Create adds a Pending server named after the VM with an ID that counts creations, so that a
// replacement is told apart from the server it replaces. A server of a spec with Disk mounts
// the VM's disk (DiskName), whether or not it exists yet, as a pod names its claim.
func (b *Backend) Create(_ context.Context, vm backend.Owner, spec backend.Spec) (*backend.Server, error) {
	b.mu.Lock()
	if err := b.createErr; err != nil {
		b.mu.Unlock()
		return nil, err
	}
	k := key(vm)
	if s, ok := b.servers[k]; ok {
		c := *s
		b.mu.Unlock()
		return &c, nil
	}
	b.created++
	delete(b.departed, k) // a server of vm comes: nothing gone is remembered past it
	s := &backend.Server{Name: vm.Name + "-server", ID: fmt.Sprintf("mem-%d", b.created),
		State: backend.StatePending, Detail: string(backend.StatePending), Spec: spec}
	if spec.Disk {
		s.Disk = DiskName(vm.Name)
	}
	b.servers[k] = s
	c := *s
	b.mu.Unlock()
	b.changed(k)
	return &c, nil
}

// Delete marks vm's server as being deleted, as a real backend's graceful deletion would;
// Set(vm, nil) then removes it.
func (b *Backend) Delete(_ context.Context, vm backend.Owner) error {
	b.mu.Lock()
	if err := b.deleteErr; err != nil {
		b.mu.Unlock()
		return err
	}
	k := key(vm)
	s, ok := b.servers[k]
	if ok {
		s.Deleting = true
	}
	b.mu.Unlock()
	if ok {
		b.changed(k)
	}
	return nil
}

// DeleteGracefully is Delete, recording the grace period asked for (Grace), as a real
// backend would pass it on (backend.GracefulDeleter).
func (b *Backend) DeleteGracefully(ctx context.Context, vm backend.Owner, grace time.Duration) error {
	b.mu.Lock()
	if b.graces == nil {
		b.graces = map[types.NamespacedName]time.Duration{}
	}
	b.graces[key(vm)] = grace
	b.mu.Unlock()
	return b.Delete(ctx, vm)
}

// Grace is the grace period of the last DeleteGracefully of vm's server; false when none.
func (b *Backend) Grace(vm backend.Owner) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g, ok := b.graces[key(vm)]
	return g, ok
}

// Set puts a server in place of vm's (nil removes it), as if the backend had changed it. A
// server removed while it carries a Disruption is remembered as gone while disrupted
// (LastGone), until a server of vm comes.
func (b *Backend) Set(vm backend.Owner, s *backend.Server) {
	b.mu.Lock()
	k := key(vm)
	if s == nil {
		if old, ok := b.servers[k]; ok {
			b.leftLocked(vm, old)
		}
		delete(b.servers, k)
	} else {
		delete(b.departed, k)
		c := *s
		b.servers[k] = &c
	}
	b.mu.Unlock()
	b.changed(k)
}

// FailCreate makes every Create return err, until it is called again with nil: a refusal
// (wrap backend.ErrRejected) or a transient failure of the backend.
func (b *Backend) FailCreate(err error) {
	b.mu.Lock()
	b.createErr = err
	b.mu.Unlock()
}

// FailDelete makes every Delete return err, until it is called again with nil.
func (b *Backend) FailDelete(err error) {
	b.mu.Lock()
	b.deleteErr = err
	b.mu.Unlock()
}

// SetUsage sets what Usage reports for vm's server: a sample, or (err not nil) why there is
// none.
func (b *Backend) SetUsage(vm backend.Owner, u backend.Usage, err error) {
	b.mu.Lock()
	b.usage[key(vm)] = usage{u, err}
	b.mu.Unlock()
}

// Usage reports what SetUsage set for vm; backend.ErrNoUsage when it set nothing.
func (b *Backend) Usage(_ context.Context, vm backend.Owner) (backend.Usage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, ok := b.usage[key(vm)]
	if !ok {
		return backend.Usage{}, fmt.Errorf("server of %s: %w", key(vm), backend.ErrNoUsage)
	}
	return u.u, u.err
}

func (b *Backend) changed(k types.NamespacedName) {
	b.mu.Lock()
	n := b.notify
	b.mu.Unlock()
	if n != nil {
		n(k)
	}
}
