package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The controller tests run the real vm-controller binary against the local cluster, each
// scoped to its own namespace (--namespace) so they can run side by side, and check what a
// user sees through kubectl.

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// controllerBinary builds vm-controller once per test run.
func controllerBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "vm-controller-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "vm-controller")
		cmd := exec.Command("go", "build", "-o", binary, ".")
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// installCRDs applies the CRDs from crds/ and waits until they are served.
func installCRDs(t testing.TB) {
	t.Helper()
	kubectl(t, "apply", "-f", filepath.Join(repoRoot(), "crds"))
	kubectl(t, "wait", "--for=condition=Established", "crd/virtualmachines.cloudnative.czs", "--timeout=60s")
}

// controller is a running vm-controller process.
type controller struct {
	cmd  *exec.Cmd
	log  *bytes.Buffer
	mu   *sync.Mutex
	done chan error
}

// lockedWriter lets the test read the log while the process writes it.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// startController runs vm-controller for namespace ns; it is stopped (SIGTERM) when the test
// ends, and its log is printed if the test failed.
func startController(t *testing.T, ns string, args ...string) *controller {
	t.Helper()
	installCRDs(t)
	// Endpoints on free loopback ports: tests run several controllers at once.
	all := append([]string{"run", "--kubeconfig", kubeconfig, "--namespace", ns, "--log-level", "debug",
		"--restart-backoff", "1s", "--shutdown-timeout", "10s", "--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0"}, args...)
	c := &controller{log: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan error, 1)}
	c.cmd = exec.Command(controllerBinary(t), all...)
	w := lockedWriter{c.mu, c.log}
	c.cmd.Stdout, c.cmd.Stderr = w, w
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		c.stop(t)
		if t.Failed() {
			t.Logf("controller log (last 60 lines):\n%s", c.tail(60))
		}
	})
	return c
}

// stop sends SIGTERM and waits for the process to exit; it returns the exit error.
func (c *controller) stop(t testing.TB) error {
	if c.cmd.ProcessState != nil {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		return err
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		t.Errorf("controller did not stop within 20s of SIGTERM")
		return <-c.done
	}
}

// kill ends the process with SIGKILL, as a crash or an OOM kill would.
func (c *controller) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// addr returns the address an endpoint ("metrics" or "health") was bound to, from the log.
func (c *controller) addr(t testing.TB, endpoint string) string {
	t.Helper()
	re := regexp.MustCompile(`msg=Serving endpoint=` + endpoint + ` addr=(\S+)`)
	var addr string
	eventually(t, 30*time.Second, func() (bool, string) {
		if m := re.FindStringSubmatch(c.logText()); m != nil {
			addr = m[1]
			return true, ""
		}
		return false, "no " + endpoint + " address in the log yet"
	})
	return addr
}

