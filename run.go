// The run command: flags, configuration, and the controller's construction.

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/labels"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/metrics"
	"github.com/cloudnative-czs/vm-controller/reconcile"
	"github.com/cloudnative-czs/vm-controller/schema"
)

func env(name string) []string { return []string{"VMC_" + name} }

func runCommand() *cli.Command {
	return &cli.Command{
		Name:         "run",
		Usage:        "run the controller until SIGINT or SIGTERM",
		OnUsageError: usageError,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig file; empty: $KUBECONFIG, ~/.kube/config, or in-cluster config", EnvVars: []string{"VMC_KUBECONFIG", "KUBECONFIG"}},
			&cli.StringFlag{Name: "context", Usage: "kubeconfig context to use; empty: the current context", EnvVars: env("CONTEXT")},
			&cli.StringFlag{Name: "namespace", Usage: "watch VMs in this namespace only; empty: all namespaces", EnvVars: env("NAMESPACE")},
			&cli.StringFlag{Name: "selector", Usage: "manage only VMs matching this label selector (e.g. tier=prod)", EnvVars: env("SELECTOR")},
			&cli.StringFlag{Name: "api-version", Value: schema.DefaultAPIVersion, Usage: "group/version of the VirtualMachine resource", EnvVars: env("API_VERSION")},
			&cli.StringFlag{Name: "resource", Value: schema.DefaultResource, Usage: "plural resource name of the VirtualMachine resource", EnvVars: env("RESOURCE")},
			schemaFileFlag(),
			&cli.IntFlag{Name: "workers", Value: 4, Usage: "VMs reconciled in parallel", EnvVars: env("WORKERS")},
			&cli.DurationFlag{Name: "resync", Value: 10 * time.Minute, Usage: "informer resync period (0 disables)", EnvVars: env("RESYNC")},
			&cli.Float64Flag{Name: "qps", Value: 50, Usage: "API requests per second, sustained", EnvVars: env("QPS")},
			&cli.IntFlag{Name: "burst", Value: 100, Usage: "API requests per second, in bursts", EnvVars: env("BURST")},
			&cli.StringFlag{Name: "server-image", Value: reconcile.DefaultPolicy.DefaultImage, Usage: "container image of server pods", EnvVars: env("SERVER_IMAGE")},
			&cli.BoolFlag{Name: "watch-nodes", Value: true, Usage: "watch nodes to report servers on lost nodes as Unknown (needs cluster-wide read access to nodes)", EnvVars: env("WATCH_NODES")},
			&cli.BoolFlag{Name: "watch-crd", Value: true, Usage: "check and follow the resource's CRD: say when it is deleted or stops serving the version, resume when it is back (needs read access to that CRD)", EnvVars: env("WATCH_CRD")},
			&cli.DurationFlag{Name: "restart-backoff", Value: reconcile.DefaultPolicy.RestartBackoff, Usage: "wait before replacing a failed server; doubles with each consecutive failure", EnvVars: env("RESTART_BACKOFF")},
			&cli.DurationFlag{Name: "max-restart-backoff", Value: reconcile.DefaultPolicy.MaxRestartBackoff, Usage: "longest wait before replacing a failed server", EnvVars: env("MAX_RESTART_BACKOFF")},
			&cli.DurationFlag{Name: "retry-base-delay", Value: 5 * time.Millisecond, Usage: "first retry delay of a failed reconcile; doubles per failure of the same VM", EnvVars: env("RETRY_BASE_DELAY")},
			&cli.DurationFlag{Name: "retry-max-delay", Value: 1000 * time.Second, Usage: "longest retry delay of a failed reconcile", EnvVars: env("RETRY_MAX_DELAY")},
			&cli.Float64Flag{Name: "retry-qps", Value: 10, Usage: "retries per second over all VMs (overall bucket)", EnvVars: env("RETRY_QPS")},
			&cli.IntFlag{Name: "retry-burst", Value: 100, Usage: "burst of the overall retry bucket", EnvVars: env("RETRY_BURST")},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: 30 * time.Second, Usage: "on SIGINT/SIGTERM, how long in-flight reconciles may take to finish", EnvVars: env("SHUTDOWN_TIMEOUT")},
			&cli.BoolFlag{Name: "leader-elect", Usage: "run as one of several replicas: only the holder of a coordination.k8s.io Lease reconciles", EnvVars: env("LEADER_ELECT")},
			&cli.StringFlag{Name: "lease-name", Value: "vm-controller", Usage: "name of the leader Lease", EnvVars: env("LEASE_NAME")},
			&cli.StringFlag{Name: "lease-namespace", Usage: "namespace of the leader Lease; empty: the pod's namespace in a cluster, else the kubeconfig context's", EnvVars: env("LEASE_NAMESPACE")},
			&cli.StringFlag{Name: "holder-identity", Usage: "this replica's name in the Lease; empty: $POD_NAME or the host name, plus a random suffix", EnvVars: env("HOLDER_IDENTITY")},
			&cli.DurationFlag{Name: "lease-duration", Value: 15 * time.Second, Usage: "how long a Lease lasts without renewal; a crashed leader is replaced after at most this", EnvVars: env("LEASE_DURATION")},
			&cli.DurationFlag{Name: "renew-deadline", Value: 10 * time.Second, Usage: "how long the leader keeps trying to renew before it gives up leading", EnvVars: env("RENEW_DEADLINE")},
			&cli.DurationFlag{Name: "retry-period", Value: 500 * time.Millisecond, Usage: "how often replicas try to acquire or renew the Lease (a standby polls every 1-2.2 periods, so this bounds how soon it takes over)", EnvVars: env("RETRY_PERIOD")},
			&cli.DurationFlag{Name: "usage-interval", Value: reconcile.DefaultUsagePolicy.Interval, Usage: "how often each Active VM's usage is sampled from metrics.k8s.io (±10% jitter); 0 turns usage reporting off", EnvVars: env("USAGE_INTERVAL")},
			&cli.Float64Flag{Name: "usage-threshold", Value: reconcile.DefaultUsagePolicy.Threshold, Usage: "relative change of cpu or memory usage worth a status write (0.1: 10%)", EnvVars: env("USAGE_THRESHOLD")},
			&cli.DurationFlag{Name: "usage-max-interval", Value: reconcile.DefaultUsagePolicy.MaxInterval, Usage: "longest time reported usage goes unwritten, even if it did not move", EnvVars: env("USAGE_MAX_INTERVAL")},
			&cli.Float64Flag{Name: "usage-qps", Value: 20, Usage: "usage samples per second, sustained (a client of its own, so sampling never delays reconciles)", EnvVars: env("USAGE_QPS")},
			&cli.IntFlag{Name: "usage-burst", Value: 40, Usage: "usage samples per second, in bursts", EnvVars: env("USAGE_BURST")},
			&cli.StringFlag{Name: "events", Value: "all", Usage: "which Events to record: all, or warnings (drops the Normal ones, such as CreatingServer and ServerReady, to spare the API server at many VMs)", EnvVars: env("EVENTS")},
			&cli.StringFlag{Name: "metrics-addr", Value: ":8080", Usage: "address of the Prometheus /metrics endpoint; empty disables", EnvVars: env("METRICS_ADDR")},
			&cli.StringFlag{Name: "health-addr", Value: ":8081", Usage: "address of /healthz and /readyz; empty disables", EnvVars: env("HEALTH_ADDR")},
			&cli.BoolFlag{Name: "pprof", Usage: "also serve Go's runtime profiles under /debug/pprof/ on the metrics address", EnvVars: env("PPROF")},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: env("LOG_LEVEL")},
			&cli.StringFlag{Name: "log-format", Value: "text", Usage: "text or json", EnvVars: env("LOG_FORMAT")},
		},
		Action: run,
	}
}

