// The compare scenario: vm-controller and the controller-runtime peer (bench/peer) doing the
// same burst on the same cluster, alternating, each in a fresh namespace, so that the noise
// of a shared machine falls on both alike.

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cloudnative-czs/vm-controller/bench/record"
)

// compareFlags are the compare scenario's flags.
type compareFlags struct {
	vms, clients, workers, reps int
	events                      []string
	// rootDisks are vm-controller's --root-disk values, one contender for each.
	rootDisks []string
	// peer runs the controller-runtime peer as a contender.
	peer       bool
	timeout    time.Duration
	kubeconfig string
	// profile, if set, is a directory for a CPU profile of each contender's run, taken over
	// the first profileFor of its burst. Profiling costs the process CPU of its own, so a run
	// with profiles is for reading where the time goes, not for the CPU column.
	profile    string
	profileFor time.Duration
	// gomaxprocs is vm-controller's GOMAXPROCS, and peerGOMAXPROCS the peer's, one run of the
	// peer for each; 0 leaves Go's default (the machine's CPUs, at least 2 under a CPU limit).
	gomaxprocs     int
	peerGOMAXPROCS []int
	// settle, if set, is the longest wait before each run for the cluster to be quiet (see
	// settle): a run right after a teardown shares the machine with what that left going (the
	// garbage collector, the watch caches) and a first run does not, so the contender that
	// starts a run has had the cheaper cluster.
	settle time.Duration
}

// contender is one controller of the comparison and how to start it in a namespace; peer
// marks the controller-runtime peer, which the others are compared with.
type contender struct {
	name  string
	peer  bool
	start func(e *env) (*controller, error)
}

// The API server's writes that the controller makes on a VM's way to Active (the bench's
// own VM creates, the scheduler's bindings and kwok's pod status are left out), in the
// order of the table's columns.
var controllerWrites = []string{"virtualmachines PATCH", "virtualmachines/status PATCH", "pods POST",
	"persistentvolumeclaims POST", "virtualmachines PUT", "virtualmachines/status PUT", "pods DELETE",
	"persistentvolumeclaims PATCH", "persistentvolumeclaims DELETE"}

// writesPerVM is every write of the controller's kinds per VM, summed over the kinds.
func writesPerVM(b *record.Burst) float64 {
	var sum float64
	for _, k := range controllerWrites {
		sum += b.WritesPerVM[k]
	}
	return sum
}

// parse fills the lists from their flags' values and checks the flags, naming the one at
// fault.
func (f *compareFlags) parse(events, peerProcs, rootDisks string) error {
	switch {
	case f.vms < 1:
		return fmt.Errorf("--vms must be at least 1, got %d", f.vms)
	case f.clients < 1:
		return fmt.Errorf("--clients must be at least 1, got %d", f.clients)
	case f.workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", f.workers)
	case f.reps < 1:
		return fmt.Errorf("--reps must be at least 1, got %d", f.reps)
	case f.gomaxprocs < 0:
		return fmt.Errorf("--gomaxprocs %d: want 0 (Go's default) or more", f.gomaxprocs)
	case f.settle < 0:
		return fmt.Errorf("--settle must not be negative, got %s", f.settle)
	}
	f.events, f.peerGOMAXPROCS = nil, nil
	for _, ev := range strings.Split(events, ",") {
		if ev != "all" && ev != "warnings" {
			return fmt.Errorf("--events %q: want all, warnings, or both separated by a comma", events)
		}
		f.events = append(f.events, ev)
	}
	f.rootDisks = nil
	for _, d := range strings.Split(rootDisks, ",") {
		if d != "claim" && d != "ephemeral" {
			return fmt.Errorf("--root-disk %q: want claim, ephemeral, or both separated by a comma", rootDisks)
		}
		f.rootDisks = append(f.rootDisks, d)
	}
	var err error
	f.peerGOMAXPROCS, err = parseProcs("--peer-gomaxprocs", peerProcs)
	return err
}

