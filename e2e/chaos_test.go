//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"
)

// The chaos tests inject faults and check that the controller loses nothing: it is killed in
// the middle of a burst, the API server restarts under it, its watches expire, VMs are deleted
// while their servers are being made, another writer races its status writes, and someone
// deletes its servers. Tests that disturb the control plane, or need more of it than the
// shared cluster has, run on a cluster of their own (newCluster), so the other tests never
// notice.

// census is what a namespace holds: its VMs and the server pods, as one look at the cluster.
type census struct {
	vms  map[string]vmInfo  // by name
	pods map[string]podInfo // by name
}

type vmInfo struct {
	uid, phase, reason, serverID string
	generation, observed         int64
	deleting                     bool
}

type podInfo struct {
	uid, vmUID, phase, cpu string
	deleting               bool
}

// takeCensus reads the VMs and the server pods of ns (pods carry their VM's UID in a label).
func takeCensus(t *testing.T, k kube, ns string) census {
	t.Helper()
	var vms struct {
		Items []struct {
			Metadata struct {
				Name, UID         string
				Generation        int64
				DeletionTimestamp *string
			}
			Status struct {
				Phase, Reason      string
				ObservedGeneration int64
				Server             struct{ ID string }
			}
		}
	}
	if err := json.Unmarshal([]byte(k.must(t, "-n", ns, "get", "virtualmachines.cloudnative.czs", "-o", "json")), &vms); err != nil {
		t.Fatal(err)
	}
	var pods struct {
		Items []struct {
			Metadata struct {
				Name, UID         string
				Labels            map[string]string
				DeletionTimestamp *string
			}
			Spec struct {
				Containers []struct {
					Resources struct{ Limits map[string]string }
				}
			}
			Status struct{ Phase string }
		}
	}
	if err := json.Unmarshal([]byte(k.must(t, "-n", ns, "get", "pods", "-l", "cloudnative.czs/vm-uid", "-o", "json")), &pods); err != nil {
		t.Fatal(err)
	}
	c := census{vms: map[string]vmInfo{}, pods: map[string]podInfo{}}
	for _, v := range vms.Items {
		c.vms[v.Metadata.Name] = vmInfo{uid: v.Metadata.UID, phase: v.Status.Phase, reason: v.Status.Reason, serverID: v.Status.Server.ID,
			generation: v.Metadata.Generation, observed: v.Status.ObservedGeneration, deleting: v.Metadata.DeletionTimestamp != nil}
	}
	for _, p := range pods.Items {
		info := podInfo{uid: p.Metadata.UID, vmUID: p.Metadata.Labels["cloudnative.czs/vm-uid"], phase: p.Status.Phase,
			deleting: p.Metadata.DeletionTimestamp != nil}
		if len(p.Spec.Containers) > 0 {
			info.cpu = p.Spec.Containers[0].Resources.Limits["cpu"]
		}
		c.pods[p.Metadata.Name] = info
	}
	return c
}

// duplicates names the VMs that have more than one pod: never allowed, not even for a moment.
func (c census) duplicates() []string {
	perVM := map[string]int{}
	for _, p := range c.pods {
		perVM[p.vmUID]++
	}
	var dup []string
	for name, v := range c.vms {
		if perVM[v.uid] > 1 {
			dup = append(dup, name)
		}
	}
	sort.Strings(dup)
	return dup
}

