//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The disk tests: under --root-disk claim (run's default) each VM has a PersistentVolumeClaim
// of its own that its servers mount, which outlives every server, grows in place, goes with
// the VM or is kept, and is adopted by a later VM of the same name. Through kubectl, against
// the local cluster's provisioner and its stand-in CSI resizer (cluster/resizer).

// diskVM applies a VM of name in ns with cpu, rootDisk size and more spec lines (two-space
// indented, under spec:).
func diskVM(t *testing.T, ns, name, cpu, size, more string) {
	t.Helper()
	apply(t, fmt.Sprintf(`apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: %s, namespace: %s}
spec:
  action: active
  resource: {cpu: %s, memory: 64Mi, rootDisk: %s}
%s`, name, ns, cpu, size, more))
}

// claimUID is the UID of the VM's claim, "" when there is none.
func claimUID(ns, vm string) string { return field(ns, "pvc/"+vm+"-rootdisk", ".metadata.uid") }

// mountsClaim checks that the VM's server pod mounts its claim and asks for no ephemeral
// storage of its own.
func mountsClaim(t *testing.T, ns, vm string) {
	t.Helper()
	got := field(ns, "pod/"+vm+"-server", `.spec.volumes[?(@.name=="rootdisk")].persistentVolumeClaim.claimName}|{.spec.containers[0].volumeMounts[0].mountPath}|{.spec.containers[0].resources.limits.ephemeral-storage`)
	if want := vm + "-rootdisk|/var/lib/vm/rootdisk|"; got != want {
		t.Errorf("server pod of %s: claim|mount path|ephemeral storage = %q, want %q", vm, got, want)
	}
}

// newServer waits until the VM's server pod is another than old, and returns its UID.
func newServer(t *testing.T, ns, vm, old string) string {
	t.Helper()
	var uid string
	eventually(t, 2*time.Minute, func() (bool, string) {
		uid = field(ns, "pod/"+vm+"-server", ".metadata.uid")
		return uid != "" && uid != old, "server pod " + uid + ", want a new one"
	})
	return uid
}

// TestDiskSurvivesServers: the VM's claim is the same one (same UID), bound, after each way a
// server is replaced: a restart on request, a failed server replaced after its backoff, a
// resize the node refuses (replaced under --resize in-place), and a kubectl drain of the
// server's node, which is the test's own. Every new server mounts it.
//
// The VM asks for 40 cpu, more than any shared node has, and its placement tolerates the
// private taint of the test's own node of 64 cpu: its server can run there only, and only the
// test's pod is ever on that node, so the drain disturbs no other test. (The toleration is
// the VM's, not added to the pod: the controller replaces a running server for a resize only
// where a node its placement admits has the room.)
func TestDiskSurvivesServers(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	node := newNode(t, nodeSpec{CPU: "64"})
	startController(t, ns).waitReady(t)
	onOwnNode := func() {
		t.Helper()
		waitPhase(t, ns, "vm", "Active", "", 2*time.Minute)
		if got := field(ns, "pod/vm-server", ".spec.nodeName"); got != node {
			t.Fatalf("server on node %q, want the test's own %s", got, node)
		}
		mountsClaim(t, ns, "vm")
	}
	diskVM(t, ns, "vm", "40", "1Gi", fmt.Sprintf("  placement:\n    tolerations:\n    - {key: %s, operator: Equal, value: %s, effect: NoSchedule}\n", privateTaint, node))
	onOwnNode()
	claim := claimUID(ns, "vm")
	if claim == "" || field(ns, "vm/vm", ".status.rootDisk.claimName}/{.status.rootDisk.phase") != "vm-rootdisk/Bound" {
		t.Fatalf("claim %q, status.rootDisk %q", claim, field(ns, "vm/vm", ".status.rootDisk"))
	}
	sameClaim := func(after string) {
		t.Helper()
		if got := claimUID(ns, "vm"); got != claim {
			t.Fatalf("after %s the claim is %q, want the same %s", after, got, claim)
		}
	}

	server := field(ns, "pod/vm-server", ".metadata.uid")
	kubectl(t, "-n", ns, "annotate", vmRes, "vm", "cloudnative.czs/restartedAt="+restartValue, "--overwrite")
	server = newServer(t, ns, "vm", server)
	onOwnNode()
	sameClaim("a restart on request")

	kubectl(t, "-n", ns, "annotate", "pod", "vm-server", "end.kwok.cloudnative.czs/phase=Failed")
	server = newServer(t, ns, "vm", server)
	onOwnNode()
	sameClaim("a failed server replaced")

	waitResizable(t, ns, "vm-server")
	kubectl(t, "-n", ns, "annotate", "pod", "vm-server", "resize.kwok.cloudnative.czs/answer=Infeasible")
	kubectl(t, "-n", ns, "patch", vmRes, "vm", "--type=merge", "-p", `{"spec":{"resource":{"cpu":"41"}}}`)
	server = newServer(t, ns, "vm", server)
	onOwnNode()
	sameClaim("a resize the node refused")

	if finished, out := drainNode(t, node, 2*time.Minute); !finished {
		t.Fatalf("drain of the server's node did not finish:\n%s", out)
	}
	server = newServer(t, ns, "vm", server)
	sameClaim("a drain of the server's node")
	kubectl(t, "uncordon", node)
	onOwnNode()
	sameClaim("the server after the drain running")
	if n, notes := occurrences(t, ns, "vm", "CreatingDisk"); n != 1 {
		t.Errorf("CreatingDisk occurred %d times (%q): want once, for the first server", n, notes)
	}
}