// parseProcs reads a flag's comma-separated list of GOMAXPROCS values (0: Go's default).
func parseProcs(flag, list string) ([]int, error) {
	var procs []int
	for _, p := range strings.Split(list, ",") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s %q: want numbers of 0 or more separated by commas", flag, list)
		}
		procs = append(procs, n)
	}
	return procs, nil
}

func compareScenario(args []string) error {
	var f compareFlags
	fs := flag.NewFlagSet("compare", flag.ExitOnError)
	fs.IntVar(&f.vms, "vms", 2000, "VMs each burst creates")
	fs.IntVar(&f.clients, "clients", 32, "concurrent clients creating the VMs")
	fs.IntVar(&f.workers, "workers", 16, "workers of both controllers (vm-controller --workers, the peer's MaxConcurrentReconciles)")
	fs.IntVar(&f.reps, "reps", 3, "repetitions; each runs every contender once, each starting one contender further along")
	events := fs.String("events", "warnings", "vm-controller's --events, or a comma-separated list to run each variant (e.g. warnings,all)")
	rootDisks := fs.String("root-disk", "ephemeral", "vm-controller's --root-disk, or a comma-separated list to run each variant (claim,ephemeral: a disk per VM against the peer's work); ephemeral does the peer's work, which has none")
	fs.BoolVar(&f.peer, "peer", true, "run the controller-runtime peer too; false: vm-controller's variants alone")
	fs.DurationVar(&f.timeout, "timeout", 20*time.Minute, "longest wait for a burst or a teardown")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig; empty: $KUBECONFIG or the checkout's .cache/kubeconfig")
	fs.StringVar(&f.profile, "profile", "", "directory for a CPU profile of each contender's run and its allocations to the end of the burst, or of the CPU profile if later (NAME.allocs.pprof), the peer's too (go tool pprof FILE); its CPU figures then include the profiler's")
	fs.DurationVar(&f.profileFor, "profile-for", 30*time.Second, "how much of each burst, from its first create, --profile records")
	fs.IntVar(&f.gomaxprocs, "gomaxprocs", 0, "vm-controller's GOMAXPROCS; 0: Go's default")
	peerProcs := fs.String("peer-gomaxprocs", "0", "the peer's GOMAXPROCS, or a comma-separated list to run the peer once with each (e.g. 0,1); 0: Go's default")
	fs.DurationVar(&f.settle, "settle", 0, "before each run, wait up to this long for the cluster to settle (the API server answering fewer than 10 requests a second other than those for leases, the machine under half a core, over 30 s); 0: no wait")
	baseline := fs.String("baseline", "", "a checkout of another commit of vm-controller (git worktree add DIR REF) to run as one more contender beside this checkout's, with the same flags")
	resultsDir := resultsFlag(fs)
	_ = fs.Parse(args)
	if err := f.parse(*events, *peerProcs, *rootDisks); err != nil {
		return err
	}
	rec := newRecording("compare", fs, args, *resultsDir)

	if f.profile != "" {
		if err := os.MkdirAll(f.profile, 0o755); err != nil {
			return fmt.Errorf("--profile: %w", err)
		}
	}
	base, err := connect(f.kubeconfig)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "vm-controller-compare")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if base.binary, err = buildController(dir); err != nil {
		return err
	}
	root, err := checkoutRoot()
	if err != nil {
		return err
	}
	peer, err := buildBinary(dir, "vm-peer", filepath.Join(root, "bench", "peer"))
	if err != nil {
		return err
	}
	builds := []struct{ name, binary string }{{"vm-controller", base.binary}}
	if *baseline != "" {
		bin, err := buildBinary(dir, "vm-controller-baseline", *baseline)
		if err != nil {
			return fmt.Errorf("--baseline: %w", err)
		}
		builds = append(builds, struct{ name, binary string }{"vm-controller@" + describeCheckout(*baseline), bin})
	}

	workers := strconv.Itoa(f.workers)
	var contenders []contender
	for _, disk := range f.rootDisks {
		for _, ev := range f.events {
			for _, b := range builds {
				contenders = append(contenders, contender{name: b.name + " --events " + ev + " --root-disk " + disk + procsSuffix(f.gomaxprocs, false), start: func(e *env) (*controller, error) {
					// No client-side limiter (--qps 0), as the peer: a limiter that never waits
					// still costs each request the template of its URL for a metric.
					// Usage sampling is off: the peer has none, and it is not part of a burst.
					args := []string{"--workers", workers, "--qps", "0", "--usage-interval", "0", "--events", ev,
						"--root-disk", disk}
					if f.profile != "" {
						args = append(args, "--pprof")
					}
					c, err := e.startControllerBinary(b.binary, gomaxprocsEnv(f.gomaxprocs), args...)
					if err != nil {
						return nil, err
					}
					return c, c.waitWorkers(f.timeout)
				}})
			}
		}
	}
	for _, procs := range f.peerGOMAXPROCS {
		if !f.peer {
			break
		}
		contenders = append(contenders, contender{name: "controller-runtime peer" + procsSuffix(procs, len(f.peerGOMAXPROCS) > 1), peer: true, start: func(e *env) (*controller, error) {
			args := []string{"--kubeconfig", e.kubecfg, "--namespace", e.ns, "--workers", workers, "--metrics-addr", "127.0.0.1:0"}
			if f.profile != "" {
				args = append(args, "--pprof")
			}
			c, err := e.startProcess(peer, gomaxprocsEnv(procs), args)
			if err != nil {
				return nil, err
			}
			if err := c.waitEndpoints(false); err != nil {
				return nil, err
			}
			return c, c.waitWorkers(f.timeout)
		}})
	}

	fmt.Printf("compare: %d VMs per burst created by %d clients, %d workers each, %d repetitions; %d cores\n",
		f.vms, f.clients, f.workers, f.reps, runtime.NumCPU())
	type result struct {
		name string
		rep  record.Repetition
	}
	var results []result
	shapes := map[string]workShape{} // each contender's, from its first burst
	for rep := 1; rep <= f.reps; rep++ {
		for pos, c := range rotated(contenders, rep-1) {
			if f.settle > 0 {
				if err := settle(base, f.settle); err != nil {
					return fmt.Errorf("settle before %s, repetition %d: %w", c.name, rep, err)
				}
			}
			started := time.Now()
			b, shape, err := compareRun(base, c, f, rep)
			if err != nil {
				return fmt.Errorf("%s, repetition %d: %w", c.name, rep, err)
			}
			if _, ok := shapes[c.name]; !ok {
				shapes[c.name] = shape
			}
			r := record.Repetition{Rep: rep, Position: pos + 1, Started: started, Burst: b}
			results = append(results, result{c.name, r})
			rec.add(c.name, c.peer, r)
			printRunHeader()
			printRun(c.name, rep, b)
		}
	}
	fmt.Println()
	fmt.Println("all runs:")
	printRunHeader()
	for _, r := range results {
		printRun(r.name, r.rep.Rep, r.rep.Burst)
	}
	printShapes(contenders, shapes)
	fmt.Printf("\nmedian of %d:\n", f.reps)
	printRunHeader()
	for _, c := range rec.run.Contenders {
		printRun(c.Name, 0, record.Median(c.Repetitions).Burst)
	}
	if err := rec.finish(); err != nil {
		return err
	}
	if f.profile != "" {
		// The profiles' split, the benchmarks page's "profile of what is left": each
		// repetition's, its contenders side by side. After the results are written, which a
		// profile that cannot be read must not cost.
		for rep := 1; rep <= f.reps; rep++ {
			var files []string
			for _, c := range contenders {
				files = append(files, filepath.Join(f.profile, profileName(c.name, rep)))
			}
			fmt.Printf("\nwhere the CPU went, repetition %d (go -C bench run . split %s):\n", rep, strings.Join(files, " "))
			if err := splitCommand(files, os.Stdout); err != nil {
				fmt.Printf("split: %v\n", err)
			}
		}
	}
	return nil
}

