// The cluster facts: what run and check learn from the cluster before the controller starts,
// gathered in one pass into one value. check prints them as a table; run stops on a failed
// one (its preflight) and starts from the rest. Each is asked once: the resource's CRD is
// read at most once per start, by whichever fact needs it first (the field map a CRD of
// another group's schema chooses, then the CRD check), and the status route comes from the
// same read.

package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/cloudnative-czs/vm-controller/access"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// target is what the facts are about: the flags run and check share.
type target struct {
	gvr            k8sschema.GroupVersionResource
	schemaFile     string // --schema-file; empty: built in, or chosen by the CRD's schema
	namespace      string // "" for all namespaces
	watchNodes     bool
	watchCRD       bool
	leaderElect    bool
	leaseNamespace string // with leaderElect
	usage          bool
	claims         bool // --root-disk claim
	// reviewAs is check's --service-account: whose permissions the rbac rows review; nil:
	// the kubeconfig's identity (run's own, and in the controller's pod its ServiceAccount).
	reviewAs *serviceAccount
}

// targetOf reads the target from the flags run and check share. Without --lease-namespace
// the Lease is in the namespace a client of the kubeconfig defaults to.
func targetOf(cluster clusterFlags, r resourceFlags, a accessFlags, d rootDiskFlags, gvr k8sschema.GroupVersionResource) (target, error) {
	t := target{gvr: gvr, schemaFile: r.SchemaFile, namespace: a.Namespace, watchNodes: a.WatchNodes,
		watchCRD: a.WatchCRD, leaderElect: a.LeaderElect, leaseNamespace: a.LeaseNamespace,
		usage: a.UsageInterval > 0, claims: d.claims()}
	if t.leaderElect && t.leaseNamespace == "" {
		ns, err := cluster.namespace()
		if err != nil {
			return t, err
		}
		t.leaseNamespace = ns
	}
	return t, nil
}

// fieldsFromFlags says whether the field map comes from the flags alone (a file, or the
// built-in map of this project's group), so that failing to get it is the flags' fault.
func (t target) fieldsFromFlags() bool { return !fieldMapFromCRD(t.schemaFile, t.gvr.GroupVersion()) }

func (t target) needs() access.Needs {
	return access.Needs{GVR: t.gvr, WatchNodes: t.watchNodes, WatchCRD: t.watchCRD, LeaderElect: t.leaderElect, Usage: t.usage, Disks: t.claims, Namespace: t.namespace}
}

// facts are what the cluster says about the target.
type facts struct {
	fields schema.Fields
	// layout is the built-in layout the CRD's schema chose, with why, for check's table, run's
	// log and the controller, which holds the CRD to it (reconcile.CRD.Layout); nil
	// unless the schema chose one.
	layout *crds.Layout
	// noStatus: the CRD was read and judged (--watch-crd), and its version has no /status
	// subresource, so the controller writes status through the main resource.
	noStatus bool
	// checks are check's rows, in order: the layout (when chosen), discovery, crd, fields,
	// storage (under --root-disk claim), lease (a Lease in the watched namespace), and one
	// per RBAC rule.
	checks []checkResult
}