// TestDiskGrowsOnline: a larger rootDisk grows the claim in place: the server keeps running
// (the same pod UID), the claim ends at the new capacity, the VM says so (DiskResized, no
// DiskResizing left, status.rootDisk.capacity). A smaller rootDisk is refused at admission
// with a clear message, and nothing changes.
func TestDiskGrowsOnline(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns).waitReady(t)
	diskVM(t, ns, "vm", "1", "1Gi", "")
	waitPhase(t, ns, "vm", "Active", "", 2*time.Minute)
	mountsClaim(t, ns, "vm")
	pod, claim := field(ns, "pod/vm-server", ".metadata.uid"), claimUID(ns, "vm")

	kubectl(t, "-n", ns, "patch", vmRes, "vm", "--type=merge", "-p", `{"spec":{"resource":{"rootDisk":"2Gi"}}}`)
	waitField(t, ns, "pvc/vm-rootdisk", ".status.capacity.storage", "2Gi")
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := field(ns, "vm/vm", ".status.rootDisk.capacity") + "|" + condition(ns, "vm", "DiskResizing")
		return got == "2Gi|", "capacity|DiskResizing = " + got
	})
	eventually(t, 2*time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "vm", "DiskResized")
		return n == 1 && strings.Contains(notes, "Disk vm-rootdisk now has 2Gi"), fmt.Sprintf("DiskResized %d: %q", n, notes)
	})
	if got := field(ns, "pod/vm-server", ".metadata.uid") + " " + claimUID(ns, "vm"); got != pod+" "+claim {
		t.Errorf("pod and claim %s after the growth, want %s %s: the same", got, pod, claim)
	}
	waitPhase(t, ns, "vm", "Active", "ServerReady", time.Minute)

	_, err := kubectlErr("-n", ns, "patch", vmRes, "vm", "--type=merge", "-p", `{"spec":{"resource":{"rootDisk":"1Gi"}}}`)
	if err == nil || !strings.Contains(err.Error(), "rootDisk cannot shrink") {
		t.Fatalf("a smaller rootDisk: %v; want it refused: rootDisk cannot shrink", err)
	}
	if got := field(ns, "vm/vm", ".spec.resource.rootDisk") + " " + field(ns, "pvc/vm-rootdisk", ".spec.resources.requests.storage"); got != "2Gi 2Gi" {
		t.Errorf("rootDisk and claim %s after the refusal, want 2Gi 2Gi", got)
	}
}

