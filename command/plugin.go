// The kubectl plugin: `kubectl vm start|stop|restart|wait|status|migrate NAME`. The same
// binary is the plugin when it is called kubectl-vm (main looks at argv[0]; cmd/kubectl-vm
// is the same program for go install). Each verb that changes something is one write a user
// could make with kubectl (docs/run-strategies.md says which); the controller carries it out
// once and records it in the VM's status.

package command

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// PluginName is the name kubectl finds the plugin by on $PATH: `kubectl vm` runs kubectl-vm.
const PluginName = "kubectl-vm"

// IsPlugin reports whether argv0, the program's name as it was called, is the plugin's.
func IsPlugin(argv0 string) bool {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe") == PluginName
}

// pluginConfig is what every verb takes: kubectl's flags for reaching the cluster and
// choosing the namespace, and the resource: its version, plural name and field map, as the
// controller is given them.
type pluginConfig struct {
	clusterFlags
	resourceFlags
	Namespace string
}

// Validate checks the resource's form and that the flags give a field map (--schema-file,
// or a version with a built-in one); the cluster is asked nothing yet. A version without a
// map is a wrong flag, exit 2 as run and check give it, not a failure of the verb.
func (c *pluginConfig) Validate() error {
	gvr, err := schema.ParseGVR(c.APIVersion, c.resource())
	if err != nil {
		return fmt.Errorf("--api-version: %w", err)
	}
	if c.SchemaFile == "" {
		if _, err := loadFields("", gvr.GroupVersion()); err != nil {
			return err
		}
	}
	return nil
}

// resource is --resource, or the default plural name when the flag was not parsed (the
// verbs' tests build the configuration by hand).
func (c *pluginConfig) resource() string {
	if c.Resource == "" {
		return schema.DefaultResource
	}
	return c.Resource
}

// flags are kubectl's --kubeconfig, --context and -n/--namespace, and --api-version,
// --resource and --schema-file.
func (c *pluginConfig) flags() []cli.Flag {
	flags := append(c.clusterFlags.flags(),
		&cli.StringFlag{Name: "namespace", Aliases: []string{"n"}, Usage: "namespace of the VM (or -n); empty: the kubeconfig context's, or default",
			Destination: &c.Namespace})
	flags = append(flags, c.gvrFlags("group/version the VM is read and written in", "plural resource name of the VM's kind")...)
	return append(flags,
		schemaFileFlag(&c.SchemaFile, "field-map file: where each field of a VM lives in the resource, the one the controller runs with; "+
			"empty: the built-in map of --api-version (required for a group other than "+schema.Group+")"))
}

// Plugin is the command line of kubectl-vm. version is the build's, as for App.
func Plugin(version string) *cli.App {
	version = buildVersion(version)
	app := &cli.App{
		Name:  "kubectl vm",
		Usage: "start, stop, restart, wait for, inspect and migrate VirtualMachines (the kubectl plugin of vm-controller)",
		UsageText: "kubectl vm start|stop|restart|wait|status|migrate NAME [flags]\n\n" +
			"Each verb that changes something is one write to the VM that kubectl can make too (docs/run-strategies.md).",
		Version: version,
		Commands: []*cli.Command{
			startCommand(&pluginConfig{}, version),
			stopCommand(&stopConfig{}, version),
			restartCommand(&pluginConfig{}, version),
			waitCommand(&waitConfig{}, version),
			statusCommand(&pluginConfig{}, version),
			migrateVMCommand(&pluginConfig{}, version),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("no verb %q (see --help)", c.Args().First()), 2)
			}
			return cli.ShowAppHelp(c)
		},
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {},
	}
	var verbs []string
	for _, cmd := range app.Commands {
		verbs = append(verbs, cmd.Name)
		cmd.OnUsageError = flagError(cmd.Name) // a bad flag of a verb: one line and exit 2, as every command's
	}
	app.OnUsageError = programFlagError(verbs)
	return app
}

