package decision_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// FuzzDecide feeds Decide arbitrary VMs (any JSON object, as the cache would hold it),
// arbitrary observed servers (a resize of theirs included) and every resize policy, and checks
// that every plan is one the controller can carry out without contradicting itself or the
// world (see checkPlan), that deciding is deterministic, that a plan carried out leaves nothing
// more to do, and that a resize the backend refuses is not asked for again (checkRefused). The
// seeds are the golden cases of testdata/decide, each under its own policy and every other, and
// testdata/fuzz/FuzzDecide (which also keeps every input that once failed); plain `go test`
// runs them. To fuzz for longer (docs/reference/bad-input.md, Fuzzing):
//
//	go test ./reconcile/decision -run '^$' -fuzz '^FuzzDecide$' -fuzztime 10m
//
// The server's resize is its state (an index into fuzzResizeStates), the host's message and
// the cpu and memory in effect; the policy is its --resize mode (an index into fuzzResizeModes)
// and whether the backend can resize. The higher bits of the resize's state say why a server
// waits and where it runs (fuzzWhere), those of the mode the room of the hosts (fuzzHosts),
// those of the disk's phase the nodes it can be reached from (fuzzReaches) and those of its
// owner whether it can follow its VM to another node (fuzzPinned), so that the corpus keeps
// its shape. A move or a replacement of a running server is checked against the hosts that
// both admit its next server and reach its disk (checkRoom).
func FuzzDecide(f *testing.F) {
	for _, file := range caseFiles(f) {
		vm, server := decidecase.Input(f, file)
		var srv *backend.Server
		if server != nil {
			var err error
			if srv, err = memory.ParseServer(server, now); err != nil {
				f.Fatalf("%s: %v", file, err)
			}
		}
		disk := decidecase.Disk(f, file)
		// The case's own policy first, then every other one.
		own := casePolicy(f, file)
		policies := []decision.Policy{own}
		for _, mode := range fuzzResizeModes[1:] {
			for _, can := range []bool{true, false} {
				for _, root := range fuzzRootDiskModes[1:] {
					if mode != own.Resize || can != own.CanResize || root != own.RootDisk {
						policies = append(policies, decision.Policy{Resize: mode, CanResize: can, RootDisk: root})
					}
				}
			}
		}
		// The case's own policy once more under each of fuzzHosts but its own (none unless
		// its nodes.yaml says), so that a refused resize meets hosts with room and without.
		caseRoom := fuzzHostsIndex(decidecase.Hosts(f, file))
		rooms := make([]uint8, len(policies))
		for i := range rooms {
			rooms[i] = caseRoom
		}
		for r := range fuzzHosts {
			if uint8(r) != caseRoom {
				policies, rooms = append(policies, own), append(rooms, uint8(r))
			}
		}
		// A running server's disk under the case's own policy once more with each of
		// fuzzReaches but its own, among the case's hosts and among those where the fuzzed
		// server runs (the last of fuzzHosts), so that a move or a replacement meets a disk
		// reached from the hosts with room, from others only, and from none; and once bound
		// to its node (fuzzPinned) if it is not.
		reaches := make([]int, len(policies))
		pinned := make([]bool, len(policies))
		for i := range reaches {
			reaches[i] = -1 // the disk's own
		}
		if disk != nil && srv != nil && decision.Running(srv) {
			for r := range fuzzReaches {
				if r == fuzzReachIndex(disk.NodeAffinity) {
					continue
				}
				for _, room := range []uint8{caseRoom, uint8(len(fuzzHosts) - 1)} {
					policies, rooms, reaches, pinned = append(policies, own), append(rooms, room), append(reaches, r), append(pinned, false)
				}
			}
			if disk.Pinned == "" {
				policies, rooms, reaches, pinned = append(policies, own), append(rooms, caseRoom), append(reaches, -1), append(pinned, true)
			}
		}
		for i, p := range policies {
			mode := uint8(slices.Index(fuzzResizeModes, p.Resize)) + rooms[i]*uint8(len(fuzzResizeModes))
			root := uint8(slices.Index(fuzzRootDiskModes, p.RootDisk))
			d := fuzzDiskArgs(disk)
			if r := reaches[i]; r >= 0 {
				d.phase = d.phase%uint8(2*len(fuzzDiskPhases)) + uint8(r*2*len(fuzzDiskPhases))
			}
			if pinned[i] {
				d.owner += uint8(4 * len(fuzzDiskOwners))
			}
			if srv == nil {
				f.Add(vm, false, "", "", "", false, int64(0), "", "", "", "", "", "", uint8(0), "", "", "", mode, p.CanResize,
					root, "", d.has, d.phase, d.requested, d.capacity, d.canGrow, d.growth, d.growthMessage, d.owner, d.pending, d.deleting)
				continue
			}
			f.Add(vm, true, string(srv.State), srv.Detail, srv.Message, srv.Deleting, int64(now.Sub(srv.Since)/time.Second),
				srv.Spec.CPU.String(), srv.Spec.Memory.String(), quantityString(srv.Spec.RootDisk), srv.Spec.Image, srv.Name, srv.ID,
				uint8(slices.Index(fuzzResizeStates, srv.Resize.State))|whereBits(srv), srv.Resize.Message,
				quantityString(srv.Resize.CPU), quantityString(srv.Resize.Memory), mode, p.CanResize,
				root, srv.Disk, d.has, d.phase, d.requested, d.capacity, d.canGrow, d.growth, d.growthMessage, d.owner, d.pending, d.deleting)
		}
	}
	fields := decidecase.Fields(f)
	f.Fuzz(func(t *testing.T, data []byte, hasServer bool, state, detail, message string, deleting bool, since int64,
		cpu, memory, rootDisk, image, name, id string,
		resizeState uint8, resizeMessage, resizeCPU, resizeMemory string, mode uint8, canResize bool,
		root uint8, serverDisk string, hasDisk bool, diskPhase uint8, requested, capacity string, canGrow bool,
		growth uint8, growthMessage string, diskOwner uint8, pending string, diskDeleting bool) {
		var obj map[string]any
		if err := utiljson.Unmarshal(data, &obj); err != nil || obj == nil {
			return // the cache holds objects only
		}
		for _, s := range []string{state, detail, message, image, name, id, resizeMessage, serverDisk, growthMessage, pending} {
			if !utf8.ValidString(s) {
				return // a backend reports text (a pod's fields come from JSON)
			}
		}
		cached, err := vmcache.Compact(&unstructured.Unstructured{Object: obj}, fields)
		if err != nil {
			t.Fatal(err)
		}
		vm, err := cached.View(fields)
		if err != nil {
			t.Fatal(err)
		}
		var srv *backend.Server
		if hasServer {
			srv = &backend.Server{Name: name, ID: id, State: backend.State(state), Detail: detail, Message: message, Deleting: deleting,
				Spec: backend.Spec{CPU: quantity(cpu), Memory: quantity(memory), RootDisk: quantity(rootDisk), Image: image, Disk: serverDisk != ""},
				Resize: backend.Resize{State: fuzzResizeStates[int(resizeState)%len(fuzzResizeStates)], Message: resizeMessage,
					CPU: quantity(resizeCPU), Memory: quantity(resizeMemory)},
				Disk: serverDisk}
			if since != 0 {
				srv.Since = now.Add(-time.Duration(since) * time.Second)
			}
			fuzzWhere(srv, resizeState, message)
		}
		var disk *backend.Disk
		if hasDisk {
			disk = &backend.Disk{Name: "test-vm-rootdisk", ID: "disk-uid", Version: "1",
				Phase: fuzzDiskPhases[int(diskPhase)%len(fuzzDiskPhases)], Requested: quantity(requested), Capacity: quantity(capacity),
				CanGrow: canGrow, Growth: backend.Growth{State: fuzzGrowthStates[int(growth)%len(fuzzGrowthStates)], Message: growthMessage},
				Owner: fuzzDiskOwners[int(diskOwner)%len(fuzzDiskOwners)], Pending: pending, Deleting: diskDeleting,
				BindsWithServer: int(diskPhase)/len(fuzzDiskPhases)%2 == 1, // the phase's spare bits: no new input, the corpus stays
				KeptMark:        int(diskOwner)/len(fuzzDiskOwners)%2 == 1, // the owner's, as well
				KindUnrecorded:  int(diskOwner)/(2*len(fuzzDiskOwners))%2 == 1,
				NodeAffinity:    fuzzReaches[int(diskPhase)/(2*len(fuzzDiskPhases))%len(fuzzReaches)]}
			if int(diskOwner)/(4*len(fuzzDiskOwners))%2 == 1 {
				disk.Pinned = fuzzPinned
			}

		}
		policy := decision.DefaultPolicy
		policy.Resize, policy.CanResize = fuzzResizeModes[int(mode)%len(fuzzResizeModes)], canResize
		policy.RootDisk = fuzzRootDiskModes[int(root)%len(fuzzRootDiskModes)]
		hosts := fuzzHosts[int(mode)/len(fuzzResizeModes)%len(fuzzHosts)]
		plan := policy.Decide(decision.Input{VM: vm, Server: srv, Disk: disk, Hosts: hosts, Now: now})
		checkPlan(t, policy, vm, srv, disk, plan)
		checkRoom(t, policy, vm, srv, disk, hosts, plan)
		checkReachKeepsDisk(t, policy, decision.Input{VM: vm, Server: srv, Disk: disk, Hosts: hosts, Now: now}, plan)
		if again := policy.Decide(decision.Input{VM: vm, Server: srv, Disk: disk, Hosts: hosts, Now: now}); renderPlan(t, again) != renderPlan(t, plan) {
			t.Fatalf("Decide is not deterministic:\n%s\nthen\n%s", renderPlan(t, plan), renderPlan(t, again))
		}
		if w := applyPlan(t, vm, srv, disk, plan); !w.gone {
			next := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Disk: w.disk, Budget: w.budget, Hosts: hosts, Now: now})
			if growsNext(plan, next) {
				// A change of the disk's owner or mark is written on its own, and the growth
				// rootDisk asks for follows it (disk.go: growsNext); then nothing more.
				if w = applyPlan(t, w.vm, w.srv, w.disk, next); !w.gone {
					plan, next = next, policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Disk: w.disk, Budget: w.budget, Hosts: hosts, Now: now})
				}
			}
			if !next.Empty() {
				t.Errorf("deciding again after carrying out\n%s\nasks for more:\n%s", renderPlan(t, plan), renderPlan(t, next))
			}
		}
		switch serverOp(plan) {
		case decision.ResizeServer:
			checkRefused(t, policy, vm, srv, disk, hosts, resizeMessage)
			checkRefusalEviction(t, vm, plan, policy.ResizeRefused(decision.Input{VM: vm, Server: srv, Disk: disk, Hosts: hosts, Now: now}, resizeMessage))
		case decision.CreateServer:
			checkRefusalEviction(t, vm, plan, policy.Rejected(decision.Input{VM: vm, Disk: disk, Now: now}, message))
		}
		checkRejected(t, policy, vm, srv, disk, message)
		checkDiskRejected(t, policy, vm, srv, message)
		checkStoppedKept(t, policy, vm, srv, disk, hosts, message)
	})
}

