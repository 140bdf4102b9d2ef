// The scale scenarios: a burst of N VMs, the controller's writes, a cold start over them, its
// memory and idle cost, and teardown. They share one flow, since each needs N Active VMs
// first; a scenario picks the stages it reports.

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	podspkg "github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/bench/record"
)

// scaleFlags are the flags of every scale scenario.
type scaleFlags struct {
	vms, concurrency, workers int
	qps                       float64
	idle, timeout, settle     time.Duration
	// progress is how often a burst prints how far it has come; 0: never.
	progress               time.Duration
	ceiling, ceilingEvents bool
	events                 string
	// rootDisk is the controller's --root-disk: claim (a PersistentVolumeClaim per VM, the
	// default) or ephemeral.
	rootDisk             string
	kubeconfig           string
	seed, tail, restarts int
	etcd                 string
	// teardownAll, with seed, makes the teardown remove every VM, the seeded ones too.
	teardownAll bool
	// apiserverProfile is a directory for a CPU profile of the API server over each cold
	// start, of apiserverProfileFor each; empty: none.
	apiserverProfile    string
	apiserverProfileFor time.Duration
	// restartProcs are the cold starts' GOMAXPROCS, taken in turn (0: Go's default).
	restartProcs []int
	// restartBaseline is a checkout of another commit whose build takes every other cold
	// start, this checkout's build the first; empty: this build only.
	restartBaseline string
	// restartProfile is a directory for a CPU profile of the controller over each cold
	// start, of restartProfileFor each; empty: none.
	restartProfile    string
	restartProfileFor time.Duration
	// baselineBinary is the build of restartBaseline, once built.
	baselineBinary string
	// restartNewVM, if above zero, is how long after each cold start's exec one VM is
	// created, to time it to Active while the controller works through its first list.
	restartNewVM time.Duration
}

// stagesOf lists what each scenario runs after the burst (which every scenario runs).
var stagesOf = map[string][]string{
	"burst":    {},
	"restart":  {"restart"},
	"memory":   {"memory", "restart"},
	"idle":     {"idle"},
	"teardown": {"teardown"},
	"all":      {"memory", "restart", "idle", "teardown", "ceiling"},
}

