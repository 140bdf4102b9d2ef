// The verbs that change a VM: start, stop and restart. Each decides from the VM as it reads
// it (pure: verbs.start, verbs.stop, verbs.restart) and makes at most one write, conditional
// on the resourceVersion it read.

package command

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// requestTimeLayout is the layout of the times the verbs write as requests: RFC 3339 with
// milliseconds. A request is new when its value differs from the one the controller last
// acted on, so a stop written in the second of a stop already carried out (stop, start, stop
// in a row) would be taken for that one and ignored at whole seconds. The controller reads
// either form.
const requestTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// verbs are start, stop and restart as the plugin runs them, told the flags it was run with
// (known), which the commands their messages give repeat (decision.PluginCommand; a plain
// kubectl command, its --context and --kubeconfig: PluginFlags.Kubectl): a command pasted as
// printed reaches the VM the verb read, in its namespace, cluster and group. nil: no
// flags known; the commands then name the VM as the controller's messages do.
type verbs struct{ known *decision.PluginFlags }

// known are the flags of c that a command of the plugin is to repeat (decision.PluginFlags).
func (c *pluginConfig) known() *decision.PluginFlags {
	return &decision.PluginFlags{Namespace: c.Namespace, Context: c.Context, Kubeconfig: c.Kubeconfig,
		APIVersion: c.APIVersion, Resource: c.Resource, SchemaFile: c.SchemaFile}
}

// verbResult is what a verb decided: the merge patch to write (nil: nothing to change) and
// what to tell the user.
type verbResult struct {
	patch map[string]any
	say   string
}

// strategyOf is the VM's run strategy; a spec without one (or with a word the version does
// not know) is one clear line.
func strategyOf(vm schema.VirtualMachine, f schema.Fields) (schema.RunStrategy, error) {
	spec, _ := vm.Spec()
	if spec.RunStrategy == "" {
		return "", cli.Exit(fmt.Sprintf("virtualmachine %q has no run strategy this tool knows at %s (want one of %s)",
			vm.Name(), f.Action, strings.Join(f.StrategyWords(), ", ")), 1)
	}
	return spec.RunStrategy, nil
}

// stopped reports whether the VM's status says it has no server that runs or will run by
// itself, under rs (RerunOnFailure, Once or Manual: the strategies whose verbs ask it). It
// reads whether the status names a live server (liveServer) and what rs does with a failed
// one, not the phase alone: a RerunOnFailure VM whose server failed gets a new one after the
// backoff, whether or not its layout has status.nextRetryTime to say when; a server whose
// deletion was refused (ServerDeleteRefused), or one kept running beside a spec the
// controller refuses (InvalidSpec, DiskConflict), still runs. A refusal of a VM that was
// stopped (its status carries the condition RefusedWhileStopped, and the controller goes back
// to that stopped status once the refusal is lifted) is stopped, whatever the refusal; any
// other refusal is of a VM on its way to a server or running, which the controller starts once
// the refusal is lifted; the condition in any other status (left by another version) says
// nothing, as to the controller. A Manual VM without a phase yet
// has not started: the controller has not looked at it, and will report it NotStarted; under
// the other strategies a VM without a phase is on its way to its first server.
func stopped(rs schema.RunStrategy, st schema.Status) bool {
	switch {
	case st.Phase == "":
		return rs == schema.RunManual
	case liveServer(st):
		return false
	case st.Phase == schema.PhaseInactive:
		return true // no server, one ended and kept, or one a stop deletes
	case st.Phase != schema.PhaseFailed:
		return false // Creating, Active, Unknown, Terminating: a server is on its way, or runs
	}
	if decision.RefusedWhileStopped(st) {
		return true // a refusal of a stopped VM, which keeps it stopped once lifted
	}
	switch st.Reason {
	case decision.ReasonServerFailed:
		return rs != schema.RunRerunOnFailure // under RerunOnFailure replaced after the backoff
	case decision.ReasonServerRejected, decision.ReasonDiskRejected:
		return false // asked for again, every minute: on its way to a server
	case decision.ReasonInvalidSpec, decision.ReasonDiskConflict:
		// Without the record (RefusedWhileStopped above), a refusal of a VM on its way to a
		// server or running: the controller starts it once the refusal is lifted.
		return false
	}
	return true // ServerDeleteRefused with no server named
}

