// The check command, and the same checks run performs before it starts: is the resource
// served, does its CRD have what the field map says, and may the controller do its work.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cloudnative-czs/vm-controller/access"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// checkTimeout bounds each request of the checks, so that an unreachable cluster is one
// clear line after a while rather than a hang.
const checkTimeout = 15 * time.Second

// checkConfig is the check command's configuration: the flags of run that say what run
// needs, read the same way.
type checkConfig struct {
	clusterFlags
	resourceFlags
	accessFlags
}

func checkCommand(c *checkConfig) *cli.Command {
	flags := c.clusterFlags.flags()
	flags = append(flags, namespaceFlag(&c.Namespace, "check access in this namespace only; empty: in all namespaces"))
	flags = append(flags, c.resourceFlags.flags(schemaFileUsage)...)
	flags = append(flags,
		watchNodesFlag(&c.WatchNodes, "check read access to nodes, which run needs with --watch-nodes"),
		watchCRDFlag(&c.WatchCRD, "check the resource's CRD and read access to it, which run needs with --watch-crd"),
		leaderElectFlag(&c.LeaderElect, "check access to the leader Lease, which run needs with --leader-elect"),
		leaseNamespaceFlag(&c.LeaseNamespace, "namespace of the leader Lease; empty: as run decides it"),
		usageIntervalFlag(&c.UsageInterval, "as run's: unless 0, check read access to metrics.k8s.io pods, which usage sampling needs"),
	)
	return &cli.Command{
		Name:  "check",
		Usage: "check that a cluster serves the resource, its CRD fits the field map, and RBAC allows what the controller does",
		Description: "Runs the checks run performs before it starts and prints a table of them; exits 1 if one fails.\n" +
			"Give it the flags you give run: the RBAC checks are those of the identity in the kubeconfig.",
		OnUsageError: usageError,
		Flags:        flags,
		Action: func(ctx *cli.Context) error {
			if err := noArgs(ctx); err != nil {
				return err
			}
			if err := c.Validate(); err != nil {
				return cli.Exit(err.Error(), 2)
			}
			return checkAction(ctx, *c)
		},
	}
}

// Validate checks the flags that can be checked without reading a file or asking the
// cluster.
func (c checkConfig) Validate() error {
	if _, err := c.gvr(); err != nil {
		return err
	}
	return c.accessFlags.validate()
}

