package decision

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The run strategies other than Always and Halted: RerunOnFailure, Once and Manual
// (schema.RunStrategy; docs/run-strategies.md). Each tells a clean shutdown of the guest
// (backend.StateStopped: for pods, Succeeded) from a failure (StateFailed):
//
//   - RerunOnFailure replaces a failed server after the backoff, as Always does; a clean
//     shutdown leaves the VM stopped (GuestShutDown), the ended server kept.
//   - Once never replaces a server: after a failure the VM is Failed, after a clean shutdown
//     stopped, each with the ended server kept.
//   - Manual creates a server only on a start request and deletes one only on a stop request;
//     a server that ends is not replaced. A new Manual VM stays stopped (NotStarted).
//
// Under the three, a start request starts a stopped VM (an ended server is deleted first)
// and a stop request deletes the server. Whether a VM without a live server is stopped is
// read from its status: the reason the controller last wrote for it, or, while the
// controller refuses the VM (its spec, its disk, its server: refusals), the record that
// refusal keeps of the stopped status it replaced (the condition Stopped; rest).

// runPart is the run strategy's part of a decision: the strategy in force, and the backoff of
// a failed server's replacement (under Always and RerunOnFailure), which the status records
// (nextRetryTime).
type runPart struct {
	// strategy is the VM's run strategy (valid specs only); nextRetry, if set, is when the
	// failed server will be replaced (status.nextRetryTime).
	strategy  schema.RunStrategy
	nextRetry time.Time
	// maxBackoff is Policy.MaxRestartBackoff, the bound of a wait for a failed server's
	// replacement by the controller's clock (recordedRetry).
	maxBackoff time.Duration
	// start is the new start request this decision carries out (onRequest), recorded in
	// its status (status.startRequestedAt) unless that status refuses the VM (pendingStart).
	start string
	// stoppedAs, if set, is the stopped status this decision's refusal stands for, in place
	// of the one it replaces (stoppedBefore): the server deleted beside an invalid spec
	// (stopInvalid) is stopping as the valid spec's decision would report it.
	stoppedAs *rested
}

