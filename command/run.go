// The run command: its configuration, and the controller's start from top to bottom: the
// clients, the cluster facts (facts.go), then the controller, its endpoints, and leader
// election.

package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/leader"
	"github.com/cloudnative-czs/vm-controller/metrics"
	"github.com/cloudnative-czs/vm-controller/reconcile"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// maxWorkers bounds --workers.
const maxWorkers = 10000

// runConfig is the run command's configuration.
type runConfig struct {
	clusterFlags
	resourceFlags
	accessFlags
	policyFlags
	rootDiskFlags

	Selector         string
	Workers          int
	Resync           time.Duration
	QPS              float64
	Burst            int
	HTTP2            bool
	RetryBaseDelay   time.Duration
	RetryMaxDelay    time.Duration
	RetryQPS         float64
	RetryBurst       int
	ShutdownTimeout  time.Duration
	ReconcileTimeout time.Duration
	LeaseName        string
	HolderIdentity   string
	LeaseDuration    time.Duration
	RenewDeadline    time.Duration
	RetryPeriod      time.Duration
	UsageThreshold   float64
	UsageMaxInterval time.Duration
	UsageQPS         float64
	UsageBurst       int
	Events           string
	MetricsAddr      string
	HealthAddr       string
	Pprof            bool
	logFlags

	// ServerPodSecurity is --server-pod-security: the securityContext of the server pods
	// (pods.PodSecurity).
	ServerPodSecurity string
}

