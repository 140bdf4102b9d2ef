// The run command: flags, configuration, and the controller's construction.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/crd"
	"github.com/cloudnative-czs/vm-controller/metrics"
	"github.com/cloudnative-czs/vm-controller/reconcile"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
)

// runConfig is the run command's configuration.
type runConfig struct {
	clusterFlags
	resourceFlags
	accessFlags
	policyFlags

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
	LogLevel         string
	LogFormat        string
}

func runCommand(c *runConfig) *cli.Command {
	flags := c.clusterFlags.flags()
	flags = append(flags,
		namespaceFlag(&c.Namespace, "watch VMs in this namespace only; empty: all namespaces"),
		&cli.StringFlag{Name: "selector", Usage: "manage only VMs matching this label selector (e.g. tier=prod)", EnvVars: env("SELECTOR"), Destination: &c.Selector},
	)
	flags = append(flags, c.resourceFlags.flags(schemaFileUsage)...)
	flags = append(flags,
		&cli.IntFlag{Name: "workers", Value: 16, Usage: "VMs reconciled in parallel (16 keeps a burst at the API server's pace; see docs/dev/benchmarks.md)", EnvVars: env("WORKERS"), Destination: &c.Workers},
		&cli.DurationFlag{Name: "resync", Value: 10 * time.Minute, Usage: "informer resync period (0 disables)", EnvVars: env("RESYNC"), Destination: &c.Resync},
		&cli.Float64Flag{Name: "qps", Value: 0, Usage: "API requests per second, sustained; 0: no client-side limit; API Priority and Fairness protects the server", EnvVars: env("QPS"), Destination: &c.QPS},
		&cli.IntFlag{Name: "burst", Value: 100, Usage: "API requests per second, in bursts (with --qps above 0)", EnvVars: env("BURST"), Destination: &c.Burst},
		&cli.BoolFlag{Name: "http2", Usage: "speak HTTP/2 to the API server, one multiplexed connection, as client-go does by default; default: HTTP/1.1, a connection per request in flight, with which a burst of VMs became Active sooner (see docs/deploying.md)", EnvVars: env("HTTP2"), Destination: &c.HTTP2},
		c.serverImageFlag("container image of server pods"),
		watchNodesFlag(&c.WatchNodes, "watch nodes to report servers on lost nodes as Unknown (needs cluster-wide read access to nodes)"),
		watchCRDFlag(&c.WatchCRD, "check and follow the resource's CRD: say when it is deleted or stops serving the version, resume when it is back (needs read access to that CRD)"),
	)
	flags = append(flags, c.backoffFlags()...)
	flags = append(flags,
		&cli.DurationFlag{Name: "retry-base-delay", Value: 5 * time.Millisecond, Usage: "first retry delay of a failed reconcile; doubles per failure of the same VM", EnvVars: env("RETRY_BASE_DELAY"), Destination: &c.RetryBaseDelay},
		&cli.DurationFlag{Name: "retry-max-delay", Value: 1000 * time.Second, Usage: "longest retry delay of a failed reconcile", EnvVars: env("RETRY_MAX_DELAY"), Destination: &c.RetryMaxDelay},
		&cli.Float64Flag{Name: "retry-qps", Value: 10, Usage: "retries per second over all VMs (overall bucket)", EnvVars: env("RETRY_QPS"), Destination: &c.RetryQPS},
		&cli.IntFlag{Name: "retry-burst", Value: 100, Usage: "burst of the overall retry bucket", EnvVars: env("RETRY_BURST"), Destination: &c.RetryBurst},
		&cli.DurationFlag{Name: "shutdown-timeout", Value: 30 * time.Second, Usage: "on SIGINT/SIGTERM, how long in-flight reconciles may take to finish", EnvVars: env("SHUTDOWN_TIMEOUT"), Destination: &c.ShutdownTimeout},
		leaderElectFlag(&c.LeaderElect, "run as one of several replicas: only the holder of a coordination.k8s.io Lease reconciles"),
		&cli.StringFlag{Name: "lease-name", Value: "vm-controller", Usage: "name of the leader Lease", EnvVars: env("LEASE_NAME"), Destination: &c.LeaseName},
		leaseNamespaceFlag(&c.LeaseNamespace, "namespace of the leader Lease; empty: the pod's namespace in a cluster, else the kubeconfig context's"),
		&cli.StringFlag{Name: "holder-identity", Usage: "this replica's name in the Lease; empty: $POD_NAME or the host name, plus a random suffix", EnvVars: env("HOLDER_IDENTITY"), Destination: &c.HolderIdentity},
		&cli.DurationFlag{Name: "lease-duration", Value: 15 * time.Second, Usage: "how long a Lease lasts without renewal; a crashed leader is replaced after at most this", EnvVars: env("LEASE_DURATION"), Destination: &c.LeaseDuration},
		&cli.DurationFlag{Name: "renew-deadline", Value: 10 * time.Second, Usage: "how long the leader keeps trying to renew before it gives up leading", EnvVars: env("RENEW_DEADLINE"), Destination: &c.RenewDeadline},
		&cli.DurationFlag{Name: "retry-period", Value: 500 * time.Millisecond, Usage: "how often replicas try to acquire or renew the Lease (a standby polls every 1-2.2 periods, so this bounds how soon it takes over)", EnvVars: env("RETRY_PERIOD"), Destination: &c.RetryPeriod},
		usageIntervalFlag(&c.UsageInterval, "how often each Active VM's usage is sampled from metrics.k8s.io (±10% jitter); 0 turns usage reporting off"),
		&cli.Float64Flag{Name: "usage-threshold", Value: decision.DefaultUsagePolicy.Threshold, Usage: "relative change of cpu or memory usage worth a status write (0.1: 10%)", EnvVars: env("USAGE_THRESHOLD"), Destination: &c.UsageThreshold},
		&cli.DurationFlag{Name: "usage-max-interval", Value: decision.DefaultUsagePolicy.MaxInterval, Usage: "longest time reported usage goes unwritten, even if it did not move", EnvVars: env("USAGE_MAX_INTERVAL"), Destination: &c.UsageMaxInterval},
		&cli.Float64Flag{Name: "usage-qps", Value: 20, Usage: "usage samples per second, sustained (a client of its own, so sampling never delays reconciles)", EnvVars: env("USAGE_QPS"), Destination: &c.UsageQPS},
		&cli.IntFlag{Name: "usage-burst", Value: 40, Usage: "usage samples per second, in bursts", EnvVars: env("USAGE_BURST"), Destination: &c.UsageBurst},
		&cli.StringFlag{Name: "events", Value: "all", Usage: "which Events to record: all, or warnings (drops the Normal ones, such as CreatingServer and ServerReady, to spare the API server at many VMs)", EnvVars: env("EVENTS"), Destination: &c.Events},
		&cli.StringFlag{Name: "metrics-addr", Value: ":8080", Usage: "address of the Prometheus /metrics endpoint; empty disables", EnvVars: env("METRICS_ADDR"), Destination: &c.MetricsAddr},
		&cli.StringFlag{Name: "health-addr", Value: ":8081", Usage: "address of /healthz and /readyz; empty disables", EnvVars: env("HEALTH_ADDR"), Destination: &c.HealthAddr},
		&cli.BoolFlag{Name: "pprof", Usage: "also serve Go's runtime profiles under /debug/pprof/ on the metrics address", EnvVars: env("PPROF"), Destination: &c.Pprof},
		logLevelFlag(&c.LogLevel),
		&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json", EnvVars: env("LOG_FORMAT"), Destination: &c.LogFormat},
	)
	return &cli.Command{
		Name:         "run",
		Usage:        "run the controller until SIGINT or SIGTERM",
		OnUsageError: usageError,
		Flags:        flags,
		Action: func(ctx *cli.Context) error {
			if err := noArgs(ctx); err != nil {
				return err
			}
			if err := c.Validate(); err != nil {
				return cli.Exit(err.Error(), 2)
			}
			return run(*c)
		},
	}
}

