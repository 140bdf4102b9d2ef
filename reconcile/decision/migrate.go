package decision

import (
	"fmt"
	"strings"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Cold migration on request (docs/placement.md): a new value of the migrate annotation
// (schema.AnnotationMigrateRequestedAt) stops the server and starts the next one on another
// node, with the same disk. status.migration records the value acted on, so that a request is
// carried out once however often the VM is decided on, and where the move stands:
//
//	new request, VM running, disk free to follow  -> delete the server (Moving, source node)
//	Moving, server being deleted                  -> wait (Migrating); NodeLost, with the way
//	                                                 out, while its node does not answer
//	Moving, no server                             -> create one that avoids the source node
//	Moving, new server ready on another node      -> Succeeded (target node)
//	Moving, no other node takes the new server    -> Failed once it has waited StalledAfter:
//	                                                 that server is deleted, and the next one
//	                                                 may run anywhere, the source node included
//	new request, server being deleted or gone     -> Moving from its node, no second delete
//	new request, VM not running or disk pinned,   -> Refused, with why; nothing else changes
//	  or no host has room for the next server
//	new request, Moving                           -> the move carries it out: its record
//	                                                 takes the new value, nothing else changes
//	Moving, VM stopped (Halted, a stop request,   -> Failed: no server follows to carry it out
//	  an end its run strategy keeps)
//
// Exactly one server at a time: the next server is created only once the old one is gone, as
// in every replacement. A move never leaves a VM without a server for good: when no other node
// takes the next one (the placement admits the source node only, the others are full or
// cordoned) past the bound after which a stuck server is called Stalled, the move gives up
// rather than keep the VM down until a node frees up.

// migrate carries the migration part of an active VM's decision. It reports whether it decided
// the whole plan; otherwise the caller goes on, with want carrying the node to avoid when the
// server about to be created is the move's.
func (p Policy) migrate(d *decision, want *backend.Spec) bool {
	if req := d.newMigration(); req != "" && !d.foldMigration(req) {
		if from := d.goingFrom(); from != "" {
			// The server is going, or gone, already: this controller's delete for the
			// request, whose status write did not go through (a conflict), or anyone's. The
			// move is that deletion, as a restart's is (active): no second delete, and the next
			// server avoids the node.
			d.movingFrom(req, from)
			if srv := d.srv; srv != nil {
				d.report(schema.PhaseCreating, ReasonMigrating, movingMessage(srv.Name, from), srv)
				return true
			}
			want.AvoidNode = from
			return false
		}
		why := d.cannotMigrate()
		if why == "" {
			// The next server keeps off the node the move leaves, as the create below
			// asks of it (want.AvoidNode, once the server is gone).
			to := *want
			to.AvoidNode = d.srv.Node
			why = d.noRoomToMove(to)
		}
		if why != "" {
			d.refuseMigration(req, why)
			return false
		}
		srv := d.srv
		d.next().Migration = &schema.MigrationStatus{RequestedAt: req, Phase: schema.MigrationMoving, SourceNode: srv.Node,
			Message: fmt.Sprintf("Moving server %s off node %s", srv.Name, srv.Node)}
		d.plan.Server = &ServerAction{Op: DeleteServer, Event: Event{Type: EventNormal, Reason: ReasonMigrating,
			Message: fmt.Sprintf("Migrating: deleting server %s on node %s; the next one starts on another node with the same disk (requested at %s)",
				srv.Name, srv.Node, req)}}
		d.report(schema.PhaseCreating, ReasonMigrating, movingMessage(srv.Name, srv.Node), d.deletingServer())
		return true
	}
	cur := d.current.Migration
	if d.plan.Status != nil {
		cur = d.plan.Status.Migration // a request folded into the move (foldMigration)
	}
	if cur == nil || cur.Phase != schema.MigrationMoving {
		return false
	}
	srv := d.srv
	switch {
	case srv == nil:
		want.AvoidNode = cur.SourceNode
	case srv.Deleting && srv.State == backend.StateLost:
		// Its node stopped answering after the move's delete was sent: the deletion cannot
		// finish until the node answers or is deleted, and the next server waits for it, as
		// a replacement's does (nodelost.go). Said so, with the way out, rather than
		// Migrating for as long as the node is down: the move gives up only on a next
		// server no node takes (moveStuck), and there is none yet. It stays Moving: once
		// the server is gone, the next one keeps off the source node.
		d.lostServer(schema.PhaseCreating, srv)
		return true
	case srv.Deleting:
		d.report(schema.PhaseCreating, ReasonMigrating, movingMessage(srv.Name, cur.SourceNode), srv)
		return true
	case p.moveStuck(d):
		failed := *cur
		failed.Phase = schema.MigrationFailed
		why := fmt.Sprintf("no node other than %s took server %s within %s (%s): it is deleted, and the next one may run on any node, %s included",
			cur.SourceNode, srv.Name, p.StalledAfter, strings.TrimSuffix(srv.Waiting.Message, "."), cur.SourceNode)
		failed.Message = strings.ToUpper(why[:1]) + why[1:]
		d.next().Migration = &failed
		d.plan.Server = &ServerAction{Op: DeleteServer, Event: Event{Type: EventWarning, Reason: ReasonMigrationFailed,
			Message: "Migration failed: " + why}}
		d.report(schema.PhaseCreating, ReasonServerReplacing,
			fmt.Sprintf("Waiting for server %s to be deleted before a new one is created", srv.Name),
			d.deletingServer())
		return true
	case srv.State == backend.StateReady && srv.Node != "" && srv.Node != cur.SourceNode:
		done := *cur
		done.Phase, done.TargetNode = schema.MigrationSucceeded, srv.Node
		done.Message = fmt.Sprintf("Server %s moved from node %s to node %s", srv.Name, cur.SourceNode, srv.Node)
		d.next().Migration = &done
		d.event(EventNormal, ReasonMigrated, done.Message)
	}
	return false
}

// moveStuck reports whether the server a move created has waited for a node longer than
// StalledAfter: the scheduler finds none it may run on (not the source node, and none of
// the others fits). Before that, the VM reports Unschedulable as any stuck server does, and
// is looked at again when the bound is reached (stuck).
func (p Policy) moveStuck(d *decision) bool {
	w := d.srv.Waiting
	if d.srv.State != backend.StatePending || w.Reason != backend.WaitUnschedulable {
		return false
	}
	at, ok := p.stalledAt(w)
	return ok && !d.now.Before(at)
}

// movingMessage is the status message while the server leaves its node.
func movingMessage(server, node string) string {
	return fmt.Sprintf("Migrating: waiting for server %s to be deleted before the next one starts on a node other than %s", server, node)
}

// newMigration is the value of the migrate annotation when the controller has not acted on
// it yet, else "".
func (d *decision) newMigration() string {
	r := d.vm.MigrateRequested()
	if r == "" || d.current.Migration != nil && d.current.Migration.RequestedAt == r {
		return ""
	}
	return r
}

// goingFrom is the node of a server the VM had running, which is going or gone with no move
// recorded: the server's own while it is being deleted, or, once it is gone, the node the
// status last gave it (as running, or as evicted under Replace; or the node the backend
// remembers of a server evicted and gone before a decision saw it). "" when there is none: no
// such server, or one on a node that does not answer (its deletion cannot finish;
// nodelost.go).
func (d *decision) goingFrom() string {
	switch srv, cur := d.srv, d.current; {
	case srv != nil && srv.Deleting && srv.State != backend.StateLost:
		return srv.Node
	case srv == nil && d.evict.evictedGone != nil:
		return d.evict.evictedGone.Node // evicted, and gone before a decision saw it (goneEvicted)
	case srv == nil && d.missingServer() != "" && cur.Reason != ReasonNodeLost:
		return cur.Server.Node // missingServer: the status names a server
	case srv == nil && d.evict.moving != nil && cur.Reason == ReasonServerEvicted && cur.Server != nil:
		return cur.Server.Node
	}
	return ""
}

// movingFrom records the migration request req as carried out by a deletion of the server on
// node from that is under way, or done, already.
func (d *decision) movingFrom(req, from string) {
	d.next().Migration = &schema.MigrationStatus{RequestedAt: req, Phase: schema.MigrationMoving, SourceNode: from,
		Message: fmt.Sprintf("Moving the server off node %s", from)}
}

// requestTakesServer reports whether a new restart or migrate request explains the VM's
// server going, or gone, where the status says it runs: the controller's own delete for the
// request, whose status write did not go through (a conflict), or anyone's. Either way the
// next server carries the request out (active, migrate); the server is not called missing,
// and a VM under a strategy that heeds requests is not taken for stopped (stoppedState). So
// does the request a spec is, or any other cause of the controller's own replacement whose
// status write was lost, which the controller remembers (replaced): the next server carries
// the replacement out.
func (d *decision) requestTakesServer() bool {
	return d.replaced != nil || d.newRestart() != "" || d.newMigration() != "" && d.goingFrom() != ""
}

// cannotMigrate says why the VM's server cannot be moved now, or "": it must run, on a node,
// and its disk must be able to follow it.
func (d *decision) cannotMigrate() string {
	srv, vm := d.srv, d.vm.Name()
	switch {
	case srv == nil:
		return fmt.Sprintf("VM %s is not running: it has no server to move", vm)
	case srv.Deleting:
		return fmt.Sprintf("VM %s is not running: its server %s is being deleted", vm, srv.Name)
	case srv.State == backend.StateLost:
		return fmt.Sprintf("VM %s is not running where the controller can stop it: the node of server %s does not answer", vm, srv.Name)
	case !running(srv):
		return fmt.Sprintf("VM %s is not running: its server %s is %s", vm, srv.Name, srv.State)
	case srv.Node == "":
		return fmt.Sprintf("VM %s is not running on a node: its server %s has none", vm, srv.Name)
	case d.disk.claims && d.disk.own != nil && d.disk.own.Pinned != "":
		return fmt.Sprintf("the disk %s of VM %s cannot follow it to another node: %s", d.disk.own.Name, d.vm.Name(), d.disk.own.Pinned)
	}
	return ""
}

// foldMigration folds a new request req into a move under way, if there is one, and reports
// whether it did: the move is recorded as the one that carries req out, so that its outcome
// (Succeeded, or Failed) answers req too, and nothing else changes. The move is what was
// asked for, and there is one at a time. A refusal in its place ("not running": the move's
// next server is pending or not there yet) would overwrite the Moving record, and with it
// what the move has still to do: keep the next server off the source node, and give up once
// no other node takes it (moveStuck), which would leave such a VM down for good.
func (d *decision) foldMigration(req string) bool {
	cur := d.current.Migration
	if cur == nil || cur.Phase != schema.MigrationMoving {
		return false
	}
	m := *cur
	m.RequestedAt = req
	d.next().Migration = &m // no Event: the move said what it does when it began
	return true
}

// refuseMigration records a refused request, so that it is answered once, and says why in a
// Warning Event. Nothing else changes.
func (d *decision) refuseMigration(req, why string) {
	d.next().Migration = &schema.MigrationStatus{RequestedAt: req, Phase: schema.MigrationRefused, Message: why}
	d.event(EventWarning, ReasonMigrationRefused, "Migration refused: "+why)
}

// inactiveMigration answers a migration asked of a VM that is stopped: Halted (action
// inactive), or stopped under a run strategy that heeds requests (onRequest).
func (d *decision) inactiveMigration() {
	if req := d.newMigration(); req != "" && !d.foldMigration(req) {
		d.refuseMigration(req, fmt.Sprintf("VM %s is not running: it is stopped (runStrategy %s); start it first", d.vm.Name(), d.run.strategy))
	}
}

// stoppedMigration ends, in a status st of reason that leaves the VM stopped (Halted, a stop
// request, a guest shut down or a failure its run strategy does not replace), a migration
// still Moving: no server follows to carry it out, and a later start is a start, not the
// move's next server (which would keep off the source node for a move the stop ended).
func (d *decision) stoppedMigration(st *schema.Status, reason string) {
	m := st.Migration
	if m == nil || m.Phase != schema.MigrationMoving || d.run.strategy != schema.RunHalted && !d.stopsWith(reason) {
		return
	}
	ended := *m
	ended.Phase = schema.MigrationFailed
	ended.Message = fmt.Sprintf("The VM was stopped (%s) before a server ran on a node other than %s; the next one may run on any node, %s included",
		reason, m.SourceNode, m.SourceNode)
	st.Migration = &ended
}