// liveServer reports whether the status names a server that neither ended nor is being
// deleted by a stop: in phase Inactive the server named is one kept after its end
// (GuestShutDown) or one a stop deletes (Stopping, ServerStopping, NodeLost), and a failed
// server (ServerFailed) ended, even when a sidecar keeps its pod running. So is the server a
// refusal of a stopped VM names (RefusedWhileStopped): one kept after its end, or one a stop
// or Halted deletes beside a spec the controller refuses (decision's invalid.go). The server's
// state is the backend's own word (for pods, the phase), which does not say it: the reason does.
func liveServer(st schema.Status) bool {
	if st.Server == nil || st.Server.Name == "" {
		return false
	}
	switch st.Phase {
	case schema.PhaseInactive:
		return false
	case schema.PhaseFailed:
		return st.Reason != decision.ReasonServerFailed && !decision.RefusedWhileStopped(st)
	}
	return true
}

// restReason is the reason of the status the VM rests with: its own, or under a refusal of a
// stopped VM, the reason of the stopped status the refusal keeps the record of
// (RefusedWhileStopped: a stop's deletion under way beside a refused spec is Stopping).
func restReason(st schema.Status) string {
	if decision.RefusedWhileStopped(st) {
		return st.Condition(decision.ConditionRefusedWhileStopped).Reason
	}
	return st.Reason
}

// request is a request a verb writes as an annotation, and the status field that records
// it once the controller has carried it out. A layout without that field (a field map of
// another CRD may leave it out) cannot record the request, and the controller ignores the
// annotation there: acted on unrecorded, it would be acted on at every reconcile.
type request struct {
	kind, annotation string
	field            func(*schema.Fields) *string // the field's path in a layout
}

// The requests of start, stop, restart and migrate.
var (
	startRequest   = request{"start", schema.AnnotationStartRequestedAt, func(f *schema.Fields) *string { return &f.StartRequestedAt }}
	stopRequest    = request{"stop", schema.AnnotationStopRequestedAt, func(f *schema.Fields) *string { return &f.StopRequestedAt }}
	restartRequest = request{"restart", schema.AnnotationRestartedAt, func(f *schema.Fields) *string { return &f.RestartedAt }}
	migrateRequest = request{"migration", schema.AnnotationMigrateRequestedAt, func(f *schema.Fields) *string { return &f.Migration }}
)

// unrecorded refuses r on the VM name when its layout f has no field to record it: the
// verb would report a request that nothing carries out.
func (r request) unrecorded(name string, f schema.Fields) error {
	if *r.field(&f) != "" {
		return nil
	}
	return refuse("virtualmachine/%s cannot take a %s request: its field map has no %s to record it in, so the controller ignores %s there; "+
		"nothing written (docs/field-maps-and-versions.md)", name, r.kind, r.key(), r.annotation)
}

// key is the field map's key of r's status field (status.startRequestedAt), as a map file
// and docs/field-maps-and-versions.md name it; schema's list of paths says it.
func (r request) key() string {
	var f schema.Fields
	*r.field(&f) = "-"
	for _, p := range f.Paths() {
		if p.Path != "" {
			return p.Key
		}
	}
	return ""
}

// lostNode refuses a stop with a grace period (--force, --grace-period) of a VM whose status
// says its server's node does not answer (NodeLost, in any phase), under every run strategy:
// a deletion with a grace period of 0 removes the server's pod at once while its guest may
// still run on that node with the disk, and a new server elsewhere would then write the same
// disk beside it; any other grace period does not end a deletion the node must confirm. The
// way out for a node down for good is to delete the Node object (docs/placement.md); a plain
// stop waits for the node. Both commands carry the cluster the plugin read (known): a node of
// the name in the cluster of the shell's kubeconfig is another, and up.
func lostNode(vm schema.VirtualMachine, known *decision.PluginFlags) error {
	name, st := vm.Name(), vm.Status()
	node, which := "NODE", ", NODE the node its status message names"
	if st.Server != nil && st.Server.Node != "" {
		node, which = st.Server.Node, ""
	}
	return refuse("virtualmachine/%s: --force and --grace-period are refused while its server's node does not answer (%s): "+
		"its guest may still run there with the disk, and a forced deletion would let a new server write the same disk; if the node is down for good, "+
		"delete it (%s%s; docs/placement.md#when-a-node-is-lost); else stop without them (%s): the stop waits for the node",
		name, describe(st), known.Kubectl("kubectl delete node "+node), which, decision.PluginCommand("stop", vm, known))
}

