package decision

import (
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Plan is everything one reconcile of one VM asks for, as data. The apply step carries it out
// in a fixed order: add the finalizer, act on the disk, act on the server, write the status,
// remove the finalizer; a replacement for the spec's sake, or of a server that ended, writes
// the status before it deletes the server (ServerAction.StatusFirst). So a disk exists before
// the server that mounts it is created, and on
// deletion (where a plan acts on the disk only once the server is gone) the disk is deleted
// or released before the finalizer comes off. Each event is recorded once the write it
// reports has succeeded.
type Plan struct {
	// Finalizer is the change to the VM's finalizer, if any.
	Finalizer FinalizerChange `yaml:"finalizer,omitempty"`
	// Disk is the action on the VM's disk, if any (under Policy.RootDisk claim).
	Disk *DiskAction `yaml:"disk,omitempty"`
	// Server is the action on the VM's server, if any.
	Server *ServerAction `yaml:"server,omitempty"`
	// Budget is the action on the VM's disruption budget, if any (eviction strategy Block;
	// eviction.go). It comes after the server's: it does not depend on it.
	Budget *BudgetAction `yaml:"budget,omitempty"`
	// Status is the status to write; nil when the current one is still true.
	Status *schema.Status `yaml:"status,omitempty"`
	// Events report a change of phase or reason; they are recorded once the status is written.
	Events []Event `yaml:"events,omitempty"`
	// RequeueAfter asks for another look after this long even if nothing changes; zero: only
	// when something changes.
	RequeueAfter Duration `yaml:"requeueAfter,omitempty"`
}

// Empty reports whether the plan asks for no write and no event. A reconcile of a VM whose
// state is already right returns an empty plan (it may still ask to be requeued).
func (p Plan) Empty() bool {
	return p.Finalizer == "" && p.Disk == nil && p.Server == nil && p.Budget == nil && p.Status == nil && len(p.Events) == 0
}

// FinalizerChange is what happens to the controller's finalizer on the VM.
type FinalizerChange string

// The finalizer changes.
const (
	AddFinalizer    FinalizerChange = "add"    // before a server is created: cleanup is guaranteed
	RemoveFinalizer FinalizerChange = "remove" // once the server is gone: the VM may go
)

// ServerOp is an operation on a server.
type ServerOp string

// The server operations.
const (
	CreateServer ServerOp = "create"
	DeleteServer ServerOp = "delete"
	// ResizeServer changes the running server's cpu and memory in place (backend.Resizer).
	ResizeServer ServerOp = "resize"
)

// ServerAction is one operation on the VM's server.
type ServerAction struct {
	Op ServerOp `yaml:"op"`
	// Spec is what to create, or for resize what the server is to become (its own image and
	// rootDisk, the new cpu and memory); nil for delete.
	Spec *backend.Spec `yaml:"spec,omitempty"`
	// Event says why; it is recorded as soon as the operation succeeds, whatever happens to
	// the rest of the plan.
	Event Event `yaml:"event"`
	// GracePeriod, for a delete that stops the VM, is the grace period the stop asked for
	// (schema.AnnotationStopGracePeriod; backend.GracefulDeleter); nil: the backend's default.
	GracePeriod *Duration `yaml:"gracePeriod,omitempty"`
	// StatusFirst, for a delete that replaces the server because of the spec (a change of
	// it, or a resize the host refused) or because it ended (under Always, RerunOnFailure),
	// has the status written before the server is deleted, not after. Nothing else records
	// why such a server goes: a restart, a stop or a migration is a request on the VM, new
	// until the status records it, which explains its delete to whoever decides next.
	// Deleted first, the server would be gone while the status still said it ran, and a
	// controller deciding in between with no memory of the delete (a new leader; this one
	// after a restart) would take it for one someone else deleted: under Manual and Once the
	// VM stopped with ServerMissing, under the others a false Warning. Written first, the
	// status says ServerReplacing; should the delete not follow, the next decision deletes
	// the server as the status records (replacementWritten).
	StatusFirst bool `yaml:"statusFirst,omitempty"`
}

// DiskOp is an operation on the VM's disk.
type DiskOp string

// The disk operations. Adopt, expand, release and record-kind are one change of an existing
// disk (backend.Disks.UpdateDisk), named for why it is made.
const (
	CreateDisk DiskOp = "create"
	// AdoptDisk makes the disk the VM's as its reclaim policy says: a disk an earlier VM of
	// the name kept, or its own again when the policy turns to Delete.
	AdoptDisk DiskOp = "adopt"
	// ExpandDisk asks for a larger size.
	ExpandDisk DiskOp = "expand"
	// ReleaseDisk stops the VM owning its disk, which then outlives it (reclaim policy Retain).
	ReleaseDisk DiskOp = "release"
	// RecordDiskKind has the VM's own disk, which an earlier version made or kept without
	// it, record the kind of resource the VM is (backend.Disk.KindUnrecorded), and changes
	// nothing else of it: it is asked for only when nothing else is, as every change records
	// the kind. Once: the disk then records it.
	RecordDiskKind DiskOp = "record-kind"
	DeleteDisk     DiskOp = "delete"
)

// DiskAction is one operation on the VM's disk.
type DiskAction struct {
	Op DiskOp `yaml:"op"`
	// Spec is the disk to create, or what the disk is to become (owned unless Keep, at least
	// Size); nil for delete.
	Spec *backend.DiskSpec `yaml:"spec,omitempty"`
	// Event says why; it is recorded as soon as the operation succeeds. RecordDiskKind has
	// none: it is bookkeeping that changes nothing the VM's owner sees, and it would come
	// once for every VM of an earlier version.
	Event Event `yaml:"event,omitempty"`
}

// The types of Event, as Kubernetes spells them (corev1.EventTypeNormal and
// EventTypeWarning); the decision names them without importing the core API.
const (
	EventNormal  = "Normal"
	EventWarning = "Warning"
)

// Event is a Kubernetes Event to record on the VM; the zero Event is none.
type Event struct {
	Type    string `yaml:"type"`   // EventNormal or EventWarning
	Reason  string `yaml:"reason"` // one of the Reason constants
	Message string `yaml:"message"`
}

// Duration renders as "1m30s" in YAML instead of nanoseconds.
type Duration time.Duration

// MarshalYAML renders the duration in Go's notation.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Created records the server a create made: the one fact the decision could not know. The
// status in the plan then names the server that really exists.
func (p *Plan) Created(s *backend.Server) {
	if p.Status == nil || p.Status.Server == nil || s == nil {
		return
	}
	p.Status.Server.Name = s.Name
	p.Status.Server.ID = s.ID
	p.Status.Server.State = s.Detail
}

// CreatedDisk records the disk a create made: its name, which the decision could not know.
func (p *Plan) CreatedDisk(d *backend.Disk) {
	if p.Status == nil || p.Status.RootDisk == nil || d == nil {
		return
	}
	p.Status.RootDisk.ClaimName = d.Name
}

// DiskGone reports whether the plan says that the disk the VM's status reported, bound, is
// gone (not seen: DiskDeleted for a stopped VM, or a new disk made in its place, DiskRecreated).
// The pods backend's cache holds only the claims labelled for a VM, and one whose label someone
// took off is out of it with its data: the loop confirms past the cache before such a plan
// says the data went.
func (p Plan) DiskGone() bool {
	if p.Disk != nil && p.Disk.Op == CreateDisk && p.Disk.Event.Reason == ReasonDiskRecreated {
		return true
	}
	for _, e := range p.Events {
		if e.Reason == ReasonDiskDeleted {
			return true
		}
	}
	return false
}

// Releasing is the plan for a VM whose namespace is being deleted: what lets it go (its
// server deleted, its finalizer removed), without the status and its Events, and without
// acting on its disk or its budget (the namespace's deletion deletes that too, and the
// finalizer's removal does not wait for it: one write fewer per VM under Block). No one reads the status of a VM about to go with its namespace, and the
// API server refuses Events there; writing it only delayed the finalizer removals the
// namespace's deletion waits for. The disk, a claim in that namespace, goes with it whatever
// the VM's reclaim policy says: the namespace's deletion deletes every claim in it. (The
// loop keeps a paused VM's plan whole: its Paused condition says why the namespace waits.)
// A status that says why the VM cannot be let go yet is kept (holdsRelease), without its
// Events: the way on is a person's, and the VM's status is where the namespace's deletion
// sends them ("some resources are remaining").
func (p Plan) Releasing() Plan {
	if p.Status == nil || p.Finalizer == RemoveFinalizer || !holdsRelease[p.Status.Reason] {
		p.Status = nil
	}
	p.Events = nil
	p.Disk = nil
	p.Budget = nil
	return p
}

// holdsRelease are the reasons of a status that says why a deleted VM is not let go and what
// lets it go: its server on a node that does not answer (NodeLost: the node deleted, the pod
// force-deleted), its server's delete refused (ServerDeleteRefused).
var holdsRelease = map[string]bool{ReasonNodeLost: true, ReasonServerDeleteRefused: true}
