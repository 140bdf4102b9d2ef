package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The two reads around a round's decision: gather builds what it decides on, from the
// backend's caches and the controller's expectations; confirm reads past the caches the few
// things a plan may not be carried out on the caches' word alone, and decides again on what it
// read. Both return what they built by value: they run on every round of every reconcile.

// gathered is what one round decides on, and what the loop does with its outcome.
type gathered struct {
	in    decision.Input
	owner backend.Owner
	// unwatched: the server was read past a cache that never shows it (serverNotCached), and
	// the VM is looked at again at unwatchedPoll.
	unwatched bool
	// wait, if not zero: the status names a server the cache has yet to show and the backend
	// has; nothing is decided, and the VM is looked at again after wait, should the cache's
	// add of the server not bring it back first.
	wait time.Duration
}

// gather reads what a round decides on about vm: its server (expectations' adjust, past the
// cache when the cache lacks the server the status names), what is remembered of a server gone,
// its disk, its budget and the room of the hosts. going: the VM's namespace is being deleted.
func (c *Controller) gather(ctx context.Context, key cache.ObjectName, vm schema.VirtualMachine, going bool, log *slog.Logger) (gathered, error) {
	owner := ownerOf(vm)
	srv, err := c.cfg.Backend.Observe(owner)
	if err != nil {
		return gathered{}, fmt.Errorf("observe server: %w", err)
	}
	srv = c.ledger.expect.adjust(key, srv)
	unwatched := false
	if srv == nil && !going { // in a namespace being deleted, its servers go whatever the cache says
		read, err := c.serverNotCached(ctx, vm, owner, log)
		switch {
		case err != nil:
			return gathered{}, err
		case read != nil && read.Unwatched:
			// The cache never will show it: decided on as read, and looked at again
			// at unwatchedPoll, since none of its changes brings the VM back.
			srv, unwatched = read, true
		case read != nil:
			return gathered{owner: owner, wait: notCachedWait}, nil // the server's add in the cache brings the VM back sooner
		}
	}
	var gone *backend.Gone
	if c.opt.departures != nil && srv == nil {
		gone = c.opt.departures.LastGone(owner) // a server evicted and gone before a decision saw it
	}
	// A server this controller deleted to replace it, going or gone, whose status write
	// was lost (replaced.go).
	gone = c.ledger.expect.replaced.gone(key, owner.UID, srv, gone)
	disk, err := c.observeDisk(key, owner)
	if err != nil {
		return gathered{}, err
	}
	if disk, err = c.pinned(ctx, vm, owner, disk); err != nil {
		return gathered{}, err
	}
	budget, err := c.observeBudget(owner)
	if err != nil {
		return gathered{}, err
	}
	// The hosts, when the backend knows them (nodes watched): one load of a snapshot the
	// backend makes anew as nodes change; the decision matches them against a spec only on
	// the way to a new server (decision/room.go).
	var hosts *backend.Hosts
	if c.opt.rooms != nil {
		hosts = c.opt.rooms.Hosts()
	}
	// What this round decides on, gathered once: a read past the cache (confirm) changes
	// only what it read, and the applier decides a refusal of the plan on the same input.
	in := decision.Input{VM: vm, Server: srv, Gone: gone, Disk: disk, Budget: budget, Hosts: hosts, Now: c.cfg.Now()}
	return gathered{in: in, owner: owner, unwatched: unwatched}, nil
}

// confirm reads past the backend's caches what plan, decided on in, may not be carried out on
// the caches' word alone, and decides again on what it read: the server and the disk of a VM
// about to be let go, a disk the status reported that the cache says is gone, and the nodes
// the disk of a running server about to be replaced can be reached from. It returns
// the input as read and the plan decided on it. going: the VM's namespace is being deleted,
// which takes its servers and its disk whatever the caches say.
func (c *Controller) confirm(ctx context.Context, in decision.Input, owner backend.Owner, plan decision.Plan, going bool,
	log *slog.Logger) (decision.Input, decision.Plan, error) {
	// A running server about to be replaced: the nodes its disk can be reached from, which
	// the room check counts alone (pinning.go).
	in, plan, err := c.reached(ctx, in, owner, plan)
	if err != nil {
		return in, plan, err
	}
	if plan.Finalizer == decision.RemoveFinalizer && !going && in.Server == nil {
		// The VM is to be let go on the cache's word that it has no server: confirmed
		// past the cache first. A server created a moment ago that the cache has not
		// shown yet (the VM deleted during its create), or one the cache never shows
		// (unwatched), would be left running without the VM that owns it, and with
		// --cascade=orphan for good. One read per VM let go, none on a live VM's
		// reconcile; a VM whose namespace goes leaves its servers to that deletion.
		read, err := c.readServer(ctx, owner)
		if err != nil {
			return in, plan, fmt.Errorf("confirm the server is gone: %w", err)
		}
		if read != nil {
			in.Server = read
			plan = c.cfg.Policy.Decide(in)
		}
	}
	if plan.Finalizer == decision.RemoveFinalizer && !going && !confirmsDisk(in.Disk) {
		// The VM is to be let go on the cache's word that it owns no disk (none seen,
		// one kept, another's, one it may adopt): confirmed past the cache first, since
		// the garbage collector deletes the disk of a deleted VM that still owns it,
		// and a cache behind the VM's own adoption of its disk shows it as it was.
		// Decided again on the disk as read. One read per such VM let go, none on a live
		// VM's reconcile; a VM whose namespace goes leaves its disk to that deletion. A
		// read the controller may not make holds the VM, which says why, until it may
		// (diskForbidden).
		read, err := c.diskNotCached(ctx, owner, in.Disk, log)
		switch {
		case forbidden(err):
			plan = c.applier.diskForbidden(in, "read", err)
		case err != nil:
			return in, plan, err
		case read != nil || in.Disk != nil: // none seen and none read: decided on that already
			in.Disk = read
			plan = c.cfg.Policy.Decide(in)
		}
	}
	if in.Disk == nil && plan.DiskGone() {
		// The plan says the disk the status reported is gone, on the cache's word: a claim
		// whose label someone took off is out of the pods backend's cache, with its data.
		// Confirmed past the cache (one read, only when a reported disk is missing). Found,
		// a disk to be made is its create, which puts the label back, without the Warning
		// that its data went; a stopped VM's is decided on as read, and its next start
		// puts the label back. A read that fails leaves the plan as it is.
		var read *backend.Disk
		var err error
		if c.opt.disks != nil {
			read, err = c.opt.disks.ReadDisk(ctx, owner)
		}
		switch {
		case err != nil:
			log.Debug("Could not confirm the disk is gone", "err", err)
		case read != nil && read.Owner.Mine() && plan.Disk != nil && plan.Disk.Op == decision.CreateDisk:
			plan.Disk.Event = decision.Event{}
		case read != nil:
			in.Disk = read
			plan = c.cfg.Policy.Decide(in)
		}
	}
	return in, plan, nil
}

