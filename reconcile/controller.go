package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	runtimedebug "runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/priority"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Observer receives the outcome of each reconcile, for metrics.
type Observer interface {
	// Reconciled reports one reconcile: result is one of Results.
	Reconciled(result string, took time.Duration)
}

// The results of a reconcile, as Observer.Reconciled reports them.
const (
	ResultSuccess  = "success"
	ResultRequeue  = "requeue"  // success; look again later
	ResultConflict = "conflict" // decided on a stale object; decided again
	ResultError    = "error"    // retried with backoff
	ResultTimeout  = "timeout"  // cut off at Retry.ReconcileTimeout; retried with backoff
	ResultPanic    = "panic"    // recovered and logged with the stack; retried with backoff
	ResultFenced   = "fenced"   // the fence was closed (Config.Fence): nothing more written
)

// Results lists every result a reconcile can have, for a metric to start each at zero: a
// counter born at 1 on the first panic shows no increase to Prometheus, so the first panic
// would not alert.
var Results = []string{ResultSuccess, ResultRequeue, ResultConflict, ResultError, ResultTimeout, ResultPanic, ResultFenced}

// Controller keeps every watched VirtualMachine's server and status true to its spec.
type Controller struct {
	cfg Config
	// vms is the current informer of the VMs. It is replaced when the resource comes back
	// after its CRD was deleted or stopped serving the version (see served.go).
	vms    atomic.Pointer[vmInformer]
	served *servedWatch // nil unless CRD.Watch
	usage  *poller      // nil unless usage is sampled
	queue  *priority.Queue[cache.ObjectName]
	// leads says whether this replica leads: until it does, nothing is queued (see lead).
	leads leadership
	// ledger is what the controller remembers of each VM until it is gone (ledger.go).
	ledger  ledger
	log     *slog.Logger
	applier applier
	// opt is the backend's optional interfaces the loop uses, asserted once, by New.
	opt optional
	// synced is the sync check of the caches Start starts besides the VMs': the backend's
	// and the namespaces' (always true without Config.Namespaces). Nil until Start.
	synced func() bool
	// reconciling holds the updates of the VMs being reconciled until each reconcile ends
	// (echo.go).
	reconciling reconciling
	// reconciles counts the reconciles, each one's ID.
	reconciles atomic.Uint64
	// warned is what the loop has warned of, once for the whole controller rather than once
	// per VM.
	warned struct {
		// fenced is set while writes are fenced (Config.Fence) and the loop has said so: one
		// line per episode, not one per VM.
		fenced atomic.Bool
		// unkept is when warnUnkept last warned (Unix nanoseconds; 0: never).
		unkept atomic.Int64
	}
}

// optional holds the optional interfaces of a Controller's backend that its loop and its
// applier use, each asserted once, by New, as the policy's CanResize and disk mode are (the
// backend is fixed from then on); nil when the backend lacks it. A round asks for several of
// them, on every reconcile, and the applier for others with each action: asserted where used,
// the same question, whose answer is fixed for the life of the backend, was asked again and
// again, in several files.
type optional struct {
	departures backend.Departures
	rooms      backend.Rooms
	disks      backend.Disks
	reader     backend.Reader
	budgets    backend.Budgets
	pinning    backend.DiskPinning
	// The applier's: a resize in place, a stop's grace period, and the related objects of
	// Events (events.go).
	resizer       backend.Resizer
	graceful      backend.GracefulDeleter
	objects       backend.Objects
	diskObjects   backend.DiskObjects
	budgetObjects backend.BudgetObjects
}

// optionalOf asserts b's optional interfaces.
func optionalOf(b backend.Backend) optional {
	var o optional
	o.departures, _ = b.(backend.Departures)
	o.rooms, _ = b.(backend.Rooms)
	o.disks, _ = b.(backend.Disks)
	o.reader, _ = b.(backend.Reader)
	o.budgets, _ = b.(backend.Budgets)
	o.pinning, _ = b.(backend.DiskPinning)
	o.resizer, _ = b.(backend.Resizer)
	o.graceful, _ = b.(backend.GracefulDeleter)
	o.objects, _ = b.(backend.Objects)
	o.diskObjects, _ = b.(backend.DiskObjects)
	o.budgetObjects, _ = b.(backend.BudgetObjects)
	return o
}

// New builds a controller; nothing runs until Start (the informers, on every replica) and
// RunWorkers (the queue, the workers and the usage poller, on the leader).
func New(cfg Config) *Controller {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Report.Logger == nil {
		cfg.Report.Logger = slog.Default()
	}
	if cfg.Retry.RateLimiter == nil {
		cfg.Retry.RateLimiter = workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]()
	}
	opt := optionalOf(cfg.Backend)
	cfg.Policy = diskPolicy(opt, cfg.Policy, cfg.Report.Logger)
	cfg.Policy = resizePolicy(opt, cfg.Policy)
	if cfg.Retry.ConflictRateLimiter == nil {
		cfg.Retry.ConflictRateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](5*time.Millisecond, 1000*time.Second)
	}
	if cfg.Retry.UnsettledRateLimiter == nil {
		cfg.Retry.UnsettledRateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](100*time.Millisecond, time.Minute)
	}
	c := &Controller{
		cfg:    cfg,
		queue:  priority.New(cfg.VMs.GVR.Resource, cfg.Retry.RateLimiter),
		ledger: newLedger(),
		log:    cfg.Report.Logger,
		opt:    opt,
	}
	route := statusRoute{main: cfg.CRD.NoStatusSubresource}
	writer := cfg.VMs.writer()
	c.applier = applier{writer: writer, fields: cfg.VMs.Fields, backend: cfg.Backend, opt: c.opt,
		recorder: cfg.Report.Recorder, expect: c.ledger.expect, disks: c.ledger.disks, policy: cfg.Policy, now: cfg.Now, route: route, notKept: c.ledger.notKept, log: cfg.Report.Logger}
	if cfg.CRD.Watch {
		c.served = newServedWatch(cfg.VMs.Client, cfg.VMs.GVR, cfg.Report.Logger, c.onServed)
		if cfg.CRD.Layout != nil {
			c.served.layout, c.served.onLayout = cfg.CRD.Layout, c.onLayoutChanged
		}
	}
	if reader, ok := cfg.Backend.(backend.UsageReader); ok && cfg.Usage.Interval > 0 {
		c.usage = &poller{policy: cfg.Usage, reader: reader, writer: writer, fields: cfg.VMs.Fields,
			queue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[cache.ObjectName]{Name: cfg.VMs.GVR.Resource + "_usage"}),
			get:   c.liveView, observer: cfg.Report.UsageObserver, now: cfg.Now, log: fencedQuiet{cfg.Report.Logger}, lastWrite: map[cache.ObjectName]time.Time{},
			route: route, echo: func(vm cache.ObjectName, rv string) { c.ledger.echoes.expect(vm, []string{rv}, nil, nil) }, timeout: cfg.Retry.ReconcileTimeout}
	}
	return c
}

