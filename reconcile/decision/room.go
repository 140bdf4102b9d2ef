package decision

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Room (backend.Rooms, Input.Hosts): a running server replaced for a change of the spec is a
// reboot into a new server the scheduler has to place: under --resize in-place when its host
// refused the resize (the kubelet's Infeasible, the API server's refusal) or the change cannot
// be made in place (the image, the placement, a backend that cannot resize), under --resize
// replace for every change. When the backend knows its hosts and none of those the new
// spec's placement admits has the room for its cpu or memory (backend.Hosts.Room: the node
// selector, the required node affinity, the tolerations against each node's taints and
// cordon, by the scheduler's own rules), the replacement could not start anywhere: the running
// server would be ended for one that stays Unschedulable until the spec goes back. The server
// is kept then, as under --resize manual, with RestartRequired (reason ResizeNoRoom) saying
// why and what to do. The record stays, word for word, for this generation of the spec, as
// the one of --resize manual does: a host with room that comes later (a node added, one
// uncordoned) does not reboot the VM behind its owner's back; a restart asks for the new
// server, which on a cluster with a node autoscaler is the pending pod that has it add a
// node. A backend that does not know its hosts (nodes not watched) replaces the server, as it
// always did. Not looked at: pod affinity and anti-affinity, topology spread, and what already
// runs on a node, which only the scheduler weighs: the check says what no node can take, not
// what one will.
//
// Only a server that runs is kept so: one pending or ended holds nothing a replacement would
// end. A restart (kubectl vm restart) goes ahead whatever the hosts have: the owner asks for
// the new server, whose pending pod is what has a node autoscaler add a node. A migration
// (kubectl vm migrate) asks to move the VM, not for a new spec, yet its next server takes
// the spec, and must not go back to the node it moves off (backend.Spec.AvoidNode), so one
// that could start on no other host would give up on them and then wait for ever
// (migrate.go): the request is refused, saying why, while the server runs. An eviction takes
// the server whatever the controller decides (eviction.go).

// noRoom says why no host the placement of spec admits has room for its cpu and memory; ""
// when some host may have (the scheduler has the last word), or the hosts are unknown. srv is
// the server that runs now, whose tolerations from admission (AdmittedTolerations) the next
// server is taken to get too. The sentence names the hosts it counted, those the placement
// admits (a cordoned node among them only when the tolerations take the cordon;
// spec.AvoidNode never), or it would be false for a cluster whose largest node the VM may not
// use, and the tolerations from admission it counted, which the VM's spec does not show, or
// that it counted none of the server's, which were changed after it was made
// (TolerationsChanged): its owner sees a toleration on the running server that the check
// left out, and is told why.
//
// When the VM's disk can be reached from some nodes only (backend.Disk.NodeAffinity: a zone's
// disk, a local or TopoLVM volume), only those count (backend.Hosts.RoomWithin), as only
// those take a server that mounts it; the sentence then says the disk ruled the others out,
// and names it.
func (d *decision) noRoom(srv *backend.Server, spec backend.Spec) string {
	if d.hosts == nil {
		return ""
	}
	r, disk := d.room(srv, spec)
	if r.Fits(spec.CPU, spec.Memory) {
		return ""
	}
	other := ""
	if spec.AvoidNode != "" {
		other = " other than " + spec.AvoidNode + ", the one it moves off"
	}
	placed := placing(spec.Placement)
	given, changed := fromAdmission(srv.AdmittedTolerations), srv.TolerationsChanged
	reached := ""
	if disk != "" {
		reached = reachedFrom(other, disk)
	}
	switch {
	case r.Known == 0 && other == "":
		return "no node is there"
	case r.Known == 0:
		return "no node is there but " + spec.AvoidNode + ", the one it moves off"
	case disk != "" && r.Within == 0:
		return "its disk " + disk + " can be reached from no node" + other + " (its volume's node affinity admits none)"
	case disk != "" && r.Hosts == 0 && placed:
		return "of the nodes" + reached + ", the VM's placement admits none " + admitted(given, changed)
	case disk != "" && r.Hosts == 0:
		return "every node" + reached + " is cordoned or tainted against it" + counted(given, changed)
	case r.Hosts == 0 && placed:
		return "the VM's placement admits no node" + other + " " + admitted(given, changed)
	case r.Hosts == 0 && other == "":
		return "every node is cordoned or tainted against it" + counted(given, changed)
	case r.Hosts == 0:
		return "every node" + other + " is cordoned or tainted against it" + counted(given, changed)
	}
	var over []string
	if spec.CPU.Cmp(r.CPU) > 0 {
		over = append(over, fmt.Sprintf("cpu %s (the largest has %s)", spec.CPU.String(), r.CPU.String()))
	}
	if spec.Memory.Cmp(r.Memory) > 0 {
		over = append(over, fmt.Sprintf("memory %s (the largest has %s)", spec.Memory.String(), r.Memory.String()))
	}
	var among string
	switch {
	case disk != "" && placed:
		among = "among the nodes" + reached + " and the VM's placement admits " + admitted(given, changed)
	case disk != "":
		among = "among the nodes" + reached + ", not cordoned or tainted against it" + counted(given, changed)
	case placed && other == "":
		among = "among the nodes the VM's placement admits " + admitted(given, changed)
	case placed:
		among = "among the nodes" + other + ", that the VM's placement admits " + admitted(given, changed)
	case other == "":
		among = "among the nodes not cordoned or tainted against it" + counted(given, changed)
	default:
		among = "among the nodes" + other + ", not cordoned or tainted against it" + counted(given, changed)
	}
	msg := among + ", no node has allocatable " + over[0]
	if len(over) > 1 {
		msg += " or " + over[1]
	}
	return msg
}

