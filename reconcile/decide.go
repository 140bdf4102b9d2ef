package reconcile

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Policy holds the settings a decision depends on besides its inputs.
type Policy struct {
	// DefaultImage is the server image for VMs that do not name one.
	DefaultImage string
	// RestartBackoff is how long a failed server is kept (for inspection) before the first
	// replacement; each further consecutive failure doubles it, up to MaxRestartBackoff.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// Resize says what a change of a running server's size does (docs/lifecycle.md).
	Resize ResizeMode
	// CanResize: the backend changes a server's cpu and memory in place (backend.Resizer).
	CanResize bool
}

// ResizeMode is how a running server takes a new spec: --resize.
type ResizeMode string

// The resize modes.
const (
	// ResizeInPlace resizes the running server where it can, and replaces it where it
	// cannot. The zero mode means the same.
	ResizeInPlace ResizeMode = "in-place"
	// ResizeReplace replaces the server on every change, as before in-place resize existed.
	ResizeReplace ResizeMode = "replace"
	// ResizeManual resizes in place where it can; otherwise it keeps the server and sets the
	// RestartRequired condition until the user asks for a restart.
	ResizeManual ResizeMode = "manual"
)

// DefaultPolicy is the policy of a controller started without flags (its pod backend resizes).
var DefaultPolicy = Policy{
	DefaultImage:      "registry.k8s.io/pause:3.10",
	RestartBackoff:    10 * time.Second,
	MaxRestartBackoff: 5 * time.Minute,
	Resize:            ResizeInPlace,
	CanResize:         true,
}

// Decide returns what vm needs, given the server the backend observed for it (nil: none) and
// the time. It is pure: the same inputs give the same plan, and a plan applied and decided
// again asks for nothing more.
//
// A status in the plan describes the world as it will be once the plan's server action is
// done, so that observing that world later finds nothing to write. The one thing a plan cannot
// know is the identity of a server it creates; the apply step fills it in.
func (p Policy) Decide(vm schema.VirtualMachine, srv *backend.Server, now time.Time) Plan {
	now = now.UTC().Truncate(time.Second)
	d := decision{vm: vm, srv: srv, now: now, current: vm.Status()}
	if vm.Deleting() {
		d.deleting()
		return d.plan
	}
	spec, errs := vm.Spec()
	if len(errs) > 0 {
		d.ensureFinalizer(srv != nil)
		d.report(schema.PhaseFailed, ReasonInvalidSpec, invalidMessage(errs), srv)
		return d.plan
	}
	want := backend.Spec{CPU: spec.CPU, Memory: spec.Memory, RootDisk: spec.RootDisk, Image: spec.Image}
	if spec.Action == schema.ActionInactive {
		d.inactive()
		return d.plan
	}
	if want.Image == "" {
		want.Image = p.DefaultImage
	}
	p.active(&d, want, spec.Image != "")
	return d.plan
}

// pendingMessage does not name the server: a plan that creates one cannot know its name, and
// the status it writes must equal the one observing the new server produces.
const pendingMessage = "Waiting for the server to start"

// decision accumulates one plan.
type decision struct {
	vm      schema.VirtualMachine
	srv     *backend.Server
	now     time.Time
	current schema.Status
	plan    Plan
	// eventNote, if set, is the note of the transition event instead of the status message.
	eventNote string
}

// missingServer is the name of the server the status last reported as running or on its way,
// for a decision that finds it gone or going: the controller did not delete it (that would be
// a replacement, a restart after a failure or a stop, each with a reason of its own), so
// someone else did, or its node went with it. "" when the status names no such server.
func (d *decision) missingServer() string {
	cur := d.current
	if cur.Server == nil || cur.Server.Name == "" {
		return ""
	}
	switch cur.Reason {
	case ReasonServerReady, ReasonServerStarting, ReasonServerCreating, ReasonNodeLost:
		return cur.Server.Name
	}
	return ""
}

// deleting: the server goes first, then the finalizer, then Kubernetes removes the VM.
func (d *decision) deleting() {
	if !d.vm.HasFinalizer(schema.Finalizer) {
		return // not ours to hold, or already released
	}
	if d.srv == nil {
		d.plan.Finalizer = RemoveFinalizer
		return
	}
	if !d.srv.Deleting {
		d.deleteServer(ReasonDeletingServer, fmt.Sprintf("Deleting server %s before the VM is removed", d.srv.Name))
	}
	d.report(schema.PhaseTerminating, ReasonServerDeleting,
		fmt.Sprintf("Waiting for server %s to be deleted before the VM is removed", d.srv.Name), d.deletingServer())
}

// inactive: the user wants no server but keeps the object.
func (d *decision) inactive() {
	if d.srv == nil {
		d.report(schema.PhaseInactive, ReasonServerStopped, "The VM has no server (action is inactive)", nil)
		return
	}
	d.ensureFinalizer(true)
	if !d.srv.Deleting {
		d.deleteServer(ReasonDeletingServer, fmt.Sprintf("Deleting server %s: action is inactive", d.srv.Name))
	}
	d.report(schema.PhaseInactive, ReasonServerStopping,
		fmt.Sprintf("Waiting for server %s to be deleted (action is inactive)", d.srv.Name), d.deletingServer())
}