// resizePolicy is p for a controller whose backend has the optional interfaces o: CanResize
// says whether the backend resizes a server in place (o.resizer, the one assertion of
// backend.Resizer, which the applier's resize also uses, so the decision and the applying
// cannot disagree on it), whatever p says. Told it could, a decision on a backend that cannot
// would ask for a resize at every change of a running server's cpu or memory, which applying
// refuses as an error: the VM would be retried for ever and never get its size. Told it
// cannot, the decision replaces the server (under --resize manual, keeps it until a restart).
func resizePolicy(o optional, p decision.Policy) decision.Policy {
	p.CanResize = o.resizer != nil
	return p
}

// liveView is view, for VMs whose namespace is not being deleted: the usage poller's, which
// so stops sampling a VM whose server went with its namespace's pods, instead of reporting it
// unavailable in a write no one would read (see Namespaces).
func (c *Controller) liveView(key cache.ObjectName) (schema.VirtualMachine, bool) {
	if c.terminating(key.Namespace) {
		return schema.VirtualMachine{}, false
	}
	return c.view(key)
}

// terminating reports whether namespace is known to be being deleted (Config.Namespaces).
func (c *Controller) terminating(namespace string) bool {
	return c.cfg.Namespaces != nil && c.cfg.Namespaces.Terminating(namespace)
}

// view returns the cached VM of key as a view, if it is there.
func (c *Controller) view(key cache.ObjectName) (schema.VirtualMachine, bool) {
	vms := c.vms.Load()
	if vms == nil {
		return schema.VirtualMachine{}, false
	}
	obj, ok, err := vms.store.GetByKey(key.String())
	if err != nil || !ok {
		return schema.VirtualMachine{}, false
	}
	vm, err := obj.(*vmcache.Object).View(c.cfg.VMs.Fields)
	if err != nil {
		return schema.VirtualMachine{}, false
	}
	return vm, true
}

// vmInformer is one informer of the VMs and the means to stop it.
//
// Why client-go's plain informer (cache.NewInformerWithOptions) and not a shared one: the
// controller has one handler per informer, and a shared informer, made to serve many, hands
// each event to its handlers through a listener of two goroutines of its own (a buffer and a
// runner), two more hand-offs per event on top of the watch's and the queue's. The plain
// informer calls the handler in the loop that stores the event; the handler only queues, so
// that loop is not held up. In side-by-side bursts the change measured level in CPU per VM
// (docs/dev/benchmarks.md): it is kept for the simpler path, not for a gain.
type vmInformer struct {
	store cache.Indexer
	// ctrl has synced once the initial list has been stored and handed to the handler, not
	// only stored (see HasSynced): the plain informer calls the handler before it counts an
	// item of the initial list as done.
	ctrl cache.Controller
	stop context.CancelFunc
}

// onVMUpdate is the VM informer's UpdateFunc. A change of labels or annotations changes
// nothing a decision reads, and a resync nothing at all: the periodic safety net is the
// RequeueAfter of each plan, not a storm of no-op reconciles.
func (c *Controller) onVMUpdate(old, cur any) {
	if old == cur {
		// A resync (--resync) hands every object of the cache to the handler again, as
		// both old and new (the informer's transform skips it). It is no echo: taken for
		// one (seen), it would make the controller forget its last write of the VM while
		// the write's own echo is still to come, and the next reconcile would decide on the
		// cache's older version, and meet a conflict.
		return
	}
	if !c.leads.on.Load() {
		return // a standby queues and schedules nothing (lead); it has written nothing to echo
	}
	o, n := old.(*vmcache.Object), cur.(*vmcache.Object)
	key := cache.NewObjectName(n.GetNamespace(), n.GetName())
	// The poller samples a VM as the cache shows it, and lets go of one that is not
	// Active there. The reconcile that makes a VM Active schedules it before the
	// cache has the write, so a sample may come too early: schedule it again once
	// the cache shows it Active, even when this is the echo of that write.
	if c.usage != nil && n.Phase() == schema.PhaseActive && o.Phase() != schema.PhaseActive {
		c.usage.schedule(key)
	}
	rv := n.GetResourceVersion()
	if c.reconciling.underway(key) {
		// Whether it is an echo is told once the reconcile has noted its writes; what it asks
		// otherwise is told now, from the two objects, which are not kept (reconciling).
		u := held{rv: rv, lane: c.laneOf(o, n)}
		if c.reconciling.hold(key, u) {
			return // handed to queueUpdate once the reconcile under way has noted its writes
		}
		c.queueUpdate(key, u) // the reconcile has ended meanwhile
		return
	}
	// The echo of a write this controller made and had decided on already, told first: it
	// is the most common update, and laneOf reads both objects.
	if c.ledger.echoes.seen(key, rv) {
		return
	}
	c.queueLane(key, c.laneOf(o, n))
}