// nested is a merge patch that sets the dotted path to v.
func nested(path string, v any) map[string]any {
	keys := strings.Split(path, ".")
	var m any = v
	for i := len(keys) - 1; i >= 0; i-- {
		m = map[string]any{keys[i]: m}
	}
	return m.(map[string]any)
}

// describe names the VM's state for a message: "phase Active (ServerReady)".
func describe(st schema.Status) string {
	if st.Phase == "" {
		return "no phase yet"
	}
	if st.Reason == "" {
		return "phase " + string(st.Phase)
	}
	return fmt.Sprintf("phase %s (%s)", st.Phase, st.Reason)
}

// beingDeleted refuses a verb that writes (start, stop, restart, migrate) on a VM being
// deleted: the controller carries out no request and no change of the run strategy of such a
// VM (it deletes the server and lets the VM go, decision's deleting), paused or not, so the
// write would be reported as done and never happen. Whatever its status says: the controller
// may not have reported Terminating yet.
func beingDeleted(vm schema.VirtualMachine) error {
	if !vm.Deleting() {
		return nil
	}
	return refuse("virtualmachine/%s is being deleted (%s): the controller deletes its server and carries out no start, stop, restart "+
		"or migration of it any more; nothing written", vm.Name(), describe(vm.Status()))
}

// waitingForServer says, of a VM that is not stopped and has no live server (stopped and
// liveServer are false) in phase Failed, that it does not run and what the controller does
// next, as decision's runstrategy.go and decide.go carry it out: a failed server that its run
// strategy replaces (RerunOnFailure, Always) is replaced after the backoff, at the status's
// next retry time when its layout has one, or at once on a restart; a server or disk whose
// create was refused (ServerRejected, DiskRejected) is asked for again every minute
// (decision.RejectedRetry), and comes once the cause its message names is fixed; a spec or disk
// refused (InvalidSpec, DiskConflict) on the way to a server holds it back until that is fixed.
// "" for any other status: the VM runs, or is on its way to a server.
func waitingForServer(vm schema.VirtualMachine, rs schema.RunStrategy, known *decision.PluginFlags) string {
	name, st := vm.Name(), vm.Status()
	if st.Phase != schema.PhaseFailed || liveServer(st) {
		return ""
	}
	switch st.Reason {
	case decision.ReasonServerFailed:
		if rs != schema.RunRerunOnFailure && rs != schema.RunAlways {
			return ""
		}
		when := "after the backoff"
		if !st.NextRetryTime.IsZero() {
			when = "at " + st.NextRetryTime.UTC().Format(time.RFC3339) + ", " + when
		}
		return fmt.Sprintf("virtualmachine/%s is not running: its server failed (%s); runStrategy %s makes a new one %s, "+
			"or at once on a restart (%s): nothing changed", name, describe(st), rs, when, decision.PluginCommand("restart", vm, known))
	case decision.ReasonServerRejected, decision.ReasonDiskRejected:
		return fmt.Sprintf("virtualmachine/%s is not running: its %s was refused (%s); the controller asks for it again every minute, "+
			"and the VM runs once the cause the message names is fixed: nothing changed", name, refusedPart(st, "server"), refusal(st))
	case decision.ReasonInvalidSpec, decision.ReasonDiskConflict:
		// Not stopped (stopped: no RefusedWhileStopped), so on its way to a server that the
		// refusal holds back: the controller makes it once the refusal is lifted.
		return fmt.Sprintf("virtualmachine/%s is not running: its %s is refused (%s); its server is made once what the message names is fixed: nothing changed",
			name, refusedPart(st, "spec"), refusal(st))
	}
	return ""
}

