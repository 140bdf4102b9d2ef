package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// newPoller is a poller over w's API and backend that reads the VMs of the given cases, with
// a clock at now.
func newPoller(t *testing.T, w *world, r *results, cases ...string) *poller {
	t.Helper()
	vms := map[cache.ObjectName]schema.VirtualMachine{}
	for _, name := range cases {
		vm := w.view(t, name)
		vms[cache.NewObjectName(vm.Namespace(), vm.Name())] = vm
	}
	return &poller{policy: decision.UsagePolicy{Interval: time.Minute, Threshold: 0.1, MaxInterval: 10 * time.Minute}, reader: w.servers,
		writer: dynamicWriter{client: w.client.Resource(vmGVR)}, fields: w.fields,
		queue: workqueue.NewTypedDelayingQueue[cache.ObjectName](),
		get: func(k cache.ObjectName) (schema.VirtualMachine, bool) {
			vm, ok := vms[k]
			return vm, ok
		},
		observer: r, now: func() time.Time { return now }, log: slog.New(slog.DiscardHandler), lastWrite: map[cache.ObjectName]time.Time{}}
}

// TestPollerSample: a sample of an Active VM is written to its status without a
// precondition, unless only usage changes hands with the condition; a VM that is not Active,
// or gone from the API, is sampled no more and its metric goes; a conflict or an error leaves
// the next sample to try again.
func TestPollerSample(t *testing.T) {
	sample := backend.Usage{CPU: resource.MustParse("250m"), Memory: resource.MustParse("64Mi")}
	tests := map[string]struct {
		vm       string // the case whose VM is sampled
		usage    error  // the backend's error instead of the sample
		patchErr error
		again    bool   // sampled again
		cpu      string // status.server.usage.cpu afterwards
		rv       bool   // the patch carries a resourceVersion
		gone     bool   // the usage observer was told the VM has no usage any more
	}{
		"active: written":             {vm: "active-steady", again: true, cpu: "250m", rv: true},
		"not active: not sampled":     {vm: "create-new", gone: true},
		"being deleted: not sampled":  {vm: "delete-with-server", gone: true},
		"paused: not sampled":         {vm: "paused-steady", gone: true},
		"no figures yet":              {vm: "active-steady", usage: fmt.Errorf("new: %w", backend.ErrNoUsage), again: true, gone: true}, // nor in the status
		"VM gone from the API":        {vm: "active-steady", patchErr: apierrors.NewNotFound(vmGVR.GroupResource(), "test-vm"), gone: true},
		"conflict: next sample tells": {vm: "active-steady", patchErr: apierrors.NewConflict(vmGVR.GroupResource(), "test-vm", errors.New("x")), again: true},
		"write fails: next sample":    {vm: "active-steady", patchErr: errors.New("timeout"), again: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.vm)
			r := &results{}
			p := newPoller(t, w, r, tc.vm)
			w.servers.SetUsage(ownerOf(w.view(t, tc.vm)), sample, tc.usage)
			if tc.patchErr != nil {
				w.failNext("status", tc.patchErr)
			}
			if again := p.sample(context.Background(), testVM); again != tc.again {
				t.Errorf("sample again = %v, want %v", again, tc.again)
			}
			if cpu := status(t, w, testVM, "server", "usage", "cpu"); cpu != tc.cpu {
				t.Errorf("usage cpu %q, want %q", cpu, tc.cpu)
			}
			if ws := w.writes(); tc.rv && (len(ws) != 1 || at(ws[0].body, "metadata", "resourceVersion") != "1000") {
				t.Errorf("writes %+v: want one, conditional on resourceVersion 1000 (it sets the UsageReported condition)", ws)
			}
			if gone := slices.Contains(r.gone, testVM.String()); gone != tc.gone {
				t.Errorf("UsageGone told: %v, want %v", gone, tc.gone)
			}
		})
	}
}

// TestPollerQuiet: a sample that moved less than the threshold since the last write is not
// written; one that moved more is, without a precondition, since it touches usage alone.
func TestPollerQuiet(t *testing.T) {
	w := newWorld(t, "active-steady")
	r := &results{}
	p := newPoller(t, w, r, "active-steady")
	owner := ownerOf(w.view(t, "active-steady"))
	w.servers.SetUsage(owner, backend.Usage{CPU: resource.MustParse("250m"), Memory: resource.MustParse("64Mi")}, nil)
	p.sample(context.Background(), testVM)
	p.get = func(cache.ObjectName) (schema.VirtualMachine, bool) { // the cache caught up
		return cachedView(t, w.vm(t, "default", "test-vm"), w.fields), true
	}
	w.servers.SetUsage(owner, backend.Usage{CPU: resource.MustParse("260m"), Memory: resource.MustParse("64Mi")}, nil)
	p.sample(context.Background(), testVM)
	if n := len(w.writes()); n != 1 {
		t.Errorf("%d writes, want the first sample's only", n)
	}
	w.servers.SetUsage(owner, backend.Usage{CPU: resource.MustParse("500m"), Memory: resource.MustParse("64Mi")}, nil)
	p.sample(context.Background(), testVM)
	ws := w.writes()
	if len(ws) != 2 || at(ws[1].body, "metadata", "resourceVersion") != nil {
		t.Fatalf("writes %+v: want a second one, without a precondition", ws)
	}
	if cpu := status(t, w, testVM, "server", "usage", "cpu"); cpu != "500m" {
		t.Errorf("usage cpu %q, want 500m", cpu)
	}
}

