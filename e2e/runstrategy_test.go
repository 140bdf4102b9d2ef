//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The run strategies and the kubectl plugin against the local cluster: the local cluster ends
// a server pod on purpose when it is annotated end.kwok.cloudnative.czs/phase (Succeeded: the
// guest shut down; Failed), and the plugin runs as kubectl runs plugins, found on $PATH as
// kubectl-vm (the controller's binary under that name).

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

// kubectlVM runs `kubectl vm ARGS...` with the plugin on $PATH; it returns stdout, stderr and
// the error (an *exec.ExitError for a non-zero exit).
func kubectlVM(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	bin := controllerBinary(t)
	pluginOnce.Do(func() {
		if pluginDir, pluginErr = os.MkdirTemp("", "kubectl-vm-e2e"); pluginErr == nil {
			pluginErr = os.Symlink(bin, filepath.Join(pluginDir, "kubectl-vm"))
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"vm"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return strings.TrimSpace(out.String()), strings.TrimSpace(errOut.String()), err
}

// mustVM runs `kubectl vm ARGS...`, which must succeed, and returns its stdout.
func mustVM(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := kubectlVM(t, args...)
	if err != nil {
		t.Fatalf("kubectl vm %s: %v: %s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// strategyVM creates a v1alpha1 VM whose spec.action is the run strategy's word there.
func strategyVM(t *testing.T, ns, name, action string) {
	t.Helper()
	apply(t, fmt.Sprintf(`apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: %s, namespace: %s}
spec:
  action: %s
  resource: {cpu: 100m, memory: 64Mi, rootDisk: 1Gi}
`, name, ns, action))
}

// endServer ends the VM's running server pod as the guest would: Succeeded (a clean
// shutdown) or Failed.
func endServer(t *testing.T, ns, vm, phase string) {
	t.Helper()
	kubectl(t, "-n", ns, "annotate", "pod", vm+"-server", "end.kwok.cloudnative.czs/phase="+phase)
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, got, _ := podOf(ns, vm)
		return got == phase, "pod phase " + got
	})
}

// endedAndKept waits for the VM to be Active, ends its server (end: Succeeded or Failed),
// waits for the VM's phase/reason want, and after a barrier checks that the ended pod is kept
// and no other was made. It returns the pod's UID.
func endedAndKept(t *testing.T, c *controller, ns, vm, end, want string) string {
	t.Helper()
	waitPhase(t, ns, vm, "Active", "ServerReady", 2*time.Minute)
	first, _, _ := podOf(ns, vm)
	endServer(t, ns, vm, end)
	phase, reason, _ := strings.Cut(want, "/")
	waitPhase(t, ns, vm, phase, reason, 2*time.Minute)
	c.barrier(t)
	if uid, got, _ := podOf(ns, vm); uid != first || got != end {
		t.Fatalf("after the server ended (%s) the pod is %q (%s), want the ended %s kept and no new one", end, uid, got, first)
	}
	if n, notes := occurrences(t, ns, vm, "CreatingServer"); n != 1 {
		t.Fatalf("%d CreatingServer Events after the server ended, want 1:\n%s", n, notes)
	}
	return first
}

// TestRunStrategyRerunOnFailure: a clean shutdown leaves the VM stopped (GuestShutDown) with
// no new pod; after `kubectl vm start` a failure makes one new pod after the backoff, the
// status naming the next try meanwhile.
func TestRunStrategyRerunOnFailure(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns, "--workers", "1")
	strategyVM(t, ns, "rerun", "rerunOnFailure")
	first := endedAndKept(t, c, ns, "rerun", "Succeeded", "Inactive/GuestShutDown")

	if out := mustVM(t, "start", "rerun", "-n", ns); !strings.Contains(out, "start requested") {
		t.Errorf("kubectl vm start said %q", out)
	}
	mustVM(t, "wait", "rerun", "-n", ns, "--for=phase=Active", "--timeout=2m")
	second, _, _ := podOf(ns, "rerun")
	if second == first || second == "" {
		t.Fatalf("start made no new pod (%q)", second)
	}
	if out := mustVM(t, "start", "rerun", "-n", ns); !strings.Contains(out, "already running") {
		t.Errorf("kubectl vm start of a running VM said %q", out)
	}

	endServer(t, ns, "rerun", "Failed")
	var third string
	eventually(t, 2*time.Minute, func() (bool, string) {
		uid, phase, _ := podOf(ns, "rerun")
		third = uid
		return uid != "" && uid != second && phase == "Running", "pod " + uid + " " + phase
	})
	waitPhase(t, ns, "rerun", "Active", "ServerReady", 2*time.Minute)
	if n, notes := occurrences(t, ns, "rerun", "ServerFailed"); n != 1 {
		t.Errorf("%d ServerFailed Events, want 1:\n%s", n, notes)
	}
	c.barrier(t)
	if uid, _, _ := podOf(ns, "rerun"); uid != third {
		t.Errorf("pod %s after the replacement %s: one new pod after a failure, not more", uid, third)
	}
	if got := vmField(ns, "rerun", ".status.nextRetryTime"); got != "" {
		t.Errorf("status.nextRetryTime %q once Active, want none", got)
	}
}

// TestRunStrategyOnce: a server that fails is never replaced: the VM is Failed and no second
// pod is made.
func TestRunStrategyOnce(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns, "--workers", "1")
	strategyVM(t, ns, "once", "once")
	endedAndKept(t, c, ns, "once", "Failed", "Failed/ServerFailed")
	if got := vmField(ns, "once", ".status.nextRetryTime"); got != "" {
		t.Errorf("status.nextRetryTime %q under Once, want none", got)
	}
}

// TestRunStrategyManual: a Manual VM waits for `kubectl vm start`; a controller restart does
// not start it again after `kubectl vm stop`; stop of a stopped VM changes nothing and says
// so; a stop carries its grace period.
func TestRunStrategyManual(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns, "--workers", "1")
	strategyVM(t, ns, "manual", "manual")
	waitPhase(t, ns, "manual", "Inactive", "NotStarted", 2*time.Minute)
	if uid, _, _ := podOf(ns, "manual"); uid != "" {
		t.Fatalf("pod %s for a Manual VM nobody started", uid)
	}

	mustVM(t, "start", "manual", "-n", ns)
	mustVM(t, "wait", "manual", "-n", ns, "--for=condition=Ready", "--timeout=2m")
	first, _, _ := podOf(ns, "manual")
	if got := vmField(ns, "manual", ".status.startRequestedAt"); got == "" || got != vmField(ns, "manual", `.metadata.annotations.cloudnative\.czs/startRequestedAt`) {
		t.Errorf("status.startRequestedAt %q, want the annotation's value", got)
	}
	status := mustVM(t, "-n", ns, "status", "manual") // -n before the verb, as kubectl takes it
	for _, want := range []string{"Run strategy:", "Manual", "Phase:", "Active", "Node:", "manual-server"} {
		if !strings.Contains(status, want) {
			t.Errorf("kubectl vm status lacks %q:\n%s", want, status)
		}
	}

	if out := mustVM(t, "--namespace", ns, "stop", "manual", "--grace-period", "7"); !strings.Contains(out, "stop requested") {
		t.Errorf("kubectl vm stop said %q", out)
	}
	waitPhase(t, ns, "manual", "Inactive", "Stopped", 2*time.Minute)
	if uid, _, _ := podOf(ns, "manual"); uid != "" {
		t.Fatalf("pod %s left after a stop", uid)
	}
	if out := mustVM(t, "stop", "manual", "-n", ns); !strings.Contains(out, "already stopped") {
		t.Errorf("kubectl vm stop of a stopped VM said %q", out)
	}

	// A new controller finds the start annotation still on the VM, and the stop after it: it
	// starts nothing.
	if err := c.stop(t); err != nil {
		t.Fatal(err)
	}
	c = startController(t, ns, "--workers", "1")
	c.barrier(t)
	if uid, _, _ := podOf(ns, "manual"); uid != "" {
		t.Fatalf("the restarted controller started the stopped Manual VM again (pod %s; the first was %s)", uid, first)
	}
	if n, notes := occurrences(t, ns, "manual", "CreatingServer"); n != 1 {
		t.Fatalf("%d CreatingServer Events, want 1:\n%s", n, notes)
	}
}

// TestPluginStopThenStartManual: `kubectl vm stop` then `kubectl vm start` before the
// controller acts on the stop leaves a Manual VM running: the start withdraws the pending stop
// in its write, rather than finding the VM still Active and changing nothing. The controller
// is stopped between the verbs' writes and the decision, so that the stop is surely pending.
func TestPluginStopThenStartManual(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns, "--workers", "1")
	strategyVM(t, ns, "flip", "manual")
	waitPhase(t, ns, "flip", "Inactive", "NotStarted", 2*time.Minute)
	mustVM(t, "start", "flip", "-n", ns)
	waitPhase(t, ns, "flip", "Active", "ServerReady", 2*time.Minute)
	first, _, _ := podOf(ns, "flip")

	if err := c.stop(t); err != nil {
		t.Fatal(err)
	}
	if out := mustVM(t, "stop", "flip", "-n", ns); !strings.Contains(out, "stop requested") {
		t.Errorf("kubectl vm stop said %q", out)
	}
	if out := mustVM(t, "start", "flip", "-n", ns); !strings.Contains(out, "not yet carried out, is withdrawn") {
		t.Errorf("kubectl vm start with a stop pending said %q, want the stop withdrawn", out)
	}
	if got := vmField(ns, "flip", `.metadata.annotations.cloudnative\.czs/stopRequestedAt`); got != "" {
		t.Errorf("the stop request %q is still on the VM after the start", got)
	}

	c = startController(t, ns, "--workers", "1")
	c.barrier(t)
	waitPhase(t, ns, "flip", "Active", "ServerReady", 2*time.Minute)
	if uid, _, _ := podOf(ns, "flip"); uid != first {
		t.Fatalf("pod %q after stop then start, want the first server %s kept running", uid, first)
	}
	if n, notes := occurrences(t, ns, "flip", "StoppingServer"); n != 0 {
		t.Fatalf("%d StoppingServer Events: the withdrawn stop was carried out:\n%s", n, notes)
	}
}