// failures is run's preflight: nil when no check failed, else every failed check's message.
// A controller that cannot work fails at once rather than retrying in the background.
func (f facts) failures() error {
	var failed checkFailures
	for _, r := range f.checks {
		if r.failed() {
			failed = append(failed, r.detail)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return failed
}

// checkFailures is the error of a failed preflight: each failed check's message on a line of
// its own. main prefixes the first line with the program's name; the others get it here, so
// every line reads on its own in a log.
type checkFailures []string

func (f checkFailures) Error() string { return strings.Join(f, "\nvm-controller: ") }

// gather asks the cluster at host, through clients whose requests are bounded (checked), for
// the facts of t. A check that needs one that failed is skipped, so that one cause gives one
// failure: no CRD checks on a resource the cluster does not serve, nothing at all on a
// cluster that does not answer. The error is a field map that cannot be had, without which
// nothing can be checked: the flags' file or version, or one the cluster's CRD does not give
// (give --schema-file). A cluster that does not answer cannot say whether its CRD gives one:
// that is its failed check, as for any field map, not the flags' fault.
func gather(ctx context.Context, cl apiClients, host string, t target) (facts, error) {
	g := &gatherer{cl: cl, t: t}
	var f facts
	fields, layout, noMap := g.fieldMap(ctx)
	if noMap != nil && t.fieldsFromFlags() {
		return facts{}, noMap
	}
	f.fields, f.layout = fields, layout
	if f.layout != nil {
		// The map was chosen by the CRD's schema: say which, before the checks that use it.
		f.checks = append(f.checks, pass("fieldmap", "%s", f.layout.Why))
	}
	// The CRD may say why a group's version is not served; it is read for that only where
	// it is read anyway (--watch-crd, or a field map chosen from it).
	var readCRD func() ([]byte, error)
	if t.watchCRD || !t.fieldsFromFlags() {
		readCRD = func() ([]byte, error) { return g.crd(ctx) }
	}
	var disc checkResult
	var answered bool
	if noMap != nil && g.err != nil && !apiAnswer(g.err) {
		// The read of the CRD had no answer: asking discovery would wait for none again.
		disc = unreachableRow(host, g.err)
	} else {
		disc, answered = checkDiscovery(ctx, cl.kube, host, t.gvr, readCRD)
	}
	if noMap != nil && answered {
		return facts{}, noMap // the cluster answered, and its CRD gives no map
	}
	f.checks = append(f.checks, disc)
	if !disc.ok && !answered {
		for _, n := range []string{"crd", "fields", "rbac"} {
			f.checks = append(f.checks, checkResult{name: n, skipped: true, detail: "the cluster does not answer"})
		}
		return f, nil
	}
	switch {
	case !t.watchCRD:
		f.checks = append(f.checks,
			checkResult{name: "crd", skipped: true, detail: "--watch-crd=false: the CRD is not read"},
			checkResult{name: "fields", skipped: true, detail: "--watch-crd=false: the CRD is not read"})
	case disc.ok:
		def, err := g.crd(ctx)
		if err != nil {
			f.checks = append(f.checks, fail("crd", "cannot read CRD %s: %v", crds.Name(t.gvr), err),
				checkResult{name: "fields", skipped: true, detail: "no CRD to read"})
			break
		}
		f.checks = append(f.checks, judgeCRD(crds.Name(t.gvr), def, t.gvr.Version, f.fields)...)
		f.noStatus = crds.Served(def, t.gvr.Version) == nil && crds.StatusSubresource(def, t.gvr.Version) != nil
	default:
		f.checks = append(f.checks,
			checkResult{name: "crd", skipped: true, detail: "the resource is not served"},
			checkResult{name: "fields", skipped: true, detail: "the resource is not served"})
	}
	if t.claims {
		f.checks = append(f.checks, checkStorage(ctx, cl.kube))
	}
	if r, ok := checkLeaseNamespace(t); ok {
		f.checks = append(f.checks, r)
	}
	f.checks = append(f.checks, checkAccess(ctx, cl.kube, t.needs(), t.namespace, t.leaseNamespace, t.reviewAs)...)
	return f, nil
}

// checkStorage looks for the cluster's default StorageClass, in which a VM's disk is made
// when the VM names no class of its own. None is a warning, not a failure: VMs that name a
// class have their disks, and the others wait for theirs (WaitingForDisk) until a default is
// set.
func checkStorage(ctx context.Context, kube kubernetes.Interface) checkResult {
	warn := func(format string, args ...any) checkResult { return warning("storage", format, args...) }
	list, err := kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return warn("cannot list StorageClasses to find the default one (%v): a VM that names no class gets its disk only if the cluster has a default", err)
	}
	var defaults []string
	for _, sc := range list.Items {
		if sc.Annotations[defaultClassAnnotation] == "true" {
			defaults = append(defaults, sc.Name)
		}
	}
	switch len(defaults) {
	case 0:
		return warn("the cluster has no default StorageClass: the disk of a VM that names no class (spec.rootDiskStorageClassName; v1: spec.rootDisk.storageClassName) never binds, and the VM waits for it; mark a class default (%s: \"true\") or run with --root-disk ephemeral",
			defaultClassAnnotation)
	case 1:
		return pass("storage", "StorageClass %s is the cluster's default: the disk of a VM that names no class is made in it", defaults[0])
	}
	return pass("storage", "StorageClasses %s are marked default; Kubernetes makes a disk that names no class in the newest of them", strings.Join(defaults, ", "))
}

// checkLeaseNamespace warns, when there is a leader Lease, that it is in the one namespace
// watched: deleting that namespace deletes the Lease (and the ServiceAccount of a controller
// that runs there) along with the VMs, so the controller loses its Lease and exits before it
// has removed their finalizers, and the namespace stays Terminating. It works until then,
// hence a warning; ok is false when there is nothing to say.
func checkLeaseNamespace(t target) (r checkResult, ok bool) {
	if !t.leaderElect || t.namespace == "" || t.leaseNamespace != t.namespace {
		return checkResult{}, false
	}
	return warning("lease", "the leader Lease is in %s, the namespace watched: deleting %s deletes the Lease, and the ServiceAccount of a controller that runs there, before the controller has removed its VMs' finalizers, and %s stays Terminating; run the controller in a namespace of its own (--lease-namespace; manifests --namespace vm-controller --watch-namespace %s)",
		t.namespace, t.namespace, t.namespace, t.namespace), true
}

// defaultClassAnnotation marks a StorageClass as the cluster's default.
const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// gatherer keeps what one gather has read, so that the CRD is read once.
type gatherer struct {
	cl  apiClients
	t   target
	def []byte // the CRD as JSON, once read
	err error  // why it could not be read
	got bool   // read (or tried)
}

// crd returns the target's CRD as JSON, as the API server returned it, reading it the first
// time only.
func (g *gatherer) crd(ctx context.Context) ([]byte, error) {
	if g.got {
		return g.def, g.err
	}
	g.got = true
	u, err := g.cl.dynamic.Resource(crds.GVR).Get(ctx, crds.Name(g.t.gvr), metav1.GetOptions{})
	if err == nil {
		g.def, err = json.Marshal(u.Object)
	}
	g.err = err
	return g.def, g.err
}

// fieldMap returns the field map: --schema-file, else the built-in map of the version, else
// for a CRD of another group the built-in layout its schema has (crds.ChooseLayout), which it
// returns too, with why it was chosen (nil for the others).
func (g *gatherer) fieldMap(ctx context.Context) (fields schema.Fields, chosen *crds.Layout, err error) {
	gvr := g.t.gvr
	if g.t.fieldsFromFlags() {
		fields, err = flagFields(g.t.schemaFile, gvr.GroupVersion())
		return fields, nil, err
	}
	def, err := g.crd(ctx)
	if err != nil {
		_, noMap := flagFields("", gvr.GroupVersion())
		return schema.Fields{}, nil, fmt.Errorf("%w (and CRD %s, whose schema could choose a built-in layout, cannot be read: %w)", noMap, crds.Name(gvr), err)
	}
	l, err := crds.ChooseLayout(def, gvr.Version)
	if err != nil {
		return schema.Fields{}, nil, fmt.Errorf("%s %s without --schema-file: CRD %s: %w", flagRef("api-version", gvr.GroupVersion().String()), gvr.GroupVersion(), crds.Name(gvr), err)
	}
	return l.Fields, &l, nil
}

// checkResult is one row of the check table.
type checkResult struct {
	name    string // fieldmap, discovery, crd, fields, storage, lease, rbac
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

// warning is a check that passed with a caveat, which the detail names.
func warning(name, format string, args ...any) checkResult {
	r := pass(name, format, args...)
	r.warn = true
	return r
}

func fail(name, format string, args ...any) checkResult {
	return checkResult{name: name, detail: fmt.Sprintf(format, args...)}
}

// checkDiscovery checks that the cluster at host answers (answered) and serves the resource
// (ok). When it does not serve the version, readCRD, unless nil, reads the resource's CRD to
// say why.
func checkDiscovery(ctx context.Context, kube kubernetes.Interface, host string, gvr k8sschema.GroupVersionResource, readCRD func() ([]byte, error)) (r checkResult, answered bool) {
	list, err := kube.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		if apierrors.IsNotFound(err) || strings.Contains(err.Error(), "the server could not find the requested resource") {
			if served := servedVersions(ctx, kube, gvr.Group); len(served) > 0 {
				return fail("discovery", "%s", versionNotServed(host, gvr, served, readCRD)), true
			}
			return fail("discovery", "the cluster at %s does not serve %s: install the CRD first (vm-controller crds | kubectl apply -f -)", host, gvr.GroupVersion()), true
		}
		if apierrors.IsUnauthorized(err) {
			return fail("discovery", "the cluster at %s refused the credentials (401 Unauthorized): check the kubeconfig's user, token or certificate", host), false
		}
		return unreachableRow(host, err), false
	}
	for _, res := range list.APIResources {
		if res.Name == gvr.Resource {
			if !res.Namespaced {
				return fail("discovery", "%s is cluster-scoped; vm-controller manages namespaced resources", gvr.GroupResource()), true
			}
			return pass("discovery", "the cluster at %s serves %s in %s", host, gvr.Resource, gvr.GroupVersion()), true
		}
	}
	return fail("discovery", "the cluster at %s serves %s but no resource %q in it", host, gvr.GroupVersion(), gvr.Resource), true
}

// unreachableRow is the discovery row of a cluster at host that gave no answer (err).
func unreachableRow(host string, err error) checkResult {
	return fail("discovery", "cannot reach the cluster at %s: %v", host, err)
}

// apiAnswer reports whether err is the API server's answer (a status, whatever its code),
// not the want of one: a connection refused, a timeout, a TLS handshake that failed.
func apiAnswer(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

// servedVersions are the versions the cluster serves of group, asked of discovery
// (/apis/GROUP); none when it serves none of them, or cannot say.
func servedVersions(ctx context.Context, kube kubernetes.Interface, group string) []string {
	rc := kube.Discovery().RESTClient()
	if rc == nil {
		return nil
	}
	var g metav1.APIGroup
	if err := rc.Get().AbsPath("/apis", group).Do(ctx).Into(&g); err != nil {
		return nil
	}
	out := make([]string, 0, len(g.Versions))
	for _, v := range g.Versions {
		out = append(out, v.Version)
	}
	return out
}

// versionNotServed says why the cluster at host serves gvr's group in the versions served
// and not in gvr's, and what serves it. "Install the CRD" would be wrong: the CRD is there.
// The CRD, when readCRD can read it, tells a version set served: false from one it lacks
// (crds.Served's errors); this project's CRD lacks v1 in its plain form, which only the form
// with webhook conversion has (docs/versions.md).
func versionNotServed(host string, gvr k8sschema.GroupVersionResource, served []string, readCRD func() ([]byte, error)) string {
	name, version := crds.Name(gvr), gvr.Version
	head := fmt.Sprintf("the cluster at %s serves %s in %s, not %s", host, gvr.Group, strings.Join(served, ", "), version)
	another := fmt.Sprintf("give --api-version %s/%s", gvr.Group, served[0])
	webhookForm := fmt.Sprintf("run the webhook and apply that form (vm-controller crds --conversion webhook --namespace NS | kubectl apply -f -; docs/versions.md), or %s", another)
	ownWebhookVersion := gvr.Group == schema.Group && crds.WebhookOnly(version)
	var def []byte
	var err error
	if readCRD != nil {
		def, err = readCRD()
	}
	switch {
	case (readCRD == nil || err != nil) && ownWebhookVersion:
		return fmt.Sprintf("%s: %s is only in the form of CRD %s with webhook conversion (unless that form is applied with %s served: false): %s", head, version, name, version, webhookForm)
	case readCRD == nil || err != nil:
		return fmt.Sprintf("%s: CRD %s has no version %s, or sets it served: false: %s, or serve %s in the CRD", head, name, version, another, version)
	}
	switch err := crds.Served(def, version); {
	case errors.Is(err, crds.ErrNoVersion) && ownWebhookVersion:
		return fmt.Sprintf("%s: CRD %s is in its plain form, without %s, which only its form with webhook conversion has: %s", head, name, version, webhookForm)
	case errors.Is(err, crds.ErrNoVersion):
		return fmt.Sprintf("%s: CRD %s has no version %s: %s, or add %s to the CRD", head, name, version, another, version)
	case errors.Is(err, crds.ErrNotServed):
		return fmt.Sprintf("%s: CRD %s has %s with served: false: set it served: true (kubectl edit crd %s), or %s", head, name, version, name, another)
	case err != nil: // not Established, or not a CRD as JSON
		return fmt.Sprintf("%s: %v", head, err)
	}
	return fmt.Sprintf("%s: CRD %s serves it, and discovery does not list it yet: try again", head, name)
}

// judgeCRD is the verdict on the CRD read, as JSON: it serves the version (as the
// controller's CRD watch will judge it), has the status subresource, and its schema has the
// field map's paths.
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
	if err := crds.UnmappedReclaimPolicy(def, version, f); err != nil {
		errs = append(errs, err)
	}
	for _, err := range errs {
		out = append(out, fail("fields", "field map: %v", err))
	}
	if len(errs) == 0 {
		out = append(out, pass("fields", "the %d paths of the field map are in the schema of %s", n, version))
	}
	return out
}

// checkAccess asks the API server whether the identity checked (reviewer) may do what the
// controller does (access.Rules, the same rules the deployment manifests grant): one row per
// rule. When the API server refuses the reviews themselves, that is the one row: every rule
// would fail for it alike, and say nothing of the identity's permissions.
func checkAccess(ctx context.Context, kube kubernetes.Interface, needs access.Needs, namespace, leaseNamespace string, as *serviceAccount) []checkResult {
	rv := reviewer{kube: kube, as: as}
	rules := access.Rules(needs)
	out := make([]checkResult, len(rules))
	refused := make([]error, len(rules))
	var wg sync.WaitGroup
	for i, rule := range rules {
		ns := namespace
		if rule.Own {
			ns = leaseNamespace
		}
		wg.Go(func() { out[i], refused[i] = checkRule(ctx, rv, rule, ns) })
	}
	wg.Wait()
	for _, err := range refused {
		if err != nil {
			return []checkResult{rv.refused(err)}
		}
	}
	return out
}

// serviceAccount is a ServiceAccount, by namespace and name: check's --service-account.
type serviceAccount struct {
	Namespace, Name string
}

func (s serviceAccount) String() string { return s.Namespace + "/" + s.Name }

// user and groups are what the API server authenticates the ServiceAccount's token as: its
// RBAC is that of the bindings to any of them (a RoleBinding to the group
// system:serviceaccounts:NS grants it too).
func (s serviceAccount) user() string { return "system:serviceaccount:" + s.Namespace + ":" + s.Name }

func (s serviceAccount) groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"}
}

