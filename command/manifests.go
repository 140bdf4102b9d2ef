// The manifests command: everything to deploy vm-controller, printed for the flags given.

package command

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/access"
	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/deploy"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// imageRepository is the repository of the controller's image, as `make image` names it.
const imageRepository = "ghcr.io/cloudnative-czs/vm-controller"

// manifestsConfig is the manifests command's configuration.
type manifestsConfig struct {
	resourceFlags
	rootDiskFlags
	Namespace      string
	WatchNamespace string
	Image          string
	Replicas       int
	WatchNodes     bool
	Usage          bool
	WatchCRD       bool
	ServerImage    string
	// ServerPodSecurity is run's --server-pod-security, passed on unless it is none.
	ServerPodSecurity string
	Conversion        string // none or webhook
	// StorageVersion is the version the webhook form of the CRD stores objects in, as crds'
	// --storage-version: an upgrade that applied v1alpha1 over a CRD migrated to v1 undid the
	// migration.
	StorageVersion  string
	WebhookReplicas int
	// Selector is run's --selector, passed on unless empty: the VMs this install manages, so
	// that several installs split them from their first pod on (docs/several-installs.md).
	Selector string
}

// manifestsCommand is the manifests command; version is this build's, whose image --image
// names by default.
func manifestsCommand(c *manifestsConfig, version string) *cli.Command {
	flags := append(c.resourceFlags.gvrFlags(apiVersionUsage, resourceUsage+"; for "+schema.Group+", whose CRD manifests ships, that CRD's plural ("+schema.DefaultResource+"); for another group, whose CRD its owner ships, the plural it serves"),
		installNamespaceFlag(&c.Namespace, "namespace the controller runs in (created unless default or kube-system)"),
		&cli.StringFlag{Name: "watch-namespace", Usage: "manage VMs in this namespace only, with namespace-scoped RBAC; empty: all namespaces. It must not be --namespace: deleting it would take the controller's ServiceAccount and Lease before the VMs' finalizers are removed", EnvVars: env("WATCH_NAMESPACE"), Destination: &c.WatchNamespace},
		selectorFlag(&c.Selector, "run's --selector: manage only the VMs this label selector matches (e.g. shard=a), from the Deployment's first pod on; empty: every VM. Give each of several installs its own (docs/several-installs.md)"),
		&cli.StringFlag{Name: "image", Value: imageRepository + ":" + imageTag(version), Usage: "the controller's container image", EnvVars: env("IMAGE"), Destination: &c.Image},
		&cli.IntFlag{Name: "replicas", Value: 2, Usage: "replicas; one leads, the others stand by", EnvVars: env("REPLICAS"), Destination: &c.Replicas},
		watchNodesFlag(&c.WatchNodes, "grant read access to nodes and run with --watch-nodes (lost nodes show as Unknown)"),
		&cli.BoolFlag{Name: "usage", Value: true, Usage: "grant read access to metrics.k8s.io pods and sample usage (run's --usage-interval); false: --usage-interval=0", EnvVars: env("USAGE"), Destination: &c.Usage},
		watchCRDFlag(&c.WatchCRD, "grant read access to the resource's CRD and run with --watch-crd (follows the CRD's deletion and return)"),
		serverImageFlag(&c.ServerImage, "run's --server-image, the container image of server pods; passed to run unless it is the default"),
		serverPodSecurityFlag(&c.ServerPodSecurity, "run's --server-pod-security, the securityContext of server pods (none or restricted); passed to run unless none"),
		schemaFileFlag(&c.SchemaFile, "field-map file to ship in a ConfigMap and run with (--schema-file); empty: the built-in map of --api-version"),
		conversionFlag(&c.Conversion, "none: the plain CRD (v1alpha1, v1beta1); webhook: the CRD with v1 and webhook conversion, and the webhook's Deployment, Service, PodDisruptionBudget and RBAC (docs/versions.md)"),
		storageVersionFlag(&c.StorageVersion),
		c.rootDiskFlag("run's --root-disk: claim grants access to PersistentVolumeClaims, StorageClasses (cluster-wide) and Events; ephemeral runs with --root-disk=ephemeral and grants only "+ephemeralClaimVerbs()+" on PersistentVolumeClaims (the claims made before, kept or deleted as their reclaim policy says)"),
		&cli.IntFlag{Name: "webhook-replicas", Value: 2, Usage: "replicas of the conversion webhook (--conversion webhook); all of them serve. From 2 on, a PodDisruptionBudget (minAvailable 1) has a drain evict them one at a time; 1 gets none, which would hold every drain of its node", EnvVars: env("WEBHOOK_REPLICAS"), Destination: &c.WebhookReplicas},
	)
	return &cli.Command{
		Name:         "manifests",
		Usage:        "print the CRD, ServiceAccount, RBAC and Deployment to run vm-controller in a cluster (vm-controller manifests | kubectl apply -f -)",
		Flags:        flags,
		OnUsageError: usageError,
		Action:       action(c, noArgs, func(cc *cli.Context) error { return printManifests(cc, *c) }),
	}
}