// orphans names the pods whose VM is gone.
func (c census) orphans() []string {
	uids := map[string]bool{}
	for _, v := range c.vms {
		uids[v.uid] = true
	}
	var out []string
	for name, p := range c.pods {
		if !uids[p.vmUID] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// podOf returns the pod of the VM called name (by the VM's UID, whatever the pod's name).
func (c census) podOf(name string) (podInfo, bool) {
	v, ok := c.vms[name]
	if !ok {
		return podInfo{}, false
	}
	for _, p := range c.pods {
		if p.vmUID == v.uid {
			return p, true
		}
	}
	return podInfo{}, false
}

// activeWithPod counts the VMs that are Active with their status naming their one running pod.
func (c census) activeWithPod() int {
	n := 0
	for name, v := range c.vms {
		if p, ok := c.podOf(name); ok && v.phase == "Active" && v.reason == "ServerReady" && v.serverID == p.uid && p.phase == "Running" {
			n++
		}
	}
	return n
}

func (c census) String() string {
	return fmt.Sprintf("%d VMs, %d Active with their pod, %d pods, duplicates %v, orphans %v",
		len(c.vms), c.activeWithPod(), len(c.pods), c.duplicates(), c.orphans())
}

// waitSettled waits until the namespace holds exactly n VMs, each Active with one running pod
// that its status names, and no other pod; a VM with two pods fails the test at once. It
// looks once a second: a census of hundreds of VMs costs kubectl a moment.
func waitSettled(t *testing.T, k kube, ns string, n int, timeout time.Duration) census {
	t.Helper()
	var last census
	poll(t, timeout, time.Second, func() (bool, string) {
		last = takeCensus(t, k, ns)
		if dup := last.duplicates(); len(dup) > 0 {
			t.Fatalf("VMs with more than one pod: %v", dup)
		}
		return len(last.vms) == n && last.activeWithPod() == n && len(last.pods) == n, last.String()
	})
	return last
}

// poll is eventually with a given interval between looks.
func poll(t testing.TB, timeout, every time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s; last observation: %s", timeout, seen)
		}
		time.Sleep(every)
	}
}

// countPods counts the server pods in ns.
func countPods(k kube, ns string) int {
	out, _ := k.try("-n", ns, "get", "pods", "-l", "cloudnative.czs/vm-uid", "-o", "name")
	return strings.Count(out, "pod/")
}