// refusedPart is what a refusal's status refuses: the disk (DiskRejected, DiskConflict), else
// other (the server, or the spec).
func refusedPart(st schema.Status, other string) string {
	if st.Reason == decision.ReasonDiskRejected || st.Reason == decision.ReasonDiskConflict {
		return "disk"
	}
	return other
}

// refusal is a refusal's phase and reason, with its message when it has one.
func refusal(st schema.Status) string {
	if st.Message == "" {
		return describe(st)
	}
	return describe(st) + ": " + st.Message
}

// start: on Halted, the spec's run strategy becomes Always (as virtctl start does), with a
// word that a spec the controller refuses (InvalidSpec) holds the server back until fixed; on
// RerunOnFailure, Once and Manual a stopped VM gets a start request (the annotation
// cloudnative.czs/startRequestedAt); a VM that runs, or runs under Always anyway, is left as
// it is, and so is one on its way to a server after a failure or a refused create, which it
// says does not run, and what the controller does next (waitingForServer). A stopped VM that
// the controller refuses (RefusedWhileStopped) gets the request with a word that the start
// waits for the refusal to be lifted (startHeld); one whose start is pending already is left
// as it is, since the controller keeps that start until then. A VM being
// deleted is refused (beingDeleted). A stop request the controller has not carried out yet
// is withdrawn in the same write (the user's latest verb wins): without it, the start of a VM
// whose status still says it runs would change nothing and the stop would run after it. Every start removes the grace
// period an earlier stop left (cloudnative.czs/stopGracePeriodSeconds): the controller reads
// it at every stop, and a --force would otherwise apply again to the next stop, whoever
// makes it. A start request the layout cannot record is refused (startRequest).
func (v verbs) start(vm schema.VirtualMachine, f schema.Fields, now time.Time) (verbResult, error) {
	if err := beingDeleted(vm); err != nil {
		return verbResult{}, err
	}
	rs, err := strategyOf(vm, f)
	if err != nil {
		return verbResult{}, err
	}
	name, st := vm.Name(), vm.Status()
	switch rs {
	case schema.RunHalted:
		p := nested(f.Action, f.StrategyWord(schema.RunAlways))
		p["metadata"] = map[string]any{"annotations": map[string]any{schema.AnnotationStopGracePeriod: nil}}
		say := fmt.Sprintf("virtualmachine/%s started: runStrategy Halted -> Always", name)
		if st.Reason == decision.ReasonInvalidSpec && !vm.Paused() {
			// The controller makes no server for a spec it refuses: said, rather than a
			// start that does not come.
			say += fmt.Sprintf("; its spec is refused (%s): its server is made once what the message names is fixed", refusal(st))
		}
		return verbResult{patch: p, say: say + pausedNote(vm)}, nil
	case schema.RunAlways:
		if say := waitingForServer(vm, rs, v.known); say != "" && !vm.Paused() {
			return verbResult{say: say}, nil
		}
		return verbResult{say: fmt.Sprintf("virtualmachine/%s is already started (runStrategy Always keeps it running; %s): nothing changed", name, describe(st))}, nil
	}
	start, stop := pending(vm)
	if stop.Value == "" && !stopped(rs, st) && !vm.Paused() {
		if say := waitingForServer(vm, rs, v.known); say != "" {
			return verbResult{say: say}, nil
		}
		return verbResult{say: fmt.Sprintf("virtualmachine/%s is already running (%s): nothing changed", name, describe(st))}, nil
	}
	held := ""
	if decision.RefusedWhileStopped(st) && !vm.Paused() {
		held = startHeld(st)
		if start.Value != "" && stop.Value == "" {
			return verbResult{say: fmt.Sprintf("virtualmachine/%s has a start pending (%s=%s, not yet carried out): %s: nothing changed",
				name, schema.AnnotationStartRequestedAt, start.Value, held)}, nil
		}
	}
	if err := startRequest.unrecorded(name, f); err != nil {
		return verbResult{}, err
	}
	at := now.UTC().Format(requestTimeLayout)
	kv := map[string]any{schema.AnnotationStartRequestedAt: at, schema.AnnotationStopGracePeriod: nil}
	say := fmt.Sprintf("virtualmachine/%s start requested (%s=%s)", name, schema.AnnotationStartRequestedAt, at)
	if stop.Value != "" {
		kv[schema.AnnotationStopRequestedAt] = nil
		say += withdrawn("stop", stop)
	}
	if held != "" {
		say += "; " + held
	}
	return verbResult{patch: annotations(kv), say: say + pausedNote(vm)}, nil
}

