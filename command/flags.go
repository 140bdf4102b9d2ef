// The flags that several commands take, each built here once by a function that binds it to
// a field of the command's configuration: its name, environment variable and default cannot
// drift apart between commands, and a misspelt field does not compile (a misspelt string name
// read zero). A command describes a shared flag in its own terms, so most builders take the
// usage.

package command

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/labels"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/deploy"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// env is a flag's environment variable: VMC_ and the flag's name in upper snake case.
func env(name string) []string { return []string{"VMC_" + name} }

// resourceFlags name the VirtualMachine resource and where its fields are: run, check,
// manifests and the kubectl plugin's verbs.
type resourceFlags struct {
	APIVersion string
	Resource   string
	SchemaFile string
}

// schemaFileUsage is what --schema-file means to the commands that read the map themselves.
const schemaFileUsage = "field-map file: where each field of a VM lives in the resource's CRD; empty: the built-in map of --api-version, or for another group the built-in layout its CRD's schema has"

// The usages of --api-version and --resource where they name the resource the controller
// manages: run, check and manifests.
const (
	apiVersionUsage = "group/version of the VirtualMachine resource"
	resourceUsage   = "plural resource name of the VirtualMachine resource"
)

// flags are the three flags; schemaFile says what --schema-file does for the command.
func (f *resourceFlags) flags(schemaFile string) []cli.Flag {
	return append(f.gvrFlags(apiVersionUsage, resourceUsage), schemaFileFlag(&f.SchemaFile, schemaFile))
}

// gvrFlags are --api-version and --resource; apiVersion and resource say what each is for
// the command.
func (f *resourceFlags) gvrFlags(apiVersion, resource string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "api-version", Value: schema.DefaultAPIVersion, Usage: apiVersion, EnvVars: env("API_VERSION"), Destination: &f.APIVersion},
		&cli.StringFlag{Name: "resource", Value: schema.DefaultResource, Usage: resource, EnvVars: env("RESOURCE"), Destination: &f.Resource},
	}
}

func schemaFileFlag(dst *string, usage string) cli.Flag {
	return &cli.StringFlag{Name: "schema-file", Usage: usage, EnvVars: env("SCHEMA_FILE"), Destination: dst}
}

func (f resourceFlags) gvr() (k8sschema.GroupVersionResource, error) {
	return schema.ParseGVR(f.APIVersion, f.Resource)
}

// fieldMapFromCRD says whether run takes the field map from the resource's CRD: for a group
// other than this project's, without --schema-file, the built-in layout the CRD's schema
// has, read as run starts whatever --watch-crd says (facts.go). Otherwise the flags give it:
// the file, or the built-in map of the version. run, check and manifests decide by it.
func fieldMapFromCRD(schemaFile string, gv k8sschema.GroupVersion) bool {
	return schemaFile == "" && gv.Group != schema.Group
}

// validFieldMap refuses, without reading a file or asking the cluster, flags that give run no
// field map: a version of this project's group that has no built-in map, without
// --schema-file. run and check validate with it, refusing such a version before they reach
// the cluster, and manifests, so that it never renders a Deployment whose run would refuse
// its flags.
func (f resourceFlags) validFieldMap(gv k8sschema.GroupVersion) error {
	if f.SchemaFile != "" || fieldMapFromCRD(f.SchemaFile, gv) {
		return nil
	}
	_, err := flagFields("", gv)
	return err
}

// loadFields returns the field map the flags ask for: the schema file, else the built-in map
// of the version. For a CRD of another group without a file, run and check ask the CRD's
// schema instead (facts.go). A version without a map is refused naming --api-version alone:
// plan's reads no variable, and gives the version of its VM file.
func loadFields(schemaFile string, gv k8sschema.GroupVersion) (schema.Fields, error) {
	return fieldsNaming(schemaFile, gv, "--api-version")
}

// flagFields is loadFields for run, check and manifests, whose --api-version reads
// VMC_API_VERSION: the refusal of a version without a map names the variable when it gave
// the version (flagRef).
func flagFields(schemaFile string, gv k8sschema.GroupVersion) (schema.Fields, error) {
	return fieldsNaming(schemaFile, gv, flagRef("api-version", gv.String()))
}