// queueUpdate queues the VM of key for an update held while it was reconciled (reconciling),
// in the lane the update asked for, unless the update is the echo of a write this controller
// made and decided on (echoes).
func (c *Controller) queueUpdate(key cache.ObjectName, u held) {
	if c.ledger.echoes.seen(key, u.rv) {
		return
	}
	c.queueLane(key, u.lane)
}

// laneOf is the lane an update of a VM from o to n asks for, if it is not an echo: none for a
// change of nothing a view reads or a usage write, new work for what a user changes
// (userChange), the backlog for the rest (status someone else wrote). It reads o and n and the
// fixed configuration alone, so that it can be told when the update comes.
func (c *Controller) laneOf(o, n *vmcache.Object) lane {
	if vmcache.Same(o, n) {
		return laneNone
	}
	// The poller's usage writes change nothing a decision reads, but for a VM that is
	// not Active, which reports no usage: a write the poller sent while it was Active
	// may land after the reconcile that removed the usage, and the reconcile it brings
	// removes it again.
	if c.usage != nil && n.Phase() == schema.PhaseActive && vmcache.OnlyUsageChanged(o, n, c.cfg.VMs.Fields) {
		return laneNone
	}
	if userChange(o, n, c.cfg.VMs.Fields) {
		return laneUrgent
	}
	return laneBacklog
}

// queueLane queues the VM of key in lane l (laneNone: not at all).
func (c *Controller) queueLane(key cache.ObjectName, l lane) {
	switch l {
	case laneUrgent:
		c.queue.AddUrgent(key)
	case laneBacklog:
		c.queue.Add(key)
	}
}

// startVMs starts a new informer of the VMs, whose initial list enqueues every VM, and stops
// the one it replaces.
func (c *Controller) startVMs(ctx context.Context) error {
	handler := cache.ResourceEventHandlerDetailedFuncs{
		// What goes ahead of the backlog: urgency.go.
		AddFunc: func(obj any, initialList bool) {
			if c.leads.on.Load() {
				c.enqueue(obj, !initialList || unsettled(obj.(*vmcache.Object)))
			}
		},
		UpdateFunc: c.onVMUpdate,
		DeleteFunc: c.onVMDelete,
	}
	store, ctrl := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: c.cfg.VMs.listerWatcher(),
		ObjectType:    c.cfg.VMs.wireType(),
		Handler:       handler,
		ResyncPeriod:  c.cfg.VMs.Resync,
		Indexers:      cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		Transform:     c.cfg.VMs.transform(),
	})
	ictx, stop := context.WithCancel(ctx)
	go ctrl.RunWithContext(ictx)
	if old := c.vms.Swap(&vmInformer{store: store.(cache.Indexer), ctrl: ctrl, stop: stop}); old != nil {
		old.stop()
	}
	return nil
}

// listerWatcher lists and watches the VMs: over the REST client, each read from the wire
// into its Object in place (vmcache.ListerWatcher); without one (as in the unit tests) over the
// dynamic client, each made an Object by transform.
func (s Source) listerWatcher() cache.ListerWatcher {
	if s.REST != nil {
		return &vmcache.ListerWatcher{Client: s.REST, WatchClient: s.WatchREST, GVR: s.GVR, Namespace: s.Namespace,
			Selector: s.Selector, Fields: s.Fields}
	}
	vms := s.Client.Resource(s.GVR).Namespace(s.Namespace)
	// As client-go's dynamic informer does: a client that cannot stream a watch list (the
	// fake) is listed instead.
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = s.Selector
			return vms.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = s.Selector
			return vms.Watch(ctx, o)
		},
	}, s.Client)
}

// wireType is the type of what listerWatcher lists and watches, before transform.
func (s Source) wireType() runtime.Object {
	if s.REST != nil {
		return &vmcache.Object{}
	}
	return &unstructured.Unstructured{}
}

// transform is the informer's transform: none over the REST client, whose lister-watcher
// makes Objects itself; over the dynamic client, unstructured VMs made Objects.
func (s Source) transform() cache.TransformFunc {
	if s.REST != nil {
		return nil
	}
	return vmcache.Transform(s.Fields)
}

// writer is what VMs are written through: the REST client when there is one (see
// restWriter), else the dynamic client.
func (s Source) writer() vmWriter {
	if s.REST != nil {
		return restWriter{client: s.REST, gvr: s.GVR}
	}
	return dynamicWriter{client: s.Client.Resource(s.GVR)}
}

// stopVMs stops the informer of the VMs while the resource is not served, so that its
// reflector does not retry against a resource that is gone; its cache is dropped with it.
func (c *Controller) stopVMs() {
	if old := c.vms.Swap(nil); old != nil {
		old.stop()
	}
}

// onServed follows the resource's CRD: the informer stops when the resource goes and starts
// afresh when it comes back.
func (c *Controller) onServed(ctx context.Context, served bool) {
	if c.cfg.CRD.OnServed != nil {
		c.cfg.CRD.OnServed(served)
	}
	if !served {
		c.stopVMs()
		return
	}
	if err := c.startVMs(ctx); err != nil {
		c.log.Error("Cannot restart the informer of the VMs", "error", err)
	}
}