func runCommand(c *runConfig) *cli.Command {
	flags := c.clusterFlags.flags()
	flags = append(flags,
		namespaceFlag(&c.Namespace, "watch VMs in this namespace only; empty: all namespaces"),
		&cli.StringFlag{Name: "selector", Usage: "manage only VMs matching this label selector (e.g. tier=prod)", EnvVars: env("SELECTOR"), Destination: &c.Selector},
	)
	flags = append(flags, c.resourceFlags.flags(schemaFileUsage)...)
	flags = append(flags,
		&cli.IntFlag{Name: "workers", Value: 16, Usage: "VMs reconciled in parallel, at most 10000 (16 keeps a burst at the API server's pace; see docs/dev/benchmarks.md)", EnvVars: env("WORKERS"), Destination: &c.Workers},
		&cli.DurationFlag{Name: "resync", Value: 10 * time.Minute, Usage: "how often the informers hand every object of their caches to their handlers again, from memory (no request to the API server); 0: never. It is no periodic reconcile of every VM: each VM's plan says when to look at it again, and what a broken watch missed comes with the watch's restart. A replay of a VM, pod, node, claim, StorageClass or PodDisruptionBudget is dropped as unchanged; one of an Event about a VM's claim while the claim is Pending queues the VM for a reconcile (docs/deploying.md)", EnvVars: env("RESYNC"), Destination: &c.Resync},
		&cli.Float64Flag{Name: "qps", Value: 0, Usage: "API requests per second, sustained, 0.01 to 1000000; 0: no client-side limit; API Priority and Fairness protects the server", EnvVars: env("QPS"), Destination: &c.QPS},
		&cli.IntFlag{Name: "burst", Value: 100, Usage: "API requests per second, in bursts (with --qps above 0)", EnvVars: env("BURST"), Destination: &c.Burst},
		&cli.BoolFlag{Name: "http2", Usage: "speak HTTP/2 to the API server, one multiplexed connection, as client-go does by default; default: HTTP/1.1, a connection per request in flight, with which a burst of VMs became Active sooner (see docs/deploying.md)", EnvVars: env("HTTP2"), Destination: &c.HTTP2},
		serverImageFlag(&c.ServerImage, "container image of server pods"),
		serverPodSecurityFlag(&c.ServerPodSecurity, serverPodSecurityUsage),
		watchNodesFlag(&c.WatchNodes, "watch nodes to report servers on lost nodes as Unknown, and to keep a running server whose replacement no node has room for (needs cluster-wide read access to nodes)"),
		watchCRDFlag(&c.WatchCRD, "check and follow the resource's CRD: say when it is deleted or stops serving the version, resume when it is back (needs read access to that CRD)"),
	)
	flags = append(flags, c.backoffFlags()...)
	flags = append(flags, c.stalledAfterFlag())
	flags = append(flags, c.evictionStrategyFlag())
	flags = append(flags, c.rootDiskFlag(rootDiskUsage))
	flags = append(flags,
		&cli.DurationFlag{Name: "retry-base-delay", Value: 5 * time.Millisecond, Usage: "first retry delay of a failed reconcile (or one that met a conflict); doubles per failure of the same VM", EnvVars: env("RETRY_BASE_DELAY"), Destination: &c.RetryBaseDelay},
		&cli.DurationFlag{Name: "retry-max-delay", Value: 1000 * time.Second, Usage: "longest retry delay of a failed reconcile", EnvVars: env("RETRY_MAX_DELAY"), Destination: &c.RetryMaxDelay},
		&cli.Float64Flag{Name: "retry-qps", Value: 10, Usage: "retries per second over all VMs (overall bucket), 0.01 to 1000000; a conflict's retry does not wait in it, only for its VM's backoff", EnvVars: env("RETRY_QPS"), Destination: &c.RetryQPS},
		&cli.IntFlag{Name: "retry-burst", Value: 100, Usage: "burst of the overall retry bucket", EnvVars: env("RETRY_BURST"), Destination: &c.RetryBurst},
		&cli.DurationFlag{Name: "reconcile-timeout", Value: time.Minute, Usage: "longest a reconcile may take, every API and backend call in it; one that hangs ends as a transient error and is retried with backoff", EnvVars: env("RECONCILE_TIMEOUT"), Destination: &c.ReconcileTimeout},
		&cli.DurationFlag{Name: "shutdown-timeout", Value: 30 * time.Second, Usage: "on SIGINT/SIGTERM, how long in-flight reconciles may take to finish", EnvVars: env("SHUTDOWN_TIMEOUT"), Destination: &c.ShutdownTimeout},
		leaderElectFlag(&c.LeaderElect, "run as one of several replicas: only the holder of a coordination.k8s.io Lease reconciles"),
		&cli.StringFlag{Name: "lease-name", Value: "vm-controller", Usage: "name of the leader Lease", EnvVars: env("LEASE_NAME"), Destination: &c.LeaseName},
		leaseNamespaceFlag(&c.LeaseNamespace, "namespace of the leader Lease; empty: the pod's namespace in a cluster, else the kubeconfig context's"),
		&cli.StringFlag{Name: "holder-identity", Usage: "this replica's name in the Lease, unique per process (two processes of one name both lead); empty: $POD_NAME or the host name, plus a random suffix", EnvVars: env("HOLDER_IDENTITY"), Destination: &c.HolderIdentity},
		&cli.DurationFlag{Name: "lease-duration", Value: 15 * time.Second, Usage: "how long a Lease lasts without renewal; a crashed leader is replaced after at most this", EnvVars: env("LEASE_DURATION"), Destination: &c.LeaseDuration},
		&cli.DurationFlag{Name: "renew-deadline", Value: 10 * time.Second, Usage: "how long the leader keeps trying to renew before it gives up leading", EnvVars: env("RENEW_DEADLINE"), Destination: &c.RenewDeadline},
		&cli.DurationFlag{Name: "retry-period", Value: 500 * time.Millisecond, Usage: "how often replicas try to acquire or renew the Lease (a standby polls every 1-2.2 periods, so this bounds how soon it takes over)", EnvVars: env("RETRY_PERIOD"), Destination: &c.RetryPeriod},
		usageIntervalFlag(&c.UsageInterval, "how often each Active VM's usage is sampled from metrics.k8s.io (±10% jitter); 0 turns usage reporting off"),
		&cli.Float64Flag{Name: "usage-threshold", Value: decision.DefaultUsagePolicy.Threshold, Usage: "relative change of cpu or memory usage worth a status write (0.1: 10%), if the change is also more than 10m of cpu or 4Mi of memory", EnvVars: env("USAGE_THRESHOLD"), Destination: &c.UsageThreshold},
		&cli.DurationFlag{Name: "usage-max-interval", Value: decision.DefaultUsagePolicy.MaxInterval, Usage: "longest time reported usage goes unwritten, even if it did not move (a new process counts from its first sample)", EnvVars: env("USAGE_MAX_INTERVAL"), Destination: &c.UsageMaxInterval},
		&cli.Float64Flag{Name: "usage-qps", Value: 20, Usage: "requests per second to metrics.k8s.io, sustained, 0.01 to 1000000 (a client of its own, so sampling never delays reconciles): one list of every server pod's usage per half --usage-interval (at least " + pods.UsageMaxAge(0).String() + "), whatever the number of VMs; one per sample where RBAC grants get but not list", EnvVars: env("USAGE_QPS"), Destination: &c.UsageQPS},
		&cli.IntFlag{Name: "usage-burst", Value: 40, Usage: "requests per second to metrics.k8s.io, in bursts", EnvVars: env("USAGE_BURST"), Destination: &c.UsageBurst},
		&cli.StringFlag{Name: "events", Value: "all", Usage: "which Events to record: all, or warnings (drops the Normal ones, such as CreatingServer and ServerReady, to spare the API server at many VMs)", EnvVars: env("EVENTS"), Destination: &c.Events},
		&cli.StringFlag{Name: "metrics-addr", Value: ":8080", Usage: "address of the Prometheus /metrics endpoint; empty disables", EnvVars: env("METRICS_ADDR"), Destination: &c.MetricsAddr},
		&cli.StringFlag{Name: "health-addr", Value: ":8081", Usage: "address of /healthz and /readyz; empty disables", EnvVars: env("HEALTH_ADDR"), Destination: &c.HealthAddr},
		&cli.BoolFlag{Name: "pprof", Usage: "also serve Go's runtime profiles under /debug/pprof/ on the metrics address", EnvVars: env("PPROF"), Destination: &c.Pprof},
	)
	flags = append(flags, c.logFlags.flags("text")...)
	return &cli.Command{
		Name:         "run",
		Usage:        "run the controller until SIGINT or SIGTERM",
		OnUsageError: usageError,
		Flags:        flags,
		Action:       action(c, noArgs, func(cc *cli.Context) error { return run(cc, *c) }),
	}
}