// fuzzHosts are the hosts FuzzDecide gives the decision: unknown (a backend that does not
// watch them), room for any server, room for the base VM's size (cpu 2, memory 4G) and no
// more, no host at all, hosts that only some placements admit (a small node labelled
// size=small, a big one labelled size=big and tainted dedicated=vms:NoSchedule, a bigger one
// cordoned), and a big node where the fuzzed servers run (fuzzWhere) beside a small one, which
// only a server that may stay there fits (not a migration's).
var fuzzHosts = []*backend.Hosts{
	nil,
	backend.NewHosts([]backend.Host{fuzzHost("a", "1k", "1Pi"), fuzzHost("b", "1k", "1Pi"), fuzzHost("c", "1k", "1Pi")}),
	backend.NewHosts([]backend.Host{fuzzHost("a", "2", "4G")}),
	backend.NewHosts(nil),
	backend.NewHosts([]backend.Host{
		{Name: "small", CPU: resource.MustParse("2"), Memory: resource.MustParse("4G"), Labels: map[string]string{"size": "small"}},
		{Name: "big", CPU: resource.MustParse("1k"), Memory: resource.MustParse("1Pi"), Labels: map[string]string{"size": "big"},
			Taints: []corev1.Taint{{Key: "dedicated", Value: "vms", Effect: corev1.TaintEffectNoSchedule}}},
		{Name: "cordoned", CPU: resource.MustParse("2k"), Memory: resource.MustParse("2Pi"), Unschedulable: true},
	}),
	backend.NewHosts([]backend.Host{fuzzHost("test-vm-server-node", "1k", "1Pi"), fuzzHost("other", "1", "1Gi")}),
}

// fuzzHost is a host without labels, taints or cordon.
func fuzzHost(name, cpu, memory string) backend.Host {
	return backend.Host{Name: name, CPU: resource.MustParse(cpu), Memory: resource.MustParse(memory)}
}

// fuzzHostsIndex is the index in fuzzHosts of the hosts h, those of a golden case: the first
// of their kind (unknown, none, hosts some placements do not admit, room for the base VM's
// size or more).
func fuzzHostsIndex(h *backend.Hosts) uint8 {
	switch {
	case h == nil:
		return 0
	case h.Len() == 0:
		return 3
	}
	for o := range h.All() {
		if len(o.Labels) > 0 || len(o.Taints) > 0 || o.Unschedulable {
			return 4
		}
	}
	if h.Room(backend.Spec{}, nil).Fits(resource.MustParse("3"), resource.MustParse("4G")) {
		return 1
	}
	return 2
}

// checkRoom fails the test if plan replaces a running server for a change of its spec (a
// resize its host refused, a change that cannot be made in place, any change under --resize
// replace) while no host the spec's placement admits, and that the VM's disk can be reached
// from (diskReach), could take its cpu and memory, or while the status records such a server
// kept for this generation (room.go): the replacement would start nowhere, or reboot the VM
// unasked. Nor may a migration move it off its node then, nor when only that node has the
// room: its next server takes the spec, and keeps off that node (migrate.go); nor when its
// disk cannot follow it (backend.Disk.Pinned). A restart (ServerRestarted) and the
// replacement of a server that ended have reasons of their own.
func checkRoom(t *testing.T, p decision.Policy, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk, hosts *backend.Hosts, plan decision.Plan) {
	t.Helper()
	spec, errs := vm.Spec()
	reach := diskReach(p, disk)
	c := vm.Status().Condition(schema.ConditionRestartRequired)
	kept := c != nil && decision.RoomKept(c) && c.ObservedGeneration == vm.Generation()
	// The other way: a server newly kept for want of room (ResizeNoRoom for this generation,
	// which the status had not recorded) is kept only where the hosts are known and none that
	// the next server's placement (the VM's) admits has its cpu and memory.
	if now := restartRequiredOf(plan.Status); len(errs) == 0 && srv != nil && !kept &&
		now != nil && decision.RoomKept(now) && now.ObservedGeneration == vm.Generation() {
		if hosts == nil || hosts.RoomWithin(backend.Spec{CPU: spec.CPU, Memory: spec.Memory, Placement: spec.Placement}, srv.AdmittedTolerations, reach).Fits(spec.CPU, spec.Memory) {
			t.Errorf("keeps a running server for want of room that a host has (%s)\nVM: %s\nserver: %+v\ndisk: %+v\nplan:\n%s",
				roomString(hosts, backend.Spec{CPU: spec.CPU, Memory: spec.Memory, Placement: spec.Placement}, srv, reach), vm.JSON(), srv, disk, renderPlan(t, plan))
		}
	}
	a := plan.Server
	if len(errs) > 0 || srv == nil || !decision.Running(srv) || a == nil || a.Op != decision.DeleteServer {
		return
	}
	next := backend.Spec{CPU: spec.CPU, Memory: spec.Memory, Placement: spec.Placement}
	noRoom := hosts != nil && !hosts.RoomWithin(next, srv.AdmittedTolerations, reach).Fits(spec.CPU, spec.Memory)
	switch {
	case a.Event.Reason == decision.ReasonReplacingServer && p.Resize != decision.ResizeManual && (noRoom || kept):
		t.Errorf("replaces a running server for a change of its spec that no host has room for (%s), or kept for want of it (%v)\nVM: %s\nserver: %+v\ndisk: %+v\nplan:\n%s",
			roomString(hosts, next, srv, reach), kept, vm.JSON(), srv, disk, renderPlan(t, plan))
	case a.Event.Reason == decision.ReasonMigrating && diskOf(p, disk) != nil && diskOf(p, disk).Pinned != "":
		t.Errorf("migrates a running server whose disk cannot follow it (%s)\nVM: %s\nserver: %+v\ndisk: %+v\nplan:\n%s",
			disk.Pinned, vm.JSON(), srv, disk, renderPlan(t, plan))
	case a.Event.Reason == decision.ReasonMigrating:
		next.AvoidNode = srv.Node
		if hosts != nil && !hosts.RoomWithin(next, srv.AdmittedTolerations, reach).Fits(spec.CPU, spec.Memory) {
			t.Errorf("migrates a running server whose next server no host but its own has room for (%s)\nVM: %s\nserver: %+v\ndisk: %+v\nplan:\n%s",
				roomString(hosts, next, srv, reach), vm.JSON(), srv, disk, renderPlan(t, plan))
		}
	}
}

// checkReachKeepsDisk fails the test if the nodes the VM's disk can be reached from, or its
// being bound to its node (backend.Disk.NodeAffinity, Pinned), change what plan, decided on
// in, does to the disk: they weigh where a server may go, never whether the disk is made,
// adopted, grown, let go of or deleted. A move or a replacement refused for them leaves the
// disk as it is, and none is deleted, or made anew and empty, for want of a node to reach it
// from (checkDisk holds the disk's actions to the rest).
func checkReachKeepsDisk(t *testing.T, p decision.Policy, in decision.Input, plan decision.Plan) {
	t.Helper()
	if in.Disk == nil || in.Disk.NodeAffinity == nil && in.Disk.Pinned == "" {
		return
	}
	disk, free := in.Disk, *in.Disk
	free.NodeAffinity, free.Pinned = nil, ""
	in.Disk = &free
	if other := p.Decide(in); !equality.Semantic.DeepEqual(plan.Disk, other.Disk) {
		t.Errorf("the disk's reach changes what is done to it\nVM: %s\nserver: %+v\ndisk: %+v\nplan:\n%s\nwithout it:\n%s",
			in.VM.JSON(), in.Server, disk, renderPlan(t, plan), renderPlan(t, other))
	}
}

// diskOf is the disk the VM's next server mounts under p, as the backend observed it: under
// --root-disk claim, the VM's own (owned or kept) or one it adopts (unowned); nil when there
// is none (another's, or none under ephemeral), and the server's next one mounts a disk
// made for it, or none.
func diskOf(p decision.Policy, disk *backend.Disk) *backend.Disk {
	if p.RootDisk == decision.RootDiskEphemeral || disk == nil || !disk.Owner.Mine() && disk.Owner != backend.DiskUnowned {
		return nil
	}
	return disk
}

