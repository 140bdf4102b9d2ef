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
// deletionTimestamp, and its claim's, each "UID/deletionTimestamp" ("" when it is missing).
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

// holdGate is the scheduling gate TestSelectorHandoverMidCreate's namespace puts on every pod
// created there: a gated pod stays Pending, unscheduled, until the test takes the gate off.
const holdGate = "e2e.example.org/hold"

// holdStatus makes the API server refuse every write of the status of VM vm in ns but while
// it is labelled shard=b (refuseUnless: a ValidatingAdmissionPolicy on virtualmachines/status
// named after ns, bound to ns alone, deleted when the test ends), and returns once it does. vm
// must exist, labelled otherwise: the policy is in force once a server-side dry run of a status
// write is refused.
func holdStatus(t *testing.T, ns, vm string) {
	t.Helper()
	refuseUnless(t, ns,
		fmt.Sprintf(`{apiGroups: [cloudnative.czs], apiVersions: ["*"], operations: [UPDATE], resources: [virtualmachines/status], resourceNames: [%s]}`, vm),
		fmt.Sprintf(`has(object.metadata.labels) && '%[1]s' in object.metadata.labels && object.metadata.labels['%[1]s'] == 'b'`, shardLabel),
		"status written only under shard=b",
		"-n", ns, "patch", "vm", vm, "--subresource=status", "--dry-run=server", "--type=merge", "-p", `{"status":{"message":"probe"}}`)
}

// phaseRank orders the phases a VM goes through on its way to running: a handed-over VM may
// only move forward through them.
var phaseRank = map[string]int{"": 0, "Creating": 1, "Active": 2}