// scrape fetches the controller's /metrics.
func (c *controller) scrape(t testing.TB) string {
	t.Helper()
	resp, err := httpGet("http://" + c.addr(t, "metrics") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// httpGet is http.Get with a timeout, so a stuck endpoint fails the test instead of hanging it.
func httpGet(url string) (*http.Response, error) {
	return (&http.Client{Timeout: 10 * time.Second}).Get(url)
}

// metric returns the value of one sample (name with its labels, as exposed), or -1.
func metric(exposition, sample string) float64 {
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

func (c *controller) logText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

func (c *controller) tail(n int) string {
	lines := strings.Split(strings.TrimRight(c.logText(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// vmField reads one field of a VM with a JSONPath; "" if the VM or field is missing.
func vmField(ns, name, path string) string {
	out, _ := kubectlErr("-n", ns, "get", "vm", name, "-o", "jsonpath={"+path+"}")
	return out
}

// waitPhase waits for a VM to reach phase (and reason, if given).
func waitPhase(t *testing.T, ns, name, phase, reason string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() (bool, string) {
		got := vmField(ns, name, ".status.phase") + "/" + vmField(ns, name, ".status.reason")
		return got == phase+"/"+reason || (reason == "" && strings.HasPrefix(got, phase+"/")), name + " is " + got
	})
}

// podOf returns the UID, phase and cpu limit of a VM's server pod, or "" if there is none.
func podOf(ns, vm string) (uid, phase, cpu string) {
	out, err := kubectlErr("-n", ns, "get", "pod", vm+"-server", "-o",
		`jsonpath={.metadata.uid} {.status.phase} {.spec.containers[0].resources.limits.cpu}`)
	if err != nil {
		return "", "", ""
	}
	f := strings.Fields(out)
	for len(f) < 3 {
		f = append(f, "")
	}
	return f[0], f[1], f[2]
}

func exampleVM(t *testing.T, ns string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "test-vm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runKubectl(string(data), "-n", ns, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// TestControllerLifecycle follows the example test-vm (examples/test-vm.yaml) through its life: Active with a
// running pod, a cpu change that replaces the pod, action inactive and back, and deletion,
// in which the pod goes before the VM.
func TestControllerLifecycle(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns)
	exampleVM(t, ns)

	waitPhase(t, ns, "test-vm", "Active", "ServerReady", 60*time.Second)
	uid, phase, cpu := podOf(ns, "test-vm")
	if phase != "Running" || cpu != "2" {
		t.Fatalf("server pod: phase %q cpu %q, want Running 2", phase, cpu)
	}
	if id := vmField(ns, "test-vm", ".status.server.id"); id != uid {
		t.Errorf("status.server.id = %q, want the pod's UID %q", id, uid)
	}
	if r := vmField(ns, "test-vm", `.status.conditions[?(@.type=="Ready")].status`); r != "True" {
		t.Errorf("Ready condition = %q, want True", r)
	}
	// What `kubectl get vm` shows.
	table := kubectl(t, "-n", ns, "get", "vm")
	lines := strings.Split(table, "\n")
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME PHASE CPU MEMORY DISK SERVER AGE" {
		t.Errorf("kubectl get vm columns = %v", got)
	}
	if got := strings.Fields(lines[1]); len(got) < 6 || strings.Join(got[:6], " ") != "test-vm Active 2 4G 40G test-vm-server" {
		t.Errorf("kubectl get vm row = %q", lines[1])
	}

	// A cpu change the pod cannot take in place: a new pod with the new cpu.
	kubectl(t, "-n", ns, "patch", "vm", "test-vm", "--type=merge", "-p", `{"spec":{"resource":{"cpu":3}}}`)
	eventually(t, 60*time.Second, func() (bool, string) {
		u, p, c := podOf(ns, "test-vm")
		return u != "" && u != uid && p == "Running" && c == "3", fmt.Sprintf("pod uid %s phase %s cpu %s", u, p, c)
	})
	waitPhase(t, ns, "test-vm", "Active", "ServerReady", 30*time.Second)
	eventually(t, 10*time.Second, func() (bool, string) {
		d := kubectl(t, "-n", ns, "describe", "vm", "test-vm")
		ok := true
		for _, want := range []string{"CreatingServer", "ServerReady", "ReplacingServer", "Replacing server test-vm-server: cpu 2 -> 3"} {
			ok = ok && strings.Contains(d, want)
		}
		return ok, "kubectl describe vm:\n" + d
	})
	if g := vmField(ns, "test-vm", ".status.observedGeneration"); g != "2" {
		t.Errorf("observedGeneration = %q, want 2", g)
	}

	// action inactive removes the server and keeps the VM.
	kubectl(t, "-n", ns, "patch", "vm", "test-vm", "--type=merge", "-p", `{"spec":{"action":"inactive"}}`)
	waitPhase(t, ns, "test-vm", "Inactive", "ServerStopped", 60*time.Second)
	if u, _, _ := podOf(ns, "test-vm"); u != "" {
		t.Errorf("inactive VM still has pod %s", u)
	}
	kubectl(t, "-n", ns, "patch", "vm", "test-vm", "--type=merge", "-p", `{"spec":{"action":"active"}}`)
	waitPhase(t, ns, "test-vm", "Active", "ServerReady", 60*time.Second)

	// Deletion with --cascade=orphan: the garbage collector leaves the pod alone, so only
	// the finalizer can remove it, and it must do so before the VM disappears.
	kubectl(t, "-n", ns, "delete", "vm", "test-vm", "--cascade=orphan", "--wait=false")
	eventually(t, 60*time.Second, func() (bool, string) {
		_, vmErr := kubectlErr("-n", ns, "get", "vm", "test-vm")
		u, _, _ := podOf(ns, "test-vm")
		if isNotFound(vmErr) && u != "" {
			t.Fatalf("the VM was removed while its pod %s still exists", u)
		}
		return isNotFound(vmErr), fmt.Sprintf("vm error %v, pod %q", vmErr, u)
	})
	if u, _, _ := podOf(ns, "test-vm"); u != "" {
		t.Errorf("pod %s left behind after the VM was deleted", u)
	}
}

// TestControllerAdmission checks that what the schema can reject never reaches the
// controller.
func TestControllerAdmission(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	installCRDs(t)
	cases := map[string]struct {
		spec string
		want string // in kubectl's error
	}{
		"unknown action":      {`{action: running, resource: {cpu: 1, memory: 1G, rootDisk: 1G}}`, `Unsupported value: "running"`},
		"malformed cpu":       {`{action: active, resource: {cpu: two, memory: 1G, rootDisk: 1G}}`, `spec.resource.cpu`},
		"malformed memory":    {`{action: active, resource: {cpu: 1, memory: 4GB, rootDisk: 1G}}`, `spec.resource.memory`},
		"negative disk":       {`{action: active, resource: {cpu: 1, memory: 1G, rootDisk: "-1G"}}`, `spec.resource.rootDisk`},
		"missing resource":    {`{action: active}`, `spec.resource: Required value`},
		"missing memory":      {`{action: active, resource: {cpu: 1, rootDisk: 1G}}`, `spec.resource.memory: Required value`},
		"cpu of a wrong type": {`{action: active, resource: {cpu: [1], memory: 1G, rootDisk: 1G}}`, `spec.resource.cpu`},
	}
	for name, tc := range cases {
		manifest := fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: bad, namespace: %s}\nspec: %s\n", ns, tc.spec)
		_, _, err := runKubectl(manifest, "apply", "-f", "-")
		if err == nil {
			t.Errorf("%s: accepted, want refused", name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to mention %q", name, err, tc.want)
		}
	}
	// The action defaults to active.
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: defaulted, namespace: %s}\nspec: {resource: {cpu: 1, memory: 1G, rootDisk: 1G}}\n", ns))
	if a := vmField(ns, "defaulted", ".spec.action"); a != "active" {
		t.Errorf("defaulted action = %q, want active", a)
	}
}

// TestControllerUnrunnableSpec: memory 0 passes admission but cannot run. The VM ends Failed
// with a reason, a message and one Event, and the controller does not retry it in a loop.
func TestControllerUnrunnableSpec(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns)
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: zero, namespace: %s}\nspec: {action: active, resource: {cpu: 1, memory: \"0\", rootDisk: 1G}}\n", ns))
	waitPhase(t, ns, "zero", "Failed", "InvalidSpec", 30*time.Second)
	if msg := vmField(ns, "zero", ".status.message"); !strings.Contains(msg, "spec.resource.memory") || !strings.Contains(msg, "greater than zero") {
		t.Errorf("status.message = %q, want the field and why", msg)
	}
	rv := vmField(ns, "zero", ".metadata.resourceVersion")
	time.Sleep(3 * time.Second)
	if now := vmField(ns, "zero", ".metadata.resourceVersion"); now != rv {
		t.Errorf("the Failed VM keeps being written: resourceVersion %s -> %s", rv, now)
	}
	if u, _, _ := podOf(ns, "zero"); u != "" {
		t.Errorf("an invalid VM got pod %s", u)
	}
	// One InvalidSpec event, not a growing series of them.
	eventually(t, 10*time.Second, func() (bool, string) {
		out, _ := kubectlErr("-n", ns, "get", "events.events.k8s.io", "--field-selector", "regarding.name=zero,reason=InvalidSpec",
			"-o", `jsonpath={range .items[*]}{.reason}:{.series.count}{"\n"}{end}`)
		return out == "InvalidSpec:", "InvalidSpec events (reason:series count): " + out
	})
	if strings.Contains(c.logText(), `vm=`+ns+`/zero`) && strings.Contains(c.logText(), "Reconcile failed") {
		t.Errorf("the invalid VM was retried as an error:\n%s", c.tail(20))
	}
	// Fixing the spec brings it up.
	kubectl(t, "-n", ns, "patch", "vm", "zero", "--type=merge", "-p", `{"spec":{"resource":{"memory":"64Mi"}}}`)
	waitPhase(t, ns, "zero", "Active", "ServerReady", 60*time.Second)
}

// TestControllerWarningsOnly: with --events warnings, a VM brought to Active leaves no Normal
// events, and an invalid one still gets its Warning.
func TestControllerWarningsOnly(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns, "--events", "warnings")
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: good, namespace: %s}\nspec: {action: active, resource: {cpu: 10m, memory: 16Mi, rootDisk: 100Mi}}\n", ns))
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: zero, namespace: %s}\nspec: {action: active, resource: {cpu: 1, memory: \"0\", rootDisk: 1G}}\n", ns))
	waitPhase(t, ns, "good", "Active", "ServerReady", 60*time.Second)
	waitPhase(t, ns, "zero", "Failed", "InvalidSpec", 30*time.Second)
	eventually(t, 20*time.Second, func() (bool, string) {
		out, _ := kubectlErr("-n", ns, "get", "events.events.k8s.io", "--field-selector", "regarding.name=zero,reason=InvalidSpec,type=Warning", "-o", "name")
		return out != "", "no InvalidSpec Warning for zero"
	})
	// The recorder sends what it holds at once; give it the time it took the Warning anyway.
	time.Sleep(2 * time.Second)
	if out := kubectl(t, "-n", ns, "get", "events.events.k8s.io", "--field-selector", "reportingController=vm-controller,type=Normal",
		"-o", `jsonpath={range .items[*]}{.reason} {.regarding.name}{"\n"}{end}`); strings.TrimSpace(out) != "" {
		t.Errorf("Normal events recorded with --events warnings:\n%s", out)
	}
}