// flagError is the usage error of the verb's flags: a flag it does not have is named as
// unknown, with the verb's help to see (the flag library's own line names it with one dash
// whatever was typed, as "not defined"); any other is usageError's.
func flagError(verb string) cli.OnUsageErrorFunc {
	return func(c *cli.Context, err error, sub bool) error {
		if name, ok := undefinedFlag(err); ok {
			return cli.Exit(fmt.Sprintf("unknown flag %s (see kubectl vm %s --help)", dashed(name), verb), 2)
		}
		return usageError(c, err, sub)
	}
}

// programFlagError is the usage error of kubectl vm's own flags, before any verb: it has none
// but --help and --version (PluginArgs moves the flags given before a verb after it), so a
// verb's flag there means that the verb is missing (kubectl vm -n ns), and any other flag is
// unknown.
func programFlagError(verbs []string) cli.OnUsageErrorFunc {
	list := strings.Join(verbs[:len(verbs)-1], ", ") + " or " + verbs[len(verbs)-1]
	return func(c *cli.Context, err error, sub bool) error {
		name, ok := undefinedFlag(err)
		switch {
		case ok && flagNames(c.App.Commands)[name]:
			return cli.Exit(fmt.Sprintf("no verb given (kubectl vm VERB NAME: %s; see --help)", list), 2)
		case ok:
			return cli.Exit(fmt.Sprintf("unknown flag %s (see kubectl vm --help)", dashed(name)), 2)
		}
		return usageError(c, err, sub)
	}
}

// undefinedFlag is the name of the flag err says is not defined (the flag library's "flag
// provided but not defined: -name"), and whether it says so.
func undefinedFlag(err error) (string, bool) {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	return name, ok && name != ""
}

// dashed is a flag's name as kubectl writes it: --name, or -n for a one-letter name.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// oneName takes exactly one argument, the VM's name.
func oneName(c *cli.Context) error {
	if c.NArg() != 1 {
		return cli.Exit(fmt.Sprintf("%s takes one argument, the VM's name, got %d (see --help)", c.Command.Name, c.NArg()), 2)
	}
	return nil
}

// vmClient is what a verb works with: the VM's resource in its namespace, its layout, and a
// client of the core API for the VM's server, disk and the nodes.
type vmClient struct {
	vms    dynamic.ResourceInterface
	kube   kubernetes.Interface
	fields schema.Fields
	gvr    k8sschema.GroupVersionResource
	// versionFrom names where gvr's version came from (vmRef): "" for --api-version.
	versionFrom string
	namespace   string
	out         io.Writer
	now         func() time.Time
}

// defaultResourceNames are the names besides its plural that kubectl takes for this project's
// resource as TYPE in TYPE/NAME: its CRD's singular and short name
// (crds/virtualmachines.cloudnative.czs.yaml; TestVMNameTakesTheCRDsNames holds them to it),
// and the short name's plural.
var defaultResourceNames = []string{"virtualmachine", "vm", "vms"}

// vmRef is the VM a verb's argument names, and the resource it is read and written through.
type vmRef struct {
	name string
	gvr  k8sschema.GroupVersionResource
	// versionFrom names where gvr's version came from, for the messages that quote it: ""
	// for --api-version, or the argument when that names another version.
	versionFrom string
}