// TestSelectorHandoverMidCreate: a VM relabelled from shard=a to shard=b while a is making its
// server is taken over by b as a left it, with one server and one disk in all. Every pod made
// in the namespace is held Pending by a scheduling gate (a MutatingAdmissionPolicy), so that
// no server runs until the test lets it. Three VMs, three moments:
//
//   - early: relabelled while its claim, which a made, waits for a StorageClass that is not
//     there yet, and a has made no pod; the class comes after the relabel.
//   - held: a's status writes of it are refused (a ValidatingAdmissionPolicy, while it is
//     labelled otherwise than shard=b), as a write whose resourceVersion a relabel has moved
//     past is: a adds the finalizer, makes the claim and, once it is bound, the pod, and retries
//     the status it cannot write. Relabelled then, b finds a VM whose status names nothing, and
//     a claim and a pod it did not make.
//   - raced: relabelled as soon as its pod is there, a's status write of it done or not.
//
// Once the gates come off, each VM is Active under b, on the same claim (UID, not deleted, on
// the volume it was bound to) and the pod made before the relabel (early: the pod b made); a
// pod watch saw one pod per VM, and the Events say one server and one disk were made. The
// status, read on a watch, never went back a phase once b had the VM, and a wrote none of
// held's. Once a has processed the relabels (a barrier), it has let the VMs go and applies no
// plan to them from then on, early's claim bound and their servers' changes included. b then
// carries out their deletion, claims and all.
func TestSelectorHandoverMidCreate(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	mutatePods(t, ns, "hold", fmt.Sprintf(`  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{schedulingGates: [Object.spec.schedulingGates{name: %q}]}}
`, holdGate), "{.spec.schedulingGates[*].name}", holdGate)
	installs := map[string]*controller{"a": shardController(t, ns, "a"), "b": shardController(t, ns, "b")}
	a := installs["a"]
	names := []string{"early", "held", "raced"}
	vms := startKubectlWatch(t, "-n", ns, "get", "vm", "--watch",
		"-o", `jsonpath={.metadata.name} {.metadata.labels.`+shardLabel+`} {.status.phase}/{.status.reason}{"\n"}`)
	servers := map[string]*serverWatch{}
	for _, vm := range names {
		servers[vm] = watchServers(t, ns, vm)
	}
	pending := func(vm string) bool {
		return field(ns, "pod/"+vm+"-server", ".status.phase}/{.spec.schedulingGates[*].name") == "Pending/"+holdGate
	}
	type made struct{ server, disk, volume string }
	madeOf := func(vm string) made {
		server, disk := serverAndDisk(ns, vm)
		return made{server, disk, field(ns, "pvc/"+vm+"-rootdisk", ".spec.volumeName")}
	}
	before := map[string]made{}

	// early: a makes its claim, which waits for its class.
	class := ns + "-late"
	apply(t, fmt.Sprintf(`apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: early, namespace: %s, labels: {%s: a}}
spec: {action: active, resource: {cpu: 10m, memory: 16Mi, rootDisk: 100Mi}, rootDiskStorageClassName: %s}
`, ns, shardLabel, class))
	waitPhase(t, ns, "early", "Creating", "WaitingForDisk", 2*time.Minute)
	kubectl(t, "-n", ns, "label", "vm", "early", shardLabel+"=b", "--overwrite")
	before["early"] = madeOf("early")
	if m := before["early"]; !inPlace(m.disk) || strings.Trim(m.server, "/") != "" || m.volume != "" {
		t.Fatalf("early relabelled: server %s, disk %s (UID/deletionTimestamp) on volume %q: want a's claim unbound, and no server", m.server, m.disk, m.volume)
	}

	// raced: relabelled once a has made its pod, which cannot be running yet.
	shardVM(t, ns, "raced", "a")
	eventually(t, 2*time.Minute, func() (bool, string) {
		server, _ := serverAndDisk(ns, "raced")
		return inPlace(server), "raced's server " + server
	})
	was := kubectl(t, "-n", ns, "label", "vm", "raced", shardLabel+"=b", "--overwrite", "-o", "jsonpath={.status.phase}/{.status.reason}")
	t.Logf("raced relabelled to shard=b with a's status %q", was)
	before["raced"] = madeOf("raced")

	// held: a makes its disk and server, and cannot say so.
	shardVM(t, ns, "held", "none")
	holdStatus(t, ns, "held")
	kubectl(t, "-n", ns, "label", "vm", "held", shardLabel+"=a", "--overwrite")
	eventually(t, 2*time.Minute, func() (bool, string) {
		server, _ := serverAndDisk(ns, "held")
		return inPlace(server), "held's server " + server
	})
	shardBarrier(t, a, "a") // a's reconcile that made the pod is over, its status write refused
	if got := vmField(ns, "held", ".status}/{.metadata.finalizers"); got != `/["cloudnative.czs/server-cleanup"]` {
		t.Fatalf("held under shard=a: status/finalizers %q, want no status and a's finalizer", got)
	}
	refused := false
	for line := range strings.Lines(a.logText()) {
		refused = refused || strings.Contains(line, "vm="+ns+"/held ") && strings.Contains(line, "Reconcile failed") && strings.Contains(line, "status written only under shard=b")
	}
	if !refused {
		t.Fatalf("install a's log has no refused status write of held:\n%s", a.tail(40))
	}
	before["held"] = madeOf("held")
	kubectl(t, "-n", ns, "label", "vm", "held", shardLabel+"=b", "--overwrite")
	for _, vm := range []string{"held", "raced"} {
		if m := before[vm]; !inPlace(m.server) || !inPlace(m.disk) || m.volume == "" || !pending(vm) {
			t.Fatalf("%s relabelled: server %s, disk %s (UID/deletionTimestamp) on volume %q, server pending %v: want both in place, the claim bound, the pod gated",
				vm, m.server, m.disk, m.volume, pending(vm))
		}
	}

	settled(t, installs)
	// a has let the VMs go: from here on it must not act on them.
	let := len(a.logText())
	for _, vm := range names {
		if !strings.Contains(a.logText(), `msg="VM is gone" vm=`+ns+"/"+vm+" ") {
			t.Errorf("install a has not let %s go after its relabel to shard=b:\n%s", vm, a.tail(40))
		}
		if got := madeOf(vm); got != before[vm] || vm != "early" && !pending(vm) {
			t.Errorf("%s taken over by shard=b: server, disk, volume %v, want %v, the pod still gated", vm, got, before[vm])
		}
	}
	if got := vmField(ns, "held", ".status.phase}/{.status.server.name"); got != "Creating/held-server" {
		t.Errorf("held under shard=b, its server gated: phase/server %q, want Creating/held-server: b reports the server a made", got)
	}

	// early's class comes: its claim binds, and b makes its server.
	apply(t, fmt.Sprintf("apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: %s}\nprovisioner: kubernetes.io/host-path\nreclaimPolicy: Delete\nvolumeBindingMode: Immediate\n", class))
	t.Cleanup(func() { _, _ = kubectlErr("delete", "storageclass", class, "--ignore-not-found") })
	eventually(t, 2*time.Minute, func() (bool, string) {
		server, _ := serverAndDisk(ns, "early")
		return inPlace(server) && pending("early"), "early's server " + server
	})
	before["early"] = madeOf("early")

	for _, vm := range names {
		kubectl(t, "-n", ns, "patch", "pod", vm+"-server", "--type=json", "-p", `[{"op":"remove","path":"/spec/schedulingGates"}]`)
	}
	for _, vm := range names {
		waitPhase(t, ns, vm, "Active", "ServerReady", 2*time.Minute)
	}
	settled(t, installs)

	for _, vm := range names {
		m := before[vm]
		if got := madeOf(vm); got != m {
			t.Errorf("%s Active under shard=b: server, disk, volume %v, want %v", vm, got, m)
		}
		if uids, most := servers[vm].servers(t); len(uids) != 1 || most != 1 {
			t.Errorf("%s: the pod watch saw servers %v (at most %d at once), want one", vm, uids, most)
		}
		claim, _, _ := strings.Cut(m.disk, "/")
		if got := kubectl(t, "-n", ns, "get", "pvc", "-l", "cloudnative.czs/vm="+vm, "-o", "jsonpath={.items[*].metadata.uid}"); got != claim {
			t.Errorf("%s: claims labelled for it %q, want only a's %s", vm, got, claim)
		}
		if gen, observed := generations(t, ns, vm); observed != gen {
			t.Errorf("%s: observedGeneration %d, want the generation %d", vm, observed, gen)
		}
		if got := vmField(ns, vm, ".metadata.finalizers"); got != `["cloudnative.czs/server-cleanup"]` {
			t.Errorf("%s: finalizers %s", vm, got)
		}
	}
	// raced's own: b may have decided on a cache that had yet to show raced's pod, and met it
	// on its create, which is a CreatingServer of its own.
	for _, vm := range []string{"early", "held"} {
		for _, reason := range []string{"CreatingServer", "CreatingDisk"} {
			if n, notes := occurrences(t, ns, vm, reason); n != 1 {
				t.Errorf("%s: %d %s Events (%q), want one", vm, n, reason, notes)
			}
		}
	}
	vms.running(t)
	rank := map[string]int{}
	for _, line := range vms.lines() {
		name, rest, _ := strings.Cut(line, " ")
		shard, status, _ := strings.Cut(rest, " ")
		if _, ok := before[name]; !ok {
			continue
		}
		phase, _, _ := strings.Cut(status, "/")
		r, known := phaseRank[phase]
		switch {
		case name == "held" && shard != "b" && status != "/":
			t.Errorf("held under shard=%s had status %s: a's writes were to be refused", shard, status)
		case shard != "b":
		case !known || r < rank[name]:
			t.Errorf("%s under shard=b went back to %s: status went %v", name, status, vms.lines())
		default:
			rank[name] = r
		}
	}
	for line := range strings.Lines(a.logText()[let:]) {
		for _, vm := range names {
			if strings.Contains(line, "vm="+ns+"/"+vm+" ") && !strings.Contains(line, `msg="VM is gone"`) && !strings.Contains(line, "msg=Reconciled") {
				t.Errorf("install a acted on %s after letting it go: %s", vm, line)
			}
		}
	}

	kubectl(t, "-n", ns, "delete", "vm", "early", "held", "raced", "--timeout=2m")
	for _, vm := range names {
		eventually(t, 2*time.Minute, func() (bool, string) {
			_, err := kubectlErr("-n", ns, "get", "pvc", vm+"-rootdisk")
			return isNotFound(err), fmt.Sprintf("%s's claim after the VM's deletion: %v", vm, err)
		})
	}
}