// ephemeralClaimVerbs are the verbs on PersistentVolumeClaims the RBAC grants under
// --root-disk ephemeral ("get, list, watch, patch and delete"), read from access, which the
// manifests grant: --help once left out get.
func ephemeralClaimVerbs() string {
	for _, r := range access.Rules(access.Needs{Disks: false}) {
		if r.Group == "" && r.Resource == "persistentvolumeclaims" {
			return andList(r.Verbs)
		}
	}
	return "nothing"
}

// andList is "a, b and c".
func andList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// Validate checks the flags that can be checked without reading a file; each error names
// the flag.
func (c manifestsConfig) Validate() error {
	gvr, err := c.gvr()
	if err != nil {
		return err
	}
	// The Deployment runs run with these flags: refuse here what run would refuse there,
	// after the CRD and the RBAC were applied.
	if err := c.validFieldMap(gvr.GroupVersion()); err != nil {
		return err
	}
	if err := shippedResource(gvr); err != nil {
		return err
	}
	if err := validSelector(c.Selector); err != nil {
		return err
	}
	if fieldMapFromCRD(c.SchemaFile, gvr.GroupVersion()) && !c.WatchCRD {
		return fmt.Errorf("--watch-crd=false grants no read of CRD %s, from whose schema run chooses the field map of %s without --schema-file: give --schema-file, or keep --watch-crd",
			crds.Name(gvr), gvr.GroupVersion())
	}
	if c.Image == "" {
		return errors.New("--image must not be empty")
	}
	if err := validServerImage(c.ServerImage); err != nil {
		return err
	}
	if err := validServerPodSecurity(c.ServerPodSecurity); err != nil {
		return err
	}
	if err := validLabel("namespace", c.Namespace); err != nil {
		return err
	}
	if err := validLabel("watch-namespace", c.WatchNamespace); err != nil {
		return err
	}
	if err := ownNamespace(c.Namespace, c.WatchNamespace); err != nil {
		return err
	}
	if c.Replicas < 1 {
		return fmt.Errorf("--replicas must be at least 1, got %d", c.Replicas)
	}
	if err := replicasFit("replicas", c.Replicas); err != nil {
		return err
	}
	if err := validConversion(c.Conversion); err != nil {
		return err
	}
	if err := validStorageVersion(c.Conversion, c.StorageVersion); err != nil {
		return err
	}
	if err := c.rootDiskFlags.validate(); err != nil {
		return err
	}
	switch c.Conversion {
	case "none":
		// The plain CRD serves no v1: a controller on it would find nothing to watch.
		if gvr.Group == schema.Group && gvr.Version == "v1" {
			return fmt.Errorf("--api-version %s needs --conversion webhook: the plain CRD does not serve v1", gvr.GroupVersion())
		}
	case "webhook":
		if gvr.Group != schema.Group {
			return fmt.Errorf("--conversion webhook renders the CRD of %s; the CRD of %s is its owner's to ship", schema.Group, gvr.Group)
		}
		if c.WebhookReplicas < 1 {
			return fmt.Errorf("--webhook-replicas must be at least 1, got %d", c.WebhookReplicas)
		}
		if err := replicasFit("webhook-replicas", c.WebhookReplicas); err != nil {
			return err
		}
	}
	return nil
}

