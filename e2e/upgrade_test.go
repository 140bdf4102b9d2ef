//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// upgradeFrom is the earlier build the upgrade test starts from: a commit of this repository's
// history, which a full clone has (CI's clean clone does; a shallow one does not).
const upgradeFrom = "bbcaa93"

// earlierBuild builds vm-controller as of commit rev: the commit's tree (git archive, so no
// worktree is registered in the repository) in a temporary directory, built there with the
// module cache this build uses. It returns the binary and that tree's crds/ directory. A
// missing git or a history without rev fails the test: the upgrade is never left untested.
func earlierBuild(t *testing.T, rev string) (bin, crdDir string) {
	t.Helper()
	root := repoRoot()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("the upgrade test builds the controller as of %s from the repository's history, and git is not on PATH: %v", rev, err)
	}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", rev+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("commit %s, the build the upgrade test starts from, is not in the history of %s (a shallow clone? git fetch --unshallow): %v %s", rev, root, err, out)
	}
	dir := t.TempDir()
	var tarball, errOut bytes.Buffer
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", rev)
	archive.Stdout, archive.Stderr = &tarball, &errOut
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v: %s", rev, err, errOut.String())
	}
	extract := exec.Command("tar", "-x", "-C", dir)
	extract.Stdin = &tarball
	if out, err := extract.CombinedOutput(); err != nil {
		t.Fatalf("extract the tree of %s: %v: %s", rev, err, out)
	}
	bin = filepath.Join(dir, "vm-controller")
	start := time.Now()
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of %s: %v\n%s", rev, err, out)
	}
	t.Logf("built vm-controller as of %s in %s", rev, time.Since(start).Round(time.Second))
	return bin, filepath.Join(dir, "crds")
}

// applyCRDsFrom applies the CRDs of dir, as a user applies a release's manifests, and waits
// until the VMs' CRD is established.
func applyCRDsFrom(t *testing.T, dir string) {
	t.Helper()
	crdsMu.Lock()
	defer crdsMu.Unlock()
	kubectl(t, "apply", "-f", dir)
	waitEstablished(t, vmRes)
}

// object is what the upgrade test compares of an object before and after: its identity, its
// version, whether it is being deleted, and its status as the API server has it.
type object struct {
	Metadata struct {
		Name              string  `json:"name"`
		UID               string  `json:"uid"`
		ResourceVersion   string  `json:"resourceVersion"`
		Generation        int64   `json:"generation"`
		DeletionTimestamp *string `json:"deletionTimestamp"`
		ManagedFields     []struct {
			Manager     string `json:"manager"`
			Time        string `json:"time"`
			Subresource string `json:"subresource"`
		} `json:"managedFields"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"` // a pod's
	} `json:"spec"`
	Status json.RawMessage `json:"status"`
}

// lastWriter names the field managers of the object's latest writes (managedFields), to say
// who wrote it.
func (o object) lastWriter() string {
	latest := ""
	for _, f := range o.Metadata.ManagedFields {
		latest = max(latest, f.Time)
	}
	var who []string
	for _, f := range o.Metadata.ManagedFields {
		if f.Time == latest {
			who = append(who, f.Manager+" "+f.Subresource)
		}
	}
	return strings.Join(who, ", ") + " at " + latest
}

// vmStatus is what of a VM's status the upgrade must keep.
type vmStatus struct {
	Phase      string `json:"phase"`
	Reason     string `json:"reason"`
	Conditions []struct {
		Type   string `json:"type"`
		Status string `json:"status"`
		Reason string `json:"reason"`
	} `json:"conditions"`
	Server struct {
		ID string `json:"id"`
	} `json:"server"`
	RootDisk struct {
		ClaimName string `json:"claimName"`
		Capacity  string `json:"capacity"`
	} `json:"rootDisk"`
}

// summary is phase/reason, then each condition as Type=Status/Reason, then the server and the
// disk the status names: what a user reads of the VM and what the upgrade must leave as it was.
func (s vmStatus) summary() string {
	parts := []string{s.Phase + "/" + s.Reason}
	for _, c := range s.Conditions {
		parts = append(parts, c.Type+"="+c.Status+"/"+c.Reason)
	}
	slices.Sort(parts[1:])
	return strings.Join(append(parts, "server="+s.Server.ID, "disk="+s.RootDisk.ClaimName+":"+s.RootDisk.Capacity), " ")
}

