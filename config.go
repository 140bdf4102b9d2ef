// Configuration: each command's flags land in one typed struct (run.go, check.go, plan.go,
// manifests.go), filled by urfave/cli through Destination and checked by its Validate method.
// A flag that several commands take is built here, once, by a function that binds it to a
// field: its name, environment variable and default cannot drift apart between commands, a
// misspelt field does not compile (a misspelt string name read zero), and
// docs/reference/flags.md is generated from these same declarations (flags_doc_test.go).

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cloudnative-czs/vm-controller/crd"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// env is a flag's environment variable: VMC_ and the flag's name in upper snake case.
func env(name string) []string { return []string{"VMC_" + name} }

// clusterFlags say how to reach the cluster: run and check.
type clusterFlags struct {
	Kubeconfig string
	Context    string
}

func (f *clusterFlags) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig file; empty: $KUBECONFIG, ~/.kube/config, or in-cluster config",
			EnvVars: []string{"VMC_KUBECONFIG", "KUBECONFIG"}, Destination: &f.Kubeconfig},
		&cli.StringFlag{Name: "context", Usage: "kubeconfig context to use; empty: the current context", EnvVars: env("CONTEXT"), Destination: &f.Context},
	}
}

// clientConfig finds the kubeconfig the way kubectl does: an explicit file, then $KUBECONFIG,
// then ~/.kube/config (and the in-cluster service account when there is none).
func (f clusterFlags) clientConfig() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.Context})
}

// restConfig loads the client configuration, without a client-side rate limit: the caller
// sets one where it wants one (limitQPS).
func (f clusterFlags) restConfig() (*rest.Config, error) {
	if f.Kubeconfig != "" {
		if _, err := os.Stat(f.Kubeconfig); err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
	}
	cfg, err := f.clientConfig().ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "vm-controller/" + buildVersion()
	return cfg, nil
}

// namespace is the namespace a client would default to: in a pod, the pod's own (from the
// service account); otherwise the kubeconfig context's, or "default".
func (f clusterFlags) namespace() (string, error) {
	ns, _, err := f.clientConfig().Namespace()
	if err != nil {
		return "", fmt.Errorf("find the lease namespace (set --lease-namespace): %w", err)
	}
	return ns, nil
}

// http1 makes cfg's clients speak HTTP/1.1: a connection per request in flight, kept for the
// next (client-go keeps up to 25 idle per client), instead of client-go's one multiplexed
// HTTP/2 connection, whose per-request costs (header compression into a shared table, a
// goroutine and two flushes per request, flow-control frames) showed in the controller's
// profile. In side-by-side bursts the same writes over HTTP/1.1 made VMs Active sooner: the
// API server, which bounds a burst, got through them faster (docs/dev/benchmarks.md). In
// place of HTTP/2's health check (a ping after 30 s of silence), TCP keep-alive probes start
// after 15 s of silence and give up on a dead connection, and so on a watch stuck on it,
// after 3 unanswered probes 5 s apart.
func http1(cfg *rest.Config) {
	cfg.TLSClientConfig.NextProtos = []string{"http/1.1"}
	cfg.Dial = (&net.Dialer{
		Timeout:         30 * time.Second, // client-go's own dialer's
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3},
	}).DialContext
}

// limitQPS sets the client-side rate limit: qps 0 turns client-go's limiter off (a negative
// rest.Config.QPS does; 0 there would mean client-go's own default of 5), leaving the
// protection of the API server to its API Priority and Fairness.
func limitQPS(cfg *rest.Config, qps float64, burst int) {
	if qps == 0 {
		cfg.QPS, cfg.Burst = -1, burst
		return
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
}

// resourceFlags name the VirtualMachine resource and where its fields are: run, check and
// manifests.
type resourceFlags struct {
	APIVersion string
	Resource   string
	SchemaFile string
}

// schemaFileUsage is what --schema-file means to the commands that read the map themselves.
const schemaFileUsage = "field-map file: where each field of a VM lives in the resource's CRD; empty: the built-in map of --api-version, or for another group the built-in layout its CRD's schema has"

// flags are the three flags; schemaFile says what --schema-file does for the command.
func (f *resourceFlags) flags(schemaFile string) []cli.Flag {
	return append(f.gvrFlags(), schemaFileFlag(&f.SchemaFile, schemaFile))
}

// gvrFlags are --api-version and --resource.
func (f *resourceFlags) gvrFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "api-version", Value: schema.DefaultAPIVersion, Usage: "group/version of the VirtualMachine resource", EnvVars: env("API_VERSION"), Destination: &f.APIVersion},
		&cli.StringFlag{Name: "resource", Value: schema.DefaultResource, Usage: "plural resource name of the VirtualMachine resource", EnvVars: env("RESOURCE"), Destination: &f.Resource},
	}
}

