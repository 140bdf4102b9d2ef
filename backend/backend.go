// Package backend is the contract between the controller and whatever realises a
// VirtualMachine's server: a Pod in the cluster (package pods), an in-memory table for tests and
// offline planning (package memory), or, behind the same four operations, a hypervisor or a
// cloud API.
//
// The controller decides from what Observe returns and acts through Create and Delete; a
// backend reports changes by calling the notify function given to Start, which makes the
// controller look at the owning VM again.
//
// The contract speaks apimachinery's types and plain functions, not client-go's: the pure
// decision (reconcile/decision) reads a Server and its Spec and State, and imports no client
// through them; and a backend outside the cluster needs none to implement it.
package backend

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// Backend creates, observes and deletes the servers of VirtualMachines.
type Backend interface {
	// Start begins watching servers and calls notify with the owning VM whenever one changes.
	// The returned function reports whether the first full view of the servers is in and
	// notify has been called for each server of it: workers start on it.
	Start(ctx context.Context, notify func(vm types.NamespacedName)) (synced func() bool, err error)
	// Observe returns the server of vm as last seen, or nil when it has none. It must be cheap
	// (a cache read): it runs on every reconcile.
	Observe(vm Owner) (*Server, error)
	// Create starts a server for vm and returns it as created. It is idempotent: a server that
	// already exists for vm is returned, not an error. ErrRejected marks a refusal that
	// retrying cannot fix.
	Create(ctx context.Context, vm Owner, spec Spec) (*Server, error)
	// Delete asks for vm's server to go away; a server already gone is not an error.
	// ErrRejected marks a refusal that retrying soon cannot fix (the controller's
	// permissions, an admission policy).
	Delete(ctx context.Context, vm Owner) error
}

// ErrRejected wraps errors that retrying the same request will not fix (an invalid server, a
// name owned by someone else): the VM is marked Failed instead of retried.
var ErrRejected = errors.New("rejected")

// Owner identifies the VirtualMachine a server belongs to.
type Owner struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
}

// Spec is what a server is asked to be.
type Spec struct {
	CPU    resource.Quantity
	Memory resource.Quantity
	// RootDisk is the size of a root disk that lives and dies with the server (for pods:
	// ephemeral storage); zero when the server mounts its VM's disk instead (Disk).
	RootDisk resource.Quantity
	Image    string
	// Disk says the server mounts its VM's disk (Disks) as its root disk, the one that
	// outlives every server; the backend names it.
	Disk bool

	// Placement says where the server may run (placement.go); nil: anywhere. A server
	// reports the placement it was created with.
	Placement *Placement
	// AvoidNode, if set, is a node this server must not run on: the node a migration
	// moves the VM off. It is asked of one server only and not reported back, so it is no
	// part of what Equal compares.
	AvoidNode string
	// PreferAvoidNode, if set, is a node this server should keep off if another node takes
	// it: the node the server it follows was evicted from (evictionStrategy Replace). Only
	// preferred, not required as AvoidNode is: an eviction that is no drain (a descheduler,
	// a kubelet under node pressure, the eviction API called by hand) leaves the node
	// schedulable, and a VM whose placement admits that node only must still get its server
	// there, since a move under Replace has no bound after which it gives up. Like AvoidNode,
	// it is asked of one server only and not reported back, so it is no part of what Equal
	// compares: a running server is never replaced over it.
	PreferAvoidNode string
	// Restart, if set, is the restart request this server is created to carry out: the
	// value of its VM's annotation cloudnative.czs/restartedAt that the decision acted on. The
	// backend keeps it with the server and reports it back (for pods: an annotation), so that
	// a decision that finds the server before any status has named it (the create's status
	// write was lost) knows it for the restart's own, and not for a server that predates the
	// request. Like the nodes to avoid, it is no part of what Equal compares: no server is
	// replaced for its mark.
	Restart string
}

// Equal reports whether two specs ask for the same server (quantities compared by value, so
// "1024Mi" equals "1Gi"). The nodes to avoid (AvoidNode, PreferAvoidNode) and the restart
// mark (Restart) are not compared: they are asked of one server at its creation, and a server
// that runs is never replaced for them.
func (s Spec) Equal(o Spec) bool {
	return s.CPU.Cmp(o.CPU) == 0 && s.Memory.Cmp(o.Memory) == 0 && s.RootDisk.Cmp(o.RootDisk) == 0 && s.Image == o.Image &&
		s.Disk == o.Disk && SamePlacement(s.Placement, o.Placement)
}