// TestControllerServerReplaced: a server pod deleted by someone else (a Warning ServerMissing
// says so), or one that fails, is replaced while the VM's action is active.
func TestControllerServerReplaced(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	// A backoff longer than any lag of the pod cache, so that the Failed state is seen
	// before the replacement even on a loaded machine.
	startController(t, ns, "--restart-backoff", "8s")
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: vm1, namespace: %s}\nspec: {resource: {cpu: 100m, memory: 64Mi, rootDisk: 1Gi}}\n", ns))
	waitPhase(t, ns, "vm1", "Active", "ServerReady", 60*time.Second)
	first, _, _ := podOf(ns, "vm1")

	kubectl(t, "-n", ns, "delete", "pod", "vm1-server", "--wait=false")
	eventually(t, 60*time.Second, func() (bool, string) {
		u, p, _ := podOf(ns, "vm1")
		return u != "" && u != first && p == "Running", "pod " + u + " " + p
	})
	waitPhase(t, ns, "vm1", "Active", "ServerReady", 30*time.Second)
	second, _, _ := podOf(ns, "vm1")

	// A failed server, as a kubelet reports one (phase Failed, Ready false since now): Failed
	// for the backoff, then replaced.
	now := time.Now().UTC().Format(time.RFC3339)
	kubectl(t, "-n", ns, "patch", "pod", "vm1-server", "--subresource=status", "--type=merge", "-p",
		`{"status":{"phase":"Failed","reason":"Crashed","message":"simulated crash","conditions":[{"type":"Ready","status":"False","lastTransitionTime":"`+now+`"}]}}`)
	eventually(t, 60*time.Second, func() (bool, string) {
		u, p, _ := podOf(ns, "vm1")
		return u != "" && u != second && p == "Running", "pod " + u + " " + p
	})
	waitPhase(t, ns, "vm1", "Active", "ServerReady", 30*time.Second)
	reasons := kubectl(t, "-n", ns, "get", "events", "--field-selector", "involvedObject.name=vm1", "-o", "jsonpath={.items[*].reason}")
	for _, want := range []string{"ServerMissing", "ServerFailed", "RestartingServer", "CreatingServer"} {
		if !strings.Contains(reasons, want) {
			t.Errorf("events %q lack %s", reasons, want)
		}
	}
	// The deletion by someone else is a ServerMissing; the controller's own replacement of
	// the failed server is not.
	if n := strings.Count(reasons, "ServerMissing"); n != 1 {
		t.Errorf("%d ServerMissing events in %q; want 1, for the deleted pod", n, reasons)
	}
}