// vmName is the VM in the verb's argument: NAME, or TYPE/NAME as kubectl takes it, where TYPE
// names the resource the plugin is configured for, in any case: its plural (--resource),
// plural.group or plural.version.group, and for this project's resource its singular and short
// names (vm/test-vm, virtualmachines.cloudnative.czs/test-vm, vm.v1beta1.cloudnative.czs/test-vm).
// A version in TYPE may be any of the group's: every version is a view of the same object, and
// as kubectl does, the plugin then reads and writes it through that version, with that
// version's built-in field map; a --schema-file maps --api-version's layout only, so with one a
// TYPE naming another version is refused. Another TYPE (pod/x, a version of another group) or
// a version without a field map is a bad argument, one line and exit 2 before the cluster is
// asked anything; a version the API server does not serve is said when the read finds nothing
// (notServed), as for --api-version.
func (c *pluginConfig) vmName(arg string) (vmRef, error) {
	gvr, err := schema.ParseGVR(c.APIVersion, c.resource())
	if err != nil {
		return vmRef{}, err
	}
	typ, name, ok := strings.Cut(arg, "/")
	if !ok {
		return vmRef{name: arg, gvr: gvr}, nil
	}
	names, short := []string{gvr.Resource}, gvr.Resource
	if gvr.GroupResource() == (k8sschema.GroupResource{Group: schema.Group, Resource: schema.DefaultResource}) {
		names, short = append(names, defaultResourceNames...), "vm"
	}
	if name == "" || strings.Contains(name, "/") {
		return vmRef{}, cli.Exit(fmt.Sprintf("argument %q: want the VM's NAME or %s/NAME", arg, short), 2)
	}
	// TYPE read as kubectl reads it: resource.version.group when that names the resource, else
	// resource.group (a group may have dots, so "a.b.c" is tried both ways).
	versioned, plain := k8sschema.ParseResourceArg(strings.ToLower(typ))
	switch {
	case versioned != nil && versioned.Version != "" && versioned.Group == gvr.Group && slices.Contains(names, versioned.Resource):
		return c.versionNamed(arg, name, gvr, versioned.Version)
	case (plain.Group == gvr.Group || plain.Group == "" && !strings.Contains(typ, ".")) && slices.Contains(names, plain.Resource):
		return vmRef{name: name, gvr: gvr}, nil
	}
	return vmRef{}, cli.Exit(fmt.Sprintf("argument %q: %s is not a VM (%s): give the VM's NAME or %s/NAME", arg, typ, gvr.GroupResource(), short), 2)
}

// versionNamed is the VM name of the argument arg, whose TYPE names version of the configured
// resource gvr: read through that version, when the plugin has its field map.
func (c *pluginConfig) versionNamed(arg, name string, gvr k8sschema.GroupVersionResource, version string) (vmRef, error) {
	if version == gvr.Version {
		return vmRef{name: name, gvr: gvr}, nil
	}
	named, err := schema.ParseGVR(gvr.Group+"/"+version, gvr.Resource)
	if err != nil {
		return vmRef{}, cli.Exit(fmt.Sprintf("argument %q: %v", arg, err), 2)
	}
	if c.SchemaFile != "" {
		return vmRef{}, cli.Exit(fmt.Sprintf("argument %q: --schema-file maps %s (--api-version), not %s: "+
			"give the VM's NAME without a version, or --api-version %s with its field map", arg, gvr.GroupVersion(), version, named.GroupVersion()), 2)
	}
	if _, err := schema.ForVersion(named.GroupVersion()); err != nil {
		return vmRef{}, cli.Exit(fmt.Sprintf("argument %q: %v", arg, err), 2)
	}
	return vmRef{name: name, gvr: named, versionFrom: fmt.Sprintf("argument %q", arg)}, nil
}

// connect makes the clients of c for the VM the verb's argument names (vmName), and returns
// its name.
func (c *pluginConfig) connect(cc *cli.Context, version string) (*vmClient, string, error) {
	ref, err := c.vmName(cc.Args().First())
	if err != nil {
		return nil, "", err
	}
	v, err := c.clients(cc, version, ref)
	return v, ref.name, err
}

// clients makes the clients of c, for the VM's resource as ref names it.
func (c *pluginConfig) clients(cc *cli.Context, version string, ref vmRef) (*vmClient, error) {
	gvr := ref.gvr
	fields, err := loadFields(c.SchemaFile, gvr.GroupVersion())
	if err != nil {
		return nil, err
	}
	cfg, err := c.restConfig(version)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent = "kubectl-vm/" + version
	ns := c.Namespace
	if ns == "" {
		if ns, _, err = c.clientConfig().Namespace(); err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("make the API client: %w", err)
	}
	hc.Transport = &tracedTransport{next: hc.Transport}
	dyn, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("make the API client: %w", err)
	}
	kube, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("make the API client: %w", err)
	}
	return &vmClient{vms: dyn.Resource(gvr).Namespace(ns), kube: kube, fields: fields, gvr: gvr, versionFrom: ref.versionFrom,
		namespace: ns, out: cc.App.Writer, now: time.Now}, nil
}

