package decision

import (
	"fmt"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Room (backend.Rooms, Input.Room): under --resize in-place a running server whose resize its
// host refused (the kubelet's Infeasible, the API server's refusal) is replaced, a reboot, so
// that the new size is had on another host. When the backend knows its hosts and none of them
// has the room for the new size, the replacement could not start anywhere: the running server
// would be ended for one that stays Unschedulable until the spec goes back. The server is kept
// then, as under --resize manual, with RestartRequired (reason ResizeNoRoom) saying why and
// what to do. The record stays, word for word, for this generation of the spec, as the one of
// --resize manual does: a host with room that comes later (a node added, one uncordoned) does
// not reboot the VM behind its owner's back; a restart asks for the new server, which on a
// cluster with a node autoscaler is the pending pod that has it add a node. A backend that
// does not know its hosts (nodes not watched) replaces the server, as it always did.

// noRoom says what of spec's cpu and memory no host has room for; "" when some host may have
// (the scheduler has the last word), or the hosts are unknown.
func (d *decision) noRoom(spec backend.Spec) string {
	r := d.room
	switch {
	case r == nil || r.Fits(spec.CPU, spec.Memory):
		return ""
	case r.Hosts == 0:
		return "no node takes new servers (none is there, or every one is cordoned)"
	}
	var over []string
	if spec.CPU.Cmp(r.CPU) > 0 {
		over = append(over, fmt.Sprintf("cpu %s (the largest has %s)", spec.CPU.String(), r.CPU.String()))
	}
	if spec.Memory.Cmp(r.Memory) > 0 {
		over = append(over, fmt.Sprintf("memory %s (the largest has %s)", spec.Memory.String(), r.Memory.String()))
	}
	msg := "no node has allocatable " + over[0]
	if len(over) > 1 {
		msg += " or " + over[1]
	}
	return msg
}

// noRoomFor is noRoom of the cpu and memory the VM's spec asks of srv, its server: the size
// of the resize the API server refused (ResizeRefused), which srv's spec does not have yet.
func (d *decision) noRoomFor(srv *backend.Server) string {
	spec, errs := d.vm.Spec()
	if len(errs) > 0 {
		return ""
	}
	to := srv.Spec
	to.CPU, to.Memory = spec.CPU, spec.Memory
	return d.noRoom(to)
}

// keptForRoom is the RestartRequired condition of a running server srv kept under --resize
// in-place because no host has room for its refused resize (noRoom says what); why is the
// host's refusal.
func (d *decision) keptForRoom(srv *backend.Server, noRoom, why string) *lifecycleCondition {
	now := inEffect(srv)
	return &lifecycleCondition{ReasonResizeNoRoom, fmt.Sprintf("Server %s keeps running with cpu %s, memory %s: %s, "+
		"so a new server of the new size could not start anywhere (%s); set the spec back to cpu %s, memory %s, or add a node that fits and restart "+
		"the VM: kubectl vm restart %s (with a node autoscaler, the restart's pending server has it add one)",
		srv.Name, now.CPU.String(), now.Memory.String(), noRoom, why, now.CPU.String(), now.Memory.String(), d.vm.Name())}
}

// roomKeptRecord reports whether c is the record keptForRoom writes: its own reason, which
// tells it from the record of a refusal under --resize manual (ResizeInfeasible), which under
// in-place is decided afresh.
func roomKeptRecord(c *schema.Condition) bool {
	return c.Type == schema.ConditionRestartRequired && c.Reason == ReasonResizeNoRoom
}

// keptRecord is the record of a running server kept under --resize in-place for this
// generation of the spec because no host had room for its refused resize (keptForRoom); nil
// when there is none. The server stays kept under it, the condition word for word, until a
// restart or a new spec.
func (d *decision) keptRecord() *lifecycleCondition {
	c := d.current.Condition(schema.ConditionRestartRequired)
	if c == nil || !roomKeptRecord(c) || c.ObservedGeneration != d.vm.Generation() {
		return nil
	}
	return &lifecycleCondition{c.Reason, c.Message}
}
