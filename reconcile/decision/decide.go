package decision

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Policy holds the settings a decision depends on besides its inputs.
type Policy struct {
	// DefaultImage is the server image for VMs that do not name one.
	DefaultImage string
	// RestartBackoff is how long a failed server is kept (for inspection) before the first
	// replacement; each further consecutive failure doubles it, up to MaxRestartBackoff. The
	// failures are consecutive until a server has been ready for MaxRestartBackoff
	// (stableAfter).
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// Resize says what a change of a running server's size does (docs/lifecycle.md).
	Resize ResizeMode
	// CanResize: the backend changes a server's cpu and memory in place (backend.Resizer).
	CanResize bool
	// RootDisk says where a VM's root disk lives (disk.go): a disk of its own that outlives
	// its servers (claim, the zero mode's meaning), or each server's own (ephemeral).
	RootDisk RootDiskMode
	// StalledAfter is how long a server may wait for a cause that needs a change
	// (unschedulable, an image it cannot pull) before the VM is Stalled (stuck.go); zero:
	// never.
	StalledAfter time.Duration
	// Eviction is the eviction strategy of VMs that do not name one (--eviction-strategy;
	// eviction.go); the zero value means None.
	Eviction schema.EvictionStrategy
}

// ResizeMode is how a running server takes a new spec: --resize.
type ResizeMode string

// The resize modes.
const (
	// ResizeInPlace resizes the running server where it can, and replaces it where it
	// cannot; but a running server is kept, as under ResizeManual, when no host has room
	// for the new spec's cpu or memory (room.go). The zero mode means the same.
	ResizeInPlace ResizeMode = "in-place"
	// ResizeReplace replaces the server on every change, as before in-place resize existed;
	// a running server is kept, as under ResizeInPlace, when no host has room for the new
	// spec (room.go).
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
	RootDisk:          RootDiskClaim,
	StalledAfter:      5 * time.Minute,
	Eviction:          schema.EvictionNone,
}

// Decide returns what in.VM needs, given what the backend observed for it (in.Server, in.Disk
// and in.Budget; nil: none; under --root-disk ephemeral the disk is only kept or deleted as the
// reclaim policy says, leftdisk.go) and the time. With no server, in.Gone is what the backend
// remembers of the last one when it went while disrupted (backend.Departures; nil: nothing),
// which a move under evictionStrategy Replace takes as the eviction seen (eviction.go). in.Gone
// may also be (Replaced) the server the controller deleted to replace it and whose status
// write was lost, with no server or beside that server while it is being deleted
// (replaced.go). It is pure: the same input gives the same plan, and a plan applied and
// decided again asks for nothing more.
//
// A status in the plan describes the world as it will be once the plan's disk and server
// actions are done, so that observing that world later finds nothing to write. The one thing
// a plan cannot know is the identity of a server or disk it creates; the apply step fills it
// in.
func (p Policy) Decide(in Input) Plan {
	vm, srv, gone, disk, budget := in.VM, in.Server, in.Gone, in.Disk, in.Budget
	now := in.Now.UTC().Truncate(time.Second)
	d := decision{vm: vm, srv: srv, now: now, current: vm.Status(), disk: diskPart{claims: p.claims(), seen: disk},
		evict: evictionPart{budget: budget}, run: runPart{maxBackoff: p.MaxRestartBackoff}, hosts: in.Hosts}
	if srv == nil {
		d.evict.gone = gone
	}
	d.replacedBy(gone)
	if disk != nil && disk.Owner.Mine() {
		kept := *disk
		d.disk.own = &kept
	}
	if vm.Paused() {
		d.paused()
		return d.plan
	}
	if vm.Deleting() {
		d.deleting()
		return d.plan
	}
	spec, errs := vm.Spec()
	if len(errs) > 0 {
		d.ensureFinalizer(srv != nil)
		if spec.ReclaimPolicy != schema.ReclaimDelete {
			d.retainDisk() // the one disk action an invalid spec gets: it keeps the disk safe
		}
		d.invalid(spec, errs) // a server its run strategy wants gone goes all the same (invalid.go)
		return d.plan
	}
	want := backend.Spec{CPU: spec.CPU, Memory: spec.Memory, RootDisk: spec.RootDisk, Image: spec.Image, Placement: spec.Placement}
	d.run.strategy = spec.RunStrategy
	d.eviction(p.evictionStrategy(spec), spec.RunStrategy != schema.RunHalted)
	// A VM under Block has a budget, whether or not it has a server, and the way out deletes
	// it before the VM goes (deleting): the finalizer holds the VM for that, also for one that
	// never had a server. Left to the owner reference alone, a `--cascade=orphan` deletion
	// would leave the budget behind.
	d.ensureFinalizer(d.evict.strategy == schema.EvictionBlock)
	if spec.RunStrategy == schema.RunHalted {
		stop := d.recordRequests()
		d.holdDisk(spec)
		d.inactive(stop)
		return d.plan
	}
	if want.Image == "" {
		want.Image = p.DefaultImage
	}
	if spec.RunStrategy == schema.RunAlways {
		d.recordRequests()
		p.active(&d, want, spec)
		return d.plan
	}
	p.onRequest(&d, want, spec) // RerunOnFailure, Once, Manual (runstrategy.go)
	return d.plan
}

// PendingMessage is the status message of a VM whose server is on its way. It does not name
// the server: a plan that creates one cannot know its name, and the status it writes must
// equal the one observing the new server produces. The VM cache packs against it.
const PendingMessage = "Waiting for the server to start"

// decision accumulates one plan. Beside its inputs and the plan it holds what the decision
// finds on the way, for the status report writes at the end. What belongs to one part of the
// decision is grouped in a type declared beside the code that decides it, so that each part's
// state is read in one place and this struct stays short: the disk's (diskPart, disk.go),
// the eviction strategy's (evictionPart, eviction.go), the run strategy's (runPart,
// runstrategy.go) and the server's lifecycle conditions (serverConditions).
type decision struct {
	vm      schema.VirtualMachine
	srv     *backend.Server
	now     time.Time
	current schema.Status
	plan    Plan
	// refusal: the plan of a backend's refusal (Rejected, ResizeRefused, DiskRejected),
	// made without the disk: the status keeps what it says of the disk. ServerRejected,
	// given the disk, decides on it (refusedOn).
	refusal bool
	// eventNote, if set, is the note of the transition event instead of the status message.
	eventNote string
	// hosts are Input.Hosts; nil: unknown.
	hosts *backend.Hosts
	// replaced is the server the status names that the controller deleted to replace it,
	// whose status write was lost (gone, Replaced; replaced.go); nil when there is none.
	replaced *backend.Gone

	disk  diskPart         // the disk's part (disk.go)
	evict evictionPart     // the eviction strategy's part (eviction.go)
	run   runPart          // the run strategy's part (runstrategy.go)
	cond  serverConditions // the server's lifecycle conditions
}