// Start starts the informers of the VMs and of their servers; they run until ctx is
// cancelled. Every replica starts them, leader or not, so that its readiness means "caches
// synced" and a standby that takes over has its caches ready; only the leader queues work
// (lead).
func (c *Controller) Start(ctx context.Context) error {
	if err := c.startVMs(ctx); err != nil {
		return err
	}
	if c.served != nil {
		if err := c.served.start(ctx); err != nil {
			return err
		}
	}
	// A server's change after the servers' first list is new work (urgency.go); the first
	// list itself is backlog, like the VMs'.
	var listed atomic.Pointer[func() bool]
	serversSynced, err := c.cfg.Backend.Start(ctx, func(vm types.NamespacedName) {
		key := cache.ObjectName(vm)
		if !c.leads.on.Load() {
			c.forgetUncached(key) // a standby queues nothing; at takeover its VM cache is queued (lead)
			return
		}
		if s := listed.Load(); s != nil && (*s)() {
			c.queue.AddUrgent(key)
		} else {
			c.queue.Add(key)
		}
	})
	if err != nil {
		return fmt.Errorf("start backend: %w", err)
	}
	listed.Store(&serversSynced)
	namespacesSynced := func() bool { return true }
	if c.cfg.Namespaces != nil {
		if namespacesSynced, err = c.cfg.Namespaces.Start(ctx); err != nil {
			return err
		}
	}
	c.synced = func() bool { return serversSynced() && namespacesSynced() }
	return nil
}

// RunWorkers makes this replica lead (lead), waits for the caches, queues every cached VM,
// then runs workers until ctx is cancelled. Then it stops taking work, lets in-flight
// reconciles finish for up to drain, cancels those left, and returns (ErrWorkersStuck should
// one not return within AbandonAfter of that). Keys still queued are left unreconciled: the
// process is exiting or has lost the Lease, and the next leader queues every VM again. Only
// one replica (the leader) runs workers; the queue cannot be restarted afterwards.
func (c *Controller) RunWorkers(ctx context.Context, workers int, drain time.Duration) error {
	defer c.queue.ShutDown()
	c.lead()
	c.log.Info("Waiting for caches to sync", "resource", c.cfg.VMs.GVR.String(), "namespace", c.cfg.VMs.Namespace, "selector", c.cfg.VMs.Selector)
	if !cache.WaitForCacheSync(ctx.Done(), c.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("caches did not sync")
	}
	c.queueCached()

	// Workers run on a context that outlives ctx by the drain period, so that a reconcile in
	// flight at shutdown completes its writes instead of being cut off half-way.
	workCtx, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	c.log.Info("Starting workers", "count", workers)
	for range workers {
		wg.Go(func() {
			for c.processNext(ctx, workCtx) {
			}
		})
	}
	if c.usage != nil {
		c.log.Info("Sampling usage", "interval", c.cfg.Usage.Interval, "threshold", c.cfg.Usage.Threshold, "maxInterval", c.cfg.Usage.MaxInterval)
		wg.Go(func() { c.usage.run(ctx, workCtx) })
	}
	<-ctx.Done()
	c.log.Info("Shutting down: no new work, draining in-flight reconciles", "timeout", drain)
	c.queue.ShutDown()
	if c.usage != nil {
		c.usage.queue.ShutDown()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		c.log.Info("Workers finished")
	case <-time.After(drain):
		cancelWork()
		c.log.Warn("Drain timed out; cancelled in-flight reconciles", "timeout", drain)
		select {
		case <-done:
		case <-time.After(AbandonAfter):
			// A call that ignores its context (none is known to) would hold the process
			// here for ever: after a lost Lease as a replica that never campaigns again
			// while its health check passes, after SIGTERM until SIGKILL, with the Lease
			// not released. The workers are left to the process's exit; the fence refuses
			// whatever they would still write once the Lease is another's.
			c.log.Error("Workers did not return after their reconciles were cancelled; leaving them", "timeout", AbandonAfter)
			return ErrWorkersStuck
		}
	}
	return nil
}

// AbandonAfter is how long RunWorkers waits for its workers once it has cancelled their
// reconciles at the end of the drain: a call that honours its context returns at once.
const AbandonAfter = 2 * time.Second

// ErrWorkersStuck is RunWorkers' error when its workers did not return once their reconciles
// were cancelled (AbandonAfter).
var ErrWorkersStuck = errors.New("workers did not return after their reconciles were cancelled")

// HasSynced reports whether the caches of VMs and servers hold a full list and the handlers
// have had every item of it (on the leader, queued every VM of it); readiness follows it. A
// shared informer's own HasSynced turns true once its list is stored, while its handlers may
// still be working through it: workers started then reconcile a VM, and the add of its server,
// handed over a moment later, queues it again (in a cold start over many VMs, many were
// reconciled twice so). The plain informers used here count an item of the list done only
// once their handler has had it.
func (c *Controller) HasSynced() bool {
	vms := c.vms.Load()
	return vms != nil && vms.ctrl.HasSynced() && c.synced != nil && c.synced() && c.Served()
}

// Served reports whether the API server serves the VM resource, as far as the controller
// knows: always true unless it follows the CRD.
func (c *Controller) Served() bool { return c.served == nil || c.served.served() }

// leadership is whether this replica leads. It is set once, by RunWorkers, and never unset: a
// replica that stops leading exits (its queue is shut down, and cannot be restarted).
type leadership struct {
	on atomic.Bool
	// mu is held to set on, and by a standby's forgetting of a deleted VM (onVMDelete,
	// forgetUncached), so that none is under way once this replica leads.
	mu sync.Mutex
}

