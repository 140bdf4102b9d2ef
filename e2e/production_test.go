//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The production tests deploy as docs/deploying.md says: replicas that elect a leader, and a controller
// that holds only the permissions `vm-controller manifests` grants.

// leaderOf returns the Lease's holder.
func leaderOf(ns, lease string) string {
	holder, _ := leaseOf(ns, lease)
	return holder
}

// leaseOf returns the Lease's holder and how many times it has changed hands
// (spec.leaseTransitions); "" and -1 if there is no such Lease.
func leaseOf(ns, lease string) (holder string, transitions int) {
	out, err := kubectlErr("-n", ns, "get", "lease", lease, "-o", "jsonpath={.spec.leaseTransitions}/{.spec.holderIdentity}")
	if err != nil {
		return "", -1
	}
	n, holder, _ := strings.Cut(out, "/")
	transitions, _ = strconv.Atoi(n) // absent before the first transition: 0
	return holder, transitions
}

// waitExit waits for a controller that was told to stop to exit, and returns its exit error.
// The deadline only stops a hung process.
func waitExit(t *testing.T, c *controller) error {
	t.Helper()
	select {
	case err := <-c.done:
		return err
	case <-time.After(3 * time.Minute):
		t.Fatalf("the controller did not exit within 3m\n%s", c.tail(20))
		return nil
	}
}

