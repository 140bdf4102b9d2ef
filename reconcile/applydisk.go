package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// applyDisk carries out the plan's action on the VM's disk (backend.Disks), which comes before
// the server's: a disk is there before the server that mounts it. A refusal that retrying
// cannot fix replaces the plan with the refusal's (DiskRejected: the VM Failed, no server
// action). On the way out a refusal lets the VM go (a disk that is no longer the VM's is
// none of its business; a delete refused leaves the disk where it is), except a refused
// release of a disk the VM still owns: the garbage collector would delete that disk with the
// VM, so the VM stays, its finalizer on, until the release is let through
// (DiskReleaseRefused). A call the backend was forbidden on the way out (its Forbidden, not
// a refusal: a delete, or the read an update makes of a disk the cache lags) holds the VM the
// same way, and says so, until the call is allowed (diskForbidden).
func (a applier) applyDisk(ctx context.Context, vm schema.VirtualMachine, owner backend.Owner, srv *backend.Server, gone *backend.Gone, seen *backend.Disk, plan *decision.Plan) error {
	act := plan.Disk
	disks, ok := a.backend.(backend.Disks)
	if !ok {
		return fmt.Errorf("%s disk: the backend keeps no disks", act.Op)
	}
	key := cache.NewObjectName(owner.Namespace, owner.Name)
	var got *backend.Disk
	var err error
	switch act.Op {
	case decision.CreateDisk:
		got, err = disks.CreateDisk(ctx, owner, *act.Spec)
	case decision.AdoptDisk, decision.ExpandDisk, decision.ReleaseDisk, decision.RecordDiskKind:
		// Conditional on, and worked out from, the disk as the decision saw it: a disk
		// changed since (marked kept, let go of, taken) is not adopted, released, grown or
		// written its kind.
		got, err = disks.UpdateDisk(ctx, owner, seen, *act.Spec)
	case decision.DeleteDisk:
		// Conditional on the disk as the decision saw it (its ID and Version), not as the
		// backend shows it now: a disk changed since (kept, let go of) is not deleted.
		err = disks.DeleteDisk(ctx, owner, seen)
	default:
		return fmt.Errorf("act on disk: unknown operation %q", act.Op)
	}
	switch {
	case errors.Is(err, backend.ErrRejected) && plan.Finalizer == decision.RemoveFinalizer && releasesOwned(act, seen, err):
		*plan = a.policy.DiskReleaseRefused(vm, seen.Name, err.Error(), a.now())
		return nil
	case errors.Is(err, backend.ErrRejected) && plan.Finalizer == decision.RemoveFinalizer:
		return nil
	case errors.Is(err, backend.ErrRejected) && act.Op == decision.RecordDiskKind:
		// Bookkeeping for a disk an earlier version made (its kind, for adoption after an
		// orphaning delete): a policy that refuses it refuses nothing the VM needs, so the
		// VM is not reported Failed over it. Asked again at the VM's next reconcile.
		a.warnRefused(vm, "record the kind on disk "+seen.Name, err)
		return nil
	case errors.Is(err, backend.ErrRejected):
		*plan = a.policy.DiskRejected(vm, srv, gone, err.Error(), errors.Is(err, backend.ErrDiskConflict), a.now())
		return nil
	case forbidden(err) && plan.Finalizer == decision.RemoveFinalizer:
		*plan = a.diskForbidden(vm, string(act.Op), err)
		return nil
	case err != nil:
		return fmt.Errorf("%s disk: %w", act.Op, err)
	}
	if act.Op == decision.DeleteDisk {
		a.disks.deleted(key, seen)
	} else {
		a.disks.changed(key, seen, got)
	}
	if act.Op == decision.CreateDisk {
		plan.CreatedDisk(got)
	}
	a.record(vm, act.Event)
	return nil
}

// forbidden reports whether err is the API server's Forbidden, of a call the controller's
// permissions (or an admission policy) do not let through, but for a namespace being deleted.
func forbidden(err error) bool {
	return apierrors.IsForbidden(err) && !namespaceGoing(err)
}

// diskForbidden is the plan for a deleted VM whose way out was forbidden call on its disk
// (decision.Policy.DiskForbidden): it waits, and says why. Each look logs a warning too, once
// a minute per VM at most: the status is the user's word, the log the operator's.
func (a applier) diskForbidden(vm schema.VirtualMachine, call string, err error) decision.Plan {
	if a.log != nil {
		a.log.Warn("Disk call forbidden; the deleted VM waits", "vm", vm.Namespace()+"/"+vm.Name(), "call", call, "err", err)
	}
	return a.policy.DiskForbidden(vm, call, err.Error(), a.now())
}

// releasesOwned reports whether act, refused with err, was the release of a disk the VM
// owns: one the backend does not call another's (backend.ErrDiskConflict), which still
// carries the VM's owner reference.
func releasesOwned(act *decision.DiskAction, seen *backend.Disk, err error) bool {
	return act.Op == decision.ReleaseDisk && seen != nil && seen.Owner == backend.DiskOwned && !errors.Is(err, backend.ErrDiskConflict)
}

// diskEventActions are the actions of the disk's Events (eventAction).
var diskEventActions = map[string]string{
	decision.ReasonCreatingDisk:  "CreateDisk",
	decision.ReasonAdoptingDisk:  "UpdateDisk",
	decision.ReasonRetainingDisk: "UpdateDisk",
	decision.ReasonResizingDisk:  "UpdateDisk",
	decision.ReasonDiskRetained:  "UpdateDisk",
	decision.ReasonDeletingDisk:  "DeleteDisk",
}

// diskPolicy is p for a controller on b: a backend that keeps no disks (backend.Disks) can only
// give each server its own root disk, whatever p says.
func diskPolicy(b backend.Backend, p decision.Policy, log *slog.Logger) decision.Policy {
	if _, ok := b.(backend.Disks); !ok && p.RootDisk != decision.RootDiskEphemeral {
		log.Warn("The backend keeps no disks: each server has a root disk of its own, which goes with it", "rootDisk", p.RootDisk)
		p.RootDisk = decision.RootDiskEphemeral
	}
	return p
}

// observeDisk is the disk of the VM's name as the controller knows it: the backend's cache,
// unless it lags an action taken here; nil when the backend keeps no disks. It is read under
// --root-disk ephemeral too: a VM may still have the disk made for it under claim, which the
// decision keeps or deletes as the VM's reclaim policy says (a cache read, nil for a VM
// without one).
func (c *Controller) observeDisk(key cache.ObjectName, owner backend.Owner) (*backend.Disk, error) {
	disks, ok := c.cfg.Backend.(backend.Disks)
	if !ok {
		return nil, nil
	}
	d, err := disks.ObserveDisk(owner)
	if err != nil {
		return nil, fmt.Errorf("observe disk: %w", err)
	}
	return c.disks.adjust(key, d), nil
}