// Validate checks the flags that can be checked without reading a file or asking the
// cluster; each error names the flag.
func (c runConfig) Validate() error {
	if err := c.logFlags.validate(); err != nil {
		return err
	}
	gvr, err := c.gvr()
	if err != nil {
		return err
	}
	if err := c.validFieldMap(gvr.GroupVersion()); err != nil {
		return err
	}
	if err := c.accessFlags.validate(); err != nil {
		return err
	}
	if err := validSelector(c.Selector); err != nil {
		return err
	}
	for _, f := range []struct {
		name  string
		value int
	}{{"workers", c.Workers}, {"burst", c.Burst}, {"retry-burst", c.RetryBurst}, {"usage-burst", c.UsageBurst}} {
		if f.value < 1 {
			return fmt.Errorf("%s must be at least 1, got %d", flagRef(f.name, f.value), f.value)
		}
	}
	// Each worker is a goroutine started at once: far past what the API server keeps up
	// with, a count such as 100000000 would exhaust the memory before the first reconcile.
	if c.Workers > maxWorkers {
		return fmt.Errorf("%s must be at most %d, got %d", flagRef("workers", c.Workers), maxWorkers, c.Workers)
	}
	if c.QPS != 0 && !qpsInRange(c.QPS) {
		return fmt.Errorf("%s %g: want 0 (no client-side limit) or %s", flagRef("qps", c.QPS), c.QPS, qpsRange)
	}
	for _, f := range []struct {
		name  string
		value float64
	}{{"retry-qps", c.RetryQPS}, {"usage-qps", c.UsageQPS}} {
		if !qpsInRange(f.value) {
			return fmt.Errorf("%s %g: want %s", flagRef(f.name, f.value), f.value, qpsRange)
		}
	}
	if c.Resync < 0 {
		return fmt.Errorf("%s must not be negative", flagRef("resync", c.Resync))
	}
	if c.ShutdownTimeout < 0 {
		return fmt.Errorf("%s must not be negative, got %s", flagRef("shutdown-timeout", c.ShutdownTimeout), c.ShutdownTimeout)
	}
	if err := validServerPodSecurity(c.ServerPodSecurity); err != nil {
		return err
	}
	if c.Events != "all" && c.Events != "warnings" {
		return fmt.Errorf("%s %q: want all or warnings", flagRef("events", c.Events), c.Events)
	}
	if err := c.policyFlags.validate(); err != nil {
		return err
	}
	if err := c.rootDiskFlags.validate(); err != nil {
		return err
	}
	if c.ReconcileTimeout < time.Second {
		return fmt.Errorf("%s must be at least 1s, got %s", flagRef("reconcile-timeout", c.ReconcileTimeout), c.ReconcileTimeout)
	}
	if c.RetryBaseDelay <= 0 || c.RetryMaxDelay < c.RetryBaseDelay {
		return fmt.Errorf("%s must be positive and at most %s", flagRef("retry-base-delay", c.RetryBaseDelay), flagRef("retry-max-delay", c.RetryMaxDelay))
	}
	// Written so that a threshold of NaN (which strconv reads) fails it too.
	if c.UsageInterval < 0 || !(c.UsageThreshold >= 0) || c.UsageMaxInterval < c.UsageInterval {
		return fmt.Errorf("want %s >= 0, %s >= 0 and %s >= --usage-interval", flagRef("usage-interval", c.UsageInterval),
			flagRef("usage-threshold", c.UsageThreshold), flagRef("usage-max-interval", c.UsageMaxInterval))
	}
	// client-go's elector jitters each retry by up to a fifth and refuses, only once it starts,
	// a renew deadline that a jittered retry could pass.
	// client-go writes the Lease's duration to its record in whole seconds, cut down, and a
	// standby waits what the record says: 2.9s would let it lead 2s after the last renewal,
	// while a --renew-deadline of 2.5s still lets the old leader's writes out (the fence).
	if c.LeaseDuration%time.Second != 0 {
		return fmt.Errorf("%s must be a whole number of seconds (the Lease records it so), got %s", flagRef("lease-duration", c.LeaseDuration), c.LeaseDuration)
	}
	if l, r, p := c.LeaseDuration, c.RenewDeadline, c.RetryPeriod; p <= 0 || r <= time.Duration(leaderelection.JitterFactor*float64(p)) || l <= r {
		return fmt.Errorf("want %s > %s > %.1f x %s > 0, got %s, %s, %s", flagRef("lease-duration", l), flagRef("renew-deadline", r),
			leaderelection.JitterFactor, flagRef("retry-period", p), l, r, p)
	}
	if err := durationsAtMostAYear(namedDuration{"resync", c.Resync}, namedDuration{"retry-base-delay", c.RetryBaseDelay},
		namedDuration{"retry-max-delay", c.RetryMaxDelay}, namedDuration{"reconcile-timeout", c.ReconcileTimeout},
		namedDuration{"shutdown-timeout", c.ShutdownTimeout}, namedDuration{"lease-duration", c.LeaseDuration},
		namedDuration{"renew-deadline", c.RenewDeadline}, namedDuration{"retry-period", c.RetryPeriod},
		namedDuration{"usage-interval", c.UsageInterval}, namedDuration{"usage-max-interval", c.UsageMaxInterval}); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(c.LeaseName); len(errs) > 0 {
		return fmt.Errorf("%s %q: %s", flagRef("lease-name", c.LeaseName), c.LeaseName, strings.Join(errs, "; "))
	}
	for _, f := range []struct{ name, addr string }{{"metrics-addr", c.MetricsAddr}, {"health-addr", c.HealthAddr}} {
		if err := validAddr(f.addr); err != nil {
			return fmt.Errorf("%s %q: %w; want HOST:PORT, such as :8080, or empty for none", flagRef(f.name, f.addr), f.addr, err)
		}
	}
	return nil
}