// TestDiskGrowthRefused: a claim whose class does not allow expansion, and one whose storage
// refuses the size (the local cluster's stand-in driver, told by the claim's annotation), are
// not grown; the VM says why in DiskResizing, with a Warning Event, and its server keeps
// running, untouched. With the refusal lifted, the growth goes ahead.
func TestDiskGrowthRefused(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns).waitReady(t)
	diskVM(t, ns, "fixed", "1", "1Gi", "  rootDiskStorageClassName: fixed-size\n")
	diskVM(t, ns, "refused", "1", "1Gi", "")
	waitPhase(t, ns, "fixed", "Active", "", 2*time.Minute)
	waitPhase(t, ns, "refused", "Active", "", 2*time.Minute)
	pods := field(ns, "pod/fixed-server", ".metadata.uid") + " " + field(ns, "pod/refused-server", ".metadata.uid")
	kubectl(t, "-n", ns, "annotate", "pvc", "refused-rootdisk", "expand.kwok.cloudnative.czs/answer=Infeasible")
	for _, vm := range []string{"fixed", "refused"} {
		kubectl(t, "-n", ns, "patch", vmRes, vm, "--type=merge", "-p", `{"spec":{"resource":{"rootDisk":"2Gi"}}}`)
	}
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := condition(ns, "fixed", "DiskResizing") + " " + condition(ns, "refused", "DiskResizing")
		return got == "True/DiskNotExpandable True/DiskResizeInfeasible", "DiskResizing of fixed, refused: " + got
	})
	if msg := field(ns, "vm/refused", `.status.conditions[?(@.type=="DiskResizing")].message`); !strings.Contains(msg, "code = OutOfRange") {
		t.Errorf("DiskResizing message %q does not quote the driver", msg)
	}
	for vm, reason := range map[string]string{"fixed": "DiskNotExpandable", "refused": "DiskResizeInfeasible"} {
		eventually(t, 2*time.Minute, func() (bool, string) {
			n, notes := occurrences(t, ns, vm, reason)
			return n == 1, fmt.Sprintf("%s Events of %s: %d (%q)", reason, vm, n, notes)
		})
	}
	if got := field(ns, "pod/fixed-server", ".metadata.uid") + " " + field(ns, "pod/refused-server", ".metadata.uid"); got != pods {
		t.Errorf("server pods %s after the refusals, want %s: kept", got, pods)
	}
	if got := field(ns, "pvc/fixed-rootdisk", ".spec.resources.requests.storage"); got != "1Gi" {
		t.Errorf("the fixed-size claim asks for %s, want 1Gi: not asked to grow", got)
	}
	kubectl(t, "-n", ns, "annotate", "pvc", "refused-rootdisk", "expand.kwok.cloudnative.czs/answer-")
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := field(ns, "vm/refused", ".status.rootDisk.capacity") + "|" + condition(ns, "refused", "DiskResizing")
		return got == "2Gi|", "capacity|DiskResizing = " + got
	})
}

// TestDiskBoundBeforeServer: a new VM's server is made once its claim is bound (a class that
// binds by itself), so that the scheduler never tries it without its disk: no FailedScheduling
// on the pod by the time it is Scheduled (the scheduler's Events on one pod go out in order).
// A class that binds only with a server placed (WaitForFirstConsumer) gets its server at once,
// and the VM becomes Active on the claim the scheduler bound.
func TestDiskBoundBeforeServer(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns).waitReady(t)
	diskVM(t, ns, "now", "1", "1Gi", "")
	diskVM(t, ns, "late", "1", "1Gi", "  rootDiskStorageClassName: wait-for-consumer\n")
	for _, vm := range []string{"now", "late"} {
		waitPhase(t, ns, vm, "Active", "ServerReady", 2*time.Minute)
		mountsClaim(t, ns, vm)
		if got := field(ns, "vm/"+vm, ".status.rootDisk.phase"); got != "Bound" {
			t.Errorf("VM %s reports its disk %s, want Bound", vm, got)
		}
	}
	eventually(t, time.Minute, func() (bool, string) {
		n, _ := occurrences(t, ns, "now-server", "Scheduled")
		return n == 1, fmt.Sprintf("Scheduled Events on now-server: %d", n)
	})
	if n, notes := occurrences(t, ns, "now-server", "FailedScheduling"); n != 0 {
		t.Errorf("FailedScheduling on now-server %d times (%q): the server was made before its claim was bound", n, notes)
	}
}

// TestDiskDeletedWithVM: deleting a VM (reclaim policy Delete, the default) deletes its claim
// once the server is gone, and the VM goes.
func TestDiskDeletedWithVM(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns).waitReady(t)
	diskVM(t, ns, "vm", "1", "1Gi", "")
	waitPhase(t, ns, "vm", "Active", "", 2*time.Minute)
	kubectl(t, "-n", ns, "delete", vmRes, "vm", "--timeout=2m")
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", "pvc", "vm-rootdisk")
		return isNotFound(err), fmt.Sprintf("claim still there: %v", err)
	})
}

