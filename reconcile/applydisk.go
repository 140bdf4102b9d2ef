package reconcile

import (
	"context"
	"encoding/json"
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
// same way, and says so, until the call is allowed (diskForbidden). It returns the disk what
// follows in the plan is decided on, should it be refused too: seen, or, for a growth the API
// server refused, seen with that refusal (decision.Policy.GrowthRefused). in is what the plan was decided on;
// seen is its Disk.
func (a applier) applyDisk(ctx context.Context, in decision.Input, owner backend.Owner, plan *decision.Plan) (*backend.Disk, error) {
	vm, seen := in.VM, in.Disk
	act := plan.Disk
	disks := a.opt.disks
	if disks == nil {
		return seen, fmt.Errorf("%s disk: the backend keeps no disks", act.Op)
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
		return seen, fmt.Errorf("act on disk: unknown operation %q", act.Op)
	}
	switch {
	case errors.Is(err, backend.ErrRejected) && plan.Finalizer == decision.RemoveFinalizer && releasesOwned(act, seen, err):
		*plan = a.policy.DiskReleaseRefused(a.refusing(in), err.Error())
		return seen, nil
	case errors.Is(err, backend.ErrRejected) && plan.Finalizer == decision.RemoveFinalizer:
		return seen, nil
	case errors.Is(err, backend.ErrRejected) && act.Op == decision.RecordDiskKind:
		// Bookkeeping for a disk an earlier version made (its kind, for adoption after an
		// orphaning delete): a policy that refuses it refuses nothing the VM needs, so the
		// VM is not reported Failed over it. Asked again at the VM's next reconcile.
		a.warnRefused(vm, "record the kind on disk "+seen.Name, err)
		return seen, nil
	case errors.Is(err, backend.ErrRejected) && act.Op == decision.ExpandDisk && !errors.Is(err, backend.ErrDiskConflict):
		// Decided again as a growth the storage refused, the rest of the plan carried
		// out (decision.Policy.GrowthRefused).
		var refused *backend.Disk
		*plan, refused = a.policy.GrowthRefused(a.refusing(in), *plan, err.Error())
		return refused, nil
	case errors.Is(err, backend.ErrRejected):
		*plan = a.policy.DiskRejected(a.refusing(in), err.Error(), errors.Is(err, backend.ErrDiskConflict))
		return seen, nil
	case forbidden(err) && plan.Finalizer == decision.RemoveFinalizer:
		*plan = a.diskForbidden(in, string(act.Op), err)
		return seen, nil
	case err != nil:
		return seen, fmt.Errorf("%s disk: %w", act.Op, err)
	}
	if act.Op == decision.DeleteDisk {
		a.disks.deleted(key, vm.UID(), seen)
	} else {
		a.disks.changed(key, vm.UID(), seen, got)
	}
	// The Event names the disk as the action found it (relatedDisk), or as made.
	about := seen
	if act.Op == decision.CreateDisk {
		plan.CreatedDisk(got)
		about = got
	}
	a.recordRelated(vm, a.relatedDisk(vm, about), act.Event)
	return seen, nil
}

// asDecided makes sure that vm is, on the API server, still at rv, the resourceVersion the
// plan was decided on (or its own writes gave it), and returns it as the API server answered.
// applyPlan asks it before a disk's delete, and before an adoption that makes the VM the
// disk's owner (takesDisk): a VM deleted since, and maybe made again under its name, does not
// get the disk, which the garbage collector would then delete. The decision reads the reclaim policy from the VM
// cache, and the disk's delete is conditional on the disk alone (its UID and version): a
// policy set to Retain on a Terminating VM (the API server accepts it, and DiskReleaseRefused
// tells users to do so) that the cache had yet to show when the server went would be
// overridden by the cache's older Delete, and the owner's data deleted. A VM changed since is
// an apierrors.IsConflict error: the loop decides again, on the VM as it now is, after this
// VM's own backoff and with a debug log, as for any conditional write the cache was behind.
//
// The check is a merge patch of the resourceVersion alone, a write conditional on it that
// changes nothing: the API server answers a patch that leaves the VM as it is with no write
// (no new resourceVersion, no watch event, its managedFields as they were), after making sure
// of the VM in etcd, as consistent as a read. A GET would say the same but needs a verb the
// controller's role does not have (its rules on VMs are list, watch and patch): a controller
// upgraded before its role would be forbidden it, and every deleted VM held. It costs one
// request per disk deleted or adopted as owned, none on any other reconcile.
//
// A window is left, between this answer and the disk's delete (one round trip): a policy set
// to Retain in it is too late. No API makes a write of one object conditional on another's
// version, so that window cannot be closed; the policy that counts is the one the VM has when
// the controller checks it, just before it deletes the disk (docs/disks.md).
func (a applier) asDecided(ctx context.Context, vm schema.VirtualMachine, rv string) (written, error) {
	var p preconditionPatch
	p.Metadata.ResourceVersion = rv
	patch, err := json.Marshal(&p)
	if err != nil {
		return written{}, fmt.Errorf("render the precondition of the disk's delete: %w", err)
	}
	w, err := a.writer.patch(ctx, vm.Namespace(), vm.Name(), patch)
	if err != nil {
		return written{}, fmt.Errorf("make sure the VM is as decided on before its disk is deleted: %w", err)
	}
	return w, nil
}

// preconditionPatch is a merge patch of the resourceVersion alone (asDecided).
type preconditionPatch struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
}

