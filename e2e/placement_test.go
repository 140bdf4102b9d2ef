//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The placement tests: spec.placement honoured by the real scheduler on labelled and tainted
// kwok nodes of the test's own, a placement no node satisfies left waiting with the
// scheduler's reason, a migration on request (the annotation kubectl vm migrate writes) that
// moves a VM to another node with the same claim, its refusals, and a VM whose node is lost.
// Each test's VM tolerates only its own nodes' private taint and selects them by a label of
// its own, so no other test's pods share them and the shared nodes never take its server.

// placementVM applies a VM of name in ns whose placement is the given YAML (two-space
// indented, under placement:), and more spec lines (under spec:).
func placementVM(t *testing.T, ns, name, placement, more string) {
	t.Helper()
	apply(t, fmt.Sprintf(`apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: %s, namespace: %s}
spec:
  action: active
  resource: {cpu: 1, memory: 64Mi, rootDisk: 1Gi}
  placement:
%s%s`, name, ns, placement, more))
}

// ownNodes is the part of a placement that lets the server onto the test's nodes (their
// private taint tolerated) and only there (the label group=value, which only they carry).
func ownNodes(group string) string {
	return fmt.Sprintf(`    nodeSelector: {placement.e2e.cloudnative.czs/group: %s}
    tolerations:
    - {key: %s, operator: Exists, effect: NoSchedule}
`, group, privateTaint)
}

// onTwoNodes makes two nodes of the test's own, starts a controller in ns (with args) and a VM
// "vm" placed on those nodes only, waits until it is Active, and returns the controller, the
// node its server runs on and the other one.
func onTwoNodes(t *testing.T, ns string, args ...string) (c *controller, on, other string) {
	t.Helper()
	group := "two-" + randomSuffix(t)
	labels := map[string]string{"placement.e2e.cloudnative.czs/group": group}
	a, b := newNode(t, nodeSpec{Labels: labels}), newNode(t, nodeSpec{Labels: labels})
	c = startController(t, ns, args...)
	c.waitReady(t)
	placementVM(t, ns, "vm", ownNodes(group), "")
	waitPhase(t, ns, "vm", "Active", "ServerReady", 2*time.Minute)
	on = serverNode(ns, "vm")
	other = map[string]string{a: b, b: a}[on]
	if other == "" {
		t.Fatalf("server on node %q, want one of the test's %s, %s", on, a, b)
	}
	return c, on, other
}

// activeOn waits until the VM "vm" has a server other than old, Active on node, with the
// same claim as before (claim), after what happened (for the errors).
func activeOn(t *testing.T, ns, old, node, claim, after string, timeout time.Duration) {
	t.Helper()
	newServer(t, ns, "vm", old)
	waitPhase(t, ns, "vm", "Active", "ServerReady", timeout)
	if got := serverNode(ns, "vm"); got != node {
		t.Errorf("server on node %q after %s, want %s", got, after, node)
	}
	if got := claimUID(ns, "vm"); got != claim {
		t.Errorf("claim %q after %s, want the same %s", got, after, claim)
	}
}

// migrateRefused runs `kubectl vm migrate vm` and checks that it is refused, with why on
// stderr, and that it wrote nothing to the VM.
func migrateRefused(t *testing.T, ns, why string) {
	t.Helper()
	before := vmField(ns, "vm", ".metadata.resourceVersion")
	if _, errOut, err := kubectlVM(t, "migrate", "vm", "-n", ns); err == nil || !strings.Contains(errOut, why) {
		t.Errorf("kubectl vm migrate: err %v, stderr %q; want a refusal saying %q", err, errOut, why)
	}
	if after := vmField(ns, "vm", ".metadata.resourceVersion"); after != before {
		t.Errorf("the refused migrate wrote the VM: resourceVersion %s, then %s", before, after)
	}
}

// serverNode is the node of the VM's server pod ("" while it has none).
func serverNode(ns, vm string) string { return field(ns, "pod/"+vm+"-server", ".spec.nodeName") }