// startHeld says, of a stopped VM that the controller refuses (decision.RefusedWhileStopped),
// that a start waits for the refusal to be lifted: the controller keeps a start pending
// through a refusal (decision's pendingStart), and carries it out once the refused server or
// disk is allowed, the spec fixed or the disk's name freed, with no second start. A second
// start while it waits changes nothing.
func startHeld(st schema.Status) string {
	switch st.Reason {
	case decision.ReasonServerRejected, decision.ReasonDiskRejected:
		return fmt.Sprintf("its %s was refused (%s); the controller asks for it again every minute, and carries the start out once "+
			"the cause the message names is fixed", refusedPart(st, "server"), refusal(st))
	}
	return fmt.Sprintf("its %s is refused (%s); the controller carries the start out once what the message names is fixed",
		refusedPart(st, "spec"), refusal(st))
}

// pending are the start and stop requests the VM carries that its status has not recorded:
// the controller has not acted on them yet (schema.Request is empty when there is none, or
// the layout cannot record one).
func pending(vm schema.VirtualMachine) (start, stop schema.Request) {
	st := vm.Status()
	start, stop = vm.StartRequested(), vm.StopRequested()
	if start.Value == st.StartRequestedAt {
		start = schema.Request{}
	}
	if stop.Value == st.StopRequestedAt {
		stop = schema.Request{}
	}
	return start, stop
}

// withdrawn says that a pending request of the other kind goes with the verb's write.
func withdrawn(kind string, r schema.Request) string {
	return fmt.Sprintf("; the %s requested at %s, not yet carried out, is withdrawn", kind, r.Value)
}

// pendingStop refuses a verb that needs a running server while a stop request waits under a
// strategy that heeds it: the controller would drop the verb's request as overtaken by the
// stop. Under Always and Halted requests have no effect, and nothing is refused.
func pendingStop(vm schema.VirtualMachine, rs schema.RunStrategy, verb string, known *decision.PluginFlags) error {
	if rs == schema.RunAlways || rs == schema.RunHalted {
		return nil
	}
	if _, stop := pending(vm); stop.Value != "" {
		return refuse("virtualmachine/%s has a stop pending (%s=%s, not yet carried out): a %s now would be dropped; "+
			"to keep it running, withdraw the stop with: %s", vm.Name(), schema.AnnotationStopRequestedAt, stop.Value, verb, decision.PluginCommand("start", vm, known))
	}
	return nil
}