func checkAction(cc *cli.Context, c checkConfig) error {
	gvr, err := c.gvr()
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	cfg, err := c.restConfig()
	if err != nil {
		return err
	}
	// check has no --qps: a few dozen requests, none of them worth waiting for a bucket.
	limitQPS(cfg, 50, 100)
	fields, why, err := c.clusterFields(cc.Context, cfg, gvr)
	switch {
	case err != nil && (c.SchemaFile != "" || gvr.Group == schema.Group):
		return cli.Exit(err.Error(), 2) // a bad file or version: the flags are wrong
	case err != nil:
		return cli.Exit(err.Error(), 1) // the cluster's CRD has no layout to choose
	}
	t, err := targetOf(c.clusterFlags, c.accessFlags, gvr, fields)
	if err != nil {
		return err
	}
	var results []checkResult
	if why != "" {
		// The map was chosen by the CRD's schema: say which, before the checks that use it.
		results = append(results, pass("fieldmap", "%s", why))
	}
	results = append(results, runChecks(cc.Context, cfg, t)...)

	w := tabwriter.NewWriter(cc.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CHECK\tRESULT\tDETAIL")
	failed := 0
	for _, r := range results {
		fmt.Fprintf(w, "%s\t%s\t%s\n", r.name, r.result(), r.detail)
		if r.failed() {
			failed++
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d checks failed", failed, len(results)), 1)
	}
	return nil
}

// preflight runs the checks before run starts anything: a controller that cannot work fails
// at once, one line per failed check, instead of retrying in the background.
func preflight(ctx context.Context, cfg *rest.Config, t checkTarget) error {
	var failed []string
	for _, r := range runChecks(ctx, cfg, t) {
		if r.failed() {
			failed = append(failed, r.detail)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return checkFailures(failed)
}

// checkFailures is the error of a failed preflight: each failed check's message on a line of
// its own. main prefixes the first line with the program's name; the others get it here, so
// every line reads on its own in a log.
type checkFailures []string

func (f checkFailures) Error() string { return strings.Join(f, "\nvm-controller: ") }

// checkTarget is what the checks look at.
type checkTarget struct {
	gvr            k8sschema.GroupVersionResource
	fields         schema.Fields
	namespace      string // "" for all namespaces
	watchNodes     bool
	watchCRD       bool
	leaderElect    bool
	leaseNamespace string // with leaderElect
	usage          bool
}

// targetOf reads the checks' target from the flags that run and check share.
func targetOf(cluster clusterFlags, a accessFlags, gvr k8sschema.GroupVersionResource, fields schema.Fields) (checkTarget, error) {
	t := checkTarget{gvr: gvr, fields: fields, namespace: a.Namespace, watchNodes: a.WatchNodes,
		watchCRD: a.WatchCRD, leaderElect: a.LeaderElect, leaseNamespace: a.LeaseNamespace,
		usage: a.UsageInterval > 0}
	if t.leaderElect && t.leaseNamespace == "" {
		ns, err := cluster.namespace()
		if err != nil {
			return t, err
		}
		t.leaseNamespace = ns
	}
	return t, nil
}

func (t checkTarget) needs() access.Needs {
	return access.Needs{GVR: t.gvr, WatchNodes: t.watchNodes, WatchCRD: t.watchCRD, LeaderElect: t.leaderElect, Usage: t.usage}
}

// checkResult is one row of the check table.
type checkResult struct {
	name    string // discovery, crd, fields, rbac
	ok      bool
	warn    bool   // passed, with a caveat the detail names (ok is true)
	skipped bool   // not run because a check it needs failed
	detail  string // what passed, or why it failed: a sentence that stands alone
}

func (r checkResult) failed() bool { return !r.ok && !r.skipped }

func (r checkResult) result() string {
	switch {
	case r.skipped:
		return "skip"
	case r.warn:
		return "WARN"
	case r.ok:
		return "pass"
	}
	return "FAIL"
}

func pass(name, format string, args ...any) checkResult {
	return checkResult{name: name, ok: true, detail: fmt.Sprintf(format, args...)}
}

func fail(name, format string, args ...any) checkResult {
	return checkResult{name: name, detail: fmt.Sprintf(format, args...)}
}

// runChecks runs every check in order. A check that needs one that failed is skipped, so
// that one cause gives one failure: no CRD checks on a resource the cluster does not serve,
// nothing at all on a cluster that does not answer.
func runChecks(ctx context.Context, cfg *rest.Config, t checkTarget) []checkResult {
	c := rest.CopyConfig(cfg)
	c.Timeout = checkTimeout
	gvr := t.gvr
	disc, served := checkDiscovery(c, gvr)
	results := []checkResult{disc}
	if !disc.ok && !served {
		for _, n := range []string{"crd", "fields", "rbac"} {
			results = append(results, checkResult{name: n, skipped: true, detail: "the cluster does not answer"})
		}
		return results
	}
	switch {
	case !t.watchCRD:
		results = append(results,
			checkResult{name: "crd", skipped: true, detail: "--watch-crd=false: the CRD is not read"},
			checkResult{name: "fields", skipped: true, detail: "--watch-crd=false: the CRD is not read"})
	case disc.ok:
		results = append(results, checkCRD(ctx, c, gvr, t.fields)...)
	default:
		results = append(results,
			checkResult{name: "crd", skipped: true, detail: "the resource is not served"},
			checkResult{name: "fields", skipped: true, detail: "the resource is not served"})
	}
	return append(results, checkAccess(ctx, c, t.needs(), t.namespace, t.leaseNamespace)...)
}

// checkDiscovery checks that the cluster answers (answered) and serves the resource (ok).
func checkDiscovery(cfg *rest.Config, gvr k8sschema.GroupVersionResource) (r checkResult, answered bool) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fail("discovery", "cannot make a discovery client for %s: %v", cfg.Host, err), false
	}
	list, err := dc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		if apierrors.IsNotFound(err) || strings.Contains(err.Error(), "the server could not find the requested resource") {
			return fail("discovery", "the cluster at %s does not serve %s: install the CRD first (vm-controller crds | kubectl apply -f -)", cfg.Host, gvr.GroupVersion()), true
		}
		if apierrors.IsUnauthorized(err) {
			return fail("discovery", "the cluster at %s refused the credentials (401 Unauthorized): check the kubeconfig's user, token or certificate", cfg.Host), false
		}
		return fail("discovery", "cannot reach the cluster at %s: %v", cfg.Host, err), false
	}
	for _, res := range list.APIResources {
		if res.Name == gvr.Resource {
			if !res.Namespaced {
				return fail("discovery", "%s is cluster-scoped; vm-controller manages namespaced resources", gvr.GroupResource()), true
			}
			return pass("discovery", "the cluster at %s serves %s in %s", cfg.Host, gvr.Resource, gvr.GroupVersion()), true
		}
	}
	return fail("discovery", "the cluster at %s serves %s but no resource %q in it", cfg.Host, gvr.GroupVersion(), gvr.Resource), true
}

// checkCRD reads the resource's CRD and checks that it serves the version (as the
// controller's CRD watch will judge it), its status subresource, and its schema against the
// field map.
func checkCRD(ctx context.Context, cfg *rest.Config, gvr k8sschema.GroupVersionResource, f schema.Fields) []checkResult {
	name := crds.Name(gvr)
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return []checkResult{fail("crd", "cannot make a client: %v", err), {name: "fields", skipped: true, detail: "no CRD to read"}}
	}
	u, err := client.Resource(crds.GVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return []checkResult{fail("crd", "cannot read CRD %s: %v", name, err), {name: "fields", skipped: true, detail: "no CRD to read"}}
	}
	def, err := json.Marshal(u.Object)
	if err != nil {
		return []checkResult{fail("crd", "cannot encode CRD %s: %v", name, err), {name: "fields", skipped: true, detail: "no CRD to read"}}
	}
	return judgeCRD(name, def, gvr.Version, f)
}