// validAddr refuses an endpoint's address that no host could make a listener of: not
// HOST:PORT, or a port that is neither a number from 0 to 65535 (0: any free one) nor a
// service name net.Listen knows. Empty is valid: the endpoint is off. Before, such an address
// failed only once the controller had asked the cluster everything and started.
func validAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	// A number from 0 to 65535, or a service name (/etc/services), as net.Listen takes it.
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("port %q is neither a number from 0 to 65535 nor a known service name", port)
	}
	return nil
}

// run starts the controller with a validated configuration and runs it until a signal.
func run(cc *cli.Context, c runConfig) error {
	log, err := c.logFlags.setUp(cc.App.ErrWriter)
	if err != nil {
		return err
	}
	gvr, err := c.gvr()
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	ctx, stop := signal.NotifyContext(cc.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// A CRD whose schema no longer gives the field map chosen from it ends the run as a signal
	// does (the workers drain, a leader steps down), with that as its cause: run then fails,
	// and the restart chooses again (reconcile.CRD.Layout).
	ctx, relayout := context.WithCancelCause(ctx)
	defer relayout(nil)

	cfg, err := c.restConfig(cc.App.Version)
	if err != nil {
		return err
	}
	if !c.HTTP2 {
		http1(cfg)
	}
	limitQPS(cfg, c.QPS, c.Burst)
	if cfg.QPS > 0 {
		// One bucket for the VM, pod and events clients, so that --qps is what the
		// controller sends in all, not a limit per client (not the Lease's: newRunClients).
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}

	// The endpoints' ports are taken before the cluster is asked anything (listen), and served
	// once the controller is built; until then a connection waits in the listener's queue.
	// Unserved, they are run's to close; served, their servers'.
	metricsLn, err := listen("metrics", c.MetricsAddr)
	if err != nil {
		return err
	}
	healthLn, err := listen("health", c.HealthAddr)
	if err != nil {
		closeListener(metricsLn)
		return err
	}
	served := false
	defer func() {
		if !served {
			closeListener(metricsLn)
			closeListener(healthLn)
		}
	}()

	// What the cluster says, asked once: the field map (another group without --schema-file:
	// the CRD's schema chooses a built-in layout), then the checks, which must all pass.
	t, err := targetOf(c.clusterFlags, c.resourceFlags, c.accessFlags, c.rootDiskFlags, gvr)
	if err != nil {
		return err
	}
	checkClients, err := newAPIClients(checked(cfg))
	if err != nil {
		return err
	}
	f, err := gather(ctx, checkClients, cfg.Host, t)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if f.layout != nil {
		log.Info("Chose the field map", "resource", gvr.String(), "why", f.layout.Why)
		if !t.watchCRD {
			// Nothing follows the CRD: a change of its schema that gives another layout
			// goes unseen, and the controller reads its VMs the old way until restarted.
			log.Warn("CRD not followed (--watch-crd=false); restart the controller after changing the CRD's schema", "crd", crds.Name(gvr))
		}
	}
	if err := f.failures(); err != nil {
		return err
	}
	logWarnings(f, log)
	noStatus := statusRoute(f, t, log)

	// Before any workqueue is built or the controller makes a request: client-go takes its
	// metrics hooks once.
	m := metrics.New()
	m.SetReconcileTimeout(c.ReconcileTimeout)
	// A leader's writes are fenced by the freshness of its Lease (package leader): one paused
	// past the Lease that resumes after another took over writes nothing it decided on before.
	var wf *leader.Fence
	var fenceCheck func() error
	if c.LeaderElect {
		wf = leader.NewFence(c.RenewDeadline, m.FencedWrite)
		fenceCheck = wf.Check
	}
	cl, err := newRunClients(cfg, c.UsageQPS, c.UsageBurst, wf)
	if err != nil {
		return err
	}
	// Events go over protobuf: two Event creates per VM by default, each decoded and
	// answered by the API server, which reads and writes protobuf without JSON's reflection.
	// A namespace being deleted refuses them: they are dropped there, not sent one by one.
	// They are sent until after the drain, those of the last writes included (events.go).
	broadcaster, err := startEvents(reconcile.SkipTerminatingNamespaces(&events.EventSinkImpl{Interface: cl.proto.EventsV1()}, log, time.Now))
	if err != nil {
		return fmt.Errorf("send events: %w", err)
	}
	defer broadcaster.flush(eventsFlushTimeout)
	var recorder events.EventRecorder = broadcaster.NewRecorder(scheme.Scheme, "vm-controller")
	if c.Events == "warnings" {
		recorder = reconcile.WarningsOnly(recorder)
	}

	// A VM's retries wait for its own backoff and the overall bucket; a conflict for its own
	// backoff alone (reconcile.Retry.ConflictRateLimiter), counted with its other failures.
	perVM := workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](c.RetryBaseDelay, c.RetryMaxDelay)
	limiter := workqueue.NewTypedMaxOfRateLimiter(perVM,
		&workqueue.TypedBucketRateLimiter[cache.ObjectName]{Limiter: rate.NewLimiter(rate.Limit(c.RetryQPS), c.RetryBurst)},
	)
	podsCfg := c.podsConfig()
	podsCfg.Client, podsCfg.REST, podsCfg.UsageClient, podsCfg.Discovery, podsCfg.Log = cl.proto, cl.podWatch.CoreV1().RESTClient(), cl.usage, cl.kube.Discovery(), log
	ctrl := reconcile.New(reconcile.Config{
		VMs: reconcile.Source{Client: cl.dynamic, REST: cl.vmREST, WatchREST: cl.vmWatch, GVR: gvr, Fields: f.fields,
			Namespace: c.Namespace, Selector: c.Selector, Resync: c.Resync},
		CRD: reconcile.CRD{Watch: c.WatchCRD, OnServed: m.SetServed, Layout: f.layout, OnLayoutChanged: relayout,
			// Without the subresource, status goes through the main resource.
			NoStatusSubresource: noStatus},
		Backend:    pods.New(podsCfg),
		Policy:     c.policy(c.rootDiskFlags),
		Usage:      decision.UsagePolicy{Interval: c.UsageInterval, Threshold: c.UsageThreshold, MaxInterval: c.UsageMaxInterval},
		Retry:      reconcile.Retry{RateLimiter: limiter, ConflictRateLimiter: perVM, ReconcileTimeout: c.ReconcileTimeout},
		Report:     reconcile.Report{Recorder: recorder, Logger: log, Observer: m, UsageObserver: m},
		Namespaces: reconcile.NewNamespaceWatch(cl.proto, c.Namespace, log),
		Fence:      fenceCheck,
	})
	m.CountPhases(ctrl.PhaseCounts)
	m.CountReasons(ctrl.ReasonCounts)
	log.Info("Starting vm-controller", "version", cc.App.Version, "host", cfg.Host, "resource", gvr.String(),
		"namespace", c.Namespace, "workers", c.Workers, "leaderElect", c.LeaderElect)
	if err := ctrl.Start(ctx); err != nil {
		return err
	}

	// A leader whose renewals are stuck past the lease (plus slack) fails its liveness probe.
	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	alive := func(*http.Request) error { return nil }
	if c.LeaderElect {
		alive = watchdog.Check
	}
	serve(ctx, "metrics", metricsLn, metricsMux(m.Handler(), c.Pprof), log)
	serve(ctx, "health", healthLn, healthMux(alive, ctrl), log)
	served = true

	work := thenFlush(func(ctx context.Context) error {
		return ctrl.RunWorkers(ctx, c.Workers, c.ShutdownTimeout)
	}, broadcaster)
	if c.LeaderElect {
		err = leader.Lead(ctx, cl.lease, c.election(t.leaseNamespace, wf), leader.Callbacks{SetLeader: m.SetLeader, Healthz: watchdog}, log, work)
	} else {
		m.SetLeader(true)
		err = work(ctx)
	}
	if err != nil {
		return err
	}
	if changed := layoutChanged(ctx); changed != nil {
		return changed
	}
	log.Info("Stopped")
	return nil
}