// stop: on Always, the spec's run strategy becomes Halted (as virtctl stop does); on
// RerunOnFailure, Once and Manual a running VM gets a stop request (the annotation
// cloudnative.czs/stopRequestedAt); a stopped VM with no server left is left as it is. grace,
// if not nil, goes with the same write (cloudnative.czs/stopGracePeriodSeconds); nil removes
// an earlier one. A start request not carried out yet is withdrawn in the same write, as
// start does. On Halted, a VM whose server is still being deleted gets a stop request only
// with a grace period, which the controller deletes the server again with (--force on a guest
// that hangs in its shutdown); otherwise it is left as it is.
//
// A stopped VM whose status still names a server gets the request all the same: a server that
// ended and is kept for inspection (GuestShutDown, ServerFailed), which a stop deletes, as
// docs/run-strategies.md says; and a stop under way, when the new one shortens its grace
// period (--force on a guest that hangs in its shutdown), also beside a spec the controller
// refuses (restReason). A VM whose server is kept running beside a spec or disk the controller
// refuses (InvalidSpec, DiskConflict) is not stopped but running (liveServer): the stop
// deletes that server all the same (decision's invalid.go), and so does Halted, which stop
// sets under Always. A paused VM's status says nothing of now: its request is written whatever
// it says.
//
// Refused (exit 1, nothing written): a VM being deleted (beingDeleted); a grace period while
// the status says the server's node does not answer (lostNode), whatever the strategy and the
// phase; and a stop request the layout cannot record (stopRequest).
func (v verbs) stop(vm schema.VirtualMachine, f schema.Fields, now time.Time, grace *int64) (verbResult, error) {
	if err := beingDeleted(vm); err != nil {
		return verbResult{}, err
	}
	rs, err := strategyOf(vm, f)
	if err != nil {
		return verbResult{}, err
	}
	name, st := vm.Name(), vm.Status()
	if grace != nil && st.Reason == decision.ReasonNodeLost {
		return verbResult{}, lostNode(vm, v.known)
	}
	var g any
	note := ""
	if grace != nil {
		g = fmt.Sprint(*grace)
		note = fmt.Sprintf(", grace period %ds", *grace)
	}
	switch rs {
	case schema.RunHalted:
		say := fmt.Sprintf("virtualmachine/%s is already stopped (runStrategy Halted; %s): nothing changed", name, describe(st))
		switch {
		case st.Server == nil:
			return verbResult{say: say}, nil
		case st.Reason == decision.ReasonNodeLost:
			return verbResult{say: fmt.Sprintf("virtualmachine/%s is already stopping (runStrategy Halted; %s): nothing changed; its server's node does not answer, "+
				"and the stop waits for it: %s", name, describe(st), st.Message)}, nil
		case grace == nil && f.StopRequestedAt == "":
			return verbResult{say: say}, nil // no stop request to cut it short with (stopRequest)
		case grace == nil:
			return verbResult{say: say + "; to cut its server's shutdown short: " + decision.PluginCommand("stop", vm, v.known) + " --force"}, nil
		}
		// Halted's deletion under way, with a grace period: a stop request carries it, which
		// the controller records and acts on once, deleting the server again with it.
		if err := stopRequest.unrecorded(name, f); err != nil {
			return verbResult{}, err
		}
		at := now.UTC().Format(requestTimeLayout)
		return verbResult{patch: annotations(map[string]any{schema.AnnotationStopRequestedAt: at, schema.AnnotationStopGracePeriod: g}),
			say: fmt.Sprintf("virtualmachine/%s stop requested (%s=%s%s): its server, being deleted under runStrategy Halted, is deleted again with it",
				name, schema.AnnotationStopRequestedAt, at, note) + pausedNote(vm)}, nil
	case schema.RunAlways:
		p := nested(f.Action, f.StrategyWord(schema.RunHalted))
		p["metadata"] = map[string]any{"annotations": map[string]any{schema.AnnotationStopGracePeriod: g}}
		return verbResult{patch: p, say: fmt.Sprintf("virtualmachine/%s stopped: runStrategy Always -> Halted%s", name, note) + pausedNote(vm)}, nil
	}
	start, _ := pending(vm)
	switch {
	case start.Value != "" || !stopped(rs, st) || vm.Paused():
	case st.Server == nil:
		return verbResult{say: fmt.Sprintf("virtualmachine/%s is already stopped (%s): nothing changed", name, describe(st))}, nil
	case st.Reason == decision.ReasonNodeLost:
		// A stop whose server's node does not answer (phase Inactive): no grace period ends it
		// (lostNode), and a force delete while the guest may still run with the disk is the way
		// out only for a node down for good, which the status message names.
		return verbResult{say: fmt.Sprintf("virtualmachine/%s is already stopping (%s): nothing changed; its server's node does not answer, "+
			"and the stop waits for it: %s", name, describe(st), st.Message)}, nil
	case restReason(st) == decision.ReasonStopping && grace == nil:
		return verbResult{say: fmt.Sprintf("virtualmachine/%s is already stopping (%s): nothing changed; to cut its shutdown short: %s --force",
			name, describe(st), decision.PluginCommand("stop", vm, v.known))}, nil
	}
	if err := stopRequest.unrecorded(name, f); err != nil {
		return verbResult{}, err
	}
	at := now.UTC().Format(requestTimeLayout)
	kv := map[string]any{schema.AnnotationStopRequestedAt: at, schema.AnnotationStopGracePeriod: g}
	say := fmt.Sprintf("virtualmachine/%s stop requested (%s=%s%s)", name, schema.AnnotationStopRequestedAt, at, note)
	if start.Value != "" {
		kv[schema.AnnotationStartRequestedAt] = nil
		say += withdrawn("start", start)
	}
	return verbResult{patch: annotations(kv), say: say + pausedNote(vm)}, nil
}