// TestPollerAfterRestart: a process's first sample of a VM whose status reports usage (a
// restart, a new leader) writes nothing while the usage has not moved past the threshold, and
// the figure is refreshed MaxInterval later; a move past the threshold is written at once.
// Before, every running VM's first sample was written, moved or not: a write per VM at each
// restart of the controller.
func TestPollerAfterRestart(t *testing.T) {
	const name = "usage-condition-kept-resync" // usage 250m and 1G, UsageReported True
	w := newWorld(t, name)
	r := &results{}
	p := newPoller(t, w, r, name)
	clock := now
	p.now = func() time.Time { return clock }
	owner := ownerOf(w.view(t, name))
	w.servers.SetUsage(owner, backend.Usage{CPU: resource.MustParse("255m"), Memory: resource.MustParse("1G")}, nil)
	p.sample(context.Background(), testVM)
	if ws := w.writes(); len(ws) != 0 {
		t.Fatalf("writes %+v at the first sample of usage that has not moved, want none", ws)
	}
	clock = now.Add(9 * time.Minute)
	p.sample(context.Background(), testVM)
	if n := len(w.writes()); n != 0 {
		t.Errorf("%d writes before MaxInterval, want none", n)
	}
	clock = now.Add(10 * time.Minute)
	p.sample(context.Background(), testVM)
	if n := len(w.writes()); n != 1 {
		t.Errorf("%d writes at MaxInterval, want one", n)
	}

	// A move past the threshold, at a process's first sample, is written at once.
	w2 := newWorld(t, name)
	p2 := newPoller(t, w2, r, name)
	w2.servers.SetUsage(owner, backend.Usage{CPU: resource.MustParse("500m"), Memory: resource.MustParse("1G")}, nil)
	p2.sample(context.Background(), testVM)
	if cpu := status(t, w2, testVM, "server", "usage", "cpu"); len(w2.writes()) != 1 || cpu != "500m" {
		t.Errorf("writes %d, usage cpu %q: want the move written", len(w2.writes()), cpu)
	}
}

// TestPollerRun: run samples what is scheduled and schedules it again while it is Active,
// until its queue shuts down.
func TestPollerRun(t *testing.T) {
	w := newWorld(t, "active-steady")
	r := &results{}
	p := newPoller(t, w, r, "active-steady")
	p.policy.Interval = time.Millisecond
	w.servers.SetUsage(ownerOf(w.view(t, "active-steady")), backend.Usage{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")}, nil)
	done := make(chan struct{})
	go func() { p.run(context.Background(), context.Background()); close(done) }()
	p.schedule(testVM)
	eventually(t, "two samples", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.samples) >= 2
	})
	p.queue.ShutDown()
	<-done
	if j := p.jittered(); j < 900*time.Microsecond || j > 1100*time.Microsecond {
		t.Errorf("jittered interval %v, want within 10%% of 1ms", j)
	}
}