// TestLeaderElection runs replicas of the controller: exactly one leads. SIGTERM of the leader
// hands the Lease over: the old leader releases it before it exits, and the standby takes it
// and makes Active the VMs created after the old leader stopped. kill -9 of the new leader
// leaves the Lease to expire: a third replica takes it and makes Active the VMs created after
// the kill. Each handoff is a new holder and one more leaseTransitions; no VM ever has two
// pods. How long the handoffs take is measured by the bench, not asserted here; the test
// logs what it saw.
func TestLeaderElection(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	const lease = "vm-controller"
	replica := func(id string) *controller {
		return startController(t, ns, "--leader-elect", "--lease-namespace", ns, "--holder-identity", id)
	}
	leads := func(c *controller) float64 { return metric(c.scrape(t), "vmcontroller_leader") }
	allActive := func(n int) {
		t.Helper()
		eventually(t, 3*time.Minute, func() (bool, string) {
			c := countActive(t, ns)
			if len(c.dup) > 0 {
				t.Fatalf("VMs with more than one pod: %v", c.dup)
			}
			return c.active == n && c.pods == n, fmt.Sprintf("%d/%d active, %d pods", c.active, c.vms, c.pods)
		})
	}
	create := func(prefix string) {
		t.Helper()
		if _, _, err := runKubectl(vmList(ns, prefix, 20), "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}

	r := map[string]*controller{"a": replica("a"), "b": replica("b")}
	var first string
	eventually(t, 3*time.Minute, func() (bool, string) {
		first = leaderOf(ns, lease)
		return first == "a" || first == "b", "lease holder " + first
	})
	second := map[string]string{"a": "b", "b": "a"}[first]
	// Exactly one leads, as each replica's own metric says; both are ready (caches synced),
	// the standby too.
	eventually(t, 3*time.Minute, func() (bool, string) {
		l1, l2 := leads(r[first]), leads(r[second])
		return l1 == 1 && l2 == 0, fmt.Sprintf("vmcontroller_leader: %s=%v %s=%v", first, l1, second, l2)
	})
	for _, c := range r {
		c.waitReady(t)
	}
	create("le")
	allActive(20)

	// Graceful handoff: SIGTERM the leader while VMs are being created.
	create("g")
	_, before := leaseOf(ns, lease)
	start := time.Now()
	if err := r[first].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(t, r[first]); err != nil {
		t.Errorf("the old leader exited with %v after SIGTERM, want 0", err)
	}
	// It released the Lease before it exited; one that merely stopped renewing would still
	// be named in it until it expired.
	if holder, _ := leaseOf(ns, lease); holder == first {
		t.Errorf("the Lease still names %s after it exited: it was not released", first)
	}
	create("h") // after the old leader stopped: only the new one can make these Active
	eventually(t, 3*time.Minute, func() (bool, string) {
		holder, _ := leaseOf(ns, lease)
		return holder == second && leads(r[second]) == 1, fmt.Sprintf("lease holder %q, vmcontroller_leader of %s %v", holder, second, leads(r[second]))
	})
	graceful := time.Since(start)
	if _, after := leaseOf(ns, lease); after <= before {
		t.Errorf("leaseTransitions %d -> %d across the SIGTERM handoff, want it to grow", before, after)
	}
	allActive(60)

	// Crash: a third replica stands by (ready, not leading), then the leader is killed with
	// SIGKILL and cannot release the Lease.
	r["c"] = replica("c")
	r["c"].waitReady(t)
	if l := leads(r["c"]); l != 0 {
		t.Fatalf("replica c leads (vmcontroller_leader %v) while %s holds the Lease", l, second)
	}
	_, before = leaseOf(ns, lease)
	start = time.Now()
	r[second].kill()
	create("k") // after the leader died: only c can make these Active
	eventually(t, 3*time.Minute, func() (bool, string) {
		holder, _ := leaseOf(ns, lease)
		return holder == "c" && leads(r["c"]) == 1, fmt.Sprintf("lease holder %q, vmcontroller_leader of c %v", holder, leads(r["c"]))
	})
	crash := time.Since(start)
	if _, after := leaseOf(ns, lease); after <= before {
		t.Errorf("leaseTransitions %d -> %d across the takeover after SIGKILL, want it to grow", before, after)
	}
	allActive(80)
	t.Logf("seen by polling: new leader %s after SIGTERM, %s after SIGKILL (lease duration 15s, the default)", graceful.Round(time.Millisecond), crash.Round(time.Millisecond))
}

// TestServiceAccountRBAC applies what `vm-controller manifests` prints, takes a token of its
// ServiceAccount from the TokenRequest API, and runs the controller with that token alone
// through a VM's life.
func TestServiceAccountRBAC(t *testing.T) {
	t.Parallel()
	vms := testNamespace(t) // the namespace it manages
	ctl := testNamespace(t) // the namespace it runs in
	out, err := exec.Command(controllerBinary(t), "manifests", "--namespace", ctl, "--watch-namespace", vms).Output()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runKubectl(string(out), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "clusterrole,clusterrolebinding", "vm-controller-"+ctl, "--ignore-not-found")
	})
	token := kubectl(t, "-n", ctl, "create", "token", "vm-controller", "--duration", "1h")
	server := kubectl(t, "config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
	ca := kubectl(t, "config", "view", "--raw", "--minify", "--flatten", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
	saConfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(saConfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: sa, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: sa, namespace: %s}}]
current-context: c
`, server, ca, token, ctl)), 0o600); err != nil {
		t.Fatal(err)
	}
	// The token is what it should be, and no more.
	for _, check := range []struct {
		args []string
		want string
	}{
		{[]string{"auth", "can-i", "patch", "virtualmachines.cloudnative.czs/status", "-n", vms}, "yes"},
		{[]string{"auth", "can-i", "create", "pods", "-n", vms}, "yes"},
		{[]string{"auth", "can-i", "create", "pods", "-n", ctl}, "no"},
		{[]string{"auth", "can-i", "delete", "nodes"}, "no"},
		{[]string{"auth", "can-i", "get", "secrets", "-n", vms}, "no"},
		{[]string{"auth", "can-i", "update", "leases.coordination.k8s.io", "-n", ctl}, "yes"},
	} {
		got, _, _ := runKubectl("", append([]string{"--kubeconfig", saConfig}, check.args...)...)
		if got != check.want {
			t.Errorf("kubectl %s = %q, want %q", strings.Join(check.args, " "), got, check.want)
		}
	}

	startController(t, vms, "--kubeconfig", saConfig, "--leader-elect", "--lease-namespace", ctl)
	exampleVM(t, vms)
	waitPhase(t, vms, "test-vm", "Active", "ServerReady", 3*time.Minute)
	kubectl(t, "-n", vms, "patch", "vm", "test-vm", "--type=merge", "-p", `{"spec":{"resource":{"cpu":3}}}`)
	eventually(t, 3*time.Minute, func() (bool, string) {
		_, p, c := podOf(vms, "test-vm")
		return p == "Running" && c == "3", "pod " + p + " cpu " + c
	})
	waitPhase(t, vms, "test-vm", "Active", "ServerReady", 3*time.Minute)
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: fraction, namespace: %s}\nspec: {resource: {cpu: 1, memory: 64Mi, rootDisk: \"1.5\"}}\n", vms))
	waitPhase(t, vms, "fraction", "Failed", "InvalidSpec", 3*time.Minute)
	kubectl(t, "-n", vms, "delete", "vm", "test-vm", "--timeout=3m")
	if u, _, _ := podOf(vms, "test-vm"); u != "" {
		t.Errorf("pod %s left after the VM was deleted", u)
	}
	// Events are posted in the background: the wait is for it to be stored.
	eventually(t, 3*time.Minute, func() (bool, string) {
		e := kubectl(t, "-n", vms, "get", "events", "--field-selector", "involvedObject.name=fraction", "-o", "jsonpath={.items[*].reason}")
		return strings.Contains(e, "InvalidSpec"), fmt.Sprintf("no InvalidSpec event recorded with the ServiceAccount's token: %q", e)
	})
}

func httpStatus(t testing.TB, url string) int {
	t.Helper()
	resp, err := httpGet(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