// Validate checks the flags that can be checked without reading a file or asking the
// cluster; each error names the flag.
func (c runConfig) Validate() error {
	if _, err := newLogger(io.Discard, c.LogLevel, c.LogFormat); err != nil {
		return err
	}
	if _, err := c.gvr(); err != nil {
		return err
	}
	if err := c.accessFlags.validate(); err != nil {
		return err
	}
	if _, err := labels.Parse(c.Selector); err != nil {
		return fmt.Errorf("--selector: %w", err)
	}
	for _, f := range []struct {
		name  string
		value int
	}{{"workers", c.Workers}, {"burst", c.Burst}, {"retry-burst", c.RetryBurst}} {
		if f.value < 1 {
			return fmt.Errorf("--%s must be at least 1, got %d", f.name, f.value)
		}
	}
	if c.QPS < 0 {
		return fmt.Errorf("--qps must not be negative, got %g", c.QPS)
	}
	if c.RetryQPS <= 0 {
		return fmt.Errorf("--retry-qps must be greater than 0, got %g", c.RetryQPS)
	}
	if c.Resync < 0 {
		return fmt.Errorf("--resync must not be negative")
	}
	if c.Events != "all" && c.Events != "warnings" {
		return fmt.Errorf("--events %q: want all or warnings", c.Events)
	}
	if err := c.policyFlags.validate(); err != nil {
		return err
	}
	if c.RetryBaseDelay <= 0 || c.RetryMaxDelay < c.RetryBaseDelay {
		return fmt.Errorf("--retry-base-delay must be positive and at most --retry-max-delay")
	}
	if c.UsageInterval < 0 || c.UsageThreshold < 0 || c.UsageMaxInterval < c.UsageInterval {
		return fmt.Errorf("want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval")
	}
	if c.UsageQPS <= 0 || c.UsageBurst < 1 {
		return fmt.Errorf("--usage-qps must be greater than 0 and --usage-burst at least 1")
	}
	if l, r, p := c.LeaseDuration, c.RenewDeadline, c.RetryPeriod; p <= 0 || r <= p || l <= r {
		return fmt.Errorf("want --lease-duration > --renew-deadline > --retry-period > 0, got %s, %s, %s", l, r, p)
	}
	return nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	l, err := parseLogLevel(level)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
}