// TestPollerStopsWithLeading: once leading ends, the poller samples nothing more, though a
// workqueue hands out what is due after its ShutDown (which stops Adds, not Get): the process
// is exiting or has lost the Lease, and another replica may lead already. Both ways: a sample
// due when leading has ended already, and one that Get hands out after leading ended while
// it waited.
func TestPollerStopsWithLeading(t *testing.T) {
	for _, waiting := range []bool{false, true} {
		t.Run(fmt.Sprintf("waiting in Get %v", waiting), func(t *testing.T) {
			w := newWorld(t, "active-steady")
			r := &results{}
			p := newPoller(t, w, r, "active-steady")
			w.servers.SetUsage(ownerOf(w.view(t, "active-steady")), backend.Usage{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")}, nil)
			leading, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			if waiting {
				q := &enteringGet{TypedDelayingInterface: p.queue, entered: make(chan struct{})}
				p.queue = q
				go func() { p.run(leading, context.Background()); close(done) }()
				<-q.entered
				cancel()
				p.queue.Add(testVM) // Get hands it out: leading has ended
			} else {
				cancel()
				p.queue.Add(testVM)
				p.queue.ShutDown()
				go func() { p.run(leading, context.Background()); close(done) }()
			}
			<-done // the barrier: run has returned
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.samples) != 0 {
				t.Errorf("%d samples after leading ended, want none", len(r.samples))
			}
		})
	}
}

// enteringGet is a delaying queue that says when Get is first called.
type enteringGet struct {
	workqueue.TypedDelayingInterface[cache.ObjectName]
	once    sync.Once
	entered chan struct{}
}

func (q *enteringGet) Get() (cache.ObjectName, bool) {
	q.once.Do(func() { close(q.entered) })
	return q.TypedDelayingInterface.Get()
}

// panickyUsage is a usage reader with a bug: it panics.
type panickyUsage struct{}

func (panickyUsage) Usage(context.Context, backend.Owner) (backend.Usage, error) {
	panic("injected: usage")
}

// TestPollerPanic: a sample that panics costs that sample: the poller logs it and samples the
// VM again later, instead of taking the process down.
func TestPollerPanic(t *testing.T) {
	w := newWorld(t, "active-steady")
	p := newPoller(t, w, &results{}, "active-steady")
	p.reader = panickyUsage{}
	var log syncBuffer
	p.log = slog.New(slog.NewTextHandler(&log, nil))
	if again := p.sampleBounded(context.Background(), testVM); !again {
		t.Error("a VM whose sample panicked is not sampled again")
	}
	if text := log.String(); !strings.Contains(text, `msg="Usage sample panicked"`) || !strings.Contains(text, "vm=default/test-vm") ||
		!strings.Contains(text, "panickyUsage.Usage") {
		t.Errorf("log %s: want the panic with the VM and the stack", text)
	}
}

// TestPollerUsageSeriesFollowsStatus: a VM's usage series says no more than its status does.
// Once the metrics API goes, the status loses its usage and the series goes with it, even
// when that write fails (the next sample writes it again); before, the gauges kept the last
// figure for as long as the VM stayed Active. A server without figures, or a read that failed,
// leaves the status and the series as they are, unless the status shows no usage.
func TestPollerUsageSeriesFollowsStatus(t *testing.T) {
	tests := map[string]struct {
		firstWrite error // the error of the first sample's write, which reports usage
		second     error // why the second sample has no figures
		secondPut  error // the error of the second sample's write, if it makes one
		gone       bool  // UsageGone told after the second sample
		cpu        string
	}{
		"metrics API gone":                       {second: fmt.Errorf("metrics.k8s.io: %w", backend.ErrUsageUnavailable), gone: true},
		"metrics API gone, the write fails":      {second: fmt.Errorf("metrics.k8s.io: %w", backend.ErrUsageUnavailable), secondPut: errors.New("timeout"), gone: true, cpu: "250m"},
		"no figures for the server":              {second: fmt.Errorf("pod metrics: %w", backend.ErrNoUsage), cpu: "250m"},
		"the read fails":                         {second: errors.New("timeout"), cpu: "250m"},
		"the read fails, no usage in the status": {firstWrite: errors.New("timeout"), second: errors.New("timeout"), gone: true},
		"no figures, no usage in the status":     {firstWrite: errors.New("timeout"), second: fmt.Errorf("pod metrics: %w", backend.ErrNoUsage), gone: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "active-steady")
			r := &results{}
			p := newPoller(t, w, r, "active-steady")
			owner := ownerOf(w.view(t, "active-steady"))
			w.servers.SetUsage(owner, backend.Usage{CPU: resource.MustParse("250m"), Memory: resource.MustParse("64Mi")}, nil)
			if tc.firstWrite != nil {
				w.failNext("status", tc.firstWrite)
			}
			p.sample(context.Background(), testVM)
			if !slices.Contains(r.samples, testVM.String()) || len(r.gone) != 0 {
				t.Fatalf("first sample: sampled %v, gone %v; want it sampled", r.samples, r.gone)
			}
			p.get = func(cache.ObjectName) (schema.VirtualMachine, bool) { // the cache caught up
				return cachedView(t, w.vm(t, "default", "test-vm"), w.fields), true
			}
			w.servers.SetUsage(owner, backend.Usage{}, tc.second)
			if tc.secondPut != nil {
				w.failNext("status", tc.secondPut)
			}
			if !p.sample(context.Background(), testVM) {
				t.Error("an Active VM is not sampled again")
			}
			if gone := slices.Contains(r.gone, testVM.String()); gone != tc.gone {
				t.Errorf("UsageGone told: %v, want %v", gone, tc.gone)
			}
			if cpu := status(t, w, testVM, "server", "usage", "cpu"); cpu != tc.cpu {
				t.Errorf("usage cpu %q, want %q", cpu, tc.cpu)
			}
			// Removed, not left behind empty (usage: {}).
			if u := at(w.vm(t, "default", "test-vm").Object, "status", "server", "usage"); tc.cpu == "" && u != nil {
				t.Errorf("status.server.usage is %v, want it gone", u)
			}
		})
	}
}