// TestDiskRetainedAndAdopted: under reclaim policy Retain, deleting the VM keeps its claim,
// owned by nothing, still labelled for the VM's name and marked kept, and an Event names it; a
// new VM of the same name that names no reclaim policy (the manifest without Retain) adopts it
// as kept (labelled for the new VM, owned by nothing, the same claim UID) and runs on it,
// growing it to its larger rootDisk on the way; deleting that VM keeps the claim too. A third
// VM of the name that says reclaim policy Delete adopts it owned, no longer marked kept.
func TestDiskRetainedAndAdopted(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns).waitReady(t)
	diskVM(t, ns, "vm", "1", "1Gi", "  rootDiskReclaimPolicy: Retain\n")
	waitPhase(t, ns, "vm", "Active", "", 2*time.Minute)
	claim := claimUID(ns, "vm")
	eventually(t, time.Minute, func() (bool, string) {
		owners := field(ns, "pvc/vm-rootdisk", ".metadata.ownerReferences")
		return owners == "", "claim owners " + owners
	})
	first := field(ns, "vm/vm", ".metadata.uid")
	kubectl(t, "-n", ns, "delete", vmRes, "vm", "--timeout=2m")
	// The Events outlive the VM; they are about it (regarding, by name).
	eventually(t, 2*time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "vm", "DiskRetained")
		return n == 1 && strings.Contains(notes, "Keeping disk vm-rootdisk"), fmt.Sprintf("DiskRetained %d: %q", n, notes)
	})
	const keptFields = `.metadata.uid}|{.metadata.ownerReferences}|{.metadata.labels.cloudnative\.czs/vm-uid}|{.metadata.annotations.cloudnative\.czs/kept`
	if got := field(ns, "pvc/vm-rootdisk", keptFields+`}|{.metadata.labels.cloudnative\.czs/vm`); got != claim+"||"+first+"|true|vm" {
		t.Fatalf("kept claim uid|owners|vm-uid label|kept|vm label = %q, want %s||%s|true|vm", got, claim, first)
	}

	// The manifest without Retain: the disk stays kept.
	diskVM(t, ns, "vm", "1", "2Gi", "")
	waitPhase(t, ns, "vm", "Active", "", 2*time.Minute)
	second := field(ns, "vm/vm", ".metadata.uid")
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := field(ns, "pvc/vm-rootdisk", keptFields+`}|{.status.capacity.storage`)
		return got == claim+"||"+second+"|true|2Gi", "claim uid|owners|vm-uid label|kept|capacity = " + got
	})
	mountsClaim(t, ns, "vm")
	eventually(t, time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "vm", "AdoptingDisk")
		return n == 1 && strings.Contains(notes, "it stays kept"), fmt.Sprintf("AdoptingDisk %d: %q", n, notes)
	})
	kubectl(t, "-n", ns, "delete", vmRes, "vm", "--timeout=2m")
	eventually(t, 2*time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "vm", "DiskRetained")
		return n == 2, fmt.Sprintf("DiskRetained %d: %q", n, notes)
	})
	if got := field(ns, "pvc/vm-rootdisk", keptFields); got != claim+"||"+second+"|true" {
		t.Fatalf("claim after the second VM's deletion uid|owners|vm-uid label|kept = %q, want %s||%s|true", got, claim, second)
	}

	// Delete, named: the VM owns the disk again.
	diskVM(t, ns, "vm", "1", "2Gi", "  rootDiskReclaimPolicy: Delete\n")
	waitPhase(t, ns, "vm", "Active", "", 2*time.Minute)
	third := field(ns, "vm/vm", ".metadata.uid")
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := field(ns, "pvc/vm-rootdisk", `.metadata.uid}|{.metadata.ownerReferences[0].uid}|{.metadata.labels.cloudnative\.czs/vm-uid}|{.metadata.annotations.cloudnative\.czs/kept`)
		return got == claim+"|"+third+"|"+third+"|", "claim uid|owner|vm-uid label|kept = " + got
	})
}