// objects lists resource in ns, by name.
func objects(t *testing.T, ns, resource string) map[string]object {
	t.Helper()
	var list struct {
		Items []object `json:"items"`
	}
	if err := json.Unmarshal([]byte(kubectl(t, "-n", ns, "get", resource, "-o", "json", "--show-managed-fields")), &list); err != nil {
		t.Fatalf("kubectl get %s: %v", resource, err)
	}
	m := map[string]object{}
	for _, o := range list.Items {
		m[o.Metadata.Name] = o
	}
	return m
}

// upgradeState is what the upgrade test records of a namespace before and after.
type upgradeState struct {
	vms, pods, claims, budgets map[string]object
}

func takeUpgradeState(t *testing.T, ns string) upgradeState {
	t.Helper()
	return upgradeState{vms: objects(t, ns, vmRes), pods: objects(t, ns, "pods"),
		claims: objects(t, ns, "persistentvolumeclaims"), budgets: objects(t, ns, "poddisruptionbudgets")}
}

func statusOf(t *testing.T, o object) vmStatus {
	t.Helper()
	var s vmStatus
	if err := json.Unmarshal(o.Status, &s); err != nil {
		t.Fatalf("status of %s: %v", o.Metadata.Name, err)
	}
	return s
}

// upgradeNamespace is one namespace of VMs the upgrade test runs a controller for, with the
// flags both builds are given.
type upgradeNamespace struct {
	ns   string
	args []string
	// vms are the VMs of the test (the barrier VM aside) and the phase/reason each must
	// reach under the earlier build.
	vms map[string]string
	c   *controller
	// watch prints every version of the namespace's VMs from the upgrade's start.
	watch *kubectlWatch
	// before is the namespace as the earlier build left it.
	before upgradeState
}

