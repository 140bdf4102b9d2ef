package backend

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Resizer is implemented by backends that can change a running server's cpu and memory without
// replacing it: a pod through its resize subresource, a VM through CPU and memory hotplug. A
// backend without it can only replace a server to change it.
type Resizer interface {
	// Resize asks for vm's server to run with spec's cpu and memory; spec's other fields must
	// equal the server's. The request is asynchronous: it returns the server as it is once the
	// request is accepted, with its Spec the new one and its Resize saying how far the change
	// has got. ErrResizeInfeasible: the backend refuses this change of this server, and a
	// replacement is the only way to it.
	Resize(ctx context.Context, vm Owner, spec Spec) (*Server, error)
}

// ErrResizeInfeasible wraps a refusal to resize that asking again will not change (the host
// has less than the new size, the server's platform cannot resize, the change is not one of
// cpu and memory), so that the controller falls back to its --resize policy instead of retrying.
var ErrResizeInfeasible = errors.New("resize is infeasible")

// ResizeState is how far the last resize of a server has got, in the terms of Kubernetes'
// in-place pod resize (the PodResizePending and PodResizeInProgress conditions), which a
// backend outside the cluster maps its own states to.
type ResizeState string

// The resize states.
const (
	// ResizeNone: no resize is under way; the resources in effect are the ones asked for.
	ResizeNone ResizeState = ""
	// ResizePending: a resize was asked for and the host has not answered yet.
	ResizePending ResizeState = "Pending"
	// ResizeDeferred: the host cannot take the new size now but may later (other servers on
	// it use the room); it keeps trying by itself.
	ResizeDeferred ResizeState = "Deferred"
	// ResizeInfeasible: the host will never take the new size (more than it has, a platform
	// that cannot resize); only a replacement elsewhere can.
	ResizeInfeasible ResizeState = "Infeasible"
	// ResizeInProgress: the host has granted the new size and is applying it. It stays here,
	// with a Message, while applying fails (memory below what the server uses now) and the
	// host retries.
	ResizeInProgress ResizeState = "InProgress"
)

// Resize is a backend's report on the resizing of one server. The Server's Spec holds the cpu
// and memory asked for; CPU and Memory here are the ones in effect, which differ from the
// Spec until a resize is done.
type Resize struct {
	State   ResizeState
	Message string // the host's reason, when it gives one (why deferred, infeasible, failing)
	// CPU and Memory are in effect now; zero when the backend does not tell, which means the
	// Spec's.
	CPU    resource.Quantity
	Memory resource.Quantity
}

// Done reports whether the server runs with the cpu and memory of spec: nothing is under way
// and the resources in effect, where the backend reports them, are spec's. The decision calls a
// resize done (Event ServerResized) only then; with nothing under way and other resources in
// effect, the host has not taken the resize up yet.
func (r Resize) Done(spec Spec) bool {
	if r.State != ResizeNone {
		return false
	}
	return (r.CPU.IsZero() || r.CPU.Cmp(spec.CPU) == 0) && (r.Memory.IsZero() || r.Memory.Cmp(spec.Memory) == 0)
}

// ResizeOnly reports whether from and to differ in cpu or memory and in nothing else: a change
// that a Resizer can make in place.
func ResizeOnly(from, to Spec) bool {
	if from.RootDisk.Cmp(to.RootDisk) != 0 || from.Image != to.Image || from.Disk != to.Disk || !SamePlacement(from.Placement, to.Placement) {
		return false
	}
	return from.CPU.Cmp(to.CPU) != 0 || from.Memory.Cmp(to.Memory) != 0
}

// MarshalYAML renders the report in plans and golden files with quantities as strings and
// without the fields that are empty.
func (r Resize) MarshalYAML() (any, error) {
	type inEffect struct {
		State   ResizeState `yaml:"state,omitempty"`
		Message string      `yaml:"message,omitempty"`
		CPU     string      `yaml:"cpu,omitempty"`
		Memory  string      `yaml:"memory,omitempty"`
	}
	out := inEffect{State: r.State, Message: r.Message}
	if !r.CPU.IsZero() {
		out.CPU = r.CPU.String()
	}
	if !r.Memory.IsZero() {
		out.Memory = r.Memory.String()
	}
	return out, nil
}