// TestPlacementHonoured: the scheduler places the server by the VM's node selector and
// tolerations. A running VM's placement changed to one that no node admits (a taint not
// tolerated) keeps its server, with RestartRequired (ResizeNoRoom) saying so: its replacement
// could start nowhere. A new VM of that placement has no server to keep: its server waits
// with the scheduler's reason on the pod (PodScheduled False, Unschedulable) and in the VM's
// message, which stays Creating. Tolerating the taint lets the first VM's next server onto the
// node. Each change that moves the server replaces it, and the claim stays the same.
func TestPlacementHonoured(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	group := "honoured-" + randomSuffix(t)
	ssd := newNode(t, nodeSpec{Labels: map[string]string{"placement.e2e.cloudnative.czs/group": group, "disktype": "ssd"}})
	hdd := newNode(t, nodeSpec{Labels: map[string]string{"placement.e2e.cloudnative.czs/group": group, "disktype": "hdd"},
		Taints: []string{"dedicated=vms:NoSchedule"}})
	startController(t, ns).waitReady(t)

	tolerateOwn := fmt.Sprintf("    - {key: %s, operator: Exists, effect: NoSchedule}\n", privateTaint)
	withDisk := func(disk, extra string) string {
		return fmt.Sprintf("    nodeSelector: {placement.e2e.cloudnative.czs/group: %s, disktype: %s}\n    tolerations:\n%s%s", group, disk, tolerateOwn, extra)
	}
	placementVM(t, ns, "vm", withDisk("ssd", ""), "")
	waitPhase(t, ns, "vm", "Active", "ServerReady", 2*time.Minute)
	if got := serverNode(ns, "vm"); got != ssd {
		t.Fatalf("server on node %q, want the ssd node %s", got, ssd)
	}
	if got := field(ns, "pod/vm-server", ".spec.nodeSelector.disktype"); got != "ssd" {
		t.Errorf("pod nodeSelector disktype %q, want ssd", got)
	}
	claim := claimUID(ns, "vm")
	server := field(ns, "pod/vm-server", ".metadata.uid")

	// hdd, without tolerating the hdd node's taint: no node admits it. The server that runs
	// is kept (the condition is written by the decision that keeps it: a replacement would
	// have been decided instead).
	kubectl(t, "-n", ns, "patch", vmRes, "vm", "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"placement":{"nodeSelector":{"disktype":"hdd","placement.e2e.cloudnative.czs/group":%q}}}}`, group))
	eventually(t, 2*time.Minute, func() (bool, string) {
		c := condition(ns, "vm", "RestartRequired")
		return c == "True/ResizeNoRoom", "RestartRequired " + c
	})
	if msg := vmField(ns, "vm", `.status.conditions[?(@.type=="RestartRequired")].message`); !strings.Contains(msg, "the VM's placement admits no node") {
		t.Errorf("RestartRequired message %q, want it to say that the placement admits no node", msg)
	}
	if got := field(ns, "pod/vm-server", ".metadata.uid"); got != server {
		t.Errorf("server %s replaced by %s for a placement no node admits, want it kept", server, got)
	}
	if phase, reason := vmField(ns, "vm", ".status.phase"), vmField(ns, "vm", ".status.reason"); phase != "Active" || reason != "ServerReady" {
		t.Errorf("VM %s/%s with its server kept, want Active/ServerReady", phase, reason)
	}

	// A new VM of that placement: its server waits, with the scheduler's reason.
	placementVM(t, ns, "new", withDisk("hdd", ""), "")
	eventually(t, 2*time.Minute, func() (bool, string) {
		cond := field(ns, "pod/new-server", `.status.conditions[?(@.type=="PodScheduled")].status}/{.status.conditions[?(@.type=="PodScheduled")].reason`)
		return cond == "False/Unschedulable", "pod PodScheduled " + cond
	})
	eventually(t, time.Minute, func() (bool, string) {
		msg := vmField(ns, "new", ".status.message")
		return strings.Contains(msg, "untolerated taint"), "VM message " + msg
	})
	if phase, reason := vmField(ns, "new", ".status.phase"), vmField(ns, "new", ".status.reason"); phase != "Creating" || reason != "Unschedulable" {
		t.Errorf("VM %s/%s while no node satisfies its placement, want Creating/Unschedulable", phase, reason)
	}
	if got := serverNode(ns, "new"); got != "" {
		t.Errorf("server on node %q, want none", got)
	}

	// Tolerate it: the server goes onto the hdd node.
	kubectl(t, "-n", ns, "patch", vmRes, "vm", "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"placement":{"tolerations":[{"key":%q,"operator":"Exists","effect":"NoSchedule"},{"key":"dedicated","operator":"Equal","value":"vms","effect":"NoSchedule"}]}}}`, privateTaint))
	activeOn(t, ns, server, hdd, claim, "the placement changes", 2*time.Minute)
}

// TestMigrateOnRequest: `kubectl vm migrate` (the migrate annotation) moves an Active VM to the other of the test's
// two nodes: the server is deleted, the next one starts elsewhere (the pod avoids the node it
// left), with the same claim; status.migration says Succeeded from one node to the other, and
// a Migrated Event says so. The server pod's name is the VM's, so two can never exist at once.
// A second look at the same value changes nothing; a VM that is not running is refused.
func TestMigrateOnRequest(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c, from, to := onTwoNodes(t, ns, "--workers", "1") // one worker, for the barrier
	claim := claimUID(ns, "vm")
	server := field(ns, "pod/vm-server", ".metadata.uid")

	// The plugin's verb writes the request (the annotation, with the time).
	if out := mustVM(t, "migrate", "vm", "-n", ns); !strings.Contains(out, "migration requested from node "+from) {
		t.Errorf("kubectl vm migrate printed %q, want the request from node %s", out, from)
	}
	activeOn(t, ns, server, to, claim, "the migration", 2*time.Minute)
	eventually(t, time.Minute, func() (bool, string) {
		m := vmField(ns, "vm", ".status.migration.phase}/{.status.migration.sourceNode}/{.status.migration.targetNode")
		return m == "Succeeded/"+from+"/"+to, "status.migration " + m
	})
	if got := field(ns, "pod/vm-server", `.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].values[0]`); got != from {
		t.Errorf("new server avoids node %q, want %s", got, from)
	}
	if n, notes := occurrences(t, ns, "vm", "Migrated"); n != 1 {
		t.Errorf("Migrated occurred %d times (%q), want once", n, notes)
	}

	// The same value again (a barrier after it): nothing moves.
	server = field(ns, "pod/vm-server", ".metadata.uid")
	c.barrier(t)
	if got := field(ns, "pod/vm-server", ".metadata.uid"); got != server {
		t.Errorf("server %s replaced after the migration was done, by %s", server, got)
	}

	// Not running: the plugin refuses with one line and writes nothing; the annotation
	// written by hand is refused by the controller, recorded, and nothing else changes.
	kubectl(t, "-n", ns, "patch", vmRes, "vm", "--type=merge", "-p", `{"spec":{"action":"inactive"}}`)
	waitPhase(t, ns, "vm", "Inactive", "ServerStopped", 2*time.Minute)
	migrateRefused(t, ns, "is not running")
	kubectl(t, "-n", ns, "annotate", vmRes, "vm", "cloudnative.czs/migrateRequestedAt=2026-06-01T12:05:00Z", "--overwrite")
	eventually(t, time.Minute, func() (bool, string) {
		m := vmField(ns, "vm", ".status.migration.phase}/{.status.migration.message")
		return strings.HasPrefix(m, "Refused/") && strings.Contains(m, "not running"), "status.migration " + m
	})
	if n, notes := occurrences(t, ns, "vm", "MigrationRefused"); n != 1 {
		t.Errorf("MigrationRefused occurred %d times (%q), want once", n, notes)
	}
	if phase := vmField(ns, "vm", ".status.phase"); phase != "Inactive" {
		t.Errorf("phase %q after a refused migration, want Inactive", phase)
	}
}

// TestMigrateNoOtherNodeRefused: a VM whose placement admits one node only is asked to move.
// `kubectl vm migrate` refuses, naming the placement, and writes nothing; the annotation
// written by hand is refused by the controller too, which sees the same nodes: the
// migration Refused with why, one Warning MigrationRefused, and the server runs on where it
// is (the same pod), never deleted for a next one that no node would take.
func TestMigrateNoOtherNodeRefused(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	group := "one-" + randomSuffix(t)
	node := newNode(t, nodeSpec{Labels: map[string]string{"placement.e2e.cloudnative.czs/group": group}})
	c := startController(t, ns, "--workers", "1") // one worker, for the barrier
	c.waitReady(t)
	placementVM(t, ns, "vm", ownNodes(group), "")
	waitPhase(t, ns, "vm", "Active", "ServerReady", 2*time.Minute)
	server := field(ns, "pod/vm-server", ".metadata.uid")

	migrateRefused(t, ns, "that its placement admits")
	kubectl(t, "-n", ns, "annotate", vmRes, "vm", "cloudnative.czs/migrateRequestedAt=2026-06-01T12:05:00Z", "--overwrite")
	eventually(t, 2*time.Minute, func() (bool, string) {
		m := vmField(ns, "vm", ".status.migration.phase}/{.status.migration.message")
		return strings.HasPrefix(m, "Refused/") && strings.Contains(m, "admits no node other than "+node), "status.migration " + m
	})
	c.barrier(t)
	if got := field(ns, "pod/vm-server", ".metadata.uid"); got != server {
		t.Errorf("server %s replaced by %s after a refused migration, want it kept", server, got)
	}
	if got := serverNode(ns, "vm"); got != node {
		t.Errorf("server on node %q after a refused migration, want %s", got, node)
	}
	if n, notes := occurrences(t, ns, "vm", "MigrationRefused"); n != 1 || !strings.Contains(notes, "admits no node other than "+node) {
		t.Errorf("MigrationRefused occurred %d times (%q), want once, saying no other node admits the VM", n, notes)
	}
	if phase := vmField(ns, "vm", ".status.phase"); phase != "Active" {
		t.Errorf("phase %q after a refused migration, want Active", phase)
	}
}

// TestMigrateNowhereFails: a VM is asked to move while the one other node its placement admits
// is full (its cpu held by another pod). Neither the plugin nor the controller can tell: they
// count what nodes offer, not what runs there, which only the scheduler weighs. So the move is
// carried out: the next server finds no node (the scheduler's reason on the VM, the migration
// Moving), and once it has waited --stalled-after the move fails with a Warning, that server
// goes, and the VM runs again on the node it left, with the same claim. It never stays down
// for want of a node.
func TestMigrateNowhereFails(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	group := "full-" + randomSuffix(t)
	labels := map[string]string{"placement.e2e.cloudnative.czs/group": group}
	full := newNode(t, nodeSpec{Labels: labels})
	fillNode(t, ns, full)
	node := newNode(t, nodeSpec{Labels: labels})
	startController(t, ns, "--stalled-after", "5s").waitReady(t)
	placementVM(t, ns, "vm", ownNodes(group), "")
	waitPhase(t, ns, "vm", "Active", "ServerReady", 2*time.Minute)
	if got := serverNode(ns, "vm"); got != node {
		t.Fatalf("server on node %q, want %s (the other one is full)", got, node)
	}
	claim := claimUID(ns, "vm")
	server := field(ns, "pod/vm-server", ".metadata.uid")

	if out := mustVM(t, "migrate", "vm", "-n", ns); !strings.Contains(out, "migration requested from node "+node) {
		t.Errorf("kubectl vm migrate printed %q, want the request from node %s", out, node)
	}
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := vmField(ns, "vm", ".status.reason}/{.status.migration.phase")
		return got == "Unschedulable/Moving", "reason/migration " + got
	})
	eventually(t, 2*time.Minute, func() (bool, string) {
		m := vmField(ns, "vm", ".status.migration.phase}/{.status.migration.sourceNode}/{.status.migration.message")
		return strings.HasPrefix(m, "Failed/"+node+"/No node other than "+node), "status.migration " + m
	})
	activeOn(t, ns, server, node, claim, "the failed migration", 2*time.Minute)
	if got := field(ns, "pod/vm-server", `.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields`); got != "" {
		t.Errorf("the server after the failed move still avoids a node: %s", got)
	}
	if n, notes := occurrences(t, ns, "vm", "MigrationFailed"); n != 1 || !strings.Contains(notes, "Insufficient cpu") {
		t.Errorf("MigrationFailed occurred %d times (%q), want once, with the scheduler's word", n, notes)
	}
	if got := vmField(ns, "vm", ".status.migration.phase"); got != "Failed" {
		t.Errorf("migration %s once the VM runs again, want it still recorded Failed", got)
	}
}