// options are the validated flags of run.
type options struct {
	gvr    k8sschema.GroupVersionResource
	fields schema.Fields
	logger *slog.Logger
}

func parseOptions(c *cli.Context) (options, error) {
	var o options
	logger, err := newLogger(os.Stderr, c.String("log-level"), c.String("log-format"))
	if err != nil {
		return o, err
	}
	o.logger = logger
	if o.gvr, err = schema.ParseGVR(c.String("api-version"), c.String("resource")); err != nil {
		return o, err
	}
	if o.fields, err = loadFields(c, o.gvr.GroupVersion()); err != nil {
		return o, err
	}
	if ns := c.String("namespace"); ns != "" {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return o, fmt.Errorf("--namespace %q: %s", ns, strings.Join(errs, "; "))
		}
	}
	if _, err := labels.Parse(c.String("selector")); err != nil {
		return o, fmt.Errorf("--selector: %w", err)
	}
	for _, n := range []string{"workers", "burst", "retry-burst"} {
		if c.Int(n) < 1 {
			return o, fmt.Errorf("--%s must be at least 1, got %d", n, c.Int(n))
		}
	}
	for _, n := range []string{"qps", "retry-qps"} {
		if c.Float64(n) <= 0 {
			return o, fmt.Errorf("--%s must be greater than 0, got %g", n, c.Float64(n))
		}
	}
	if c.Duration("resync") < 0 {
		return o, fmt.Errorf("--resync must not be negative")
	}
	if e := c.String("events"); e != "all" && e != "warnings" {
		return o, fmt.Errorf("--events %q: want all or warnings", e)
	}
	if c.Duration("restart-backoff") <= 0 || c.Duration("max-restart-backoff") < c.Duration("restart-backoff") {
		return o, fmt.Errorf("--restart-backoff must be positive and at most --max-restart-backoff")
	}
	if c.Duration("retry-base-delay") <= 0 || c.Duration("retry-max-delay") < c.Duration("retry-base-delay") {
		return o, fmt.Errorf("--retry-base-delay must be positive and at most --retry-max-delay")
	}
	if c.String("server-image") == "" {
		return o, fmt.Errorf("--server-image must not be empty")
	}
	if c.Duration("usage-interval") < 0 || c.Float64("usage-threshold") < 0 || c.Duration("usage-max-interval") < c.Duration("usage-interval") {
		return o, fmt.Errorf("want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval")
	}
	if c.Float64("usage-qps") <= 0 || c.Int("usage-burst") < 1 {
		return o, fmt.Errorf("--usage-qps must be greater than 0 and --usage-burst at least 1")
	}
	if l, r, p := c.Duration("lease-duration"), c.Duration("renew-deadline"), c.Duration("retry-period"); p <= 0 || r <= p || l <= r {
		return o, fmt.Errorf("want --lease-duration > --renew-deadline > --retry-period > 0, got %s, %s, %s", l, r, p)
	}
	return o, nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
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