// fieldsNaming is loadFields with --api-version named as apiVersion.
func fieldsNaming(schemaFile string, gv k8sschema.GroupVersion, apiVersion string) (schema.Fields, error) {
	if schemaFile != "" {
		return schema.LoadFieldMap(schemaFile)
	}
	f, err := schema.ForVersion(gv)
	if err != nil {
		return schema.Fields{}, fmt.Errorf("%s %s: %w", apiVersion, gv, err)
	}
	return f, nil
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

// namespaceFlag is --namespace where it names the VMs' namespace: run and check.
func namespaceFlag(dst *string, usage string) cli.Flag {
	return &cli.StringFlag{Name: "namespace", Usage: usage, EnvVars: env("NAMESPACE"), Destination: dst}
}

// watchNodesFlag is --watch-nodes: run, check, manifests.
func watchNodesFlag(dst *bool, usage string) cli.Flag {
	return &cli.BoolFlag{Name: "watch-nodes", Value: true, Usage: usage, EnvVars: env("WATCH_NODES"), Destination: dst}
}

// watchCRDFlag is --watch-crd: run, check, manifests. Each command's usage is followed by
// watchCRDRelayout, which the watch does whichever command sets it up.
func watchCRDFlag(dst *bool, usage string) cli.Flag {
	return &cli.BoolFlag{Name: "watch-crd", Value: true, Usage: usage + ". " + watchCRDRelayout, EnvVars: env("WATCH_CRD"), Destination: dst}
}

// watchCRDRelayout says what the CRD watch does to a field map chosen from the CRD's schema:
// the controller reads every VM with the layout chosen as it started, and one the schema no
// longer gives would misread them (a VM's reclaim policy not read, its disk deleted with it),
// so the watch stops the controller for a restart to choose again, and without the watch only
// a restart sees the change (docs/field-maps-and-versions.md).
const watchCRDRelayout = "With a field map chosen from the CRD's schema (another group, without --schema-file), the watch also stops the controller (exit 1) when the schema no longer gives that map, so that a restart chooses again; without the watch, restart the controller after changing the CRD's schema"

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
	if err := validLabelOf(flagRef("namespace", f.Namespace), f.Namespace); err != nil {
		return err
	}
	return validLabelOf(flagRef("lease-namespace", f.LeaseNamespace), f.LeaseNamespace)
}

// validLabel refuses a namespace flag's value that no namespace could have; empty passes. It
// names --flag alone: the install commands' --namespace, which calls it, reads
// VMC_INSTALL_NAMESPACE, not the variable flagRef would look at.
func validLabel(flag, value string) error {
	return validLabelOf("--"+flag, value)
}

// validLabelOf is validLabel of the flag that ref names (flagRef).
func validLabelOf(ref, value string) error {
	if value == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(value); len(errs) > 0 {
		return fmt.Errorf("%s %q: %s", ref, value, strings.Join(errs, "; "))
	}
	return nil
}

// selectorFlag is --selector, the label selector of the VMs the controller manages, read from
// VMC_SELECTOR as run's: manifests, which passes it to run; usage says what it is for the
// command.
func selectorFlag(dst *string, usage string) cli.Flag {
	return &cli.StringFlag{Name: "selector", Usage: usage, EnvVars: env("SELECTOR"), Destination: dst}
}

// validSelector refuses a --selector that is no label selector, with the parser and the
// message of run's Validate, which calls it too: manifests calls it so that it never renders a Deployment whose
// run refuses its --selector (TestManifestsSelectorAsRun holds the two to one answer).
func validSelector(selector string) error {
	if _, err := labels.Parse(selector); err != nil {
		return fmt.Errorf("%s: %w", flagRef("selector", selector), err)
	}
	return nil
}

// policyFlags are the decision's settings: run, and plan, which decides as run would.
type policyFlags struct {
	ServerImage       string
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	Resize            string
	StalledAfter      time.Duration
	// EvictionStrategy is --eviction-strategy: what a drain's eviction does to VMs that do
	// not say (docs/eviction.md).
	EvictionStrategy string
}