// lead makes this replica the one that works: from now on its handlers queue what they see.
// RunWorkers then queues the cache (queueCached).
//
// Why a standby queues nothing: every replica runs the informers (Start), and a standby's
// handlers filled a queue that only the leader's workers take from. It held every key the
// standby ever saw, VMs long deleted included, almost all of them new work (a VM added or
// deleted after the first list, a server that changed after the servers'), growing with the
// churn for as long as the replica stood by; at takeover a VM a user created waited behind all
// of it, and a start's promise, new work first, was broken by the backlog of the standby's
// whole life. The cache holds everything a queue of those keys could bring to a reconcile: a
// key whose VM is not cached only forgets the VM (a standby forgets it at its delete), and a
// VM deleted while its finalizer holds it is still cached. So at takeover the cache is queued
// as a cold start's first list is, with the same urgency rules (urgency.go): a VM created,
// deleted or changed since it was last reconciled is new work, a settled one backlog. What
// that cannot tell is a server that changed while the replica stood by: as at a cold start, its
// VM is backlog unless it is unsettled itself. Nor does a standby schedule usage samples (the
// poller's queue, too, was every VM that became Active while it stood by): the reconcile of
// each Active VM after takeover schedules it, as after a cold start.
func (c *Controller) lead() {
	c.leads.mu.Lock()
	c.leads.on.Store(true)
	c.leads.mu.Unlock()
}

// queueCached queues every VM of the cache as the informer's first list does: new work for
// those not settled (urgency.go), backlog for the rest, in the order of their keys (the order
// the API server lists them in). A key queued already keeps its place, or moves up if it is
// new work; one whose VM has left the cache since was queued by its delete.
func (c *Controller) queueCached() {
	vms := c.vms.Load()
	if vms == nil {
		return // not served: the informer's first list, once it is, queues every VM
	}
	keys := vms.store.ListKeys()
	slices.Sort(keys)
	for _, k := range keys {
		obj, ok, err := vms.store.GetByKey(k)
		if err != nil || !ok {
			continue
		}
		c.enqueue(obj, unsettled(obj.(*vmcache.Object)))
	}
}

// onVMDelete is the VM informer's DeleteFunc. The leader queues the VM (new work): its
// reconcile finds it gone and forgets what is remembered of it (forgetGone). A standby, which
// reconciles nothing, forgets it at once, so that nothing of a VM deleted while it stood by
// outlives the VM: the backend's record of its server (backend.Departures; the ledger of a
// standby is empty, as it wrote nothing), and again at each later event of its server, which
// may record it anew (forgetUncached).
func (c *Controller) onVMDelete(obj any) {
	if c.leads.on.Load() {
		c.enqueue(obj, true)
		return
	}
	c.leads.mu.Lock()
	defer c.leads.mu.Unlock()
	if c.leads.on.Load() { // took over meanwhile: its reconcile forgets the VM
		c.enqueue(obj, true)
		return
	}
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		c.log.Error("Cannot make a key", "error", err)
		return
	}
	c.forgetGone(key)
}

// forgetUncached is a standby's answer to the backend's notify of the VM of key: nothing
// when the VM is cached (one lookup in the cache, the common case), else the VM is forgotten
// again (forgetGone). The backend may have recorded its server's going from the very event it
// notifies of (backend.Departures: a pod deleted while evicted, which the garbage collector
// deletes once its VM is gone), after the VM's delete made this standby forget it
// (onVMDelete). On the leader the notify queues the VM, and its reconcile, which finds it gone,
// forgets that record; here nothing did, and it stayed until the backend's bound dropped it.
func (c *Controller) forgetUncached(key cache.ObjectName) {
	if c.opt.departures == nil {
		return // the ledger of a standby is empty: only the backend's record can come back
	}
	vms := c.vms.Load()
	if vms == nil {
		return // not served: as a reconcile, which forgets nothing then
	}
	if _, ok, err := vms.store.GetByKey(key.String()); ok || err != nil {
		return
	}
	if !vms.ctrl.HasSynced() {
		return // a cache still filling: a VM that exists would be taken for gone (reconcile)
	}
	c.leads.mu.Lock()
	defer c.leads.mu.Unlock()
	if c.leads.on.Load() { // took over meanwhile: its reconcile forgets the VM
		c.queue.AddUrgent(key)
		return
	}
	c.forgetGone(key)
}

// forgetGone drops what is remembered of the VM of key, which is gone: the ledger's records,
// and the backend's (backend.Departures).
func (c *Controller) forgetGone(key cache.ObjectName) {
	c.ledger.forget(key)
	c.cfg.Retry.UnsettledRateLimiter.Forget(key)
	if c.opt.departures != nil {
		c.opt.departures.Forget(types.NamespacedName{Namespace: key.Namespace, Name: key.Name})
	}
}

// enqueue adds the key of a VM (or of a deleted VM's tombstone) to the queue: as new work
// ahead of the backlog when urgent.
func (c *Controller) enqueue(obj any, urgent bool) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		c.log.Error("Cannot make a key", "error", err)
		return
	}
	if urgent {
		c.queue.AddUrgent(key)
	} else {
		c.queue.Add(key)
	}
}