// run starts the controller with a validated configuration and runs it until a signal.
func run(c runConfig) error {
	log, err := newLogger(os.Stderr, c.LogLevel, c.LogFormat)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	gvr, err := c.gvr()
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	slog.SetDefault(log)
	klog.SetSlogLogger(log) // client-go's own logs go through the same handler

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cfg, err := c.restConfig()
	if err != nil {
		return err
	}
	if !c.HTTP2 {
		http1(cfg)
	}
	limitQPS(cfg, c.QPS, c.Burst)
	if cfg.QPS > 0 {
		// One bucket for the VM, pod and events clients, so that --qps is what the
		// controller sends in all, not a limit per client.
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	// Another group without --schema-file: the CRD's schema chooses a built-in layout.
	fields, why, err := c.clusterFields(ctx, cfg, gvr)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if why != "" {
		log.Info("Chose the field map", "resource", gvr.String(), "why", why)
	}
	target, err := targetOf(c.clusterFlags, c.accessFlags, gvr, fields)
	if err != nil {
		return err
	}
	if err := preflight(ctx, cfg, target); err != nil {
		return err
	}
	// Before any workqueue or client is built: client-go takes its metrics hooks once.
	m := metrics.New()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	noStatus := statusSubresourceMissing(ctx, client, gvr, c.WatchCRD, log)
	vmREST, err := vmcache.RESTClientFor(cfg)
	if err != nil {
		return err
	}
	vmWatch, err := vmcache.RESTClientFor(unlimited(cfg))
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	// Pods, nodes and Events go over protobuf: a typed informer decodes pods and nodes several
	// times faster than JSON (Events: see the broadcaster).
	protoCfg := rest.CopyConfig(cfg)
	protoCfg.ContentType = "application/vnd.kubernetes.protobuf"
	protoCfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	protoClient, err := kubernetes.NewForConfig(protoCfg)
	if err != nil {
		return fmt.Errorf("protobuf client: %w", err)
	}
	// The VM and pod watches stream over clients of their own without the rate limiter: a
	// watch is not rate limited in client-go (Request.Watch), and a watch opened behind a
	// burst of writes would leave the cache behind.
	podWatch, err := kubernetes.NewForConfig(unlimited(protoCfg))
	if err != nil {
		return fmt.Errorf("pod watch client: %w", err)
	}
	usageCfg := rest.CopyConfig(cfg)
	usageCfg.RateLimiter = nil // a bucket of its own
	limitQPS(usageCfg, c.UsageQPS, c.UsageBurst)
	usageClient, err := dynamic.NewForConfig(usageCfg)
	if err != nil {
		return fmt.Errorf("usage client: %w", err)
	}
	// Events go over protobuf as well: two Event creates per VM by default, each decoded and
	// answered by the API server, which reads and writes protobuf without JSON's reflection.
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: protoClient.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	defer broadcaster.Shutdown()

	var recorder events.EventRecorder = broadcaster.NewRecorder(scheme.Scheme, "vm-controller")
	if c.Events == "warnings" {
		recorder = reconcile.WarningsOnly(recorder)
	}

	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](c.RetryBaseDelay, c.RetryMaxDelay),
		&workqueue.TypedBucketRateLimiter[cache.ObjectName]{Limiter: rate.NewLimiter(rate.Limit(c.RetryQPS), c.RetryBurst)},
	)
	ctrl := reconcile.New(reconcile.Config{
		Client:    client,
		REST:      vmREST,
		WatchREST: vmWatch,
		GVR:       gvr,
		Fields:    fields,
		Namespace: c.Namespace,
		Selector:  c.Selector,
		Resync:    c.Resync,
		Backend: pods.New(pods.Config{Client: protoClient, REST: podWatch.CoreV1().RESTClient(), Namespace: c.Namespace, Resync: c.Resync,
			WatchNodes: c.WatchNodes, UsageClient: usageClient, Discovery: kube.Discovery()}),
		Policy:        c.policy(),
		Recorder:      recorder,
		Logger:        log,
		RateLimiter:   limiter,
		Observer:      m,
		WatchCRD:      c.WatchCRD,
		OnServed:      m.SetServed,
		Usage:         decision.UsagePolicy{Interval: c.UsageInterval, Threshold: c.UsageThreshold, MaxInterval: c.UsageMaxInterval},
		UsageObserver: m,
		// Without the subresource, status goes through the main resource.
		NoStatusSubresource: noStatus,
	})
	m.CountPhases(ctrl.PhaseCounts)
	log.Info("Starting vm-controller", "version", buildVersion(), "host", cfg.Host, "resource", gvr.String(),
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
	if err := serve(ctx, "metrics", c.MetricsAddr, metricsMux(m.Handler(), c.Pprof), log); err != nil {
		return err
	}
	if err := serve(ctx, "health", c.HealthAddr, healthMux(alive, ctrl.HasSynced), log); err != nil {
		return err
	}

	work := func(ctx context.Context) error {
		return ctrl.RunWorkers(ctx, c.Workers, c.ShutdownTimeout)
	}
	if c.LeaderElect {
		e := election{name: c.LeaseName, namespace: target.leaseNamespace, identity: c.HolderIdentity,
			lease: c.LeaseDuration, renew: c.RenewDeadline, retry: c.RetryPeriod}
		if e.identity == "" {
			e.identity = defaultIdentity()
		}
		err = lead(ctx, kube, e, leaderCallbacks{setLeader: m.SetLeader, healthz: watchdog}, log, work)
	} else {
		m.SetLeader(true)
		err = work(ctx)
	}
	if err != nil {
		return err
	}
	log.Info("Stopped")
	return nil
}