// get reads the VM named name, with its view. A VM that does not exist, or one the user may
// not read, is one clear line.
func (v *vmClient) get(ctx context.Context, name string) (*unstructured.Unstructured, schema.VirtualMachine, error) {
	u, err := v.vms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, schema.VirtualMachine{}, v.readError(name, err)
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, schema.VirtualMachine{}, fmt.Errorf("read virtualmachine %s: %w", name, err)
	}
	return u, schema.ViewOf(raw, u.GetResourceVersion(), v.fields), nil
}

// readError says in one line why the VM cannot be read. It is where every verb's first
// request, the read of the VM, fails, so a request without an answer is said here as it is
// for every request after (unanswered).
func (v *vmClient) readError(name string, err error) error {
	if why := unanswered(err); why != nil {
		return why
	}
	switch {
	case apierrors.IsNotFound(err):
		return cli.Exit(fmt.Sprintf("virtualmachine %q not found in namespace %q%s", name, v.namespace, v.notServed()), 1)
	case apierrors.IsForbidden(err):
		return cli.Exit(fmt.Sprintf("cannot read virtualmachine %q in namespace %q: forbidden (%s)", name, v.namespace, apiMessage(err)), 1)
	case apierrors.IsUnauthorized(err):
		return cli.Exit(fmt.Sprintf("cannot read virtualmachine %q in namespace %q: unauthorized (%s)", name, v.namespace, apiMessage(err)), 1)
	}
	return fmt.Errorf("read virtualmachine %s in namespace %s: %w", name, v.namespace, err)
}

// unanswered is err as a verb ends on it when err is a request that got no answer from the
// API server, as client-go returns it (the HTTP client's *url.Error, no status); nil when err
// is anything else, an answer of the API server (an error with a status) included. What
// failed says which (requestError, from the plugin's transport):
//   - client-go's credential layers, which run before the request has a connection (an exec
//     plugin that fails, a token file that cannot be read, a token that is no header value):
//     "cannot authenticate to the cluster: ...";
//   - the cluster's certificate, which the kubeconfig does not trust, or which does not name
//     the server (its TLS handshake's verification): "cannot verify the cluster's certificate:
//     ...";
//   - anything else (a connection refused, a name that does not resolve, a proxy that refuses
//     the tunnel, a TLS handshake that fails otherwise, a connection gone, a timeout): "cannot
//     reach the cluster: ..." (unreachableError), which wait goes on across for a while.
//
// The first two wait cannot outlast, and neither is the cluster's absence. None of the three
// was sent but the last, when it went as far as being written (requestError.sent).
func unanswered(err error) error {
	var status apierrors.APIStatus
	var ue *url.Error
	if errors.As(err, &status) || !errors.As(err, &ue) {
		return nil
	}
	var re *requestError
	traced := errors.As(ue, &re)
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case traced && !re.connecting:
		return &connectError{what: "cannot authenticate to the cluster", err: ue}
	case errors.As(ue, &verify) || errors.As(ue, &unknownCA) || errors.As(ue, &host) || errors.As(ue, &invalid):
		return &connectError{what: "cannot verify the cluster's certificate", err: ue}
	}
	// A failure the transport passed on as it was (an EOF: tracedTransport), or one it did
	// not see (a test's fake client), is taken as sent: that is what a write's note must
	// assume when nothing says otherwise.
	return &unreachableError{err: ue, sent: !traced || re.sent}
}

// connectError is a request that never reached the API server, for a reason that does not
// pass while the verb waits, and that is not the cluster's absence (unanswered): its
// credentials could not be had, or the cluster's certificate could not be verified. One line,
// exit 1, as every request that fails; a write's says nothing of having been made: nothing
// was sent.
type connectError struct {
	what string // what could not be done: "cannot authenticate to the cluster"
	err  error  // the HTTP client's
}

func (e *connectError) Error() string { return e.what + ": " + e.err.Error() }

// ExitCode is 1, as for every request that fails (cli.ExitCoder).
func (e *connectError) ExitCode() int { return 1 }