// processNext takes one key while leading lasts and reconciles it under ctx, bounded by
// Retry.ReconcileTimeout: Forget on success, AddAfter when the plan asks to look again later
// or after a conflict (its VM's own backoff), AddRateLimited on a transient error, a timeout
// or a panic. New work that needs another pass goes ahead of the backlog again. It returns
// false once the queue is shut down or leading has ended: the worker stops.
//
// leading is RunWorkers' ctx, which ends on SIGTERM or a lost Lease; ctx outlives it by the
// drain, so that a reconcile in flight finishes its writes. No key is taken once leading has
// ended: the workqueue's ShutDown stops Adds, but Get goes on handing out what is queued, and
// the whole backlog would be reconciled, with its writes, for up to the drain, while another
// replica may lead already and a SIGTERM's handoff waits.
func (c *Controller) processNext(leading, ctx context.Context) bool {
	if leading.Err() != nil {
		return false
	}
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	// The updates of the VM that come from now on wait for the end of its reconcile, when its
	// writes are noted, and are queued then unless they are their echoes (reconciling);
	// queued then, before Done, they are handed out again after it, as any added meanwhile.
	c.reconciling.begin(key)
	defer c.reconciling.end(key, c.queueUpdate)
	urgent := c.queue.TakeUrgent(key)
	// Get may have waited for this key past leading's end: it is let go unreconciled, as the
	// keys still queued are. TakeUrgent has dropped the note of its lane (kept until taken)
	// and Done (deferred) releases it, so the queue's books are as after any other key.
	if leading.Err() != nil {
		return false
	}
	retry, requeue := c.queue.AddRateLimited, c.queue.AddAfter
	if urgent {
		retry, requeue = c.queue.AddUrgentRateLimited, c.queue.AddUrgentAfter
	}

	// A reconcile's ID is a counter, and its logger carries the VM only when debug logs are
	// on: under a burst, a UUID and a logger per reconcile were a visible share of the
	// allocations, for logs nobody reads at the default level.
	id := c.reconciles.Add(1)
	debug := c.log.Enabled(ctx, slog.LevelDebug)
	log := c.log
	if debug {
		log = log.With("vm", key.String(), "reconcileID", id)
	}
	start := time.Now()
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if c.cfg.Retry.ReconcileTimeout > 0 {
		rctx, cancel = context.WithTimeout(ctx, c.cfg.Retry.ReconcileTimeout)
	}
	after, err := c.reconcileRecovered(rctx, key, log, debug)
	// Cut off by its own deadline, not by the end of the drain (ctx), whatever error the
	// call that was waiting made of it.
	timedOut := err != nil && errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	took := time.Since(start)
	result := ResultSuccess
	var p *panicked
	switch {
	case errors.As(err, &p):
		// One failed reconcile, not the end of the process: retried with backoff like an
		// error, and loud, because a panic is a bug to report.
		result = ResultPanic
		retry(key)
		c.log.Error("Reconcile panicked; will retry", "vm", key.String(), "reconcileID", id, "panic", fmt.Sprint(p.value),
			"retries", c.queue.NumRequeues(key), "stack", string(p.stack))
	case errors.Is(err, ErrFenced):
		// This replica may no longer lead: nothing more was written, and the VM is looked at
		// again shortly, not after its backoff (a renewal reopens the fence; a lost Lease
		// ends the process, and the next leader's list queues the VM anyway). One line
		// says the fence closed, not one per VM.
		result = ResultFenced
		requeue(key, fencedWait)
		if c.warned.fenced.CompareAndSwap(false, true) {
			c.log.Info("Writes fenced: the leader Lease was not renewed in time; holding reconciles until it is", "error", err)
		}
		if debug {
			log.Debug("Fenced; will look again", "after", fencedWait, "error", err)
		}
	case timedOut:
		result = ResultTimeout
		retry(key)
		c.log.Error("Reconcile timed out; will retry", "vm", key.String(), "reconcileID", id, "timeout", c.cfg.Retry.ReconcileTimeout,
			"error", err, "retries", c.queue.NumRequeues(key))
	case apierrors.IsConflict(err):
		// The cache was behind someone else's write: decide again on the newer object, after
		// this VM's own backoff, not behind other VMs' retries (Retry.ConflictRateLimiter).
		result = ResultConflict
		requeue(key, c.cfg.Retry.ConflictRateLimiter.When(key))
		log.Debug("Conflict; will decide again", "error", err)
	case err != nil:
		result = ResultError
		retry(key)
		if after > 0 {
			requeue(key, after) // the plan's own time, if sooner than the backoff's (the queue keeps the sooner)
		}
		if !debug {
			log = log.With("vm", key.String(), "reconcileID", id)
		}
		log.Error("Reconcile failed; will retry", "error", err, "retries", c.queue.NumRequeues(key))
	case after > 0:
		result = ResultRequeue
		c.queue.Forget(key)
		c.cfg.Retry.ConflictRateLimiter.Forget(key)
		requeue(key, after)
		if debug {
			log.Debug("Reconciled", "requeueAfter", after, "duration", took)
		}
	default:
		c.queue.Forget(key)
		c.cfg.Retry.ConflictRateLimiter.Forget(key)
		if debug {
			log.Debug("Reconciled", "duration", took)
		}
	}
	if result != ResultFenced && c.cfg.Fence == nil {
		c.warned.fenced.Store(false) // without Config.Fence, a write's refusal is all that says so
	}
	if c.cfg.Report.Observer != nil {
		c.cfg.Report.Observer.Reconciled(result, took)
	}
	return true
}

// fencedWait is how long a reconcile that met the fence waits to be looked at again: about
// the retry period of a renewal that was late, not the growing backoff of an error.
const fencedWait = time.Second

// checkFence is nil when this replica may write (Config.Fence), else the fence's error. An
// open fence after a closed one ends the episode the loop logged.
func (c *Controller) checkFence() error {
	if c.cfg.Fence == nil {
		return nil
	}
	err := c.cfg.Fence()
	if err == nil && c.warned.fenced.CompareAndSwap(true, false) {
		c.log.Info("Writes no longer fenced: the leader Lease was renewed")
	}
	return err
}

// fencedQuiet is the usage poller's logger with a write refused by the fence at debug: the
// workers say once that the fence closed, and the VM is sampled again on its schedule.
type fencedQuiet struct{ *slog.Logger }

func (l fencedQuiet) Warn(msg string, args ...any) {
	for _, a := range args {
		if err, ok := a.(error); ok && errors.Is(err, ErrFenced) {
			l.Debug(msg, args...)
			return
		}
	}
	l.Logger.Warn(msg, args...)
}

// panicked is a reconcile that panicked: what it panicked with, and the stack where it did.
type panicked struct {
	value any
	stack []byte
}

func (p *panicked) Error() string { return fmt.Sprintf("reconcile panicked: %v", p.value) }