// forbidden reports whether err is the API server's Forbidden, of a call the controller's
// permissions (or an admission policy) do not let through, but for a namespace being deleted.
func forbidden(err error) bool {
	return apierrors.IsForbidden(err) && !namespaceGoing(err)
}

// diskForbidden is the plan for a deleted VM whose way out was forbidden call on its disk
// (decision.Policy.DiskForbidden), in being what that way out was decided on: it waits, and
// says why. Each look logs a warning too, once a minute per VM at most: the status is the
// user's word, the log the operator's.
func (a applier) diskForbidden(in decision.Input, call string, err error) decision.Plan {
	vm := in.VM
	if a.log != nil {
		a.log.Warn("Disk call forbidden; the deleted VM waits", "vm", vm.Namespace()+"/"+vm.Name(), "call", call, "err", err)
	}
	return a.policy.DiskForbidden(a.refusing(in), call, err.Error())
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

// diskPolicy is p for a controller whose backend has the optional interfaces o: a backend that
// keeps no disks (o.disks, the one assertion of backend.Disks, which observing and applying a
// disk also use) can only give each server its own root disk, whatever p says.
func diskPolicy(o optional, p decision.Policy, log *slog.Logger) decision.Policy {
	if o.disks == nil && p.RootDisk != decision.RootDiskEphemeral {
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
	if c.opt.disks == nil {
		return nil, nil
	}
	d, err := c.opt.disks.ObserveDisk(owner)
	if err != nil {
		return nil, fmt.Errorf("observe disk: %w", err)
	}
	return c.ledger.disks.adjust(key, owner.UID, d), nil
}

// confirmsDisk reports whether the way out of a deleted VM whose disk the cache shows as d
// makes sure of that disk with the API server by itself: a disk the VM owns, which the plan
// deletes or releases in a call conditional on the disk as seen (refused if the cache was
// behind, and then decided again), or one already being deleted, which nothing brings back.
// Any other view (no disk, one kept, whose release changes nothing and so asks nothing,
// another's, one the VM may adopt) would let the VM go on the cache's word alone, and the
// cache may be behind a change that made the disk the VM's: the loop reads it first
// (diskNotCached).
func confirmsDisk(d *backend.Disk) bool {
	return d != nil && (d.Owner == backend.DiskOwned || d.Deleting)
}