// diskReach is the nodes the disk the VM's next server mounts (diskOf) can be reached from
// (backend.Disk.NodeAffinity); nil: every node.
func diskReach(p decision.Policy, disk *backend.Disk) *corev1.NodeSelector {
	if d := diskOf(p, disk); d != nil {
		return d.NodeAffinity
	}
	return nil
}

// restartRequiredOf is the condition RestartRequired of st; nil when st is nil (the plan
// writes no status) or has none.
func restartRequiredOf(st *schema.Status) *schema.Condition {
	if st == nil {
		return nil
	}
	return st.Condition(schema.ConditionRestartRequired)
}

// roomString is the room h has for spec among the hosts reach admits, srv's tolerations
// from admission counted, as a failure message gives it.
func roomString(h *backend.Hosts, spec backend.Spec, srv *backend.Server, reach *corev1.NodeSelector) string {
	if h == nil {
		return "hosts unknown"
	}
	r := h.RoomWithin(spec, srv.AdmittedTolerations, reach)
	return fmt.Sprintf("cpu %s, memory %s, %d of %d hosts admit it, %d the disk can be reached from", r.CPU.String(), r.Memory.String(), r.Hosts, r.Known, r.Within)
}

// fuzzDisk is a disk as FuzzDecide's arguments give it.
type fuzzDisk struct {
	has                                bool
	phase, growth, owner               uint8
	requested, capacity, growthMessage string
	pending                            string
	canGrow, deleting                  bool
}

// fuzzDiskArgs is d as FuzzDecide's arguments (a case's disk, for a seed).
func fuzzDiskArgs(d *backend.Disk) fuzzDisk {
	if d == nil {
		return fuzzDisk{}
	}
	owner := slices.Index(fuzzDiskOwners, d.Owner)
	if d.KeptMark {
		owner += len(fuzzDiskOwners)
	}
	if d.KindUnrecorded {
		owner += 2 * len(fuzzDiskOwners)
	}
	if d.Pinned != "" {
		owner += 4 * len(fuzzDiskOwners)
	}
	phase := slices.Index(fuzzDiskPhases, d.Phase) + 2*len(fuzzDiskPhases)*fuzzReachIndex(d.NodeAffinity)
	if d.BindsWithServer {
		phase += len(fuzzDiskPhases)
	}
	return fuzzDisk{has: true, phase: uint8(phase), growth: uint8(slices.Index(fuzzGrowthStates, d.Growth.State)),
		owner: uint8(owner), requested: quantityString(d.Requested), capacity: quantityString(d.Capacity),
		growthMessage: d.Growth.Message, pending: d.Pending, canGrow: d.CanGrow, deleting: d.Deleting}
}

// fuzzReaches are the nodes a fuzzed disk can be reached from (backend.Disk.NodeAffinity, by
// the spare bits of its phase's argument above BindsWithServer's), against fuzzHosts: every
// node (no affinity, or one that every node meets), none, the fuzzed server's own node
// (fuzzWhere) and the small ones (a, small: some of a host set, or all of it), the others
// (b, c, big, cordoned, other: some, or none), a label only the tainted big node has, two
// terms that each admit a node (either will do), and an affinity that does not parse, which
// admits no node (backend.Hosts.RoomWithin).
var fuzzReaches = []*corev1.NodeSelector{
	nil,
	{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "example.com/nowhere", Operator: corev1.NodeSelectorOpDoesNotExist}}}}},
	{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"elsewhere"}}}}}},
	{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"test-vm-server-node", "a", "small"}}}}}},
	{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"b", "c", "big", "cordoned", "other"}}}}}},
	{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "size", Operator: corev1.NodeSelectorOpIn, Values: []string{"big"}}}}}},
	{NodeSelectorTerms: []corev1.NodeSelectorTerm{
		{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"b"}}}},
		{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "size", Operator: corev1.NodeSelectorOpIn, Values: []string{"small"}}}}}},
	{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "size", Operator: "Bogus", Values: []string{"big"}}}}}},
}

// fuzzPinned is why a fuzzed disk cannot follow its VM to another node (backend.Disk.Pinned,
// by a spare bit of its owner's argument above KindUnrecorded's).
const fuzzPinned = "its volume is a local volume on node test-vm-server-node"

// fuzzReachIndex is the index in fuzzReaches of na, a golden case's disk's node affinity:
// the one it equals, else the one that admits the fuzzed server's node and the small ones
// (the nodes of the cases are not fuzzHosts').
func fuzzReachIndex(na *corev1.NodeSelector) int {
	if i := slices.IndexFunc(fuzzReaches, func(r *corev1.NodeSelector) bool { return equality.Semantic.DeepEqual(r, na) }); i >= 0 {
		return i
	}
	return 3
}

// The words of a disk FuzzDecide gives, and a growth state a backend may report in the
// future, which the decision must bear.
var (
	fuzzDiskPhases   = []backend.DiskPhase{backend.DiskPending, backend.DiskBound, backend.DiskLost}
	fuzzGrowthStates = []backend.GrowthState{backend.GrowthNone, backend.GrowthPending, backend.GrowthInProgress, backend.GrowthInfeasible, "Paused"}
	fuzzDiskOwners   = []backend.DiskOwner{backend.DiskOwned, backend.DiskKept, backend.DiskUnowned, backend.DiskOther}
)

// fuzzRootDiskModes are the --root-disk modes FuzzDecide decides under; the zero mode means
// claim.
var fuzzRootDiskModes = []decision.RootDiskMode{"", decision.RootDiskClaim, decision.RootDiskEphemeral}

// fuzzResizeStates are the resize states FuzzDecide gives a server: the five a backend
// reports, and one it may report in the future, which the decision must bear.
var fuzzResizeStates = []backend.ResizeState{backend.ResizeNone, backend.ResizePending, backend.ResizeDeferred,
	backend.ResizeInfeasible, backend.ResizeInProgress, "Paused"}

// fuzzResizeModes are the --resize modes FuzzDecide decides under; the zero mode means
// in-place.
var fuzzResizeModes = []decision.ResizeMode{"", decision.ResizeInPlace, decision.ResizeReplace, decision.ResizeManual}

// quantityString is q as a backend would write it; "" for zero, which a Resize uses for "not
// told".
func quantityString(q resource.Quantity) string {
	if q.IsZero() {
		return ""
	}
	return q.String()
}

// quantity parses a quantity the way a backend reports one; what does not parse is zero.
func quantity(s string) resource.Quantity {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}
	}
	return q
}

// followsEviction reports whether the status st records a move under Replace off node: the
// condition Moving, with the evicted server on node as the status reports it (ServerEvicted),
// or, once a status that names no evicted server replaced that one (the next server refused),
// node as Moving's message names it.
func followsEviction(st schema.Status, node string) bool {
	m := st.Condition(decision.ConditionMoving)
	switch {
	case m == nil:
		return false
	case st.Reason == decision.ReasonServerEvicted && st.Server != nil:
		return st.Server.Node == node
	}
	return strings.Contains(m.Message, " was evicted from node "+node+" (")
}