// room is the room of the hosts for a server of spec that follows srv (backend.Hosts.RoomWithin,
// with the tolerations admission gave srv), among the nodes the VM's disk can be reached from
// (diskNodes); disk is the disk's name when its node affinity ruled out some host the check
// would count otherwise, "" when it ruled out none (or there is none). d.hosts must be known.
func (d *decision) room(srv *backend.Server, spec backend.Spec) (r backend.Room, disk string) {
	within := d.diskNodes()
	r = d.hosts.RoomWithin(spec, srv.AdmittedTolerations, within)
	if within != nil && r.Within < r.Known {
		disk = d.disk.own.Name
	}
	return r, disk
}

// diskNodes is the node affinity of the storage of the disk the VM's next server mounts
// (backend.Disk.NodeAffinity): its own disk's under --root-disk claim, as the backend gave
// it, which it does only when a migration is asked for or a running server is about to be
// replaced (reconcile/pinning.go); nil otherwise, and every host counts.
func (d *decision) diskNodes() *corev1.NodeSelector {
	if !d.disk.claims || d.disk.own == nil {
		return nil
	}
	return d.disk.own.NodeAffinity
}

// reachedFrom names the nodes a server that mounts disk may run on, other (" other than
// NODE, the one it moves off", or "") said first: those its volume's node affinity admits.
func reachedFrom(other, disk string) string {
	if other != "" {
		other += ","
	}
	return other + " that its disk " + disk + " can be reached from (its volume's node affinity)"
}

// placing reports whether pl says anything of which nodes take the server (a node selector,
// a required node affinity, tolerations): the messages of a VM that says nothing of it name
// the nodes counted by what keeps every server off them, not by a placement it does not have.
func placing(pl *backend.Placement) bool {
	if pl == nil {
		return false
	}
	na := pl.Affinity
	return len(pl.NodeSelector) > 0 || len(pl.Tolerations) > 0 ||
		na != nil && na.NodeAffinity != nil && na.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil
}