func scaleScenario(name string, args []string) error {
	var f scaleFlags
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	fs.IntVar(&f.vms, "vms", 1000, "VMs to create")
	fs.IntVar(&f.concurrency, "concurrency", 32, "creates in flight (and the ceiling's writers)")
	fs.IntVar(&f.workers, "workers", 0, "the controller's --workers; 0: as many as --concurrency, so that it and the ceiling have as many writes in flight")
	fs.Float64Var(&f.qps, "qps", 2000, "the controller's --qps (--burst is twice it): high, so that its client-side limit is not what is measured")
	fs.DurationVar(&f.idle, "idle-window", time.Minute, "how long the idle controller is watched")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Minute, "longest wait for any one stage")
	fs.DurationVar(&f.progress, "progress", 0, "every this long, a burst prints the VMs created and Active so far, the controller's queue, "+
		"the CPU by process over the interval and the memory of the largest processes; 0: only the burst's summary")
	fs.StringVar(&f.events, "events", "all", "the controller's --events: all, or warnings")
	fs.StringVar(&f.rootDisk, "root-disk", "claim", "the controller's --root-disk: claim (a PersistentVolumeClaim per VM, as run's default) or ephemeral")
	fs.BoolVar(&f.ceiling, "ceiling", true, "run the ceiling after the other stages (all only); false leaves it out, as at a scale where it would take hours more")
	fs.BoolVar(&f.ceilingEvents, "ceiling-events", true, "after the ceiling, run it again with the three Events per VM the cluster also writes")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig; empty: $KUBECONFIG or the checkout's .cache/kubeconfig")
	fs.IntVar(&f.seed, "seed", 0, "burst only this many VMs through the controller and write the rest of --vms straight into etcd, "+
		"as copies of the first VM and its pod (for cold start, memory and idle at a scale whose burst would take hours); 0: burst all")
	fs.IntVar(&f.tail, "tail", 0, "with --seed: after the seed, burst the last T of --vms through the controller, over a cluster that holds the others already, "+
		"and tear those T down at the end (teardown and all): the burst and the teardown at that scale, where a whole one would take hours")
	fs.BoolVar(&f.teardownAll, "teardown-all", false, "with --seed: the teardown (teardown and all) removes all of --vms, the seeded VMs included, not only the --tail; "+
		"slow at a large --vms: every VM's delete goes through the API server and every pod's removal through kwok")
	fs.IntVar(&f.restarts, "restarts", 1, "cold starts in a row (restart, memory and all): the first after a burst or --seed may share the machine with the cluster still catching up")
	fs.DurationVar(&f.settle, "settle", 0, "before the restarts, wait up to this long for the cluster to settle (the API server answering fewer than 10 requests a second other than those for leases, "+
		"and the machine's processes using less than 0.5 cores, over 30 s); 0: do not wait")
	fs.StringVar(&f.etcd, "etcd", "", "etcd's client URL for --seed; empty: the local cluster's (kwok-NAME in the kubeconfig)")
	fs.StringVar(&f.apiserverProfile, "apiserver-profile", "", "a directory: take a CPU profile of the API server (its /debug/pprof/profile) over each cold start, "+
		"from just before the exec, into DIR/kube-apiserver-restart<N>.pprof; empty: none")
	fs.DurationVar(&f.apiserverProfileFor, "apiserver-profile-for", time.Minute, "how long each --apiserver-profile runs (whole seconds)")
	fs.StringVar(&f.restartBaseline, "restart-baseline", "", "a checkout of another commit of vm-controller (git worktree add DIR REF): the cold starts alternate "+
		"this checkout's build (the first) and that one's, over the same VMs (restart only); empty: this build only")
	fs.StringVar(&f.restartProfile, "restart-profile", "", "a directory: take a CPU profile of the restarted controller (its --pprof) over each cold start, "+
		"from when it serves its endpoints, into DIR/vm-controller-restart<N>.pprof (the cold starts' CPU figures then include the profiler's); empty: none")
	fs.DurationVar(&f.restartProfileFor, "restart-profile-for", 30*time.Second, "how long each --restart-profile runs (whole seconds)")
	fs.DurationVar(&f.restartNewVM, "restart-new-vm", 0, "D after each cold start's exec, create one VM and time it from its create to Active, "+
		"while the controller works through the VMs of its first list; it is deleted before the next cold start; 0: none")
	resultsDir := resultsFlag(fs)
	restartProcs := fs.String("restart-gomaxprocs", "0", "the cold starts' GOMAXPROCS, or a comma-separated list taken in turn (e.g. 0,1 with --restarts 6: "+
		"three cold starts with each, alternating); 0: Go's default")
	_ = fs.Parse(args)
	var err error
	if f.restartProcs, err = parseProcs("--restart-gomaxprocs", *restartProcs); err != nil {
		return err
	}
	if err := f.validate(name); err != nil {
		return err
	}
	if f.workers == 0 {
		f.workers = f.concurrency
	}
	rec := newRecording(name, fs, args, *resultsDir)
	stages := f.stages(name)
	seeding := f.seed > 0
	has := func(s string) bool { return slices.Contains(stages, s) }

	e, err := setup(f.kubeconfig)
	if err != nil {
		return err
	}
	defer e.close()
	if f.restartBaseline != "" {
		dir, err := os.MkdirTemp("", "vm-controller-bench-baseline")
		if err != nil {
			return err
		}
		e.cleanup = append(e.cleanup, func() { _ = os.RemoveAll(dir) })
		if f.baselineBinary, err = buildBinary(dir, "vm-controller-baseline", f.restartBaseline); err != nil {
			return fmt.Errorf("--restart-baseline: %w", err)
		}
		fmt.Printf("cold starts alternate this build and %s\n", describeCheckout(f.restartBaseline))
	}
	if f.restartProfile != "" {
		if err := os.MkdirAll(f.restartProfile, 0o755); err != nil {
			return fmt.Errorf("--restart-profile: %w", err)
		}
	}
	var kv etcdKV
	if seeding {
		if kv.url = f.etcd; kv.url == "" {
			if kv, err = kwokEtcd(e.kubecfg); err != nil {
				return err
			}
		}
	}
	ctrlArgs := []string{"--workers", strconv.Itoa(f.workers), "--qps", fmt.Sprint(f.qps), "--burst", fmt.Sprint(int(2 * f.qps)),
		"--usage-interval", "0", "--pprof", "--events", f.events, "--root-disk", f.rootDisk}
	fmt.Printf("namespace %s, %d VMs, %d creates in flight, controller %s\n", e.ns, f.vms, f.concurrency, strings.Join(ctrlArgs, " "))

	c, err := e.startController(ctrlArgs...)
	if err != nil {
		return err
	}
	if err := c.waitWorkers(f.timeout); err != nil {
		return err
	}
	rec.add("vm-controller", false, record.Repetition{Rep: 1, Started: time.Now()})
	var mem0 memory
	if has("memory") {
		if mem0, err = c.memory(); err != nil {
			return err
		}
		fmt.Printf("memory at 0 VMs: %s\n", mem0)
	}

	w, err := e.watchVMs()
	if err != nil {
		return err
	}
	// Without seeding, one burst of every VM, and the teardown removes them all. With it: a
	// burst of the first --seed, the seed up to --vms less --tail, then a burst of the tail,
	// which the teardown removes at the end.
	first, tailFrom := f.vms, 0
	if seeding {
		first, tailFrom = f.seed, f.vms-f.tail
	}
	firstBurst, err := burst(e, c, w, f, 0, first)
	if err != nil {
		return err
	}
	rec.setBurst(firstBurst)
	if seeding {
		if err := seedStage(kv, e, c, w, f, tailFrom, rec); err != nil {
			return err
		}
	}
	if f.tail > 0 {
		b, err := burst(e, c, w, f, tailFrom, f.tail)
		if err != nil {
			return err
		}
		// The results file's burst is the first; the tail's, over a cluster that holds the
		// others, is a few named figures.
		rec.figure("tail burst: all Active", b.Seconds, "s")
		rec.figure("tail burst: VMs/s", b.VMsPerSec, "VMs/s")
		rec.figure("tail burst: p50 create->Active", b.P50, "s")
		rec.figure("tail burst: controller CPU per VM", b.ControllerCPU*1000/float64(b.VMs), "ms")
	}
	if has("restart") && f.settle > 0 {
		if err := settle(e, f.settle); err != nil {
			return err
		}
	}
	for i := 0; has("restart") && i < f.restarts; i++ {
		if c, err = restart(e, c, w, f, i, ctrlArgs, rec); err != nil {
			return err
		}
	}
	if has("memory") {
		m, err := c.memory()
		if err != nil {
			return err
		}
		fmt.Printf("memory at %d VMs: %s\n", f.vms, m)
		per := func(a, b float64) float64 { return (a - b) / float64(f.vms) }
		fmt.Printf("  per cached VM (and its server pod): live heap %.2f KB, heap in use %.2f KB, RSS %.2f KB\n",
			per(m.heapAlloc, mem0.heapAlloc)/1e3, per(m.heapInuse, mem0.heapInuse)/1e3, per(m.rss, mem0.rss)/1e3)
		fmt.Printf("  per 1,000 VMs: live heap %.1f MB, RSS %.1f MB; heap profile: %s\n",
			per(m.heapAlloc, mem0.heapAlloc)*1000/1e6, per(m.rss, mem0.rss)*1000/1e6, m.profile)
		rec.figure("memory: live heap per cached VM", per(m.heapAlloc, mem0.heapAlloc)/1e3, "KB")
		rec.figure("memory: heap in use per cached VM", per(m.heapInuse, mem0.heapInuse)/1e3, "KB")
		rec.figure("memory: RSS per cached VM", per(m.rss, mem0.rss)/1e3, "KB")
		rec.figure("memory: live heap at N VMs", m.heapAlloc/1e6, "MB")
	}
	if has("idle") {
		if err := idle(c, f, rec); err != nil {
			return err
		}
	}
	if has("teardown") {
		from := tailFrom
		if f.teardownAll {
			from = 0
		}
		if err := teardown(e, c, w, f, from, f.vms-from, rec); err != nil {
			return err
		}
	}
	if has("ceiling") && f.ceiling {
		c.stop()
		took, err := ceiling(e, f.vms, f.concurrency, false)
		if err != nil {
			return err
		}
		fmt.Printf("convergence / ceiling: %.2f\n", firstBurst.Seconds/took.Seconds())
		rec.figure("ceiling of 7 writes per VM", took.Seconds(), "s")
		rec.figure("burst / ceiling of 7 writes", firstBurst.Seconds/took.Seconds(), "ratio")
		if f.ceilingEvents {
			took, err := ceiling(e, f.vms, f.concurrency, true)
			if err != nil {
				return err
			}
			fmt.Printf("convergence / ceiling with the Events: %.2f\n", firstBurst.Seconds/took.Seconds())
			rec.figure("ceiling of 10 writes per VM (with the Events)", took.Seconds(), "s")
			rec.figure("burst / ceiling of 10 writes", firstBurst.Seconds/took.Seconds(), "ratio")
		}
	}
	return rec.finish()
}