// checkPlan fails the test if plan contradicts itself, the world it was decided for or the
// policy p: it creates a server while one exists, deletes one that is not there (or is
// already going), resizes in place where p or the server does not allow it, replaces a running
// server under --resize manual, moves the finalizer the wrong way, reports Active without a
// ready server, reports a resize of a server that is not being resized, writes a status that
// differs from the current one only in its times, or asks to be requeued while it acts on the
// server. Of the VM's disk (checkDisk): it acts on a disk that is not there or another's,
// deletes one but for a deleted VM whose reclaim policy is Delete, shrinks one, or creates a
// server that mounts none.
func checkPlan(t *testing.T, p decision.Policy, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk, plan decision.Plan) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s\nVM: %s\nserver: %+v\ndisk: %+v\nplan:\n%s", fmt.Sprintf(format, args...), vm.JSON(), srv, disk, renderPlan(t, plan))
	}
	if vm.Paused() {
		checkPaused(fail, vm, plan)
		return
	}
	spec, specErrs := vm.Spec()
	current := vm.Status()
	hasFinalizer := vm.HasFinalizer(schema.Finalizer)
	claims := p.RootDisk != decision.RootDiskEphemeral
	checkDisk(fail, claims, vm, srv, disk, plan)

	switch plan.Finalizer {
	case "":
	case decision.AddFinalizer:
		if hasFinalizer || vm.Deleting() {
			fail("adds the finalizer to a VM that has it or is being deleted")
		}
	case decision.RemoveFinalizer:
		if !hasFinalizer || !vm.Deleting() || srv != nil || plan.Server != nil {
			fail("removes the finalizer while the VM is not being deleted, lacks it, or has a server")
		}
	default:
		fail("unknown finalizer change %q", plan.Finalizer)
	}

	if a := plan.Server; a != nil {
		if a.Event.Reason == "" || a.Event.Message == "" || (a.Event.Type != corev1.EventTypeNormal && a.Event.Type != corev1.EventTypeWarning) {
			fail("server action without a proper event: %+v", a.Event)
		}
		switch a.Op {
		case decision.CreateServer:
			switch {
			case srv != nil:
				fail("creates a server while one exists")
			case vm.Deleting() || len(specErrs) > 0 || spec.RunStrategy == schema.RunHalted:
				fail("creates a server for a VM that is being deleted, invalid or inactive")
			case stoppedOnRequest(vm) && !newStart(vm):
				// Stopped until a start: also through a refusal of its spec, its disk or its
				// server, whose status records the stopped one (ConditionRefusedWhileStopped).
				fail("creates a server for a VM stopped on request, without a start request newer than the one recorded")
			case !hasFinalizer && plan.Finalizer != decision.AddFinalizer:
				fail("creates a server without the finalizer that guarantees its cleanup")
			case a.Spec == nil || a.Spec.CPU.Sign() <= 0 || a.Spec.Memory.Sign() <= 0 || a.Spec.Image == "" ||
				(a.Spec.RootDisk.Sign() <= 0) != a.Spec.Disk:
				fail("creates a server of an impossible spec")
			case claims && !a.Spec.Equal(backend.Spec{CPU: spec.CPU, Memory: spec.Memory, Image: a.Spec.Image, Disk: true, Placement: spec.Placement}),
				!claims && !a.Spec.Equal(backend.Spec{CPU: spec.CPU, Memory: spec.Memory, RootDisk: spec.RootDisk, Image: a.Spec.Image, Placement: spec.Placement}),
				spec.Image != "" && a.Spec.Image != spec.Image:
				fail("creates a server other than the spec asks for")
			case a.Spec.AvoidNode != "" && !movingOff(current, a.Spec.AvoidNode) && (plan.Status == nil || !movingOff(*plan.Status, a.Spec.AvoidNode)):
				// The migration is under way, or recorded by this plan: a request that a
				// deletion under way or done carries out (migrate).
				fail("creates a server that avoids node %s, and no migration moves off it", a.Spec.AvoidNode)
			case a.Spec.PreferAvoidNode != "" && !followsEviction(current, a.Spec.PreferAvoidNode):
				// Only the server that follows an eviction under Replace prefers to keep off
				// the node the evicted one ran on.
				fail("creates a server that prefers to avoid node %s, and no server evicted from it is followed", a.Spec.PreferAvoidNode)
			case a.Spec.PreferAvoidNode != "" && a.Spec.AvoidNode != "":
				fail("creates a server that both avoids node %s and prefers to avoid node %s", a.Spec.AvoidNode, a.Spec.PreferAvoidNode)
			case claims && !(disk == nil && plan.Disk != nil && plan.Disk.Op == decision.CreateDisk ||
				disk != nil && !disk.Deleting && (disk.Owner.Mine() || disk.Owner == backend.DiskUnowned && plan.Disk != nil && plan.Disk.Op == decision.AdoptDisk)):
				fail("creates a server whose disk is not there, going, or not the VM's")
			}
		case decision.DeleteServer:
			switch {
			case srv == nil:
				fail("deletes a server that is not there")
			case srv.Deleting && (a.Event.Reason != decision.ReasonStoppingServer || a.GracePeriod == nil || !newStop(vm) || srv.State == backend.StateLost):
				// A new stop's grace period may cut a deletion under way short (stopServer), but
				// not one on a node that does not answer.
				fail("deletes a server already going, but for a new stop with a grace period on a node that answers")
			case a.GracePeriod != nil && (srv.State == backend.StateLost || srv.NodeSilent):
				// A grace period (kubectl vm stop --force: 0) would remove its pod at once, while
				// its guest may still run on the node with the disk.
				fail("deletes a server on a node that does not answer with a grace period")
			case p.Resize == decision.ResizeManual && a.Event.Reason == decision.ReasonReplacingServer &&
				srv.State != backend.StatePending && srv.State != backend.StateFailed && srv.State != backend.StateStopped:
				fail("replaces a server that runs under --resize manual")
			case claims && a.Event.Reason == decision.ReasonReplacingServer && strings.Contains(a.Event.Message, "rootDisk"):
				fail("replaces a server for its root disk under --root-disk claim")
			}
		case decision.ResizeServer:
			switch {
			case !p.CanResize || p.Resize == decision.ResizeReplace:
				fail("resizes in place under --resize %q with canResize %v", p.Resize, p.CanResize)
			case srv == nil || srv.Deleting || (srv.State != backend.StateReady && srv.State != backend.StateStarting):
				fail("resizes a server that is not there, going or not running")
			case vm.Deleting() || len(specErrs) > 0 || spec.RunStrategy == schema.RunHalted:
				fail("resizes the server of a VM that is being deleted, invalid or inactive")
			case a.Spec == nil || !backend.ResizeOnly(srv.Spec, *a.Spec):
				fail("resizes a server to a spec that differs in more than cpu and memory, or in nothing")
			case a.Spec.CPU.Cmp(spec.CPU) != 0 || a.Spec.Memory.Cmp(spec.Memory) != 0:
				fail("resizes a server to other cpu and memory than the spec asks for")
			}
		default:
			fail("unknown server operation %q", a.Op)
		}
		if plan.RequeueAfter != 0 {
			fail("asks to be requeued while it acts on the server")
		}
	}
	if plan.RequeueAfter < 0 {
		fail("negative requeue")
	}
	if wantsNoServer(vm, spec) && srv != nil && !srv.Deleting && serverOp(plan) != decision.DeleteServer {
		// Also beside an invalid spec: the run strategy reads as Halted, or a stop is asked
		// for, and deleting a server needs nothing of what the invalid field hides (invalid.go).
		fail("keeps the server of a VM that is to have none (runStrategy %s, a new stop %v; spec errors %v)", spec.RunStrategy, newStop(vm), specErrs)
	}

	st := plan.Status
	if st == nil {
		if len(plan.Events) > 0 {
			fail("events without a status change")
		}
		return
	}
	if !claims && st.RootDisk != nil {
		fail("status reports a disk under --root-disk ephemeral")
	}
	if st.Reason == decision.ReasonDiskConflict && (disk == nil || disk.Owner != backend.DiskOther || st.Phase != schema.PhaseFailed) {
		fail("DiskConflict without another's disk of the VM's name")
	}
	if st.Reason == decision.ReasonWaitingForDisk && (st.Phase != schema.PhaseCreating || !claims) {
		fail("WaitingForDisk in phase %s, claims %v", st.Phase, claims)
	}
	if st.SameAs(current) {
		fail("writes a status that differs from the current one only in its times")
	}
	if !st.LastUpdateTime.Equal(now) {
		fail("status lastUpdateTime %s, want the decision's time %s", st.LastUpdateTime, now)
	}
	if st.ObservedGeneration != vm.Generation() {
		fail("status observedGeneration %d, want the VM's generation %d", st.ObservedGeneration, vm.Generation())
	}
	ready := 0
	for _, c := range st.Conditions {
		if c.Type != schema.ConditionReady {
			continue
		}
		ready++
		want := map[schema.Phase]schema.ConditionStatus{schema.PhaseActive: schema.ConditionTrue, schema.PhaseUnknown: schema.ConditionUnknown}[st.Phase]
		if want == "" {
			want = schema.ConditionFalse
		}
		if c.Status != want || c.Reason != st.Reason || c.Message != st.Message || c.ObservedGeneration != st.ObservedGeneration {
			fail("Ready condition %+v does not match phase %s, reason %s", c, st.Phase, st.Reason)
		}
	}
	switch rest := st.Phase == schema.PhaseInactive && decision.AtRest[st.Reason]; {
	case rest && ready != 0:
		fail("a VM stopped as asked (%s) with a Ready condition: kstatus would read it as in progress", st.Reason)
	case !rest && ready == 0:
		fail("status without a Ready condition")
	}
	// UsageReported describes the usage of an Active VM's server: True that the status holds
	// it, False why it does not. A reconcile that drops the usage drops the condition in the
	// same write; a paused VM's status is left as it was, the condition included.
	if c := st.Condition(decision.ConditionUsageReported); c != nil && st.Condition(schema.ConditionPaused) == nil &&
		(st.Phase != schema.PhaseActive || st.Server == nil || c.Status == schema.ConditionTrue && st.Server.Usage == nil) {
		fail("UsageReported %s/%s in phase %s, server %+v", c.Status, c.Reason, st.Phase, st.Server)
	}
	checkKstatus(fail, p, current, srv, plan, st)
	// A storage class that does not apply is the spec's, other than the class of the VM's
	// own disk, which stays as it is.
	if c := st.Condition(schema.ConditionStalled); c != nil && c.Reason == decision.ReasonDiskClassChangeRefused &&
		(!claims || disk == nil || !disk.Owner.Mine() && disk.Owner != backend.DiskUnowned || spec.StorageClass == "" ||
			spec.StorageClass == disk.StorageClass || plan.Disk != nil && plan.Disk.Op == decision.DeleteDisk) {
		fail("Stalled %s for a disk of the spec's class, or none of the VM's", c.Reason)
	}
	// A disk deleted by someone else is the VM's own, bound, held by a server.
	if c := st.Condition(schema.ConditionStalled); c != nil && c.Reason == decision.ReasonDiskDeleting &&
		(!claims || disk == nil || !disk.Owner.Mine() || !disk.Deleting || disk.Phase != backend.DiskBound || srv == nil || vm.Deleting()) {
		fail("Stalled %s without a bound disk of the VM's being deleted under a server", c.Reason)
	}

	// Resizing follows a resize of a running server that stays; RestartRequired, under
	// --resize manual, a server kept as it is, and under the other modes, one kept because no
	// host has room for its replacement (room.go). Never both.
	resizing, restartRequired := st.Condition(schema.ConditionResizing), st.Condition(schema.ConditionRestartRequired)
	if c := resizing; c != nil {
		stays := plan.Server == nil || plan.Server.Op == decision.ResizeServer
		if !decision.UnderWay(c.Reason) || c.Status != schema.ConditionTrue || c.ObservedGeneration != st.ObservedGeneration ||
			srv == nil || srv.Deleting || !decision.Running(srv) || !stays {
			fail("Resizing condition %+v without a resize under way of a running server that stays", *c)
		}
	}
	if c := restartRequired; c != nil {
		if p.Resize != decision.ResizeManual && !decision.RoomKept(c) || c.Status != schema.ConditionTrue || c.ObservedGeneration != st.ObservedGeneration ||
			srv == nil || srv.Deleting || plan.Server != nil || resizing != nil {
			fail("RestartRequired condition %+v other than for a server kept under --resize manual, or for want of room", *c)
		}
	}

	// What the status says about the server must be the server there is (or is being made).
	creates := plan.Server != nil && plan.Server.Op == decision.CreateServer
	switch {
	case creates:
		if st.Server == nil || st.Server.State != string(corev1.PodPending) {
			fail("creates a server but the status does not name a pending one")
		}
	case srv == nil:
		if st.Server != nil {
			fail("status names a server while there is none")
		}
	default:
		if st.Server == nil || st.Server.ID != srv.ID || st.Server.Name != srv.Name {
			fail("status names a server other than the one there is")
		}
	}

	checkClaimed(fail, srv, plan, st)

	switch st.Phase {
	case schema.PhaseActive:
		stays := plan.Server == nil || plan.Server.Op == decision.ResizeServer // a resize keeps the server
		if srv == nil || srv.State != backend.StateReady || srv.Deleting || !stays || st.Reason != decision.ReasonServerReady {
			fail("Active without a ready server that stays")
		}
	case schema.PhaseTerminating:
		if !vm.Deleting() {
			fail("Terminating while the VM is not being deleted")
		}
	case schema.PhaseInactive:
		if vm.Deleting() || len(specErrs) > 0 || spec.RunStrategy == schema.RunAlways {
			fail("Inactive while the VM does not ask for it") // Halted, or stopped under a strategy that heeds requests
		}
	case schema.PhaseCreating, schema.PhaseFailed, schema.PhaseUnknown:
		if vm.Deleting() {
			fail("phase %s while the VM is being deleted", st.Phase)
		}
	default:
		fail("unknown phase %q", st.Phase)
	}
	if (len(specErrs) > 0 && !vm.Deleting()) != (st.Reason == decision.ReasonInvalidSpec) {
		fail("reason %s for a spec with errors %v", st.Reason, specErrs)
	}
	if startCarried(vm, *st) && !carriesStart(srv, plan, *st) {
		// A start is recorded as done only by a plan that carries it out (runstrategy.go,
		// pendingStart); one recorded by a refusal, or with the VM left stopped, is never
		// carried out.
		fail("records the start request %s without a server made, kept or on its way (%s, %s)", st.StartRequestedAt, st.Phase, st.Reason)
	}

	// One event per change of phase or reason, unless the server action's event explains it.
	// A server that went without the controller deleting it (only one the status named) is a
	// Warning ServerMissing: beside the action that replaces it, or instead of the transition
	// to waiting for it to go.
	changed := st.Phase != current.Phase || st.Reason != current.Reason
	evs := diskEvents(fail, current, st, disk, plan.Events)
	evs = resumedEvents(fail, current, *st, evs)
	evs = evictionEvents(fail, current, *st, srv, evs)
	evs = migrationEvents(fail, current, *st, evs)
	evs = restartEvents(fail, current, *st, srv, plan, evs)
	evs = restartRequiredEvents(fail, current, *st, evs)
	if len(evs) == 1 && evs[0].Reason == decision.ReasonServerMissing {
		named := current.Server != nil && current.Server.Name != ""
		creates := plan.Server != nil && plan.Server.Op == decision.CreateServer
		// Under Once and Manual it is not replaced: the VM's own reason says so.
		notReplaced := st.Reason == decision.ReasonServerMissing && plan.Server == nil
		if evs[0].Type != corev1.EventTypeWarning || !named || !(creates || st.Reason == decision.ReasonServerReplacing || notReplaced) || !changed {
			fail("event %+v: ServerMissing only as a Warning about a server the status named, when it is replaced or the VM says it is not", evs[0])
		}
		if creates {
			evs = nil
		} else {
			evs = []decision.Event{{Type: corev1.EventTypeNormal, Reason: st.Reason, Message: evs[0].Message}}
		}
	}
	// ServerResized comes last, once, with the Resizing condition of a resize the host took
	// going away, and the new size in effect.
	if n := len(evs); n > 0 && evs[n-1].Reason == decision.ReasonServerResized {
		was := current.Condition(schema.ConditionResizing)
		if was == nil || !decision.UnderWay(was.Reason) || resizing != nil || plan.Server != nil || srv == nil || !srv.Resize.Done(srv.Spec) {
			fail("event %+v without a resize under way done and its Resizing condition going away", evs[n-1])
		}
		evs = evs[:n-1]
	}
	// A server stuck for longer than --stalled-after: one Warning as Stalled comes
	// (stuck.go).
	explained := plan.Server != nil || plan.Disk != nil && plan.Disk.Op == decision.CreateDisk // by the action's own Event
	if c := st.Condition(schema.ConditionStalled); c != nil && (!changed || explained) && len(evs) == 1 && evs[0].Type == corev1.EventTypeWarning &&
		evs[0].Reason == decision.ReasonStalled && evs[0].Message == c.Message {
		if was := current.Condition(schema.ConditionStalled); was != nil {
			fail("a second Warning for a VM that was Stalled already")
		}
		evs = nil
	}
	// A server whose node does not answer is a Warning NodeLost, also where the plan's action
	// (the deletion that cannot finish, a disk made) would explain the change (nodelost.go).
	if len(evs) == 1 && evs[0].Reason == decision.ReasonNodeLost && st.Reason == decision.ReasonNodeLost && explained &&
		current.Reason != decision.ReasonNodeLost {
		if evs[0].Type != corev1.EventTypeWarning || evs[0].Message != st.Message {
			fail("event %+v: want the Warning NodeLost with the status's message", evs[0])
		}
		evs = nil
	}
	switch {
	case explained || !changed:
		if len(evs) != 0 {
			fail("events %+v besides the server's or new disk's action, or without a change of phase or reason", plan.Events)
		}
	case len(evs) != 1 || evs[0].Reason != st.Reason:
		fail("want one event with reason %s for the change of phase or reason", st.Reason)
	default:
		// A status Stalled on its own reason needs a person too: a stalled reason, a failure
		// not retried, a disk whose volume is lost.
		stalled := st.Condition(schema.ConditionStalled)
		warning := st.Phase == schema.PhaseFailed || st.Phase == schema.PhaseUnknown || st.Reason == decision.ReasonNodeLost ||
			st.Reason == decision.ReasonUnschedulable || st.Reason == decision.ReasonImagePullFailing ||
			st.Reason == decision.ReasonServerNotStarting || stalled != nil && stalled.Reason == st.Reason
		if (evs[0].Type == corev1.EventTypeWarning) != warning || evs[0].Message == "" {
			fail("event %+v: want a Warning exactly for Failed, Unknown, NodeLost, a stuck server and a status Stalled on its reason, with a note", evs[0])
		}
	}
	if _, err := schema.StatusPatch(vm.Fields(), *st, vm.ResourceVersion()); err != nil {
		fail("the status does not render: %v", err)
	}
}