// vmList renders n small VMs as one List, so that kubectl creates them in one go.
func vmList(ns, prefix string, n int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i := range n {
		fmt.Fprintf(&b, "- apiVersion: cloudnative.czs/v1alpha1\n  kind: VirtualMachine\n  metadata: {name: %s-%03d, namespace: %s}\n  spec: {action: active, resource: {cpu: 10m, memory: 16Mi, rootDisk: 100Mi}}\n", prefix, i, ns)
	}
	return b.String()
}

type vmPodCounts struct {
	active, vms, pods int
	dup               []string
}

// countActive reports how many VMs of ns are Active, and checks every pod against the VMs:
// exactly one pod per VM, none without one.
func countActive(t *testing.T, ns string) vmPodCounts {
	t.Helper()
	var vms struct {
		Items []struct {
			Metadata struct{ Name, UID string }
			Status   struct{ Phase string }
		}
	}
	if err := json.Unmarshal([]byte(kubectl(t, "-n", ns, "get", "vm", "-o", "json")), &vms); err != nil {
		t.Fatal(err)
	}
	var pods struct {
		Items []struct {
			Metadata struct {
				Name            string
				OwnerReferences []struct{ UID string }
			}
		}
	}
	if err := json.Unmarshal([]byte(kubectl(t, "-n", ns, "get", "pods", "-o", "json")), &pods); err != nil {
		t.Fatal(err)
	}
	var c vmPodCounts
	c.vms, c.pods = len(vms.Items), len(pods.Items)
	perVM := map[string]int{}
	for _, p := range pods.Items {
		for _, o := range p.Metadata.OwnerReferences {
			perVM[o.UID]++
		}
	}
	for _, v := range vms.Items {
		if v.Status.Phase == "Active" {
			c.active++
		}
		if perVM[v.Metadata.UID] > 1 {
			c.dup = append(c.dup, v.Metadata.Name)
		}
	}
	return c
}