// evictionStrategyFlag is --eviction-strategy, the strategy of VMs without
// spec.evictionStrategy.
func (p *policyFlags) evictionStrategyFlag() cli.Flag {
	return &cli.StringFlag{Name: "eviction-strategy", Value: string(schema.EvictionNone),
		Usage:   "what a node drain's eviction does to a VM whose spec.evictionStrategy is not set: None (the eviction takes the server; a VM that runs gets a new one), Replace (a new server on another node, with the same disk, once the old one is gone; no backoff), Block (a PodDisruptionBudget keeps the drain waiting until the VM is moved or stopped)",
		EnvVars: env("EVICTION_STRATEGY"), Destination: &p.EvictionStrategy}
}

// serverImageFlag is --server-image, the image of servers of VMs that name none: run and
// plan (policyFlags), and manifests, which passes it to run; usage says what it is for the
// command.
func serverImageFlag(dst *string, usage string) cli.Flag {
	return &cli.StringFlag{Name: "server-image", Value: decision.DefaultPolicy.DefaultImage, Usage: usage, EnvVars: env("SERVER_IMAGE"), Destination: dst}
}

// serverPodSecurityFlag is --server-pod-security, run's, which manifests passes on to it.
func serverPodSecurityFlag(dst *string, usage string) cli.Flag {
	return &cli.StringFlag{Name: "server-pod-security", Value: string(pods.PodSecurityNone), Usage: usage, EnvVars: env("SERVER_POD_SECURITY"), Destination: dst}
}

// validServerPodSecurity refuses a --server-pod-security that is neither none nor restricted:
// run and manifests.
func validServerPodSecurity(v string) error {
	if !pods.PodSecurity(v).Valid() {
		return fmt.Errorf("%s %q: want none or restricted", flagRef("server-pod-security", v), v)
	}
	return nil
}

// validServerImage refuses an empty --server-image: run, plan and manifests.
func validServerImage(image string) error {
	if image == "" {
		return fmt.Errorf("%s must not be empty", flagRef("server-image", image))
	}
	return nil
}

// backoffFlags are --restart-backoff, --max-restart-backoff and --resize: when and how a
// server is replaced.
func (p *policyFlags) backoffFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "restart-backoff", Value: decision.DefaultPolicy.RestartBackoff, Usage: "wait before replacing a failed server; doubles with each consecutive failure",
			EnvVars: env("RESTART_BACKOFF"), Destination: &p.RestartBackoff},
		&cli.DurationFlag{Name: "max-restart-backoff", Value: decision.DefaultPolicy.MaxRestartBackoff, Usage: "longest wait before replacing a failed server; also how long a server must be ready before its failures are no longer counted as consecutive",
			EnvVars: env("MAX_RESTART_BACKOFF"), Destination: &p.MaxRestartBackoff},
		&cli.StringFlag{Name: "resize", Value: string(decision.ResizeInPlace),
			Usage:   "a change of cpu or memory: in-place (resize the running server, replace it where that is impossible), replace (always replace), manual (resize in place, else set RestartRequired and wait for a restart); with --watch-nodes, a running server is kept, with RestartRequired, where no node has room for its replacement",
			EnvVars: env("RESIZE"), Destination: &p.Resize},
	}
}

// stalledAfterFlag is --stalled-after (decision.Policy.StalledAfter): how long a server may
// be stuck (unschedulable, its image not pulled, its containers not created on its node)
// before the VM is Stalled, and how long a migration's server may wait unschedulable, kept off
// the node it leaves, before the migration fails.
func (p *policyFlags) stalledAfterFlag() cli.Flag {
	return &cli.DurationFlag{Name: "stalled-after", Value: decision.DefaultPolicy.StalledAfter,
		Usage:   "how long a server may wait unschedulable, for an image it cannot pull, or on its node with its containers not created (ServerNotStarting, which is said only past this bound) before the VM is Stalled (kstatus: Failed; the server is kept and may still start); also how long the server of a migration may wait unschedulable, kept off the node it leaves, before the migration fails (MigrationFailed: that server is deleted, and the next may run on any node); 0: never",
		EnvVars: env("STALLED_AFTER"), Destination: &p.StalledAfter}
}

