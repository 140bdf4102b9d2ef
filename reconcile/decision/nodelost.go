package decision

import (
	"fmt"

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

// nodeLost reports a server whose node does not answer.
func (d *decision) nodeLost(srv *backend.Server) {
	msg := fmt.Sprintf("Server %s: its node does not answer", srv.Name)
	if srv.Node != "" {
		msg = fmt.Sprintf("Server %s: its node %s does not answer", srv.Name, srv.Node)
	}
	if srv.Message != "" {
		msg += " (" + srv.Message + ")"
	}
	msg += "; it may still run there with its disk attached, so no other server starts while it exists."
	if srv.Node != "" {
		msg += fmt.Sprintf(" If the node is down for good: kubectl delete node %s (or force-delete server %s);", srv.Node, srv.Name)
	} else {
		msg += fmt.Sprintf(" If its node is down for good: force-delete server %s;", srv.Name)
	}
	msg += " a new server then starts on another node with the same disk"
	d.report(schema.PhaseUnknown, ReasonNodeLost, msg, srv)
}

// lostWhileDeleted reports a server the plan deletes whose node does not answer, and says
// whether it did: its deletion cannot finish until the node answers or is deleted, and the VM
// says so rather than waiting for a replacement that cannot come yet.
func (d *decision) lostWhileDeleted() bool {
	if d.srv.State != backend.StateLost {
		return false
	}
	d.nodeLost(d.deletingServer())
	return true
}