func (e *connectError) Unwrap() error { return e.err }

// unreachableError is a request of a verb that did not reach the API server, or got no answer
// from it (unanswered): one line, exit 1, "cannot reach the cluster: ...", rather than the
// HTTP client's error behind "read virtualmachine ..." or "write virtualmachine ...", since
// the VM is not the one to look at. Every request of a verb ends so, the first read of the VM
// or any after it (a write, status's read of the pod, migrate's of the nodes), the same for
// all; note, when not empty, adds what the user needs to know of that request (a write that
// may have been made, what wait last saw). It keeps the HTTP client's error (Unwrap), and its
// type tells wait, which goes on across such a failure for a while once it has read the VM
// (an API server restarting: --unreachable-timeout), from a refusal.
type unreachableError struct {
	err  error
	note string
	// sent: the request was written whole to a connection before it failed (the connection
	// went, or the answer did not come), so that the API server may have acted on it.
	sent bool
}

func (e *unreachableError) Error() string {
	if e.note == "" {
		return "cannot reach the cluster: " + e.err.Error()
	}
	return "cannot reach the cluster: " + e.err.Error() + " (" + e.note + ")"
}

// ExitCode is 1, as for every request that fails (cli.ExitCoder).
func (e *unreachableError) ExitCode() int { return 1 }

func (e *unreachableError) Unwrap() error { return e.err }

// asUnanswered is err as a verb ends on it: unanswered's line when it is, or wraps, a request
// that got no answer, err as it is otherwise. vmClient.write returns through it, so that a
// cluster that stops answering after the read of the VM (at migrate's reads of the pod, the
// nodes, the disk) is said as one that did not answer at all, not as the HTTP client's error
// behind "read the server pod ...".
func asUnanswered(err error) error {
	var cut *unreachableError
	var refused *connectError
	switch {
	case errors.As(err, &cut):
		return cut
	case errors.As(err, &refused):
		return refused
	}
	if why := unanswered(err); why != nil {
		return why
	}
	return err
}

// mayHaveBeenMade is the note of a write whose request was sent and got no answer (the
// connection went, or the answer did not come in time): the write may have been made all the
// same, and running the verb again on the belief that it was not could double it (a second
// restart). A write that was never sent (its connection, or its TLS handshake, failed) has
// none.
const mayHaveBeenMade = "the write may have been made all the same: look at the VM before running the verb again"

// requestError is a request of the plugin's clients that got no answer, with how far it went,
// as the plugin's transport saw it (tracedTransport): the HTTP client's error says what
// failed, not whether anything was sent, and a proxy's refusal of the tunnel ("Forbidden") or
// a TLS alert is no type that says it was before.
type requestError struct {
	err error
	// connecting: it asked the HTTP transport for a connection. client-go's credential
	// layers (an exec plugin, a token file, the Authorization header they set) run before:
	// a request that never asked failed in them.
	connecting bool
	// sent: it was written whole to a connection (a dial, a proxy's tunnel, a TLS handshake
	// that failed come before).
	sent bool
}

// Error is the error's own, so that the HTTP client's line is the one it would have been.
// requestError is as transparent to client-go, which tells a failure it makes again (an EOF,
// a connection reset, a timeout) through the *url.Error: by its message, Unwrap, and Timeout
// and Temporary, which url.Error asks its Err directly.
func (e *requestError) Error() string { return e.err.Error() }

func (e *requestError) Unwrap() error { return e.err }

func (e *requestError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.err, &t) && t.Timeout()
}

func (e *requestError) Temporary() bool {
	var t interface{ Temporary() bool }
	return errors.As(e.err, &t) && t.Temporary()
}

// tracedTransport is the transport of the plugin's clients, around all of client-go's: it
// follows each request (net/http/httptrace) and returns a failure as requestError, so that a
// verb can say what failed and whether a write was sent (unanswered). It tells an
// attemptObserver its request's context carries of each attempt: client-go makes a GET
// again after an EOF, and a watch after an EOF or a timeout, up to 10 times, and says nothing
// of the attempts that failed, nor, of a watch, of the last one (it returns an empty watch and
// no error).
type tracedTransport struct {
	next http.RoundTripper
}