// createVMs creates n small VMs named prefix-000 on, in one kubectl call.
func createVMs(t *testing.T, k kube, ns, prefix string, n int) {
	t.Helper()
	if _, _, err := k.run(vmList(ns, prefix, n), "create", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// names returns prefix-from to prefix-(to-1), as vmList names them.
func names(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s-%03d", prefix, i))
	}
	return out
}

// TestChaosKillController kills the controller with SIGKILL three times while 500 VMs are
// being created, starting a new one each time: every VM ends Active with exactly one pod, no
// VM ever has two, and no pod is left without its VM. It runs on a cluster of its own: 500
// pods need more nodes than the shared cluster has (110 pods each).
func TestChaosKillController(t *testing.T) {
	t.Parallel()
	const n = 500
	k := newCluster(t, 5)
	ns := k.namespace(t)
	// A client-side limit paces the burst (run's default is none), so that each kill lands
	// while work is outstanding; the test asserts the outcome, not how long it took.
	start := func() *controller {
		return startController(t, ns, "--kubeconfig", k.kubeconfig, "--workers", "8", "--qps", "20", "--burst", "20")
	}
	c := start()
	began := time.Now()
	created := make(chan error, 1)
	go func() { // the kills come while kubectl still creates VMs, in lists of 100
		for i := range n / 100 {
			if _, _, err := k.run(vmList(ns, fmt.Sprintf("vm%d", i), 100), "create", "-f", "-"); err != nil {
				created <- err
				return
			}
		}
		created <- nil
	}()
	last := 0
	for i, at := range []int{100, 250, 400} {
		var pods int
		eventually(t, 3*time.Minute, func() (bool, string) {
			pods = countPods(k.kube, ns)
			// Each controller gets to make some pods before it is killed.
			return pods >= at && pods >= last+50, fmt.Sprintf("%d pods", pods)
		})
		if pods >= n {
			t.Fatalf("kill %d: all %d pods exist already; the burst was over", i+1, n)
		}
		c.kill()
		t.Logf("kill %d at %d pods, %s after the creates began", i+1, pods, time.Since(began).Round(100*time.Millisecond))
		last = pods
		c = start()
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	cs := waitSettled(t, k.kube, ns, n, 5*time.Minute)
	if o := cs.orphans(); len(o) > 0 {
		t.Errorf("pods without their VM: %v", o)
	}
	t.Logf("%d VMs Active with one pod each %s after the creates began, across 3 kills", n, time.Since(began).Round(100*time.Millisecond))
}

// TestChaosAPIServer runs the controller on a cluster whose API server has no watch cache and
// compacts etcd every second, so that a watch that has to resume from where it broke off is
// refused with 410 Gone once a second has passed. On it, in turn: the API server is killed
// and restarted during a burst, and the controller's connection is cut while VMs and pods
// change (its watches then expire, and only a relist tells it what happened).
func TestChaosAPIServer(t *testing.T) {
	t.Parallel()
	k := newCluster(t, 3,
		"--extra-args", "kube-apiserver=watch-cache=false",
		"--extra-args", "kube-apiserver=etcd-compaction-interval=1s",
		// Without the API server for a few seconds, components that elect a leader lose
		// their lease and exit; these ones are alone.
		"--extra-args", "kube-controller-manager=leader-elect=false",
		"--extra-args", "kube-scheduler=leader-elect=false")

	t.Run("restart during a burst", func(t *testing.T) {
		const n = 150
		ns := k.namespace(t)
		// All VMs exist before the controller starts: a kubectl still creating them would
		// fail with the API server, and the burst is the controller's.
		createVMs(t, k.kube, ns, "vm", n)
		// Paced by a client-side limit (run's default is none), so the restart lands mid-burst.
		c := startController(t, ns, "--kubeconfig", k.kubeconfig, "--workers", "8", "--qps", "20", "--burst", "20")
		eventually(t, 3*time.Minute, func() (bool, string) {
			pods := countPods(k.kube, ns)
			return pods >= 30, fmt.Sprintf("%d pods", pods)
		})
		before := countPods(k.kube, ns)
		k.restartAPIServer(t, 3*time.Second)
		if before >= n {
			t.Fatalf("all %d pods existed before the API server went down; the burst was over", n)
		}
		began := time.Now()
		cs := waitSettled(t, k.kube, ns, n, 3*time.Minute)
		if o := cs.orphans(); len(o) > 0 {
			t.Errorf("pods without their VM: %v", o)
		}
		select {
		case err := <-c.done:
			t.Fatalf("the controller exited when the API server went away: %v\n%s", err, c.tail(20))
		default:
		}
		if code := httpStatus(t, "http://"+c.addr(t, "health")+"/readyz"); code != 200 {
			t.Errorf("/readyz = %d after the API server came back", code)
		}
		t.Logf("down at %d of %d pods; all Active %s after the API server was back", before, n, time.Since(began).Round(100*time.Millisecond))
	})

	t.Run("watch expiry", func(t *testing.T) {
		const n = 40
		ns := k.namespace(t)
		proxy := newCutProxy(t, k.apiServerAddr(t))
		// No resync: whatever the controller learns after the cut, it learns by relisting.
		c := startController(t, ns, "--kubeconfig", k.kubeconfigVia(t, proxy.addr), "--resync", "0", "--workers", "8")
		createVMs(t, k.kube, ns, "vm", n)
		before := waitSettled(t, k.kube, ns, n, 3*time.Minute)
		rv := listResourceVersion(t, k.kube, ns)

		proxy.cut()
		resized, stopped, deleted, podless, untouched := names("vm", 0, 10), names("vm", 10, 20), names("vm", 20, 30), names("vm", 30, 35), names("vm", 35, 40)
		k.must(t, append([]string{"-n", ns, "patch", "vm", "--type=merge", "-p", `{"spec":{"resource":{"cpu":"20m"}}}`}, resized...)...)
		k.must(t, append([]string{"-n", ns, "patch", "vm", "--type=merge", "-p", `{"spec":{"action":"inactive"}}`}, stopped...)...)
		k.must(t, append([]string{"-n", ns, "delete", "vm", "--wait=false"}, deleted...)...)
		var pods []string
		for _, vm := range podless {
			pods = append(pods, vm+"-server")
		}
		k.must(t, append([]string{"-n", ns, "delete", "pod", "--grace-period=0", "--force"}, pods...)...)
		createVMs(t, k.kube, ns, "new", 10)
		// A watch from where the controller's broke off is now refused as too old.
		eventually(t, 3*time.Minute, func() (bool, string) {
			out, err := k.try("get", "--raw", "/apis/cloudnative.czs/v1alpha1/namespaces/"+ns+"/virtualmachines?watch=1&timeoutSeconds=1&resourceVersion="+rv)
			seen := out + fmt.Sprint(err)
			return strings.Contains(seen, `"code":410`) || strings.Contains(seen, "Expired"), "watch from " + rv + ": " + lastLines(seen, 2)
		})
		expired := strings.Count(readFile(t, k.componentLog("kube-apiserver")), "required revision has been compacted")
		proxy.restore(t)
		began := time.Now()

		want := func(cs census) []string {
			var wrong []string
			check := func(vm string, ok bool, what string) {
				if !ok {
					v := cs.vms[vm]
					p, _ := cs.podOf(vm)
					wrong = append(wrong, fmt.Sprintf("%s (%s/%s, generation %d observed %d, pod %s %s cpu %s) is not %s",
						vm, v.phase, v.reason, v.generation, v.observed, p.uid, p.phase, p.cpu, what))
				}
			}
			active := func(vm string) (podInfo, bool) {
				v := cs.vms[vm]
				p, ok := cs.podOf(vm)
				return p, ok && v.phase == "Active" && v.reason == "ServerReady" && v.serverID == p.uid && p.phase == "Running" && v.observed == v.generation
			}
			for _, vm := range resized {
				p, ok := active(vm)
				check(vm, ok && p.cpu == "20m" && p.uid != before.pods[vm+"-server"].uid, "Active on a new pod of 20m")
			}
			for _, vm := range stopped {
				_, hasPod := cs.podOf(vm)
				check(vm, cs.vms[vm].phase == "Inactive" && cs.vms[vm].reason == "ServerStopped" && !hasPod, "Inactive without a pod")
			}
			for _, vm := range deleted {
				_, exists := cs.vms[vm]
				_, hasPod := cs.pods[vm+"-server"]
				check(vm, !exists && !hasPod, "gone with its pod")
			}
			for _, vm := range podless {
				p, ok := active(vm)
				check(vm, ok && p.uid != before.pods[vm+"-server"].uid, "Active on a new pod")
			}
			for _, vm := range untouched {
				p, ok := active(vm)
				check(vm, ok && p.uid == before.pods[vm+"-server"].uid, "Active on its old pod")
			}
			for _, vm := range names("new", 0, 10) {
				_, ok := active(vm)
				check(vm, ok, "Active")
			}
			if o := cs.orphans(); len(o) > 0 {
				wrong = append(wrong, fmt.Sprintf("pods without their VM: %v", o))
			}
			return wrong
		}
		eventually(t, 3*time.Minute, func() (bool, string) {
			cs := takeCensus(t, k.kube, ns)
			if dup := cs.duplicates(); len(dup) > 0 {
				t.Fatalf("VMs with more than one pod: %v", dup)
			}
			wrong := want(cs)
			return len(wrong) == 0, strings.Join(wrong, "; ")
		})
		// The controller's watches (of VMs and of pods) resumed from where they broke off and
		// were refused: the API server logs each refusal.
		if now := strings.Count(readFile(t, k.componentLog("kube-apiserver")), "required revision has been compacted"); now <= expired {
			t.Errorf("the API server refused no watch after the connection came back (%d refusals before, %d after): the watches did not expire", expired, now)
		}
		t.Logf("every change made while the controller was cut off done %s after it was back", time.Since(began).Round(100*time.Millisecond))
		if !c.running() {
			t.Errorf("the controller exited: %v", c.exitErr)
		}
	})
}

// listResourceVersion is the resourceVersion of a list of the VMs of ns: where a watch that
// starts now would begin.
func listResourceVersion(t *testing.T, k kube, ns string) string {
	t.Helper()
	var list struct {
		Metadata struct{ ResourceVersion string }
	}
	out := k.must(t, "get", "--raw", "/apis/cloudnative.czs/v1alpha1/namespaces/"+ns+"/virtualmachines?limit=1")
	if err := json.Unmarshal([]byte(out), &list); err != nil || list.Metadata.ResourceVersion == "" {
		t.Fatalf("no resourceVersion in %s: %v", out, err)
	}
	return list.Metadata.ResourceVersion
}

func readFile(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestChaosDeleteWhileCreating deletes VMs at every stage of their creation: before the
// controller has acted, while their pods are being created, and while their servers are
// Pending. The deletions orphan the dependents (--cascade=orphan), so the garbage collector
// takes no pod away: only the controller's finalizer can, and no pod may be left behind.
func TestChaosDeleteWhileCreating(t *testing.T) {
	t.Parallel()
	k := sharedKube()
	ns := k.namespace(t)
	startController(t, ns)
	del := func(vms []string) {
		t.Helper()
		k.must(t, append([]string{"-n", ns, "delete", "vm", "--cascade=orphan", "--wait=false"}, vms...)...)
	}
	// Servers no node can hold stay Pending, their VMs Creating, as long as the test likes.
	var pending strings.Builder
	for _, vm := range names("pending", 0, 5) {
		fmt.Fprintf(&pending, "apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: %s, namespace: %s}\nspec: {resource: {cpu: 1000, memory: 16Mi, rootDisk: 100Mi}}\n---\n", vm, ns)
	}
	apply(t, pending.String())
	createVMs(t, k, ns, "vm", 40)
	del(names("vm", 0, 20)) // at once: most before the controller has acted on them
	eventually(t, 3*time.Minute, func() (bool, string) {
		cs := takeCensus(t, k, ns)
		made := 0
		for _, vm := range names("vm", 20, 40) {
			if _, ok := cs.podOf(vm); ok {
				made++
			}
		}
		return made >= 3, fmt.Sprintf("%d of the pods of vm-020 to vm-039 made", made)
	})
	del(names("vm", 20, 40)) // while their pods are being made
	eventually(t, 3*time.Minute, func() (bool, string) {
		cs := takeCensus(t, k, ns)
		n := 0
		for _, vm := range names("pending", 0, 5) {
			if p, ok := cs.podOf(vm); ok && cs.vms[vm].phase == "Creating" && p.phase == "Pending" {
				n++
			}
		}
		return n == 5, fmt.Sprintf("%d of 5 VMs Creating with a Pending pod", n)
	})
	del(names("pending", 0, 5))
	eventually(t, 3*time.Minute, func() (bool, string) {
		cs := takeCensus(t, k, ns)
		var vms []string
		for name := range cs.vms {
			vms = append(vms, name)
		}
		sort.Strings(vms)
		return len(cs.vms) == 0 && len(cs.pods) == 0, fmt.Sprintf("VMs left %v; pods left without their VM %v", vms, cs.orphans())
	})
}

// TestChaosStatusConflicts makes a second writer change every VM's labels and annotations in a
// tight loop while the controller creates their servers and then resizes them. The
// controller's writes are conditional on the resourceVersion it decided on, so a write that
// meets a newer object is refused with 409 Conflict: it decides again, records a conflict
// (not an error), and the final status is right whatever the other writer did.
func TestChaosStatusConflicts(t *testing.T) {
	t.Parallel()
	const n = 20
	k := sharedKube()
	ns := k.namespace(t)
	c := startController(t, ns)
	stop, done := make(chan struct{}), make(chan struct{})
	var passes int
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Both go through the main resource; the controller writes metadata there too (its
			// finalizer), and its status through /status, with the same precondition.
			_, _ = k.try("-n", ns, "annotate", "vm", "--all", "--overwrite", fmt.Sprintf("chaos.example.org/touch=%d", i))
			_, _ = k.try("-n", ns, "label", "vm", "--all", "--overwrite", fmt.Sprintf("chaos.example.org/touch=%d", i))
			passes++
		}
	}()
	createVMs(t, k, ns, "vm", n)
	waitSettled(t, k, ns, n, 3*time.Minute)
	k.must(t, append([]string{"-n", ns, "patch", "vm", "--type=merge", "-p", `{"spec":{"resource":{"cpu":"20m"}}}`}, names("vm", 0, n)...)...)
	eventually(t, 3*time.Minute, func() (bool, string) {
		cs := takeCensus(t, k, ns)
		resized := 0
		for _, vm := range names("vm", 0, n) {
			if p, ok := cs.podOf(vm); ok && p.cpu == "20m" {
				resized++
			}
		}
		return resized == n && cs.activeWithPod() == n, fmt.Sprintf("%d of %d resized; %s", resized, n, cs)
	})
	close(stop)
	<-done

	// With the other writer gone, the status is what the world is.
	cs := waitSettled(t, k, ns, n, 3*time.Minute)
	for _, vm := range names("vm", 0, n) {
		v := cs.vms[vm]
		ready := k.must(t, "-n", ns, "get", "vm", vm, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if v.observed != v.generation || v.generation != 2 || ready != "True" {
			t.Errorf("%s: generation %d, observedGeneration %d, Ready %q; want 2, 2, True", vm, v.generation, v.observed, ready)
		}
	}
	m := c.scrape(t)
	conflicts, errs := max(metric(m, `vmcontroller_reconcile_total{result="conflict"}`), 0), max(metric(m, `vmcontroller_reconcile_total{result="error"}`), 0) // -1: not exported yet
	// How many writes met a newer object depends on how the two writers interleave, which
	// the speed of the machine decides: none is a possible run, not a failure. So the count
	// is only logged. What the test holds the controller to is the outcome above, which the
	// other writer's changes must not spoil, and that no conflict it met was handled as an
	// error (below); that a conflict is counted as one and decided again is held by the
	// reconcile package's tests, which make one on purpose (TestControllerRetries,
	// TestStatusRouteConflict).
	t.Logf("the other writer went %d times over all %d VMs; the controller met %v conflicts, %v errors", passes, n, conflicts, errs)
	// Every reconcile counted above has logged its result by now.
	for _, line := range strings.Split(c.logText(), "\n") {
		if strings.Contains(line, "Reconcile failed") && (strings.Contains(line, "has been modified") || strings.Contains(line, "Conflict")) {
			t.Errorf("a conflict was handled as an error: %s", line)
		}
	}
}

// TestChaosServersDeleted deletes the servers of Active VMs behind the controller's back,
// three times, by force (gone at once, as when a node is drained without grace): each time
// every VM gets a new server and is Active again, and each VM's events say the server went
// missing and a new one was created.
func TestChaosServersDeleted(t *testing.T) {
	t.Parallel()
	const n = 10
	k := sharedKube()
	ns := k.namespace(t)
	startController(t, ns)
	createVMs(t, k, ns, "vm", n)
	cs := waitSettled(t, k, ns, n, 3*time.Minute)
	for round := 1; round <= 3; round++ {
		old := map[string]bool{}
		for _, p := range cs.pods {
			old[p.uid] = true
		}
		k.must(t, "-n", ns, "delete", "pods", "-l", "cloudnative.czs/vm-uid", "--grace-period=0", "--force")
		eventually(t, 3*time.Minute, func() (bool, string) {
			cs = takeCensus(t, k, ns)
			if dup := cs.duplicates(); len(dup) > 0 {
				t.Fatalf("VMs with more than one pod: %v", dup)
			}
			fresh := 0
			for _, p := range cs.pods {
				if !old[p.uid] {
					fresh++
				}
			}
			return fresh == n && cs.activeWithPod() == n && len(cs.pods) == n, fmt.Sprintf("round %d: %d new pods; %s", round, fresh, cs)
		})
	}
	// kubectl get events: each creation of a server is on record, as an Event of its own that
	// names the pod made as its related object, though every note is the same
	// (docs/reference/phases-reasons-events.md, Events: a new server's CreatingServer is an
	// Event of its own). Four pods were made for each VM: the first and three replacements.
	var missing []string
	for _, vm := range names("vm", 0, n) {
		var uids map[string]bool
		var out string
		eventually(t, 3*time.Minute, func() (bool, string) {
			out = k.must(t, "-n", ns, "get", "events.events.k8s.io", "--field-selector", "reason=CreatingServer,regarding.name="+vm,
				"-o", `jsonpath={range .items[*]}{.related.kind}/{.related.uid}{" "}{end}`)
			uids = map[string]bool{}
			for _, e := range strings.Fields(out) {
				kind, uid, _ := strings.Cut(e, "/")
				if kind == "Pod" && uid != "" {
					uids[uid] = true
				}
			}
			return len(uids) >= 4, fmt.Sprintf("%s: CreatingServer Events name the pods %q", vm, out)
		})
		if cur := cs.pods[vm+"-server"].uid; len(uids) != 4 || !uids[cur] {
			missing = append(missing, fmt.Sprintf("%s: CreatingServer Events name the pods %q, want 4 of them, the current %s among them", vm, out, cur))
		}
	}
	if len(missing) > 0 {
		t.Errorf("the creations of servers are not one Event for each pod made: %s", strings.Join(missing, "; "))
	}
	// And each says why: a Warning that the server went without the controller deleting it.
	for _, vm := range names("vm", 0, n) {
		eventually(t, 3*time.Minute, func() (bool, string) {
			out := k.must(t, "-n", ns, "get", "events.events.k8s.io", "--field-selector", "reason=ServerMissing,type=Warning,regarding.name="+vm,
				"-o", `jsonpath={range .items[*]}{.note}{"\n"}{end}`)
			return strings.Contains(out, "Server "+vm+"-server ") && strings.Contains(out, ", not by the controller;"), fmt.Sprintf("%s: ServerMissing events %q", vm, out)
		})
	}
}
