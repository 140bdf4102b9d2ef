// The check command: the checks run performs before it starts (facts.go), printed as a table.

package command

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
)

// checkConfig is the check command's configuration: the flags of run that say what run
// needs, read the same way.
type checkConfig struct {
	clusterFlags
	resourceFlags
	accessFlags
	rootDiskFlags

	// ServiceAccount is --service-account, NAMESPACE/NAME: the ServiceAccount whose
	// permissions the rbac rows review (serviceAccount); empty: the kubeconfig's identity.
	ServiceAccount string
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
		c.rootDiskFlag("as run's: under claim, check access to PersistentVolumeClaims, StorageClasses and Events, and warn when the cluster has no default StorageClass"),
		&cli.StringFlag{Name: "service-account", Usage: serviceAccountUsage, EnvVars: env("SERVICE_ACCOUNT"), Destination: &c.ServiceAccount},
	)
	return &cli.Command{
		Name:  "check",
		Usage: "check that a cluster serves the resource, its CRD fits the field map, and RBAC allows what the controller does",
		Description: "Runs the checks run performs before it starts and prints a table of them; exits 1 if one fails (a WARN row does not).\n" +
			"Of run's flags it takes those that decide what it checks: " + checkRunFlags + "; give them as you give run, and leave out run's others, which it refuses (exit 2).\n" +
			"The RBAC checks are those of the identity in the kubeconfig, which in the controller's pod is its ServiceAccount;\n" +
			"from outside, --service-account checks the controller's (as manifests installs it by default: --service-account vm-controller/vm-controller).",
		OnUsageError: usageError,
		Flags:        flags,
		Action:       action(c, noArgs, func(cc *cli.Context) error { return check(cc, *c) }),
	}
}

// Validate checks the flags that can be checked without reading a file or asking the
// cluster.
func (c checkConfig) Validate() error {
	gvr, err := c.gvr()
	if err != nil {
		return err
	}
	if err := c.validFieldMap(gvr.GroupVersion()); err != nil {
		return err
	}
	if err := c.rootDiskFlags.validate(); err != nil {
		return err
	}
	if _, err := c.serviceAccount(); err != nil {
		return err
	}
	return c.accessFlags.validate()
}

// checkRunFlags are the flags of run that check takes, as its help lists them
// (TestCheckHelpNamesRunsFlags holds the list to the two commands' flags).
const checkRunFlags = "--kubeconfig, --context, --namespace, --api-version, --resource, --schema-file, --watch-nodes, --watch-crd, --leader-elect, --lease-namespace, --usage-interval and --root-disk"

// serviceAccountUsage is what --service-account does.
const serviceAccountUsage = "NAMESPACE/NAME of a ServiceAccount, such as the controller's (vm-controller/vm-controller as manifests installs it by default), whose permissions the RBAC checks review (SubjectAccessReviews, which the kubeconfig's identity must be allowed to create) instead of the kubeconfig's own; the Lease's namespace defaults to NAMESPACE; empty: the kubeconfig's identity, which in the controller's pod is its ServiceAccount"

// serviceAccount is --service-account's ServiceAccount; nil when it is empty.
func (c checkConfig) serviceAccount() (*serviceAccount, error) {
	if c.ServiceAccount == "" {
		return nil, nil
	}
	ns, name, ok := strings.Cut(c.ServiceAccount, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("%s %q: want NAMESPACE/NAME, such as vm-controller/vm-controller", flagRef("service-account", c.ServiceAccount), c.ServiceAccount)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("%s %q: namespace: %s", flagRef("service-account", c.ServiceAccount), c.ServiceAccount, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("%s %q: name: %s", flagRef("service-account", c.ServiceAccount), c.ServiceAccount, strings.Join(errs, "; "))
	}
	return &serviceAccount{Namespace: ns, Name: name}, nil
}

// check gathers the facts run would start from and prints them.
func check(cc *cli.Context, c checkConfig) error {
	gvr, err := c.gvr()
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	cfg, err := c.restConfig(cc.App.Version)
	if err != nil {
		return err
	}
	// check has no --qps: a few dozen requests, none of them worth waiting for a bucket.
	limitQPS(cfg, 50, 100)
	sa, err := c.serviceAccount()
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if sa != nil && c.LeaseNamespace == "" {
		// run in the ServiceAccount's pod keeps its Lease in the pod's namespace.
		c.LeaseNamespace = sa.Namespace
	}
	t, err := targetOf(c.clusterFlags, c.resourceFlags, c.accessFlags, c.rootDiskFlags, gvr)
	if err != nil {
		return err
	}
	t.reviewAs = sa
	cl, err := newAPIClients(checked(cfg))
	if err != nil {
		return err
	}
	f, err := gather(cc.Context, cl, cfg.Host, t)
	if err != nil {
		// As run: no field map (a bad file or version, or an answering cluster's CRD whose
		// schema gives no layout) is the flags' fault, which --schema-file mends.
		return cli.Exit(err.Error(), 2)
	}

	if c.Namespace != "" && answered(f.checks) {
		f.checks = withNamespace(f.checks, checkNamespace(cc.Context, cl.kube, c.Namespace))
	}

	w := tabwriter.NewWriter(cc.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CHECK\tRESULT\tDETAIL")
	failed := 0
	for _, r := range f.checks {
		fmt.Fprintf(w, "%s\t%s\t%s\n", r.name, r.result(), r.detail)
		if r.failed() {
			failed++
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d checks failed", failed, len(f.checks)), 1)
	}
	return nil
}

// answered reports whether the cluster answered gather: when it does not, gather skips the
// rbac rows.
func answered(checks []checkResult) bool {
	return !slices.ContainsFunc(checks, func(r checkResult) bool { return r.name == "rbac" && r.skipped })
}

// withNamespace puts the namespace row before the rbac rows, which are checked in it.
func withNamespace(checks []checkResult, ns checkResult) []checkResult {
	i := slices.IndexFunc(checks, func(r checkResult) bool { return r.name == "rbac" })
	if i < 0 {
		i = len(checks)
	}
	return slices.Insert(checks, i, ns)
}

// checkNamespace is check's row of --namespace: whether the namespace exists. One that does
// not, or is being deleted, is a warning, not a failure: run watches it all the same and
// finds its VMs once it is created, but the access rows that pass in it say nothing of a
// namespace that is not there, and a misspelt --namespace would otherwise pass every check.
// It is read by a list, which the controller's own RBAC allows (namespaces: list, watch).
func checkNamespace(ctx context.Context, kube kubernetes.Interface, ns string) checkResult {
	l, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", ns).String()})
	if err != nil {
		return checkResult{name: "namespace", skipped: true, detail: fmt.Sprintf("cannot list namespaces to find %s: %v", ns, err)}
	}
	for _, n := range l.Items {
		switch {
		case n.Name != ns:
		case n.Status.Phase == corev1.NamespaceTerminating || n.DeletionTimestamp != nil:
			return warning("namespace", "namespace %s is being deleted: the controller removes its VMs' finalizers and makes no servers there", ns)
		default:
			return pass("namespace", "namespace %s exists", ns)
		}
	}
	return warning("namespace", "namespace %s does not exist: the controller watches it all the same and finds no VMs there until it is created; check --namespace", ns)
}