func (t *tracedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	seen, _ := ctx.Value(attemptObserverKey{}).(attemptObserver)
	var connecting, sent atomic.Bool
	trace := &httptrace.ClientTrace{
		GetConn: func(string) { connecting.Store(true) },
		WroteRequest: func(w httptrace.WroteRequestInfo) {
			if w.Err == nil {
				sent.Store(true)
			}
		},
	}
	if seen != nil {
		seen.attempting()
	}
	resp, err := t.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(ctx, trace)))
	if err == nil {
		if seen != nil {
			seen.attempted(nil)
		}
		return resp, nil
	}
	failed := err
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		// client-go tells these two by identity (utilnet.IsProbableEOF) to make a read or a
		// watch again: they are passed on as they are, and taken as sent (unanswered).
		failed = &requestError{err: err, connecting: connecting.Load() || ctx.Err() != nil, sent: sent.Load()}
	}
	if seen != nil {
		// The request's own end (the verb's context) is no failure of the cluster's; nor
		// are those that waiting does not mend (a credential, a certificate).
		why := errAttemptAbandoned
		if _, unreached := unanswered(&url.Error{Err: failed}).(*unreachableError); unreached && ctx.Err() == nil {
			why = &url.Error{Op: urlOp(req.Method), URL: req.URL.Redacted(), Err: err}
		}
		seen.attempted(why)
	}
	return nil, failed
}

// urlOp is the Op of the HTTP client's *url.Error for method: "Get" for GET.
func urlOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// attemptObserver is told of each attempt of the requests whose context carries it
// (withAttemptObserver), by the plugin's transport: attempting as it starts, attempted as it
// ends, with nil when it was answered (an HTTP answer of any status), else why it got none,
// as the HTTP client says it (*url.Error), or errAttemptAbandoned when that is no failure of
// the cluster (the request's context ended) or not one waiting mends (unanswered's
// connectError).
type attemptObserver interface {
	attempting()
	attempted(why error)
}

// errAttemptAbandoned is the end of an attempt that is no failure of the cluster's to reach
// (attemptObserver).
var errAttemptAbandoned = errors.New("attempt abandoned")

type attemptObserverKey struct{}

// withAttemptObserver is ctx, whose requests tell o of their attempts.
func withAttemptObserver(ctx context.Context, o attemptObserver) context.Context {
	return context.WithValue(ctx, attemptObserverKey{}, o)
}

// notServed says why a VM was not found when the reason is that the API server does not
// serve the version it was asked in (naming --api-version, or the argument that names the
// version), or not the resource in it (naming --resource): a GET of either answers 404 as for
// a VM that does not exist. Discovery is asked only then; "" when it is served, or discovery
// does not say.
func (v *vmClient) notServed() string {
	gv := v.gvr.GroupVersion().String()
	from := v.versionFrom
	if from == "" {
		from = "--api-version"
	}
	list, err := v.kube.Discovery().ServerResourcesForGroupVersion(gv)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf(": the API server does not serve %s (%s)", gv, from)
	case err != nil || list == nil:
		return ""
	}
	for _, r := range list.APIResources {
		if r.Name == v.gvr.Resource {
			return ""
		}
	}
	// The version is served and the resource is not: the resource's name is the one to fix,
	// whichever names the version.
	return fmt.Sprintf(": the API server serves no %s in %s (--resource)", v.gvr.Resource, gv)
}

// apiMessage is the API server's message of err, without client-go's prefixes.
func apiMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Message
	}
	return err.Error()
}

