// Command bench measures vm-controller on a real cluster and prints figures (it asserts
// nothing: the machines it runs on are shared and noisy). Each scenario runs the controller
// binary it builds from this checkout, in a namespace of its own, and removes what it made,
// and writes what it measured to a results file under bench/results (--results), with charts
// of the bursts beside it.
//
// The bench is a Go module of its own (bench/go.mod, the controller's module replaced by the
// checkout), so that its charting and profile libraries stay out of the controller's go.mod.
// Run it from the checkout's root with go -C bench (file names given to it are then read from
// bench/), or from bench/ with go run .:
//
//	go -C bench run . usage --vms 1000      API cost of usage sampling at 1,000 Active VMs
//	go -C bench run . compare --vms 2000    vm-controller against the controller-runtime peer
//	go -C bench run . leader --reps 3       leader handoff after SIGTERM and SIGKILL
//	go -C bench run . report FILE           a results file as the benchmarks page's markdown
//	go -C bench run . chart FILE            re-draw a results file's charts
//
// See docs/dev/benchmarks.md for every scenario, its flags and the method.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var vmGVR = schema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1alpha1", Resource: "virtualmachines"}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go -C bench run . usage|burst|restart|memory|idle|teardown|ceiling|all|compare|leader [flags], or go -C bench run . report|chart|split FILE... (see docs/dev/benchmarks.md)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "usage":
		err = usageScenario(os.Args[2:])
	case "ceiling":
		err = ceilingScenario(os.Args[2:])
	case "compare":
		err = compareScenario(os.Args[2:])
	case "leader":
		err = leaderScenario(os.Args[2:])
	case "burst", "restart", "memory", "idle", "teardown", "all":
		err = scaleScenario(os.Args[1], os.Args[2:])
	case "report":
		err = reportCommand(os.Args[2:], os.Stdout)
	case "chart":
		err = chartCommand(os.Args[2:])
	case "split":
		err = splitCommand(os.Args[2:], os.Stdout)
	default:
		err = fmt.Errorf("unknown scenario %q (usage, burst, restart, memory, idle, teardown, ceiling, all, compare, leader; report, chart, split)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// env is what every scenario needs: clients, a namespace of its own, the controller binary.
type env struct {
	dyn       dynamic.Interface
	kube      kubernetes.Interface
	ns        string
	binary    string
	kubecfg   string
	cfg       *rest.Config
	cleanup   []func()
	startedAt time.Time
}

func setup(kubeconfig string) (*env, error) {
	e, err := connect(kubeconfig)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "vm-controller-bench")
	if err != nil {
		return nil, err
	}
	if e.binary, err = buildController(dir); err != nil {
		return nil, err
	}
	if err := e.newNamespace(); err != nil {
		return nil, err
	}
	return e, nil
}

// connect makes the bench's clients; the env has no namespace yet.
func connect(kubeconfig string) (*env, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		root, err := checkoutRoot()
		if err != nil {
			return nil, err
		}
		kubeconfig = filepath.Join(root, ".cache", "kubeconfig")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 5000, 10000 // the bench's own load must not be what limits it
	e := &env{kubecfg: kubeconfig, startedAt: time.Now(), cfg: cfg}
	if e.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if e.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return e, nil
}