// stages lists what scenario runs after the burst with these flags. Teardown and the ceiling
// measure N VMs' worth of the controller's writes, which is what seeding leaves out; --tail
// brings back the teardown of the VMs it bursts, and --teardown-all that of every VM.
func (f scaleFlags) stages(scenario string) []string {
	if f.seed == 0 {
		return stagesOf[scenario]
	}
	return slices.DeleteFunc(slices.Clone(stagesOf[scenario]), func(s string) bool {
		return s == "ceiling" || s == "teardown" && f.tail == 0 && !f.teardownAll
	})
}

// validate refuses flags that would measure something other than what they say: a seed that
// leaves nothing to seed, an etcd or a settling that nothing uses.
func (f scaleFlags) validate(scenario string) error {
	switch {
	case f.vms < 1:
		return fmt.Errorf("--vms must be at least 1, got %d", f.vms)
	case f.concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, got %d", f.concurrency)
	case f.workers < 0:
		return fmt.Errorf("--workers must not be negative, got %d", f.workers)
	case f.restarts < 1:
		return fmt.Errorf("--restarts must be at least 1, got %d", f.restarts)
	case f.seed < 0 || f.seed > 0 && f.seed >= f.vms:
		return fmt.Errorf("--seed must be from 1 to --vms - 1 (%d), or 0 for no seeding; got %d", f.vms-1, f.seed)
	case f.etcd != "" && f.seed == 0:
		return fmt.Errorf("--etcd is for --seed, which is not set")
	case f.tail < 0 || f.tail > 0 && f.seed == 0:
		return fmt.Errorf("--tail must be 0, or from 1 with --seed; got %d", f.tail)
	case f.seed > 0 && f.seed+f.tail >= f.vms:
		return fmt.Errorf("--seed (%d) and --tail (%d) must leave VMs of --vms (%d) to seed", f.seed, f.tail, f.vms)
	case f.rootDisk != "claim" && f.rootDisk != "ephemeral":
		return fmt.Errorf("--root-disk %q: want claim or ephemeral", f.rootDisk)
	case f.seed > 0 && f.rootDisk == "claim":
		// The seed writes copies of a VM and its pod, not of its claim.
		return fmt.Errorf("--seed copies VMs and their pods into etcd, not their claims: give --root-disk ephemeral")
	case f.teardownAll && f.seed == 0:
		return fmt.Errorf("--teardown-all is for --seed, which is not set (without it the teardown removes every VM)")
	case f.apiserverProfile != "" && !slices.Contains(stagesOf[scenario], "restart"):
		return fmt.Errorf("--apiserver-profile profiles the cold starts, which %s does not make (restart, memory and all do)", scenario)
	case f.apiserverProfile != "" && f.apiserverProfileFor < time.Second:
		return fmt.Errorf("--apiserver-profile-for must be at least 1s, got %s", f.apiserverProfileFor)
	case f.restartProfile != "" && !slices.Contains(stagesOf[scenario], "restart"):
		return fmt.Errorf("--restart-profile profiles the cold starts, which %s does not make (restart, memory and all do)", scenario)
	case f.restartProfile != "" && f.restartProfileFor < time.Second:
		return fmt.Errorf("--restart-profile-for must be at least 1s, got %s", f.restartProfileFor)
	case f.restartBaseline != "" && scenario != "restart":
		// In memory and all the stages after the cold starts would measure whichever build
		// ran last.
		return fmt.Errorf("--restart-baseline is for the restart scenario, whose only stage after the burst is the cold starts; got %s", scenario)
	case f.restartBaseline != "" && f.restarts < 2:
		return fmt.Errorf("--restart-baseline needs --restarts of at least 2, one cold start of each build; got %d", f.restarts)
	case f.restartBaseline != "" && len(f.restartProcs) > 1:
		return fmt.Errorf("--restart-baseline and a list of --restart-gomaxprocs would both take turns; choose one")
	case f.restartNewVM < 0:
		return fmt.Errorf("--restart-new-vm must not be negative, got %s", f.restartNewVM)
	case f.restartNewVM > 0 && !slices.Contains(stagesOf[scenario], "restart"):
		return fmt.Errorf("--restart-new-vm creates a VM during the cold starts, which %s does not make (restart, memory and all do)", scenario)
	case f.progress < 0:
		return fmt.Errorf("--progress must not be negative, got %s", f.progress)
	case f.settle < 0:
		return fmt.Errorf("--settle must not be negative, got %s", f.settle)
	case f.settle > 0 && !slices.Contains(stagesOf[scenario], "restart"):
		return fmt.Errorf("--settle waits before the cold starts, which %s does not make (restart, memory and all do)", scenario)
	case f.events != "all" && f.events != "warnings":
		return fmt.Errorf("--events must be all or warnings, got %q", f.events)
	}
	return nil
}

// waitWorkers waits until the controller's caches are synced and its workers run.
func (c *controller) waitWorkers(timeout time.Duration) error {
	select {
	case at := <-c.workers:
		c.workers <- at
		return nil
	case <-c.exited:
		return fmt.Errorf("the controller exited before its workers started")
	case <-time.After(timeout):
		return fmt.Errorf("the controller's caches did not sync within %s", timeout)
	}
}