// write reads the VM, lets decide say what to write (nil: nothing) and writes it, conditional
// on the resourceVersion read, so that a verb never acts on a VM that changed under it. A VM
// that changed meanwhile (its status is written often: usage, the controller's reports) is
// read, decided on and written again, a few times (retry.DefaultRetry) before the verb gives
// up with one line.
func (v *vmClient) write(ctx context.Context, name string, decide func(schema.VirtualMachine) (map[string]any, error)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, vm, err := v.get(ctx, name)
		if err != nil {
			return err
		}
		p, err := decide(vm)
		if err != nil || p == nil {
			return err
		}
		return v.patch(ctx, name, u.GetResourceVersion(), p)
	})
	if apierrors.IsConflict(err) {
		return cli.Exit(fmt.Sprintf("virtualmachine %q changed while the verb looked at it, %d times in a row; run it again", name, retry.DefaultRetry.Steps), 1)
	}
	// decide's own reads (migrate's of the pod, the nodes, the disk) say a failure in their
	// words; one that did not reach the API server is said as every verb says it.
	return asUnanswered(err)
}

// patch writes a JSON merge patch to the VM, conditional on the resourceVersion the verb
// decided on; a conflict is returned as it is, for write to try again. A write that got no
// answer is said as unanswered says it, with a note when it was sent and so may have been
// made all the same (mayHaveBeenMade).
func (v *vmClient) patch(ctx context.Context, name, resourceVersion string, p map[string]any) error {
	md, _ := p["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		p["metadata"] = md
	}
	md["resourceVersion"] = resourceVersion
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("write virtualmachine %s: %w", name, err)
	}
	if _, err := v.vms.Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: PluginName}); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		if apierrors.IsForbidden(err) {
			return cli.Exit(fmt.Sprintf("cannot change virtualmachine %q in namespace %q: forbidden (%s)", name, v.namespace, apiMessage(err)), 1)
		}
		why := unanswered(err)
		var cut *unreachableError
		if errors.As(why, &cut) && cut.sent {
			cut.note = mayHaveBeenMade
		}
		if why != nil {
			return why
		}
		return fmt.Errorf("write virtualmachine %s: %w", name, err)
	}
	return nil
}

// annotations is a merge patch of the annotations given (a nil value removes one).
func annotations(kv map[string]any) map[string]any {
	return map[string]any{"metadata": map[string]any{"annotations": kv}}
}

// RunMain runs app with args and turns its error into one line on stderr, prefixed with
// name, and the exit code: what both mains (vm-controller and kubectl-vm) do.
func RunMain(app *cli.App, name string, args []string, stderr io.Writer) int {
	err := app.Run(args)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	var ee cli.ExitCoder
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 1
}

// shortValue splits kubectl's short form of -n with its value joined (-nteam-b) into -n and
// the value, which the flag library takes apart only. A single-dash long flag (-namespace,
// -context) is left as it is.
func shortValue(a string) []string {
	if len(a) > 2 && strings.HasPrefix(a, "-n") && a[2] != '=' && a[2] != '-' {
		if long, _, _ := strings.Cut(a[1:], "="); !pluginFlagNames()[long] {
			return []string{"-n", a[2:]}
		}
	}
	return []string{a}
}

// pluginFlagNames are the names of the verbs' flags, each with its aliases.
var pluginFlagNames = sync.OnceValue(func() map[string]bool { return flagNames(Plugin("").Commands) })

// flagNames are the names of the flags of cmds, each with its aliases.
func flagNames(cmds []*cli.Command) map[string]bool {
	names := map[string]bool{}
	for _, cmd := range cmds {
		for _, f := range cmd.Flags {
			for _, n := range f.Names() {
				names[n] = true
			}
		}
	}
	return names
}