// checkRefused checks what follows a resize in place the backend refuses
// (backend.ErrResizeInfeasible): the refusal's plan writes a status and nothing else; carried
// out, the next decision does not ask for the same resize again but falls back on the policy,
// a replacement, or under --resize manual, or in-place where no host has room for the new
// size, nothing of the server (the refusal's RestartRequired stands); and
// that decision carried out leaves nothing more to do.
func checkRefused(t *testing.T, p decision.Policy, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk, hosts *backend.Hosts, why string) {
	t.Helper()
	refused := p.ResizeRefused(decision.Input{VM: vm, Server: srv, Disk: disk, Hosts: hosts, Now: now}, why)
	if refused.Server != nil || refused.Disk != nil || refused.Finalizer != "" || refused.Status == nil {
		t.Errorf("ResizeRefused plans other than a status:\n%s", renderPlan(t, refused))
		return
	}
	if c := vm.Status().Condition(schema.ConditionStalled); c != nil && c.Reason == decision.ReasonDiskClassChangeRefused {
		if r := refused.Status.Condition(schema.ConditionStalled); r == nil || r.Reason != c.Reason {
			t.Errorf("ResizeRefused drops Stalled %s:\n%s", c.Reason, renderPlan(t, refused))
		}
	}
	restartRequiredEvents(t.Errorf, vm.Status(), *refused.Status, refused.Events)
	w := applyPlan(t, vm, srv, disk, refused)
	vm2, srv2, disk2 := w.vm, w.srv, w.disk
	next := p.Decide(decision.Input{VM: vm2, Server: srv2, Disk: disk2, Budget: w.budget, Hosts: hosts, Now: now})
	checkPlan(t, p, vm2, srv2, disk2, next)
	// The disk is no part of the resize: a disk to make is made whatever the server does; nor
	// is the finalizer, which the refusal's plan leaves out and the next decision adds.
	// Under --resize in-place a server is kept as under manual when no host its placement
	// admits, and that its disk can be reached from, has room for the new size (room.go).
	spec, _ := vm.Spec()
	to := backend.Spec{CPU: spec.CPU, Memory: spec.Memory, Placement: srv.Spec.Placement}
	keeps := p.Resize == decision.ResizeManual || hosts != nil && !hosts.RoomWithin(to, srv.AdmittedTolerations, diskReach(p, disk)).Fits(spec.CPU, spec.Memory)
	if keeps && (next.Server != nil || next.Finalizer == decision.RemoveFinalizer) ||
		!keeps && (next.Server == nil || next.Server.Op != decision.DeleteServer) {
		t.Errorf("after the refusal under --resize %q the decision is\n%s", p.Resize, renderPlan(t, next))
	}
	if w := applyPlan(t, vm2, srv2, disk2, next); !w.gone {
		if again := p.Decide(decision.Input{VM: w.vm, Server: w.srv, Disk: w.disk, Budget: w.budget, Hosts: hosts, Now: now}); !again.Empty() {
			t.Errorf("deciding again after carrying out\n%s\nasks for more:\n%s", renderPlan(t, next), renderPlan(t, again))
		}
	}
}