// TestControllerRestartNoDuplicates kills the controller with SIGKILL while it is creating
// servers and starts another: every VM ends Active with exactly one pod.
func TestControllerRestartNoDuplicates(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	first := startController(t, ns)
	if _, _, err := runKubectl(vmList(ns, "r", 30), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		n := strings.Count(kubectl(t, "-n", ns, "get", "pods", "-o", "name"), "pod/")
		return n >= 5, fmt.Sprintf("%d pods", n)
	})
	first.kill()
	startController(t, ns)
	eventually(t, 120*time.Second, func() (bool, string) {
		c := countActive(t, ns)
		if len(c.dup) > 0 {
			t.Fatalf("VMs with more than one pod: %v", c.dup)
		}
		return c.active == 30 && c.pods == 30, fmt.Sprintf("%d/%d active, %d pods", c.active, c.vms, c.pods)
	})
}

// TestControllerBurst creates 100 VMs at once: all reach Active, one pod each.
func TestControllerBurst(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns, "--workers", "8")
	start := time.Now()
	if _, _, err := runKubectl(vmList(ns, "b", 100), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 180*time.Second, func() (bool, string) {
		c := countActive(t, ns)
		if len(c.dup) > 0 {
			t.Fatalf("VMs with more than one pod: %v", c.dup)
		}
		return c.active == 100 && c.pods == 100, fmt.Sprintf("%d/%d active, %d pods", c.active, c.vms, c.pods)
	})
	t.Logf("100 VMs Active %s after the create was sent", time.Since(start).Round(100*time.Millisecond))

	// What the burst shows on /metrics.
	m := c.scrape(t)
	for sample, atLeast := range map[string]float64{
		`workqueue_adds_total{name="virtualmachines"}`:                  100,
		`workqueue_depth{name="virtualmachines"}`:                       0,
		`workqueue_work_duration_seconds_count{name="virtualmachines"}`: 100,
		`vmcontroller_reconcile_total{result="success"}`:                100,
		`vmcontroller_vms{phase="Active"}`:                              100,
		`vmcontroller_leader`:                                           1,
	} {
		if v := metric(m, sample); v < atLeast {
			t.Errorf("%s = %v, want at least %v", sample, v, atLeast)
		}
	}
	if !strings.Contains(m, `rest_client_requests_total{code="201",`) {
		t.Errorf("no API request counts by code in /metrics")
	}
}