func schemaFileFlag(dst *string, usage string) cli.Flag {
	return &cli.StringFlag{Name: "schema-file", Usage: usage, EnvVars: env("SCHEMA_FILE"), Destination: dst}
}

func (f resourceFlags) gvr() (k8sschema.GroupVersionResource, error) {
	return schema.ParseGVR(f.APIVersion, f.Resource)
}

// loadFields returns the field map the flags ask for: the schema file, else the built-in map
// of the version.
func loadFields(schemaFile string, gv k8sschema.GroupVersion) (schema.Fields, error) {
	if schemaFile != "" {
		return schema.LoadFieldMap(schemaFile)
	}
	f, err := schema.ForVersion(gv)
	if err != nil {
		return schema.Fields{}, fmt.Errorf("--api-version %s: %w", gv, err)
	}
	return f, nil
}

// clusterFields returns the field map for run and check, which reach the cluster: as
// loadFields, except that a CRD of another group without --schema-file is read from the
// cluster and given the built-in layout its schema has (crd.ChooseLayout). why says which map
// was chosen and why, for check's table and run's log; it is empty unless a layout was chosen.
func (f resourceFlags) clusterFields(ctx context.Context, cfg *rest.Config, gvr k8sschema.GroupVersionResource) (fields schema.Fields, why string, err error) {
	if f.SchemaFile != "" || gvr.Group == schema.Group {
		fields, err = loadFields(f.SchemaFile, gvr.GroupVersion())
		return fields, "", err
	}
	name := crd.Name(gvr)
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return schema.Fields{}, "", fmt.Errorf("make client: %w", err)
	}
	u, err := client.Resource(crd.GVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		_, noMap := loadFields("", gvr.GroupVersion())
		return schema.Fields{}, "", fmt.Errorf("%w (and CRD %s, whose schema could choose a built-in layout, cannot be read: %w)", noMap, name, err)
	}
	def, err := json.Marshal(u.Object)
	if err != nil {
		return schema.Fields{}, "", fmt.Errorf("encode CRD %s: %w", name, err)
	}
	l, err := crd.ChooseLayout(def, gvr.Version)
	if err != nil {
		return schema.Fields{}, "", fmt.Errorf("--api-version %s without --schema-file: CRD %s: %w", gvr.GroupVersion(), name, err)
	}
	return l.Fields, l.Why, nil
}

// accessFlags are what the controller touches besides VMs and pods, so what the checks and
// the RBAC rules depend on: run and check. The commands describe them each in their own
// terms (run does it, check checks the access for it), so each builder takes the usage.
type accessFlags struct {
	Namespace      string
	WatchNodes     bool
	WatchCRD       bool
	LeaderElect    bool
	LeaseNamespace string
	UsageInterval  time.Duration
}

func namespaceFlag(dst *string, usage string) cli.Flag {
	return &cli.StringFlag{Name: "namespace", Usage: usage, EnvVars: env("NAMESPACE"), Destination: dst}
}

func watchNodesFlag(dst *bool, usage string) cli.Flag {
	return &cli.BoolFlag{Name: "watch-nodes", Value: true, Usage: usage, EnvVars: env("WATCH_NODES"), Destination: dst}
}

func watchCRDFlag(dst *bool, usage string) cli.Flag {
	return &cli.BoolFlag{Name: "watch-crd", Value: true, Usage: usage, EnvVars: env("WATCH_CRD"), Destination: dst}
}

func leaderElectFlag(dst *bool, usage string) cli.Flag {
	return &cli.BoolFlag{Name: "leader-elect", Usage: usage, EnvVars: env("LEADER_ELECT"), Destination: dst}
}

func leaseNamespaceFlag(dst *string, usage string) cli.Flag {
	return &cli.StringFlag{Name: "lease-namespace", Usage: usage, EnvVars: env("LEASE_NAMESPACE"), Destination: dst}
}