// compareRun starts one contender in a fresh namespace, creates the VMs, waits until all are
// Active, then deletes the namespace with the controller running and waits until it is gone.
// It returns the burst's figures and the shape of the work done for the first VM.
func compareRun(base *env, c contender, f compareFlags, rep int) (*record.Burst, workShape, error) {
	e, err := base.fork()
	if err != nil {
		return nil, workShape{}, err
	}
	defer e.close()
	ctrl, err := c.start(e)
	if err != nil {
		return nil, workShape{}, err
	}
	pid := ctrl.cmd.Process.Pid
	w, err := e.watchVMs()
	if err != nil {
		return nil, workShape{}, err
	}
	apiBefore, err := e.apiserverMetrics()
	if err != nil {
		return nil, workShape{}, err
	}
	cpuBefore, err := processCPU(pid)
	if err != nil {
		return nil, workShape{}, err
	}
	profiled := make(chan error, 1)
	if f.profile != "" {
		go func() {
			profiled <- ctrl.cpuProfile(f.profileFor, filepath.Join(f.profile, profileName(c.name, rep)))
		}()
	} else {
		profiled <- nil
	}
	machineBefore := takeCPU()
	start := time.Now()
	err = parallel(f.vms, f.clients, func(i int) error {
		w.created(vmName(i))
		_, err := e.dyn.Resource(vmGVR).Namespace(e.ns).Create(context.Background(), compareVM(i), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, workShape{}, fmt.Errorf("create VMs: %w", err)
	}
	if err := w.waitActive(f.vms, f.timeout); err != nil {
		return nil, workShape{}, err
	}
	took := time.Since(start)
	cpuAfter, err := processCPU(pid)
	if err != nil {
		return nil, workShape{}, err
	}
	machineAfter := takeCPU()
	printCPU("  "+c.name+": CPU by process, first create to all Active", machineBefore, machineAfter)
	rss, err := peakRSS(pid)
	if err != nil {
		return nil, workShape{}, err
	}
	if err := <-profiled; err != nil {
		return nil, workShape{}, err
	}
	if f.profile != "" {
		name := filepath.Join(f.profile, strings.TrimSuffix(profileName(c.name, rep), ".pprof")+".allocs.pprof")
		if err := ctrl.allocsProfile(name); err != nil {
			return nil, workShape{}, err
		}
	}
	time.Sleep(5 * time.Second) // writes still on their way (vm-controller's Events are sent in the background)
	apiAfter, err := e.apiserverMetrics()
	if err != nil {
		return nil, workShape{}, err
	}
	// After the API server's figures, so that its reads are not counted as the controller's.
	shape, err := shapeOf(e, w, vmName(0))
	if err != nil {
		return nil, workShape{}, err
	}
	n := float64(f.vms)
	r := w.burstRecord(0, f.vms, start, took, cpuAfter-cpuBefore, machineAfter.since(machineBefore), apiBefore, apiAfter)
	r.PeakRSSMB = rss
	// The pods' resource is shared with the scheduler (bindings are pods/binding) and kwok
	// (pods/status), so these counts are the controller's; the bench's creates are the
	// virtualmachines POSTs, left out of the table.
	if r.ConflictsPerVM > 0 {
		fmt.Printf("  %s: 409 Conflict on writes, per VM: %v\n", c.name, formatPerVM(writesByResource(apiBefore, apiAfter, "409"), n))
	}
	evs, err := e.controllerEvents()
	if err != nil {
		return nil, workShape{}, err
	}
	r.EventsPerVM = float64(evs) / n
	printClusterWrites(apiBefore, apiAfter, n)

	var refused map[string]float64
	if r.TeardownSeconds, r.Teardown, refused, err = deleteNamespace(e, ctrl, w, f.vms, f.timeout); err != nil {
		return nil, workShape{}, err
	}
	printTeardown(c.name, r, refused)
	ctrl.stop()
	return r, shape, nil
}

// deleteNamespace deletes e's namespace with the controller running and waits until it is
// gone. It returns the time that took and what the controller did meanwhile, per VM of n,
// from the API server's and the controller's metrics scraped before the delete and after,
// with the time until w saw the last VM go, and the writes refused over it (refusedWrites).
func deleteNamespace(e *env, ctrl *controller, w *vmWatch, n int, timeout time.Duration) (float64, *record.Teardown, map[string]float64, error) {
	apiBefore, err := e.apiserverMetrics()
	if err != nil {
		return 0, nil, nil, err
	}
	ctrlBefore, err := ctrl.scrape()
	if err != nil {
		return 0, nil, nil, fmt.Errorf("scrape the controller: %w", err)
	}
	start := time.Now()
	if err := e.kube.CoreV1().Namespaces().Delete(context.Background(), e.ns, metav1.DeleteOptions{}); err != nil {
		return 0, nil, nil, fmt.Errorf("delete namespace: %w", err)
	}
	var vmsGone time.Duration
	for asked := start; ; time.Sleep(100 * time.Millisecond) {
		if vmsGone == 0 && w.count() == 0 {
			vmsGone = time.Since(start)
		}
		if time.Since(asked) < 500*time.Millisecond {
			continue
		}
		asked = time.Now()
		_, err := e.kube.CoreV1().Namespaces().Get(context.Background(), e.ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Since(start) > timeout {
			return 0, nil, nil, fmt.Errorf("namespace %s still there %s after its delete", e.ns, timeout)
		}
	}
	took := time.Since(start)
	if vmsGone == 0 {
		vmsGone = took // the watch missed the last delete; the namespace's end bounds it
	}
	apiAfter, err := e.apiserverMetrics()
	if err != nil {
		return 0, nil, nil, err
	}
	ctrlAfter, err := ctrl.scrape()
	if err != nil {
		return 0, nil, nil, fmt.Errorf("scrape the controller: %w", err)
	}
	t := teardownRecord(n, apiBefore, apiAfter, ctrlBefore, ctrlAfter)
	t.VMsGoneSeconds = vmsGone.Seconds()
	return took.Seconds(), t, refusedWrites(apiBefore, apiAfter), nil
}

// teardownRecord is a teardown's figures per VM of n: the API server's writes of VMs between
// its two scrapes (on their way out only the controller writes them; the pods' deletes are
// the namespace controller's and kwok's too), those answered 409, and the retries the
// controller's work queues counted between its two (workqueue_retries_total, a name
// vm-controller's metrics and controller-runtime's share).
func teardownRecord(n int, apiBefore, apiAfter, ctrlBefore, ctrlAfter map[string]float64) *record.Teardown {
	t := &record.Teardown{WritesPerVM: map[string]float64{}}
	for k, v := range writesByResource(apiBefore, apiAfter, "") {
		if strings.HasPrefix(k, "virtualmachines") {
			t.WritesPerVM[k] = v / float64(n)
		}
	}
	for k, v := range writesByResource(apiBefore, apiAfter, "409") {
		if strings.HasPrefix(k, "virtualmachines") {
			t.ConflictsPerVM += v / float64(n)
		}
	}
	t.RetriesPerVM = delta(ctrlBefore, ctrlAfter, "workqueue_retries_total") / float64(n)
	return t
}

// printTeardown prints a run's teardown: its time and the VMs' part of it, the VMs' writes
// per VM by kind, the 409s among them and the controller's retries, and the writes of the
// controller's kinds refused (refusedWrites), which say what the retries were for.
func printTeardown(name string, b *record.Burst, refused map[string]float64) {
	fmt.Printf("  %s: teardown %s, the VMs gone in %s; writes of the VMs per VM: %s; 409 per VM %.3f; retries per VM %.3f\n", name,
		seconds(b.TeardownSeconds).Round(100*time.Millisecond), seconds(b.Teardown.VMsGoneSeconds).Round(100*time.Millisecond),
		formatPerVM(b.Teardown.WritesPerVM, 1), b.Teardown.ConflictsPerVM, b.Teardown.RetriesPerVM)
	if len(refused) > 0 {
		fmt.Printf("  %s: teardown, writes refused per VM: %s\n", name, formatPerVM(refused, float64(b.VMs)))
	}
}

// refusedWrites is the writes of the controller's kinds (controllerWrites) that the API server
// refused between two scrapes, by "resource verb code" for each 4xx code: a pod create in a
// namespace being deleted (403), a write from a stale view (409). Pods' deletes are the
// namespace controller's and kwok's too.
func refusedWrites(before, after map[string]float64) map[string]float64 {
	codes := map[string]bool{}
	for k := range after {
		if code := label(k, "code"); strings.HasPrefix(code, "4") && strings.HasPrefix(k, "apiserver_request_total{") {
			codes[code] = true
		}
	}
	out := map[string]float64{}
	for code := range codes {
		for kind, v := range writesByResource(before, after, code) {
			out[kind+" "+code] = v
		}
	}
	return out
}

// rotated is the contenders in the order of repetition rep (from 0): each repetition starts
// one further along, so that with as many repetitions as contenders each runs once in each
// position, rather than one of them always first (right after the previous repetition's
// last, whose namespace the cluster may still be cleaning up) and another always last.
func rotated(contenders []contender, rep int) []contender {
	k := rep % len(contenders)
	return append(slices.Clone(contenders[k:]), contenders[:k]...)
}

// printShapes prints how each contender's work, its first VM's status and pod, differs from
// the peer's: the comparison holds only where they are the same (a contender with claims has a
// disk of its own in both, which the peer does not make).
func printShapes(contenders []contender, shapes map[string]workShape) {
	var peer *contender
	for i := range contenders {
		if contenders[i].peer {
			peer = &contenders[i]
			break
		}
	}
	if peer == nil {
		return
	}
	fmt.Println()
	for _, c := range contenders {
		if c.peer {
			continue
		}
		if d := shapes[c.name].diff(shapes[peer.name]); d != "" {
			fmt.Printf("the work differs: %s against %s: %s\n", c.name, peer.name, d)
		} else {
			fmt.Printf("the same work: %s and %s made the same statuses and pod (their fields, phase by phase)\n", c.name, peer.name)
		}
	}
}

// profileName is the file of a contender's CPU profile in one repetition.
func profileName(contender string, rep int) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '=' {
			return r
		}
		return '_'
	}, strings.TrimPrefix(strings.ReplaceAll(contender, " --", "-"), " "))
	return fmt.Sprintf("%s-rep%d.pprof", name, rep)
}

