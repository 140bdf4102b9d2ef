//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The room check under --root-disk claim counts only the nodes the VM's disk can be reached
// from (its PersistentVolume's required node affinity), beside those its placement and the
// cordons admit: a static volume with a node affinity stands for a zonal disk and for a volume
// on its node (a local or TopoLVM one), as the scheduler's VolumeBinding filter matches either.

// staticVolume makes a PersistentVolume of 1Gi in class (a class of no StorageClass, so that
// the VM's claim of that class binds to it) whose required node affinity is the one term
// given (a match expression, as YAML flow), deleted when the test ends; it returns its name.
func staticVolume(t *testing.T, ns, class, term string) string {
	t.Helper()
	pv := "reach-" + ns
	apply(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: %s}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: %s
  hostPath: {path: /tmp/%s}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - %s
`, pv, class, pv, term))
	t.Cleanup(func() { kubectlErr("delete", "pv", pv, "--ignore-not-found", "--wait=false") })
	return pv
}

// TestMigrateRefusedZonalDiskCordoned: a VM whose disk is a zone's (its volume's node
// affinity admits the nodes of zone a), on a node of zone a whose other node is cordoned,
// while zone b has a node with room. The disk could follow to the cordoned node, and the next
// server could start on zone b's, but no node is both: `kubectl vm migrate` refuses, naming the
// disk, and writes nothing; the same request written by hand is Refused by the controller,
// saying so and naming the disk, with one Warning MigrationRefused, and the server keeps
// running (the same pod); moved, it would have waited, unschedulable, until the move gave up.
func TestMigrateRefusedZonalDiskCordoned(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	suffix := randomSuffix(t)
	group := "zonal-" + suffix
	zoneA, zoneB := "za-"+suffix, "zb-"+suffix
	in := func(zone string) map[string]string {
		return map[string]string{"placement.e2e.cloudnative.czs/group": group, "topology.kubernetes.io/zone": zone}
	}
	a1, a2 := newNode(t, nodeSpec{Labels: in(zoneA)}), newNode(t, nodeSpec{Labels: in(zoneA)})
	newNode(t, nodeSpec{Labels: in(zoneB)}) // room, out of the disk's reach
	// Before the controller starts, so that its first list of the nodes has the cordon, and
	// before the VM, so that its server goes to a1.
	kubectl(t, "cordon", a2)
	class := "zonal-" + suffix
	pv := staticVolume(t, ns, class, fmt.Sprintf("{key: topology.kubernetes.io/zone, operator: In, values: [%s]}", zoneA))
	startController(t, ns).waitReady(t)
	placementVM(t, ns, "vm", ownNodes(group), "  rootDiskStorageClassName: "+class+"\n")
	waitPhase(t, ns, "vm", "Active", "ServerReady", 2*time.Minute)
	if got := serverNode(ns, "vm"); got != a1 {
		t.Fatalf("server on node %q, want %s, the only schedulable node of the disk's zone", got, a1)
	}
	if got := field(ns, "pvc/vm-rootdisk", ".spec.volumeName"); got != pv {
		t.Fatalf("claim bound to %q, want the zonal volume %s", got, pv)
	}
	server := field(ns, "pod/vm-server", ".metadata.uid")

	// The plugin matches the nodes against the disk's reach and the next server together, as
	// the controller does, and refuses before writing (the VM's resourceVersion unchanged).
	migrateRefused(t, ns, "no other Ready node than "+a1+" that its disk vm-rootdisk can be reached from")
	// The same request written by hand: the controller refuses it too.
	kubectl(t, "-n", ns, "annotate", vmRes, "vm", "cloudnative.czs/migrateRequestedAt=2026-06-01T12:00:00Z")
	eventually(t, time.Minute, func() (bool, string) {
		m := vmField(ns, "vm", ".status.migration.phase}/{.status.migration.message")
		return strings.HasPrefix(m, "Refused/"), "status.migration " + m
	})
	msg := vmField(ns, "vm", ".status.migration.message")
	for _, want := range []string{"other than " + a1, "that its disk vm-rootdisk can be reached from", "the VM's placement admits none"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q: want it to say %q", msg, want)
		}
	}
	if n, _ := occurrences(t, ns, "vm", "MigrationRefused"); n != 1 {
		t.Errorf("MigrationRefused occurred %d times, want once", n)
	}
	if got := field(ns, "pod/vm-server", ".metadata.uid}/{.metadata.deletionTimestamp"); got != server+"/" {
		t.Errorf("server %q after a refused migration, want %s, not being deleted", got, server)
	}
	waitPhase(t, ns, "vm", "Active", "ServerReady", time.Minute)
}

// TestPlacementKeptForPinnedDisk: a VM whose disk is a volume on its node (a node affinity
// naming the node, as a local or TopoLVM volume has), given a placement that admits only the
// test's other node: the new placement needs a new server, which could start nowhere, since
// the disk cannot be reached from that node. The server keeps running (the same pod), and
// RestartRequired (ResizeNoRoom) says why, naming the disk.
func TestPlacementKeptForPinnedDisk(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	suffix := randomSuffix(t)
	group := "pinnedplace-" + suffix
	side := func(s string) map[string]string {
		return map[string]string{"placement.e2e.cloudnative.czs/group": group, "placement.e2e.cloudnative.czs/side": s}
	}
	node := newNode(t, nodeSpec{Labels: side("a")})
	newNode(t, nodeSpec{Labels: side("b")})
	class := "pinnedplace-" + suffix
	staticVolume(t, ns, class, fmt.Sprintf("{key: kubernetes.io/hostname, operator: In, values: [%s]}", node))
	startController(t, ns).waitReady(t)
	placementVM(t, ns, "vm", ownNodes(group), "  rootDiskStorageClassName: "+class+"\n")
	waitPhase(t, ns, "vm", "Active", "ServerReady", 2*time.Minute)
	if got := serverNode(ns, "vm"); got != node {
		t.Fatalf("server on node %q, want %s, where its volume is", got, node)
	}
	server := field(ns, "pod/vm-server", ".metadata.uid")

	kubectl(t, "patch", vmRes, "vm", "-n", ns, "--type", "merge", "-p",
		`{"spec":{"placement":{"nodeSelector":{"placement.e2e.cloudnative.czs/side":"b"}}}}`)
	eventually(t, 2*time.Minute, func() (bool, string) {
		c := condition(ns, "vm", "RestartRequired")
		return c == "True/ResizeNoRoom", "RestartRequired " + c
	})
	msg := vmField(ns, "vm", `.status.conditions[?(@.type=="RestartRequired")].message`)
	for _, want := range []string{"its disk vm-rootdisk can be reached from", "the VM's placement admits none"} {
		if !strings.Contains(msg, want) {
			t.Errorf("RestartRequired message %q, want it to say %q", msg, want)
		}
	}
	if got := field(ns, "pod/vm-server", ".metadata.uid}/{.metadata.deletionTimestamp"); got != server+"/" {
		t.Errorf("server %q after the placement change, want %s kept, not being deleted", got, server)
	}
	waitPhase(t, ns, "vm", "Active", "ServerReady", time.Minute)
}