// TestDiskReleaseRefused: a VM whose reclaim policy keeps its disk, and whose release of the
// claim the API server refuses (here a ValidatingAdmissionPolicy of the test's that denies
// taking an owner reference off a claim in its namespace), is not let go when deleted: gone,
// it would leave its still-owned claim to the garbage collector. It stays Terminating with
// DiskReleaseRefused and a Warning that quotes the refusal; once the policy's binding goes, the
// next try releases the claim and the VM goes, its claim (the same UID) kept and owned by
// nothing.
func TestDiskReleaseRefused(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns).waitReady(t)
	diskVM(t, ns, "vm", "1", "1Gi", "")
	waitPhase(t, ns, "vm", "Active", "", 2*time.Minute)
	claim := claimUID(ns, "vm")
	if owner := field(ns, "pvc/vm-rootdisk", ".metadata.ownerReferences[0].kind"); owner != "VirtualMachine" {
		t.Fatalf("claim owned by %q, want the VM", owner)
	}
	// In force once a release by hand is refused; the binding, named ns, is deleted below.
	refuseUnless(t, ns,
		`{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [persistentvolumeclaims]}`,
		`!has(oldObject.metadata.ownerReferences) || size(oldObject.metadata.ownerReferences) == 0 || (has(object.metadata.ownerReferences) && size(object.metadata.ownerReferences) > 0)`,
		"claims here keep their owners",
		"-n", ns, "patch", "pvc", "vm-rootdisk", "--dry-run=server", "--type=json", "-p", `[{"op":"remove","path":"/metadata/ownerReferences"}]`)

	kubectl(t, "-n", ns, "patch", vmRes, "vm", "--type=merge", "-p", `{"spec":{"rootDiskReclaimPolicy":"Retain"}}`)
	kubectl(t, "-n", ns, "delete", vmRes, "vm", "--wait=false")
	waitPhase(t, ns, "vm", "Terminating", "DiskReleaseRefused", 2*time.Minute)
	if msg := field(ns, "vm/vm", ".status.message"); !strings.Contains(msg, "claims here keep their owners") {
		t.Errorf("message %q does not quote the refusal", msg)
	}
	eventually(t, time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "vm", "DiskReleaseRefused")
		return n >= 1, fmt.Sprintf("DiskReleaseRefused Events: %d (%q)", n, notes)
	})
	if got := field(ns, "pvc/vm-rootdisk", `.metadata.uid}|{.metadata.ownerReferences[0].kind}|{.metadata.deletionTimestamp`); got != claim+"|VirtualMachine|" {
		t.Fatalf("claim uid|owner|deletion = %q while the release is refused, want %s|VirtualMachine|", got, claim)
	}

	kubectl(t, "delete", "validatingadmissionpolicybinding", ns)
	eventually(t, 3*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", vmRes, "vm")
		return isNotFound(err), fmt.Sprintf("VM still there: %v", err)
	})
	// The garbage collector had its chance: the VM is gone, and what it owned with it.
	if got := field(ns, "pvc/vm-rootdisk", `.metadata.uid}|{.metadata.ownerReferences}|{.metadata.deletionTimestamp`); got != claim+"||" {
		t.Errorf("claim uid|owners|deletion = %q after the VM went, want %s||", got, claim)
	}
}

// TestDiskWaitsForClass: a VM whose class does not exist stays Creating with WaitingForDisk
// and the binder's word in its message; so does a VM whose disk's name is another's claim,
// with DiskConflict, Failed, and that claim untouched.
func TestDiskWaitsForClass(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	apply(t, claimYAML(ns, "taken-rootdisk", "", "1Gi"))
	startController(t, ns).waitReady(t)
	diskVM(t, ns, "nowhere", "1", "1Gi", "  rootDiskStorageClassName: no-such-class\n")
	diskVM(t, ns, "taken", "1", "1Gi", "")
	waitPhase(t, ns, "nowhere", "Creating", "WaitingForDisk", 2*time.Minute)
	if msg := field(ns, "vm/nowhere", ".status.message"); !strings.Contains(msg, `Waiting for disk nowhere-rootdisk to be bound: storageclass.storage.k8s.io "no-such-class" not found`) {
		t.Errorf("message %q: want the binder's word", msg)
	}
	waitPhase(t, ns, "taken", "Failed", "DiskConflict", 2*time.Minute)
	if got := field(ns, "pvc/taken-rootdisk", ".metadata.ownerReferences}|{.metadata.labels"); got != "|" {
		t.Errorf("the other claim was touched: owners|labels = %q", got)
	}
	if _, err := kubectlErr("-n", ns, "get", "pod", "taken-server"); !isNotFound(err) {
		t.Errorf("a server was made without its disk: %v", err)
	}
}