// compareVM is the i-th VM of a compare burst: cpu 100m, small enough for thousands of pods on
// the kwok nodes.
func compareVM(i int) *unstructured.Unstructured {
	vm := newVM(i)
	_ = unstructured.SetNestedField(vm.Object, "100m", "spec", "resource", "cpu")
	return vm
}

// writesByResource is the writes the API server answered between two scrapes, by "resource
// verb" (resource with its subresource), for the controller's kinds of write; code, if set,
// counts only answers with that code.
func writesByResource(before, after map[string]float64, code string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if !strings.HasPrefix(k, "apiserver_request_total{") || (code != "" && label(k, "code") != code) {
			continue
		}
		r := label(k, "resource")
		if sub := label(k, "subresource"); sub != "" {
			r += "/" + sub
		}
		key := r + " " + label(k, "verb")
		if !slices.Contains(controllerWrites, key) {
			continue
		}
		if d := v - before[k]; d > 0 {
			out[key] += d
		}
	}
	return out
}

func formatPerVM(m map[string]float64, n float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.3f", k, m[k]/n))
	}
	return strings.Join(parts, ", ")
}

// controllerEvents counts the Events in the namespace about the VMs: the controller's. The
// others are the cluster's, whichever controller runs: the scheduler's on the pods (one
// Scheduled per pod), the persistent-volume controller's on the claims.
func (e *env) controllerEvents() (int, error) {
	n := 0
	opts := metav1.ListOptions{Limit: 1000}
	for {
		list, err := e.kube.EventsV1().Events(e.ns).List(context.Background(), opts)
		if err != nil {
			return 0, fmt.Errorf("list events: %w", err)
		}
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "VirtualMachine" {
				n++
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return n, nil
		}
	}
}