// statusSubresourceMissing reads the resource's CRD and reports whether its version lacks
// the /status subresource, so that the controller writes status through the main resource
// instead (reconcile.Config.NoStatusSubresource). A CRD that is not read (--watch-crd=false,
// whose RBAC grants no access to it) or cannot be read keeps the subresource, as before, and
// the log says so.
func statusSubresourceMissing(ctx context.Context, client dynamic.Interface, gvr k8sschema.GroupVersionResource, read bool, log *slog.Logger) bool {
	name := crd.Name(gvr)
	if !read {
		log.Info("CRD not read (--watch-crd=false); writing status through the status subresource", "crd", name, "version", gvr.Version)
		return false
	}
	u, err := client.Resource(crd.GVR).Get(ctx, name, metav1.GetOptions{})
	var def []byte
	if err == nil {
		def, err = json.Marshal(u.Object)
	}
	if err == nil {
		err = crd.Served(def, gvr.Version) // the version is there: what follows is about it
	}
	if err != nil {
		log.Warn("Cannot read the CRD; writing status through the status subresource", "crd", name, "version", gvr.Version, "error", err)
		return false
	}
	if crd.StatusSubresource(def, gvr.Version) != nil {
		log.Warn("Status subresource missing; writing status through the main resource", "crd", name, "version", gvr.Version)
		return true
	}
	return false
}

// The metrics record passes to Active (reconcile.PassObserver) as well as reconciles.
var _ reconcile.PassObserver = (*metrics.Metrics)(nil)