// closeListener closes ln, one of listen's that was not served; nil is none.
func closeListener(ln net.Listener) {
	if ln != nil {
		_ = ln.Close()
	}
}

// serverPodSecurityUsage is what --server-pod-security does.
const serverPodSecurityUsage = "securityContext of the server pods made from now on: none (as the image says, root if it says nothing; the pods meet the baseline Pod Security Standard) or restricted (runAsNonRoot, seccomp RuntimeDefault, no privilege escalation, every capability dropped: the pods a namespace enforcing restricted admits; the image must run as a numeric user other than 0). A running server keeps its own and is not replaced for a change; kubectl vm restart gives a VM the new one (docs/deploying.md)"

// podsConfig is the pod backend's configuration of the flags; run adds its clients.
func (c runConfig) podsConfig() pods.Config {
	return pods.Config{Namespace: c.Namespace, Resync: c.Resync, WatchNodes: c.WatchNodes, Disks: true, ClaimsOnly: !c.claims(), Budgets: true,
		PodSecurity: pods.PodSecurity(c.ServerPodSecurity), UsageMaxAge: pods.UsageMaxAge(c.UsageInterval)}
}

// layoutChanged is run's error when it ended because the CRD no longer gives the field map
// chosen from it (reconcile.CRD.OnLayoutChanged), else nil: a failure, so that the
// process exits non-zero and its Deployment restarts it, to choose again.
func layoutChanged(ctx context.Context) error {
	var changed *crds.LayoutChanged
	if !errors.As(context.Cause(ctx), &changed) {
		return nil
	}
	return fmt.Errorf("%w; exiting so that a restart chooses it again", changed)
}