// onRequest decides for a VM whose strategy is RerunOnFailure, Once or Manual.
func (p Policy) onRequest(d *decision, want backend.Spec, spec schema.Spec) {
	start, stop := d.newRequests()
	srv := d.srv
	if stop.Value != "" {
		d.next().StopRequestedAt = stop.Value
		d.stopServer(spec, stop.Value)
		return
	}
	if start.Value != "" {
		switch {
		case srv != nil && srv.Deleting && srv.State == backend.StateLost:
			// Not yet either, and the deletion (a stop's, Halted's) cannot finish while
			// the node does not answer: NodeLost still holds, now in the phase of a new
			// server that waits for it, as for a restart (lostWhileDeleted). Once the
			// server is gone the start is carried out as any other, ServerCreating.
			d.lostServer(schema.PhaseCreating, srv)
			return
		case srv != nil && srv.Deleting:
			// Not yet: the start is recorded with the create that carries it out, once
			// the old server is gone.
			d.report(schema.PhaseCreating, ReasonServerReplacing,
				fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", srv.Name), srv)
			return
		case srv != nil && ended(srv):
			d.ensureFinalizer(true)
			d.plan.Server = &ServerAction{Op: DeleteServer, Event: Event{Type: EventNormal, Reason: ReasonStartingServer,
				Message: fmt.Sprintf("Deleting ended server %s: start requested at %s; a new one follows", srv.Name, start.Value)}}
			d.report(schema.PhaseCreating, ReasonServerReplacing,
				fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", srv.Name), d.deletingServer())
			return
		}
		// No server (the create below carries the start out) or a live one (a start of a
		// running VM changes nothing): recorded in this decision's write either way, but
		// for a refusal's (pendingStart).
		d.run.start = start.Value
		d.next().StartRequestedAt = start.Value
		p.active(d, want, spec)
		return
	}
	switch {
	case d.replacing():
		// Moved under evictionStrategy Replace (eviction.go), whatever the strategy.
	case srv != nil && srv.State == backend.StateLost && !(srv.Deleting && d.stopping()) &&
		!(srv.Deleting && d.run.strategy == schema.RunManual && (d.lostWhileInactive() || d.rest().recorded && d.rest().reason == ReasonServerStopping)):
		// On a node that does not answer: active reports NodeLost, and starts nothing while
		// the server may still run there (nodelost.go). One a stop is deleting is the
		// stop's (stayStopped), and so, under Manual, is one Halted was deleting: a Manual
		// VM runs on a start request, and active would claim the server (Unknown), whose
		// going then starts a new one (stoppedState). On a node that answers it is
		// NotStarted. A refusal's record of Halted's deletion (stoppedBefore) counts as
		// NodeLost in phase Inactive does: it may be one, recorded so.
	case srv != nil && !srv.Deleting && ended(srv) && !(d.run.strategy == schema.RunRerunOnFailure && srv.State == backend.StateFailed):
		// Kept as it ended: a spec change does not start a stopped VM either.
		d.ensureFinalizer(true)
		d.holdDisk(spec)
		d.inactiveMigration()
		d.ended()
		return
	case (srv == nil || srv.Deleting) && d.stoppedState():
		d.holdDisk(spec)
		d.inactiveMigration()
		d.stayStopped()
		return
	}
	p.active(d, want, spec)
}

// pendingStart leaves the start request this decision was to carry out (run.start) out of
// st, a status of reason, when the status is a refusal's (refusals: under a decision, a disk
// of the VM's name that is another's, DiskConflict): the refusal makes no server, and a start
// recorded as done there would never be carried out. The refusal of a stopped VM keeps the
// record of its stopped status (ConditionRefusedWhileStopped), and once the refusal is lifted
// the VM would go back to it, stopped, as if no one had asked. Left pending, the start is
// decided again with each decision of the refusal (which writes nothing new) and carried out
// by the first that is not refused, as a start whose server's create the backend refused
// (Rejected, which records no request) or one given while the spec is invalid (Decide's
// early return) is.
func (d *decision) pendingStart(st *schema.Status, reason string) {
	if d.run.start != "" && refusals[reason] {
		st.StartRequestedAt = d.current.StartRequestedAt
	}
}

// ended reports whether a server has ended: it will not run again by itself.
func ended(srv *backend.Server) bool {
	return srv.State == backend.StateStopped || srv.State == backend.StateFailed
}

// stoppedReasons are the reasons of a VM stopped under every strategy that heeds requests:
// stopped on request, or after its guest shut down.
var stoppedReasons = []string{ReasonStopped, ReasonStopping, ReasonGuestShutDown}

// onItsWay are the reasons of a VM under Manual whose server is being made, on request: the
// create, a replacement (a restart, a start after an end, a spec change, a migration or a move
// after an eviction), or a wait for its disk or after a refusal. Every refusal (refusals) is
// one: a refusal of a VM that was stopped carries the record of it (RefusedWhileStopped),
// which rest reads instead, so one without it replaced a VM on its way or running (a restart
// whose create the spec made invalid must not end stopped). A VM refused from its first
// decision on replaced no status; stoppedBefore records it as never started where a new VM of
// its strategy would be.
var onItsWay = []string{ReasonServerReplacing, ReasonServerCreating, ReasonWaitingForDisk, ReasonServerRejected,
	ReasonDiskRejected, ReasonDiskConflict, ReasonInvalidSpec, ReasonMigrating, ReasonServerEvicted}

// stoppedState reports whether a VM without a live server (none, or one being deleted) is
// stopped, rather than on its way to a new server, by the reason its status gives (rest: under
// a refusal, the reason of the stopped status the refusal replaced).
func (d *decision) stoppedState() bool {
	reason := d.rest().reason
	if slices.Contains(stoppedReasons, reason) || d.lostWhileStopping() {
		return true
	}
	// The server the status claims went, or is going, without the controller deleting it,
	// unless a request explains it: the VM is asked to run on. So is a VM whose server's
	// node did not answer (NodeLost in phase Unknown): its server goes by the way out the
	// status gives (the node deleted, the server force-deleted), which promises a new server
	// under every strategy; nobody asked the VM to stop, and its guest neither shut down nor
	// failed, as far as anyone could tell (docs/placement.md#when-a-node-is-lost).
	missing := (d.srv == nil || d.srv.Deleting) && d.missingServer() != ""
	if missing && (d.requestTakesServer() || reason == ReasonNodeLost) {
		return false
	}
	switch d.run.strategy {
	case schema.RunOnce:
		return missing || reason == ReasonServerFailed || reason == ReasonServerMissing
	case schema.RunManual:
		return missing || !slices.Contains(onItsWay, reason) && !d.lostWhileReplacing()
	}
	return false // RerunOnFailure: a server deleted by someone else is replaced, as a failure
}

// ConditionRefusedWhileStopped is the record a refusal's status keeps of the stopped status it replaced:
// present (True) only in the status of a refusal (refusals) of a VM that was stopped, with
// the reason and message that status had, or of a new VM its strategy would not have started
// (NotStarted; stoppedBefore). A refusal writes its own phase,
// reason and message over the VM's, and without the record a VM stopped on request, after a
// clean shutdown or (Once, Manual) after a failure would be taken, once the refusal is lifted,
// for one on its way to a server (stoppedState), and started. It is kept in the status, not
// in the controller's memory, so that a restarted controller or a new leader knows it too;
// and it costs no write of its own: it comes with the refusal's status, and goes with the
// status that ends the refusal (the stopped one again, stayStopped), each written anyway.
const ConditionRefusedWhileStopped = "RefusedWhileStopped"

// refusals are the reasons of the statuses in which the controller refuses the VM's spec
// (InvalidSpec), its disk (DiskRejected, DiskConflict) or its server (ServerRejected: a
// start's create refused): each replaces the phase, reason and message the VM had, and keeps
// what a stopped VM needs kept (ConditionRefusedWhileStopped).
var refusals = map[string]bool{ReasonInvalidSpec: true, ReasonDiskRejected: true, ReasonDiskConflict: true, ReasonServerRejected: true}

// RefusedWhileStopped reports whether st is a refusal's status (refusals) of a VM that was
// stopped (ConditionRefusedWhileStopped), as the decisions read it: the record counts only in
// a refusal's status, so that one left by another version in any other status says nothing.
func RefusedWhileStopped(st schema.Status) bool {
	c := st.Condition(ConditionRefusedWhileStopped)
	return c != nil && c.Status == schema.ConditionTrue && refusals[st.Reason]
}

// rested is the phase, reason and message by which the decisions tell whether, and why, a
// VM without a live server is stopped (rest); recorded: they are a refusal's record, not the
// status's own.
type rested struct {
	phase           schema.Phase
	reason, message string
	recorded        bool
}

// rest is the phase, reason and message of the status the VM rests with: its own, or under
// a refusal that replaced a stopped status, that status's, as the refusal recorded it
// (ConditionRefusedWhileStopped). Its phase is not recorded: a stopped status is Inactive, but for a
// failure its run strategy does not replace (ServerFailed), which is Failed.
func (d *decision) rest() rested {
	cur := d.current
	if RefusedWhileStopped(cur) {
		c := cur.Condition(ConditionRefusedWhileStopped)
		phase := schema.PhaseInactive
		if c.Reason == ReasonServerFailed {
			phase = schema.PhaseFailed
		}
		return rested{phase, c.Reason, c.Message, true}
	}
	return rested{cur.Phase, cur.Reason, cur.Message, false}
}

// stoppedBefore is the stopped status a refusal's status replaces, for its record
// (ConditionRefusedWhileStopped); false when the VM was not stopped. What the VM rests with (rest: a
// refusal over a refusal keeps the first one's record) is stopped when no server runs or is
// made for it but on a start request (or a change of the run strategy):
//   - Inactive at rest (atRest: stopped on request, a guest shut down, a server gone that is
//     not replaced, a Manual VM never started, Halted);
//   - a stop's or Halted's deletion under way (Stopping, ServerStopping), and the same on a
//     node that does not answer (NodeLost in phase Inactive), recorded as the one or the
//     other: what that message says is the node's, which the decision after the refusal says
//     anew (stayStopped);
//   - a failure its run strategy does not replace (ServerFailed, but under RerunOnFailure);
//   - no status at all: a new VM refused at its first decision, under a strategy that does not
//     start a new VM (Manual: NotStarted; Halted: ServerStopped) or one not known (""),
//     recorded as never started (NotStarted, neverStarted). Lifted under Manual it stays
//     stopped (stayStopped); under any other strategy that runs, it starts (stoppedState).
//     Under Once and RerunOnFailure a new VM is on its way: no record; nor under Halted or an
//     unknown strategy in a layout without a word for Manual, where the record would count
//     under no strategy the VM can be given.
//
// Under Always nothing is: the VM runs whatever its status said, and a strategy changed to it
// drops the record. strategy is the one the refusal's VM names; "" when it names none (an
// invalid spec's), where a failure counts as stopped: the strategy the refusal is lifted
// under decides what it is (stoppedState).
func (d *decision) stoppedBefore(strategy schema.RunStrategy) (rested, bool) {
	r, cur := d.rest(), d.current
	switch {
	case strategy == schema.RunAlways:
		return rested{}, false
	case r.reason == "" && r.phase == "":
		// Halted's or an unknown strategy's record counts only once the VM is Manual: not in
		// a layout that cannot say Manual.
		canManual := d.vm.Fields().StrategyWord(schema.RunManual) != ""
		if strategy == schema.RunManual || (strategy == schema.RunHalted || strategy == "") && canManual {
			return rested{schema.PhaseInactive, ReasonNotStarted, neverStarted, true}, true
		}
		return rested{}, false
	case r.reason == ReasonNodeLost && r.phase == schema.PhaseInactive && cur.Server != nil:
		if d.lostWhileStopping() {
			return rested{schema.PhaseInactive, ReasonStopping,
				fmt.Sprintf("Waiting for server %s to be deleted %s", cur.Server.Name, stopNote(cur.StopRequestedAt)), true}, true
		}
		return rested{schema.PhaseInactive, ReasonServerStopping,
			fmt.Sprintf("Waiting for server %s to be deleted (action is inactive)", cur.Server.Name), true}, true
	case r.phase == schema.PhaseInactive && (atRest[r.reason] || r.reason == ReasonStopping || r.reason == ReasonServerStopping):
		return r, true
	case r.phase == schema.PhaseFailed && r.reason == ReasonServerFailed:
		return r, strategy != schema.RunRerunOnFailure
	}
	return rested{}, false
}

// neverStarted is the message of the record (ConditionRefusedWhileStopped) of a VM refused
// from its first decision on, which replaced no stopped status (stoppedBefore).
const neverStarted = "The VM has never run: refused since it was created; under runStrategy Manual it waits for a start request once the refusal is lifted"

// stoppedRecord returns conds, those of a status of reason, with the record of the stopped
// status a refusal replaces (ConditionRefusedWhileStopped), or without it: only a refusal of a VM that
// was stopped carries it, and any other status drops it.
func (d *decision) stoppedRecord(conds []schema.Condition, reason string, gen int64) []schema.Condition {
	if !refusals[reason] {
		return schema.RemoveCondition(conds, ConditionRefusedWhileStopped)
	}
	strategy := d.run.strategy
	if strategy == "" {
		spec, _ := d.vm.Spec() // an invalid spec: the strategy it names, if it names one
		strategy = spec.RunStrategy
	}
	r, ok := d.stoppedBefore(strategy)
	if d.run.stoppedAs != nil {
		r, ok = *d.run.stoppedAs, true
	}
	if !ok {
		return schema.RemoveCondition(conds, ConditionRefusedWhileStopped)
	}
	return schema.SetCondition(conds, schema.Condition{Type: ConditionRefusedWhileStopped, Status: schema.ConditionTrue, Reason: r.reason,
		Message: r.message, ObservedGeneration: gen, LastTransitionTime: d.now})
}

// stopping reports whether the status says a stop request is deleting the server: Stopping
// (or a refusal's record of it, rest), or NodeLost in phase Inactive (the node of the server
// that the stop deletes does not answer).
func (d *decision) stopping() bool {
	return d.rest().reason == ReasonStopping || d.lostWhileStopping()
}

// stopServer carries out a stop request: the server goes (with the grace period the stop
// asked for), and the VM stays stopped until a start request. A server already being deleted
// is deleted again when the stop gives a grace period (kubectl vm stop --force on a guest that
// hangs in its shutdown): a delete with a shorter grace period than the one under way cuts it
// short, as kubectl delete --force does; a longer one changes nothing. One whose node does not
// answer is not: its deletion waits for the node, or for the way out its status names.
func (d *decision) stopServer(spec schema.Spec, at string) {
	if r := d.newRestart(); r != "" {
		d.next().RestartedAt = r // overtaken by the stop
	}
	d.holdDisk(spec)
	srv := d.srv
	if srv == nil {
		d.report(schema.PhaseInactive, ReasonStopped, fmt.Sprintf("Stopped on request (%s); %s", at, d.startHint()), nil)
		return
	}
	d.deleteOnStop(at)
	if srv.State == backend.StateLost {
		d.lostOnStop(d.deletingServer(), at) // its deletion cannot finish (nodelost.go)
		return
	}
	d.report(schema.PhaseInactive, ReasonStopping,
		fmt.Sprintf("Waiting for server %s to be deleted (stop requested at %s)", srv.Name, at), d.deletingServer())
}

// deleteOnStop deletes the server for the stop request at (stopServer; also beside an invalid
// spec, stopInvalid), with the grace period the stop asked for; one being deleted already,
// again with that grace period if it gives one. Not one on a node that does not answer: a
// delete with a grace period of 0 removes its pod at once, while its guest may still run
// there with the disk (nodelost.go names the way out, for a node down for good).
func (d *decision) deleteOnStop(at string) {
	srv := d.srv
	d.ensureFinalizer(true)
	d.evict.moving = nil // a move under Replace ends with the stop
	if grace := d.stopGrace(); !srv.Deleting || grace != nil && srv.State != backend.StateLost {
		d.plan.Server = &ServerAction{Op: DeleteServer, GracePeriod: grace, Event: Event{Type: EventNormal,
			Reason: ReasonStoppingServer, Message: fmt.Sprintf("Deleting server %s: stop requested at %s", srv.Name, at)}}
		if srv.Deleting {
			d.plan.Server.Event.Message += fmt.Sprintf(", grace period %s", time.Duration(*grace))
		}
	}
}

// stayStopped reports a stopped VM without a live server as it is: the reason it stopped
// for (rest: also once a refusal that replaced it is lifted), or under Manual, never started
// (NotStarted), or gone without the controller deleting it (ServerMissing, not replaced). A
// stop's server on a node that does not answer is NodeLost, in phase Inactive, until it is
// gone (nodelost.go). A failure whose replacement the status promised (a server deleted
// during its backoff under Always or RerunOnFailure) is not replaced under the strategy
// set since (Once, Manual): the message says so, and how to start the VM, instead of the time
// the new server was to come.
func (d *decision) stayStopped() {
	if r := d.newRestart(); r != "" {
		d.next().RestartedAt = r // nothing runs to restart; a start makes a new server anyway
	}
	srv, cur, rest := d.srv, d.current, d.rest()
	if srv != nil {
		d.ensureFinalizer(true)
		srv = d.deletingServer() // being deleted by someone: the VM stays stopped once it is gone
		if srv.State == backend.StateLost {
			stop := "" // a stop's, which cannot finish (onRequest), or Halted's that the strategy followed
			if rest.reason == ReasonStopping || d.lostWhileStopping() {
				stop = cur.StopRequestedAt
			}
			d.lostFor(schema.PhaseInactive, srv, stop)
			return
		}
	}
	if gone := d.missingServer(); gone != "" {
		r := d.report(schema.PhaseInactive, ReasonServerMissing, fmt.Sprintf("Server %s was deleted, not by the controller; "+
			"it is not replaced (runStrategy %s); %s", gone, d.run.strategy, d.startHint()), srv)
		if r.event {
			d.plan.Events[len(d.plan.Events)-1].Type = EventWarning
		}
		return
	}
	stopping := rest.reason == ReasonStopping || d.lostWhileStopping()
	if slices.Contains(stoppedReasons, rest.reason) || rest.reason == ReasonServerFailed || rest.reason == ReasonServerMissing || stopping {
		phase, reason, msg := rest.phase, rest.reason, rest.message
		switch {
		case stopping && srv == nil:
			phase, reason, msg = schema.PhaseInactive, ReasonStopped, fmt.Sprintf("Stopped on request (%s); %s", cur.StopRequestedAt, d.startHint())
		case stopping:
			// Its node answers again (or a refusal is lifted), and the stop's deletion goes
			// on (stopServer).
			phase, reason, msg = schema.PhaseInactive, ReasonStopping, fmt.Sprintf("Waiting for server %s to be deleted %s", srv.Name, stopNote(cur.StopRequestedAt))
		case reason == ReasonServerFailed:
			if i := strings.LastIndex(msg, retryNote); i >= 0 {
				msg = fmt.Sprintf("%s; it is not replaced (runStrategy %s); %s", msg[:i], d.run.strategy, d.startHint())
			}
		}
		d.report(phase, reason, msg, srv)
		return
	}
	d.report(schema.PhaseInactive, ReasonNotStarted,
		fmt.Sprintf("runStrategy Manual: the VM runs when asked to; %s", d.startHint()), srv)
}

// ended reports a VM whose server ended and is kept: stopped after a clean shutdown, Failed
// after a failure; neither is replaced.
//
// One that lingers (a sidecar keeps its pod running) holds its node's cpu and memory for as
// long as it is kept: the message says so, and how to free them (lingersHeld), instead of how
// to start the VM. The Event of the transition carries that message, once, with its usual
// type: Normal for a clean shutdown, as for any VM at rest (a Warning is for Failed, Unknown,
// NodeLost, a stuck server and a status Stalled on its reason, which FuzzDecide holds to).
// Resources a kept server holds are what its run strategy keeps it for, not a failure; a
// drain that it holds up is one, and has its Warning (DrainBlocked). A server that stops lingering (the sidecar ended too) only
// changes the message.
func (d *decision) ended() {
	if r := d.newRestart(); r != "" {
		d.next().RestartedAt = r // nothing runs to restart; a start makes a new server
	}
	srv := d.srv
	detail := ""
	if srv.Message != "" {
		detail = " (" + srv.Message + ")"
	}
	then := "; " + d.startHint()
	if srv.Lingers {
		then = ", but " + d.lingersHeld()
	}
	if srv.State == backend.StateStopped {
		d.report(schema.PhaseInactive, ReasonGuestShutDown, fmt.Sprintf("Server %s shut down cleanly%s; the VM stays stopped "+
			"(runStrategy %s)%s", srv.Name, detail, d.run.strategy, then), srv)
		return
	}
	d.report(schema.PhaseFailed, ReasonServerFailed, fmt.Sprintf("Server %s failed%s; it is not replaced (runStrategy %s)%s",
		srv.Name, detail, d.run.strategy, then), srv)
}

// startHint is how a user starts a stopped VM; messages of stopped VMs end with it.
func (d *decision) startHint() string {
	return fmt.Sprintf("start it with: %s (or %s)", d.plugin("start"), Annotate(d.vm, stamp(schema.AnnotationStartRequestedAt)))
}

// retryAt is when a server that failed after n earlier consecutive failures is replaced, by
// the clock of the server's host (for pods, the container's finishedAt, the node's):
// boundRetry decides whether that clock is used at all.
func (p Policy) retryAt(srv *backend.Server, n int) time.Time {
	return srv.Since.UTC().Truncate(time.Second).Add(p.backoff(n))
}

// boundRetry is when the failed server srv is replaced, after a backoff of wait, by the
// controller's clock. Once the status records the failure (backingOff, naming srv), the time
// it gives, itself bounded (recordedRetry): it does not move with now, so deciding again does
// not rewrite it. Until then the backoff counts from now, the decision that records the
// failure, whatever the node's clock says (at, retryAt): a node whose clock runs ahead would
// hold the VM for as long as it is ahead, and one that runs behind would cut the backoff short
// by as much, or skip it, and a crash loop would not back off. From the server's end alone a
// clock behind by some time cannot be told from a failure the controller saw that much late
// (a lagging watch, a restart); it is taken as the former, which waits one backoff too many at
// worst, never none.
//
// That needs status.nextRetryTime to hold the time: without the field every decision would
// find the failure unrecorded and push the time on by the backoff, for ever. A layout without
// it takes the node's clock as it is, bounded from above only: no later than wait past the
// decision that records the failure.
//
// A status that reports srv failed without a time of its own in nextRetryTime (written by a
// version before the field, or under a run strategy that did not replace it: Once, then
// Always) recorded the failure at its last write: the backoff counts from there. In a layout
// without the field the time the message gives holds (retryInMessage), bounded as
// recordedRetry bounds nextRetryTime; a later write of the status for something else (a new
// generation) moves lastUpdateTime, and a time reckoned from it would move with every write,
// each a rewrite of the message.
func (d *decision) boundRetry(at time.Time, wait time.Duration, srv *backend.Server) time.Time {
	cur := d.current
	s := cur.Server
	if d.backingOff() && s != nil && s.ID == srv.ID {
		return d.recordedRetry()
	}
	last := cur.LastUpdateTime.UTC().Truncate(time.Second)
	recorded := cur.Reason == ReasonServerFailed && s != nil && s.ID == srv.ID && !cur.LastUpdateTime.IsZero()
	switch {
	case d.vm.Fields().NextRetryTime != "" && recorded:
		return last.Add(wait)
	case d.vm.Fields().NextRetryTime != "":
		return d.now.Add(wait)
	case recorded:
		if t, ok := retryInMessage(cur.Message); ok {
			return earlier(t, last.Add(d.run.maxBackoff))
		}
		return earlier(at, last.Add(wait))
	}
	return earlier(at, d.now.Add(wait))
}

// retryNote ends the message of a failed server waiting out its backoff, before the time a new
// server is made; in a layout without status.nextRetryTime it is the one record of that time
// (retryInMessage).
const retryNote = "; a new server will be created at "

// retryInMessage is the time a failed server's message gives for its replacement (retryNote);
// false when it gives none (another message, or one cut short).
func retryInMessage(msg string) (time.Time, bool) {
	i := strings.LastIndex(msg, retryNote)
	if i < 0 {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, msg[i+len(retryNote):])
	return t, err == nil
}

// recordedRetry is when the failed server the status reports waiting out its backoff
// (backingOff) is replaced: status.nextRetryTime, but no later than MaxRestartBackoff past the
// status's last write (lastUpdateTime, by the controller's clock), which recorded the
// failure or came after it. A nextRetryTime the controller wrote is bounded so already
// (boundRetry); one an earlier version reckoned from a node's clock that runs ahead is not,
// and with the failed server deleted nothing else would end the wait. It does not move with
// now, only with the status's writes, and a later write keeps the earlier bound
// (waitOutBackoff writes it as nextRetryTime). A layout without lastUpdateTime has no bound
// but the one boundRetry put on the time when it was written.
func (d *decision) recordedRetry() time.Time {
	cur := d.current
	if cur.LastUpdateTime.IsZero() {
		return cur.NextRetryTime
	}
	return earlier(cur.NextRetryTime, cur.LastUpdateTime.UTC().Truncate(time.Second).Add(d.run.maxBackoff))
}

// earlier is the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// waitOutBackoff decides for a VM whose failed server went, or is going, while it waited out
// its backoff (status ServerFailed with nextRetryTime, under Always or RerunOnFailure), and
// reports whether it did: deleted by someone else (an operator who cleans up failed pods, a
// descheduler), not by the controller. Until nextRetryTime the VM stays Failed and no server
// is made, as if the failed one were still there: otherwise a server that fails at once
// would be made again as fast as someone deletes it, which is the loop the backoff is for.
// The wait ends early, as for a failed server that is there, for a restart request (the
// caller's) and for a spec changed since the failure (the status's generation is not the
// VM's).
func (d *decision) waitOutBackoff() bool {
	cur, srv := d.current, d.srv
	if !d.backingOff() || srv != nil && !(srv.Deleting && ended(srv)) {
		return false
	}
	until := d.recordedRetry()
	switch {
	case !d.now.Before(until):
		d.failures(d.failuresSoFar()) // kept by the report that waits for a server being deleted
		return false
	case cur.ObservedGeneration != d.vm.Generation():
		return false
	}
	d.failures(cur.ConsecutiveFailures)
	d.run.nextRetry = until
	msg := cur.Message
	if !until.Equal(cur.NextRetryTime) { // bounded: the message says the time in force
		msg = strings.Replace(msg, cur.NextRetryTime.UTC().Format(time.RFC3339), until.Format(time.RFC3339), 1)
	}
	d.report(schema.PhaseFailed, ReasonServerFailed, msg, srv)
	d.requeue(until.Sub(d.now))
	return true
}

// backingOff reports whether the status says a failed server waits out its backoff (restart).
func (d *decision) backingOff() bool {
	cur := d.current
	return cur.Reason == ReasonServerFailed && d.retries(cur.Reason) && !cur.NextRetryTime.IsZero()
}

// failuresSoFar is the count of consecutive failures that a new server starts with: the
// status's, and a failed server that went during its backoff once the backoff is over,
// counted as restart counts the one it replaces then, so that the next failure backs off for
// longer.
func (d *decision) failuresSoFar() int {
	if d.backingOff() && !d.now.Before(d.recordedRetry()) {
		return d.current.ConsecutiveFailures + 1
	}
	return d.current.ConsecutiveFailures
}