// active: keep exactly one healthy server with the wanted spec.
func (p Policy) active(d *decision, want backend.Spec, imageSet bool) {
	d.ensureFinalizer(true)
	srv := d.srv
	if srv == nil {
		d.plan.Server = &ServerAction{Op: CreateServer, Spec: &want, Event: Event{Type: EventNormal, Reason: ReasonCreatingServer,
			Message: fmt.Sprintf("Creating a server with cpu %s, memory %s, root disk %s", want.CPU.String(), want.Memory.String(), want.RootDisk.String())}}
		d.failures(d.current.ConsecutiveFailures)
		// The backend's own word for a new server is not known until it is created; the
		// apply step puts it in (Plan.Created). The neutral word stands in for it meanwhile.
		r := d.report(schema.PhaseCreating, ReasonServerCreating, pendingMessage,
			&backend.Server{State: backend.StatePending, Detail: string(backend.StatePending)})
		if gone := d.missingServer(); gone != "" && r.status {
			d.event(EventWarning, ReasonServerMissing,
				fmt.Sprintf("Server %s was deleted, not by the controller; creating a new one", gone))
		}
		return
	}
	if srv.Deleting {
		r := d.report(schema.PhaseCreating, ReasonServerReplacing,
			fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", srv.Name), srv)
		if gone := d.missingServer(); gone != "" && r.event {
			// Not a replacement of the controller's: say so, instead of the transition.
			d.plan.Events[len(d.plan.Events)-1] = Event{Type: EventWarning, Reason: ReasonServerMissing,
				Message: fmt.Sprintf("Server %s is being deleted, not by the controller; a new one follows once it is gone", gone)}
		}
		return
	}
	have := srv.Spec
	if !imageSet {
		have.Image = want.Image // a new default image applies to new servers only
	}
	if !have.Equal(want) {
		d.deleteServer(ReasonReplacingServer, fmt.Sprintf("Replacing server %s: %s", srv.Name, specChange(srv.Spec, want, imageSet)))
		d.report(schema.PhaseCreating, ReasonServerReplacing,
			fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", srv.Name), d.deletingServer())
		return
	}
	switch srv.State {
	case backend.StatePending:
		msg := pendingMessage
		if srv.Message != "" {
			msg += ": " + srv.Message
		}
		d.report(schema.PhaseCreating, ReasonServerCreating, msg, srv)
	case backend.StateStarting:
		d.report(schema.PhaseCreating, ReasonServerStarting, fmt.Sprintf("Server %s is running and not ready yet", srv.Name), srv)
	case backend.StateReady:
		d.failures(0)
		d.report(schema.PhaseActive, ReasonServerReady, fmt.Sprintf("Server %s is running and ready", srv.Name), srv)
	case backend.StateLost:
		msg := fmt.Sprintf("The node of server %s does not answer", srv.Name)
		if srv.Message != "" {
			msg += ": " + srv.Message
		}
		d.report(schema.PhaseUnknown, ReasonNodeLost, msg, srv)
	case backend.StateFailed, backend.StateStopped:
		p.restart(d)
	default:
		d.report(schema.PhaseUnknown, ReasonServerStateUnknown, fmt.Sprintf("Server %s is in state %q", srv.Name, srv.State), srv)
	}
}

// restart replaces a server that ended, after a backoff that doubles with each consecutive
// failure, so that a server that cannot run is not recreated in a tight loop while its failed
// remains stay visible for a while.
func (p Policy) restart(d *decision) {
	srv := d.srv
	reason, what := ReasonServerFailed, "failed"
	if srv.State == backend.StateStopped {
		reason, what = ReasonServerExited, "stopped by itself"
	}
	detail := ""
	if srv.Message != "" {
		detail = " (" + srv.Message + ")"
	}
	n := d.current.ConsecutiveFailures
	at := srv.Since.UTC().Truncate(time.Second).Add(p.backoff(n))
	// Event notes leave out what changes from one failure to the next (the time, the count),
	// so that a server failing again and again makes one event series, not a flood.
	note := fmt.Sprintf("Server %s %s%s", srv.Name, what, detail)
	if d.now.Before(at) {
		d.failures(n)
		d.eventNote = note + "; a new server will be created after a backoff"
		d.report(schema.PhaseFailed, reason, fmt.Sprintf("%s; a new server will be created at %s", note, at.Format(time.RFC3339)), srv)
		d.plan.RequeueAfter = Duration(at.Sub(d.now))
		return
	}
	d.deleteServer(ReasonRestartingServer, note+"; replacing it")
	d.failures(n + 1)
	d.report(schema.PhaseCreating, ReasonServerReplacing,
		fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", srv.Name), d.deletingServer())
}

// rejectedRetry is how often a server the backend refused is asked for again: the cause (a
// quota, a clashing name, missing permissions) is usually fixed by a person, not by time.
const rejectedRetry = time.Minute

// Rejected is the plan for a VM whose server the backend refused to create: Failed with the
// backend's reason, and another try after a while rather than a retry storm.
func (p Policy) Rejected(vm schema.VirtualMachine, why string, now time.Time) Plan {
	d := decision{vm: vm, now: now.UTC().Truncate(time.Second), current: vm.Status()}
	d.report(schema.PhaseFailed, ReasonServerRejected, "The server was refused: "+why, nil)
	d.plan.RequeueAfter = Duration(rejectedRetry)
	return d.plan
}

// invalidMessage lists every field error, one after the other, for the status message.
func invalidMessage(errs field.ErrorList) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return "Invalid spec: " + strings.Join(msgs, "; ")
}

// backoff is the wait before replacing a server after n earlier consecutive failures.
func (p Policy) backoff(n int) time.Duration {
	b := p.RestartBackoff
	for i := 0; i < n && b < p.MaxRestartBackoff; i++ {
		b *= 2
	}
	return min(b, p.MaxRestartBackoff)
}

// specChange says what differs between a server and the wanted spec, for the event.
func specChange(have, want backend.Spec, imageSet bool) string {
	var s string
	add := func(name, a, b string) {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s %s -> %s", name, a, b)
	}
	if have.CPU.Cmp(want.CPU) != 0 {
		add("cpu", have.CPU.String(), want.CPU.String())
	}
	if have.Memory.Cmp(want.Memory) != 0 {
		add("memory", have.Memory.String(), want.Memory.String())
	}
	if have.RootDisk.Cmp(want.RootDisk) != 0 {
		add("rootDisk", have.RootDisk.String(), want.RootDisk.String())
	}
	if imageSet && have.Image != want.Image {
		add("image", have.Image, want.Image)
	}
	return s
}

// ensureFinalizer asks for the finalizer when the VM has (or is about to have) a server.
func (d *decision) ensureFinalizer(needed bool) {
	if needed && !d.vm.HasFinalizer(schema.Finalizer) {
		d.plan.Finalizer = AddFinalizer
	}
}

func (d *decision) deleteServer(reason, msg string) {
	d.plan.Server = &ServerAction{Op: DeleteServer, Event: Event{Type: EventNormal, Reason: reason, Message: msg}}
}

// deletingServer is the observed server as it will be once a delete has been asked for.
func (d *decision) deletingServer() *backend.Server {
	s := *d.srv
	s.Deleting = true
	return &s
}

func (d *decision) event(typ, reason, msg string) {
	d.plan.Events = append(d.plan.Events, Event{Type: typ, Reason: reason, Message: msg})
}

// failures carries the consecutive-failure count into the status this decision writes.
func (d *decision) failures(n int) { d.next().ConsecutiveFailures = n }

// next is the status being built, started from the current one on first use.
func (d *decision) next() *schema.Status {
	if d.plan.Status == nil {
		st := d.current
		d.plan.Status = &st
	}
	return d.plan.Status
}

// reported is what one report decided, so that a caller that adds to it (a Warning in place
// of the transition event) does not have to infer it from the plan.
type reported struct {
	status bool // the status changes: the plan writes it
	event  bool // the change of phase or reason is an Event, the plan's last
}

// report sets the phase, reason and message, the server and the Ready condition, then keeps
// the new status in the plan only if it says something the current one does not. A change of
// phase or reason is also recorded as an Event, unless the plan's action already explains it.
func (d *decision) report(phase schema.Phase, reason, msg string, srv *backend.Server) reported {
	st := d.next()
	st.Phase, st.Reason, st.Message = phase, reason, msg
	st.ObservedGeneration = d.vm.Generation()
	st.Server = nil
	if srv != nil {
		st.Server = &schema.ServerStatus{Name: srv.Name, ID: srv.ID, State: srv.Detail}
		if cur := d.current.Server; cur != nil && cur.Usage != nil {
			u := *cur.Usage // usage is reported by its own loop; keep it
			st.Server.Usage = &u
		}
	}
	ready := schema.Condition{Type: schema.ConditionReady, Status: schema.ConditionFalse, Reason: reason, Message: msg,
		ObservedGeneration: st.ObservedGeneration, LastTransitionTime: d.now}
	switch phase {
	case schema.PhaseActive:
		ready.Status = schema.ConditionTrue
	case schema.PhaseUnknown:
		ready.Status = schema.ConditionUnknown
	}
	// The transition time stays when the status does (meta.SetStatusCondition's rule).
	st.Conditions = schema.SetCondition(d.current.Conditions, ready)

	if st.SameAs(d.current) {
		d.plan.Status = nil
		return reported{}
	}
	st.LastUpdateTime = d.now
	if d.plan.Server == nil && (d.current.Phase != phase || d.current.Reason != reason) {
		typ := EventNormal
		if phase == schema.PhaseFailed || phase == schema.PhaseUnknown {
			typ = EventWarning
		}
		if d.eventNote != "" {
			msg = d.eventNote
		}
		d.event(typ, reason, msg)
		return reported{status: true, event: true}
	}
	return reported{status: true}
}