// burst creates n VMs, from the from-th on, and waits until all are Active, sampling the
// controller's queue; the VMs before from are there already (a first burst, a seed).
func burst(e *env, c *controller, w *vmWatch, f scaleFlags, from, n int) (*record.Burst, error) {
	before, err := c.scrape()
	if err != nil {
		return nil, err
	}
	apiBefore, err := e.apiserverMetrics()
	if err != nil {
		return nil, err
	}
	evsBefore, seriesBefore, reasonsBefore, err := e.countEvents()
	if err != nil {
		return nil, err
	}
	stopSampling := c.sampleDepth()
	if f.progress > 0 {
		defer w.progress(c, f.progress)()
	}
	pid := c.cmd.Process.Pid
	ctrlBefore, err := processCPU(pid)
	if err != nil {
		return nil, err
	}
	cpuBefore := takeCPU()
	start := time.Now()
	err = parallel(n, f.concurrency, func(i int) error {
		w.created(vmName(from + i))
		_, err := e.dyn.Resource(vmGVR).Namespace(e.ns).Create(context.Background(), newVM(from+i), metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create VMs: %w", err)
	}
	created := time.Since(start)
	if err := w.waitActive(from+n, f.timeout); err != nil {
		return nil, err
	}
	took := time.Since(start)
	cpuAfter := takeCPU()
	ctrlAfter, err := processCPU(pid)
	if err != nil {
		return nil, err
	}
	rss, err := peakRSS(pid)
	if err != nil {
		return nil, err
	}
	time.Sleep(5 * time.Second) // let the event recorder send what it holds
	depth := stopSampling()
	after, err := c.scrape()
	if err != nil {
		return nil, err
	}
	apiAfter, err := e.apiserverMetrics()
	if err != nil {
		return nil, err
	}
	lat := w.latencies(from, n)
	over := ""
	if from > 0 {
		over = fmt.Sprintf(" (over %d VMs there already)", from)
	}
	fmt.Printf("burst%s: %d VMs created in %s (%.0f/s); all Active after %s (%.0f VMs/s)\n",
		over, n, created.Round(time.Millisecond), float64(n)/created.Seconds(), took.Round(time.Millisecond), float64(n)/took.Seconds())
	fmt.Printf("  create-to-Active: p50 %s, p99 %s, max %s; peak queue depth %.0f\n",
		pct(lat, 0.50), pct(lat, 0.99), pct(lat, 1), *depth)
	evs, series, reasons, err := e.countEvents()
	if err != nil {
		return nil, err
	}
	evs, series = evs-evsBefore, series-seriesBefore
	for r, k := range reasonsBefore {
		if reasons[r] -= k; reasons[r] == 0 {
			delete(reasons, r)
		}
	}
	writes := printRequests("  controller requests, create to Active", before, after, float64(n))
	fmt.Printf("  events recorded: %d (%d of them a series) %v; writes other than events: %.2f per VM\n",
		evs, series, reasons, (writes-float64(evs+series))/float64(n))
	if took > eventTTL {
		fmt.Printf("  (the burst took longer than the API server keeps an Event, %s by default: the Events counted above leave out those "+
			"that expired, and the writes other than events are too high by as many; the API server's events POSTs below count them all)\n", eventTTL)
	}
	printClusterWrites(apiBefore, apiAfter, float64(n))
	mean := func(name string) time.Duration {
		return time.Duration(delta(before, after, name+"_sum") / delta(before, after, name+"_count") * float64(time.Second)).Round(time.Millisecond)
	}
	fmt.Printf("  mean reconcile %s, mean API request %s, mean wait in the queue %s\n", mean("vmcontroller_reconcile_duration_seconds"),
		mean("rest_client_request_duration_seconds"), mean("workqueue_queue_duration_seconds"))
	fmt.Printf("  reconciles: %.0f (%.2f per VM), of them conflicts %.0f, errors %.0f\n",
		delta(before, after, "vmcontroller_reconcile_total"), delta(before, after, "vmcontroller_reconcile_total")/float64(n),
		delta(before, after, "vmcontroller_reconcile_total", `result="conflict"`), delta(before, after, "vmcontroller_reconcile_total", `result="error"`))
	printCPU("  CPU by process, first create to all Active", cpuBefore, cpuAfter)
	b := w.burstRecord(from, n, start, took, ctrlAfter-ctrlBefore, cpuAfter.since(cpuBefore), apiBefore, apiAfter)
	b.PeakRSSMB, b.EventsPerVM = rss, float64(evs)/float64(n)
	return b, nil
}

// seedStage writes VMs --seed to upto straight into etcd and waits until the bench's watch
// has seen each Active and the running controller's cache holds each Active with its queue
// empty (so every VM's add has been reconciled). What the controller wrote meanwhile is a no-op
// round of its own, but for a VM it saw in the moment before its pod was written.
func seedStage(kv etcdKV, e *env, c *controller, w *vmWatch, f scaleFlags, upto int, rec *recording) error {
	before, err := c.scrape()
	if err != nil {
		return err
	}
	n := upto - f.seed
	cpuBefore := takeCPU()
	start := time.Now()
	if err := seed(kv, e, f.seed, upto); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	written := time.Since(start)
	if err := w.waitActive(upto, f.timeout); err != nil {
		return err
	}
	seen := time.Since(start)
	for deadline := time.Now().Add(f.timeout); ; time.Sleep(250 * time.Millisecond) {
		m, err := c.scrape()
		if err != nil {
			return err
		}
		if sum(m, "vmcontroller_vms", `phase="Active"`) >= float64(upto) && queueDepth(m) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the controller did not reconcile the %d seeded VMs within %s", n, f.timeout)
		}
	}
	reconciled := time.Since(start)
	cpuAfter := takeCPU()
	time.Sleep(5 * time.Second)
	after, err := c.scrape()
	if err != nil {
		return err
	}
	fmt.Printf("seed: %d more VMs and their pods written into etcd (%s) in %s (%.0f VMs/s); the bench's watch saw all %d Active after %s; the controller reconciled them after %s\n",
		n, kv.url, written.Round(time.Millisecond), float64(n)/written.Seconds(), upto, seen.Round(time.Millisecond), reconciled.Round(time.Millisecond))
	fmt.Printf("  reconciles: %.0f (%.0f success, %.0f requeue, %.0f conflict, %.0f error)\n", delta(before, after, "vmcontroller_reconcile_total"),
		delta(before, after, "vmcontroller_reconcile_total", `result="success"`), delta(before, after, "vmcontroller_reconcile_total", `result="requeue"`),
		delta(before, after, "vmcontroller_reconcile_total", `result="conflict"`), delta(before, after, "vmcontroller_reconcile_total", `result="error"`))
	writes := printRequests("  controller requests while the seeded VMs arrived", before, after, float64(n))
	rec.figure("seed: VMs written into etcd", float64(n), "VMs")
	rec.figure("seed: all Active in the bench's watch", seen.Seconds(), "s")
	rec.figure("seed: all reconciled by the running controller", reconciled.Seconds(), "s")
	rec.figure("seed: the running controller's writes", writes, "writes")
	printCPU("  CPU by process, seeding to all reconciled", cpuBefore, cpuAfter)
	return nil
}

// settle waits until the cluster is quiet over 30 s, or until limit: the API server answering
// fewer than 10 requests a second other than those for leases, and the machine's processes
// (the bench's own aside) using less than half a core. After a burst or a seed, the
// cluster's own controllers (the garbage collector checks each new pod's owner) and kwok (it
// goes through every new pod) work on for many minutes, and a cold start measured meanwhile
// shares the machine with them. Half a core, not less: with a seed's work done, kwok, the
// scheduler and the API server keep a fraction of a core busy for as long as the pods are
// there, and a lower bar may never be met.
func settle(e *env, limit time.Duration) error {
	const window, quietRequests, quietCores = 30 * time.Second, 10.0, 0.5
	start := time.Now()
	requests := func() (float64, error) {
		m, err := e.apiserverMetrics()
		if err != nil {
			return 0, err
		}
		return sum(m, "apiserver_request_total") - sum(m, "apiserver_request_total", `resource="leases"`), nil
	}
	last, err := requests()
	if err != nil {
		return err
	}
	lastCPU := takeCPU()
	for {
		time.Sleep(window)
		cur, err := requests()
		if err != nil {
			return err
		}
		curCPU := takeCPU()
		rate := (cur - last) / window.Seconds()
		busiest, busiestSec, total := "", 0.0, 0.0
		for name, d := range curCPU.since(lastCPU) {
			if name != "bench" {
				total += d
				if d > busiestSec {
					busiest, busiestSec = name, d
				}
			}
		}
		cores := total / curCPU.at.Sub(lastCPU.at).Seconds()
		last, lastCPU = cur, curCPU
		state := fmt.Sprintf("the API server answered %.1f requests/s (leases aside) and the machine used %.2f cores (the bench aside; most: %s %.1f CPU-s) over %s",
			rate, cores, busiest, busiestSec, window)
		if rate < quietRequests && cores < quietCores {
			fmt.Printf("settled: %s, %s after the wait began\n", state, time.Since(start).Round(time.Second))
			return nil
		}
		if time.Since(start) > limit {
			fmt.Printf("not settled after %s: %s; going on\n", limit, state)
			return nil
		}
	}
}

// restart stops the controller and starts a fresh one over the Active VMs, with procs as its
// GOMAXPROCS: its time to synced, to every VM reconciled, and the writes it makes (a no-op
// round: 0 is right). With --restart-new-vm, one VM created that long after the exec is timed
// to Active (newcomer), and deleted once every VM is reconciled.
func restart(e *env, old *controller, w *vmWatch, f scaleFlags, i int, args []string, rec *recording) (*controller, error) {
	procs := f.restartProcs[i%len(f.restartProcs)]
	old.stop()
	var profile string
	profiled := func() error { return nil }
	if f.apiserverProfile != "" {
		profile = filepath.Join(f.apiserverProfile, fmt.Sprintf("kube-apiserver-restart%d.pprof", i+1))
		profiled = e.profileAPIServer(profile, f.apiserverProfileFor)
	}
	binary, build := e.binary, ""
	if f.baselineBinary != "" {
		build = " (this build)"
		if i%2 == 1 {
			binary, build = f.baselineBinary, " (baseline "+describeCheckout(f.restartBaseline)+")"
		}
	}
	cpuBefore := takeCPU()
	c, err := e.startControllerBinary(binary, gomaxprocsEnv(procs), args...)
	if err != nil {
		return nil, err
	}
	var ctrlProfile string
	ctrlProfiled := make(chan error, 1)
	if f.restartProfile != "" {
		ctrlProfile = filepath.Join(f.restartProfile, fmt.Sprintf("vm-controller-restart%d.pprof", i+1))
		go func() { ctrlProfiled <- c.cpuProfile(f.restartProfileFor, ctrlProfile) }()
	} else {
		ctrlProfiled <- nil
	}
	// Named to sort after the burst's VMs: the informer's list brings VMs in the order of
	// their names, so that the VM waits behind the whole list in a queue that is first in,
	// first out, whether the list or the watch after it brings it (the user's VM of the
	// issue, created during a start).
	newcomer := fmt.Sprintf("zz-newcomer-%d", i+1)
	type timed struct {
		after, toActive time.Duration
		err             error
	}
	arrived := make(chan timed, 1)
	if f.restartNewVM > 0 {
		go func() {
			time.Sleep(time.Until(c.started.Add(f.restartNewVM)))
			at := time.Now()
			d, err := w.createAndWait(e, newcomer, at, f.timeout)
			arrived <- timed{after: at.Sub(c.started), toActive: d, err: err}
		}()
	}
	if err := c.waitWorkers(f.timeout); err != nil {
		return nil, err
	}
	at := <-c.workers
	synced := at.Sub(c.started)
	var done time.Duration
	var cpuAfter cpuSnapshot
	var ctrlCPU float64 // the new process's, from its exec
	for deadline := time.Now().Add(f.timeout); ; time.Sleep(250 * time.Millisecond) {
		m, err := c.scrape()
		if err != nil {
			return nil, err
		}
		if sum(m, "vmcontroller_reconcile_total") >= float64(f.vms) && queueDepth(m) == 0 {
			done = time.Since(c.started)
			cpuAfter = takeCPU()
			if ctrlCPU, err = processCPU(c.cmd.Process.Pid); err != nil {
				return nil, err
			}
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the restarted controller did not reconcile %d VMs within %s", f.vms, f.timeout)
		}
	}
	var nc timed
	if f.restartNewVM > 0 {
		if nc = <-arrived; nc.err != nil {
			return nil, nc.err
		}
	}
	time.Sleep(5 * time.Second)
	m, err := c.scrape()
	if err != nil {
		return nil, err
	}
	fmt.Printf("restart over %d Active VMs%s%s: workers start (caches synced) %s after exec, every VM reconciled after %s\n",
		f.vms, build, procsSuffix(procs, len(f.restartProcs) > 1), synced.Round(time.Millisecond), done.Round(time.Millisecond))
	if f.restartNewVM > 0 {
		fmt.Printf("  a VM created %s after exec: Active %s after its create\n", nc.after.Round(time.Millisecond), nc.toActive.Round(time.Millisecond))
	}
	fmt.Printf("  reconciles: %.0f (%.0f success, %.0f requeue, %.0f conflict, %.0f error)\n", sum(m, "vmcontroller_reconcile_total"),
		sum(m, "vmcontroller_reconcile_total", `result="success"`), sum(m, "vmcontroller_reconcile_total", `result="requeue"`),
		sum(m, "vmcontroller_reconcile_total", `result="conflict"`), sum(m, "vmcontroller_reconcile_total", `result="error"`))
	writes := printRequests("  controller requests since exec", map[string]float64{}, m, float64(f.vms))
	printCPU("  CPU by process, exec to every VM reconciled", cpuBefore, cpuAfter)
	name := fmt.Sprintf("cold start %d%s%s: ", i+1, build, procsSuffix(procs, len(f.restartProcs) > 1))
	used := cpuAfter.since(cpuBefore)
	rec.figure(name+"exec to caches synced", synced.Seconds(), "s")
	rec.figure(name+"exec to every VM reconciled", done.Seconds(), "s")
	rec.figure(name+"writes", writes, "writes")
	rec.figure(name+"vm-controller CPU", ctrlCPU, "CPU-s")
	rec.figure(name+"kube-apiserver CPU", used["kube-apiserver"], "CPU-s")
	if f.restartNewVM > 0 {
		rec.figure(name+"new VM created after exec", nc.after.Seconds(), "s")
		rec.figure(name+"new VM create->Active", nc.toActive.Seconds(), "s")
		if err := w.deleteAndWait(e, newcomer, f.timeout); err != nil {
			return nil, err
		}
	}
	if profile != "" {
		if err := profiled(); err != nil {
			return nil, fmt.Errorf("the API server's CPU profile: %w", err)
		}
		fmt.Printf("  kube-apiserver CPU profile, %s from just before the exec: %s\n", f.apiserverProfileFor, profile)
	}
	if err := <-ctrlProfiled; err != nil {
		return nil, fmt.Errorf("the controller's CPU profile: %w", err)
	}
	if ctrlProfile != "" {
		fmt.Printf("  vm-controller CPU profile, %s from when it served its endpoints: %s\n", f.restartProfileFor, ctrlProfile)
	}
	return c, nil
}

// profileAPIServer starts a CPU profile of the API server (its /debug/pprof/profile, which
// kube-apiserver serves by default to a client allowed the nonResourceURL) over d, written to
// path; the function it returns waits for the profile to be written.
func (e *env) profileAPIServer(path string, d time.Duration) func() error {
	done := make(chan error, 1)
	go func() {
		body, err := e.kube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(int(d.Seconds()))).DoRaw(context.Background())
		if err == nil {
			err = os.WriteFile(path, body, 0o644)
		}
		done <- err
	}()
	return func() error { return <-done }
}