// pausedNote says, for a write to a paused VM that changes what the controller will do (a
// request, or a new run strategy), that nothing happens until it is resumed: the controller
// leaves a paused VM alone, its status included.
func pausedNote(vm schema.VirtualMachine) string {
	if !vm.Paused() {
		return ""
	}
	return fmt.Sprintf("; the VM is paused (%s): the controller carries it out once it is resumed, and its status says nothing of now until then", schema.AnnotationPaused)
}

// restart writes the restart annotation (cloudnative.czs/restartedAt) of a VM that runs
// or is on its way; a stopped one has nothing to restart, one with a stop pending would drop
// it (pendingStop), a layout without status.restartedAt cannot record it (restartRequest), and
// the controller acts on no request of a VM being deleted (beingDeleted).
func (v verbs) restart(vm schema.VirtualMachine, f schema.Fields, now time.Time) (verbResult, error) {
	if err := beingDeleted(vm); err != nil {
		return verbResult{}, err
	}
	rs, err := strategyOf(vm, f)
	if err != nil {
		return verbResult{}, err
	}
	name, st := vm.Name(), vm.Status()
	if rs == schema.RunHalted || rs != schema.RunAlways && stopped(rs, st) && !vm.Paused() {
		return verbResult{}, cli.Exit(fmt.Sprintf("virtualmachine/%s is stopped (runStrategy %s; %s): nothing to restart; start it with: %s",
			name, rs, describe(st), decision.PluginCommand("start", vm, v.known)), 1)
	}
	if err := pendingStop(vm, rs, "restart", v.known); err != nil {
		return verbResult{}, err
	}
	if err := restartRequest.unrecorded(name, f); err != nil {
		return verbResult{}, err
	}
	at := now.UTC().Format(requestTimeLayout)
	return verbResult{patch: annotations(map[string]any{schema.AnnotationRestartedAt: at}),
		say: fmt.Sprintf("virtualmachine/%s restart requested (%s=%s)", name, schema.AnnotationRestartedAt, at) + pausedNote(vm)}, nil
}

// runVerb reads the VM, lets decide say what to write, writes it and says what happened; a
// VM that changed meanwhile is read and decided on again (vmClient.write). check is the
// configuration to validate (the verb's own, which holds c); decide is one of verbs, told the
// flags of c once they are parsed.
func runVerb(check validator, c *pluginConfig, version string,
	decide func(verbs, schema.VirtualMachine, schema.Fields, time.Time) (verbResult, error)) cli.ActionFunc {
	return action(check, oneName, func(cc *cli.Context) error {
		v, name, err := c.connect(cc, version)
		if err != nil {
			return err
		}
		run := verbs{c.known()}
		say, err := v.verb(cc.Context, name, func(vm schema.VirtualMachine, f schema.Fields, now time.Time) (verbResult, error) {
			return decide(run, vm, f, now)
		})
		if err != nil {
			return err
		}
		fmt.Fprintln(v.out, say)
		return nil
	})
}

// verb carries out a verb decided by decide on the VM name, and says what it did.
func (v *vmClient) verb(ctx context.Context, name string, decide func(schema.VirtualMachine, schema.Fields, time.Time) (verbResult, error)) (string, error) {
	var r verbResult
	err := v.write(ctx, name, func(vm schema.VirtualMachine) (map[string]any, error) {
		var err error
		r, err = decide(vm, v.fields, v.now())
		return r.patch, err
	})
	return r.say, err
}