// TestDiskUnlabelled: a claim whose label cloudnative.czs/vm-uid someone took off by hand
// drops out of the controller's label-selected cache but stays its VM's. With the controller
// down, the label comes off two VMs' claims, one VM is set to Retain, and both are deleted:
// started again, the controller reads each claim past its cache before it lets the VM go, so
// the Retain VM's claim is released (the same claim, no owner reference, marked kept,
// labelled again) rather than deleted by the garbage collector with its VM, and the Delete
// VM's claim is deleted, as a labelled one is. On a live VM, the label taken off comes back on
// the same claim, and the VM stays Active.
func TestDiskUnlabelled(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns)
	c.waitReady(t)
	for _, vm := range []string{"kept", "gone", "live"} {
		diskVM(t, ns, vm, "1", "1Gi", "")
	}
	uids := map[string]string{}
	claims := map[string]string{}
	for _, vm := range []string{"kept", "gone", "live"} {
		waitPhase(t, ns, vm, "Active", "", 2*time.Minute)
		uids[vm], claims[vm] = field(ns, "vm/"+vm, ".metadata.uid"), claimUID(ns, vm)
	}

	if err := c.stop(t); err != nil {
		t.Fatalf("stop the controller: %v", err)
	}
	kubectl(t, "-n", ns, "label", "pvc", "kept-rootdisk", "gone-rootdisk", "cloudnative.czs/vm-uid-")
	kubectl(t, "-n", ns, "patch", vmRes, "kept", "--type=merge", "-p", `{"spec":{"rootDiskReclaimPolicy":"Retain"}}`)
	kubectl(t, "-n", ns, "delete", vmRes, "kept", "gone", "--wait=false")
	startController(t, ns).waitReady(t)
	eventually(t, 3*time.Minute, func() (bool, string) {
		_, errKept := kubectlErr("-n", ns, "get", vmRes, "kept")
		_, errGone := kubectlErr("-n", ns, "get", vmRes, "gone")
		return isNotFound(errKept) && isNotFound(errGone), fmt.Sprintf("VMs still there: %v; %v", errKept, errGone)
	})
	// The garbage collector had its chance: the kept VM is gone, and what it owned with it.
	const keptFields = `.metadata.uid}|{.metadata.ownerReferences}|{.metadata.labels.cloudnative\.czs/vm-uid}|{.metadata.annotations.cloudnative\.czs/kept}|{.metadata.deletionTimestamp`
	eventually(t, time.Minute, func() (bool, string) {
		got := field(ns, "pvc/kept-rootdisk", keptFields)
		return got == claims["kept"]+"||"+uids["kept"]+"|true|", fmt.Sprintf("kept claim uid|owners|vm-uid label|kept|deletion = %q, want %s||%s|true|",
			got, claims["kept"], uids["kept"])
	})
	if n, notes := occurrences(t, ns, "kept", "DiskRetained"); n != 1 {
		t.Errorf("DiskRetained Events of kept: %d (%q), want 1", n, notes)
	}
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", "pvc", "gone-rootdisk")
		return isNotFound(err), fmt.Sprintf("gone's claim still there: %v", err)
	})
	if n, notes := occurrences(t, ns, "gone", "DeletingDisk"); n != 1 {
		t.Errorf("DeletingDisk Events of gone: %d (%q), want 1", n, notes)
	}

	kubectl(t, "-n", ns, "label", "pvc", "live-rootdisk", "cloudnative.czs/vm-uid-")
	eventually(t, time.Minute, func() (bool, string) {
		got := field(ns, "pvc/live-rootdisk", `.metadata.uid}|{.metadata.labels.cloudnative\.czs/vm-uid}|{.metadata.ownerReferences[0].uid`)
		want := claims["live"] + "|" + uids["live"] + "|" + uids["live"]
		return got == want, fmt.Sprintf("live claim uid|vm-uid label|owner = %q, want %s", got, want)
	})
	waitPhase(t, ns, "live", "Active", "ServerReady", time.Minute)
	if n, notes := occurrences(t, ns, "live", "DiskConflict"); n != 0 {
		t.Errorf("DiskConflict Events of live: %d (%q)", n, notes)
	}
}