// logWarnings logs, once the preflight passed, each check that passed with a caveat (a WARN
// row of check), one line per check: run starts, and the caveat is in its log from the
// start, not only once it bites (list on pod metrics denied was first said at the leader's
// first list of usage). A run that does not start says only what stops it.
func logWarnings(f facts, log *slog.Logger) {
	for _, r := range f.checks {
		if r.warn {
			log.Warn("Start-up check passed with a warning", "check", r.name, "detail", r.detail)
		}
	}
}

// statusRoute says whether the controller writes status through the main resource
// (reconcile.CRD.NoStatusSubresource), from the CRD the facts read, and logs why. A CRD
// that is not read (--watch-crd=false, whose RBAC grants no access to it) keeps the
// subresource.
func statusRoute(f facts, t target, log *slog.Logger) (noStatus bool) {
	switch {
	case !t.watchCRD:
		log.Info("CRD not read (--watch-crd=false); writing status through the status subresource", "crd", crds.Name(t.gvr), "version", t.gvr.Version)
	case f.noStatus:
		log.Warn("Status subresource missing; writing status through the main resource", "crd", crds.Name(t.gvr), "version", t.gvr.Version)
	}
	return f.noStatus
}

// The metrics record passes to Active (reconcile.PassObserver) as well as reconciles.
var _ reconcile.PassObserver = (*metrics.Metrics)(nil)