func startCommand(c *pluginConfig, version string) *cli.Command {
	return &cli.Command{
		Name:      "start",
		Usage:     "start a stopped VM",
		ArgsUsage: "NAME",
		Description: "On runStrategy Halted, sets the run strategy to Always. On RerunOnFailure, Once and Manual, writes the annotation " +
			schema.AnnotationStartRequestedAt + " with the time, which the controller acts on once, and withdraws a stop request not yet carried out. " +
			"Removes the grace period an earlier stop left (" + schema.AnnotationStopGracePeriod + "). A VM that runs is left as it is, unless it is paused: a paused VM gets the request whatever its status says. " +
			"A VM in phase Failed waiting for a new server is left as it is too, and start says when the server comes: after a failed one under RerunOnFailure " +
			"or Always, at the status's next retry time, or at once with kubectl vm restart; after a refused server or disk, once the cause its message names " +
			"is fixed (the controller asks again every minute). A VM being deleted is refused, nothing written: the controller carries out no request of it.",
		Flags:  c.flags(),
		Action: runVerb(c, c, version, verbs.start),
	}
}

// stopConfig is stop's: the plugin's flags, and the grace period of the server's deletion.
type stopConfig struct {
	pluginConfig
	GracePeriod int
	Force       bool
}

// Validate checks --grace-period and --force: --force is a grace period of 0, as kubectl
// delete --force.
func (c *stopConfig) Validate() error {
	var errs []string
	if err := c.pluginConfig.Validate(); err != nil {
		errs = append(errs, err.Error())
	}
	if c.GracePeriod < -1 || c.GracePeriod > math.MaxInt32 {
		errs = append(errs, fmt.Sprintf("--grace-period %d: want a number of seconds from 0 to %d (-1: the server's own)", c.GracePeriod, math.MaxInt32))
	}
	if c.Force && c.GracePeriod > 0 {
		errs = append(errs, fmt.Sprintf("--force with --grace-period %d: --force deletes at once (grace period 0)", c.GracePeriod))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// grace is the grace period to write; nil: the server's own.
func (c *stopConfig) grace() *int64 {
	switch {
	case c.Force:
		g := int64(0)
		return &g
	case c.GracePeriod >= 0:
		g := int64(c.GracePeriod)
		return &g
	}
	return nil
}

func stopCommand(c *stopConfig, version string) *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "stop a running VM",
		ArgsUsage: "NAME",
		Description: "On runStrategy Always, sets the run strategy to Halted. On RerunOnFailure, Once and Manual, writes the annotation " +
			schema.AnnotationStopRequestedAt + " with the time, which the controller acts on once. --grace-period and --force go with the same write, as the annotation " +
			schema.AnnotationStopGracePeriod + "; without them, an earlier one is removed. A start request not yet carried out is withdrawn. " +
			"A stopped VM with no server left is left as it is; one whose status still names a server (an ended one kept for inspection, one beside a refused spec) gets the request, " +
			"and a stop under way gets a second one only with --grace-period or --force, which cut its shutdown short; " +
			"so does, on Halted, a VM whose server is still being deleted. A paused VM gets the request whatever its status says. " +
			"--grace-period and --force are refused while the status says the server's node does not answer (NodeLost): its guest may still run there with the disk. " +
			"A VM being deleted is refused, nothing written: the controller carries out no request of it.",
		Flags: append(c.flags(),
			&cli.IntFlag{Name: "grace-period", Value: -1, Usage: "seconds the server is given to shut down; -1: the server's own", Destination: &c.GracePeriod},
			&cli.BoolFlag{Name: "force", Usage: "delete the server at once (a grace period of 0), as kubectl delete --force", Destination: &c.Force}),
		Action: runVerb(c, &c.pluginConfig, version, func(v verbs, vm schema.VirtualMachine, f schema.Fields, now time.Time) (verbResult, error) {
			return v.stop(vm, f, now, c.grace())
		}),
	}
}

func restartCommand(c *pluginConfig, version string) *cli.Command {
	return &cli.Command{
		Name:      "restart",
		Usage:     "replace a VM's server with a new one",
		ArgsUsage: "NAME",
		Description: "Writes the annotation " + schema.AnnotationRestartedAt + " with the time, which the controller acts on once. A stopped VM has nothing to restart " +
			"(a paused VM gets the request whatever its status says: it waits for the resume). " +
			"A VM being deleted is refused, nothing written: the controller carries out no request of it.",
		Flags:  c.flags(),
		Action: runVerb(c, c, version, verbs.restart),
	}
}