// reviewer asks the API server whether an identity may do one thing: the kubeconfig's own,
// with a SelfSubjectAccessReview, which every authenticated user may create; or a
// ServiceAccount's, with a SubjectAccessReview, which takes create on subjectaccessreviews
// (a cluster admin's), so that an administrator can check the controller's permissions
// rather than their own, which allow everything.
type reviewer struct {
	kube kubernetes.Interface
	as   *serviceAccount // nil: the kubeconfig's identity
}

// allowed reports whether the identity may do what attrs say.
func (r reviewer) allowed(ctx context.Context, attrs authorizationv1.ResourceAttributes) (bool, error) {
	if r.as == nil {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
		res, err := r.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return res.Status.Allowed, nil
	}
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &attrs, User: r.as.user(), Groups: r.as.groups()}}
	res, err := r.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return res.Status.Allowed, nil
}

// whose is the identity in a row's detail: "" for the kubeconfig's, which the command's
// description names; the ServiceAccount, named in every row, so that a row read alone
// (a log, a ticket) says whose permissions it is about.
func (r reviewer) whose() string {
	if r.as == nil {
		return ""
	}
	return "ServiceAccount " + r.as.String() + ": "
}

// refused is the one rbac row when the API server refused the reviews (err, a 403).
func (r reviewer) refused(err error) checkResult {
	if r.as == nil {
		return fail("rbac", "cannot review the kubeconfig's access: %v", err)
	}
	return fail("rbac", "cannot review the access of ServiceAccount %s: %v; --service-account takes create on subjectaccessreviews.authorization.k8s.io, as a cluster admin has: run check as one, or without --service-account in the controller's pod (kubectl exec), where the kubeconfig's identity is the ServiceAccount", r.as, err)
}