// judgeCRD is checkCRD's verdict on the CRD read, as JSON.
func judgeCRD(name string, def []byte, version string, f schema.Fields) []checkResult {
	if err := crds.Served(def, version); err != nil {
		return []checkResult{fail("crd", "%v", err), {name: "fields", skipped: true, detail: "the CRD does not serve the version"}}
	}
	var out []checkResult
	if err := crds.StatusSubresource(def, version); err != nil {
		// Workable (the original tutorial's CRD had none): status goes through the main
		// resource, conditional on its resourceVersion, so a status write and a user's spec
		// edit made at once conflict and one of them is retried.
		w := pass("crd", "%v: the controller writes status through the main resource, conditional on its resourceVersion, so status writes and spec edits conflict and are retried", err)
		w.warn = true
		out = append(out, w)
	} else {
		out = append(out, pass("crd", "CRD %s has the status subresource in %s", name, version))
	}
	n, errs := crds.CheckSchema(def, version, f)
	for _, err := range errs {
		out = append(out, fail("fields", "field map: %v", err))
	}
	if len(errs) == 0 {
		out = append(out, pass("fields", "the %d paths of the field map are in the schema of %s", n, version))
	}
	return out
}

// checkAccess asks the API server, with a SelfSubjectAccessReview per verb, whether the
// identity of the kubeconfig may do what the controller does (access.Rules, the same rules
// the deployment manifests grant): one row per rule.
func checkAccess(ctx context.Context, cfg *rest.Config, needs access.Needs, namespace, leaseNamespace string) []checkResult {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return []checkResult{fail("rbac", "cannot make a client: %v", err)}
	}
	rules := access.Rules(needs)
	out := make([]checkResult, len(rules))
	var wg sync.WaitGroup
	for i, rule := range rules {
		ns := namespace
		if rule.Own {
			ns = leaseNamespace
		}
		wg.Go(func() { out[i] = checkRule(ctx, kube, rule, ns) })
	}
	wg.Wait()
	return out
}

// ruleName is the object a rule is limited to, for the review; "" when it names none.
func ruleName(r access.Rule) string {
	if len(r.Names) == 1 {
		return r.Names[0]
	}
	return ""
}

func checkRule(ctx context.Context, kube kubernetes.Interface, rule access.Rule, namespace string) checkResult {
	resource, sub, _ := strings.Cut(rule.Resource, "/")
	what := k8sschema.GroupResource{Group: rule.Group, Resource: resource}.String()
	if sub != "" {
		what += "/" + sub
	}
	ns, where := namespace, "in namespace "+namespace
	switch {
	case rule.Cluster:
		ns, where = "", "cluster-wide"
	case namespace == "":
		where = "in all namespaces"
	}
	var denied []string
	for _, verb := range rule.Verbs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: rule.Group, Resource: resource, Subresource: sub, Name: ruleName(rule)},
		}}
		res, err := kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return fail("rbac", "cannot review access to %s %s %s: %v", verb, what, where, err)
		}
		if !res.Status.Allowed {
			denied = append(denied, verb)
		}
	}
	if len(denied) > 0 {
		return fail("rbac", "RBAC denies %s on %s %s (needed: %s)", strings.Join(denied, ", "), what, where, rule.Why)
	}
	return pass("rbac", "%s %s %s", strings.Join(rule.Verbs, ", "), what, where)
}
