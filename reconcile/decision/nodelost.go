package decision

import (
	"fmt"
	"strings"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// A lost node (docs/placement.md#when-a-node-is-lost): the server's node does not answer (not
// Ready, or its Node object gone while the server is still bound to it). The server may still
// run there, and its disk may still be attached to that node (a ReadWriteOnce volume is); the
// controller cannot confirm it gone, so it never starts a second server while the old one
// exists, even one being deleted: two servers writing one disk would lose its owner's data.
// The VM says NodeLost, naming the node and the way out. Once the server is gone (the node
// deleted and its pods collected, or the server force-deleted), the next decision creates a
// new one, which the scheduler puts on a node that answers, with the same disk.
//
// A stop (Halted, a stop request), a replacement (a restart, a spec change) or the VM's
// deletion waits for the server's deletion, which cannot finish either: the VM says NodeLost
// too, with the same Warning and way out, in the phase of what waits (Inactive, Creating,
// Terminating), so that the user learns why it does not end, and the next decision, once the
// server is gone, what the VM was doing: the controller deleted that server, and it is not
// missing (ClaimedServer); a replaced VM gets its new server under every strategy.

// nodeLost reports a server whose node does not answer, of a VM that is to run.
func (d *decision) nodeLost(srv *backend.Server) { d.lostServer(schema.PhaseUnknown, srv) }

// lostServer reports srv, whose node does not answer, in phase: Unknown for a VM that is to
// run, Creating for one whose server the controller replaces (or that is started while the
// deletion that stopped it waits), Inactive for one being stopped, Terminating for one being deleted. The change to it
// is a Warning, also where the plan's action (the deletion) would explain it: the action's
// Event does not say why it cannot finish.
func (d *decision) lostServer(phase schema.Phase, srv *backend.Server) { d.lostFor(phase, srv, "") }

// lostOnStop reports srv, whose node does not answer and whose deletion carries out the stop
// request stop, in phase Inactive. The message names the stop (stopNote): it is the status's
// record that the deletion is a stop's, not Halted's (lostWhileStopping), which the recorded
// requests cannot give: their values are times written by whatever machine wrote them, and a
// stop acts whenever it is the only new request, whatever its time.
func (d *decision) lostOnStop(srv *backend.Server, stop string) {
	d.lostFor(schema.PhaseInactive, srv, stop)
}

// stopNote is how a message names the stop request at stop that the VM's stop carries out.
func stopNote(stop string) string { return "(stop requested at " + stop + ")" }

// lostFor is lostServer, for the stop request at stop ("" for none) in phase Inactive.
func (d *decision) lostFor(phase schema.Phase, srv *backend.Server, stop string) {
	msg := fmt.Sprintf("Server %s: its node does not answer", srv.Name)
	if srv.Node != "" {
		msg = fmt.Sprintf("Server %s: its node %s does not answer", srv.Name, srv.Node)
	}
	switch {
	case srv.NodeGone && srv.Node != "":
		msg = fmt.Sprintf("Server %s: its node %s is gone", srv.Name, srv.Node) // the backend's message says no more
	case srv.Message != "":
		msg += " (" + srv.Message + ")"
	}
	then := "a new server then starts on another node with the same disk"
	switch phase {
	case schema.PhaseUnknown:
		msg += "; it may still run there with its disk attached, so no other server starts while it exists."
	case schema.PhaseCreating:
		msg += "; it may still run there with its disk attached, and its deletion, which the new server waits for, cannot finish while the node does not answer."
	case schema.PhaseInactive:
		which := "which stops the VM"
		if stop != "" {
			which += " " + stopNote(stop)
		}
		msg += "; it may still run there with its disk attached, and its deletion, " + which + ", cannot finish while the node does not answer."
		then = "the VM is then stopped"
	default:
		msg += "; it may still run there with its disk attached, and its deletion, which the VM's removal waits for, cannot finish while the node does not answer."
		then = "the VM is then removed"
	}
	switch {
	case srv.NodeGone:
		// Deleted already: the pod garbage collector deletes the pods of a node that does not
		// exist, within a minute or so; telling the user to delete the node would send them
		// after nothing.
		msg += fmt.Sprintf(" The node is deleted: the pod garbage collector deletes server %s shortly (or force-delete it now: kubectl delete pod %s -n %s --grace-period=0 --force);",
			srv.Name, srv.Name, d.vm.Namespace())
	case srv.Node != "":
		msg += fmt.Sprintf(" If the node is down for good: kubectl delete node %s (or force-delete server %s);", srv.Node, srv.Name)
	default:
		msg += fmt.Sprintf(" If its node is down for good: force-delete server %s;", srv.Name)
	}
	msg += " " + then
	if r := d.report(phase, ReasonNodeLost, msg, srv); r.status && !r.event && d.current.Reason != ReasonNodeLost {
		d.event(EventWarning, ReasonNodeLost, msg)
	}
}

// lostWhileDeleted reports a server the plan deletes for a new one (a restart, a spec change)
// whose node does not answer, and says whether it did: its deletion cannot finish until the
// node answers or is deleted, and the VM says so rather than waiting for a replacement that
// cannot come yet. In phase Creating, not Unknown: the status does not claim the server
// (ClaimedServer), whose going is the controller's doing, and a VM under Manual or Once is on
// its way to the new server (stoppedState).
func (d *decision) lostWhileDeleted() bool {
	if d.srv.State != backend.StateLost {
		return false
	}
	d.lostServer(schema.PhaseCreating, d.deletingServer())
	return true
}

// lostWhileReplacing reports whether the status says the controller deletes the server for a
// new one and the server's node does not answer (lostWhileDeleted).
func (d *decision) lostWhileReplacing() bool {
	return d.current.Reason == ReasonNodeLost && d.current.Phase == schema.PhaseCreating
}

// lostWhileInactive reports whether the status says the server is deleted to stop the VM
// (Halted, a stop request) and the server's node does not answer: NodeLost in phase Inactive.
func (d *decision) lostWhileInactive() bool {
	return d.current.Reason == ReasonNodeLost && d.current.Phase == schema.PhaseInactive
}

// lostWhileStopping reports whether the status says a stop request is deleting the server
// and the server's node does not answer: NodeLost in phase Inactive, with a message that names
// the stop recorded (lostOnStop), as the decisions that carry the stop out write it. Otherwise
// it was Halted's, even with a stop on record: a VM whose strategy changed since is what its
// new strategy makes of it, as it is once the server is gone (stoppedState). Not by the times
// of the recorded requests: a stop acts whenever it is the only new request, and a clock
// behind the one that wrote the start would make it history.
func (d *decision) lostWhileStopping() bool {
	cur := d.current
	return d.lostWhileInactive() && cur.StopRequestedAt != "" &&
		strings.Contains(cur.Message, stopNote(cur.StopRequestedAt))
}
