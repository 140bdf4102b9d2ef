//go:build e2e

package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Several installs split by --selector (docs/deploying.md): each controller manages the VMs
// its selector matches, and a VM whose labels move it from one selector to another is handed
// over with its server and disk as they are. The installs here share one namespace, each with
// a Lease of its own (--lease-name), as two Deployments of one namespace would.

// shardLabel is the label the test's installs split the VMs by.
const shardLabel = "shard"

// shardController starts the install that manages the VMs labelled shard=<shard>: one worker,
// for shardBarrier, and leader election on a Lease named after the shard, so that it leads
// beside the other installs instead of standing by for the Lease one of them holds.
func shardController(t *testing.T, ns, shard string) *controller {
	t.Helper()
	c := startController(t, ns, "--selector", shardLabel+"="+shard, "--workers", "1",
		"--leader-elect", "--lease-namespace", ns, "--lease-name", "vm-controller-"+shard)
	c.waitReady(t)
	return c
}

// shardVM applies the VM name, action active, labelled shard=<shard>.
func shardVM(t *testing.T, ns, name, shard string) {
	t.Helper()
	apply(t, fmt.Sprintf(`apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: %s, namespace: %s, labels: {%s: %s}}
spec: {action: active, resource: {cpu: 10m, memory: 16Mi, rootDisk: 100Mi}}
`, name, ns, shardLabel, shard))
}