// serverConditions holds the server's lifecycle conditions the status is to carry, and the
// time its Ready condition counts a wait from: what a decision finds of the server itself
// (a resize, a restart it needs, a wait for too long), as opposed to its disk's or its
// eviction's. They are decided here (resizing, restartRequired) and in stuck.go (stalled,
// waitReported); report writes them into the status, and kstatus.go reads them for Stalled
// and Reconciling.
type serverConditions struct {
	// resizing and restartRequired are the lifecycle conditions the status is to carry;
	// nil drops them.
	resizing, restartRequired *lifecycleCondition
	// stalled, if set, is the Stalled condition of a server stuck for too long (stuck.go);
	// kstatus.go decides it for every other cause.
	stalled *lifecycleCondition
	// waitReported, if set, is the transition time of the Ready condition of a status that
	// first reports a server's wait whose beginning the backend cannot tell: the time the
	// wait is counted from (stuck.go, reportedWait).
	waitReported time.Time
}

// lifecycleCondition is the reason and message of a condition that is present only while
// it holds (status True).
type lifecycleCondition struct{ reason, message string }

// restartHint is how a user asks for a restart; RestartRequired messages end with it.
func (d *decision) restartHint() string {
	return "restart it with: " + Annotate(d.vm, stamp(schema.AnnotationRestartedAt))
}

// missingServer is the name of the server the status last reported as running or on its way,
// for a decision that finds it gone or going: the controller did not delete it (that would be
// a replacement, a restart after a failure or a stop, each with a reason of its own), so
// someone else did, or its node went with it, unless something explains its going
// (requestTakesServer: a request, or the controller's own replacement whose status write was
// lost). "" when the status names no such server, or when it went in an eviction this
// decision moves the VM for (goneEvicted), as it is when the status says the eviction
// (ServerEvicted).
func (d *decision) missingServer() string {
	if d.evict.evictedGone != nil {
		return ""
	}
	return ClaimedServer(d.current)
}

// ClaimedServer is the name of the server a status says is there (being made, starting,
// running, stuck on its way, or on a node that does not answer); empty when it claims none.
// The loop asks the backend past its cache for such a server before a decision may call it
// missing.
//
// The status's server alone does not say it: the status also names a server the controller
// is deleting (a replacement, a stop, a migration, the VM's deletion), one being evicted
// under Replace (eviction.go), one that ended (its run strategy keeps it, or it waits out its
// backoff), and whatever server there is beside an invalid spec or a refused disk. A server
// that goes from one of those is no news. The reason the controller wrote with it says which
// (claimingReasons); FuzzDecide holds every status a plan writes to it.
func ClaimedServer(cur schema.Status) string {
	if cur.Server == nil || cur.Server.Name == "" || !claimingReasons[cur.Reason] {
		return ""
	}
	if cur.Reason == ReasonNodeLost && cur.Phase != schema.PhaseUnknown {
		return "" // the controller deletes it: the VM is being replaced, stopped or deleted (nodelost.go)
	}
	return cur.Server.Name
}

// claimingReasons are the reasons under which the status names a server that is there and
// not going by the controller's hand: made and not yet running (ServerCreating, and with the
// reasons of stuck.go and WaitingForDisk, stuck on its way), running, on a node that does
// not answer, or in a state the controller does not know.
var claimingReasons = map[string]bool{
	ReasonServerCreating:     true,
	ReasonUnschedulable:      true,
	ReasonImagePullFailing:   true,
	ReasonServerNotStarting:  true,
	ReasonWaitingForDisk:     true,
	ReasonServerStarting:     true,
	ReasonServerReady:        true,
	ReasonNodeLost:           true,
	ReasonServerStateUnknown: true,
}

// deleting: the server goes first, then the finalizer, then Kubernetes removes the VM.
func (d *decision) deleting() {
	if !d.vm.HasFinalizer(schema.Finalizer) {
		return // not ours to hold, or already released
	}
	d.deletingBudget()
	if d.srv == nil {
		d.deletingDisk() // under either mode: a disk left from claim is the owner's data too
		d.plan.Finalizer = RemoveFinalizer
		return
	}
	if !d.srv.Deleting {
		d.deleteServer(ReasonDeletingServer, fmt.Sprintf("Deleting server %s before the VM is removed", d.srv.Name))
	}
	if d.srv.State == backend.StateLost {
		d.lostServer(schema.PhaseTerminating, d.deletingServer()) // its deletion cannot finish (nodelost.go)
		return
	}
	d.report(schema.PhaseTerminating, ReasonServerDeleting,
		fmt.Sprintf("Waiting for server %s to be deleted before the VM is removed", d.srv.Name), d.deletingServer())
}

// inactive: the user wants no server but keeps the object. stop is a new stop request (""
// for none): it changes nothing of Halted but its grace period, which, as under the strategies
// that heed requests (stopServer), cuts a deletion under way short (kubectl vm stop --force
// on a VM whose stop set Halted and whose guest hangs in its shutdown): the server is deleted
// again with it, as kubectl delete --force does; a longer one changes nothing. Once, since
// the request is recorded with it. Not one whose node does not answer: a delete with a grace
// period of 0 removes its pod at once while its guest may still run there with the disk.
func (d *decision) inactive(stop string) {
	if r := d.newRestart(); r != "" {
		d.next().RestartedAt = r // nothing to restart; a later start makes a new server anyway
	}
	d.inactiveMigration()
	if d.srv == nil {
		d.report(schema.PhaseInactive, ReasonServerStopped, "The VM has no server (action is inactive)", nil)
		return
	}
	d.haltServer(stop)
	if d.srv.State == backend.StateLost {
		d.lostServer(schema.PhaseInactive, d.deletingServer()) // its deletion cannot finish (nodelost.go)
		return
	}
	d.report(schema.PhaseInactive, ReasonServerStopping,
		fmt.Sprintf("Waiting for server %s to be deleted (action is inactive)", d.srv.Name), d.deletingServer())
}

// haltServer deletes the server of a VM whose run strategy is Halted (inactive; also beside an
// invalid spec, stopInvalid), with the grace period a stop asked for; one being deleted
// already, again with the grace period of a new stop request stop ("" for none), unless its
// node does not answer.
func (d *decision) haltServer(stop string) {
	d.ensureFinalizer(true)
	if grace := d.stopGrace(); !d.srv.Deleting {
		d.deleteServer(ReasonDeletingServer, fmt.Sprintf("Deleting server %s: action is inactive", d.srv.Name))
		d.plan.Server.GracePeriod = grace // `kubectl vm stop --grace-period` on Always sets Halted
	} else if stop != "" && grace != nil && d.srv.State != backend.StateLost {
		d.plan.Server = &ServerAction{Op: DeleteServer, GracePeriod: grace, Event: Event{Type: EventNormal, Reason: ReasonStoppingServer,
			Message: fmt.Sprintf("Deleting server %s: stop requested at %s, grace period %s", d.srv.Name, stop, time.Duration(*grace))}}
	}
}

