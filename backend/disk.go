package backend

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Disks is implemented by backends that keep a VM's root disk apart from its server, so that
// the disk outlives every server: a PersistentVolumeClaim beside a pod, a volume beside a
// hypervisor's domain or a cloud instance. A server created with Spec.Disk mounts the disk of
// its VM, which the backend names itself (as it names the server).
//
// A disk belongs to a VM through the VM's identity (its UID), and goes with the VM only while
// the VM owns it: a disk that is kept (a VM's reclaim policy Retain) outlives the VM, and a
// later VM of the same name may adopt it. The decision chooses; the backend carries it out.
type Disks interface {
	// ObserveDisk returns the disk of vm's name as last seen, or nil when there is none. It
	// reports a disk of that name whoever holds it (Disk.Owner says whose it is), so that
	// the decision never mistakes another's disk for a missing one. It must be cheap (a cache
	// read): it runs on every reconcile.
	ObserveDisk(vm Owner) (*Disk, error)
	// ReadDisk returns the disk of vm's name as the backend holds it now, past what
	// ObserveDisk reads, whoever holds it; nil when there is none. The controller asks it
	// only before it lets a deleted VM go while it observes no disk the VM owns: a
	// disk that is there but not seen (for claims: one whose label someone removed, which
	// the label-selected cache drops), or seen as it was before the VM adopted it (a cache
	// behind that write), may be owned by the VM, and a disk a deleted VM owns goes with
	// it, whatever its reclaim policy says. A read the backend may not make is an
	// apierrors.IsForbidden error (for claims, the API server's): the VM then stays, and its
	// status says why, until the read is allowed.
	ReadDisk(ctx context.Context, vm Owner) (*Disk, error)
	// CreateDisk creates vm's disk and returns it as created. It is idempotent: a disk that
	// already is vm's is returned, not an error. A disk of that name that is not vm's and
	// not adoptable is ErrDiskConflict; any other refusal that retrying cannot fix,
	// ErrRejected.
	CreateDisk(ctx context.Context, vm Owner, spec DiskSpec) (*Disk, error)
	// UpdateDisk brings vm's existing disk to spec, in one change conditional on the disk
	// still being seen: the disk the decision to update it was made on, as ObserveDisk
	// returned it (or as the controller's own last write of it returned it). The change is
	// worked out from seen and is conditional on seen's ID and Version, never on a later
	// observation: the disk made vm's (adopting it when it is unowned), owned by vm unless
	// spec.Keep, recording vm's kind of resource (Disk.KindUnrecorded), and grown to
	// spec.Size when it asks for less. It never shrinks a disk nor
	// changes its class. ErrDiskConflict: seen is another's. A disk changed since seen, or
	// gone, is an apierrors.IsConflict error (for claims, the API server's, or the
	// backend's own when its cache already shows the change), so that the VM is decided
	// again on the disk as it now is; a nil seen is an error.
	UpdateDisk(ctx context.Context, vm Owner, seen *Disk, spec DiskSpec) (*Disk, error)
	// DeleteDisk asks for vm's disk to go away, on the condition that it is still seen: the
	// disk the decision to delete it was made on, as ObserveDisk returned it (or as the
	// controller's own last write of it returned it). The delete is conditional on seen's ID
	// and Version, never on a later observation, and is not asked for at all when seen is
	// nil, not vm's (Owner.Mine) or already Deleting. A disk already gone is not an error;
	// one changed since seen is (an apierrors.IsConflict error: for claims, the API
	// server's), so that the VM is decided again on the disk as it now is. A delete the
	// backend may not ask for is an apierrors.IsForbidden error, not ErrRejected: the VM
	// stays, and says why, until it may.
	DeleteDisk(ctx context.Context, vm Owner, seen *Disk) error
}

// ErrDiskConflict wraps a refusal to create or take a disk whose name another holds: a disk
// not labelled for the VM, or controlled by another object. It is an ErrRejected: the VM is
// marked Failed and asked for again at the pace of refusals, and the disk is never taken
// over. Its text says what to do about the disk, which the error wrapping it names last:
// "claim x exists and is not this VM's: delete it (its data with it) or give the VM another name;
// ...", the status message of a DiskConflict.
var ErrDiskConflict error = diskConflict{}