// buildBinary builds the main package in dir pkg (a module of its own when it has a go.mod)
// into out/name and returns its path.
func buildBinary(out, name, pkg string) (string, error) {
	bin, err := filepath.Abs(filepath.Join(out, name))
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = pkg
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// fork is a copy of e in a fresh namespace of its own, with cleanups of its own.
func (e *env) fork() (*env, error) {
	f := *e
	f.cleanup = nil
	f.startedAt = time.Now()
	if err := f.newNamespace(); err != nil {
		return nil, err
	}
	return &f, nil
}

// newNamespace creates a namespace with a random name for e, removed by e.close.
func (e *env) newNamespace() error {
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	e.ns = "bench-" + hex.EncodeToString(suffix)
	ctx := context.Background()
	if _, err := e.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx,
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": e.ns}}},
		metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	// Cleanups run in reverse order, so the controller has stopped by now: VMs it has not
	// deleted keep its finalizer, which only it removes. Drop the finalizers so that the
	// namespace can go (the garbage collector removes the pods, which the VMs own).
	e.cleanup = append(e.cleanup, func() {
		ctx := context.Background()
		_ = e.kube.CoreV1().Namespaces().Delete(ctx, e.ns, metav1.DeleteOptions{})
		list, err := e.dyn.Resource(vmGVR).Namespace(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return
		}
		_ = parallel(len(list.Items), 32, func(i int) error {
			_, _ = e.dyn.Resource(vmGVR).Namespace(e.ns).Patch(ctx, list.Items[i].GetName(), types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			return nil
		})
	})
	return nil
}

func (e *env) close() {
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
}

// controller is a running controller process (vm-controller or the peer) with the
// endpoints it serves.
type controller struct {
	cmd     *exec.Cmd
	metrics string         // the metrics address it logged; empty until waitEndpoints
	health  string         // vm-controller's health address, when the bench asked for one
	started time.Time      // when the process was started
	workers chan time.Time // receives when it logs "Starting workers" (caches synced)
	leading chan time.Time // receives when it logs "Became the leader"
	exited  chan struct{}  // closed once the process has exited

	endpoints chan [2]string // endpoint name and address, as logged
	last      atomic.Value   // the last line logged, to say why it exited
}

// startController runs vm-controller for the bench's namespace and waits for its metrics
// endpoint (and its health endpoint, when args give --health-addr).
func (e *env) startController(args ...string) (*controller, error) {
	return e.startControllerBinary(e.binary, nil, args...)
}

// startControllerBinary is startController with another build of vm-controller (compare's
// --baseline) and environ added to the bench's environment (compare's GOMAXPROCS).
func (e *env) startControllerBinary(binary string, environ []string, args ...string) (*controller, error) {
	all := []string{"run", "--kubeconfig", e.kubecfg, "--namespace", e.ns, "--metrics-addr", "127.0.0.1:0", "--log-level", "info"}
	wantHealth := slices.Contains(args, "--health-addr")
	if !wantHealth {
		all = append(all, "--health-addr", "")
	}
	c, err := e.startProcess(binary, environ, append(all, args...))
	if err != nil {
		return nil, err
	}
	if err := c.waitEndpoints(wantHealth); err != nil {
		return nil, err
	}
	return c, nil
}

// startProcess runs binary with args, and environ added to the bench's environment, and
// follows its log (slog text on stderr): the lines
// the bench waits for, and warnings and errors, which it repeats.
func (e *env) startProcess(binary string, environ, args []string) (*controller, error) {
	cmd := exec.Command(binary, args...)
	if len(environ) > 0 {
		cmd.Env = append(os.Environ(), environ...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	c := &controller{cmd: cmd, started: time.Now(), workers: make(chan time.Time, 1), leading: make(chan time.Time, 1),
		exited: make(chan struct{}), endpoints: make(chan [2]string, 2)}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	e.cleanup = append(e.cleanup, func() { c.stop() })
	go func() {
		serving := regexp.MustCompile(`msg=Serving endpoint=(\S+) addr=(\S+)`)
		s := bufio.NewScanner(stderr)
		repeated := 0
		for s.Scan() {
			line := s.Text()
			c.last.Store(line)
			if m := serving.FindStringSubmatch(line); m != nil {
				c.endpoints <- [2]string{m[1], m[2]}
			}
			if strings.Contains(line, `msg="Starting workers"`) {
				c.workers <- time.Now()
			}
			if strings.Contains(line, `msg="Became the leader"`) {
				c.leading <- time.Now()
			}
			// The first few warnings and errors say what went wrong; a flood (Events refused
			// by a namespace being deleted) would bury the figures.
			if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
				if repeated++; repeated <= 5 {
					fmt.Fprintln(os.Stderr, filepath.Base(binary)+":", line)
				} else if repeated == 6 {
					fmt.Fprintln(os.Stderr, filepath.Base(binary)+": (further warnings and errors not shown)")
				}
			}
		}
		_ = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

// waitEndpoints waits until the controller serves metrics (and health, if asked).
func (c *controller) waitEndpoints(health bool) error {
	timeout := time.After(60 * time.Second)
	for c.metrics == "" || (health && c.health == "") {
		select {
		case ep := <-c.endpoints:
			switch ep[0] {
			case "metrics":
				c.metrics = ep[1]
			case "health":
				c.health = ep[1]
			}
		case <-c.exited:
			return fmt.Errorf("the controller exited: %v", c.last.Load())
		case <-timeout:
			return fmt.Errorf("the controller served no metrics within 60s")
		}
	}
	return nil
}

// stop sends SIGTERM and waits for the process to exit (killing it after 60s).
func (c *controller) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(60 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// scrape returns the controller's metrics as sample -> value.
func (c *controller) scrape() (map[string]float64, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + c.metrics + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseMetrics(body), nil
}

// apiserverMetrics scrapes the API server's own /metrics (the bench's kubeconfig is an admin's).
func (e *env) apiserverMetrics() (map[string]float64, error) {
	body, err := e.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		return nil, fmt.Errorf("scrape the API server: %w", err)
	}
	return parseMetrics(body), nil
}

// cpuProfile records the controller's CPU profile (--pprof) for d and writes it to file.
func (c *controller) cpuProfile(d time.Duration, file string) error {
	return c.profile(fmt.Sprintf("profile?seconds=%d", int(d.Seconds())), d+time.Minute, file)
}

// allocsProfile saves the controller's allocations since it started (go tool pprof
// -sample_index=alloc_space FILE): taken once the burst and its CPU profile are both over,
// they are the burst's, with the start-up's few before them (and, if the burst ended before
// the CPU profile did, the idle time up to the profile's end).
func (c *controller) allocsProfile(file string) error {
	return c.profile("allocs", time.Minute, file)
}

// profile saves one of the runtime profiles the controller serves under /debug/pprof/.
func (c *controller) profile(path string, timeout time.Duration, file string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/%s", c.metrics, path)
	resp, err := (&http.Client{Timeout: timeout}).Get(url)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", path, resp.Status)
	}
	out, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return fmt.Errorf("profile %s to %s: %w", path, file, err)
	}
	return out.Close()
}

// parseMetrics reads the Prometheus text format as sample (name and labels) -> value.
func parseMetrics(body []byte) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// sum adds the samples whose name and labels contain all of parts.
func sum(m map[string]float64, parts ...string) float64 {
	var s float64
next:
	for k, v := range m {
		for _, p := range parts {
			if !strings.Contains(k, p) {
				continue next
			}
		}
		s += v
	}
	return s
}

// createVMs creates n small VMs with c requests in flight.
func (e *env) createVMs(n, c int) error {
	return parallel(n, c, func(i int) error {
		_, err := e.dyn.Resource(vmGVR).Namespace(e.ns).Create(context.Background(), newVM(i), metav1.CreateOptions{})
		return err
	})
}

// newVM is the i-th VM of a run: small, so that thousands of servers fit on the kwok nodes.
func newVM(i int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": vmName(i)},
		"spec":     map[string]any{"action": "active", "resource": map[string]any{"cpu": "10m", "memory": "16Mi", "rootDisk": "100Mi"}},
	}}
}

func vmName(i int) string { return fmt.Sprintf("vm-%05d", i) }

// parallel runs f(0) to f(n-1) with c calls in flight and returns the first error.
func parallel(n, c int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, c)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// waitActive waits until n VMs of the namespace are Active.
func (e *env) waitActive(n int, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for time.Since(start) < timeout {
		list, err := e.dyn.Resource(vmGVR).Namespace(e.ns).List(context.Background(), metav1.ListOptions{})
		if err == nil {
			active := 0
			for _, vm := range list.Items {
				if p, _, _ := unstructured.NestedString(vm.Object, "status", "phase"); p == "Active" {
					active++
				}
			}
			if active >= n {
				return time.Since(start), nil
			}
		}
		time.Sleep(2 * time.Second)
	}
	return 0, fmt.Errorf("not all %d VMs Active within %s", n, timeout)
}