// TestControllerShutdown: SIGTERM stops the controller cleanly (exit 0) and quickly.
func TestControllerShutdown(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns)
	eventually(t, 30*time.Second, func() (bool, string) {
		return strings.Contains(c.logText(), "Starting workers"), "log: " + c.tail(3)
	})
	start := time.Now()
	if err := c.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, c.tail(10))
	}
	if !strings.Contains(c.logText(), "Workers finished") {
		t.Errorf("no clean drain in the log:\n%s", c.tail(10))
	}
	t.Logf("stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

// TestControllerBadInput: a bad flag, an unreachable cluster and a resource the cluster does
// not serve each give one line on stderr and a non-zero exit.
func TestControllerBadInput(t *testing.T) {
	t.Parallel()
	bin := controllerBinary(t)
	installCRDs(t)
	unreachable := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args []string
		code int
		want string
	}{
		"unknown flag":         {[]string{"run", "--no-such-flag"}, 2, "flag provided but not defined"},
		"bad log format":       {[]string{"run", "--log-format", "xml"}, 2, "--log-format"},
		"bad api version":      {[]string{"run", "--api-version", "nogroup"}, 2, "want group/version"},
		"bad selector":         {[]string{"run", "--selector", "a in (("}, 2, "--selector"},
		"zero workers":         {[]string{"run", "--workers", "0"}, 2, "--workers"},
		"bad events":           {[]string{"run", "--events", "normal"}, 2, "--events \"normal\": want all or warnings"},
		"missing kubeconfig":   {[]string{"run", "--kubeconfig", "/nonexistent/kubeconfig"}, 1, "no such file"},
		"unknown context":      {[]string{"run", "--kubeconfig", kubeconfig, "--context", "nope"}, 1, `context "nope"`},
		"unreachable cluster":  {[]string{"run", "--kubeconfig", unreachable}, 1, "cannot reach the cluster at https://127.0.0.1:1"},
		"resource not served":  {[]string{"run", "--kubeconfig", kubeconfig, "--resource", "virtualmachinez"}, 1, `no resource "virtualmachinez"`},
		"stray argument":       {[]string{"run", "extra"}, 2, "takes no arguments"},
		"unknown command flag": {[]string{"--nope"}, 2, "flag provided but not defined"},
	}
	for name, tc := range cases {
		cmd := exec.Command(bin, tc.args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != tc.code || len(lines) != 1 || !strings.Contains(lines[0], tc.want) || !strings.HasPrefix(lines[0], "vm-controller: ") {
			t.Errorf("%s: exit %d, stderr %q; want exit %d and one line containing %q", name, code, stderr.String(), tc.code, tc.want)
		}
	}
	// --version works without a cluster.
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "vm-controller version ") {
		t.Errorf("--version: %q %v", out, err)
	}
}
