// How a command reaches the cluster: --kubeconfig and --context, the REST configurations
// made from them, and every API client of the commands, built here and nowhere else.

package command

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cloudnative-czs/vm-controller/leader"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/urfave/cli/v2"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// clusterFlags say how to reach the cluster: run, check, webhook and migrate.
type clusterFlags struct {
	Kubeconfig string
	Context    string
}

func (f *clusterFlags) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig file; empty: the files $KUBECONFIG lists, merged as kubectl merges them, else ~/.kube/config, else the in-cluster config",
			EnvVars: env("KUBECONFIG"), Destination: &f.Kubeconfig},
		&cli.StringFlag{Name: "context", Usage: "kubeconfig context to use; empty: the current context", EnvVars: env("CONTEXT"), Destination: &f.Context},
	}
}

// loadingRules find the kubeconfig the way kubectl does: --kubeconfig is one file; without
// it, $KUBECONFIG is a list of files (separated as $PATH is), merged, the first file to set
// a value winning; without either, ~/.kube/config; and with no file at all, the in-cluster
// service account. $KUBECONFIG is read here and not as the flag's: taken for one file's
// name, a list was a file that did not exist.
func (f clusterFlags) loadingRules() *clientcmd.ClientConfigLoadingRules {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	return rules
}

// clientConfig is the client configuration of the loading rules and --context.
func (f clusterFlags) clientConfig() clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(f.loadingRules(), &clientcmd.ConfigOverrides{CurrentContext: f.Context})
}

// findKubeconfig refuses a kubeconfig that names no file there is: a --kubeconfig that does
// not exist, or a $KUBECONFIG none of whose files exists. Of a list, kubectl skips a missing
// file, and so do the loading rules; with every file missing they would go on without any,
// to "no configuration has been provided" or, in a pod, the in-cluster config, far from the
// cause.
func findKubeconfig(rules *clientcmd.ClientConfigLoadingRules) error {
	if rules.ExplicitPath != "" {
		if _, err := os.Stat(rules.ExplicitPath); err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
		return nil
	}
	if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		return nil // ~/.kube/config, or without it the in-cluster config
	}
	var missing []string
	var first error
	for _, file := range rules.Precedence {
		if file == "" {
			continue
		}
		_, err := os.Stat(file)
		if !errors.Is(err, fs.ErrNotExist) {
			return nil // there, or an error the loading rules report as they read it
		}
		missing = append(missing, file)
		if first == nil {
			first = err
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("kubeconfig: %w", first)
	}
	return fmt.Errorf("kubeconfig: none of the files $KUBECONFIG lists exists (%s): %w", strings.Join(missing, ", "), fs.ErrNotExist)
}

// readKubeconfigs refuses, in one line that names it, a kubeconfig file the loading rules
// would read and cannot: one that is not YAML, or not a mapping (a text file such as
// /etc/hostname), or of another kind than Config. client-go says so in its decoder's words
// ("couldn't get version/kind; json parse error: json: cannot unmarshal string into Go value
// of type struct { APIVersion string ..."), and a --kubeconfig of another YAML, which loads as
// an empty configuration, as "no configuration has been provided, try setting
// KUBERNETES_MASTER". A file that cannot be read at all (a directory) is its read error.
func readKubeconfigs(rules *clientcmd.ClientConfigLoadingRules) error {
	for _, file := range rules.GetLoadingPrecedence() {
		data, err := os.ReadFile(file)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // skipped, as the loading rules skip it (findKubeconfig refuses it where it must be there)
		case err != nil:
			return fmt.Errorf("kubeconfig: %w", err)
		}
		cfg, err := clientcmd.Load(data)
		switch {
		case err != nil:
			return fmt.Errorf("kubeconfig %s: not a kubeconfig file (%s)", file, kubeconfigProblem(data, err))
		case file == rules.ExplicitPath && len(cfg.Clusters) == 0 && len(cfg.AuthInfos) == 0 && len(cfg.Contexts) == 0 && cfg.CurrentContext == "":
			// One of $KUBECONFIG's files may hold a part only; --kubeconfig is all there is.
			return fmt.Errorf("kubeconfig %s: not a kubeconfig file (no clusters, users or contexts)", file)
		}
	}
	return nil
}

// kubeconfigProblem says in a few words why data, which clientcmd could not load (err), is no
// kubeconfig.
func kubeconfigProblem(data []byte, err error) string {
	var v any
	if yerr := yaml.Unmarshal(data, &v); yerr != nil {
		return "not YAML: " + strings.TrimPrefix(yerr.Error(), "error converting YAML to JSON: yaml: ")
	}
	switch v := v.(type) {
	case map[string]any:
		if kind, _ := v["kind"].(string); kind != "" && kind != "Config" {
			return fmt.Sprintf("kind %s, not Config", kind)
		}
		if av, _ := v["apiVersion"].(string); av != "" && av != "v1" {
			return fmt.Sprintf("apiVersion %s, not v1", av)
		}
	case string:
		return "plain text, not a YAML mapping"
	case []any:
		return "a YAML list, not a mapping"
	case nil:
	default:
		return fmt.Sprintf("the YAML value %v, not a mapping", v)
	}
	return err.Error()
}