// reconcileRecovered is reconcile, with a panic turned into an error (*panicked): a bug met by
// one VM fails that VM's reconcile, and the worker goes on serving the others, as
// controller-runtime's RecoverPanic does. Locks are released by defers on the way up, and
// every write is conditional, so a reconcile cut short leaves nothing half-written that the
// retry could not see.
func (c *Controller) reconcileRecovered(ctx context.Context, key cache.ObjectName, log *slog.Logger, debug bool) (after time.Duration, err error) {
	defer func() {
		if v := recover(); v != nil {
			after, err = 0, &panicked{value: v, stack: runtimedebug.Stack()}
		}
	}()
	return c.reconcile(ctx, key, log, debug)
}

// warnUnkept warns that a status write was not kept as sent, at most once per unkeptWarnEvery
// for the whole controller: with a CRD that prunes a field, every VM's writes do.
func (c *Controller) warnUnkept(log *slog.Logger) {
	now := c.cfg.Now()
	last := c.warned.unkept.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < unkeptWarnEvery {
		return
	}
	if c.warned.unkept.CompareAndSwap(last, now.UnixNano()) {
		log.Warn("A status write was not kept as sent by the API server, whose CRD may lack status fields this version writes: "+
			"apply this version's CRDs (vm-controller crds, or manifests); until then a VM's status is written again, and not kept, "+
			"only when the VM changes or what its status says does",
			"resource", c.cfg.VMs.GVR.String())
	}
}

// unkeptWarnEvery is how often warnUnkept may warn.
const unkeptWarnEvery = 10 * time.Minute

// maxDecisions bounds the decisions of one reconcile: the first, on the cached VM, and those
// on the VM as each round of writes returned it. A VM whose last decision still wrote it is
// queued again, as new work, to decide on that write (reconcile).
const maxDecisions = 3

