package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// UsageObserver receives each VM's usage, for per-VM metrics.
type UsageObserver interface {
	// UsageSampled reports a VM's usage: cpu in cores, memory in bytes.
	UsageSampled(vm cache.ObjectName, cpuCores, memoryBytes float64)
	// UsageGone says a VM has no usage to report any more: not Active, deleted, or its status
	// shows none (the metrics API is gone, or no sample has been written yet).
	UsageGone(vm cache.ObjectName)
}

// poller samples the usage of each Active VM on its own schedule: a delaying queue holds
// one entry per VM, due one jittered interval after its last sample, so that samples spread
// evenly instead of bunching at resyncs. Its writes touch only usage, which the VM informer
// ignores (vmcache.OnlyUsageChanged; through the main resource, where they make a generation,
// by their echo): reporting usage makes no reconcile.
type poller struct {
	policy   decision.UsagePolicy
	reader   backend.UsageReader
	writer   vmWriter
	fields   schema.Fields
	queue    workqueue.TypedDelayingInterface[cache.ObjectName]
	get      func(cache.ObjectName) (schema.VirtualMachine, bool)
	observer UsageObserver
	now      func() time.Time
	log      logger
	// route says where usage writes go: /status, or the main resource (statusroute.go).
	route statusRoute
	// echo, if set, is told the resourceVersion of each usage write through the main
	// resource. Such a write makes a generation, which vmcache.OnlyUsageChanged does not let
	// pass; the informer drops its echo instead (see echoes), as the write claims the
	// generation and leaves a decision nothing to do.
	echo func(vm cache.ObjectName, resourceVersion string)
	// timeout bounds each sample, as Retry.ReconcileTimeout bounds a reconcile; 0: none.
	timeout time.Duration

	mu        sync.Mutex
	lastWrite map[cache.ObjectName]time.Time
}

// logger is the part of slog the poller uses.
type logger interface {
	Debug(msg string, args ...any)
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

// schedule makes sure vm is sampled within one interval; a VM already waiting keeps its turn.
func (p *poller) schedule(vm cache.ObjectName) {
	p.queue.AddAfter(vm, p.jittered())
}

// jittered is the interval give or take 10%.
func (p *poller) jittered() time.Duration {
	return time.Duration(float64(p.policy.Interval) * (0.9 + 0.2*rand.Float64()))
}

// run samples until the queue shuts down or leading ends (SIGTERM, a lost Lease); a sample
// in flight finishes under ctx, which outlives leading by the drain.
func (p *poller) run(leading, ctx context.Context) {
	for leading.Err() == nil {
		key, shutdown := p.queue.Get()
		if shutdown {
			return
		}
		if leading.Err() != nil {
			// Taken past leading's end (ShutDown stops Adds, not Get): left unsampled, as
			// the workers leave their keys (Controller.processNext).
			p.queue.Done(key)
			return
		}
		if p.sampleBounded(ctx, key) {
			p.schedule(key)
		}
		p.queue.Done(key)
	}
}

// sampleBounded is sample under the poller's deadline, with a panic logged and the VM
// sampled again later: a bug or a hung metrics API costs one sample, not the sampler.
func (p *poller) sampleBounded(ctx context.Context, key cache.ObjectName) (again bool) {
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("Usage sample panicked", "vm", key.String(), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			again = true
		}
	}()
	return p.sample(ctx, key)
}

// sample takes one sample of vm and writes it if it is worth it. It returns whether vm should
// be sampled again: only while it is Active with a server and not paused (the reconcile that
// resumes it schedules it again).
func (p *poller) sample(ctx context.Context, key cache.ObjectName) bool {
	vm, ok := p.get(key)
	st := vm.Status()
	// A paused VM is left alone (decision/paused.go): its status gets no usage either.
	if !ok || vm.Deleting() || vm.Paused() || st.Phase != schema.PhaseActive || st.Server == nil {
		p.forget(key)
		return false
	}
	usage, err := p.reader.Usage(ctx, ownerOf(vm))
	p.observe(key, st, usage, err)
	p.mu.Lock()
	last, known := p.lastWrite[key]
	if !known && st.Server.Usage != nil && st.Condition(decision.ConditionUsageReported) != nil {
		// Usage a process before this one wrote (a restart, a new leader), at a time no
		// status records: taken as written now, so that a sample that has not moved past
		// the threshold writes nothing. Otherwise each restart sent a write for every
		// running VM at its first sample, moved or not; the figure is refreshed by
		// MaxInterval from here at the latest.
		last = p.now()
		p.lastWrite[key] = last
	}
	p.mu.Unlock()
	upd, write := p.policy.DecideUsage(st, vm.Generation(), usage, err, last, p.now())
	if err != nil {
		p.log.Debug("No usage sample", "vm", key.String(), "error", err)
	}
	if !write {
		return true
	}
	patch, err := p.route.usagePatch(p.fields, vm, st, upd)
	if err != nil {
		p.log.Warn("Cannot render usage", "vm", key.String(), "error", err)
		return true
	}
	w, err := p.writer.patch(ctx, key.Namespace, key.Name, patch, p.route.subresources()...)
	switch {
	case err == nil:
		p.mu.Lock()
		p.lastWrite[key] = p.now()
		p.mu.Unlock()
		if p.route.main && p.echo != nil {
			p.echo(key, w.rv)
		}
	case apierrors.IsNotFound(err):
		p.forget(key)
		return false
	case apierrors.IsConflict(err):
		// Another write came first; the next sample decides on the newer object.
	default:
		p.log.Warn("Cannot write usage", "vm", key.String(), "error", err)
	}
	return true
}

// observe tells the observer what one sample says, so that a VM's usage series shows no more
// than its status does: a figure, or none once the status has none. Without the metrics API
// the status loses its usage (DecideUsage clears it), and the series goes with it at once,
// even if that write fails and waits for the next sample: a dashboard would otherwise show
// the last figure for as long as the VM stays Active. Any other failed sample (a server the
// metrics API has no figures for, or a read that failed) leaves the status as it is, and the
// series too, unless the status shows no usage: then neither does the series (a figure
// sampled whose write did not go through).
func (p *poller) observe(key cache.ObjectName, st schema.Status, usage backend.Usage, err error) {
	if p.observer == nil {
		return
	}
	switch {
	case err == nil:
		p.observer.UsageSampled(key, usage.CPU.AsApproximateFloat64(), usage.Memory.AsApproximateFloat64())
	case errors.Is(err, backend.ErrUsageUnavailable), st.Server == nil || st.Server.Usage == nil:
		p.observer.UsageGone(key)
	}
}

func (p *poller) forget(key cache.ObjectName) {
	p.mu.Lock()
	delete(p.lastWrite, key)
	p.mu.Unlock()
	if p.observer != nil {
		p.observer.UsageGone(key)
	}
}