// sampled are the VMs whose usage the controller samples: those that run, but the paused one.
func (s *upgradeNamespace) sampled() []string {
	var names []string
	for name, want := range s.vms {
		if want == "Active/ServerReady" && name != "paused" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// writeRequests sums rest_client_requests_total over the methods that write.
func writeRequests(exposition string) (total int, byMethod map[string]int) {
	byMethod = map[string]int{}
	method := regexp.MustCompile(`method="([A-Z]+)"`)
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		labels, v, ok := strings.Cut(line, "} ")
		m := method.FindStringSubmatch(labels)
		n, err := strconv.ParseFloat(v, 64)
		if !ok || m == nil || err != nil || m[1] == "GET" {
			continue
		}
		byMethod[m[1]] += int(n)
		total += int(n)
	}
	return total, byMethod
}

// TestUpgrade upgrades the controller, as a user does, from the build of upgradeFrom to this
// one while VMs of every kind run: under --root-disk claim, VMs with a disk (one grown, one
// retained on deletion), placed on a node of the test's own, under evictionStrategy Block (a
// PodDisruptionBudget) and Replace, under the run strategies Once and Manual (started, and
// not started), stopped (action inactive) and paused; under --root-disk ephemeral, a VM and
// one under Block. Under the earlier build and its CRD each reaches its phase; the earlier
// controller is stopped (SIGTERM), this build's CRD applied, and this build started with the
// same flags. Once it has reconciled every VM (its barrier), the test checks that nothing was
// lost or restarted: the same server pods (UID, and not one write: the same resourceVersion),
// the same claims and budgets (UID, none being deleted, not written either), and each VM's
// status as it was (phase, reason, conditions, server, disk); and it counts the new
// controller's writes to each VM (a watch of the VMs sees every version: at most one each)
// and its write requests in all (at most one a VM). Both builds sample usage every 2 s, so
// that the VMs carry usage in their status, as VMs that have run a while do.
//
// Not parallel: it applies the earlier build's CRD, which is the whole cluster's; the other
// tests, parallel ones, wait until it has ended, and this build's CRD is back.
func TestUpgrade(t *testing.T) {
	bin, oldCRDs := earlierBuild(t, upgradeFrom)
	t.Cleanup(func() { installCRDs(t) }) // this build's CRD for the tests after, whatever happened
	applyCRDsFrom(t, oldCRDs)

	group := "upgrade-" + randomSuffix(t)
	node := newNode(t, nodeSpec{Labels: map[string]string{"placement.e2e.cloudnative.czs/group": group}})

	claims := &upgradeNamespace{ns: testNamespace(t), args: []string{"--workers", "1", "--root-disk", "claim", "--usage-interval", "2s"}, vms: map[string]string{
		"plain": "Active/ServerReady", "placed": "Active/ServerReady", "block": "Active/ServerReady", "replace": "Active/ServerReady",
		"once": "Active/ServerReady", "manual": "Active/ServerReady", "idle": "Inactive/NotStarted", "stopped": "Inactive/ServerStopped",
		"paused": "Active/ServerReady", "retain": "Active/ServerReady", "grown": "Active/ServerReady",
		"unschedulable": "Creating/Unschedulable", "pullfails": "Creating/ImagePullFailing", "shutdown": "Inactive/GuestShutDown",
		"crashed": "Failed/ServerFailed", "invalid": "Failed/InvalidSpec",
	}}
	ephemeral := &upgradeNamespace{ns: testNamespace(t), args: []string{"--workers", "1", "--root-disk", "ephemeral", "--usage-interval", "2s"}, vms: map[string]string{
		"eph": "Active/ServerReady", "eph-block": "Active/ServerReady",
	}}
	spaces := []*upgradeNamespace{claims, ephemeral}
	for _, s := range spaces {
		s.c = runController(t, bin, s.ns, s.args...)
		s.c.waitReady(t)
	}

	vm := func(ns, name, spec string) string {
		return fmt.Sprintf("---\napiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: %s, namespace: %s}\nspec:\n  resource: {cpu: 100m, memory: 64Mi, rootDisk: 1Gi}\n%s", name, ns, spec)
	}
	ns := claims.ns
	apply(t, vm(ns, "plain", "  action: active\n")+
		vm(ns, "placed", "  action: active\n  placement:\n"+ownNodes(group)+fmt.Sprintf(`    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [%s]}]
`, node))+
		vm(ns, "block", "  action: active\n  evictionStrategy: Block\n")+
		vm(ns, "replace", "  action: active\n  evictionStrategy: Replace\n")+
		vm(ns, "once", "  action: once\n")+
		vm(ns, "manual", "  action: manual\n")+
		vm(ns, "idle", "  action: manual\n")+
		vm(ns, "stopped", "  action: inactive\n")+
		vm(ns, "paused", "  action: active\n")+
		vm(ns, "retain", "  action: active\n  rootDiskReclaimPolicy: Retain\n")+
		vm(ns, "grown", "  action: active\n")+
		vm(ns, "unschedulable", "  action: active\n  placement: {nodeSelector: {placement.e2e.cloudnative.czs/group: none-"+group+"}}\n")+
		vm(ns, "pullfails", "  action: active\n  image: pull-fails.invalid/vm:1\n")+
		vm(ns, "shutdown", "  action: rerunOnFailure\n")+
		vm(ns, "crashed", "  action: once\n")+
		fmt.Sprintf("---\napiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: invalid, namespace: %s}\nspec: {action: active, resource: {cpu: 100m, memory: 0, rootDisk: 1Gi}}\n", ns))
	apply(t, vm(ephemeral.ns, "eph", "  action: active\n")+vm(ephemeral.ns, "eph-block", "  action: active\n  evictionStrategy: Block\n"))

	// What a user does to running VMs, and what becomes of some: start a Manual one (as
	// kubectl vm start does), pause one, grow one's disk; a guest shuts down, one crashes.
	kubectl(t, "-n", ns, "annotate", vmRes, "manual", "cloudnative.czs/startRequestedAt="+time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	waitPhase(t, ns, "paused", "Active", "ServerReady", 3*time.Minute)
	kubectl(t, "-n", ns, "annotate", vmRes, "paused", "cloudnative.czs/paused=true")
	waitPhase(t, ns, "grown", "Active", "ServerReady", 3*time.Minute)
	waitResizable(t, ns, "grown-server")
	kubectl(t, "-n", ns, "patch", vmRes, "grown", "--type=merge", "-p", `{"spec":{"resource":{"rootDisk":"2Gi"}}}`)
	waitPhase(t, ns, "shutdown", "Active", "ServerReady", 3*time.Minute)
	endServer(t, ns, "shutdown", "Succeeded")
	waitPhase(t, ns, "crashed", "Active", "ServerReady", 3*time.Minute)
	endServer(t, ns, "crashed", "Failed")

	for _, s := range spaces {
		for name, want := range s.vms {
			phase, reason, _ := strings.Cut(want, "/")
			waitPhase(t, s.ns, name, phase, reason, 3*time.Minute)
		}
	}
	eventually(t, 3*time.Minute, func() (bool, string) {
		got := condition(ns, "paused", "Paused")
		return got == "True/Paused", "paused: condition Paused " + got
	})
	eventually(t, 3*time.Minute, func() (bool, string) {
		got := field(ns, "pvc/grown-rootdisk", ".status.capacity.storage") + " " + vmField(ns, "grown", ".status.rootDisk.capacity")
		return got == "2Gi 2Gi", "grown: claim capacity, status.rootDisk.capacity " + got
	})
	for _, b := range []struct{ ns, vm string }{{ns, "block"}, {ephemeral.ns, "eph-block"}} {
		eventually(t, 2*time.Minute, func() (bool, string) {
			got := field(b.ns, "pdb/"+b.vm+"-block-eviction", ".status.currentHealthy}/{.status.disruptionsAllowed")
			return got == "1/0", b.vm + ": budget currentHealthy/disruptionsAllowed " + got
		})
	}
	if got := serverNode(ns, "placed"); got != node {
		t.Fatalf("placed: server on node %q, want the test's %s", got, node)
	}

	// Each running VM's usage is in its status, as on a cluster where VMs have run a while.
	for _, s := range spaces {
		for _, name := range s.sampled() {
			eventually(t, 2*time.Minute, func() (bool, string) {
				got := vmField(s.ns, name, ".status.server.usage.cpu")
				return got != "", name + ": no usage in its status"
			})
		}
	}

	// The earlier build has done all it had to (its barrier), and stops; this build's CRD is
	// applied. The state is taken after that: a CRD's change ends every watch of its objects,
	// so the watch of the VMs starts after it.
	for _, s := range spaces {
		s.c.barrier(t)
		if err := s.c.stop(t); err != nil {
			t.Fatalf("the earlier controller (%s) exited with %v after SIGTERM\n%s", s.ns, err, s.c.tail(20))
		}
	}
	upgradeStart := time.Now()
	installCRDs(t)
	for _, s := range spaces {
		s.before = takeUpgradeState(t, s.ns)
		// Every version of the VMs from here on: the listing first (a line a VM, the
		// barrier's included), then one line a write.
		s.watch = startKubectlWatch(t, "-n", s.ns, "get", vmRes, "--watch", "-o",
			`jsonpath={.metadata.name} {.metadata.resourceVersion}{"\n"}`)
		eventually(t, time.Minute, func() (bool, string) {
			s.watch.running(t)
			n := len(s.watch.lines())
			return n == len(s.before.vms), fmt.Sprintf("the watch listed %d VMs of %d", n, len(s.before.vms))
		})
	}

	// This build, with the same flags.
	for _, s := range spaces {
		s.c = runController(t, controllerBinary(t), s.ns, s.args...)
	}
	// Every reconcile of the new controller is done (its barrier), after it has sampled the
	// usage of each running VM once (which it writes only where the usage moved).
	for _, s := range spaces {
		for _, name := range s.sampled() {
			sample := fmt.Sprintf(`vmcontroller_vm_cpu_usage_cores{name=%q,namespace=%q}`, name, s.ns)
			eventually(t, 2*time.Minute, func() (bool, string) {
				return metric(s.c.scrape(t), sample) >= 0, "not yet sampled: " + sample
			})
		}
		s.c.barrier(t)
	}
	t.Logf("upgraded: this build's CRD applied, the controllers started and every VM reconciled in %s", time.Since(upgradeStart).Round(time.Second))

	for _, s := range spaces {
		after := takeUpgradeState(t, s.ns)
		// The watch has seen every write up to the barrier's status (the VMs of one
		// namespace come in the order of their resourceVersions).
		barrierRV := after.vms[barrierVM].Metadata.ResourceVersion
		eventually(t, time.Minute, func() (bool, string) {
			s.watch.running(t)
			return slices.Contains(s.watch.lines(), barrierVM+" "+barrierRV), "the watch has not seen the barrier VM at " + barrierRV
		})
		writes := map[string]int{}
		for _, line := range s.watch.lines()[len(s.before.vms):] {
			name, _, _ := strings.Cut(line, " ")
			writes[name]++
		}
		exposition := s.c.scrape(t)
		total, byMethod := writeRequests(exposition)
		t.Logf("%s (%s): the new controller reconciled %v times and sent %d writes %v; versions of each VM written: %v",
			s.ns, strings.Join(s.args, " "), reconciles(exposition), total, byMethod, writes)
		// Its requests that write: the barrier's status, and a status write for each VM the
		// new version reports differently (one with a disk gains status.rootDisk.request,
		// which bbcaa93 did not write). None for usage that has not moved: a new process takes
		// the usage in a status as written at its first sample.
		if total > len(s.before.vms) {
			t.Errorf("%s: the new controller sent %d write requests %v, more than one a VM (%d)", s.ns, total, byMethod, len(s.before.vms))
		}

		for name, old := range s.before.vms {
			now, ok := after.vms[name]
			switch {
			case !ok:
				t.Errorf("%s/%s: the VM is gone after the upgrade", s.ns, name)
				continue
			case now.Metadata.UID != old.Metadata.UID || now.Metadata.DeletionTimestamp != nil:
				t.Errorf("%s/%s: the VM is another (%s, was %s) or being deleted (%v)", s.ns, name, now.Metadata.UID, old.Metadata.UID, now.Metadata.DeletionTimestamp)
			}
			if name == barrierVM {
				continue
			}
			if b, a := statusOf(t, old).summary(), statusOf(t, now).summary(); a != b {
				t.Errorf("%s/%s: status after the upgrade\n  %s\nwas\n  %s", s.ns, name, a, b)
			}
			// A VM's status is written at most once, where this build says more than the
			// earlier one did; nothing else of the VM is written.
			if writes[name] > 1 {
				t.Errorf("%s/%s: written %d times during the upgrade, want at most once", s.ns, name, writes[name])
			}
		}
		for kind, objs := range map[string][2]map[string]object{
			"server pod": {s.before.pods, after.pods}, "claim": {s.before.claims, after.claims}, "budget": {s.before.budgets, after.budgets},
		} {
			before, now := objs[0], objs[1]
			for name, old := range before {
				o, ok := now[name]
				switch {
				case !ok:
					t.Errorf("%s/%s: %s deleted by the upgrade", s.ns, name, kind)
				case o.Metadata.UID != old.Metadata.UID:
					t.Errorf("%s/%s: %s replaced by the upgrade (UID %s, was %s)", s.ns, name, kind, o.Metadata.UID, old.Metadata.UID)
				case o.Metadata.DeletionTimestamp != nil:
					t.Errorf("%s/%s: %s being deleted after the upgrade", s.ns, name, kind)
				case o.Metadata.ResourceVersion != old.Metadata.ResourceVersion:
					t.Errorf("%s/%s: %s written during the upgrade (resourceVersion %s, was %s; by %s)", s.ns, name, kind, o.Metadata.ResourceVersion, old.Metadata.ResourceVersion, o.lastWriter())
				}
			}
			for name := range now {
				if _, ok := before[name]; !ok {
					t.Errorf("%s/%s: %s made by the upgrade", s.ns, name, kind)
				}
			}
		}
	}
	for name, want := range claims.vms {
		if _, ok := claims.before.claims[name+"-rootdisk"]; strings.HasPrefix(want, "Active/") && !ok {
			t.Errorf("%s/%s: no claim under the earlier build", claims.ns, name)
		}
	}
	if len(ephemeral.before.claims) != 0 {
		t.Errorf("claims under --root-disk ephemeral: %v", ephemeral.before.claims)
	}
}