// ruleName is the object a rule is limited to, for the review; "" when it names none.
func ruleName(r access.Rule) string {
	if len(r.Names) == 1 {
		return r.Names[0]
	}
	return ""
}

// subset reports whether every one of verbs is among of.
func subset(verbs, of []string) bool {
	for _, v := range verbs {
		if !slices.Contains(of, v) {
			return false
		}
	}
	return true
}

// checkRule is rule's row: whether the identity of rv may use each of its verbs, in namespace
// ("" for all) unless the rule is cluster-scoped. refused is the API server's refusal of a
// review itself, which says nothing of the rule (checkAccess makes it the one row).
func checkRule(ctx context.Context, rv reviewer, rule access.Rule, namespace string) (r checkResult, refused error) {
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
		allowed, err := rv.allowed(ctx, authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: rule.Group, Resource: resource, Subresource: sub, Name: ruleName(rule)})
		if apierrors.IsForbidden(err) {
			return checkResult{}, err
		}
		if err != nil {
			return fail("rbac", "%scannot review access to %s %s %s: %v", rv.whose(), verb, what, where, err), nil
		}
		if !allowed {
			denied = append(denied, verb)
		}
	}
	if len(denied) > 0 && !subset(denied, rule.Degrades) {
		return fail("rbac", "%sRBAC denies %s on %s %s (needed: %s)", rv.whose(), strings.Join(denied, ", "), what, where, rule.Why), nil
	}
	if len(denied) > 0 {
		return warning("rbac", "%sRBAC denies %s on %s %s: %s; grant it as the manifests do", rv.whose(), strings.Join(denied, ", "), what, where, rule.Without), nil
	}
	return pass("rbac", "%s%s %s %s", rv.whose(), strings.Join(rule.Verbs, ", "), what, where), nil
}