// diskConflict is ErrDiskConflict: an ErrRejected, whose text is what to do rather than
// "rejected".
type diskConflict struct{}

func (diskConflict) Error() string {
	return "delete it (its data with it) or give the VM another name; the controller never takes it over"
}

func (diskConflict) Unwrap() error { return ErrRejected }

// DiskSpec is what a disk is asked to be.
type DiskSpec struct {
	// Size is the capacity to ask for; a disk only grows.
	Size resource.Quantity
	// StorageClass names the class to make the disk in; "": the platform's default. Only a
	// new disk takes it.
	StorageClass string
	// Keep says the disk outlives its VM (reclaim policy Retain): the VM does not own it, so
	// that deleting the VM, by any means, leaves the disk; it stays labelled for the VM. The
	// backend marks a disk made or updated to Keep as kept (Disk.KeptMark), and a disk made
	// or updated without it as not.
	Keep bool
}

// MarshalYAML renders the spec in plans and golden files with the size as a string.
func (s DiskSpec) MarshalYAML() (any, error) {
	return struct {
		Size         string `yaml:"size"`
		StorageClass string `yaml:"storageClass,omitempty"`
		Keep         bool   `yaml:"keep,omitempty"`
	}{s.Size.String(), s.StorageClass, s.Keep}, nil
}

// DiskPhase is where a disk stands with its storage, in the words of a PersistentVolumeClaim.
type DiskPhase string

// The phases of a disk.
const (
	DiskPending DiskPhase = "Pending" // no storage behind it yet (being provisioned or bound, or waiting)
	DiskBound   DiskPhase = "Bound"   // storage is behind it
	DiskLost    DiskPhase = "Lost"    // the storage behind it is gone
)

// DiskOwner is whose a disk is, as seen from the VM the report is for.
type DiskOwner string

// Who holds a disk.
const (
	// DiskOwned: the VM owns it, so it goes with the VM (reclaim policy Delete).
	DiskOwned DiskOwner = "Owned"
	// DiskKept: the VM's, and it outlives the VM (reclaim policy Retain): nothing owns it.
	DiskKept DiskOwner = "Kept"
	// DiskUnowned: kept by an earlier VM of this name and owned by nothing: this VM may
	// adopt it.
	DiskUnowned DiskOwner = "Unowned"
	// DiskOther: another's (owned by another object, not labelled for this VM's name, or
	// kept for another kind of resource): never taken over.
	DiskOther DiskOwner = "Other"
)

// Mine reports whether the disk is the VM's own (owned or kept).
func (o DiskOwner) Mine() bool { return o == DiskOwned || o == DiskKept }

// GrowthState is how far the last growth of a disk has got, in the terms of Kubernetes'
// volume expansion (the claim's allocatedResourceStatuses), which a backend outside the
// cluster maps its own states to.
type GrowthState string

// The growth states.
const (
	// GrowthNone: no growth is under way.
	GrowthNone GrowthState = ""
	// GrowthPending: a larger size was asked for and the storage has not taken it up yet
	// (or waits for a server to mount the disk to finish).
	GrowthPending GrowthState = "Pending"
	// GrowthInProgress: the storage is growing the disk.
	GrowthInProgress GrowthState = "InProgress"
	// GrowthInfeasible: the storage refused the size; it tries again when asked again.
	GrowthInfeasible GrowthState = "Infeasible"
)

// Growth is a backend's report on the growing of one disk.
type Growth struct {
	State   GrowthState `yaml:"state,omitempty"`
	Message string      `yaml:"message,omitempty"` // the storage's own words, when it gives them
	// Kept is set by the controller, never by a backend: the API server refused the claim's
	// new size (a quota on storage, an admission policy; Message is its refusal), so the
	// storage never saw it, and the claim keeps asking for Kept. The controller decides the
	// VM on the disk as if it asked for the size refused, with State GrowthInfeasible
	// (decision.Policy.GrowthRefused). Nil on every growth a backend reports.
	Kept *resource.Quantity `yaml:"-"`
}