// MarshalYAML renders quantities as their canonical strings in plans and golden files; a
// root disk of the server's own only when it has one.
func (s Spec) MarshalYAML() (any, error) {
	out := struct {
		CPU      string `yaml:"cpu"`
		Memory   string `yaml:"memory"`
		RootDisk string `yaml:"rootDisk,omitempty"`
		Image    string `yaml:"image"`
		Disk     bool   `yaml:"disk,omitempty"`
		// Placement and the nodes to avoid, only when there are any.
		Placement       *Placement `yaml:"placement,omitempty"`
		AvoidNode       string     `yaml:"avoidNode,omitempty"`
		PreferAvoidNode string     `yaml:"preferAvoidNode,omitempty"`
		// Restart, only for a server made to carry out a restart request.
		Restart string `yaml:"restart,omitempty"`
	}{CPU: s.CPU.String(), Memory: s.Memory.String(), Image: s.Image, Disk: s.Disk, AvoidNode: s.AvoidNode, PreferAvoidNode: s.PreferAvoidNode,
		Restart: s.Restart}
	if !s.Placement.Empty() {
		out.Placement = s.Placement
	}
	if !s.RootDisk.IsZero() || !s.Disk {
		out.RootDisk = s.RootDisk.String()
	}
	return out, nil
}

// State is the backend-neutral state of a server.
type State string

// The states a server can be in.
const (
	StatePending  State = "Pending"  // accepted, not yet running (scheduling, pulling, booting)
	StateStarting State = "Starting" // running, not yet ready
	StateReady    State = "Ready"    // running and ready
	StateFailed   State = "Failed"   // stopped with an error; it will not come back by itself
	StateStopped  State = "Stopped"  // stopped without an error; it will not come back by itself
	StateLost     State = "Lost"     // its host is unreachable; it may or may not still run
)

// Server is a backend's report on one server.
type Server struct {
	Name     string // the backend's name for it
	ID       string // a unique identity (for pods: the UID)
	Version  string // changes with every change of the server (for pods: the resourceVersion); "" if none is kept
	State    State
	Detail   string    // the backend's own word for the state (for pods: the phase)
	Message  string    // why it is in that state, when the backend says
	Spec     Spec      // what it was created with
	Deleting bool      // deletion has been requested and is in progress
	Since    time.Time // when it entered a terminal state (Failed, Stopped); zero otherwise
	Resize   Resize    // how far a change of cpu and memory in place has got (resize.go)
	// Disk is the name of its VM's disk it mounts (Disks); "" for a server without one.
	Disk string
	// Lingers, on an ended server (Stopped, Failed), says that what realises it runs on all
	// the same and holds its host, as a live server does: a disruption budget then holds it
	// (for pods: the server container has terminated, and another container, a sidecar a
	// mesh or a logging agent injected, keeps the pod Running; the eviction API asks the
	// budget of a Running pod, and evicts a terminal one without asking it). False for a live
	// server, and for one that ended with all of it (for pods: Succeeded, Failed, or Pending,
	// which the eviction API takes without the budget too).
	Lingers bool
	// KeptBy, on a server that lingers, names what keeps it running (for pods: the other
	// containers of the pod that have not terminated, running or waiting to run again, native
	// sidecars among them), in order of name, so that the same keepers give the same server
	// and its VM's status says what holds the host in the same words; nil when the backend
	// cannot tell, and on a server that does not linger.
	KeptBy []string

	// Where it runs and why it does not run yet (waiting.go).
	Node    string  // the host it was placed on (for pods: the node's name); "" until placed
	IP      string  // its address (for pods: the pod IP); "" until it has one
	Waiting Waiting // why a Pending server does not start, when the backend can tell; zero otherwise
	// NodeGone, on a Lost server, says its host is gone, not only silent (for pods: the Node
	// object is deleted): nothing is left to delete for it, and the server goes by itself
	// (for pods: the pod garbage collector deletes the pods bound to a node that does not exist).
	NodeGone bool
	// NodeSilent, on a Pending server not being deleted, says its host does not answer (for
	// pods: the node it is bound to is not ready, or gone). Such a server stays Pending, as far
	// as anyone knows never started; but its host may have started it since it last reported,
	// so a delete of it must wait for the host, with no grace period cut short.
	NodeSilent bool

	// Whether it is being taken away (budget.go, the eviction strategies): Cordoned, that
	// its host takes no new servers (for pods: the node is unschedulable, as a drain leaves
	// it); Disruption, nil unless the server is being evicted or otherwise disrupted.
	Cordoned   bool
	Disruption *Disruption

	// AdmittedTolerations are the tolerations the server was given beyond its placement's
	// (for pods: those of the pod that its AnnotationPlacement does not list, such as a
	// namespace's default tolerations or a mutating webhook's), but those of the passing
	// taints (PassingTaint), which admission gives every server for a while
	// (DefaultTolerationSeconds). They are taken to come back on the next server, which the
	// same admission sees: the room check counts them beside the placement's (Hosts.Room).
	// Nil for a server given none, and for one whose tolerations were changed after it was
	// made (TolerationsChanged).
	AdmittedTolerations []corev1.Toleration
	// TolerationsChanged says the server's tolerations were changed after it was made, by
	// someone other than the backend (for pods: a field manager other than the controller's
	// owns spec.tolerations, as a kubectl patch or edit leaves it; admission's own, at the
	// create, are owned by the controller's or by none). What admission gave can then not be
	// told from what a person added, which the next server would not get: none is counted
	// (AdmittedTolerations is nil), so that the room check does not end the running server
	// for one that no node takes.
	TolerationsChanged bool

	// Unwatched, on a server read past the cache (Reader.Get), says the backend's watch
	// does not show it (for pods: the label cloudnative.czs/vm-uid was taken off the pod),
	// so that none of its changes brings its VM back, and the cache never will show it.
	Unwatched bool
}