// restConfig loads the client configuration, naming this build (version) in the user agent,
// with client-go's default rate limit: a command that wants another sets it (limitQPS).
func (f clusterFlags) restConfig(version string) (*rest.Config, error) {
	if err := findKubeconfig(f.loadingRules()); err != nil {
		return nil, err
	}
	cfg, err := f.clientConfig().ClientConfig()
	if err != nil {
		// Only then are the files read again, to say which is no kubeconfig: a file that
		// can be read once only (--kubeconfig <(kubectl config view --raw), /dev/stdin) is
		// read by client-go alone.
		if why := readKubeconfigs(f.loadingRules()); why != nil {
			return nil, why
		}
		if why := f.unusableContext(); why != nil {
			return nil, why
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "vm-controller/" + version
	return cfg, nil
}

// unusableContext says, in one line that names the kubeconfig, why its context cannot be
// used, where clientcmd's validation of it (ConfirmUsable) finds that it is the context: none
// chosen, a current context that is not there, a context that names no cluster or one that
// is not there. client-go says the first and the last as "no configuration has been provided,
// try setting KUBERNETES_MASTER environment variable", the second as a list of what the
// context's absence leaves empty. nil for anything else (an empty configuration, an unknown
// --context), which client-go's own words say.
func (f clusterFlags) unusableContext() error {
	raw, err := f.clientConfig().RawConfig()
	if err != nil {
		return nil
	}
	where, in := kubeconfigFiles(f.loadingRules())
	name := f.Context
	if name == "" {
		name = raw.CurrentContext
	}
	err = clientcmd.ConfirmUsable(raw, name)
	switch {
	case err == nil || clientcmd.IsEmptyConfig(err):
		return nil
	case errors.Is(err, clientcmd.ErrNoContext):
		return fmt.Errorf("kubeconfig %s: no current context (set one with kubectl config use-context, or give --context)", where)
	case clientcmd.IsContextNotFound(err) && f.Context == "":
		return fmt.Errorf("kubeconfig %s: current context %q is not in %s (set one with kubectl config use-context, or give --context)", where, name, in)
	}
	ctx, ok := raw.Contexts[name]
	switch {
	case !ok:
		return nil
	case ctx.Cluster == "":
		return fmt.Errorf("kubeconfig %s: context %q names no cluster", where, name)
	case raw.Clusters[ctx.Cluster] == nil:
		return fmt.Errorf("kubeconfig %s: context %q names cluster %q, which is not in %s", where, name, ctx.Cluster, in)
	}
	return nil
}

// kubeconfigFiles names the kubeconfig the loading rules read (where): --kubeconfig, else the
// files of $KUBECONFIG or ~/.kube/config that are there, separated by commas; and how a
// message says "in it" (in): the file, or any of the files.
func kubeconfigFiles(rules *clientcmd.ClientConfigLoadingRules) (where, in string) {
	var there []string
	for _, file := range rules.GetLoadingPrecedence() {
		if _, err := os.Stat(file); err == nil {
			there = append(there, file)
		}
	}
	if len(there) > 1 {
		return strings.Join(there, ", "), "any of the files"
	}
	return strings.Join(there, ", "), "the file"
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

// minQPS and maxQPS bound a rate of requests a flag asks for (run's --qps unless 0,
// --retry-qps, --usage-qps). client-go keeps --qps and --usage-qps in a float32: below
// about 1e-45 one was 0, which client-go reads as its own default of 5 per second, and
// above about 3.4e38 +Inf, no limit at all; a --retry-qps of 1e-50 had each retry wait
// past any lifetime. The bounds are well inside, and past what makes sense: one request
// every 100 seconds, a million a second.
const (
	minQPS = 0.01
	maxQPS = 1e6
)

// qpsRange is the range of qpsInRange, as the flags' refusals say it.
var qpsRange = strconv.FormatFloat(minQPS, 'f', -1, 64) + " to " + strconv.FormatFloat(maxQPS, 'f', -1, 64)

// qpsInRange reports whether qps is from minQPS to maxQPS: not NaN, not infinite.
func qpsInRange(qps float64) bool { return qps >= minQPS && qps <= maxQPS }

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

// unlimited is a copy of cfg without a client-side rate limit, for the watches: client-go does
// not rate limit a watch (Request.Watch), and the informers stream theirs (Request.Stream),
// which would take from the bucket the writes share.
func unlimited(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.RateLimiter, c.QPS = nil, -1
	return c
}

// protobuf is a copy of cfg that speaks protobuf, for the built-in types: a typed informer
// decodes pods and nodes several times faster than JSON, and the API server reads and writes
// Events without JSON's reflection.
func protobuf(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return c
}

// checkTimeout bounds each request of the start-up checks (facts.go), so that an unreachable
// cluster is one clear line after a while rather than a hang.
const checkTimeout = 15 * time.Second

// checked is a copy of cfg whose every request is bounded by checkTimeout: the checks'.
// The discovery client takes no context, so the bound is the configuration's.
func checked(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Timeout = checkTimeout
	return c
}

// apiClients are the typed and the dynamic client of one configuration: what the start-up
// checks, the conversion webhook and the storage migration use.
type apiClients struct {
	kube    kubernetes.Interface
	dynamic dynamic.Interface
}

func newAPIClients(cfg *rest.Config) (apiClients, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return apiClients{}, fmt.Errorf("make HTTP client: %w", err)
	}
	return apiClientsOver(cfg, hc)
}

// apiClientsOver makes the clients of cfg over hc, whose connections they share.
func apiClientsOver(cfg *rest.Config, hc *http.Client) (apiClients, error) {
	kube, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return apiClients{}, fmt.Errorf("make client: %w", err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return apiClients{}, fmt.Errorf("make dynamic client: %w", err)
	}
	return apiClients{kube: kube, dynamic: dyn}, nil
}

// runClients are the controller's clients. All but the watches', usage's and the Lease's
// share cfg's rate limiter, so that run's --qps is what the controller sends in all, not a
// limit per client; all share one HTTP client, and so one pool of connections (see
// newRunClients).
type runClients struct {
	apiClients                      // dynamic: the CRD watch; typed: discovery
	vmREST     rest.Interface       // VMs: the list and every write, each answer read in place
	vmWatch    rest.Interface       // VMs: the watch, unlimited
	proto      kubernetes.Interface // protobuf: pods, nodes, Events
	podWatch   kubernetes.Interface // protobuf: the pod watch, unlimited
	usage      dynamic.Interface    // metrics.k8s.io, with a bucket of its own (--usage-qps, --usage-burst)
	lease      kubernetes.Interface // the leader Lease, unlimited
}

// newRunClients makes the controller's clients from cfg, its rate-limited configuration:
// the VM and pod watches stream over clients of their own without the rate limiter (a watch
// opened behind a burst of writes would leave the cache behind), and usage sampling has a
// bucket of its own, so that it never delays a reconcile.
//
// Leader election has a client of its own without the rate limiter, as kube-controller-manager
// gives it one: in the bucket the writes share, a renewal waited behind a burst (Events are
// sent each from a goroutine of their own, and queue there without bound) and failed before
// it was sent, past --renew-deadline, and the leader gave up its Lease because it was busy.
// The elector paces itself: a read and a write per --retry-period at most.
//
// Every client goes over one HTTP client made of cfg. client-go shares a transport between
// configurations only when it can compare them, which it cannot with http1's dialer: each
// client had a pool of connections of its own, a VM's writes and its pod's create went over
// two connections where one would do, and each pool opened its own as a burst began (a TLS
// handshake each, in the controller's profile of a burst; docs/dev/benchmarks.md).
//
// With a fence (leader election), every client but the Lease's goes over an HTTP client
// whose transport refuses writes while the fence is closed (package leader), at the last point
// before a request leaves the process, whichever client, informer or Event sink makes it.
// The Lease's goes over the same transport without it: a renewal is what opens the fence.
func newRunClients(cfg *rest.Config, usageQPS float64, usageBurst int, f *leader.Fence) (runClients, error) {
	leaseHC, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return runClients{}, fmt.Errorf("make HTTP client: %w", err)
	}
	hc := leaseHC
	if f != nil {
		fenced := *leaseHC
		fenced.Transport = f.Wrap(leaseHC.Transport)
		hc = &fenced
	}
	api, err := apiClientsOver(cfg, hc)
	if err != nil {
		return runClients{}, err
	}
	vmREST, err := vmcache.RESTClientForConfigAndClient(cfg, hc)
	if err != nil {
		return runClients{}, err
	}
	vmWatch, err := vmcache.RESTClientForConfigAndClient(unlimited(cfg), hc)
	if err != nil {
		return runClients{}, err
	}
	proto, err := kubernetes.NewForConfigAndClient(protobuf(cfg), hc)
	if err != nil {
		return runClients{}, fmt.Errorf("make protobuf client: %w", err)
	}
	podWatch, err := kubernetes.NewForConfigAndClient(unlimited(protobuf(cfg)), hc)
	if err != nil {
		return runClients{}, fmt.Errorf("make pod watch client: %w", err)
	}
	usageCfg := rest.CopyConfig(cfg)
	usageCfg.RateLimiter = nil // a bucket of its own
	limitQPS(usageCfg, usageQPS, usageBurst)
	usage, err := dynamic.NewForConfigAndClient(usageCfg, hc)
	if err != nil {
		return runClients{}, fmt.Errorf("make usage client: %w", err)
	}
	lease, err := kubernetes.NewForConfigAndClient(unlimited(cfg), leaseHC)
	if err != nil {
		return runClients{}, fmt.Errorf("make lease client: %w", err)
	}
	return runClients{apiClients: api, vmREST: vmREST, vmWatch: vmWatch, proto: proto, podWatch: podWatch, usage: usage, lease: lease}, nil
}
