//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The room check on the local cluster: before the controller replaces a running server for a
// change of its spec, it asks whether any node the next server's placement admits offers the
// cpu and memory asked; where none does, the server is kept, with RestartRequired
// (ResizeNoRoom). Each test has nodes of its own: "big" (128 cpu, more than any other node)
// and "small" (32, as every other node), of one group, and runs its controller under
// --resize replace, where a change of cpu replaces the server.

// roomVMs makes the VMs of a room test, placed as placements says (a VM's name to its
// placement), and waits until each is Active; it returns each one's server UID.
func roomVMs(t *testing.T, ns string, placements map[string]string) map[string]string {
	t.Helper()
	uids := map[string]string{}
	for vm, p := range placements {
		placementVM(t, ns, vm, p, "")
	}
	for vm := range placements {
		waitPhase(t, ns, vm, "Active", "ServerReady", 2*time.Minute)
		uids[vm] = field(ns, "pod/"+vm+"-server", ".metadata.uid")
	}
	return uids
}

// growKept raises vm's cpu to 64 and waits for RestartRequired, which the decision that keeps
// the server writes (a replacement would have been decided instead); the message must say
// each of says, and the server must be the one it was (uid).
func growKept(t *testing.T, ns, vm, uid string, says ...string) {
	t.Helper()
	kubectl(t, "patch", vmRes, vm, "-n", ns, "--type", "merge", "-p", `{"spec":{"resource":{"cpu":"64"}}}`)
	eventually(t, 2*time.Minute, func() (bool, string) {
		c := condition(ns, vm, "RestartRequired")
		return c == "True/ResizeNoRoom", vm + " RestartRequired " + c
	})
	msg := vmField(ns, vm, `.status.conditions[?(@.type=="RestartRequired")].message`)
	for _, want := range says {
		if !strings.Contains(msg, want) {
			t.Errorf("%s: RestartRequired message %q, want it to say %q", vm, msg, want)
		}
	}
	if got := field(ns, "pod/"+vm+"-server", ".metadata.uid"); got != uid {
		t.Errorf("%s: server %s replaced by %s, want it kept", vm, uid, got)
	}
}

// growReplaced raises vm's cpu to 64 and waits for the next server, which must run on node
// with that cpu, and the VM Active without RestartRequired.
func growReplaced(t *testing.T, ns, vm, uid, node string) {
	t.Helper()
	kubectl(t, "patch", vmRes, vm, "-n", ns, "--type", "merge", "-p", `{"spec":{"resource":{"cpu":"64"}}}`)
	newServer(t, ns, vm, uid)
	waitPhase(t, ns, vm, "Active", "ServerReady", 2*time.Minute)
	if got := field(ns, "pod/"+vm+"-server", ".spec.nodeName}/{.spec.containers[0].resources.limits.cpu"); got != node+"/64" {
		t.Errorf("%s: server on node/cpu %q, want %s/64", vm, got, node)
	}
	if c := condition(ns, vm, "RestartRequired"); c != "" {
		t.Errorf("%s: RestartRequired %q after the replacement, want none", vm, c)
	}
}

// roomNodes makes the big and the small node of a room test, of one group.
func roomNodes(t *testing.T) (group, big, small string) {
	t.Helper()
	group = "room-" + randomSuffix(t)
	big = newNode(t, nodeSpec{CPU: "128", Labels: map[string]string{"placement.e2e.cloudnative.czs/group": group, roomSize: "big"}})
	small = newNode(t, nodeSpec{Labels: map[string]string{"placement.e2e.cloudnative.czs/group": group, roomSize: "small"}})
	return group, big, small
}

// roomSize is the label that tells the big node from the small one.
const roomSize = "room.e2e.cloudnative.czs/size"

// TestRoomHonoursPlacement: a VM placed on the small node by a label, its cpu raised to 64, is
// kept, though the big node has the room: its placement does not admit that node. A VM placed
// on the group is replaced onto the big node.
func TestRoomHonoursPlacement(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	group, big, small := roomNodes(t)
	startController(t, ns, "--resize", "replace").waitReady(t)
	onSmall := fmt.Sprintf("    nodeSelector: {placement.e2e.cloudnative.czs/group: %s, %s: small}\n    tolerations:\n    - {key: %s, operator: Exists, effect: NoSchedule}\n",
		group, roomSize, privateTaint)
	uids := roomVMs(t, ns, map[string]string{"onsmall": onSmall, "anywhere": ownNodes(group)})
	if got := serverNode(ns, "onsmall"); got != small {
		t.Fatalf("onsmall's server on node %q, want %s", got, small)
	}
	growKept(t, ns, "onsmall", uids["onsmall"], "among the nodes the VM's placement admits (", "no node has allocatable cpu 64 (the largest has 32)")
	growReplaced(t, ns, "anywhere", uids["anywhere"], big)
}

