package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The production tests deploy as README says: replicas that elect a leader, and a controller
// that holds only the permissions `vm-controller manifests` grants.

// leaderOf returns the Lease's holder.
func leaderOf(ns, lease string) string {
	out, _ := kubectlErr("-n", ns, "get", "lease", lease, "-o", "jsonpath={.spec.holderIdentity}")
	return out
}

// TestLeaderElection runs replicas of the controller: exactly one leads; SIGTERM of the
// leader hands over within 2 s, kill -9 within the lease duration plus 2 s; VMs created
// across both handoffs end Active with one pod each.
func TestLeaderElection(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	const leaseDuration = 6 * time.Second
	replica := func(id string) *controller {
		return startController(t, ns, "--leader-elect", "--lease-namespace", ns, "--holder-identity", id,
			"--lease-duration", leaseDuration.String(), "--renew-deadline", "4s")
	}
	r := map[string]*controller{"a": replica("a"), "b": replica("b")}
	var first string
	eventually(t, 30*time.Second, func() (bool, string) {
		first = leaderOf(ns, "vm-controller")
		return first == "a" || first == "b", "lease holder " + first
	})
	second := map[string]string{"a": "b", "b": "a"}[first]
	// Exactly one leads, as each replica's own metric says; both are ready (caches synced).
	eventually(t, 10*time.Second, func() (bool, string) {
		l1, l2 := metric(r[first].scrape(t), "vmcontroller_leader"), metric(r[second].scrape(t), "vmcontroller_leader")
		return l1 == 1 && l2 == 0, fmt.Sprintf("vmcontroller_leader: %s=%v %s=%v", first, l1, second, l2)
	})
	// A standby is ready too, once its caches have synced.
	for id, c := range r {
		eventually(t, 30*time.Second, func() (bool, string) {
			code := httpStatus(t, "http://"+c.addr(t, "health")+"/readyz")
			return code == 200, fmt.Sprintf("replica %s /readyz = %d", id, code)
		})
	}
	if _, _, err := runKubectl(vmList(ns, "le", 20), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		c := countActive(t, ns)
		return c.active == 20, fmt.Sprintf("%d/%d active", c.active, c.vms)
	})

	// Graceful handoff: SIGTERM the leader while VMs are being created.
	if _, _, err := runKubectl(vmList(ns, "g", 20), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := r[first].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(r[second].logText(), "Became the leader"), "no takeover yet"
	})
	graceful := time.Since(start)
	if err := <-r[first].done; err != nil {
		t.Errorf("the old leader exited with %v after SIGTERM, want 0", err)
	}
	if graceful > 2*time.Second {
		t.Errorf("SIGTERM handoff took %s, want at most 2s", graceful)
	}

	// Crash: a third replica stands by, then the leader is killed with SIGKILL.
	r["c"] = replica("c")
	eventually(t, 30*time.Second, func() (bool, string) {
		return strings.Contains(r["c"].logText(), "standing by"), "c not campaigning yet"
	})
	if _, _, err := runKubectl(vmList(ns, "k", 20), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	r[second].kill()
	eventually(t, leaseDuration+5*time.Second, func() (bool, string) {
		return strings.Contains(r["c"].logText(), "Became the leader"), "no takeover yet"
	})
	crash := time.Since(start)
	if crash > leaseDuration+2*time.Second {
		t.Errorf("takeover after SIGKILL took %s, want at most the lease duration (%s) + 2s", crash, leaseDuration)
	}
	t.Logf("handoff after SIGTERM %s, after SIGKILL %s (lease %s)", graceful.Round(time.Millisecond), crash.Round(time.Millisecond), leaseDuration)

	eventually(t, 90*time.Second, func() (bool, string) {
		c := countActive(t, ns)
		if len(c.dup) > 0 {
			t.Fatalf("VMs with more than one pod: %v", c.dup)
		}
		return c.active == 60 && c.pods == 60, fmt.Sprintf("%d/%d active, %d pods", c.active, c.vms, c.pods)
	})
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
	waitPhase(t, vms, "test-vm", "Active", "ServerReady", 60*time.Second)
	kubectl(t, "-n", vms, "patch", "vm", "test-vm", "--type=merge", "-p", `{"spec":{"resource":{"cpu":3}}}`)
	eventually(t, 60*time.Second, func() (bool, string) {
		_, p, c := podOf(vms, "test-vm")
		return p == "Running" && c == "3", "pod " + p + " cpu " + c
	})
	waitPhase(t, vms, "test-vm", "Active", "ServerReady", 30*time.Second)
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: zero, namespace: %s}\nspec: {resource: {cpu: 1, memory: \"0\", rootDisk: 1G}}\n", vms))
	waitPhase(t, vms, "zero", "Failed", "InvalidSpec", 30*time.Second)
	kubectl(t, "-n", vms, "delete", "vm", "test-vm", "--timeout=60s")
	if u, _, _ := podOf(vms, "test-vm"); u != "" {
		t.Errorf("pod %s left after the VM was deleted", u)
	}
	if e := kubectl(t, "-n", vms, "get", "events", "--field-selector", "involvedObject.name=zero", "-o", "jsonpath={.items[*].reason}"); !strings.Contains(e, "InvalidSpec") {
		t.Errorf("no InvalidSpec event recorded with the ServiceAccount's token: %q", e)
	}
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