// checkRejected checks the plan for a VM whose server the backend refused: Failed with the
// reason, no other action, and a later look; the refusal carried out and decided again writes
// nothing new.
func checkRejected(t *testing.T, policy decision.Policy, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk, why string) {
	t.Helper()
	p := policy.Rejected(decision.Input{VM: vm, Disk: disk, Now: now}, why)
	if p.Server != nil || p.Disk != nil || p.Budget != nil || p.Finalizer != "" || p.RequeueAfter != decision.Duration(decision.RejectedRetry) {
		t.Errorf("ServerRejected plans more than a status and a requeue:\n%s", renderPlan(t, p))
	}
	if p.Status != nil && (p.Status.Phase != schema.PhaseFailed || p.Status.Reason != decision.ReasonServerRejected || p.Status.Server != nil) {
		t.Errorf("ServerRejected status %+v", p.Status)
	}
	if p.Status == nil && vm.Status().Reason != decision.ReasonServerRejected {
		t.Errorf("ServerRejected writes no status for a VM whose status says %s", vm.Status().Reason)
	}
	if p.Status == nil {
		return
	}
	w := applyPlan(t, vm, srv, disk, p)
	if again := policy.Rejected(decision.Input{VM: w.vm, Disk: w.disk, Now: now}, why); again.Status != nil || len(again.Events) > 0 {
		t.Errorf("ServerRejected decided again after carrying out\n%s\nwrites more:\n%s", renderPlan(t, p), renderPlan(t, again))
	}
}

// checkDisk fails the test (through fail) if plan's action on the VM's disk is not one the
// world and the policy allow: a create only where no disk of the name is, for an active VM
// with the finalizer, of the spec's size and class; a change only of a disk that is there and
// not another's, never smaller than it is, larger only when it is bound and can grow; a delete
// only of the VM's own disk, once the VM is deleted, its server gone, and its reclaim policy
// Delete. Under --root-disk ephemeral, no create, no growth and no adoption of a disk that is
// not the VM's: only the VM's own disk (one made under claim) owned or let go of as the
// reclaim policy says, and deleted as under claim. A disk is the owner's data: this is what
// keeps it.
func checkDisk(fail func(string, ...any), claims bool, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk, plan decision.Plan) {
	a := plan.Disk
	if a == nil {
		return
	}
	spec, specErrs := vm.Spec()
	if !claims {
		switch {
		case a.Op == decision.CreateDisk:
			fail("creates a disk under --root-disk ephemeral")
			return
		case disk != nil && !disk.Owner.Mine():
			fail("acts on a disk that is not the VM's under --root-disk ephemeral")
			return
		case a.Spec != nil && disk != nil && a.Spec.Size.Cmp(disk.Requested) != 0:
			fail("resizes a disk under --root-disk ephemeral")
			return
		}
	}
	switch {
	case a.Op == decision.RecordDiskKind && a.Event != (decision.Event{}):
		fail("an Event for recording the disk's kind, which changes nothing the VM's owner sees: %+v", a.Event)
	case a.Op == decision.CreateDisk && a.Event.Reason == decision.ReasonDiskRecreated:
		// A Warning: the disk the status reports, bound, went without the controller.
		had := vm.Status().RootDisk
		if a.Event.Type != corev1.EventTypeWarning || a.Event.Message == "" || had == nil || had.Phase != string(backend.DiskBound) || had.Capacity == "" {
			fail("%s without a bound disk the status reports: %+v", a.Event.Reason, a.Event)
		}
	case a.Op != decision.RecordDiskKind && (a.Event.Reason == "" || a.Event.Message == "" || a.Event.Type != corev1.EventTypeNormal):
		fail("disk action without a proper event: %+v", a.Event)
	}
	switch a.Op {
	case decision.CreateDisk:
		switch {
		case disk != nil:
			fail("creates a disk while one of its name is there")
		case vm.Deleting() || len(specErrs) > 0 || spec.RunStrategy == schema.RunHalted:
			fail("creates a disk for a VM that is being deleted, invalid or inactive")
		case !vm.HasFinalizer(schema.Finalizer) && plan.Finalizer != decision.AddFinalizer:
			fail("creates a disk without the finalizer that guarantees its cleanup")
		case a.Spec == nil || a.Spec.Size.Cmp(spec.RootDisk) != 0 || a.Spec.StorageClass != spec.StorageClass ||
			a.Spec.Keep != keptBy(vm, spec, disk):
			fail("creates a disk other than the spec asks for")
		}
	case decision.AdoptDisk, decision.ExpandDisk, decision.ReleaseDisk:
		switch {
		case disk == nil || disk.Deleting || disk.Owner == backend.DiskOther:
			fail("changes a disk that is not there, going, or another's")
		case a.Spec == nil || a.Spec.Size.Cmp(disk.Requested) < 0:
			fail("shrinks a disk")
		case a.Spec.Size.Cmp(disk.Requested) > 0 && (disk.Phase != backend.DiskBound || !disk.CanGrow || a.Spec.Size.Cmp(spec.RootDisk) != 0):
			fail("grows a disk that cannot grow, or to another size than rootDisk")
		case a.Op == decision.ReleaseDisk && !a.Spec.Keep, a.Op == decision.AdoptDisk && a.Spec.Keep != keptBy(vm, spec, disk):
			fail("makes the disk owned otherwise than the reclaim policy says")
		case a.Op != decision.ReleaseDisk && vm.Deleting():
			fail("adopts or grows the disk of a VM that is being deleted")
		case disk.Owner == backend.DiskUnowned && a.Op != decision.AdoptDisk:
			fail("changes a disk it does not adopt")
		}
	case decision.RecordDiskKind:
		// Only what no other change does, once: a disk that records the kind is the steady
		// VM's, and recording it again would be a request on every reconcile.
		switch {
		case disk == nil || !disk.Owner.Mine() || disk.Deleting || !disk.KindUnrecorded:
			fail("records the kind on a disk that is not the VM's, going, or records it already")
		case vm.Deleting() || len(specErrs) > 0:
			fail("records the kind on the disk of a VM that is being deleted or invalid")
		case a.Spec == nil || a.Spec.Size.Cmp(disk.Requested) != 0 || a.Spec.Keep != (disk.Owner == backend.DiskKept) || a.Spec.Keep != disk.KeptMark:
			fail("records the kind and changes the disk: %+v of %s", a.Spec, disk.Owner)
		}
	case decision.DeleteDisk:
		switch {
		case disk == nil || !disk.Owner.Mine() || disk.Deleting:
			fail("deletes a disk that is not the VM's, or already going")
		case !vm.Deleting() || srv != nil || plan.Finalizer != decision.RemoveFinalizer:
			fail("deletes the disk of a VM that is not being deleted, or before its server is gone")
		case spec.ReclaimPolicy != schema.ReclaimDelete:
			fail("deletes a disk whose reclaim policy is %q", spec.ReclaimPolicy)
		case keptBy(vm, spec, disk):
			fail("deletes a kept disk (marked %t, %s) of a VM that does not name reclaim policy Delete", disk.KeptMark, disk.Owner)
		}
	default:
		fail("unknown disk operation %q", a.Op)
	}
}

// keptBy reports whether the VM keeps disk, seen as it is, when the VM is deleted: under a
// reclaim policy other than Delete, and when the VM names none, a disk that is kept already
// (an earlier VM's, one marked kept, or one a live VM does not own). Only Delete named in the
// spec lets a kept disk go.
func keptBy(vm schema.VirtualMachine, spec schema.Spec, disk *backend.Disk) bool {
	if spec.ReclaimPolicy != schema.ReclaimDelete {
		return true
	}
	if spec.ReclaimPolicySet || disk == nil {
		return false
	}
	return disk.KeptMark || disk.Owner == backend.DiskUnowned || !vm.Deleting() && disk.Owner == backend.DiskKept
}

// diskEvents checks the Events of the DiskResizing condition's changes in evs (a Warning when
// it turns to a refusal, the storage's, the class's or of a shrink, with the condition's
// message; DiskResized when a growth ends with the disk at its size), and the Warning of a
// storage class that does not apply to the disk or of a disk someone else deletes (with Stalled
// turning to it), the Warning of a bound disk found gone (DiskDeleted: the status drops it, and
// no disk is left), and returns the other events.
func diskEvents(fail func(string, ...any), current schema.Status, st *schema.Status, disk *backend.Disk, evs []decision.Event) []decision.Event {
	was, now := current.Condition(schema.ConditionDiskResizing), st.Condition(schema.ConditionDiskResizing)
	var rest []decision.Event
	for _, e := range evs {
		switch e.Reason {
		case decision.ReasonDiskResizeInfeasible, decision.ReasonDiskNotExpandable, decision.ReasonDiskShrinkRefused:
			if e.Type != corev1.EventTypeWarning || now == nil || now.Reason != e.Reason || now.Message != e.Message || was != nil && was.Reason == now.Reason {
				fail("event %+v without the DiskResizing condition turning to it", e)
			}
		case decision.ReasonDiskResized:
			if e.Type != corev1.EventTypeNormal || now != nil || was == nil || disk == nil || !disk.GrowthDone() {
				fail("event %+v without a growth done and its DiskResizing condition going away", e)
			}
		case decision.ReasonDiskDeleted:
			had := current.RootDisk
			if e.Type != corev1.EventTypeWarning || disk != nil || st.RootDisk != nil || had == nil || had.Phase != string(backend.DiskBound) ||
				had.Capacity == "" || !strings.Contains(e.Message, had.ClaimName) {
				fail("event %+v without the status dropping a disk it reported bound, and none left", e)
			}
		case decision.ReasonDiskClassChangeRefused, decision.ReasonDiskDeleting:
			stalled, before := st.Condition(schema.ConditionStalled), current.Condition(schema.ConditionStalled)
			if e.Type != corev1.EventTypeWarning || stalled == nil || stalled.Reason != e.Reason || stalled.Message != e.Message ||
				before != nil && before.Reason == e.Reason {
				fail("event %+v without Stalled turning to it", e)
			}
		default:
			rest = append(rest, e)
		}
	}
	if now != nil && (disk == nil || now.Status != schema.ConditionTrue || now.ObservedGeneration != st.ObservedGeneration) {
		fail("DiskResizing condition %+v without a disk of the VM's", *now)
	}
	return rest
}

