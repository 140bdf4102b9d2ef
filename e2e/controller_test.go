//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

// crdsMu makes one installCRDs at a time: two kubectl applies of a CRD that does not exist
// yet both create it, and one fails with AlreadyExists (parallel tests on a fresh cluster,
// with no sequential test to install the CRDs first).
var crdsMu sync.Mutex

// installCRDs applies the CRDs from crds/ and waits until they are served.
func installCRDs(t testing.TB) {
	t.Helper()
	crdsMu.Lock()
	defer crdsMu.Unlock()
	kubectl(t, "apply", "-f", filepath.Join(repoRoot(), "crds"))
	waitEstablished(t, "virtualmachines.cloudnative.czs")
}

// controller is a running vm-controller process.
type controller struct {
	cmd *exec.Cmd
	// ns is the namespace it manages (--namespace); workers is its --workers.
	ns      string
	workers int
	// logFile receives the process's stdout and stderr directly (no pipe, no copying
	// goroutine), so that what the process wrote before an event the test observed is in
	// the file when the test reads it.
	logFile string
	// metricsAddr and healthAddr are the endpoints' host:port.
	metricsAddr, healthAddr string
	// done receives the exit error once, for tests that wait for the exit themselves.
	done chan error
	// exited is closed when the process has exited; exitErr is then its exit error.
	exited  chan struct{}
	exitErr error
}

// givenPorts are the loopback ports handed to a controller during this run, so that no two
// controllers of the run are ever given the same one.
var (
	portsMu    sync.Mutex
	givenPorts = map[int]bool{}
)

// freeAddr returns a loopback address whose port nothing listened on a moment ago and that
// no other controller of this run was given. Another process may still take it before the
// controller binds it; startController then starts the controller again on other ports.
func freeAddr(t testing.TB) string {
	t.Helper()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		portsMu.Lock()
		taken := givenPorts[port]
		givenPorts[port] = true
		portsMu.Unlock()
		if !taken {
			return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		}
	}
}

// startController runs vm-controller for namespace ns and returns once its health endpoint
// answers; it is stopped (SIGTERM) when the test ends, and its log is printed if the test
// failed. The endpoints are on ports the test chose, so that it knows them without reading
// the log; a controller that cannot bind them (another process took one first) is started
// again on others. A controller that exits before it serves fails the test with its log.
func startController(t *testing.T, ns string, args ...string) *controller {
	t.Helper()
	installCRDs(t)
	return runController(t, controllerBinary(t), ns, args...)
}

// runController is startController for the binary bin, against the CRDs the cluster has: the
// upgrade test runs an earlier build under that build's CRDs.
func runController(t *testing.T, bin, ns string, args ...string) *controller {
	t.Helper()
	workers := 4 // run's default
	for i, a := range args {
		if a == "--workers" && i+1 < len(args) {
			n, err := strconv.Atoi(args[i+1])
			if err != nil {
				t.Fatalf("--workers %q: %v", args[i+1], err)
			}
			workers = n
		}
	}
	for attempt := 1; ; attempt++ {
		c := &controller{ns: ns, workers: workers, metricsAddr: freeAddr(t), healthAddr: freeAddr(t),
			done: make(chan error, 1), exited: make(chan struct{})}
		all := append([]string{"run", "--kubeconfig", kubeconfig, "--namespace", ns, "--log-level", "debug",
			"--restart-backoff", "1s", "--shutdown-timeout", "10s", "--metrics-addr", c.metricsAddr, "--health-addr", c.healthAddr}, args...)
		log, err := os.CreateTemp(t.TempDir(), "controller-*.log")
		if err != nil {
			t.Fatal(err)
		}
		c.logFile = log.Name()
		c.cmd = exec.Command(bin, all...)
		c.cmd.Stdout, c.cmd.Stderr = log, log
		err = c.cmd.Start()
		log.Close() // the child has its own descriptor
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			err := c.cmd.Wait()
			c.exitErr = err
			close(c.exited)
			c.done <- err
		}()
		t.Cleanup(func() {
			c.stop(t)
			if t.Failed() {
				t.Logf("controller log (last 60 lines, %s):\n%s", c.healthAddr, c.tail(60))
			}
		})
		if c.waitServing(t) {
			return c
		}
		if !strings.Contains(c.logText(), "address already in use") || attempt == 3 {
			t.Fatalf("the controller exited before it served its endpoints: %v\n%s", c.exitErr, c.tail(20))
		}
	}
}