func (p policyFlags) validate() error {
	if p.RestartBackoff <= 0 || p.MaxRestartBackoff < p.RestartBackoff {
		return fmt.Errorf("%s must be positive and at most %s", flagRef("restart-backoff", p.RestartBackoff), flagRef("max-restart-backoff", p.MaxRestartBackoff))
	}
	if err := durationsAtMostAYear(namedDuration{"restart-backoff", p.RestartBackoff}, namedDuration{"max-restart-backoff", p.MaxRestartBackoff},
		namedDuration{"stalled-after", p.StalledAfter}); err != nil {
		return err
	}
	if err := validServerImage(p.ServerImage); err != nil {
		return err
	}
	if p.StalledAfter < 0 {
		return fmt.Errorf("%s must not be negative, got %s", flagRef("stalled-after", p.StalledAfter), p.StalledAfter)
	}
	switch decision.ResizeMode(p.Resize) {
	case decision.ResizeInPlace, decision.ResizeReplace, decision.ResizeManual:
	default:
		return fmt.Errorf("%s %q: want in-place, replace or manual", flagRef("resize", p.Resize), p.Resize)
	}
	if !schema.EvictionStrategy(p.EvictionStrategy).Valid() {
		return fmt.Errorf("%s %q: want None, Replace or Block", flagRef("eviction-strategy", p.EvictionStrategy), p.EvictionStrategy)
	}
	return nil
}

// policy is the decision's policy of these flags and --root-disk.
func (p policyFlags) policy(disk rootDiskFlags) decision.Policy {
	// CanResize: plan's in-memory backend resizes in place and keeps disks; run's controller
	// checks both against the backend it is given (reconcile.New).
	return decision.Policy{DefaultImage: p.ServerImage, RestartBackoff: p.RestartBackoff, MaxRestartBackoff: p.MaxRestartBackoff,
		Resize: decision.ResizeMode(p.Resize), CanResize: true, RootDisk: decision.RootDiskMode(disk.RootDisk), StalledAfter: p.StalledAfter,
		Eviction: schema.EvictionStrategy(p.EvictionStrategy)}
}

// rootDiskFlags is --root-disk, where a VM's root disk lives: run and plan (the decision),
// check (the StorageClass check, the RBAC for claims) and manifests (the RBAC, run's flag).
type rootDiskFlags struct {
	RootDisk string
}

// rootDiskFlag is --root-disk; usage says what it is for the command.
func (f *rootDiskFlags) rootDiskFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "root-disk", Value: string(decision.RootDiskClaim), Usage: usage, EnvVars: env("ROOT_DISK"), Destination: &f.RootDisk}
}

func (f rootDiskFlags) validate() error {
	switch decision.RootDiskMode(f.RootDisk) {
	case decision.RootDiskClaim, decision.RootDiskEphemeral:
		return nil
	}
	return fmt.Errorf("%s %q: want claim or ephemeral", flagRef("root-disk", f.RootDisk), f.RootDisk)
}

// claims reports whether each VM gets a disk of its own (a PersistentVolumeClaim).
func (f rootDiskFlags) claims() bool {
	return decision.RootDiskMode(f.RootDisk) != decision.RootDiskEphemeral
}

// rootDiskUsage is what --root-disk means to the commands that decide or run.
const rootDiskUsage = "where a VM's root disk lives: claim (a PersistentVolumeClaim of rootDisk size per VM, which outlives every server and grows in place; docs/disks.md) or ephemeral (the server pod's ephemeral storage, lost with each server)"

// installNamespaceFlag is --namespace where it names the namespace vm-controller is installed
// in (the controller's, the conversion webhook's Service and Secret): manifests, crds,
// webhook. It reads installNamespaceEnv, not VMC_NAMESPACE.
func installNamespaceFlag(dst *string, usage string) *cli.StringFlag {
	return &cli.StringFlag{Name: "namespace", Value: deploy.DefaultNamespace, Usage: usage, EnvVars: []string{installNamespaceEnv}, Destination: dst}
}

// installNamespaceEnv is the variable of the install commands' --namespace. VMC_NAMESPACE,
// which the flag's name would give, is run's and check's --namespace, the VMs': read by
// both, an environment set for run (VMC_NAMESPACE=vms) made manifests install the
// controller into vms and crds point the conversion webhook at a Service there.
const installNamespaceEnv = "VMC_INSTALL_NAMESPACE"

// unreadNamespaceEnv is VMC_NAMESPACE where the install command cc would have read it before
// it had a variable of its own: set, other than namespace (the command's --namespace), and
// that flag not given, on the command line or by its variables; else "". A script that set
// VMC_NAMESPACE for the install commands now installs into the default namespace, and is
// told so.
func unreadNamespaceEnv(cc *cli.Context, namespace string) string {
	vms := os.Getenv("VMC_NAMESPACE")
	if vms == namespace || cc.IsSet("namespace") {
		return ""
	}
	return vms
}