// restartEvents checks the Event RestartNotNeeded, and returns evs without it: one at most,
// Normal, where a restart request is recorded by this plan and the server kept, one no status
// had reported yet, pending and not made for the request (its mark), which the status now
// names.
func restartEvents(fail func(string, ...any), current, st schema.Status, srv *backend.Server, plan decision.Plan, evs []decision.Event) []decision.Event {
	i := slices.IndexFunc(evs, func(e decision.Event) bool { return e.Reason == decision.ReasonRestartNotNeeded })
	if i < 0 {
		return evs
	}
	kept := plan.Server == nil || plan.Server.Op != decision.DeleteServer
	unrecorded := srv != nil && (current.Server == nil || current.Server.ID != srv.ID)
	named := srv != nil && st.Server != nil && st.Server.ID == srv.ID
	predates := srv != nil && srv.State == backend.StatePending && srv.Spec.Restart != st.RestartedAt
	if evs[i].Type != corev1.EventTypeNormal || st.RestartedAt == current.RestartedAt || !kept || !unrecorded || !named || !predates ||
		slices.ContainsFunc(evs[i+1:], func(e decision.Event) bool { return e.Reason == decision.ReasonRestartNotNeeded }) {
		fail("event %+v without a restart recorded, and the server no status had reported kept and named", evs[i])
	}
	return slices.Delete(slices.Clone(evs), i, i+1)
}

// restartRequiredReasons are the reasons of the condition RestartRequired.
var restartRequiredReasons = []string{decision.ReasonResizeInfeasible, decision.ReasonSpecChangeNeedsRestart, decision.ReasonResizeNoRoom}

// restartRequiredEvents checks the Event of the condition RestartRequired, and returns evs
// without it: one, Normal, with the condition's reason and message, where st brings the
// condition, turns it to another reason, or says something new of a new generation (the
// server kept, whatever the reason, while the VM's phase and reason stay as they were); none
// where it keeps the reason it had for the same generation or with the same message, or goes.
func restartRequiredEvents(fail func(string, ...any), current, st schema.Status, evs []decision.Event) []decision.Event {
	c, was := st.Condition(schema.ConditionRestartRequired), current.Condition(schema.ConditionRestartRequired)
	want := c != nil && (was == nil || was.Reason != c.Reason ||
		was.ObservedGeneration != c.ObservedGeneration && was.Message != c.Message)
	var rest, got []decision.Event
	for _, e := range evs {
		if slices.Contains(restartRequiredReasons, e.Reason) {
			got = append(got, e)
		} else {
			rest = append(rest, e)
		}
	}
	switch {
	case !want && len(got) > 0:
		fail("events %+v without RestartRequired turning to their reason or saying anything new of a new generation (was %+v, now %+v)", got, was, c)
	case want && (len(got) != 1 || got[0] != decision.Event{Type: corev1.EventTypeNormal, Reason: c.Reason, Message: c.Message}):
		fail("RestartRequired turns to %s: events %+v, want one Normal with the condition's reason and message", c.Reason, got)
	}
	return rest
}

// checkDiskRejected checks the plan for a VM whose disk the backend refused: Failed with the
// reason (DiskConflict for a name that is another's), no action, the server there is named,
// and a later look.
func checkDiskRejected(t *testing.T, policy decision.Policy, vm schema.VirtualMachine, srv *backend.Server, why string) {
	t.Helper()
	for _, conflict := range []bool{false, true} {
		p := policy.DiskRejected(decision.Input{VM: vm, Server: srv, Now: now}, why, conflict)
		if p.Server != nil || p.Disk != nil || p.Finalizer != "" || p.RequeueAfter != decision.Duration(decision.RejectedRetry) {
			t.Errorf("DiskRejected plans more than a status and a requeue:\n%s", renderPlan(t, p))
		}
		reason := decision.ReasonDiskRejected
		if conflict {
			reason = decision.ReasonDiskConflict
		}
		if p.Status != nil && (p.Status.Phase != schema.PhaseFailed || p.Status.Reason != reason || (p.Status.Server == nil) != (srv == nil)) {
			t.Errorf("DiskRejected status %+v", p.Status)
		}
		if p.Status == nil && vm.Status().Reason != reason {
			t.Errorf("DiskRejected writes no status for a VM whose status says %s", vm.Status().Reason)
		}
	}
}

// fuzzWaitReasons are the reasons a fuzzed server waits for, by the bits 3 and 4 of the
// resize state's argument; bit 5 says it has a node and an address, bit 6 that an ended one
// lingers (Server.Lingers), and bit 7 with it that the backend names what keeps it running,
// without it that admission gave the server fuzzAdmitted (Server.AdmittedTolerations).
var fuzzWaitReasons = []backend.WaitReason{"", backend.WaitUnschedulable, backend.WaitImage, "SomethingElse"}

// fuzzWhere sets why srv waits (with message, since the server's Since or now) and where it
// runs, from the bits of bits above the resize state's.
func fuzzWhere(srv *backend.Server, bits uint8, message string) {
	if r := fuzzWaitReasons[int(bits>>3)%len(fuzzWaitReasons)]; r != "" {
		srv.Waiting = backend.Waiting{Reason: r, Message: message, Since: srv.Since}
	}
	if bits&(1<<5) != 0 {
		srv.Node, srv.IP = srv.Name+"-node", "10.0.0.1"
	}
	if bits&(1<<6) != 0 && (srv.State == backend.StateStopped || srv.State == backend.StateFailed) {
		srv.Lingers = true
		if bits&(1<<7) != 0 {
			srv.KeptBy = []string{"istio-proxy"}
		}
	} else if bits&(1<<7) != 0 {
		srv.AdmittedTolerations = fuzzAdmitted
	}
}

// fuzzAdmitted is the toleration admission gives a fuzzed server: that of the big host's
// taint (fuzzHosts), which its placement may not have.
var fuzzAdmitted = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "vms", Effect: corev1.TaintEffectNoSchedule}}

// whereBits are the bits fuzzWhere reads back as srv's wait and place.
func whereBits(srv *backend.Server) uint8 {
	b := uint8(slices.Index(fuzzWaitReasons, srv.Waiting.Reason)) << 3
	if srv.Node != "" || srv.IP != "" {
		b |= 1 << 5
	}
	if srv.Lingers {
		b |= 1 << 6
	}
	if len(srv.KeptBy) > 0 || len(srv.AdmittedTolerations) > 0 {
		b |= 1 << 7
	}
	return b
}

// checkKstatus holds the status to kstatus's rules: Reconciling and Stalled only while True,
// never both, each at the status's generation; a stuck reason only for a pending server
// that waits for it; Stalled for it only past --stalled-after; a VM on its way (Creating,
// Terminating) either Reconciling or Stalled; a VM as its spec asks (Active with nothing under
// way, Inactive without a server) neither.
func checkKstatus(fail func(string, ...any), p decision.Policy, current schema.Status, srv *backend.Server, plan decision.Plan, st *schema.Status) {
	reconciling, stalled := st.Condition(schema.ConditionReconciling), st.Condition(schema.ConditionStalled)
	for _, c := range []*schema.Condition{reconciling, stalled} {
		if c != nil && (c.Status != schema.ConditionTrue || c.ObservedGeneration != st.ObservedGeneration || c.Reason == "") {
			fail("kstatus condition %+v not True at the status's generation", *c)
		}
	}
	if reconciling != nil && stalled != nil {
		fail("both Reconciling and Stalled")
	}
	switch st.Phase {
	case schema.PhaseCreating, schema.PhaseTerminating:
		if reconciling == nil && stalled == nil {
			fail("phase %s neither Reconciling nor Stalled", st.Phase)
		}
	case schema.PhaseActive:
		if stalled == nil && reconciling != nil && st.Condition(schema.ConditionResizing) == nil && st.Condition(schema.ConditionDiskResizing) == nil {
			fail("Active and Reconciling with nothing under way")
		}
	case schema.PhaseInactive:
		if st.Reason == decision.ReasonServerStopped && (reconciling != nil || stalled != nil) {
			fail("Inactive without a server, yet Reconciling or Stalled")
		}
	}
	if st.Reason == decision.ReasonUnschedulable || st.Reason == decision.ReasonImagePullFailing {
		want := map[string]backend.WaitReason{decision.ReasonUnschedulable: backend.WaitUnschedulable, decision.ReasonImagePullFailing: backend.WaitImage}[st.Reason]
		if st.Phase != schema.PhaseCreating || srv == nil || srv.State != backend.StatePending || srv.Waiting.Reason != want || plan.Server != nil {
			fail("%s for a server that does not wait for it: %+v", st.Reason, srv)
		}
		if stalled != nil && (srv == nil || now.Before(waitBegan(current, st.Reason, srv).Add(p.StalledAfter))) {
			fail("Stalled for %s before --stalled-after has passed", st.Reason)
		}
		if srv != nil && srv.Waiting.Since.IsZero() && current.Reason != st.Reason {
			// A wait the backend does not date is counted from the status that first
			// reports it, whose Ready condition says when.
			if c := st.Condition(schema.ConditionReady); c == nil || !c.LastTransitionTime.Equal(now) {
				fail("first report of a wait of no known start: Ready %+v, want its transition time now", c)
			}
		}
	}
}