func usageIntervalFlag(dst *time.Duration, usage string) cli.Flag {
	return &cli.DurationFlag{Name: "usage-interval", Value: decision.DefaultUsagePolicy.Interval, Usage: usage, EnvVars: env("USAGE_INTERVAL"), Destination: dst}
}

func (f accessFlags) validate() error {
	return validLabel("namespace", f.Namespace)
}

// validLabel refuses a namespace flag's value that no namespace could have; empty passes.
func validLabel(flag, value string) error {
	if value == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(value); len(errs) > 0 {
		return fmt.Errorf("--%s %q: %s", flag, value, strings.Join(errs, "; "))
	}
	return nil
}

// policyFlags are the decision's settings: run, and plan, which decides as run would.
type policyFlags struct {
	ServerImage       string
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	Resize            string
}

// serverImageFlag is --server-image; usage says what it is for the command.
func (p *policyFlags) serverImageFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "server-image", Value: decision.DefaultPolicy.DefaultImage, Usage: usage, EnvVars: env("SERVER_IMAGE"), Destination: &p.ServerImage}
}

// backoffFlags are --restart-backoff, --max-restart-backoff and --resize: when and how a
// server is replaced.
func (p *policyFlags) backoffFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "restart-backoff", Value: decision.DefaultPolicy.RestartBackoff, Usage: "wait before replacing a failed server; doubles with each consecutive failure",
			EnvVars: env("RESTART_BACKOFF"), Destination: &p.RestartBackoff},
		&cli.DurationFlag{Name: "max-restart-backoff", Value: decision.DefaultPolicy.MaxRestartBackoff, Usage: "longest wait before replacing a failed server",
			EnvVars: env("MAX_RESTART_BACKOFF"), Destination: &p.MaxRestartBackoff},
		&cli.StringFlag{Name: "resize", Value: string(decision.ResizeInPlace),
			Usage:   "a change of cpu or memory: in-place (resize the running server, replace it where that is impossible), replace (always replace), manual (resize in place, else set RestartRequired and wait for a restart)",
			EnvVars: env("RESIZE"), Destination: &p.Resize},
	}
}

func (p policyFlags) validate() error {
	if p.RestartBackoff <= 0 || p.MaxRestartBackoff < p.RestartBackoff {
		return fmt.Errorf("--restart-backoff must be positive and at most --max-restart-backoff")
	}
	if p.ServerImage == "" {
		return fmt.Errorf("--server-image must not be empty")
	}
	switch decision.ResizeMode(p.Resize) {
	case decision.ResizeInPlace, decision.ResizeReplace, decision.ResizeManual:
	default:
		return fmt.Errorf("--resize %q: want in-place, replace or manual", p.Resize)
	}
	return nil
}

func (p policyFlags) policy() decision.Policy {
	// CanResize: both backends the commands use (pods for run, memory for plan) resize in
	// place; run says so again from its backend.
	return decision.Policy{DefaultImage: p.ServerImage, RestartBackoff: p.RestartBackoff, MaxRestartBackoff: p.MaxRestartBackoff,
		Resize: decision.ResizeMode(p.Resize), CanResize: true}
}

// logLevelFlag is --log-level: run and webhook.
func logLevelFlag(dst *string) cli.Flag {
	return &cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error", EnvVars: env("LOG_LEVEL"), Destination: dst}
}

// parseLogLevel reads --log-level's value.
func parseLogLevel(level string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return 0, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return l, nil
}

// usageError turns a flag problem into one line and exit code 2, instead of a page of help.
func usageError(_ *cli.Context, err error, _ bool) error {
	return cli.Exit(fmt.Sprintf("%v (see --help)", err), 2)
}

// noArgs refuses arguments to a command that takes none, as a usage error.
func noArgs(c *cli.Context) error {
	if c.NArg() > 0 {
		return cli.Exit(fmt.Sprintf("%s takes no arguments, got %q (see --help)", c.Command.Name, c.Args().Slice()), 2)
	}
	return nil
}

// unlimited is a copy of cfg without a client-side rate limit, for the watches: client-go does
// not rate limit a watch (Request.Watch), and the informers stream theirs (Request.Stream),
// which would take from the bucket the writes share.
func unlimited(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.RateLimiter, c.QPS = nil, -1
	return c
}
