package decision

import (
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Input is what one decision about a VM is made on: the view of the VM and what the backend
// observed of it, gathered once by the reconcile loop (or read from files by the plan command)
// and then taken by Decide and by the plans of a backend's refusals alike. One value rather
// than positional arguments, so that a refusal is decided on the very world the plan it
// refuses was decided on, and no caller passes the disk where the server was meant. A nil
// pointer means the backend observed none.
type Input struct {
	// VM is the view of the VM as the VM cache holds it (or as the loop's last write of it
	// returned it): spec, status, finalizers, requests.
	VM schema.VirtualMachine
	// Server is the VM's server as the backend observes it (backend.Backend.Observe, adjusted
	// for the controller's own creates and deletes the cache has yet to show; or read past the
	// cache when the VM is about to be let go); nil: none.
	Server *backend.Server
	// Gone is what the backend remembers of the VM's last server when it went while disrupted
	// (backend.Departures.LastGone), which a move under evictionStrategy Replace takes as the
	// eviction seen (eviction.go), read only when there is no Server; or the server the
	// controller deleted to replace it, whose status write was lost (replaced.go), with no
	// server or beside that server while it is being deleted. nil: nothing.
	Gone *backend.Gone
	// Disk is the disk of the VM's name as the backend observes it (backend.Disks.ObserveDisk,
	// adjusted for the controller's own disk actions, or read past the cache), whoever's it
	// is; nil: none, or a backend that keeps no disks.
	Disk *backend.Disk
	// Budget is the disruption budget the backend observes for the VM's server
	// (backend.Budgets); nil: none.
	Budget *backend.Budget
	// Hosts are the hosts a new server could be placed on (backend.Rooms), whose room for
	// the next server's spec decides whether a running server is replaced for a change of
	// its spec, or moved for a migration (room.go); nil: the backend does not know its
	// hosts.
	Hosts *backend.Hosts
	// Now is the time the decision is made at, from the caller's clock: nothing in this
	// package reads the wall clock. Decisions truncate it to the second.
	Now time.Time
}