// waitBegan is when srv began to wait for the VM's reason as the decision may know it: the
// backend's time, else the transition time of the Ready condition of a current status that
// reports this wait of this server already, else now.
func waitBegan(current schema.Status, reason string, srv *backend.Server) time.Time {
	if !srv.Waiting.Since.IsZero() {
		return srv.Waiting.Since
	}
	c := current.Condition(schema.ConditionReady)
	if current.Reason == reason && current.Server != nil && current.Server.ID == srv.ID && c != nil &&
		c.Status == schema.ConditionFalse && c.Reason == reason && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime
	}
	return now
}

// checkClaimed holds the status to ClaimedServer's word, on which the next decision tells a
// server gone by someone else's hand (ServerMissing) from one gone by the controller's: a
// server the plan leaves there, running or on its way, is claimed; one the plan deletes, one
// being deleted and one that ended are not, but for a server on a node that does not answer
// while the VM should run (NodeLost in phase Unknown: its going is news). A status whose
// reason says nothing of the server (an invalid spec, another's disk) or one being evicted
// under Replace (eviction.go) claims none.
func checkClaimed(fail func(string, ...any), srv *backend.Server, plan decision.Plan, st *schema.Status) {
	claimed := decision.ClaimedServer(*st)
	lostRunning := st.Reason == decision.ReasonNodeLost && st.Phase == schema.PhaseUnknown
	switch {
	case plan.Server != nil && plan.Server.Op == decision.CreateServer:
		// Named by the apply step (Plan.Created).
	case plan.Server != nil && plan.Server.Op == decision.DeleteServer, srv != nil && srv.Deleting:
		if claimed != "" && !lostRunning {
			fail("status claims server %s, which is being deleted", claimed)
		}
	case srv == nil || srv.Name == "" || st.Server == nil || st.Server.Name != srv.Name:
	case srv.State == backend.StateFailed || srv.State == backend.StateStopped:
		if claimed != "" {
			fail("status claims server %s, which ended", claimed)
		}
	case st.Reason == decision.ReasonInvalidSpec || st.Reason == decision.ReasonDiskConflict || st.Reason == decision.ReasonServerEvicted:
		if claimed != "" {
			fail("status %s claims server %s", st.Reason, claimed)
		}
	case claimed != srv.Name:
		fail("status %s %s does not claim server %s, which stays (ClaimedServer)", st.Phase, st.Reason, srv.Name)
	}
}

// refusalReasons are the reasons of the statuses that refuse a VM's spec, disk or server,
// which keep the record of the stopped status they replace (decision.ConditionRefusedWhileStopped).
var refusalReasons = []string{decision.ReasonInvalidSpec, decision.ReasonDiskRejected, decision.ReasonDiskConflict, decision.ReasonServerRejected}

// stoppedOnRequest reports whether vm's status says it was stopped on request (Stopped, or
// Stopping while the stop's deletion is under way; or a refusal's record of either) under a
// run strategy that heeds requests, and so is to get no server until a start request.
func stoppedOnRequest(vm schema.VirtualMachine) bool {
	spec, errs := vm.Spec()
	if len(errs) > 0 || spec.RunStrategy == schema.RunAlways || spec.RunStrategy == schema.RunHalted {
		return false
	}
	st := vm.Status()
	reason := st.Reason
	if c := st.Condition(decision.ConditionRefusedWhileStopped); c != nil && c.Status == schema.ConditionTrue && slices.Contains(refusalReasons, reason) {
		reason = c.Reason
	}
	return reason == decision.ReasonStopped || reason == decision.ReasonStopping
}

// newStart reports whether vm carries a start request its status has not recorded.
func newStart(vm schema.VirtualMachine) bool {
	start := vm.StartRequested()
	return start.Value != "" && start.Value != vm.Status().StartRequestedAt
}

// checkStoppedKept checks that a VM stopped on request (stoppedOnRequest) stays stopped
// through a refusal: its disk refused (DiskRejected, DiskConflict), a start's server refused
// (ServerRejected), its spec made invalid (memory 100m, then back as it was). Once the refusal
// is lifted, the decision made on the refusal's status gives it no server without a newer
// start request (checkPlan).
func checkStoppedKept(t *testing.T, policy decision.Policy, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk, hosts *backend.Hosts, why string) {
	t.Helper()
	if !stoppedOnRequest(vm) || vm.Paused() || vm.Deleting() {
		return
	}
	lifted := func(refusal string, w world, spec string) {
		t.Helper()
		if w.gone {
			return
		}
		if spec != "" {
			w.vm = patchVM(t, w.vm, spec)
		}
		p := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Disk: w.disk, Budget: w.budget, Hosts: hosts, Now: now})
		if p.Server != nil && p.Server.Op == decision.CreateServer && !newStart(w.vm) {
			t.Errorf("a VM stopped on request gets a server once %s is lifted, without a newer start request\nVM: %s\nrefused: %s\nplan:\n%s",
				refusal, vm.JSON(), w.vm.JSON(), renderPlan(t, p))
		}
	}
	for _, conflict := range []bool{false, true} {
		refused := policy.DiskRejected(decision.Input{VM: vm, Server: srv, Now: now}, why, conflict)
		lifted(fmt.Sprintf("a disk's refusal (conflict %v)", conflict), applyPlan(t, vm, srv, disk, refused), "")
	}
	if srv == nil {
		lifted("a server's refusal", applyPlan(t, vm, nil, disk, policy.Rejected(decision.Input{VM: vm, Disk: disk, Now: now}, why)), "")
	}
	f := vm.Fields()
	gen := vm.Generation()
	invalid := patchVM(t, vm, patchAt(t, map[string]any{"metadata": map[string]any{"generation": gen + 1}}, f.Memory, "100m"))
	if _, errs := invalid.Spec(); len(errs) == 0 {
		t.Fatalf("memory 100m is a valid spec: %s", invalid.JSON())
	}
	memory, _ := vm.Spec()
	p := policy.Decide(decision.Input{VM: invalid, Server: srv, Disk: disk, Hosts: hosts, Now: now})
	lifted("an invalid spec", applyPlan(t, invalid, srv, disk, p),
		patchAt(t, map[string]any{"metadata": map[string]any{"generation": gen + 2}}, f.Memory, memory.Memory.String()))
}

// patchAt is the JSON merge patch base with value set at the dotted path.
func patchAt(t *testing.T, base map[string]any, path string, value any) string {
	t.Helper()
	keys := strings.Split(path, ".")
	m := base
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = value
	b, err := json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startCarried reports whether st, the status a plan for vm writes, records vm's new start
// request (newStart) as the request that plan acts on: under a run strategy that heeds
// requests (under Always and Halted a request is recorded and nothing more), and not as
// overtaken by a newer stop (of two new requests the later wins, a tie the stop).
func startCarried(vm schema.VirtualMachine, st schema.Status) bool {
	spec, errs := vm.Spec()
	if len(errs) > 0 || vm.Deleting() || spec.RunStrategy == schema.RunAlways || spec.RunStrategy == schema.RunHalted {
		return false
	}
	start := vm.StartRequested()
	if !newStart(vm) || st.StartRequestedAt != start.Value {
		return false
	}
	return !newStop(vm) || start.At.After(vm.StopRequested().At)
}

// carriesStart reports whether plan, which records a start request, carries it out: it
// creates a server, keeps the live one there is (a start of a running VM changes nothing),
// or leaves the VM on its way to one (phase Creating: its disk made or waited for first, a
// server being replaced), or a failed server's replacement waiting out its backoff (under
// RerunOnFailure: the server deleted during the backoff). Not a refusal: the refusal makes
// no server, and a start recorded there would never be carried out.
func carriesStart(srv *backend.Server, plan decision.Plan, st schema.Status) bool {
	if slices.Contains(refusalReasons, st.Reason) {
		return false
	}
	switch {
	case serverOp(plan) == decision.CreateServer, st.Phase == schema.PhaseCreating:
		return true
	case srv != nil && !srv.Deleting && serverOp(plan) != decision.DeleteServer:
		return srv.State != backend.StateStopped && srv.State != backend.StateFailed
	}
	return st.Reason == decision.ReasonServerFailed && !st.NextRetryTime.IsZero()
}

// wantsNoServer reports whether vm, whose spec (valid or not) reads as spec, is to have no
// server: its run strategy is Halted, or under one that heeds requests it carries a new stop
// request that wins over a new start (the later one; a tie goes to the stop).
func wantsNoServer(vm schema.VirtualMachine, spec schema.Spec) bool {
	switch spec.RunStrategy {
	case schema.RunHalted:
		return true
	case schema.RunRerunOnFailure, schema.RunOnce, schema.RunManual:
		return newStop(vm) && !(newStart(vm) && vm.StartRequested().At.After(vm.StopRequested().At))
	}
	return false
}

// newStop reports whether vm carries a stop request its status has not recorded.
func newStop(vm schema.VirtualMachine) bool {
	stop := vm.StopRequested()
	return stop.Value != "" && stop.Value != vm.Status().StopRequestedAt
}

// growsNext reports whether next, decided on what plan left, is the growth of the disk that
// plan changed the owner or mark of without growing it: a plan that may follow another
// (holdsNext is the other).
func growsNext(plan, next decision.Plan) bool {
	a, b := plan.Disk, next.Disk
	return a != nil && b != nil && (a.Op == decision.AdoptDisk || a.Op == decision.ReleaseDisk) && b.Op == decision.ExpandDisk &&
		b.Spec.Size.Cmp(a.Spec.Size) > 0 && next.Server == nil
}