// reconcile gathers the VM from the cache and its server from the backend (gather), decides,
// confirms past the caches what the plan may not be carried out on their word alone (confirm),
// and applies the plan; then it decides again on the VM as its last write returned it,
// instead of waiting for the informer to bring that back through the queue, until there is
// nothing left to do, or for maxDecisions, after which it queues the VM again as new work. A
// VM that is gone ends quietly; its server has an owner reference, so the garbage collector
// removes anything the finalizer did not.
//
// When the last decision finds nothing to do, or is the last allowed, the informer's echoes
// of this reconcile's writes bring nothing new: they are noted, and the event handler drops
// them (see echoes), those that come while the reconcile runs as well (reconciling).
func (c *Controller) reconcile(ctx context.Context, key cache.ObjectName, log *slog.Logger, debug bool) (time.Duration, error) {
	vms := c.vms.Load()
	if vms == nil || !vms.ctrl.HasSynced() {
		// Not served, or served again and the informer's first list not in yet: that list
		// enqueues the VM again. Read from a cache still filling, a VM that exists would be
		// taken for gone, and what is remembered of it (expectations, a lost write's
		// replacement, the backend's record of an evicted server) forgotten.
		return 0, nil
	}
	obj, exists, err := vms.store.GetByKey(key.String())
	if err != nil {
		return 0, fmt.Errorf("read cache: %w", err)
	}
	if !exists {
		c.forgetGone(key)
		if debug {
			log.Debug("VM is gone")
		}
		return 0, nil
	}
	if c.ledger.echoes.isReleased(key, obj.(*vmcache.Object).GetUID()) {
		if debug {
			log.Debug("VM released: its finalizer is removed, and the cache has yet to catch up")
		}
		return 0, nil
	}
	var vm schema.VirtualMachine
	// from are the versions of the VM the first decision's VM is or follows: what the cache
	// may show while this reconcile's last write is still the newer (echoes.latest).
	var from []string
	cachedRV := obj.(*vmcache.Object).GetResourceVersion()
	if w, ok := c.ledger.echoes.latest(key, cachedRV); ok {
		vm = w.view(c.cfg.VMs.Fields) // this controller's last write, which the cache has yet to bring back
		from = append(slices.Clip(w.over), w.rv)
	} else if vm, err = obj.(*vmcache.Object).View(c.cfg.VMs.Fields); err != nil {
		return 0, err
	} else {
		from = []string{cachedRV}
	}
	// A VM whose namespace is being deleted goes with it: nothing made there would be
	// accepted, and nothing written would be read. It waits for its own deletion, which the
	// namespace's brings (and which queues it again), and is then only released.
	going := c.terminating(key.Namespace)
	if going && !vm.Deleting() {
		if debug {
			log.Debug("Namespace is being deleted: waiting for the VM's deletion")
		}
		return 0, nil
	}
	passes := 0
	var rvs []string  // of this reconcile's writes of the VM, in order
	var last *written // the VM as the last of them returned it
	var after time.Duration
	for round := 1; ; round++ {
		// A round decides on what this replica last saw or wrote: once it may no longer
		// lead, another leader may have changed the VM or its disk since, and the round's
		// writes would put that back (Config.Fence).
		if err := c.checkFence(); err != nil {
			c.ledger.echoes.expect(key, rvs, last, from)
			return 0, err
		}
		// A pass is counted once it may decide: a fenced reconcile decided nothing.
		if round == 1 && vm.Phase() != schema.PhaseActive {
			passes = c.ledger.passes.add(key)
		}
		// A round that ends before it applies leaves the earlier rounds' writes noted, as an
		// error of apply does (below): they are facts, and the retry or the requeue decides
		// on the VM as the last of them returned it. Not noted, each one's echo queued the
		// VM again, and a reconcile before the cache caught up decided on its older
		// version: a conflict of its own making, or a server action or an Event sent twice.
		g, err := c.gather(ctx, key, vm, going, log)
		if err != nil {
			c.ledger.echoes.expect(key, rvs, last, from)
			return 0, err
		}
		if g.wait > 0 {
			c.ledger.echoes.expect(key, rvs, last, from)
			after = g.wait
			break
		}
		plan := c.cfg.Policy.Decide(g.in)
		in, plan, err := c.confirm(ctx, g.in, g.owner, plan, going, log)
		if err != nil {
			c.ledger.echoes.expect(key, rvs, last, from)
			return 0, err
		}
		if going && !vm.Paused() {
			// A paused VM keeps its word: its Paused condition says why it, and so its
			// namespace, waits (decision/paused.go).
			plan = plan.Releasing()
		}
		phase := vm.Phase()
		becomesActive := false
		if plan.Status != nil {
			becomesActive = plan.Status.Phase == schema.PhaseActive && phase != schema.PhaseActive
			phase = plan.Status.Phase
		}
		if c.usage != nil && phase == schema.PhaseActive {
			c.usage.schedule(key)
		}
		after = time.Duration(plan.RequeueAfter)
		if g.unwatched && (after == 0 || after > unwatchedPoll) {
			after = unwatchedPoll
		}
		if plan.Empty() {
			// Settled: every write of this reconcile was decided on already.
			c.ledger.echoes.expect(key, rvs, last, from)
			c.cfg.Retry.UnsettledRateLimiter.Forget(key)
			break
		}
		if debug {
			log.Debug("Applying plan", "finalizer", plan.Finalizer, "disk", diskOp(plan), "server", serverOp(plan), "budget", budgetOp(plan),
				"status", plan.Status != nil, "events", len(plan.Events), "decision", round)
		}
		out, err := c.applier.applyPlan(ctx, in, g.owner, plan)
		rvs = append(rvs, out.written...)
		switch {
		case out.last != nil:
			last = out.last
		case out.releasing:
			// A write with no answer to carry on from (the VM may be gone): what an earlier
			// write returned is older than it.
			last = nil
			c.ledger.echoes.stale(key)
		}
		if err != nil {
			// The writes that went through are facts: the retry decides on the VM as the last
			// of them returned it, and their echoes bring nothing it will not see.
			c.ledger.echoes.expect(key, rvs, last, from)
			return out.after, err // a plan's own time to look again, carried past an error of its budget (applyPlan)
		}
		if out.releasing {
			c.ledger.echoes.released(key, vm.UID())
		}
		if becomesActive && passes > 0 {
			c.ledger.passes.active(key, passes, c.cfg.Report.Observer)
		}
		after = out.after
		if out.unkept {
			// The API server did not keep the status as it was written (applier.unkept), or
			// would not keep it, as it did not at this version before (notKept: not sent). A
			// CRD older than the controller prunes the status fields it lacks (a new field of
			// this version: apply its CRDs); the fields check refuses such a CRD at start,
			// unless it is not read (--watch-crd=false).
			c.warnUnkept(log)
		}
		if out.unkept && out.last != nil {
			// Deciding again on the answer would write the status again, and through the
			// main resource, where every such write is stored, its echo would bring the VM
			// back for ever. The next reconcile at the answer's version does not send it
			// either (notKept).
			c.ledger.echoes.expect(key, rvs, last, from)
			break
		}
		if out.last == nil && !out.releasing {
			// The plan wrote no VM: nothing more to decide on here, and the writes so far
			// were decided on already, as in a settled pass, so that the next reconcile
			// decides on them rather than on a cache that has yet to bring them back.
			c.ledger.echoes.expect(key, rvs, last, from)
			c.cfg.Retry.UnsettledRateLimiter.Forget(key)
			break
		}
		if out.last == nil {
			break // released
		}
		if round == maxDecisions {
			// This round's write is yet to be decided on: the next reconcile does, queued
			// now as new work, on the VM as the write returned it (noted with every write
			// of this reconcile, as a settled pass notes them: their echoes bring nothing,
			// and the cache, behind, yields to the write). Left to its echo, the VM came
			// back as a status update, backlog: a user's change half carried out waited
			// behind a start's whole list. Paced when it happens again before a reconcile
			// of the VM settles (requeueUnsettled).
			c.ledger.echoes.expect(key, rvs, last, from)
			c.requeueUnsettled(key)
			break
		}
		vm = last.view(c.cfg.VMs.Fields)
	}
	if w := c.ledger.expect.wait(key); w > 0 && (after == 0 || w < after) {
		after = w
	}
	if w := c.ledger.disks.wait(key); w > 0 && (after == 0 || w < after) {
		after = w
	}
	return after, nil
}

// requeueUnsettled queues again, as new work, the VM of key whose reconcile ran out of
// decisions: at once the first time, and after Retry.UnsettledRateLimiter's delay each next
// time in a row, until a reconcile of it settles (Forget).
func (c *Controller) requeueUnsettled(key cache.ObjectName) {
	limiter := c.cfg.Retry.UnsettledRateLimiter
	first := limiter.NumRequeues(key) == 0
	d := limiter.When(key)
	if first {
		c.queue.AddUrgent(key)
		return
	}
	c.queue.AddUrgentAfter(key, d)
}

// unwatchedPoll is how often a VM whose server the backend's watch does not show
// (backend.Server.Unwatched) is looked at again: nothing else brings it back.
const unwatchedPoll = time.Minute

func ownerOf(vm schema.VirtualMachine) backend.Owner {
	return backend.Owner{APIVersion: vm.APIVersion(), Kind: vm.Kind(), Namespace: vm.Namespace(), Name: vm.Name(), UID: vm.UID()}
}

func serverOp(p decision.Plan) string {
	if p.Server == nil {
		return ""
	}
	return string(p.Server.Op)
}

// diskOp is the plan's disk operation, "" for none: actions without an Event (recording a
// kind) show only here.
func diskOp(p decision.Plan) string {
	if p.Disk == nil {
		return ""
	}
	return string(p.Disk.Op)
}

// budgetOp is the plan's budget operation, "" for none.
func budgetOp(p decision.Plan) string {
	if p.Budget == nil {
		return ""
	}
	return string(p.Budget.Op)
}