// idle watches a controller with nothing to do: CPU and API requests over the window.
func idle(c *controller, f scaleFlags, rec *recording) error {
	before, err := c.scrape()
	if err != nil {
		return err
	}
	start := time.Now()
	time.Sleep(f.idle)
	after, err := c.scrape()
	if err != nil {
		return err
	}
	window := time.Since(start)
	cpu := delta(before, after, "process_cpu_seconds_total")
	fmt.Printf("idle at %d Active VMs over %s: CPU %.2f millicores (%.3f s), reconciles %.0f\n",
		f.vms, window.Round(time.Second), cpu/window.Seconds()*1000, cpu, delta(before, after, "vmcontroller_reconcile_total"))
	printRequests(fmt.Sprintf("  controller requests in %s", window.Round(time.Second)), before, after, 0)
	rec.figure("idle: CPU", cpu/window.Seconds()*1000, "millicores")
	rec.figure("idle: API requests per minute", delta(before, after, "rest_client_requests_total")/window.Minutes(), "requests")
	rec.figure("idle: reconciles", delta(before, after, "vmcontroller_reconcile_total"), "reconciles")
	return nil
}

// teardown deletes n VMs from the from-th on (one DELETE each, with as many in flight as the
// burst's creates), times until all are gone, then counts their server pods left. It prints
// the controller's requests and the CPU each process used, to say what bounded it.
func teardown(e *env, c *controller, w *vmWatch, f scaleFlags, from, n int, rec *recording) error {
	before, err := c.scrape()
	if err != nil {
		return err
	}
	left := w.count() - n
	cpuBefore := takeCPU()
	start := time.Now()
	err = parallel(n, f.concurrency, func(i int) error {
		return e.dyn.Resource(vmGVR).Namespace(e.ns).Delete(context.Background(), vmName(from+i), metav1.DeleteOptions{})
	})
	if err != nil {
		return fmt.Errorf("delete VMs: %w", err)
	}
	deleted := time.Since(start)
	for w.count() > left {
		if time.Since(start) > f.timeout {
			return fmt.Errorf("%d of the %d VMs deleted left after %s", w.count()-left, n, f.timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
	took := time.Since(start)
	cpuAfter := takeCPU()
	after, err := c.scrape()
	if err != nil {
		return err
	}
	pods, terminating, err := e.podsLeft(f, left, from, n)
	if err != nil {
		return fmt.Errorf("read the server pods: %w", err)
	}
	over := ""
	if left > 0 {
		over = fmt.Sprintf(" (%d VMs stay)", left)
	}
	fmt.Printf("teardown of %d VMs%s: deletes sent in %s; all gone after %s (%.0f/s); their server pods left: %d (%d of them terminating)\n",
		n, over, deleted.Round(time.Millisecond), took.Round(time.Millisecond), float64(n)/took.Seconds(), pods, terminating)
	writes := printRequests("  controller requests, first delete to all gone", before, after, float64(n))
	printCPU("  CPU by process, first delete to all gone", cpuBefore, cpuAfter)
	rec.figure("teardown: VMs deleted", float64(n), "VMs")
	rec.figure("teardown: all gone", took.Seconds(), "s")
	rec.figure("teardown: controller writes per VM", writes/float64(n), "writes")
	rec.figure("teardown: server pods left", float64(pods), "pods")
	return nil
}

// podsLeft counts the server pods of VMs from to from+n-1 still there, and of them those
// terminating. With no VM left, one list of the namespace does; otherwise a GET of each.
func (e *env) podsLeft(f scaleFlags, left, from, n int) (pods, terminating int, err error) {
	ctx := context.Background()
	if left == 0 {
		list, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, 0, err
		}
		for _, p := range list.Items {
			pods++
			if p.DeletionTimestamp != nil {
				terminating++
			}
		}
		return pods, terminating, nil
	}
	var mu sync.Mutex
	err = parallel(n, f.concurrency, func(i int) error {
		p, err := e.kube.CoreV1().Pods(e.ns).Get(ctx, podspkg.PodName(vmName(from+i)), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		pods++
		if p.DeletionTimestamp != nil {
			terminating++
		}
		return nil
	})
	return pods, terminating, err
}

// printRequests prints the controller's API requests between two scrapes, by method, with
// per-VM figures when perVM > 0 and per-minute figures otherwise; it returns the writes.
func printRequests(title string, before, after map[string]float64, perVM float64) float64 {
	fmt.Printf("%s:\n", title)
	var writes float64
	for _, method := range []string{"GET", "POST", "PATCH", "PUT", "DELETE"} {
		n := delta(before, after, "rest_client_requests_total", `method="`+method+`"`)
		conflicts := delta(before, after, "rest_client_requests_total", `method="`+method+`"`, `code="409"`)
		if method != "GET" {
			writes += n
		}
		if perVM > 0 {
			fmt.Printf("    %-6s %8.0f  %6.2f per VM  (409 Conflict: %.0f)\n", method, n, n/perVM, conflicts)
		} else {
			fmt.Printf("    %-6s %8.1f\n", method, n)
		}
	}
	if perVM > 0 {
		fmt.Printf("    writes %8.0f  %6.2f per VM\n", writes, writes/perVM)
	}
	return writes
}

// printClusterWrites prints the writes the API server served between two scrapes of its
// apiserver_request_total, by resource: everyone's, not only the controller's (the bench's
// creates, the scheduler's bindings, kwok's pod status, events, leases, ...).
func printClusterWrites(before, after map[string]float64, perVM float64) {
	byResource := map[string]float64{}
	var total float64
	for k, v := range after {
		if !strings.HasPrefix(k, "apiserver_request_total{") {
			continue
		}
		verb := label(k, "verb")
		if verb != "POST" && verb != "PUT" && verb != "PATCH" && verb != "DELETE" && verb != "APPLY" {
			continue
		}
		n := v - before[k]
		if n == 0 {
			continue
		}
		r := label(k, "resource")
		if sub := label(k, "subresource"); sub != "" {
			r += "/" + sub
		}
		byResource[r+" "+verb] += n
		total += n
	}
	keys := make([]string, 0, len(byResource))
	for k := range byResource {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Printf("  the API server's writes (everyone's): %.0f, %.2f per VM:", total, total/perVM)
	for _, k := range keys {
		// Below 0.05 per VM: other work, such as the namespace controller emptying the
		// namespace of an earlier run.
		if byResource[k]/perVM >= 0.05 {
			fmt.Printf(" %s %.2f;", k, byResource[k]/perVM)
		}
	}
	fmt.Println()
}

// label returns the value of a label in a sample's name.
func label(sample, name string) string {
	i := strings.Index(sample, ","+name+`="`)
	if i < 0 {
		if i = strings.Index(sample, "{"+name+`="`); i < 0 {
			return ""
		}
	}
	rest := sample[i+len(name)+3:]
	return rest[:strings.IndexByte(rest, '"')]
}

func delta(before, after map[string]float64, parts ...string) float64 {
	return sum(after, parts...) - sum(before, parts...)
}

func queueDepth(m map[string]float64) float64 {
	return sum(m, "workqueue_depth{", `name="virtualmachines"`)
}

// sampleDepth scrapes the VM queue's depth every second until the returned function is
// called, which returns the peak.
func (c *controller) sampleDepth() func() *float64 {
	var peak float64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if m, err := c.scrape(); err == nil {
				peak = max(peak, queueDepth(m))
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return func() *float64 { close(stop); <-done; return &peak }
}

// memory is the controller's memory after a forced garbage collection: the live heap
// (go_memstats_heap_alloc_bytes), the heap's spans in use (which include free space within
// them) and the resident set; profile is where the heap profile was saved.
type memory struct {
	heapInuse, heapAlloc, rss float64
	profile                   string
}

func (m memory) String() string {
	return fmt.Sprintf("live heap %.1f MB, heap in use %.1f MB, RSS %.1f MB", m.heapAlloc/1e6, m.heapInuse/1e6, m.rss/1e6)
}

// memory forces a GC (through pprof's heap profile with gc=1), keeps the profile for
// `go tool pprof`, and reads the Go runtime's and the process's figures from /metrics.
func (c *controller) memory() (memory, error) {
	f, err := os.CreateTemp("", "vm-controller-heap-*.pprof")
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	for i := range 2 {
		resp, err := (&http.Client{Timeout: time.Minute}).Get("http://" + c.metrics + "/debug/pprof/heap?gc=1")
		if err != nil {
			return memory{}, fmt.Errorf("force GC: %w", err)
		}
		var w io.Writer = io.Discard
		if i == 1 {
			w = f
		}
		_, _ = io.Copy(w, resp.Body)
		resp.Body.Close()
	}
	m, err := c.scrape()
	if err != nil {
		return memory{}, err
	}
	return memory{heapInuse: m["go_memstats_heap_inuse_bytes"], heapAlloc: m["go_memstats_heap_alloc_bytes"],
		rss: m["process_resident_memory_bytes"], profile: f.Name()}, nil
}

// vmWatch follows the bench's VMs through an informer of its own: when each was created and
// first seen Active.
type vmWatch struct {
	informer cache.SharedIndexInformer
	mu       sync.Mutex
	createAt map[string]time.Time
	activeAt map[string]time.Time
	// shapes is the first VM's status as each phase's events showed it: the paths of its
	// fields, by phase (see workShape).
	shapes map[string][]string
}

func (e *env) watchVMs() (*vmWatch, error) {
	w := &vmWatch{createAt: map[string]time.Time{}, activeAt: map[string]time.Time{}, shapes: map[string][]string{}}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(e.dyn, 0, e.ns, nil)
	w.informer = f.ForResource(vmGVR).Informer()
	_ = w.informer.SetTransform(func(obj any) (any, error) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			u.SetManagedFields(nil)
		}
		return obj, nil
	})
	seen := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		if p, _, _ := unstructured.NestedString(u.Object, "status", "phase"); p == "Active" {
			w.mu.Lock()
			if _, ok := w.activeAt[u.GetName()]; !ok {
				w.activeAt[u.GetName()] = time.Now()
			}
			w.mu.Unlock()
		}
		w.noteShape(u)
	}
	if _, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, cur any) { seen(cur) }}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cleanup = append(e.cleanup, cancel)
	go w.informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
		return nil, fmt.Errorf("the bench's informer did not sync")
	}
	return w, nil
}