// PluginArgs puts a verb's flags before its arguments, as urfave/cli wants them, so that
// kubectl's habits work: `kubectl vm stop NAME -n ns --force` as well as `kubectl vm stop -n
// ns NAME`, and `kubectl vm -n ns stop NAME` (the verb's flags given before it, as kubectl
// takes -n before its own verbs). A flag's value is the next argument unless the flag is a
// boolean one, one no verb has (takesValue), or written as --flag=value; after "--"
// everything is an argument. A verb's -h or --help anywhere among its flags is the verb's
// help alone, whatever else is given. Without a verb, or with the program's own --help or
// --version before it, args are left as they are (the program's flag errors say what is
// wrong: programFlagError). -n takes its value joined as well (-nteam-b), as kubectl does.
func PluginArgs(args []string) []string {
	if len(args) > 0 {
		split := []string{args[0]}
		for i, a := range args[1:] {
			if a == "--" {
				split = append(split, args[1+i:]...)
				break
			}
			split = append(split, shortValue(a)...)
		}
		args = split
	}
	verb, program := verbAt(args)
	if program > 1 {
		// The program's own --help or --version after a verb's flags (kubectl vm -n ns
		// --help): the program's, which takes none of them.
		return []string{args[0], args[program]}
	}
	if verb < 0 {
		return args
	}
	var flags, rest []string
	flags = takeFlags(args[1:verb], &rest)
	flags = append(flags, takeFlags(args[verb+1:], &rest)...)
	if asksHelp(flags) {
		// The verb's help, with the VM's name and other flags given too (kubectl vm stop
		// test-vm --help): the flag library would take the name for a help topic.
		return []string{args[0], args[verb], "--help"}
	}
	out := append([]string{args[0], args[verb]}, flags...)
	if endsWithFlag(args) {
		// A flag that takes a value, last and without one (kubectl vm status vm1 -n): last it
		// stays, for the verb to say that it needs a value, rather than take "--" for it (the
		// command fails on it, so the arguments it would have had go).
		return out
	}
	if len(rest) > 0 {
		out = append(out, "--")
	}
	return append(out, rest...)
}

// takesValue reports whether a is a flag of the verbs that takes the next argument as its
// value: one that is not boolean, written without =value. A flag no verb has takes none: the
// verb refuses it (unknown flag), and the argument after it is left for what it is, the verb
// or the VM's name, rather than be swallowed as its value (kubectl vm --bogus status x).
func takesValue(a string) bool {
	if !strings.HasPrefix(a, "-") || len(a) < 2 || strings.Contains(a, "=") || pluginBoolean[a] {
		return false
	}
	return pluginFlagNames()[strings.TrimLeft(a, "-")]
}

// asksHelp reports whether flags, each with its value (takeFlags), ask for help: -h, --help
// as a flag, not as another flag's value.
func asksHelp(flags []string) bool {
	for i := 0; i < len(flags); i++ {
		switch a := flags[i]; {
		case helpFlags[a]:
			return true
		case takesValue(a):
			i++ // its value
		}
	}
	return false
}

// dangling reports whether a is a flag that takes a value and holds none itself (not -n=ns).
func dangling(a string) bool { return takesValue(a) }

// endsWithFlag reports whether the last of args, before any "--", is a flag that takes a
// value: one left without it.
func endsWithFlag(args []string) bool {
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[:i]
	}
	return len(args) > 1 && dangling(args[len(args)-1])
}

// pluginBoolean are the flags of the plugin's verbs that take no value.
var pluginBoolean = map[string]bool{"--force": true, "-force": true, "--help": true, "-help": true, "-h": true, "--h": true}

// helpFlags are the ways to ask for help, of kubectl vm and of each verb.
var helpFlags = map[string]bool{"--help": true, "-help": true, "-h": true, "--h": true}

// programFlags are the flags of kubectl vm itself, which come before any verb.
var programFlags = map[string]bool{"--help": true, "-help": true, "-h": true, "--h": true, "--version": true, "-version": true, "-v": true, "--v": true}

// verbAt is the index in args of the verb: the first argument after the program's name that
// is neither a flag nor a flag's value; -1 when there is none, or when "--" comes first. When
// the program's own --help or --version comes before any verb, program is its index (else
// -1) and verb is -1.
func verbAt(args []string) (verb, program int) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return -1, -1
		case programFlags[a]:
			return -1, i
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if takesValue(a) {
				i++ // its value
			}
		default:
			return i, -1
		}
	}
	return -1, -1
}

// takeFlags returns the flags of args, each with its value, in their order, and appends the
// other arguments to rest.
func takeFlags(args []string, rest *[]string) []string {
	var flags []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			*rest = append(*rest, args[i+1:]...)
			return flags
		case strings.HasPrefix(a, "-") && len(a) > 1:
			flags = append(flags, a)
			if takesValue(a) && i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		default:
			*rest = append(*rest, a)
		}
	}
	return flags
}