// Objects is implemented by backends whose servers are Kubernetes objects in their VM's
// namespace, with Server.ID their UID and Server.Version their resourceVersion (for pods:
// Pods). An Event about a server then names it as its related object; a backend that is not
// one has Events that name the VM only.
type Objects interface {
	// ServerKind returns the API version and kind of the backend's servers.
	ServerKind() (apiVersion, kind string)
}

// DiskObjects is implemented by backends whose disks (Disks) are Kubernetes objects in their
// VM's namespace, with Disk.ID their UID and Disk.Version their resourceVersion (for pods:
// PersistentVolumeClaims). An Event about an action on a disk then names it as its related
// object, as one about a server names the server (Objects); without it, such an Event names
// the VM only, and a second one of the same reason is folded into the first.
type DiskObjects interface {
	// DiskKind returns the API version and kind of the backend's disks.
	DiskKind() (apiVersion, kind string)
}

// BudgetObjects is implemented by backends whose budgets (Budgets) are Kubernetes objects in
// their VM's namespace, with Budget.ID their UID and Budget.Version their resourceVersion (for
// pods: PodDisruptionBudgets). An Event about an action on a budget then names it as its
// related object (DiskObjects says why).
type BudgetObjects interface {
	// BudgetKind returns the API version and kind of the backend's budgets.
	BudgetKind() (apiVersion, kind string)
}

// Reader is implemented by backends that can read a server from its source, past the cache
// Observe reads. The controller asks it only when a VM's status names a server the cache does
// not hold: the cache of servers may lag the cache of VMs (a restore that writes VMs before
// their servers, a watch that restarted), and a server that is only not seen yet must not be
// reported missing and created again. When Get finds it, the controller decides nothing for
// the VM until Observe shows it (Delete and Resize may act on what the cache shows), unless
// the cache never will (Server.Unwatched): then it decides on the server as read, and the
// backend's Delete and Resize act on such a server as Get reads it. It also
// asks before it lets a deleted VM go with no server in the cache: a server created but not
// seen yet, or unwatched, is deleted first.
type Reader interface {
	// Get returns vm's server as the backend holds it now, or nil when it has none.
	Get(ctx context.Context, vm Owner) (*Server, error)
}

// UsageReader is implemented by backends that can tell what a server consumes.
type UsageReader interface {
	// Usage returns what vm's server consumes now. ErrNoUsage: the server has no figures
	// yet (just started); ErrUsageUnavailable: the backend cannot report usage at all.
	Usage(ctx context.Context, vm Owner) (Usage, error)
}

// Errors of UsageReader.
var (
	ErrNoUsage          = errors.New("no usage figures for the server yet")
	ErrUsageUnavailable = errors.New("usage figures are not available")
)

// Usage is what a server consumes: cpu in cores, memory in bytes.
type Usage struct {
	CPU    resource.Quantity
	Memory resource.Quantity
}

// GracefulDeleter is a backend that ends a server with a grace period the caller chooses: a
// stop request's (`kubectl vm stop --grace-period N`, --force for 0). A backend without it
// deletes with its own default, and the grace period asked for is not honoured.
type GracefulDeleter interface {
	// DeleteGracefully is Delete with the server given grace to shut down (0: at once).
	DeleteGracefully(ctx context.Context, vm Owner, grace time.Duration) error
}