// TestPluginBadInput: a VM that does not exist, a wait past its timeout, a migration of a VM
// that does not run: one line, a non-zero exit, nothing changed. Run alone (not in parallel)
// so that it can cordon the cluster down to one schedulable node for the migration's refusal.
func TestPluginBadInput(t *testing.T) {
	ns := testNamespace(t)
	startController(t, ns, "--workers", "1")

	oneLine := func(args []string, want string) {
		t.Helper()
		out, errOut, err := kubectlVM(t, args...)
		if err == nil || strings.Count(errOut, "\n") > 0 || !strings.Contains(errOut, want) {
			t.Errorf("kubectl vm %s: err %v, stdout %q, stderr %q; want a non-zero exit and one line with %q",
				strings.Join(args, " "), err, out, errOut, want)
		}
	}
	oneLine([]string{"start", "nope", "-n", ns}, `virtualmachine "nope" not found in namespace "`+ns+`"`)
	oneLine([]string{"status", "nope", "-n", "no-such-namespace"}, `virtualmachine "nope" not found in namespace "no-such-namespace"`)
	oneLine([]string{"stop", "x", "--force", "--grace-period", "3", "-n", ns}, "--force with --grace-period 3")

	// An unknown run strategy is refused at admission, in each version's words.
	for _, vm := range []string{"apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: odd}\nspec: {action: sometimes, resource: {cpu: 1, memory: 64Mi, rootDisk: 1Gi}}\n",
		"apiVersion: cloudnative.czs/v1beta1\nkind: VirtualMachine\nmetadata: {name: odd}\nspec: {action: Manual, resource: {cpu: 1, memory: 64Mi, rootDisk: 1Gi}}\n"} {
		_, _, err := runKubectl(vm, "-n", ns, "apply", "-f", "-")
		if err == nil || !strings.Contains(err.Error(), `supported values: "active", "rerunOnFailure", "once", "manual", "inactive"`) {
			t.Errorf("an unknown run strategy was not refused at admission: %v", err)
		}
	}

	strategyVM(t, ns, "idle", "manual")
	waitPhase(t, ns, "idle", "Inactive", "NotStarted", 2*time.Minute)
	oneLine([]string{"wait", "idle", "-n", ns, "--for=phase=Active", "--timeout=3s"}, "last seen: phase Inactive (NotStarted)")
	oneLine([]string{"migrate", "idle", "-n", ns}, "is not running")
	oneLine([]string{"restart", "idle", "-n", ns}, "nothing to restart")
	if out := mustVM(t, "start", "idle", "-n", ns); !strings.Contains(out, "start requested") {
		t.Fatalf("start said %q", out)
	}
	waitPhase(t, ns, "idle", "Active", "ServerReady", 2*time.Minute)

	// One schedulable node: the server's. Every other is cordoned for the test.
	node := field(ns, "pod/idle-server", ".spec.nodeName")
	for _, n := range strings.Fields(kubectl(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}")) {
		if n == node || field("", "node/"+n, ".spec.unschedulable") == "true" {
			continue
		}
		kubectl(t, "cordon", n)
		t.Cleanup(func() { kubectlErr("uncordon", n) })
	}
	before := vmField(ns, "idle", ".metadata.resourceVersion")
	oneLine([]string{"migrate", "idle", "-n", ns}, "no other Ready node than "+node)
	if after := vmField(ns, "idle", ".metadata.resourceVersion"); after != before {
		t.Errorf("a refused migration changed the VM (resourceVersion %s -> %s)", before, after)
	}
}
