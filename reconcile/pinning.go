package reconcile

import (
	"context"
	"fmt"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// pinned fills in, for a live VM whose migration was asked for and not yet acted on, whether
// its disk is bound to its node and the nodes its storage can be reached from
// (backend.DiskPinning): the decision refuses to move a VM whose disk cannot follow it, or
// whose next server no node both takes and reaches the disk from (decision/room.go). It
// reads past the backend's caches, so it asks only then; otherwise disk is returned as it
// is. The disk from the cache is never changed: a copy carries it. Under --root-disk ephemeral a new server mounts no disk, so none pins it (and the
// controller may not read claims and volumes there: only their list, watch, patch and
// delete); nor does a deleted VM, which moves nowhere: asking would fail its way out.
func (c *Controller) pinned(ctx context.Context, vm schema.VirtualMachine, owner backend.Owner, disk *backend.Disk) (*backend.Disk, error) {
	if disk == nil || c.cfg.Policy.RootDisk == decision.RootDiskEphemeral || vm.Deleting() || !newMigration(vm) {
		return disk, nil
	}
	if c.opt.pinning == nil {
		return disk, nil
	}
	pin, err := c.opt.pinning.DiskPinned(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("tell whether the disk can follow a migration: %w", err)
	}
	return pinnedCopy(disk, pin), nil
}

// pinnedCopy is a copy of disk, from the cache, that says pin.
func pinnedCopy(disk *backend.Disk, pin backend.Pin) *backend.Disk {
	d := *disk
	d.Pinned, d.NodeAffinity = pin.Why, pin.NodeAffinity
	return &d
}

// reached reads, for a plan that replaces a running server for a new spec (ReplacingServer),
// the nodes the VM's disk can be reached from (reach), and decides again with them: the room
// check then counts only those (decision/room.go), and a running server whose next one no node
// both takes and reaches the disk from is kept, with RestartRequired saying why, rather than
// replaced by one that never starts (a placement that leaves out the node of a TopoLVM or
// local volume, or the zone of a zonal disk). For every other plan it returns the input and
// the plan as they are, reading nothing, so that the common path costs nothing more. A plan
// kept by the record of an earlier such decision replaces nothing, and reads nothing either.
func (c *Controller) reached(ctx context.Context, in decision.Input, owner backend.Owner, plan decision.Plan) (decision.Input, decision.Plan, error) {
	if !replacesRunning(in.Server, plan) {
		return in, plan, nil
	}
	in, read, err := reach(ctx, c.opt.pinning, c.cfg.Policy.RootDisk, in, owner)
	if err != nil {
		return in, plan, fmt.Errorf("read the nodes the disk can be reached from before replacing the server: %w", err)
	}
	if !read {
		return in, plan, nil // reached from every node, or not looked up: decided on that already
	}
	return in, c.cfg.Policy.Decide(in), nil
}

// reach is in with the nodes the VM's disk can be reached from (its volume's required node
// affinity, read past the caches, which keep no volumes: backend.DiskPinning) on a copy of its
// disk, for a room check about to weigh a server of the VM elsewhere: a running server's
// replacement (reached), a resize the API server refused (applier.resizeRefused). read says
// whether it found one that binds the disk to some nodes; otherwise in is returned as it is.
// It reads nothing when the room check has nothing to give it to, or nothing to read: under
// --root-disk ephemeral (a new server mounts no disk, and the controller may not read claims
// and volumes), for a VM being deleted or without a bound disk of its own, when the hosts are
// unknown, and when the disk's node affinity was read already (a migration's, pinned).
func reach(ctx context.Context, pinning backend.DiskPinning, mode decision.RootDiskMode, in decision.Input, owner backend.Owner) (decision.Input, bool, error) {
	disk := in.Disk
	if pinning == nil || mode == decision.RootDiskEphemeral || in.Hosts == nil || in.VM.Deleting() ||
		disk == nil || disk.Phase != backend.DiskBound || !disk.Owner.Mine() || disk.Deleting || disk.NodeAffinity != nil {
		return in, false, nil
	}
	pin, err := pinning.DiskPinned(ctx, owner)
	if err != nil {
		return in, false, err
	}
	if pin.NodeAffinity == nil {
		return in, false, nil
	}
	in.Disk = pinnedCopy(disk, pin)
	return in, true, nil
}

// replacesRunning reports whether plan deletes srv, running, for a server of a new spec: the
// replacement the room check weighs (decision/room.go), not a restart, a migration or a
// stop, which have checks, or none, of their own.
func replacesRunning(srv *backend.Server, plan decision.Plan) bool {
	a := plan.Server
	return a != nil && a.Op == decision.DeleteServer && a.Event.Reason == decision.ReasonReplacingServer &&
		srv != nil && !srv.Deleting && (srv.State == backend.StateReady || srv.State == backend.StateStarting)
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