// shippedResource refuses, for this project's group, a --resource other than the plural of the
// CRD manifests ships for it: the RBAC and run's --resource would name a resource the CRD
// does not serve (vms where it serves virtualmachines), and run, failing discovery, would
// crash-loop. The CRD is not renamed to fit: a plural gives no kind, singular or short name to
// rename the rest by, and a copy under another plural in the same group keeps the kind
// VirtualMachine, which the API server does not accept twice in a group. Several CRDs are
// several groups: a CRD of another group is its owner's to ship, manifests leaves it out, and
// its --resource is whatever it serves.
func shippedResource(gvr k8sschema.GroupVersionResource) error {
	if gvr.Group != schema.Group || gvr.Resource == schema.DefaultResource {
		return nil
	}
	return fmt.Errorf("--resource %s: the CRD manifests ships for %s (%s) serves %s: give --resource %s; a CRD of another group, which manifests leaves to its owner, takes its own --api-version and --resource",
		gvr.Resource, schema.Group, crds.DefaultName, schema.DefaultResource, schema.DefaultResource)
}

// ownNamespace refuses a controller installed in the namespace it watches. Deleting that
// namespace deletes the controller's ServiceAccount and its Lease along with the VMs: the
// controller is refused (Unauthorized), loses its Lease and exits before it has removed the
// VMs' finalizers, so the namespace stays Terminating for good. Installed elsewhere, the
// controller sees the namespace go and lets its VMs go with it (reconcile/namespaces.go).
func ownNamespace(namespace, watchNamespace string) error {
	if watchNamespace == "" || watchNamespace != namespace {
		return nil
	}
	own := deploy.DefaultNamespace
	if own == watchNamespace {
		own = watchNamespace + "-controller"
	}
	return fmt.Errorf("--namespace %s is the namespace --watch-namespace watches: deleting it would delete the controller's ServiceAccount and Lease before the controller removed its VMs' finalizers, and it would stay Terminating; install the controller in a namespace of its own, such as --namespace %s --watch-namespace %s",
		namespace, own, watchNamespace)
}

// printManifests renders everything to deploy and prints it.
func printManifests(cc *cli.Context, c manifestsConfig) error {
	warnUnreadNamespaceEnv(cc, c.Namespace)
	gvr, err := c.gvr()
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	o := deploy.Options{GVR: gvr, Namespace: c.Namespace, WatchNamespace: c.WatchNamespace, Selector: c.Selector,
		Image: c.Image, Replicas: int32(c.Replicas), WatchNodes: c.WatchNodes, WatchCRD: c.WatchCRD, Usage: c.Usage, Disks: c.claims()}
	// The default is left to run: the image --image names may be of another version, with
	// a default of its own.
	if c.ServerImage != decision.DefaultPolicy.DefaultImage {
		o.Args = append(o.Args, "--server-image="+c.ServerImage)
	}
	if c.ServerPodSecurity != string(pods.PodSecurityNone) {
		o.Args = append(o.Args, "--server-pod-security="+c.ServerPodSecurity)
	}
	if c.SchemaFile != "" {
		// Validated as run would, so a broken map fails here and not in the cluster.
		if _, err := schema.LoadFieldMap(c.SchemaFile); err != nil {
			return cli.Exit(err.Error(), 2)
		}
		if o.FieldMap, err = os.ReadFile(c.SchemaFile); err != nil {
			return cli.Exit(err.Error(), 2)
		}
	}
	// The CRD ships only for this project's own group; another group brings its own.
	switch {
	case c.Conversion == "webhook":
		if o.CRD, err = crds.WithWebhook(crds.Webhook{Namespace: c.Namespace, StorageVersion: c.StorageVersion}); err != nil {
			return fmt.Errorf("render the CRD: %w", err)
		}
		o.Webhook = &deploy.Webhook{Replicas: int32(c.WebhookReplicas), Service: crds.WebhookService, Port: crds.WebhookPort,
			Secret: crds.WebhookService + "-tls", CRD: crds.DefaultName, ShutdownDelay: defaultWebhookShutdownDelay, ShutdownTimeout: webhookShutdownTimeout}
	case gvr.Group == schema.Group:
		if o.CRD, err = crds.YAML(); err != nil {
			return fmt.Errorf("read embedded CRDs: %w", err)
		}
	}
	out, err := deploy.Render(o)
	if err != nil {
		return err
	}
	_, err = cc.App.Writer.Write(out)
	return err
}