// active: keep exactly one healthy server with the wanted spec (and, under --root-disk claim,
// the disk it mounts).
func (p Policy) active(d *decision, want backend.Spec, spec schema.Spec) {
	imageSet := spec.Image != ""
	d.ensureFinalizer(true)
	mayStart := true
	if d.disk.claims {
		want.RootDisk, want.Disk = resource.Quantity{}, true // the disk's size is the disk's
		var ok bool
		if mayStart, ok = d.diskFor(spec); !ok {
			return
		}
	} else {
		d.leftDisk(spec)
	}
	if d.evicted() || p.migrate(d, &want) {
		return
	}
	srv := d.srv
	restart := d.newRestart()
	if srv == nil && !mayStart {
		if msg := d.waitingForDisk(); msg != "" {
			d.report(schema.PhaseCreating, ReasonWaitingForDisk, msg, nil)
		} else {
			// A disk on its way, with nothing said: the server it waits for is on its
			// way too, as far as anyone reading the status needs to know.
			d.report(schema.PhaseCreating, ReasonServerCreating, PendingMessage, nil)
		}
		return
	}
	if restart == "" && d.waitOutBackoff() {
		return
	}
	if srv == nil {
		if restart != "" {
			// The server about to be created is the restart; it carries the request's mark,
			// by which a decision that finds it before the status names it knows it.
			d.next().RestartedAt = restart
			want.Restart = restart
		}
		d.plan.Server = &ServerAction{Op: CreateServer, Spec: &want, Event: Event{Type: EventNormal, Reason: ReasonCreatingServer,
			Message: fmt.Sprintf("Creating a server with cpu %s, memory %s, root disk %s", want.CPU.String(), want.Memory.String(), d.rootDiskSize(spec))}}
		d.moved(d.plan.Server)
		d.failures(d.failuresSoFar())
		// The backend's own word for a new server is not known until it is created; the
		// apply step puts it in (Plan.Created). The neutral word stands in for it meanwhile.
		r := d.report(schema.PhaseCreating, ReasonServerCreating, PendingMessage,
			&backend.Server{State: backend.StatePending, Detail: string(backend.StatePending)})
		if gone := d.missingServer(); gone != "" && r.status && !d.requestTakesServer() {
			d.event(EventWarning, ReasonServerMissing,
				fmt.Sprintf("Server %s was deleted, not by the controller; creating a new one", gone))
		}
		return
	}
	if srv.Deleting {
		if restart != "" {
			d.next().RestartedAt = restart // the server that follows is the restart; no second delete
		}
		if srv.State == backend.StateLost {
			// Its deletion cannot finish while the node does not answer. The controller's
			// stays so, in phase Creating: one for a new server (lostWhileDeleted), and
			// one that stopped the VM (Halted, a stop request) that is to run again now,
			// whose new server waits for it as a replacement's does; in phase Unknown the
			// status would claim the server, and its going would be called missing.
			// Anyone else's is news.
			if d.lostWhileReplacing() || d.lostWhileInactive() {
				d.lostServer(schema.PhaseCreating, srv)
			} else {
				d.nodeLost(srv)
			}
			return
		}
		r := d.report(schema.PhaseCreating, ReasonServerReplacing,
			fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", srv.Name), srv)
		if gone := d.missingServer(); gone != "" && r.event && !d.requestTakesServer() {
			// Not a replacement of the controller's: say so, instead of the transition.
			d.plan.Events[len(d.plan.Events)-1] = Event{Type: EventWarning, Reason: ReasonServerMissing,
				Message: fmt.Sprintf("Server %s is being deleted, not by the controller; a new one follows once it is gone", gone)}
		}
		return
	}
	if restart != "" && d.unrecorded() {
		// A server no status has reported yet. One marked with the request (Spec.Restart) is
		// the restart's own: an earlier decision's create (srv == nil, above) made it, and
		// the status write that recorded the restart did not go through. As with a deletion
		// under way, the restart is recorded now, not carried out twice; nothing more is
		// said, as nothing was when that write went through.
		//
		// One without the mark predates the request: a create whose status said nothing new
		// (onTheWay: the first server under claim, made while the status names none), or a
		// replacement's whose write was lost. If it has not started yet it is kept, and loses
		// nothing: its guest boots after the request, as a restarted one would. The request
		// is answered all the same, with an Event (restartNotNeeded) and a status that names
		// the server, so that a further request replaces it. One that has started (its guest
		// may have booted before the request) is restarted below, as any server is.
		//
		// A server made by a version before the mark has none: should a restart's status
		// write be lost during an upgrade, the server that restart made is taken for one
		// that predates it, and once it has started it is restarted a second time. A
		// restart too many, once, rather than one taken as done that was not.
		switch {
		case srv.Spec.Restart == restart:
			d.next().RestartedAt = restart
			restart = ""
		case srv.State == backend.StatePending:
			d.next().RestartedAt = restart
			defer d.restartNotNeeded(restart, srv)
			restart = ""
		}
	}
	if restart != "" {
		// Asked for by the user: now, whatever state the server is in (a Failed one does
		// not wait for its backoff). The value is recorded in the same write, so the
		// restart happens once however often the VM is looked at again.
		d.next().RestartedAt = restart
		d.plan.Server = &ServerAction{Op: DeleteServer, Event: Event{Type: EventNormal, Reason: ReasonServerRestarted,
			Message: fmt.Sprintf("Restarting server %s: restart requested at %s", srv.Name, restart)}}
		if d.lostWhileDeleted() {
			return
		}
		d.report(schema.PhaseCreating, ReasonServerReplacing,
			fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", srv.Name), d.deletingServer())
		return
	}
	have := srv.Spec
	if !imageSet {
		have.Image = want.Image // a new default image applies to new servers only
	}
	if d.diskBlind(srv) {
		have.RootDisk, have.Disk = want.RootDisk, want.Disk
	}
	if !have.Equal(want) {
		p.specChanged(d, have, want, imageSet)
		return
	}
	if running(srv) {
		r := srv.Resize
		if r.State == backend.ResizeNone && !r.Done(srv.Spec) {
			// No resize reported, yet the resources in effect are not the spec's: the host
			// has not taken the change up yet.
			r.State = backend.ResizePending
		}
		switch r.State {
		case backend.ResizePending, backend.ResizeDeferred, backend.ResizeInProgress:
			d.cond.resizing = &lifecycleCondition{resizeReasons[r.State], resizeMessage(srv.Name, srv.Spec, r)}
		case backend.ResizeInfeasible:
			why := "the node cannot resize it in place"
			if srv.Resize.Message != "" {
				why += ": " + srv.Resize.Message
			}
			if p.Resize == ResizeManual {
				now := inEffect(srv)
				d.cond.restartRequired = &lifecycleCondition{ReasonResizeInfeasible,
					fmt.Sprintf("Server %s keeps cpu %s, memory %s: %s; %s", srv.Name, now.CPU.String(), now.Memory.String(),
						why, d.restartHint())}
			} else if d.cond.restartRequired = d.replacementKept(srv, srv.Spec, why); d.cond.restartRequired == nil {
				// Kept, as the record says, when no host had room for the new size
				// (room.go); replaced otherwise.
				p.replace(d, fmt.Sprintf("Replacing server %s: %s", srv.Name, why))
				return
			}
		case backend.ResizeNone:
			// Done: the resize the Resizing condition followed is in effect. A Resizing that
			// recorded a refusal (ResizeInfeasible) and goes because the spec went back to
			// the server's size is no resize done.
			if c := d.current.Condition(schema.ConditionResizing); c != nil && underWay(c.Reason) {
				defer d.event(EventNormal, ReasonServerResized, fmt.Sprintf("Server %s now runs with cpu %s, memory %s",
					srv.Name, srv.Spec.CPU.String(), srv.Spec.Memory.String()))
			}
		}
	}
	p.serverState(d)
}

// diskBlind reports whether srv's root disk is no reason to replace it: under claim its disk
// is the VM's, grown in place, and a server running without one (from before claims, or of
// another controller) is not replaced to mount it; it is mounted from the next server on. Nor
// is a server on its VM's disk replaced under ephemeral.
func (d *decision) diskBlind(srv *backend.Server) bool { return d.disk.claims || srv.Disk != "" }

// running reports whether a server runs, so that it can be resized in place.
func running(srv *backend.Server) bool {
	return srv.State == backend.StateReady || srv.State == backend.StateStarting
}

// rootDiskSize is the size of the root disk a server made now mounts. Under claims it is the
// disk's (the size it has, else the size asked for), or the size this plan grows it to: it
// differs from spec.rootDisk for a disk grown by hand, kept from an earlier VM of the name
// and not grown yet, or whose growth the storage refused. Otherwise spec.rootDisk: an
// ephemeral disk, or one this plan makes.
func (d *decision) rootDiskSize(spec schema.Spec) string {
	if !d.disk.claims || d.disk.own == nil {
		return spec.RootDisk.String()
	}
	size := d.disk.own.Capacity
	if size.IsZero() {
		size = d.disk.own.Requested
	}
	if a := d.plan.Disk; a != nil && a.Spec != nil && a.Spec.Size.Cmp(size) > 0 {
		size = a.Spec.Size
	}
	if size.IsZero() {
		return spec.RootDisk.String()
	}
	return size.String()
}

// kept reports whether --resize manual keeps srv with an old spec until a restart: it runs,
// or it may run again (on a node that does not answer). A server still pending has not run
// yet, and one that ended never will again: neither holds anything a restart would end, and a
// pending one kept with the old spec (a placement no node satisfies, more cpu than any node
// has) might never start.
func kept(srv *backend.Server) bool {
	return srv.State != backend.StatePending && srv.State != backend.StateFailed && srv.State != backend.StateStopped
}

// resizeReasons are the Resizing condition's reasons for the states of a resize under way.
var resizeReasons = map[backend.ResizeState]string{
	backend.ResizePending:    ReasonResizePending,
	backend.ResizeDeferred:   ReasonResizeDeferred,
	backend.ResizeInProgress: ReasonResizeInProgress,
}

// underWay reports whether reason is the Resizing condition's for a resize the host took.
func underWay(reason string) bool {
	for _, r := range resizeReasons {
		if r == reason {
			return true
		}
	}
	return false
}

// resizeMessage is the Resizing condition's message: the size asked for and what the host
// says. It depends on the target size, not on the one in effect, so that the status a resize
// plan writes equals the one observing the resized server produces.
func resizeMessage(name string, to backend.Spec, r backend.Resize) string {
	msg := fmt.Sprintf("Resizing server %s to cpu %s, memory %s", name, to.CPU.String(), to.Memory.String())
	switch r.State {
	case backend.ResizePending:
		msg += ": waiting for the node to answer"
	case backend.ResizeDeferred:
		msg += ": deferred by the node"
	case backend.ResizeInProgress:
		msg += ": in progress"
	}
	if r.Message != "" {
		msg += " (" + r.Message + ")"
	}
	return msg
}

// inEffect is the cpu and memory a server runs with: what its resize reports, else its spec.
func inEffect(srv *backend.Server) backend.Spec {
	s := srv.Spec
	if !srv.Resize.CPU.IsZero() {
		s.CPU = srv.Resize.CPU
	}
	if !srv.Resize.Memory.IsZero() {
		s.Memory = srv.Resize.Memory
	}
	return s
}

// specChanged: the server runs with another spec than the VM asks for. A change of cpu and
// memory only is made in place where the backend, the policy and the server allow it; any
// other change replaces the server, or under --resize manual waits for a restart.
func (p Policy) specChanged(d *decision, have, want backend.Spec, imageSet bool) {
	srv := d.srv
	from := srv.Spec
	if d.diskBlind(srv) {
		from.RootDisk = want.RootDisk
	}
	what := specChange(from, want, imageSet)
	// A replacement the status records is carried on as written (replacementWritten), unless
	// no host has room for it any more (room.go, below); under --resize manual a server that
	// runs now is kept all the same.
	written := d.replacementWritten() && (p.Resize != ResizeManual || !kept(srv))
	why := ""
	refused := d.refused()
	infeasible := false // the host refused this resize (refused)
	switch {
	case !backend.ResizeOnly(have, want):
		why = "only cpu and memory change in place"
	case p.Resize == ResizeReplace:
	case !p.CanResize:
		why = "the backend cannot resize a server in place"
	case !running(srv):
		why = "the server is not running"
	case refused != nil:
		why, infeasible = refused.Message, true
	case written:
		// A resize the status says is carried out by a replacement (its cause, a refusal's
		// record, may be gone from the status): not asked for in place again.
	default:
		spec := want
		spec.Image, spec.RootDisk, spec.Disk = srv.Spec.Image, srv.Spec.RootDisk, srv.Spec.Disk // a resize changes nothing else
		d.plan.Server = &ServerAction{Op: ResizeServer, Spec: &spec,
			Event: Event{Type: EventNormal, Reason: ReasonResizingServer, Message: fmt.Sprintf("Resizing server %s: %s", srv.Name, what)}}
		d.cond.resizing = &lifecycleCondition{ReasonResizePending, resizeMessage(srv.Name, spec, backend.Resize{State: backend.ResizePending})}
		p.serverState(d)
		return
	}
	if p.Resize != ResizeManual && running(srv) {
		// A running server is replaced only when some host may have room for the new spec
		// (room.go); kept otherwise, and so until a restart or a new spec, as the record
		// says.
		if d.cond.restartRequired = d.replacementKept(srv, want, replacementCause(p.Resize, what, why, refused, infeasible, written)); d.cond.restartRequired != nil {
			p.serverState(d)
			return
		}
	}
	if written {
		p.replace(d, fmt.Sprintf("Replacing server %s: %s (the replacement the status records)", srv.Name, what))
		return
	}
	if p.Resize != ResizeManual || !kept(srv) {
		// A server that is not running (pending, or ended) has nothing to keep: it is
		// replaced at once under every policy.
		msg := fmt.Sprintf("Replacing server %s: %s", srv.Name, what)
		if why != "" {
			msg += " (" + why + ")"
		}
		p.replace(d, msg)
		return
	}
	needsRestart := func(why string) string {
		return fmt.Sprintf("Server %s runs with the old spec: %s needs a new server (%s); %s",
			srv.Name, what, why, d.restartHint())
	}
	switch {
	case refused == nil:
		d.cond.restartRequired = &lifecycleCondition{ReasonSpecChangeNeedsRestart, needsRestart(why)}
	case refused.Type == schema.ConditionRestartRequired:
		d.cond.restartRequired = &lifecycleCondition{refused.Reason, refused.Message} // as ResizeRefused recorded it
	default:
		// Refused under another policy, on record in Resizing, which goes: the refusal stays
		// on record here, so that the same resize is not asked for again. Its message gives
		// the refusal's cause, not why this decision would not resize (a server not running,
		// say): the condition is kept word for word from now on, also once the server runs.
		d.cond.restartRequired = &lifecycleCondition{ReasonResizeInfeasible, needsRestart(refused.Message)}
	}
	p.serverState(d)
}

// replacementCause is why a running server is to be replaced for a change of the spec (what),
// for the message of the RestartRequired condition that keeps it when no host has room for
// the new spec (keptForRoom): the host's refusal of the resize (infeasible: refused, the
// record of it, says it; --resize manual's record has its own words for that policy), else
// the change and why it needs a new server (why, as specChanged has it; none under --resize
// replace, or for a replacement the status records).
func replacementCause(mode ResizeMode, what, why string, refused *schema.Condition, infeasible, written bool) string {
	switch {
	case infeasible && refused.Type == schema.ConditionResizing:
		return refused.Message // Resizing's: the host's refusal (ResizeRefused)
	case infeasible:
		return "the node cannot resize it in place"
	}
	if what == "" {
		what = "the change of the spec"
	}
	switch {
	case why != "":
		return what + " needs a new server: " + why
	case mode == ResizeReplace:
		return what + " needs a new server under --resize replace"
	case written:
		return what + " needs a new server: the replacement the status records"
	}
	return what + " needs a new server"
}

// replace deletes the server so that a new one with the wanted spec follows, once the status
// says so (StatusFirst).
func (p Policy) replace(d *decision, note string) {
	d.deleteServer(ReasonReplacingServer, note)
	d.plan.Server.StatusFirst = d.statusFirst()
	if d.lostWhileDeleted() {
		return
	}
	d.report(schema.PhaseCreating, ReasonServerReplacing,
		fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", d.srv.Name), d.deletingServer())
}

// replacementWritten reports whether the status already says that the observed server, still
// there and not being deleted, is being replaced for this generation of the spec: a
// replacement's status is written before its delete (StatusFirst), and the delete did not
// follow (a write that failed, a replica that stopped). The replacement is carried on as
// written rather than decided afresh: what chose it may be gone from the status by then (the
// record of a resize the host refused, which the replacement's status no longer carries), and
// deciding afresh would ask for that resize again and write Active in between.
//
// A replacement whose delete the backend refused (ServerDeleteRefused, for this server) is
// carried on too: decided afresh, a server that ended would be counted as ended once more at
// each try, and the status rewritten between the two reasons.
func (d *decision) replacementWritten() bool {
	cur, srv := d.current, d.srv
	written := cur.Phase == schema.PhaseCreating && cur.Reason == ReasonServerReplacing || cur.Reason == ReasonServerDeleteRefused
	return written && cur.Server != nil && cur.Server.ID == srv.ID && !srv.Deleting && cur.ObservedGeneration == d.vm.Generation()
}

// statusFirst reports whether a replacement's status goes before its delete (StatusFirst):
// not when the status says the backend refused that delete (ServerDeleteRefused), which names
// no server as running, so that no one takes the delete for another's. Written first, the
// status would turn back to ServerReplacing at each try, then to the refusal again.
func (d *decision) statusFirst() bool { return d.current.Reason != ReasonServerDeleteRefused }

// refused is the record of a resize the host refused for this generation of the spec (by
// ResizeRefused), so that the same resize is not asked for again; nil when there is none.
func (d *decision) refused() *schema.Condition {
	for _, t := range []string{schema.ConditionRestartRequired, schema.ConditionResizing} {
		if c := d.current.Condition(t); c != nil && (c.Reason == ReasonResizeInfeasible || c.Reason == ReasonResizeNoRoom) &&
			c.ObservedGeneration == d.vm.Generation() {
			return c
		}
	}
	return nil
}

// newRestart is the value of the restart annotation when the controller has not acted on it
// yet, else "".
func (d *decision) newRestart() string {
	if r := d.vm.RestartRequested(); r != "" && r != d.current.RestartedAt {
		return r
	}
	return ""
}

// restartNotNeeded says, with an Event, that the restart request at restart is recorded and
// the server srv kept: one no status has reported yet, not made for the request, that has not
// started (active, unrecorded); unless the plan replaces srv all the same (a spec change): that
// replacement carries the restart out.
func (d *decision) restartNotNeeded(restart string, srv *backend.Server) {
	if a := d.plan.Server; a != nil && a.Op == DeleteServer {
		return
	}
	d.event(EventNormal, ReasonRestartNotNeeded, fmt.Sprintf("Restart requested at %s: server %s has not started yet and boots after the request, "+
		"as a restarted one would; it is kept (to replace it all the same, request another restart)", restart, srv.Name))
}

// unrecorded reports whether the VM's server is one no status has reported yet. Every status
// the controller writes names the server it saw, or made (Plan.Created), so such a server was
// made after the current status was written: by a create whose status write did not go
// through (a conflict: someone wrote the VM meanwhile), or whose status said no more than the
// one before (onTheWay); either way the server is newer than anything the status showed. It
// is not newer than a restart request, though: a restart that create carried out is known by
// the server's mark (backend.Spec.Restart), not by clocks, as comparing the request's time
// (the writer's clock) with the server's creation (the API server's) would.
func (d *decision) unrecorded() bool {
	cur := d.current.Server
	return d.srv != nil && (cur == nil || cur.ID != d.srv.ID)
}

// serverState reports the VM by the state of its server, which has the wanted spec (or is
// kept with another one on purpose).
func (p Policy) serverState(d *decision) {
	srv := d.srv
	switch srv.State {
	case backend.StatePending:
		if w := d.waitingForDisk(); d.disk.claims && w != "" && !d.stuckBeforeDisk() {
			if srv.Message != "" {
				w += "; the server: " + srv.Message
			}
			d.report(schema.PhaseCreating, ReasonWaitingForDisk, w, srv)
			return
		}
		if p.stuck(d) {
			return
		}
		msg := PendingMessage
		if srv.Message != "" {
			msg += ": " + srv.Message
		}
		d.report(schema.PhaseCreating, ReasonServerCreating, msg, srv)
	case backend.StateStarting:
		d.report(schema.PhaseCreating, ReasonServerStarting, fmt.Sprintf("Server %s is running and not ready yet", srv.Name), srv)
	case backend.StateReady:
		p.readyFailures(d)
		d.report(schema.PhaseActive, ReasonServerReady, fmt.Sprintf("Server %s is running and ready", srv.Name), srv)
	case backend.StateLost:
		d.nodeLost(srv)
	case backend.StateFailed, backend.StateStopped:
		p.restart(d)
	default:
		d.report(schema.PhaseUnknown, ReasonServerStateUnknown, fmt.Sprintf("Server %s is in state %q", srv.Name, srv.State), srv)
	}
}

// restart replaces a server that ended, as the run strategy says: under Always one that shut
// down cleanly at once (the guest's own choice is no fault to back off from); one that
// failed, under Always and RerunOnFailure, after a backoff that doubles with each consecutive
// failure, so that a server that cannot run is not recreated in a tight loop while its failed
// remains stay visible for a while. Under the other strategies an ended server is kept, and
// the VM is stopped or Failed (runstrategy.go).
func (p Policy) restart(d *decision) {
	srv := d.srv
	if d.run.strategy != schema.RunAlways && (d.run.strategy != schema.RunRerunOnFailure || srv.State != backend.StateFailed) {
		d.ended()
		return
	}
	if d.replacementWritten() {
		// The status says this server is being replaced (written before its delete), and the
		// delete did not follow: carried on as written, the failure already counted.
		d.replaceEnded(fmt.Sprintf("Replacing server %s (the replacement the status records)", srv.Name), d.current.ConsecutiveFailures)
		return
	}
	detail := ""
	if srv.Message != "" {
		detail = " (" + srv.Message + ")"
	}
	n := d.current.ConsecutiveFailures
	if ready := d.readySince(); !ready.IsZero() && !earlier(srv.Since, d.now).Before(ready.Add(p.stableAfter())) {
		// It ran stably before it ended: its failures are forgotten now, as readyFailures
		// would have written had a decision come after the bound and before the end. By the
		// controller's clock, as ready is: the server's end (for pods, the container's
		// finishedAt) is by its node's, and a node whose clock runs ahead would make a server
		// that crashed seconds after it was ready one that ran stably, its count reset at
		// every end, and the backoff would never grow. The end is no later than this
		// decision, the first to see it (the status says Active until one does); a node
		// whose clock runs behind makes it earlier, and a stable run counts as a short one
		// at worst: one backoff too long, never a loop.
		n = 0
	}
	note := fmt.Sprintf("Server %s failed%s", srv.Name, detail)
	if srv.State == backend.StateStopped {
		if n == 0 {
			// Counted all the same, so that a server that shuts down again before it is
			// ever ready (an image that exits at once) backs off like a failing one.
			d.replaceEnded(fmt.Sprintf("Server %s shut down cleanly%s; replacing it (runStrategy Always)", srv.Name, detail), 1)
			return
		}
		note = fmt.Sprintf("Server %s shut down cleanly%s again before it had been ready for %s", srv.Name, detail, p.stableAfter())
	}
	at := d.boundRetry(p.retryAt(srv, n), p.backoff(n), srv)
	// Event notes leave out what changes while one failure waits out its backoff (the time,
	// the count), so that decisions made again on the failed server fold into its one Event;
	// each server's failure is an Event of its own (the loop names the server as the Event's
	// related object, reconcile/events.go).
	if d.now.Before(at) {
		d.failures(n)
		d.run.nextRetry = at
		d.eventNote = note + "; a new server will be created after a backoff"
		d.report(schema.PhaseFailed, ReasonServerFailed, note+retryNote+at.Format(time.RFC3339), srv)
		d.plan.RequeueAfter = Duration(at.Sub(d.now))
		return
	}
	d.replaceEnded(note+"; replacing it", n+1)
}

// replaceEnded deletes the server that ended so that a new one follows, with failures the
// count of consecutive failures the new one starts from. The status goes first (StatusFirst):
// a server that shut down cleanly is replaced at once, before any status records its end, and
// one that failed may be too (its backoff over by the node's clock, in a layout without
// status.nextRetryTime); deleted first, it would be gone under a status that says it runs,
// and a new leader deciding before the status write would take it for one someone else
// deleted (ServerMissing). Should the delete not follow, the next decision carries the
// replacement on (replacementWritten) rather than count the end once more.
func (d *decision) replaceEnded(note string, failures int) {
	d.deleteServer(ReasonRestartingServer, note)
	d.plan.Server.StatusFirst = d.statusFirst()
	d.failures(failures)
	d.report(schema.PhaseCreating, ReasonServerReplacing,
		fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", d.srv.Name), d.deletingServer())
}

// stableAfter is how long a server must have been ready before its failures are forgotten:
// the count of consecutive failures goes back to zero, and the next failure waits
// RestartBackoff again. A server that fails sooner fails once more in a row, so that one that
// crashes seconds after it is ready backs off as one that never gets there does, instead of
// being replaced every RestartBackoff for ever. MaxRestartBackoff is the bound because with it
// a server that keeps failing is replaced about once per MaxRestartBackoff at most, whenever
// it fails: soon, after a backoff grown to that; late, after running that long. (Kubernetes'
// kubelet does the like for a container's crash-loop backoff: it is forgotten once the
// container has run for 10 minutes.)
func (p Policy) stableAfter() time.Duration { return p.MaxRestartBackoff }

// readyFailures carries the failure count into the status of a VM whose server is ready:
// zero once the server has been ready for stableAfter; until then the count as it is, with
// another look asked for when that time comes, so that the count is reset then even if
// nothing else changes.
func (p Policy) readyFailures(d *decision) {
	n := d.current.ConsecutiveFailures
	since := d.readySince()
	if since.IsZero() {
		since = d.now // ready as of this decision
	}
	stable := since.Add(p.stableAfter())
	if n == 0 || !d.now.Before(stable) {
		d.failures(0)
		return
	}
	d.failures(n)
	if d.plan.Server == nil { // a plan that acts on the server is looked at again anyway
		d.requeue(stable.Sub(d.now))
	}
}

// readySince is when the VM's server became ready, as the status says: the transition time
// of its Ready condition, which stays while the condition is True, when the status reports
// this very server Active. Zero when the status does not say it is ready.
func (d *decision) readySince() time.Time {
	c := d.current.Condition(schema.ConditionReady)
	if d.current.Phase != schema.PhaseActive || c == nil || c.Status != schema.ConditionTrue || d.unrecorded() {
		return time.Time{}
	}
	return c.LastTransitionTime
}

// RejectedRetry is how often a server the backend refused is asked for again: the cause (a
// quota, a clashing name, missing permissions) is usually fixed by a person, not by time.
const RejectedRetry = time.Minute

// Rejected is the plan for a VM whose server the backend refused to create: Failed with
// the backend's reason (why), and another try after a while rather than a retry storm. in is
// what the decision whose create was refused was given, at the time of the refusal (in.Now);
// its Gone and Disk count (nil: nothing), its Server and Budget do not: a create is refused
// for a VM without a server of its own, and the refusal asks nothing of the budget (refused). A create that moved the VM for an eviction seen only once its server was gone
// (goneEvicted) keeps the move in the refusal's status (Moving, whose message names the node
// to keep off: evictedNode), since once this status no longer names that server nothing else
// records the move. The disk is reported as that decision left it (its action, an adoption or
// a growth, came before the create and was carried out): a disk bound since the status was
// last written is Bound in the refusal's status, not Pending for as long as the refusals last,
// and the refusal decided again on the world it left writes nothing new.
func (p Policy) Rejected(in Input, why string) Plan {
	d := p.refused(in.VM, nil, in.Gone, in.Now)
	d.refusedOn(p, in.Disk)
	return d.rejected(why)
}

// rejected completes the plan of a refused create (ServerRejected).
func (d *decision) rejected(why string) Plan {
	// A migrate request the refused create was to carry out, as the move off the node of a
	// server going or gone already (migrate: goingFrom), is recorded as that move, as the
	// create's status would have recorded it. This status replaces the one that tells where
	// that server was (ServerEvicted, or one that names it running): decided again, the
	// request would be refused for a VM "not running", and the next server would not keep
	// off the node.
	if req := d.newMigration(); req != "" && !d.foldMigration(req) {
		if from := d.goingFrom(); from != "" {
			d.movingFrom(req, from)
		}
	}
	// The count the refused server was to start with: a failed server that went during its
	// backoff counts once the backoff is over (failuresSoFar), and is counted so when the
	// next try's create starts from this status, which says no backoff any more.
	d.failures(d.failuresSoFar())
	d.report(schema.PhaseFailed, ReasonServerRejected, "The server was refused: "+why, nil)
	d.plan.RequeueAfter = Duration(RejectedRetry)
	return d.plan
}

// ResizeRefused is the plan for a VM whose server's resize the backend refused outright
// (backend.ErrResizeInfeasible): the server is kept as it is, and the refusal is recorded at
// this generation so that the next decision does not ask again. Under --resize manual that is
// RestartRequired; so it is under the other modes when in.Hosts says no host has room for the
// new size either (room.go); otherwise the condition Resizing says why (the backend's reason), and
// the next decision replaces the server (specChanged). in is what the decision whose resize was
// refused was given, at the time of the refusal (in.Now); its Server is the server kept, and
// its Disk the disk the status reports as that decision did (refusedOn), its Stalled condition of a class
// change that does not apply (classChange) included, which a status that dropped it would
// give again, with its Warning, at the next decision.
func (p Policy) ResizeRefused(in Input, why string) Plan {
	vm, srv := in.VM, in.Server
	d := p.refused(vm, srv, nil, in.Now) // a server is there: nothing gone counts (Decide)
	d.hosts = in.Hosts
	d.refusedOn(p, in.Disk)
	refusal := "the node cannot resize it in place: " + why
	no := ""
	to, ok := d.resizedTo(srv)
	if ok && p.Resize != ResizeManual {
		no = d.noRoom(srv, to)
	}
	switch {
	case p.Resize == ResizeManual:
		d.cond.restartRequired = &lifecycleCondition{ReasonResizeInfeasible,
			fmt.Sprintf("Server %s cannot be resized in place (%s); %s", srv.Name, why, d.restartHint())}
	case no != "":
		// No host has room for the new size either (room.go): the server is kept, and
		// the record says so at once, as the next decision would.
		d.cond.restartRequired = d.keptForRoom(srv, to, no, refusal)
	default:
		d.cond.resizing = &lifecycleCondition{ReasonResizeInfeasible, refusal}
	}
	p.serverState(&d)
	return d.plan
}

// The bounds of an invalid spec's message. A field error repeats the refused value, which
// admission may have let through at any length (a nodeSelector's key, an affinity's term): a
// 40,000-digit cpu made a message the API server refused to store in a condition, so the VM
// never reached Failed. The value is quoted in part, each error bounded, and the whole
// message too (report).
const (
	maxQuotedValue = 80  // bytes of a refused string value a field error repeats
	maxFieldError  = 512 // bytes of one field error, its detail included
)

// refused starts the decision of a backend's refusal of what a plan for vm asked (the VM's
// server srv, nil when there is none, and the server gone while disrupted that plan's decision
// was given, gone): made without the disk, whose part of the status stays as it is (refusal)
// unless the caller decides it (ServerRejected: refusedOn),
// and with the run strategy, the eviction strategy and a move under way as Decide has them, an
// eviction seen only once its server was gone included (goneEvicted), so that the refusal's
// status keeps EvictionBlocked (its Warning is not given a second time) and Moving (the next
// server still follows the eviction) as the plan refused would have. It asks nothing of the
// VM's budget: the plan refused did, or the next decision does.
func (p Policy) refused(vm schema.VirtualMachine, srv *backend.Server, gone *backend.Gone, now time.Time) decision {
	d := decision{vm: vm, srv: srv, now: now.UTC().Truncate(time.Second), current: vm.Status(), refusal: true,
		evict: evictionPart{budgetUnseen: true}, run: runPart{maxBackoff: p.MaxRestartBackoff}}
	if srv == nil {
		d.evict.gone = gone // as Decide takes it
	}
	if spec, errs := vm.Spec(); len(errs) == 0 {
		d.run.strategy = spec.RunStrategy
		d.eviction(p.evictionStrategy(spec), spec.RunStrategy != schema.RunHalted)
		d.plan.Budget = nil
	}
	return d
}

// refusedOn decides the disk's part of a refused create's status on disk, what the decision
// whose create was refused was given, as Decide does: the disk the VM has once that
// decision's disk action (carried out before the create) is done, and its DiskResizing
// condition, with the Events of that condition's changes, which the status refused did not
// record. The action itself is not asked for again. Under --root-disk ephemeral the status
// reports no disk, as Decide's. A disk a create cannot follow (none, another's, or one going
// away) is no world the create was decided on: the status keeps what it says of the disk.
func (d *decision) refusedOn(p Policy, disk *backend.Disk) {
	spec, errs := d.vm.Spec()
	if len(errs) > 0 {
		return
	}
	if !p.claims() {
		d.refusal = false
		return
	}
	if disk == nil || disk.Deleting || disk.Owner == backend.DiskOther {
		return
	}
	d.refusal, d.disk.claims, d.disk.seen = false, true, disk
	if disk.Owner.Mine() {
		kept := *disk
		d.disk.own = &kept
	}
	d.diskFor(spec)
	d.plan.Disk = nil
}

// invalidMessage lists every field error, one after the other, for the status message.
func invalidMessage(errs field.ErrorList) string {
	msgs := make([]string, len(errs))
	for i, e := range errs {
		if v, ok := e.BadValue.(string); ok && len(v) > maxQuotedValue {
			short := *e
			short.BadValue = schema.Shorten(v, maxQuotedValue)
			e = &short
		}
		msgs[i] = schema.Shorten(e.Error(), maxFieldError)
	}
	return "Invalid spec: " + strings.Join(msgs, "; ")
}

// backoff is the wait before replacing a server after n earlier consecutive failures. A
// doubling that would pass MaxRestartBackoff stops there: compared before it is made, so that
// a maximum near time.Duration's own never wraps the wait round to a negative one (which
// would replace a failing server at once, every time).
func (p Policy) backoff(n int) time.Duration {
	b := p.RestartBackoff
	for i := 0; i < n && b < p.MaxRestartBackoff; i++ {
		if b > p.MaxRestartBackoff/2 {
			return p.MaxRestartBackoff
		}
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
	if !backend.SamePlacement(have.Placement, want.Placement) {
		s = placementChange(s)
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

// lifecycle sets the condition of type t to c (True), or drops it when c is nil.
func (d *decision) lifecycle(conds []schema.Condition, t string, c *lifecycleCondition, gen int64) []schema.Condition {
	if c != nil {
		return schema.SetCondition(conds, schema.Condition{Type: t, Status: schema.ConditionTrue, Reason: c.reason, Message: c.message,
			ObservedGeneration: gen, LastTransitionTime: d.now})
	}
	return schema.RemoveCondition(conds, t)
}

// restartRequiredEvent records, as a Normal Event with the condition's reason and message, a
// RestartRequired condition st brings, turns to another reason, or says anew for a new spec:
// the server is kept as it is, whatever the reason (--resize manual's ResizeInfeasible and
// SpecChangeNeedsRestart, or ResizeNoRoom), and the VM's phase and reason stay as they were,
// so without it the owner who changed the spec would see nothing happen in the Events. An
// owner who changes the spec again while a restart is required (cpu 8 after cpu 4) gets
// one more, saying what the new spec needs. The decisions that keep the condition after
// say nothing more: the same reason for the same generation (the record kept, or a host's
// refusal worded anew), or a new generation that needs what the last one did (a change of
// a field the server does not take, which leaves the message as it was).
// Normal: the VM runs, and waits for its owner's word (kstatus reads it Current, not Stalled).
func (d *decision) restartRequiredEvent(st schema.Status) {
	c := st.Condition(schema.ConditionRestartRequired)
	if c == nil {
		return
	}
	if was := d.current.Condition(schema.ConditionRestartRequired); was != nil && was.Reason == c.Reason &&
		(was.ObservedGeneration == c.ObservedGeneration || was.Message == c.Message) {
		return
	}
	d.event(EventNormal, c.Reason, c.Message)
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
	msg = schema.Shorten(msg, schema.ConditionMessageLimit) // the message of Ready too
	st.Phase, st.Reason, st.Message = phase, reason, msg
	st.ObservedGeneration = d.vm.Generation()
	d.pendingStart(st, reason)
	if d.vm.Fields().NextRetryTime != "" {
		// Set while a failed server waits out its backoff only; not in a layout without the
		// field (a CRD of another group, a field map of its own), which reads it back as
		// unset: every decision of the wait found the status changed and wrote it again.
		st.NextRetryTime = d.run.nextRetry
	}
	st.Server = nil
	if srv != nil {
		st.Server = &schema.ServerStatus{Name: srv.Name, ID: srv.ID, State: srv.Detail}
		d.where(st.Server, srv)
		// Usage is reported by its own loop, for an Active VM's server only: kept while the
		// VM stays Active on the server it was sampled from, dropped otherwise (a VM that is
		// not Active reports none, and the loop has dropped its series; docs/usage.md). Its
		// condition goes with it (usageReported).
		if cur := d.current.Server; cur != nil && cur.Usage != nil && phase == schema.PhaseActive && cur.ID == srv.ID {
			u := *cur.Usage
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
	// The transition time stays when the status does (meta.SetStatusCondition's rule), but
	// for the server it is about: one no status has named yet (unrecorded: made by a create
	// whose status write did not go through) became ready since that status was written, not
	// when the server it named did, and now is the time known of it (late, which keeps the
	// failures for longer rather than shorter). Carried over, the older time would read as a
	// new server ready for long (readySince), and its failures would be forgotten at once.
	// Likewise, for a status that first reports a server's wait the backend cannot date, the
	// time is that of this report, which the wait is counted from (stuck.go, reportedWait).
	st.Conditions = schema.SetCondition(d.current.Conditions, ready)
	if ready.Status == schema.ConditionTrue && d.unrecorded() || !d.cond.waitReported.IsZero() {
		for i := range st.Conditions { // SetCondition's own list: the status's is not changed
			if st.Conditions[i].Type == schema.ConditionReady {
				st.Conditions[i].LastTransitionTime = d.now
			}
		}
	}
	if phase == schema.PhaseInactive && atRest[reason] {
		// Stopped as asked: not ready, but not on its way anywhere either. kstatus reads a
		// Ready of False as work in progress, so a halted VM would keep a GitOps tool
		// waiting for ever; without the condition it is Current.
		st.Conditions = schema.RemoveCondition(st.Conditions, schema.ConditionReady)
	}
	st.Conditions = d.lifecycle(st.Conditions, schema.ConditionResizing, d.cond.resizing, st.ObservedGeneration)
	st.Conditions = d.lifecycle(st.Conditions, schema.ConditionRestartRequired, d.cond.restartRequired, st.ObservedGeneration)
	st.Conditions = usageReported(st.Conditions, st) // goes with the usage it describes
	switch {
	case d.refusal:
		st.RootDisk = d.current.RootDisk
	case d.disk.claims:
		st.RootDisk = d.rootDiskStatus()
		st.Conditions = d.lifecycle(st.Conditions, schema.ConditionDiskResizing, d.disk.resizing, st.ObservedGeneration)
	default:
		// The controller keeps no disks, so none grows: a DiskResizing of a run under claim
		// goes with the disk's status.
		st.RootDisk = nil
		st.Conditions = schema.RemoveCondition(st.Conditions, schema.ConditionDiskResizing)
	}
	st.Conditions = d.resumed(st.Conditions)
	st.Conditions = d.evictionConditions(st.Conditions, st.ObservedGeneration, reason)
	st.Conditions = d.stoppedRecord(st.Conditions, reason, st.ObservedGeneration)
	d.stoppedMigration(st, reason)
	st.Conditions = d.kstatus(st)
	d.stalledDiskEvent(*st)
	d.diskGoneEvent(*st)

	if st.SameAs(d.current) || d.onTheWay(*st) || d.placedOnly(*st) {
		d.plan.Status = nil
		return reported{}
	}
	st.LastUpdateTime = d.now
	d.plan.Events = append(d.plan.Events, d.disk.events...)
	d.disk.events = nil
	d.restartRequiredEvent(*st)
	// A server or a disk the plan creates says with its Event what the VM is waiting for.
	explained := d.plan.Server != nil || d.plan.Disk != nil && d.plan.Disk.Op == CreateDisk
	if !explained && (d.current.Phase != phase || d.current.Reason != reason) {
		// A Warning for what needs a person: a failure, a node that does not answer, and a
		// status Stalled on its own reason (a stalled reason, a failure not retried, a disk
		// whose volume is lost), which nothing the controller does will end.
		typ := EventNormal
		if phase == schema.PhaseFailed || phase == schema.PhaseUnknown || reason == ReasonNodeLost || stalledOn(*st) {
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