// restConfig loads the client configuration the way kubectl does: an explicit file, then
// $KUBECONFIG, then ~/.kube/config, then the in-cluster service account.
func restConfig(c *cli.Context) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if p := c.String("kubeconfig"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		rules.ExplicitPath = p
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.String("context")}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS = float32(c.Float64("qps"))
	cfg.Burst = c.Int("burst")
	cfg.UserAgent = "vm-controller/" + buildVersion()
	return cfg, nil
}

func run(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("run takes no arguments, got %q (see --help)", c.Args().Slice()), 2)
	}
	o, err := parseOptions(c)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	log := o.logger
	slog.SetDefault(log)
	klog.SetSlogLogger(log) // client-go's own logs go through the same handler

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cfg, err := restConfig(c)
	if err != nil {
		return err
	}
	target, err := targetOf(c, o.gvr, o.fields)
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
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("events client: %w", err)
	}
	usageCfg := rest.CopyConfig(cfg)
	usageCfg.QPS, usageCfg.Burst = float32(c.Float64("usage-qps")), c.Int("usage-burst")
	usageClient, err := dynamic.NewForConfig(usageCfg)
	if err != nil {
		return fmt.Errorf("usage client: %w", err)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kube.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	defer broadcaster.Shutdown()

	var recorder events.EventRecorder = broadcaster.NewRecorder(scheme.Scheme, "vm-controller")
	if c.String("events") == "warnings" {
		recorder = reconcile.WarningsOnly(recorder)
	}

	policy := reconcile.Policy{
		DefaultImage:      c.String("server-image"),
		RestartBackoff:    c.Duration("restart-backoff"),
		MaxRestartBackoff: c.Duration("max-restart-backoff"),
	}
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](c.Duration("retry-base-delay"), c.Duration("retry-max-delay")),
		&workqueue.TypedBucketRateLimiter[cache.ObjectName]{Limiter: rate.NewLimiter(rate.Limit(c.Float64("retry-qps")), c.Int("retry-burst"))},
	)
	ctrl := reconcile.New(reconcile.Config{
		Client:    client,
		GVR:       o.gvr,
		Fields:    o.fields,
		Namespace: c.String("namespace"),
		Selector:  c.String("selector"),
		Resync:    c.Duration("resync"),
		Backend: pods.New(pods.Config{Client: client, Namespace: c.String("namespace"), Resync: c.Duration("resync"),
			WatchNodes: c.Bool("watch-nodes"), UsageClient: usageClient, Discovery: kube.Discovery()}),
		Policy:      policy,
		Recorder:    recorder,
		Logger:      log,
		RateLimiter: limiter,
		Observer:    m,
		WatchCRD:    c.Bool("watch-crd"),
		OnServed:    m.SetServed,
		Usage: reconcile.UsagePolicy{Interval: c.Duration("usage-interval"), Threshold: c.Float64("usage-threshold"),
			MaxInterval: c.Duration("usage-max-interval")},
		UsageObserver: m,
	})
	m.CountPhases(ctrl.PhaseCounts)
	log.Info("Starting vm-controller", "version", buildVersion(), "host", cfg.Host, "resource", o.gvr.String(),
		"namespace", c.String("namespace"), "workers", c.Int("workers"), "leaderElect", c.Bool("leader-elect"))
	if err := ctrl.Start(ctx); err != nil {
		return err
	}

	// A leader whose renewals are stuck past the lease (plus slack) fails its liveness probe.
	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	alive := func(*http.Request) error { return nil }
	if c.Bool("leader-elect") {
		alive = watchdog.Check
	}
	if err := serve(ctx, "metrics", c.String("metrics-addr"), metricsMux(m.Handler(), c.Bool("pprof")), log); err != nil {
		return err
	}
	if err := serve(ctx, "health", c.String("health-addr"), healthMux(alive, ctrl.HasSynced), log); err != nil {
		return err
	}

	work := func(ctx context.Context) error {
		return ctrl.RunWorkers(ctx, c.Int("workers"), c.Duration("shutdown-timeout"))
	}
	if c.Bool("leader-elect") {
		e := election{name: c.String("lease-name"), namespace: target.leaseNamespace, identity: c.String("holder-identity"),
			lease: c.Duration("lease-duration"), renew: c.Duration("renew-deadline"), retry: c.Duration("retry-period")}
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

// kubeNamespace is the namespace a client would default to: in a pod, the pod's own (from the
// service account); otherwise the kubeconfig context's, or "default".
func kubeNamespace(c *cli.Context) (string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.String("kubeconfig")
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: c.String("context")}).Namespace()
	if err != nil {
		return "", fmt.Errorf("find the lease namespace (set --lease-namespace): %w", err)
	}
	return ns, nil
}