// TestRoomHonoursCordon: with the big node cordoned (before the controller starts, so that its
// first list of the nodes has the cordon), a VM of the group that does not tolerate the
// cordon is kept; one that tolerates it (node.kubernetes.io/unschedulable) is replaced onto
// the big node, as the scheduler places it.
func TestRoomHonoursCordon(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	group, big, _ := roomNodes(t)
	kubectl(t, "cordon", big)
	startController(t, ns, "--resize", "replace").waitReady(t)
	tolerant := ownNodes(group) + "    - {key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}\n"
	uids := roomVMs(t, ns, map[string]string{"cordoned": ownNodes(group), "tolerant": tolerant})
	growKept(t, ns, "cordoned", uids["cordoned"], "among the nodes the VM's placement admits (", "no node has allocatable cpu 64 (the largest has 32)")
	growReplaced(t, ns, "tolerant", uids["tolerant"], big)
}

// TestRoomCountsAdmittedTolerations: admission gives the servers of the test's namespace the
// toleration of its nodes' private taint (a MutatingAdmissionPolicy, as a namespace's default
// tolerations or a mutating webhook would), which the VM's placement does not list. Its cpu
// raised to 64, the server is replaced onto the big node: the room check counts the
// tolerations the running server was given, which admission gives the next one too.
func TestRoomCountsAdmittedTolerations(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	group, big, _ := roomNodes(t)
	admitToleration(t, ns, privateTaint)
	startController(t, ns, "--resize", "replace").waitReady(t)
	uids := roomVMs(t, ns, map[string]string{"admitted": fmt.Sprintf("    nodeSelector: {placement.e2e.cloudnative.czs/group: %s}\n", group)})
	if got := field(ns, "pod/admitted-server", `.spec.tolerations[?(@.key=="`+privateTaint+`")].operator`); got != "Exists" {
		t.Fatalf("the server's toleration of %s: operator %q, want the one admission gave (Exists)", privateTaint, got)
	}
	growReplaced(t, ns, "admitted", uids["admitted"], big)
}

// TestRoomLeavesOutChangedTolerations: the big node carries a taint the VM's placement does
// not tolerate, and a person adds its toleration to the running server's pod (kubectl patch),
// which the next server would not get. Its cpu raised to 64, the server is kept
// (ResizeNoRoom), saying that its tolerations were not counted: the room check counts none of
// a server's tolerations once someone other than the controller changed them (they are owned
// by kubectl-patch's managedFields entry then), where counting them ended the server for one
// that stayed Unschedulable.
func TestRoomLeavesOutChangedTolerations(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	group := "room-" + randomSuffix(t)
	const handTaint = "room.e2e.cloudnative.czs/by-hand"
	newNode(t, nodeSpec{CPU: "128", Labels: map[string]string{"placement.e2e.cloudnative.czs/group": group, roomSize: "big"},
		Taints: []string{handTaint + "=yes:NoSchedule"}})
	newNode(t, nodeSpec{Labels: map[string]string{"placement.e2e.cloudnative.czs/group": group, roomSize: "small"}})
	c := startController(t, ns, "--resize", "replace", "--workers", "1")
	c.waitReady(t)
	uids := roomVMs(t, ns, map[string]string{"patched": ownNodes(group)})
	kubectl(t, "-n", ns, "patch", "pod", "patched-server", "--type=json", "-p",
		fmt.Sprintf(`[{"op":"add","path":"/spec/tolerations/-","value":{"key":%q,"operator":"Equal","value":"yes","effect":"NoSchedule"}}]`, handTaint))
	if got := tolerationsOwners(t, ns, "patched-server"); got != "kubectl-patch" {
		t.Fatalf("the server pod's tolerations are owned by %q in its managedFields, want kubectl-patch alone", got)
	}
	c.barrier(t) // the controller has seen the pod patched
	growKept(t, ns, "patched", uids["patched"], "not its server's, which were changed after it was made",
		"no node has allocatable cpu 64 (the largest has 32)")
}

// tolerationsOwners names the field managers that own spec.tolerations of pod in ns, by its
// managedFields, separated by commas.
func tolerationsOwners(t *testing.T, ns, pod string) string {
	t.Helper()
	var p struct {
		Metadata struct {
			ManagedFields []struct {
				Manager  string          `json:"manager"`
				FieldsV1 json.RawMessage `json:"fieldsV1"`
			} `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(kubectl(t, "-n", ns, "get", "pod", pod, "-o", "json", "--show-managed-fields")), &p); err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, e := range p.Metadata.ManagedFields {
		if strings.Contains(string(e.FieldsV1), `"f:tolerations"`) {
			owners = append(owners, e.Manager)
		}
	}
	return strings.Join(owners, ",")
}

// admitToleration has admission give every pod created in ns a toleration of the taint key
// (any value, NoSchedule), as a namespace's default tolerations or a mutating webhook would
// (mutatePods), and returns once it does.
func admitToleration(t *testing.T, ns, key string) {
	t.Helper()
	toleration := fmt.Sprintf(`Object.spec.tolerations{key: %q, operator: "Exists", effect: "NoSchedule"}`, key)
	mutatePods(t, ns, "toleration", fmt.Sprintf(`  - patchType: JSONPatch
    jsonPatch:
      expression: >-
        has(object.spec.tolerations)
        ? [JSONPatch{op: "add", path: "/spec/tolerations/-", value: %[1]s}]
        : [JSONPatch{op: "add", path: "/spec/tolerations", value: [%[1]s]}]
`, toleration), `{.spec.tolerations[?(@.key=="`+key+`")].operator}`, "Exists")
}
