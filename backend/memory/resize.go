package memory

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
)

var _ backend.Resizer = (*Backend)(nil)

// ResizeAnswer is how the backend answers the resizes asked of it, standing in for a host. The
// zero answer takes every resize and puts it into effect at once.
type ResizeAnswer struct {
	// Refuse, when set, makes Resize fail with backend.ErrResizeInfeasible and this message,
	// as a Kubernetes API server refuses a resize beyond the node's allocatable; the server
	// stays as it was.
	Refuse string
	// State is where a resize that was taken stands: ResizeNone puts it into effect at once;
	// Pending, Deferred, Infeasible or InProgress leave it there, with Message, until
	// Progress moves it on.
	State   backend.ResizeState
	Message string
}

// AnswerResizes sets how Resize answers from now on.
func (b *Backend) AnswerResizes(a ResizeAnswer) {
	b.mu.Lock()
	b.resize = a
	b.mu.Unlock()
}

// Resize changes the cpu and memory vm's server asks for and answers as AnswerResizes says.
// The resources in effect stay the old ones until the resize is done.
func (b *Backend) Resize(_ context.Context, vm backend.Owner, spec backend.Spec) (*backend.Server, error) {
	b.mu.Lock()
	k := key(vm)
	s, ok := b.servers[k]
	if !ok || s.Deleting {
		b.mu.Unlock()
		return nil, fmt.Errorf("resize server of %s/%s: no server to resize", vm.Namespace, vm.Name)
	}
	a := b.resize
	if s.Spec.RootDisk.Cmp(spec.RootDisk) != 0 || s.Spec.Image != spec.Image {
		b.mu.Unlock()
		return nil, fmt.Errorf("resize server %s: only cpu and memory change in place: %w", s.Name, backend.ErrResizeInfeasible)
	}
	if a.Refuse != "" {
		b.mu.Unlock()
		return nil, fmt.Errorf("resize server %s: %s: %w", s.Name, a.Refuse, backend.ErrResizeInfeasible)
	}
	cpu, mem := inEffect(s)
	s.Spec.CPU, s.Spec.Memory = spec.CPU, spec.Memory
	s.Resize = backend.Resize{State: a.State, Message: a.Message, CPU: cpu, Memory: mem}
	if a.State == backend.ResizeNone {
		s.Resize.CPU, s.Resize.Memory = spec.CPU, spec.Memory
	}
	c := *s
	b.mu.Unlock()
	b.changed(k)
	return &c, nil
}

// Progress moves the resize of vm's server on, as its host would: to Deferred, Infeasible or
// InProgress with a message, or, with ResizeNone, into effect.
func (b *Backend) Progress(vm backend.Owner, state backend.ResizeState, message string) error {
	b.mu.Lock()
	k := key(vm)
	s, ok := b.servers[k]
	if !ok {
		b.mu.Unlock()
		return fmt.Errorf("resize server of %s/%s: no server", vm.Namespace, vm.Name)
	}
	cpu, mem := inEffect(s)
	s.Resize = backend.Resize{State: state, Message: message, CPU: cpu, Memory: mem}
	if state == backend.ResizeNone {
		s.Resize.CPU, s.Resize.Memory = s.Spec.CPU, s.Spec.Memory
	}
	b.mu.Unlock()
	b.changed(k)
	return nil
}

// inEffect is the cpu and memory s runs with: the ones it reports, else its spec's.
func inEffect(s *backend.Server) (cpu, mem resource.Quantity) {
	cpu, mem = s.Resize.CPU, s.Resize.Memory
	if cpu.IsZero() {
		cpu = s.Spec.CPU
	}
	if mem.IsZero() {
		mem = s.Spec.Memory
	}
	return cpu, mem
}

// resizeYAML is how a written-down server (ParseServer) tells of a resize under way:
//
//	resize: {state: InProgress, message: "", cpu: "2", memory: 4G}
//
// cpu and memory are the ones in effect; the server's spec holds the ones asked for.
type resizeYAML struct {
	State   backend.ResizeState `yaml:"state"`
	Message string              `yaml:"message"`
	CPU     string              `yaml:"cpu"`
	Memory  string              `yaml:"memory"`
}

// resizeStates are the states a written-down resize may be in.
var resizeStates = []backend.ResizeState{backend.ResizeNone, backend.ResizePending, backend.ResizeDeferred,
	backend.ResizeInfeasible, backend.ResizeInProgress}

// parse reads r into a backend.Resize. Unknown states and malformed quantities are errors.
func (r resizeYAML) parse() (backend.Resize, error) {
	known := false
	for _, st := range resizeStates {
		known = known || r.State == st
	}
	if !known {
		return backend.Resize{}, fmt.Errorf("resize.state %q: want one of Pending, Deferred, Infeasible, InProgress, or none", r.State)
	}
	out := backend.Resize{State: r.State, Message: r.Message}
	for _, q := range []struct {
		name string
		dst  *resource.Quantity
		src  string
	}{{"cpu", &out.CPU, r.CPU}, {"memory", &out.Memory, r.Memory}} {
		if q.src == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.src)
		if err != nil {
			return backend.Resize{}, fmt.Errorf("resize.%s %q: %w", q.name, q.src, err)
		}
		*q.dst = v
	}
	return out, nil
}