func printRunHeader() {
	fmt.Println("| controller | rep | VMs/s | p50 create->Active | p99 | CPU-s | CPU-ms/VM | API server CPU-ms/VM | machine CPU-ms/VM | peak RSS MB | VM patch/VM | status patch/VM | pod create/VM | claim create/VM | other writes/VM | writes/VM | 409/VM | Events/VM | teardown | VMs gone | teardown 409/VM | teardown retries/VM |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
}

// printRun prints one burst of a contender as a row of printRunHeader's table; rep 0 is a
// median.
func printRun(name string, rep int, b *record.Burst) {
	r := strconv.Itoa(rep)
	if rep == 0 {
		r = "median"
	}
	var other float64
	for _, k := range controllerWrites[4:] {
		other += b.WritesPerVM[k]
	}
	perVM := func(sec float64) float64 { return sec * 1000 / float64(b.VMs) }
	gone, conflictsOut, retriesOut := "-", "-", "-"
	if t := b.Teardown; t != nil {
		gone = seconds(t.VMsGoneSeconds).Round(100 * time.Millisecond).String()
		conflictsOut, retriesOut = fmt.Sprintf("%.3f", t.ConflictsPerVM), fmt.Sprintf("%.3f", t.RetriesPerVM)
	}
	fmt.Printf("| %s | %s | %.1f | %s | %s | %.1f | %.2f | %.2f | %.2f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.3f | %.2f | %s | %s | %s | %s |\n",
		name, r, b.VMsPerSec, seconds(b.P50).Round(time.Millisecond), seconds(b.P99).Round(time.Millisecond), b.ControllerCPU,
		perVM(b.ControllerCPU), perVM(b.APIServerCPU), perVM(b.MachineCPU), b.PeakRSSMB,
		b.WritesPerVM["virtualmachines PATCH"], b.WritesPerVM["virtualmachines/status PATCH"], b.WritesPerVM["pods POST"],
		b.WritesPerVM["persistentvolumeclaims POST"], other, writesPerVM(b),
		b.ConflictsPerVM, b.EventsPerVM, seconds(b.TeardownSeconds).Round(100*time.Millisecond), gone, conflictsOut, retriesOut)
}

// seconds is a figure in seconds as a duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// describeCheckout names the commit checked out in dir (its short hash, "+changes" when the
// checkout has uncommitted changes), or dir itself when git cannot tell.
func describeCheckout(dir string) string {
	out, err := exec.Command("git", "-C", dir, "describe", "--always", "--dirty=+changes").Output()
	if err != nil {
		return dir
	}
	return strings.TrimSpace(string(out))
}

// gomaxprocsEnv is the environment that sets a contender's GOMAXPROCS. For 0 it is empty,
// which Go reads as unset: the runtime picks its default, whatever the bench's own
// environment says.
func gomaxprocsEnv(n int) []string {
	if n == 0 {
		return []string{"GOMAXPROCS="}
	}
	return []string{"GOMAXPROCS=" + strconv.Itoa(n)}
}

// procsSuffix shows a contender's GOMAXPROCS in its name: when it is not Go's default, or
// always when the same controller runs with several.
func procsSuffix(n int, always bool) string {
	switch {
	case n > 0:
		return " GOMAXPROCS=" + strconv.Itoa(n)
	case always:
		return " GOMAXPROCS=default"
	}
	return ""
}
