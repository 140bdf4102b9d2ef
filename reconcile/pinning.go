package reconcile

import (
	"context"
	"fmt"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// pinned fills in, for a live VM whose migration was asked for and not yet acted on, whether
// its disk is bound to its node (backend.DiskPinning): the decision refuses to move a VM whose
// disk cannot follow it. It reads past the backend's caches, so it asks only then; otherwise
// disk is returned as it is. The disk from the cache is never changed: a copy carries it.
// Under --root-disk ephemeral a new server mounts no disk, so none pins it (and the
// controller may not read claims and volumes there: only their list, watch, patch and
// delete); nor does a deleted VM, which moves nowhere: asking would fail its way out.
func (c *Controller) pinned(ctx context.Context, vm schema.VirtualMachine, owner backend.Owner, disk *backend.Disk) (*backend.Disk, error) {
	if disk == nil || c.cfg.Policy.RootDisk == decision.RootDiskEphemeral || vm.Deleting() || !newMigration(vm) {
		return disk, nil
	}
	if c.opt.pinning == nil {
		return disk, nil
	}
	why, err := c.opt.pinning.DiskPinned(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("tell whether the disk can follow a migration: %w", err)
	}
	d := *disk
	d.Pinned = why
	return &d, nil
}

// newMigration reports whether vm asks for a migration the controller has not acted on.
func newMigration(vm schema.VirtualMachine) bool {
	req := vm.MigrateRequested()
	if req == "" {
		return false
	}
	m := vm.Status().Migration
	return m == nil || m.RequestedAt != req
}