// warnUnreadNamespaceEnv tells, on stderr, where the install command cc does not read
// VMC_NAMESPACE (unreadNamespaceEnv): manifests, crds.
func warnUnreadNamespaceEnv(cc *cli.Context, namespace string) {
	if vms := unreadNamespaceEnv(cc, namespace); vms != "" {
		fmt.Fprintf(cc.App.ErrWriter, "vm-controller %s: warning: VMC_NAMESPACE=%s is not read: it is run's and check's, the VMs' namespace; the install namespace is %s (--namespace, %s)\n",
			cc.Command.Name, vms, namespace, installNamespaceEnv)
	}
}

// conversionFlag is --conversion, the form of the CRD to print: crds, manifests.
func conversionFlag(dst *string, usage string) cli.Flag {
	return &cli.StringFlag{Name: "conversion", Value: "none", Usage: usage, EnvVars: env("CONVERSION"), Destination: dst}
}

// validConversion refuses a --conversion other than none or webhook.
func validConversion(conversion string) error {
	if conversion != "none" && conversion != "webhook" {
		return fmt.Errorf("%s %q: want none or webhook", flagRef("conversion", conversion), conversion)
	}
	return nil
}

// crdFlag is --crd, the name of the CRD the command works on: webhook, migrate.
func crdFlag(dst *string, usage string) cli.Flag {
	return &cli.StringFlag{Name: "crd", Value: crds.DefaultName, Usage: usage, EnvVars: env("CRD"), Destination: dst}
}

// maxDuration bounds the duration flags of run and plan: a year is past any wait, period or
// timeout that makes sense for them, and far below the values at which the arithmetic on
// them breaks. Near time.Duration's range (about 292 years) a doubled restart backoff or a
// usage interval with its 10% of jitter wrapped to a negative wait, and client-go keeps
// --lease-duration in int32 seconds (68 years), which wrapped to a negative Lease the API
// server refuses.
const maxDuration = 365 * 24 * time.Hour

// namedDuration is a duration flag's name and value, for durationsAtMostAYear.
type namedDuration struct {
	name  string
	value time.Duration
}

// durationsAtMostAYear refuses the first duration above maxDuration, naming its flag as
// flagRef does: run and plan.
func durationsAtMostAYear(ds ...namedDuration) error {
	for _, d := range ds {
		if d.value > maxDuration {
			return fmt.Errorf("%s must be at most %s, got %s", flagRef(d.name, d.value), maxDuration, d.value)
		}
	}
	return nil
}

// flagRef is how a refusal names the flag whose value it refuses: --flag, and when the value
// came from the flag's variable rather than the command line, the variable too ("--workers
// (from VMC_WORKERS)"), since a user who set only the variable never typed the flag. cli's
// IsSet is true either way, so the value came from the variable when the variable is set and
// reads as value: the command line, which wins over it, gave none or the same. Every flag
// reads the variable its name gives (TestFlagsHaveEnv) but those of noEnv and renamedEnv,
// whose checks name the flag alone (loadFields, validLabel).
func flagRef(flag string, value any) string {
	name := env(strings.ToUpper(strings.ReplaceAll(flag, "-", "_")))[0]
	if v, ok := os.LookupEnv(name); ok && readsAs(v, value) {
		return fmt.Sprintf("--%s (from %s)", flag, name)
	}
	return "--" + flag
}

// readsAs reports whether text, a variable's value, is value once its flag parses it as cli
// does (an int in any base strconv knows, as IntFlag's base 0). Both are compared as printed,
// so that a NaN is a NaN.
func readsAs(text string, value any) bool {
	var got any
	var err error
	switch value.(type) {
	case string:
		got = text
	case int:
		var n int64
		n, err = strconv.ParseInt(text, 0, 64)
		got = int(n)
	case float64:
		got, err = strconv.ParseFloat(text, 64)
	case time.Duration:
		got, err = time.ParseDuration(text)
	default:
		return false
	}
	return err == nil && fmt.Sprint(got) == fmt.Sprint(value)
}