// Disk is a backend's report on one disk.
type Disk struct {
	Name    string // the backend's name for it
	ID      string // a unique identity (for claims: the UID)
	Version string // changes with every change of the disk (for claims: the resourceVersion)
	Phase   DiskPhase
	// Requested is the size asked for; Capacity the size it has (zero until it has storage).
	Requested resource.Quantity
	Capacity  resource.Quantity
	// StorageClass is the class it was made in ("" when none is set yet).
	StorageClass string
	// CanGrow says whether its class lets it grow in place.
	CanGrow bool
	// BindsWithServer says it gets its storage only once a server that mounts it is placed
	// (for claims: its class's volumeBindingMode is WaitForFirstConsumer). A disk that binds
	// by itself is bound before its first server is made, so that no scheduler tries, and
	// fails, to place a server whose disk is not there yet.
	BindsWithServer bool
	Growth          Growth
	Owner           DiskOwner
	// KeptMark says the disk is marked as kept (for claims: the annotation
	// cloudnative.czs/kept): the last VM to make or update it kept it (DiskSpec.Keep). A VM
	// that names no reclaim policy keeps such a disk kept; only one that names Delete owns it
	// again. Disks kept by earlier versions carry no mark.
	KeptMark bool
	// KindUnrecorded: the VM's own disk (owned or kept), which does not record the kind of
	// resource the VM is (for claims: the annotation cloudnative.czs/owner-kind; made or
	// kept by an earlier version). A disk kept for the VM's kind, or for none, is adopted by
	// a later VM of the name; without the record, another kind's object of the name (a
	// controller run for another resource) could take a kept disk, so the VM records it
	// (Disks.UpdateDisk records it with any change).
	KindUnrecorded bool
	// Pending says why it has no storage yet, in the words of whatever binds it (for claims:
	// the persistent-volume controller's or a provisioner's last Event on it); "" when
	// nothing has said.
	Pending  string
	Deleting bool // deletion has been requested and is in progress

	// Pinned, if set, says the storage behind the disk can be reached from some nodes only
	// (for claims: its PersistentVolume has a required node affinity, a local volume), so
	// that the disk cannot follow its VM to another node. It is read with NodeAffinity
	// (DiskPinning), and is "" otherwise.
	Pinned string
	// NodeAffinity, if set, is the nodes the storage behind the disk can be reached from, as
	// a required node selector (for claims: its PersistentVolume's
	// spec.nodeAffinity.required; a local volume has one, a zone's disk, a TopoLVM or
	// OpenEBS volume too): no server that mounts the disk runs on another node. The room
	// check counts only the hosts it admits (Hosts.RoomWithin), so that a move or a
	// replacement is not judged possible by a host the disk cannot reach. It is read with
	// Pinned (DiskPinning), when a migration is asked for, when a running server is about
	// to be replaced for a new spec, and when its resize in place was refused; nil
	// otherwise, or when no node affinity binds the storage (none, or not bound yet).
	NodeAffinity *corev1.NodeSelector
}

// DiskPinning is implemented by backends that can tell whether a VM's disk is bound to some
// nodes. The controller asks it only when a migration is requested, or, while the hosts are
// known, when a running server is about to be replaced for a new spec or its resize in place
// was refused: it reads past the cache. It is on the path of a rollout (a new image on every
// VM), so a backend that knows the hosts (Rooms) reads no list of them here.
type DiskPinning interface {
	// DiskPinned describes how vm's disk is bound to nodes: Pin.Why is "" when it can
	// follow its VM to another node (or has no storage yet), and Pin.NodeAffinity is nil
	// when no node affinity binds its storage.
	DiskPinned(ctx context.Context, vm Owner) (Pin, error)
}

// Pin is how a disk's storage is bound to nodes (DiskPinning), as Disk.Pinned and
// Disk.NodeAffinity carry it.
type Pin struct {
	// Why describes the nodes the disk is bound to when it cannot follow its VM off the
	// node its server is on; "" when it can.
	Why string
	// NodeAffinity is the nodes its storage can be reached from; nil: any node.
	NodeAffinity *corev1.NodeSelector
}

// GrowthDone reports whether the disk has the size it asks for.
func (d *Disk) GrowthDone() bool {
	return d.Growth.State == GrowthNone && !d.Capacity.IsZero() && d.Capacity.Cmp(d.Requested) >= 0
}