// notCachedWait is how long a VM whose server is not in the cache yet waits before it is
// looked at again, should the cache's add of the server not bring it back first.
const notCachedWait = 5 * time.Second

// serverNotCached returns the server vm's status names when the cache of servers does not
// show it but the backend has it; nil when it has none. The cache of servers may lag the cache
// of VMs (VMs restored before their servers, a watch of servers that restarted): deciding on
// that cache would report the server missing, flip the VM to Creating and create the server
// again, and the backend's Delete and Resize act on what its cache shows; so nothing is
// decided until the cache has the server, unless it never will (Unwatched: a pod whose label
// was taken off), which the caller decides on as read, with a warning that says how to put
// the label back. It reads past the cache only when the status names a server the cache
// lacks: a server really gone costs one read. Backends without backend.Reader are taken at
// their cache's word.
func (c *Controller) serverNotCached(ctx context.Context, vm schema.VirtualMachine, owner backend.Owner, log *slog.Logger) (*backend.Server, error) {
	name := decision.ClaimedServer(vm.Status())
	if name == "" {
		return nil, nil
	}
	srv, err := c.readServer(ctx, owner)
	switch {
	case err != nil:
		return nil, fmt.Errorf("confirm server %s is missing: %w", name, err)
	case srv == nil:
	case srv.Unwatched:
		log.Warn("Server not watched: its changes do not reach the controller, which reads it every minute; "+
			"put its label back (for pods: kubectl label pod NAME cloudnative.czs/vm-uid=UID)", "server", srv.Name, "uid", owner.UID)
	default:
		log.Debug("Server not in the cache yet: waiting for it", "server", name)
	}
	return srv, nil
}

// readServer reads owner's server past the backend's cache; nil when the backend has none,
// or cannot read past its cache (backend.Reader).
func (c *Controller) readServer(ctx context.Context, owner backend.Owner) (*backend.Server, error) {
	if c.opt.reader == nil {
		return nil, nil
	}
	return c.opt.reader.Get(ctx, owner)
}

// diskNotCached reads past the backend's cache the disk of the name of a VM about to be let
// go while the cache, seen, shows it no disk of its own that the way out acts on (see
// confirmsDisk); nil when there is none, or the backend keeps no disks. A disk the cache does
// not show (a claim whose label someone removed drops out of the label-selected cache), or
// shows as it was before the VM adopted it (the cache behind that write, past the expectation
// of it), may be owned by the VM: let go on the cache's word, the VM would leave it to the
// garbage collector, which deletes what a deleted VM owns, a disk its reclaim policy keeps
// included. Decided on as read, it is released or deleted as the policy says before the VM
// goes.
func (c *Controller) diskNotCached(ctx context.Context, owner backend.Owner, seen *backend.Disk, log *slog.Logger) (*backend.Disk, error) {
	if c.opt.disks == nil {
		return nil, nil
	}
	d, err := c.opt.disks.ReadDisk(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("confirm the disk as the cache shows it: %w", err)
	}
	if d != nil && d.Owner.Mine() && !d.Deleting && (seen == nil || seen.ID != d.ID || seen.Owner != d.Owner) {
		var cached backend.DiskOwner // "": none
		if seen != nil {
			cached = seen.Owner
		}
		log.Info("Disk not as the cache shows it: deciding the VM's way out on it as the backend has it", "disk", d.Name, "owner", d.Owner,
			"cachedOwner", cached)
	}
	return d, nil
}