// admitted says what of a placement a node is matched against (backend.Hosts.Room), with
// given, the tolerations admission gave the server (fromAdmission), when there are any, or,
// when changed (backend.Server.TolerationsChanged), that the server's were not counted.
func admitted(given string, changed bool) string {
	switch {
	case changed:
		given = ", not its server's, which were changed after it was made"
	case given != "":
		given = ", and those admission gave its server: " + given
	}
	return "(its node selector, affinity and tolerations" + given + "; cordoned nodes too only if it tolerates them)"
}

// counted says, for a VM without a placement, that the tolerations admission gave its server
// (fromAdmission) were counted, or, when changed (backend.Server.TolerationsChanged), that
// none of the server's was; "" when there were none.
func counted(given string, changed bool) string {
	switch {
	case changed:
		return " (not counting its server's tolerations, which were changed after it was made)"
	case given == "":
		return ""
	}
	return " (counting the tolerations admission gave its server: " + given + ")"
}

// maxNamed is how many tolerations fromAdmission names; the rest are counted.
const maxNamed = 4

// fromAdmission writes tolerations, separated by commas, each as the taints it takes:
// KEY=VALUE:EFFECT, KEY:EFFECT for an empty value, KEY=*:EFFECT for any value (the operator
// Exists), KEY>N or KEY<N for a comparison (which the check does not count, and says so),
// without :EFFECT for every effect, and "every taint" (or "every NoSchedule taint") for every
// key; the first maxNamed of them, and how many
// more there are. "" for none.
func fromAdmission(tolerations []corev1.Toleration) string {
	var b strings.Builder
	for i, t := range tolerations {
		if i == maxNamed {
			fmt.Fprintf(&b, " and %d more", len(tolerations)-maxNamed)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		if t.Key == "" && t.Operator == corev1.TolerationOpExists {
			if t.Effect == "" {
				b.WriteString("every taint")
			} else {
				b.WriteString("every " + string(t.Effect) + " taint")
			}
			continue
		}
		b.WriteString(t.Key)
		switch t.Operator {
		case corev1.TolerationOpExists:
			b.WriteString("=*")
		case "Gt":
			b.WriteString(">" + t.Value)
		case "Lt":
			b.WriteString("<" + t.Value)
		default:
			if t.Value != "" {
				b.WriteString("=" + t.Value)
			}
		}
		if t.Effect != "" {
			b.WriteString(":" + string(t.Effect))
		}
		if t.Operator == "Gt" || t.Operator == "Lt" {
			// The check takes no comparison (as the scheduler without its feature gate):
			// named all the same, so that the message shows every toleration it was given.
			b.WriteString(" (not counted)")
		}
	}
	return b.String()
}

// resizedTo is the spec of srv, the VM's server, with the cpu and memory the VM's spec asks:
// the size of the resize the API server refused (ResizeRefused), which srv's spec does not
// have yet; ok is false when the VM's spec is invalid.
func (d *decision) resizedTo(srv *backend.Server) (to backend.Spec, ok bool) {
	spec, errs := d.vm.Spec()
	if len(errs) > 0 {
		return backend.Spec{}, false
	}
	to = srv.Spec
	to.CPU, to.Memory = spec.CPU, spec.Memory
	return to, true
}

// keptForRoom is the RestartRequired condition of a running server srv kept rather than
// replaced by a server of spec to, because no host has room for to's cpu and memory (noRoom
// says what); why is what the replacement was for (the host's refusal of the resize, or the
// change and why it needs a new server). The spec set back to the server's size is a way out
// only when the size is what changes: one whose own size no host takes any more (every node
// cordoned) keeps it whatever else the spec says.
func (d *decision) keptForRoom(srv *backend.Server, to backend.Spec, noRoom, why string) *lifecycleCondition {
	now := inEffect(srv)
	next, back := "a new server", "set the spec back"
	if now.CPU.Cmp(to.CPU) != 0 || now.Memory.Cmp(to.Memory) != 0 {
		next = "a new server of the new size"
		back = fmt.Sprintf("set the spec back to cpu %s, memory %s", now.CPU.String(), now.Memory.String())
	}
	return &lifecycleCondition{ReasonResizeNoRoom, fmt.Sprintf("Server %s keeps running with cpu %s, memory %s: %s, "+
		"so %s could not start anywhere (%s); %s; or %s, then restart "+
		"the VM: %s (with a node autoscaler, the restart's pending server has it add one)",
		srv.Name, now.CPU.String(), now.Memory.String(), noRoom, next, why, back, d.makeRoom(srv, to), d.plugin("restart"))}
}

// replacementKept is the RestartRequired condition of srv, a running server, kept rather
// than replaced by a server of spec to (room.go): the record of this generation when there
// is one (keptRecord), else a new one when no host has room for to (why: what the
// replacement is for, as keptForRoom takes it); nil when the server is to be replaced.
func (d *decision) replacementKept(srv *backend.Server, to backend.Spec, why string) *lifecycleCondition {
	if kept := d.keptRecord(); kept != nil {
		return kept
	}
	if no := d.noRoom(srv, to); no != "" {
		return d.keptForRoom(srv, to, no, why)
	}
	return nil
}

// noRoomToMove says why a migration of the VM's running server is refused for want of room:
// no host that to's placement admits, other than the one to avoids (the node the move
// leaves), has room for the cpu and memory of to, the spec of the server that would follow;
// "" when some host may have, or the hosts are unknown.
func (d *decision) noRoomToMove(to backend.Spec) string {
	no := d.noRoom(d.srv, to)
	if no == "" {
		return ""
	}
	now, back := inEffect(d.srv), ""
	if now.CPU.Cmp(to.CPU) != 0 || now.Memory.Cmp(to.Memory) != 0 {
		back = fmt.Sprintf("set the spec back to cpu %s, memory %s; or ", now.CPU.String(), now.Memory.String())
	}
	return fmt.Sprintf("the next server, with cpu %s, memory %s, could start on no node: %s; %s%s, then ask again",
		to.CPU.String(), to.Memory.String(), no, back, d.makeRoom(d.srv, to))
}

// makeRoom is what gives a server of spec that follows srv, and that no host has room for,
// one: a node that fits (and that the VM's placement admits, where it has one; and that its
// disk can be reached from, where the disk ruled some out: room), added or taken back from a
// cordon (the usual case when every node is cordoned, a drain under way: only a VM that
// tolerates the cordon counts cordoned nodes), or a placement that admits a node that fits
// already.
func (d *decision) makeRoom(srv *backend.Server, spec backend.Spec) string {
	_, disk := d.room(srv, spec)
	switch placed := placing(spec.Placement); {
	case disk != "" && placed:
		return "add a node that fits, that the VM's placement admits and that its disk " + disk + " can be reached from, uncordon one, or widen the placement"
	case disk != "":
		return "add a node that fits and that its disk " + disk + " can be reached from, uncordon one, or give the VM a placement that tolerates a tainted one"
	case placed:
		return "add a node that fits and that the VM's placement admits, uncordon one, or widen the placement"
	}
	return "add a node that fits, uncordon one, or give the VM a placement that tolerates a tainted one"
}

// roomKeptRecord reports whether c is the record keptForRoom writes: its own reason, which
// tells it from the record of a refusal under --resize manual (ResizeInfeasible), which under
// the other modes is decided afresh.
func roomKeptRecord(c *schema.Condition) bool {
	return c.Type == schema.ConditionRestartRequired && c.Reason == ReasonResizeNoRoom
}

// keptRecord is the record of a running server kept for this generation of the spec because
// no host had room for its replacement (keptForRoom); nil when there is none. The server
// stays kept under it, the condition word for word, until a restart or a new spec.
func (d *decision) keptRecord() *lifecycleCondition {
	c := d.current.Condition(schema.ConditionRestartRequired)
	if c == nil || !roomKeptRecord(c) || c.ObservedGeneration != d.vm.Generation() {
		return nil
	}
	return &lifecycleCondition{c.Reason, c.Message}
}