// noteShape adds u's status paths to its phase's shape, if u is the first VM and has a phase.
func (w *vmWatch) noteShape(u *unstructured.Unstructured) {
	p, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	if p == "" || u.GetName() != vmName(0) {
		return
	}
	status, _ := u.Object["status"].(map[string]any)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shapes[p] = union(w.shapes[p], paths("status", status))
}

// statusShapes is the first VM's status paths by phase, as the watch has seen them so far.
func (w *vmWatch) statusShapes() map[string][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.shapes)
}

func (w *vmWatch) created(name string) {
	w.mu.Lock()
	w.createAt[name] = time.Now()
	w.mu.Unlock()
}

func (w *vmWatch) count() int { return len(w.informer.GetStore().ListKeys()) }

func (w *vmWatch) waitActive(n int, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; time.Sleep(100 * time.Millisecond) {
		w.mu.Lock()
		active := len(w.activeAt)
		w.mu.Unlock()
		if active >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d VMs Active after %s", active, n, timeout)
		}
	}
}

// latencies are the times from the start of each create call of n VMs from the from-th on to
// the VM's first Active, sorted.
func (w *vmWatch) latencies(from, n int) []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Duration
	for i := from; i < from+n; i++ {
		c, created := w.createAt[vmName(i)]
		at, active := w.activeAt[vmName(i)]
		if created && active {
			out = append(out, at.Sub(c))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// activeTimes are when each of n VMs from the from-th on was first seen Active, in
// milliseconds from start, sorted (VMs not Active left out).
func (w *vmWatch) activeTimes(from, n int, start time.Time) []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int64
	for i := from; i < from+n; i++ {
		if at, ok := w.activeAt[vmName(i)]; ok {
			out = append(out, at.Sub(start).Milliseconds())
		}
	}
	slices.Sort(out)
	return out
}

// burstRecord is a burst's figures for the results file: n VMs from the from-th on, the first
// created at start, all Active after took; the controller's CPU and every process's (by name)
// over that span, and the API server's metrics scraped before the first create and after the
// last Active.
func (w *vmWatch) burstRecord(from, n int, start time.Time, took time.Duration, ctrlCPU float64, machine map[string]float64,
	apiBefore, apiAfter map[string]float64) *record.Burst {
	lat := w.latencies(from, n)
	b := &record.Burst{VMs: n, Seconds: took.Seconds(), VMsPerSec: float64(n) / took.Seconds(),
		P50: pct(lat, 0.50).Seconds(), P99: pct(lat, 0.99).Seconds(), Max: pct(lat, 1).Seconds(),
		ControllerCPU: ctrlCPU, APIServerCPU: machine["kube-apiserver"], CPUByProcess: machine,
		WritesPerVM: map[string]float64{}, ActiveMS: w.activeTimes(from, n, start)}
	for _, sec := range machine {
		b.MachineCPU += sec
	}
	for _, d := range lat {
		b.LatenciesMS = append(b.LatenciesMS, d.Milliseconds())
	}
	for k, v := range writesByResource(apiBefore, apiAfter, "") {
		b.WritesPerVM[k] = v / float64(n)
	}
	for _, v := range writesByResource(apiBefore, apiAfter, "409") {
		b.ConflictsPerVM += v / float64(n)
	}
	return b
}

// pct is the q-quantile of sorted durations (nearest rank).
func pct(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[int(q*float64(len(d)-1)+0.5)].Round(time.Millisecond)
}

// eventTTL is how long the API server keeps an Event by default (its --event-ttl). A burst
// that takes longer finds fewer Events in its namespace than were recorded: the first ones
// have expired.
const eventTTL = time.Hour

// countEvents counts the Events the controller recorded in the namespace, and those of them
// that became a series (a repeat, which the recorder sends as a PATCH).
func (e *env) countEvents() (events, series int, reasons map[string]int, err error) {
	reasons = map[string]int{}
	opts := metav1.ListOptions{Limit: 1000}
	for {
		list, err := e.kube.EventsV1().Events(e.ns).List(context.Background(), opts)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("list events: %w", err)
		}
		for _, ev := range list.Items {
			if ev.ReportingController != "vm-controller" {
				continue
			}
			events++
			reasons[ev.Reason]++
			if ev.Series != nil {
				series++
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return events, series, reasons, nil
		}
	}
}