// shardBarrier is controller.barrier for the install of shard: the barrier VM, one per
// install, carries the shard's label, since an install sees no other VM. It returns once c
// has finished every reconcile that a change made before the call caused: c's informer
// delivers changes in the order of their resourceVersions, and with one worker the barrier
// VM's status is written after them.
func shardBarrier(t *testing.T, c *controller, shard string) {
	t.Helper()
	if c.workers != 1 {
		t.Fatalf("shardBarrier needs a controller with --workers 1 (this one has %d)", c.workers)
	}
	c.waitReady(t)
	c.drained(t)
	name := "barrier-" + shard
	gen, err := kubectlErr("-n", c.ns, "get", "vm", name, "-o", "jsonpath={.metadata.generation}")
	switch {
	case isNotFound(err):
		apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: %s, namespace: %s, labels: {%s: %s}}\nspec: {action: inactive, resource: {cpu: 1m, memory: 16Mi, rootDisk: 100Mi}}\n",
			name, c.ns, shardLabel, shard))
	case err != nil:
		t.Fatal(err)
	default:
		n, err := strconv.Atoi(gen)
		if err != nil {
			t.Fatalf("%s generation %q: %v", name, gen, err)
		}
		kubectl(t, "-n", c.ns, "patch", "vm", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"resource":{"cpu":"%dm"}}}`, n+1))
	}
	eventually(t, 2*time.Minute, func() (bool, string) {
		f := strings.Fields(vmField(c.ns, name, ".metadata.generation} {.status.observedGeneration"))
		return len(f) == 2 && f[0] == f[1], fmt.Sprintf("%s generation/observedGeneration %v", name, f)
	})
}

// settled is shardBarrier for every install: once it returns, each has processed every
// change made before the call.
func settled(t *testing.T, installs map[string]*controller) {
	t.Helper()
	for shard, c := range installs {
		shardBarrier(t, c, shard)
	}
}

// serverAndDisk is what must not change when a VM changes hands: its server pod's UID and
// deletionTimestamp, and its claim's, each "UID/deletionTimestamp" ("/" when it is missing).
func serverAndDisk(ns, vm string) (server, disk string) {
	const path = ".metadata.uid}/{.metadata.deletionTimestamp"
	return field(ns, "pod/"+vm+"-server", path), field(ns, "pvc/"+vm+"-rootdisk", path)
}

// inPlace tells whether a serverAndDisk value is an object that is there and not being deleted.
func inPlace(s string) bool {
	uid, deleting, _ := strings.Cut(s, "/")
	return uid != "" && deleting == ""
}

// generations is the VM's metadata.generation and status.observedGeneration.
func generations(t *testing.T, ns, vm string) (gen, observed int) {
	t.Helper()
	f := strings.Fields(vmField(ns, vm, ".metadata.generation} {.status.observedGeneration"))
	if len(f) != 2 {
		t.Fatalf("%s: generation and observedGeneration %q", vm, f)
	}
	gen, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	observed, err = strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return gen, observed
}

// TestSelectorHandover runs two installs in one namespace, --selector shard=a and shard=b,
// each leading on a Lease of its own. A VM relabelled from shard=a to shard=b is taken over by
// b: same server pod, same claim, and b carries out what the VM asks next (a stop) and its
// deletion (its finalizer, the same name for every install, released). A VM relabelled to
// shard=c, which no install selects, is not managed: once both installs have processed later
// changes (a barrier each), its observedGeneration stays behind a spec change, its server runs
// on, and a deletion waits on its finalizer with server and disk in place. Labelled shard=a
// again, it is managed again: its status catches up, and its deletion completes.
func TestSelectorHandover(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	installs := map[string]*controller{"a": shardController(t, ns, "a"), "b": shardController(t, ns, "b")}
	for shard, c := range installs {
		eventually(t, 2*time.Minute, func() (bool, string) {
			v := metric(c.scrape(t), "vmcontroller_leader")
			return v == 1, fmt.Sprintf("install %s: vmcontroller_leader %v", shard, v)
		})
	}
	if a, b := field(ns, "lease/vm-controller-a", ".spec.holderIdentity"), field(ns, "lease/vm-controller-b", ".spec.holderIdentity"); a == "" || b == "" || a == b {
		t.Fatalf("Lease holders %q and %q: want one install each", a, b)
	}

	shardVM(t, ns, "moved", "a")
	shardVM(t, ns, "stray", "a")
	waitPhase(t, ns, "moved", "Active", "ServerReady", 2*time.Minute)
	waitPhase(t, ns, "stray", "Active", "ServerReady", 2*time.Minute)
	movedServer, movedDisk := serverAndDisk(ns, "moved")
	strayServer, strayDisk := serverAndDisk(ns, "stray")
	for _, s := range []string{movedServer, movedDisk, strayServer, strayDisk} {
		if !inPlace(s) {
			t.Fatalf("servers %s %s, disks %s %s (UID/deletionTimestamp): want each there, none being deleted", movedServer, strayServer, movedDisk, strayDisk)
		}
	}

	// Moved to b's selector: b takes the VM over as it is.
	kubectl(t, "-n", ns, "label", "vm", "moved", shardLabel+"=b", "--overwrite")
	settled(t, installs)
	if server, disk := serverAndDisk(ns, "moved"); server != movedServer || disk != movedDisk {
		t.Fatalf("moved to shard=b: server %s, disk %s (UID/deletionTimestamp), want them as they were: %s, %s", server, disk, movedServer, movedDisk)
	}
	if got := vmField(ns, "moved", ".status.phase}/{.status.reason}/{.metadata.finalizers"); got != `Active/ServerReady/["cloudnative.czs/server-cleanup"]` {
		t.Errorf("moved to shard=b: phase/reason/finalizers %q", got)
	}
	kubectl(t, "-n", ns, "patch", "vm", "moved", "--type=merge", "-p", `{"spec":{"action":"inactive"}}`)
	waitPhase(t, ns, "moved", "Inactive", "", 2*time.Minute)
	eventually(t, 2*time.Minute, func() (bool, string) {
		uid, _, _ := podOf(ns, "moved")
		return uid == "", "moved's server " + uid + " still there after the stop"
	})
	if gen, observed := generations(t, ns, "moved"); observed != gen {
		t.Errorf("moved: observedGeneration %d, want the generation %d", observed, gen)
	}
	kubectl(t, "-n", ns, "delete", "vm", "moved", "--timeout=2m")
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", "pvc", "moved-rootdisk")
		return isNotFound(err), fmt.Sprintf("moved's claim after the VM's deletion: %v", err)
	})

	// Moved to a selector no install has: nothing manages the VM.
	kubectl(t, "-n", ns, "label", "vm", "stray", shardLabel+"=c", "--overwrite")
	kubectl(t, "-n", ns, "patch", "vm", "stray", "--type=merge", "-p", `{"spec":{"action":"inactive"}}`)
	settled(t, installs)
	gen, observed := generations(t, ns, "stray")
	if observed >= gen {
		t.Errorf("stray under shard=c: observedGeneration %d caught up with the generation %d, want it behind: no install manages it", observed, gen)
	}
	if got := vmField(ns, "stray", ".status.phase"); got != "Active" {
		t.Errorf("stray under shard=c, its action inactive: phase %q, want Active as it was", got)
	}
	if server, disk := serverAndDisk(ns, "stray"); server != strayServer || disk != strayDisk {
		t.Fatalf("stray under shard=c: server %s, disk %s (UID/deletionTimestamp), want them as they were: %s, %s", server, disk, strayServer, strayDisk)
	}

	// Back in a's selector: managed again.
	kubectl(t, "-n", ns, "label", "vm", "stray", shardLabel+"=a", "--overwrite")
	eventually(t, 2*time.Minute, func() (bool, string) {
		gen, observed := generations(t, ns, "stray")
		phase := vmField(ns, "stray", ".status.phase")
		return observed == gen && phase == "Inactive", fmt.Sprintf("stray back under shard=a: generation %d observedGeneration %d phase %s", gen, observed, phase)
	})
	eventually(t, 2*time.Minute, func() (bool, string) {
		uid, _, _ := podOf(ns, "stray")
		return uid == "", "stray's server " + uid + " still there after the stop"
	})

	// Deleted while no install selects it: the deletion waits on the finalizer, the disk in place.
	kubectl(t, "-n", ns, "label", "vm", "stray", shardLabel+"=c", "--overwrite")
	kubectl(t, "-n", ns, "delete", "vm", "stray", "--wait=false")
	settled(t, installs)
	if got := vmField(ns, "stray", ".metadata.finalizers}/{.metadata.deletionTimestamp"); !strings.HasPrefix(got, `["cloudnative.czs/server-cleanup"]/`) || strings.HasSuffix(got, "/") {
		t.Errorf("stray deleted under shard=c: finalizers/deletionTimestamp %q, want it deleting and held by cloudnative.czs/server-cleanup", got)
	}
	if _, disk := serverAndDisk(ns, "stray"); disk != strayDisk {
		t.Errorf("stray deleted under shard=c: disk %s (UID/deletionTimestamp), want it as it was: %s", disk, strayDisk)
	}
	kubectl(t, "-n", ns, "label", "vm", "stray", shardLabel+"=a", "--overwrite")
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", "vm", "stray")
		return isNotFound(err), fmt.Sprintf("stray deleted, back under shard=a: %v", err)
	})
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", "pvc", "stray-rootdisk")
		return isNotFound(err), fmt.Sprintf("stray's claim after the VM's deletion: %v", err)
	})
}