// waitServing waits until the health endpoint answers /healthz; false if the process exited
// first. The deadline only stops a hung start (discovery, preflight and the informers' start
// come first, each a few API calls).
func (c *controller) waitServing(t testing.TB) bool {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case <-c.exited:
			return false
		default:
		}
		if resp, err := httpGet("http://" + c.healthAddr + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller's /healthz at %s did not answer within 3m\n%s", c.healthAddr, c.tail(20))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitReady waits until /readyz says the controller's caches are synced: from then on every
// VM that existed is in its queue, and every later change comes after them.
func (c *controller) waitReady(t testing.TB) {
	t.Helper()
	eventually(t, 3*time.Minute, func() (bool, string) {
		code := httpStatus(t, "http://"+c.healthAddr+"/readyz")
		return code == http.StatusOK, fmt.Sprintf("/readyz = %d", code)
	})
}

// running tells whether the process has not exited yet.
func (c *controller) running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for the process to exit; it returns the exit error. The
// deadline only stops a hung process: the controller's own drain is bounded by
// --shutdown-timeout.
func (c *controller) stop(t testing.TB) error {
	if !c.running() {
		return c.exitErr
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return c.exitErr
	case <-time.After(2 * time.Minute):
		_ = c.cmd.Process.Kill()
		<-c.exited
		t.Errorf("controller still running 2m after SIGTERM; killed")
		return c.exitErr
	}
}

// kill ends the process with SIGKILL, as a crash or an OOM kill would.
func (c *controller) kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// addr returns the address of an endpoint: "metrics" or "health".
func (c *controller) addr(t testing.TB, endpoint string) string {
	t.Helper()
	switch endpoint {
	case "metrics":
		return c.metricsAddr
	case "health":
		return c.healthAddr
	}
	t.Fatalf("no endpoint %q", endpoint)
	return ""
}

// scrape fetches the controller's /metrics.
func (c *controller) scrape(t testing.TB) string {
	t.Helper()
	resp, err := httpGet("http://" + c.metricsAddr + "/metrics")
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
	return (&http.Client{Timeout: 30 * time.Second}).Get(url)
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

// reconciles is vmcontroller_reconcile_total summed over every result it exports (each is
// exported from the start, at 0), so that a result added later is counted too.
func reconciles(exposition string) float64 {
	sum := 0.0
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, `vmcontroller_reconcile_total{`) {
			continue
		}
		if _, v, ok := strings.Cut(line, "} "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				sum += f
			}
		}
	}
	return sum
}

// logText is what the process has logged so far. Tests assert on it only after a barrier
// in the cluster (or the exit), never wait for a line to appear: what the log says is not
// how a test learns that something happened.
func (c *controller) logText() string {
	data, err := os.ReadFile(c.logFile)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	return string(data)
}

func (c *controller) tail(n int) string {
	return lastLines(c.logText(), n)
}

// barrierVM is the VM barrier creates and changes.
const barrierVM = "barrier"

// barrier returns once the controller has finished every reconcile that a change made before
// the call caused, writes and Events included, so that a test may then assert that something
// did NOT happen. The queue hands out new work (what users and servers change) first in,
// first out, and the backlog (the VMs of the controller's first list) after it (package
// reconcile/priority). So the barrier first waits until the queue is empty, every VM of the
// backlog handed out, then creates the Inactive VM "barrier" in the controller's namespace (or
// changes its spec), and waits until the VM's status.observedGeneration has caught up: the
// informer delivers changes in the order of their resourceVersions, new work goes first in,
// first out, and with one worker (--workers 1, required) the reconciles queued before the
// barrier's, and the one under way when the queue was empty, have finished when its status is
// written. The VM "barrier" needs no server; tests count it among the namespace's VMs.
func (c *controller) barrier(t *testing.T) {
	t.Helper()
	if c.workers != 1 {
		t.Fatalf("barrier needs a controller with --workers 1 (this one has %d): with more, an earlier reconcile may still run when the barrier's is done", c.workers)
	}
	// The first barrier VM must come after the initial list, which enqueues every VM there was.
	c.waitReady(t)
	c.drained(t)
	touchBarrier(t, c.ns, "vm", "cloudnative.czs/v1alpha1")
	eventually(t, 3*time.Minute, func() (bool, string) {
		f := strings.Fields(vmField(c.ns, barrierVM, ".metadata.generation} {.status.observedGeneration"))
		return len(f) == 2 && f[0] == f[1], fmt.Sprintf("barrier VM generation/observedGeneration %v", f)
	})
}