// imageTag is the tag of the image of this build of version: the one `make image` gives the
// image it builds from the same commit, so that the default --image names it however this
// binary was built.
func imageTag(version string) string {
	var revision string
	var modified bool
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	return imageTagOf(version, revision, modified)
}

var (
	// pseudoVersion is a Go pseudo-version, the version go build and go install give a
	// commit that no release tag names (v0.0.0-20261124213112-e4239af6be4a, or after a
	// release v1.2.4-0.20261124213112-e4239af6be4a), with the +dirty go build adds for a
	// modified tree; the group is the commit's 12 hex digits.
	pseudoVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+-(?:[0-9A-Za-z.-]*\.)?[0-9]{14}-([0-9a-f]{12})(\+dirty)?$`)
	// describedVersion is what git describe --tags prints for a commit after a tag
	// (v1.2.3-4-ge4239af, -dirty for a modified tree); the group is the abbreviated commit.
	describedVersion = regexp.MustCompile(`^.+-[0-9]+-g([0-9a-f]{7,})(-dirty)?$`)
	// hashVersion is what git describe --always prints for a commit no tag precedes: the
	// abbreviated commit, 7 hex digits or more where 7 would be ambiguous (e4239af6), -dirty
	// for a modified tree; the group is the abbreviation. A release starts with v, so it is
	// never taken for one.
	hashVersion = regexp.MustCompile(`^([0-9a-f]{7,40})(-dirty)?$`)
)

// imageTagOf is the image tag of a build of version (buildVersion: the Makefile's VERSION,
// stamped with -ldflags, else Go's version of the module) from revision (vcs.revision; empty:
// unknown), modified or not (vcs.modified). A commit has one tag however it was built:
//
//   - a release is its version (v1.2.3; v1.2.3-dirty from a modified tree, as git describe
//     --dirty says where Go says v1.2.3+dirty);
//   - any other commit, which Go calls by a pseudo-version or (devel) and git describe by an
//     abbreviation (7 hex digits or more), alone or after the last tag, is the commit's first
//     7 hex digits, with -dirty from a modified tree (e4239af, e4239af-dirty);
//   - a build whose commit nothing records is latest.
//
// Any other "+" becomes "_", which a tag allows. revision and modified count only for a
// pseudo-version or no version; for the rest the version alone decides, as it does for
// tools/image's Tag, which `make image` tags with: testdata/image-tags.txt holds the cases,
// and the tests of both read it.
func imageTagOf(version, revision string, modified bool) string {
	dirty := ""
	if m := pseudoVersion.FindStringSubmatch(version); m != nil {
		if revision == "" {
			revision, modified = m[1], m[2] != ""
		}
	} else if version != "" && version != "devel" && version != "(devel)" {
		if m := describedVersion.FindStringSubmatch(version); m != nil {
			return m[1][:7] + m[2]
		}
		if m := hashVersion.FindStringSubmatch(version); m != nil {
			return m[1][:7] + m[2]
		}
		if v, ok := strings.CutSuffix(version, "+dirty"); ok {
			version, dirty = v, "-dirty"
		}
		return strings.ReplaceAll(version, "+", "_") + dirty
	}
	if len(revision) < 7 {
		return "latest"
	}
	if modified {
		dirty = "-dirty"
	}
	return revision[:7] + dirty
}

// replicasFit refuses a count of replicas a Deployment cannot hold: its replicas are int32,
// and the conversion wrapped (4294967297 rendered 1, 3000000000 a negative count).
func replicasFit(flag string, n int) error {
	if n > math.MaxInt32 {
		return fmt.Errorf("--%s must be at most %d (a Deployment's replicas are int32), got %d", flag, math.MaxInt32, n)
	}
	return nil
}