// fillNode puts on node, a node of the test's own (newNode, 32 cpu), a pod of the test's that
// holds all of its cpu but half a core (room for a small pod of the cluster's own, were one
// ever placed on every node), and waits until the scheduler has placed it there: from then on
// the scheduler finds no room on node for a server of one cpu, while what the node offers (its
// allocatable) is as before.
func fillNode(t *testing.T, ns, node string) {
	t.Helper()
	apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: filler, namespace: %s}
spec:
%s  containers:
  - name: filler
    image: registry.k8s.io/pause:3.10
    resources: {requests: {cpu: 31500m}, limits: {cpu: 31500m}}
`, ns, onNode(node)))
	waitField(t, ns, "pod/filler", ".spec.nodeName", node)
}

// TestMigrateRefusedForPinnedDisk: a VM whose disk is a volume bound to its node (a static
// PersistentVolume with a required node affinity for that node, as a local volume has) is not
// moved: the migration is Refused with why, a Warning MigrationRefused is recorded, and the
// server keeps running where it is (the same pod).
func TestMigrateRefusedForPinnedDisk(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	group := "pinned-" + randomSuffix(t)
	labels := map[string]string{"placement.e2e.cloudnative.czs/group": group}
	node := newNode(t, nodeSpec{Labels: labels})
	newNode(t, nodeSpec{Labels: labels}) // another node the VM could go to, were its disk free
	class := "pinned-" + randomSuffix(t) // no StorageClass of the name: the claim binds to the static volume
	pv := staticVolume(t, ns, class, "{key: kubernetes.io/hostname, operator: In, values: ["+node+"]}")
	startController(t, ns).waitReady(t)
	placementVM(t, ns, "vm", ownNodes(group), "  rootDiskStorageClassName: "+class+"\n")
	waitPhase(t, ns, "vm", "Active", "ServerReady", 2*time.Minute)
	if got := serverNode(ns, "vm"); got != node {
		t.Fatalf("server on node %q, want %s, where its volume is", got, node)
	}
	if got := field(ns, "pvc/vm-rootdisk", ".spec.volumeName"); got != pv {
		t.Fatalf("claim bound to %q, want the pinned volume %s", got, pv)
	}
	server := field(ns, "pod/vm-server", ".metadata.uid")

	// The plugin refuses, naming the disk, and writes nothing.
	if _, errOut, err := kubectlVM(t, "migrate", "vm", "-n", ns); err == nil || !strings.Contains(errOut, "cannot follow") || !strings.Contains(errOut, pv) {
		t.Errorf("kubectl vm migrate of a VM on a pinned volume: err %v, stderr %q; want a refusal naming the volume %s", err, errOut, pv)
	}
	if got := vmField(ns, "vm", ".metadata.annotations.cloudnative\\.czs/migrateRequestedAt"); got != "" {
		t.Errorf("the refused migrate wrote the annotation %q", got)
	}
	// The same request written by hand: the controller refuses it too.
	kubectl(t, "-n", ns, "annotate", vmRes, "vm", "cloudnative.czs/migrateRequestedAt=2026-06-01T12:00:00Z")
	eventually(t, time.Minute, func() (bool, string) {
		m := vmField(ns, "vm", ".status.migration.phase}/{.status.migration.message")
		return strings.HasPrefix(m, "Refused/") && strings.Contains(m, "cannot follow") && strings.Contains(m, node), "status.migration " + m
	})
	if n, notes := occurrences(t, ns, "vm", "MigrationRefused"); n != 1 || !strings.Contains(notes, pv) {
		t.Errorf("MigrationRefused occurred %d times (%q), want once, naming the volume %s", n, notes, pv)
	}
	// The refusal is the decision's record: the same decision would have deleted the server.
	if got := field(ns, "pod/vm-server", ".metadata.uid}/{.metadata.deletionTimestamp"); got != server+"/" {
		t.Errorf("server %q after a refused migration, want %s, not being deleted", got, server)
	}
	waitPhase(t, ns, "vm", "Active", "ServerReady", time.Minute)
}

// TestNodeLost: the node of a VM's server stops answering. The VM says Unknown/NodeLost,
// naming the node and `kubectl delete node`, and no second server is started while the old
// pod exists (it is still the same pod once the VM says so). Once the node is deleted and its
// pod collected, the VM is Active on the other node with the same claim.
func TestNodeLost(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	_, lost, other := onTwoNodes(t, ns)
	claim := claimUID(ns, "vm")
	server := field(ns, "pod/vm-server", ".metadata.uid")

	loseNode(t, lost)
	waitPhase(t, ns, "vm", "Unknown", "NodeLost", 3*time.Minute)
	msg := vmField(ns, "vm", ".status.message")
	if !strings.Contains(msg, "node "+lost) || !strings.Contains(msg, "kubectl delete node "+lost) {
		t.Errorf("NodeLost message %q: want the node %s and the way out", msg, lost)
	}
	if got := field(ns, "pod/vm-server", ".metadata.uid"); got != server {
		t.Errorf("server %q while its node is lost, want the old %s: no second server", got, server)
	}

	kubectl(t, "delete", "node", lost)
	activeOn(t, ns, server, other, claim, "its node was deleted", 3*time.Minute)
}

// TestPlacementAdmission: what the CRD's schema can say of a placement it refuses at
// admission, a misspelt key among them (kubectl's strict field validation); what it cannot
// (a label key that is not one) the controller refuses: the VM is Failed/InvalidSpec with no
// server.
func TestPlacementAdmission(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	installCRDs(t)
	cases := map[string]struct {
		placement string
		want      string // in kubectl's error
	}{
		"toleration operator": {`{tolerations: [{key: k, operator: Like}]}`, `Unsupported value: "Like"`},
		"toleration effect":   {`{tolerations: [{key: k, effect: Sometimes}]}`, `Unsupported value: "Sometimes"`},
		"spread without key":  {`{topologySpreadConstraints: [{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]}`, `topologyKey: Required value`},
		"spread skew":         {`{topologySpreadConstraints: [{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]}`, `maxSkew`},
		"selector of a list":  {`{nodeSelector: [ssd]}`, `spec.placement.nodeSelector`},
		"misspelt key":        {`{nodeSelecter: {disktype: ssd}}`, `unknown field "spec.placement.nodeSelecter"`},
	}
	for name, tc := range cases {
		manifest := fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: bad, namespace: %s}\n"+
			"spec: {action: active, resource: {cpu: 1, memory: 1G, rootDisk: 1G}, placement: %s}\n", ns, tc.placement)
		_, _, err := runKubectl(manifest, "apply", "-f", "-")
		if err == nil {
			t.Errorf("%s: accepted, want refused", name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to mention %q", name, err, tc.want)
		}
	}

	startController(t, ns).waitReady(t)
	placementVM(t, ns, "badkey", "    nodeSelector: {\"bad key!\": ssd}\n", "")
	waitPhase(t, ns, "badkey", "Failed", "InvalidSpec", time.Minute)
	if msg := vmField(ns, "badkey", ".status.message"); !strings.Contains(msg, `spec.placement.nodeSelector[bad key!]`) {
		t.Errorf("message %q: want the bad label key named", msg)
	}
	if uid, _, _ := podOf(ns, "badkey"); uid != "" {
		t.Errorf("a server %s for an invalid placement", uid)
	}
}