// drained waits until the controller's queue of VMs is empty: every key queued so far has been
// handed to a worker. The backlog goes last, so a barrier's change, which is new work, could
// otherwise overtake it.
func (c *controller) drained(t *testing.T) {
	t.Helper()
	const depth = `workqueue_depth{name="virtualmachines"}`
	eventually(t, 3*time.Minute, func() (bool, string) {
		n := metric(c.scrape(t), depth)
		return n == 0, fmt.Sprintf("%s %v", depth, n)
	})
}

// touchBarrier creates the Inactive VM "barrier" of apiVersion in ns, or changes its spec
// (a new generation) when it is there; resource names the VMs' resource for kubectl.
func touchBarrier(t *testing.T, ns, resource, apiVersion string) {
	t.Helper()
	gen, err := kubectlErr("-n", ns, "get", resource, barrierVM, "-o", "jsonpath={.metadata.generation}")
	switch {
	case isNotFound(err):
		apply(t, fmt.Sprintf("apiVersion: %s\nkind: VirtualMachine\nmetadata: {name: %s, namespace: %s}\nspec: {action: inactive, resource: {cpu: 1m, memory: 16Mi, rootDisk: 100Mi}}\n", apiVersion, barrierVM, ns))
	case err != nil:
		t.Fatal(err)
	default:
		n, err := strconv.Atoi(gen)
		if err != nil {
			t.Fatalf("barrier VM generation %q: %v", gen, err)
		}
		kubectl(t, "-n", ns, "patch", resource, barrierVM, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"resource":{"cpu":"%dm"}}}`, n+1))
	}
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
	startController(t, ns, "--resize", "replace") // the replacement path; resize in place: lifecycle_test.go
	exampleVM(t, ns)

	waitPhase(t, ns, "test-vm", "Active", "ServerReady", 3*time.Minute)
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

	// A cpu change under --resize replace: a new pod with the new cpu.
	kubectl(t, "-n", ns, "patch", "vm", "test-vm", "--type=merge", "-p", `{"spec":{"resource":{"cpu":3}}}`)
	eventually(t, 3*time.Minute, func() (bool, string) {
		u, p, c := podOf(ns, "test-vm")
		return u != "" && u != uid && p == "Running" && c == "3", fmt.Sprintf("pod uid %s phase %s cpu %s", u, p, c)
	})
	waitPhase(t, ns, "test-vm", "Active", "ServerReady", 3*time.Minute)
	eventually(t, 3*time.Minute, func() (bool, string) {
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
	waitPhase(t, ns, "test-vm", "Inactive", "ServerStopped", 3*time.Minute)
	if u, _, _ := podOf(ns, "test-vm"); u != "" {
		t.Errorf("inactive VM still has pod %s", u)
	}
	kubectl(t, "-n", ns, "patch", "vm", "test-vm", "--type=merge", "-p", `{"spec":{"action":"active"}}`)
	waitPhase(t, ns, "test-vm", "Active", "ServerReady", 3*time.Minute)

	// Deletion with --cascade=orphan: the garbage collector leaves the pod alone, so only
	// the finalizer can remove it, and it must do so before the VM disappears.
	kubectl(t, "-n", ns, "delete", "vm", "test-vm", "--cascade=orphan", "--wait=false")
	eventually(t, 3*time.Minute, func() (bool, string) {
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
		"unknown action":   {`{action: running, resource: {cpu: 1, memory: 1G, rootDisk: 1G}}`, `Unsupported value: "running"`},
		"malformed cpu":    {`{action: active, resource: {cpu: two, memory: 1G, rootDisk: 1G}}`, `spec.resource.cpu`},
		"malformed memory": {`{action: active, resource: {cpu: 1, memory: 4GB, rootDisk: 1G}}`, `spec.resource.memory`},
		"negative disk":    {`{action: active, resource: {cpu: 1, memory: 1G, rootDisk: "-1G"}}`, `spec.resource.rootDisk`},
		// What the pattern, checking strings only, lets through: the CRD's CEL rules refuse it
		// in the controller's words.
		"negative cpu":        {`{action: active, resource: {cpu: -1, memory: 1G, rootDisk: 1G}}`, `spec.resource.cpu: Invalid value: -1: must be greater than zero`},
		"zero memory":         {`{action: active, resource: {cpu: 1, memory: 0, rootDisk: 1G}}`, `spec.resource.memory: Invalid value: 0: must be greater than zero`},
		"memory in bytes":     {`{action: active, resource: {cpu: 1, memory: 512, rootDisk: 1G}}`, `spec.resource.memory: Invalid value: 512: must be at least 1Mi; 512 is 512 bytes: did you mean 512Mi?`},
		"zero disk":           {`{action: active, resource: {cpu: 1, memory: 1G, rootDisk: "0"}}`, `spec.resource.rootDisk: Invalid value: "0": must be greater than zero`},
		"cpu below 1m":        {`{action: active, resource: {cpu: 100u, memory: 1G, rootDisk: 1G}}`, `spec.resource.cpu: Invalid value: "100u": must be at least 1m`},
		"missing resource":    {`{action: active}`, `spec.resource: Required value`},
		"missing memory":      {`{action: active, resource: {cpu: 1, rootDisk: 1G}}`, `spec.resource.memory: Required value`},
		"cpu of a wrong type": {`{action: active, resource: {cpu: [1], memory: 1G, rootDisk: 1G}}`, `spec.resource.cpu`},
		"overlong cpu":        {`{action: active, resource: {cpu: "` + strings.Repeat("1", 65) + `", memory: 1G, rootDisk: 1G}}`, `spec.resource.cpu: Too long`},
		"overlong label":      {`{action: active, resource: {cpu: 1, memory: 1G, rootDisk: 1G}, placement: {nodeSelector: {zone: "` + strings.Repeat("a", 64) + `"}}}`, `spec.placement.nodeSelector.zone: Too long`},
	}
	for name, tc := range cases {
		manifest := fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: bad, namespace: %s}\nspec: %s\n", ns, tc.spec)
		_, _, err := runKubectl(manifest, "apply", "-f", "-")
		if err == nil {
			t.Errorf("%s: accepted, want refused", name)
			kubectl(t, "-n", ns, "delete", "vm", "bad") // so that the next case is a create, not an update
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

// TestControllerUnrunnableSpec: a rootDisk of a fraction of a byte ("1.5") passes admission but
// cannot run. The VM ends Failed with a reason, a message and one Event, and the controller
// does not retry it in a loop: once it has handled everything up to a later change (a
// barrier), the VM was not written again and no reconcile ended in an error.
func TestControllerUnrunnableSpec(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns, "--workers", "1")
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: fraction, namespace: %s}\nspec: {action: active, resource: {cpu: 1, memory: 64Mi, rootDisk: \"1.5\"}}\n", ns))
	waitPhase(t, ns, "fraction", "Failed", "InvalidSpec", 3*time.Minute)
	if msg := vmField(ns, "fraction", ".status.message"); !strings.Contains(msg, "spec.resource.rootDisk") || !strings.Contains(msg, "whole number of bytes") {
		t.Errorf("status.message = %q, want the field and why", msg)
	}
	// The write that made it Failed is itself a change the controller sees; the barrier
	// comes after it, so its reconcile (which must write nothing) is done by then.
	rv := vmField(ns, "fraction", ".metadata.resourceVersion")
	c.barrier(t)
	if now := vmField(ns, "fraction", ".metadata.resourceVersion"); now != rv {
		t.Errorf("the Failed VM keeps being written: resourceVersion %s -> %s", rv, now)
	}
	if u, _, _ := podOf(ns, "fraction"); u != "" {
		t.Errorf("an invalid VM got pod %s", u)
	}
	if errs := metric(c.scrape(t), `vmcontroller_reconcile_total{result="error"}`); errs > 0 {
		t.Errorf("%v reconciles ended in an error; the invalid VM was retried as one:\n%s", errs, c.tail(20))
	}
	// One InvalidSpec event, not a growing series of them. Events are posted in the
	// background, so the wait is for the first one to be stored.
	eventually(t, 3*time.Minute, func() (bool, string) {
		out, _ := kubectlErr("-n", ns, "get", "events.events.k8s.io", "--field-selector", "regarding.name=fraction,reason=InvalidSpec",
			"-o", `jsonpath={range .items[*]}{.reason}:{.series.count}{"\n"}{end}`)
		return out == "InvalidSpec:", "InvalidSpec events (reason:series count): " + out
	})
	// Admission bounds a nodeSelector's values, not its keys: a spec with a 40,000-byte key
	// and 300 bad ones ends Failed all the same, with a message short enough for the
	// condition (the CRD's 32 KiB) and an Event short enough for the Events API (1 KiB).
	selector := map[string]string{strings.Repeat("k", 40000): "v"}
	for i := range 300 {
		selector[fmt.Sprintf("bad key %d!", i)] = "v"
	}
	huge, err := json.Marshal(map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "huge", "namespace": ns},
		"spec": map[string]any{"action": "active", "resource": map[string]any{"cpu": 1, "memory": "1G", "rootDisk": "1G"},
			"placement": map[string]any{"nodeSelector": selector}}})
	if err != nil {
		t.Fatal(err)
	}
	apply(t, string(huge)) // JSON: YAML keeps a key of a flow mapping to 1024 characters
	waitPhase(t, ns, "huge", "Failed", "InvalidSpec", 3*time.Minute)
	if msg := vmField(ns, "huge", `.status.conditions[?(@.type=="Ready")].message`); !strings.HasPrefix(msg, "Invalid spec: ") || len(msg) > 32768 {
		t.Errorf("Ready's message of %d bytes, %.200q: want at most 32768 saying what is invalid", len(msg), msg)
	}
	eventually(t, 3*time.Minute, func() (bool, string) {
		out, _ := kubectlErr("-n", ns, "get", "events.events.k8s.io", "--field-selector", "regarding.name=huge,reason=InvalidSpec",
			"-o", `jsonpath={range .items[*]}{.note}{"\n"}{end}`)
		notes := strings.Split(strings.TrimSpace(out), "\n")
		return len(notes) == 1 && strings.HasPrefix(notes[0], "Invalid spec: ") && len(notes[0]) <= 1024, "InvalidSpec events' notes: " + out
	})
	// Fixing the spec brings it up.
	kubectl(t, "-n", ns, "patch", "vm", "fraction", "--type=merge", "-p", `{"spec":{"resource":{"rootDisk":"1G"}}}`)
	waitPhase(t, ns, "fraction", "Active", "ServerReady", 3*time.Minute)
}

// TestControllerWarningsOnly: with --events warnings, a VM brought to Active leaves no Normal
// events, and an invalid one still gets its Warning. The invalid VM is created only once the
// good one is Active, and with one worker its reconcile comes after every reconcile of the
// good one: its Warning, once stored, is the barrier after which the Normal events the good
// VM's reconciles would have recorded are looked for.
func TestControllerWarningsOnly(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns, "--events", "warnings", "--workers", "1")
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: good, namespace: %s}\nspec: {action: active, resource: {cpu: 10m, memory: 16Mi, rootDisk: 100Mi}}\n", ns))
	waitPhase(t, ns, "good", "Active", "ServerReady", 3*time.Minute)
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: fraction, namespace: %s}\nspec: {action: active, resource: {cpu: 1, memory: 64Mi, rootDisk: \"1.5\"}}\n", ns))
	waitPhase(t, ns, "fraction", "Failed", "InvalidSpec", 3*time.Minute)
	eventually(t, 3*time.Minute, func() (bool, string) {
		out, _ := kubectlErr("-n", ns, "get", "events.events.k8s.io", "--field-selector", "regarding.name=fraction,reason=InvalidSpec,type=Warning", "-o", "name")
		return out != "", "no InvalidSpec Warning for fraction"
	})
	if out := kubectl(t, "-n", ns, "get", "events.events.k8s.io", "--field-selector", "reportingController=vm-controller,type=Normal",
		"-o", `jsonpath={range .items[*]}{.reason} {.regarding.name}{"\n"}{end}`); strings.TrimSpace(out) != "" {
		t.Errorf("Normal events recorded with --events warnings:\n%s", out)
	}
}

// TestControllerServerReplaced: a server pod deleted by someone else (a Warning ServerMissing
// says so), or one that fails, is replaced while the VM's action is active. A failed server
// is first reported Failed, for the restart backoff, and replaced after it: the test waits
// for the Failed state, then moves the failure into the past (as the passing of the backoff
// would), so that neither step depends on how quickly the controller sees the pod.
func TestControllerServerReplaced(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	// A backoff long enough for the failed server to be seen kept through it, and short
	// enough to wait out: a node's clock cannot end it early (the controller bounds it by
	// its own), so the test waits.
	startController(t, ns, "--restart-backoff", "30s", "--max-restart-backoff", "30s")
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: vm1, namespace: %s}\nspec: {resource: {cpu: 100m, memory: 64Mi, rootDisk: 1Gi}}\n", ns))
	waitPhase(t, ns, "vm1", "Active", "ServerReady", 3*time.Minute)
	first, _, _ := podOf(ns, "vm1")

	kubectl(t, "-n", ns, "delete", "pod", "vm1-server", "--wait=false")
	eventually(t, 3*time.Minute, func() (bool, string) {
		u, p, _ := podOf(ns, "vm1")
		return u != "" && u != first && p == "Running", "pod " + u + " " + p
	})
	waitPhase(t, ns, "vm1", "Active", "ServerReady", 3*time.Minute)
	second, _, _ := podOf(ns, "vm1")

	// A failed server, as a kubelet reports one (phase Failed, Ready false since the given
	// time, which the backoff counts from).
	fail := func(since time.Time) {
		t.Helper()
		kubectl(t, "-n", ns, "patch", "pod", "vm1-server", "--subresource=status", "--type=merge", "-p",
			`{"status":{"phase":"Failed","reason":"Crashed","message":"simulated crash","conditions":[{"type":"Ready","status":"False","lastTransitionTime":"`+
				since.UTC().Format(time.RFC3339)+`"}]}}`)
	}
	fail(time.Now())
	waitPhase(t, ns, "vm1", "Failed", "ServerFailed", 3*time.Minute)
	if u, _, _ := podOf(ns, "vm1"); u != second {
		t.Fatalf("the failed server %s was replaced by %s within its backoff", second, u)
	}
	if got := vmField(ns, "vm1", ".status.nextRetryTime"); got == "" {
		t.Errorf("status.nextRetryTime is empty, want when the new server comes")
	}
	eventually(t, 3*time.Minute, func() (bool, string) { // the backoff is over
		u, p, _ := podOf(ns, "vm1")
		return u != "" && u != second && p == "Running", "pod " + u + " " + p
	})
	waitPhase(t, ns, "vm1", "Active", "ServerReady", 3*time.Minute)
	// Events are posted in the background: the wait is for all of them to be stored.
	var reasons string
	eventually(t, 3*time.Minute, func() (bool, string) {
		reasons = kubectl(t, "-n", ns, "get", "events", "--field-selector", "involvedObject.name=vm1", "-o", "jsonpath={.items[*].reason}")
		for _, want := range []string{"ServerMissing", "ServerFailed", "RestartingServer", "CreatingServer"} {
			if !strings.Contains(reasons, want) {
				return false, fmt.Sprintf("events %q lack %s", reasons, want)
			}
		}
		return true, ""
	})
	// The deletion by someone else is a ServerMissing; the controller's own replacement of
	// the failed server is not. A repeat with the same note would be a series of one Event,
	// so occurrences are counted, not Events.
	out := kubectl(t, "-n", ns, "get", "events.events.k8s.io", "--field-selector", "regarding.name=vm1,reason=ServerMissing",
		"-o", `jsonpath={range .items[*]}{.series.count}{" "}{end}`)
	occurrences := 0
	for _, count := range strings.Split(out, " ") {
		n, _ := strconv.Atoi(count)
		occurrences += max(n, 1)
	}
	if occurrences != 1 {
		all := kubectl(t, "-n", ns, "get", "events.events.k8s.io", "--field-selector", "regarding.name=vm1", "--sort-by", ".metadata.creationTimestamp",
			"-o", `jsonpath={range .items[*]}{.eventTime}{" "}{.reason}{" x"}{.series.count}{": "}{.note}{"\n"}{end}`)
		t.Errorf("ServerMissing occurred %d times (series counts %q); want 1, for the deleted pod; the VM's Events:\n%s", occurrences, out, all)
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
	eventually(t, 3*time.Minute, func() (bool, string) {
		n := strings.Count(kubectl(t, "-n", ns, "get", "pods", "-o", "name"), "pod/")
		return n >= 5, fmt.Sprintf("%d pods", n)
	})
	first.kill()
	startController(t, ns)
	eventually(t, 3*time.Minute, func() (bool, string) {
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
	eventually(t, 3*time.Minute, func() (bool, string) {
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

// TestControllerShutdown: SIGTERM stops the controller cleanly: it exits 0, and its log
// (complete once it has exited) says its workers finished rather than being cut off.
func TestControllerShutdown(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns)
	// A VM it made Active: its workers run.
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: vm1, namespace: %s}\nspec: {resource: {cpu: 10m, memory: 16Mi, rootDisk: 100Mi}}\n", ns))
	waitPhase(t, ns, "vm1", "Active", "ServerReady", 3*time.Minute)
	start := time.Now()
	if err := c.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, c.tail(10))
	}
	if log := c.logText(); !strings.Contains(log, "Workers finished") || strings.Contains(log, "Drain timed out") {
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
