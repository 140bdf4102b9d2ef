package command

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// The resources of the tests: this project's, and the project's CRD without the status
// subresource under another group (testdata/crds/no-status.yaml), whose schema chooses the
// built-in layout of v1alpha1.
var (
	ownGVR      = k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	noStatusGVR = k8sschema.GroupVersionResource{Group: "nostatus.example.org", Version: "v1alpha1", Resource: "virtualmachines"}
)

const (
	ownCRDFile      = "crds/virtualmachines.cloudnative.czs.yaml"
	noStatusCRDFile = "testdata/crds/no-status.yaml"
)

// TestJudgeCRD: a CRD without the status subresource is a warning, which neither fails check
// nor stops run's preflight; with it, a pass. Both test CRDs have the schema of an earlier
// release, without the disk's, the run strategies', the eviction strategy's, the placement's
// and the migration's fields and the server's node and IP, and are judged with the layout
// their schema chooses.
func TestJudgeCRD(t *testing.T) {
	fields, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1alpha1"})
	if err != nil {
		t.Fatal(err)
	}
	fields, _ = fields.Without(map[string]bool{"spec.rootDiskStorageClassName": true, "spec.rootDiskReclaimPolicy": true, "spec.evictionStrategy": true,
		"status.rootDisk.claimName": true, "status.server.node": true, "status.server.ip": true,
		"status.nextRetryTime": true, "status.startRequestedAt": true, "status.stopRequestedAt": true,
		"spec.placement": true, "status.migration": true})
	tests := map[string]struct {
		file, name string
		want       string // the rows' results
		detail     string // in the crd row
	}{
		"status subresource":    {"testdata/crds/same-shape.yaml", "virtualmachines.other.example.org", "crd pass,fields pass", "has the status subresource in v1alpha1"},
		"no status subresource": {noStatusCRDFile, "virtualmachines.nostatus.example.org", "crd WARN,fields pass", "has no status subresource in version v1alpha1 (add subresources: {status: {}}): the controller writes status through the main resource"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rows := judgeCRD(tc.name, establishedCRD(t, tc.file), "v1alpha1", fields)
			var got []string
			for _, r := range rows {
				got = append(got, r.name+" "+r.result())
				if r.failed() {
					t.Errorf("row %s failed: %s", r.name, r.detail)
				}
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("rows %v, want %s", got, tc.want)
			}
			if !strings.Contains(rows[0].detail, tc.detail) {
				t.Errorf("crd row %q does not say %q", rows[0].detail, tc.detail)
			}
		})
	}
}

// TestGather: the facts of each kind of target against a fake API server: the rows, the
// status route, and how often the CRD was read, which is never more than once.
func TestGather(t *testing.T) {
	tests := map[string]struct {
		gvr      k8sschema.GroupVersionResource
		crd      string // the CRD file the server holds; "" for none
		watchCRD bool
		claims   bool            // --root-disk claim
		classes  map[string]bool // the server's StorageClasses (default or not); nil: the test's default
		deny     string          // a verb RBAC denies
		watch    string          // the one namespace watched; "" for all
		lease    string          // --leader-elect with the Lease in this namespace; "" for none
		rows     string          // the rows' names and results
		noStatus bool
		reads    int    // GETs of the CRD
		err      string // gather's error
	}{
		"own group": {gvr: ownGVR, crd: ownCRDFile, watchCRD: true,
			rows: "discovery pass,crd pass,fields pass,rbac pass", reads: 1},
		"own group, --watch-crd=false": {gvr: ownGVR, crd: ownCRDFile,
			rows: "discovery pass,crd skip,fields skip,rbac pass", reads: 0},
		"another group: the layout and the checks share one read": {gvr: noStatusGVR, crd: noStatusCRDFile, watchCRD: true,
			rows: "fieldmap pass,discovery pass,crd WARN,fields pass,rbac pass", noStatus: true, reads: 1},
		"another group, --watch-crd=false: read for the layout": {gvr: noStatusGVR, crd: noStatusCRDFile,
			rows: "fieldmap pass,discovery pass,crd skip,fields skip,rbac pass", reads: 1},
		"own group, no CRD": {gvr: ownGVR, watchCRD: true,
			rows: "discovery pass,crd FAIL,fields skip,rbac pass", reads: 1},
		"another group, no CRD": {gvr: noStatusGVR, watchCRD: true, reads: 1,
			err: `--api-version nostatus.example.org/v1alpha1: no built-in field map for group "nostatus.example.org" (built in: cloudnative.czs/v1, cloudnative.czs/v1alpha1, cloudnative.czs/v1beta1); give one with --schema-file (and CRD virtualmachines.nostatus.example.org, whose schema could choose a built-in layout, cannot be read: customresourcedefinitions.apiextensions.k8s.io "virtualmachines.nostatus.example.org" not found)`},
		"RBAC denies a verb": {gvr: ownGVR, crd: ownCRDFile, watchCRD: true, deny: "patch",
			rows: "discovery pass,crd pass,fields pass,rbac FAIL", reads: 1},
		"claims, a default class": {gvr: ownGVR, crd: ownCRDFile, watchCRD: true, claims: true,
			rows: "discovery pass,crd pass,fields pass,storage pass,rbac pass", reads: 1},
		"claims, no default class": {gvr: ownGVR, crd: ownCRDFile, watchCRD: true, claims: true, classes: map[string]bool{"fixed-size": false},
			rows: "discovery pass,crd pass,fields pass,storage WARN,rbac pass", reads: 1},
		"claims, classes not listed": {gvr: ownGVR, crd: ownCRDFile, watchCRD: true, claims: true, classes: map[string]bool{},
			rows: "discovery pass,crd pass,fields pass,storage WARN,rbac pass", reads: 1},
		// Deleting vms would delete the Lease before the controller removed its VMs'
		// finalizers, and vms would stay Terminating.
		"the Lease in the namespace watched": {gvr: ownGVR, crd: ownCRDFile, watchCRD: true, watch: "vms", lease: "vms",
			rows: "discovery pass,crd pass,fields pass,lease WARN,rbac pass", reads: 1},
		"the Lease in a namespace of its own": {gvr: ownGVR, crd: ownCRDFile, watchCRD: true, watch: "vms", lease: "vm-controller",
			rows: "discovery pass,crd pass,fields pass,rbac pass", reads: 1},
		"the Lease, every namespace watched": {gvr: ownGVR, crd: ownCRDFile, watchCRD: true, lease: "vms",
			rows: "discovery pass,crd pass,fields pass,rbac pass", reads: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var def []byte
			if tc.crd != "" {
				def = establishedCRD(t, tc.crd)
			}
			srv := newFakeAPIServer(t, tc.gvr, def)
			srv.deny = tc.deny
			switch {
			case tc.classes == nil:
			case len(tc.classes) == 0:
				srv.classes = nil // forbidden
			default:
				srv.classes = tc.classes
			}
			cfg := checked(&rest.Config{Host: srv.URL})
			limitQPS(cfg, 50, 100) // as check does
			cl, err := newAPIClients(cfg)
			if err != nil {
				t.Fatal(err)
			}
			f, err := gather(context.Background(), cl, cfg.Host, target{gvr: tc.gvr, watchCRD: tc.watchCRD, claims: tc.claims,
				namespace: tc.watch, leaderElect: tc.lease != "", leaseNamespace: tc.lease})
			if got := errString(err); got != tc.err {
				t.Fatalf("error %q, want %q", got, tc.err)
			}
			// The rows, with those of RBAC as one: failed if one of them failed.
			var rows []string
			rbac := ""
			for _, r := range f.checks {
				if r.name != "rbac" {
					rows = append(rows, r.name+" "+r.result())
				} else if rbac != "rbac FAIL" {
					rbac = "rbac " + r.result()
				}
			}
			if rbac != "" {
				rows = append(rows, rbac)
			}
			if tc.err == "" && strings.Join(rows, ",") != tc.rows {
				t.Errorf("rows %s, want %s", strings.Join(rows, ","), tc.rows)
			}
			if f.noStatus != tc.noStatus {
				t.Errorf("noStatus %v, want %v", f.noStatus, tc.noStatus)
			}
			if got := srv.crdReads(); got != tc.reads {
				t.Errorf("the CRD was read %d times, want %d", got, tc.reads)
			}
		})
	}
}

// TestStatusRoute: run writes status through the main resource only when the facts say the
// CRD it read has no status subresource, and says so once; a CRD it does not read keeps the
// subresource, and the log says why.
func TestStatusRoute(t *testing.T) {
	tests := map[string]struct {
		noStatus bool
		watchCRD bool
		log      string // the log; "" for none
	}{
		"no status subresource": {noStatus: true, watchCRD: true,
			log: `level=WARN msg="Status subresource missing; writing status through the main resource" crd=virtualmachines.nostatus.example.org version=v1alpha1`},
		"status subresource": {watchCRD: true},
		"CRD not read": {
			log: `level=INFO msg="CRD not read (--watch-crd=false); writing status through the status subresource" crd=virtualmachines.nostatus.example.org version=v1alpha1`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime}))
			got := statusRoute(facts{noStatus: tc.noStatus}, target{gvr: noStatusGVR, watchCRD: tc.watchCRD}, log)
			if got != tc.noStatus {
				t.Errorf("through the main resource: %v, want %v", got, tc.noStatus)
			}
			if want := tc.log; strings.TrimSuffix(buf.String(), "\n") != want {
				t.Errorf("log %q, want %q", buf.String(), want)
			}
		})
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// TestStartReadsCRDOnce runs the run and check commands whole against a fake API server and
// counts the reads of the CRD: one per start, whatever needs it (the field map of another
// group, the CRD check, the status route), and none with --watch-crd=false unless the field
// map needs it. run is stopped once its controller lists VMs, which it does only after
// everything it learns from the CRD is decided.
func TestStartReadsCRDOnce(t *testing.T) {
	tests := map[string]struct {
		gvr   k8sschema.GroupVersionResource
		crd   string
		args  []string
		reads int
		log   []string // in run's log
	}{
		"own group": {gvr: ownGVR, crd: ownCRDFile, reads: 1},
		"another group without the status subresource": {gvr: noStatusGVR, crd: noStatusCRDFile, reads: 1,
			log: []string{`msg="Chose the field map"`, `msg="Status subresource missing; writing status through the main resource"`}},
		"own group, --watch-crd=false": {gvr: ownGVR, crd: ownCRDFile, args: []string{"--watch-crd=false"}, reads: 0,
			log: []string{`msg="CRD not read (--watch-crd=false); writing status through the status subresource"`}},
		"another group, --watch-crd=false": {gvr: noStatusGVR, crd: noStatusCRDFile, args: []string{"--watch-crd=false"}, reads: 1,
			log: []string{`msg="Chose the field map"`}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, cmd := range []string{"check", "run"} {
				srv := newFakeAPIServer(t, tc.gvr, establishedCRD(t, tc.crd))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				vms := "/apis/" + tc.gvr.GroupVersion().String() + "/" + tc.gvr.Resource
				srv.onRequest = func(req string) {
					if req == "GET "+vms {
						cancel() // the controller has started: stop it
					}
				}
				args := []string{"vm-controller", cmd, "--kubeconfig", srv.kubeconfig(t), "--api-version", tc.gvr.GroupVersion().String()}
				if cmd == "run" {
					args = append(args, "--metrics-addr=", "--health-addr=")
				}
				var out bytes.Buffer
				var log lockedBuffer
				a := App("")
				a.Writer, a.ErrWriter = &out, &log
				if err := a.RunContext(ctx, append(args, tc.args...)); err != nil {
					t.Fatalf("%s: %v\n%s%s", cmd, err, out.String(), log.String())
				}
				if cmd == "run" && ctx.Err() == nil {
					t.Fatalf("run returned before its controller listed VMs:\n%s", log.String())
				}
				if got := srv.crdReads(); got != tc.reads {
					t.Errorf("%s read the CRD %d times, want %d", cmd, got, tc.reads)
				}
				if cmd == "run" {
					for _, want := range tc.log {
						if n := strings.Count(log.String(), want); n != 1 {
							t.Errorf("run logged %s %d times, want once:\n%s", want, n, log.String())
						}
					}
				}
			}
		})
	}
}

// TestOtherGroupNoAnswer: for another group without --schema-file,
// whose field map the CRD's schema chooses, a cluster that does not answer is that failure
// (exit 1, check's table), as for this project's group, not the flags' (exit 2: "no built-in
// field map ...; give one with --schema-file", the cause in a parenthesis). A cluster that
// answers without a CRD to choose the map from, or with one whose schema gives none, stays
// the flags' fault, for check as for run (check exited 1 there), and names VMC_API_VERSION
// when the version came from it.
func TestOtherGroupNoAnswer(t *testing.T) {
	unsetenv(t, "VMC_KUBECONFIG", "VMC_CONTEXT", "VMC_API_VERSION", "VMC_SCHEMA_FILE", "VMC_WATCH_CRD")
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	deadConfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(deadConfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, dead)), 0o600); err != nil {
		t.Fatal(err)
	}
	notServing := newFakeAPIServer(t, ownGVR, nil)   // serves cloudnative.czs only
	serving := newFakeAPIServer(t, noStatusGVR, nil) // serves the resource, without its CRD
	gv := noStatusGVR.GroupVersion().String()
	openGVR := k8sschema.GroupVersionResource{Group: "open.example.org", Version: "v1alpha1", Resource: "virtualmachines"}
	open := newFakeAPIServer(t, openGVR, establishedCRD(t, "testdata/crds/open.yaml")) // a CRD that gives no layout
	tests := map[string]struct {
		kubeconfig string
		apiVersion string // --api-version; empty: gv
		env        bool   // the version given by VMC_API_VERSION, not --api-version
		code       int
		line       string // run's and check's last line, or with a trailing "...", its beginning
		rows       string // check's table, each row's check and result
	}{
		"no answer": {kubeconfig: deadConfig, code: 1, line: "vm-controller: cannot reach the cluster at " + dead + ": Get ...",
			rows: "discovery FAIL,crd skip,fields skip,rbac skip"},
		"the group not served": {kubeconfig: notServing.kubeconfig(t), code: 2,
			line: `vm-controller: --api-version ` + gv + `: no built-in field map for group "nostatus.example.org" (...`},
		"served, without a CRD to choose the map": {kubeconfig: serving.kubeconfig(t), code: 2,
			line: `vm-controller: --api-version ` + gv + `: no built-in field map for group "nostatus.example.org" (...`},
		"served, without a CRD, the version from the variable": {kubeconfig: serving.kubeconfig(t), env: true, code: 2,
			line: `vm-controller: --api-version (from VMC_API_VERSION) ` + gv + `: no built-in field map for group "nostatus.example.org" (...`},
		"served, a CRD whose schema gives no layout": {kubeconfig: open.kubeconfig(t), apiVersion: "open.example.org/v1alpha1", code: 2,
			line: `vm-controller: --api-version open.example.org/v1alpha1 without --schema-file: CRD virtualmachines.open.example.org: ...`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, cmd := range []string{"run", "check"} {
				var out, stderr bytes.Buffer
				a := App("")
				a.Writer = &out
				a.ErrWriter = io.Discard // run's log
				apiVersion := cmp.Or(tc.apiVersion, gv)
				args := []string{"vm-controller", cmd, "--kubeconfig", tc.kubeconfig}
				if tc.env {
					t.Setenv("VMC_API_VERSION", apiVersion)
				} else {
					args = append(args, "--api-version", apiVersion)
				}
				if cmd == "run" {
					args = append(args, "--metrics-addr=", "--health-addr=")
				}
				code := RunMain(a, "vm-controller", args, &stderr)
				lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
				last := lines[len(lines)-1]
				want, wantCode := tc.line, tc.code
				if cmd == "check" && tc.rows != "" {
					want = fmt.Sprintf("vm-controller: 1 of %d checks failed", strings.Count(out.String(), "\n")-1)
				}
				prefix, cut := strings.CutSuffix(want, "...")
				if code != wantCode || len(lines) != 1 || (cut && !strings.HasPrefix(last, prefix)) || (!cut && last != want) {
					t.Errorf("%s: exit %d, stderr %q; want exit %d, one line %q", cmd, code, stderr.String(), wantCode, want)
				}
				if cmd == "check" && tc.rows != "" {
					if got := tableRows(out.String()); got != tc.rows {
						t.Errorf("check's rows %s, want %s:\n%s", got, tc.rows, out.String())
					}
				}
			}
		})
	}
}

// TestNoLayoutNamesTheVariable: when the CRD's schema gives no layout, the refusal names
// --api-version, and VMC_API_VERSION too when the version came from it.
func TestNoLayoutNamesTheVariable(t *testing.T) {
	openGVR := k8sschema.GroupVersionResource{Group: "open.example.org", Version: "v1alpha1", Resource: "virtualmachines"}
	srv := newFakeAPIServer(t, openGVR, establishedCRD(t, "testdata/crds/open.yaml"))
	cl, err := newAPIClients(checked(&rest.Config{Host: srv.URL}))
	if err != nil {
		t.Fatal(err)
	}
	for env, want := range map[string]string{
		"":                          "--api-version open.example.org/v1alpha1 without --schema-file: CRD virtualmachines.open.example.org: ",
		"open.example.org/v1alpha1": "--api-version (from VMC_API_VERSION) open.example.org/v1alpha1 without --schema-file: CRD virtualmachines.open.example.org: ",
	} {
		if env == "" {
			unsetenv(t, "VMC_API_VERSION")
		} else {
			t.Setenv("VMC_API_VERSION", env)
		}
		_, err := gather(context.Background(), cl, srv.URL, target{gvr: openGVR, watchCRD: true})
		if got := errString(err); !strings.HasPrefix(got, want) {
			t.Errorf("VMC_API_VERSION %q: error %q, want it to begin %q", env, got, want)
		}
	}
}

// tableRows are the rows of check's table, each its check and result, those of RBAC as one:
// failed if one of them failed.
func tableRows(table string) string {
	var rows []string
	rbac := ""
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if f[0] != "rbac" {
			rows = append(rows, f[0]+" "+f[1])
		} else if rbac != "rbac FAIL" {
			rbac = "rbac " + f[1]
		}
	}
	if rbac != "" {
		rows = append(rows, rbac)
	}
	return strings.Join(rows, ",")
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	var ee cli.ExitCoder
	if errors.As(err, &ee) {
		return ee.Error()
	}
	return err.Error()
}

// TestVersionNotServed: one row per answer versionNotServed gives, each read from the CRD as
// crds.Served reads it (the version missing, served: false, not Established, served) or from
// no CRD at all, for this project's version that only the webhook form has (v1) and for any
// other.
func TestVersionNotServed(t *testing.T) {
	own := func(version string) k8sschema.GroupVersionResource {
		return k8sschema.GroupVersionResource{Group: ownGVR.Group, Version: version, Resource: ownGVR.Resource}
	}
	other := k8sschema.GroupVersionResource{Group: noStatusGVR.Group, Version: "v2", Resource: noStatusGVR.Resource}
	plain := establishedCRD(t, ownCRDFile)
	unestablished := bytes.Replace(plain, []byte(`"status":"True"`), []byte(`"status":"False"`), 1)
	if bytes.Equal(unestablished, plain) {
		t.Fatal("the test CRD has no Established condition to turn False")
	}
	read := func(def []byte) func() ([]byte, error) { return func() ([]byte, error) { return def, nil } }
	unreadable := func() ([]byte, error) { return nil, errors.New("forbidden") }
	const (
		head       = "the cluster at HOST serves cloudnative.czs in v1alpha1, not "
		webhookFix = "run the webhook and apply that form (vm-controller crds --conversion webhook --namespace NS | kubectl apply -f -; docs/versions.md), or give --api-version cloudnative.czs/v1alpha1"
	)
	tests := map[string]struct {
		gvr     k8sschema.GroupVersionResource
		readCRD func() ([]byte, error) // nil: not read (--watch-crd=false)
		want    string
	}{
		"v1, CRD not read": {gvr: own("v1"),
			want: head + "v1: v1 is only in the form of CRD virtualmachines.cloudnative.czs with webhook conversion (unless that form is applied with v1 served: false): " + webhookFix},
		"v1, CRD unreadable": {gvr: own("v1"), readCRD: unreadable,
			want: head + "v1: v1 is only in the form of CRD virtualmachines.cloudnative.czs with webhook conversion (unless that form is applied with v1 served: false): " + webhookFix},
		"v1beta1, CRD not read": {gvr: own("v1beta1"),
			want: head + "v1beta1: CRD virtualmachines.cloudnative.czs has no version v1beta1, or sets it served: false: give --api-version cloudnative.czs/v1alpha1, or serve v1beta1 in the CRD"},
		"v1 on the plain CRD": {gvr: own("v1"), readCRD: read(plain),
			want: head + "v1: CRD virtualmachines.cloudnative.czs is in its plain form, without v1, which only its form with webhook conversion has: " + webhookFix},
		"another group's version it lacks": {gvr: other, readCRD: read(establishedCRD(t, noStatusCRDFile)),
			want: "the cluster at HOST serves nostatus.example.org in v1alpha1, not v2: CRD virtualmachines.nostatus.example.org has no version v2: give --api-version nostatus.example.org/v1alpha1, or add v2 to the CRD"},
		"served: false": {gvr: own("v1beta1"), readCRD: read(withServed(t, plain, "v1beta1", false)),
			want: head + "v1beta1: CRD virtualmachines.cloudnative.czs has v1beta1 with served: false: set it served: true (kubectl edit crd virtualmachines.cloudnative.czs), or give --api-version cloudnative.czs/v1alpha1"},
		"not Established": {gvr: own("v1beta1"), readCRD: read(unestablished),
			want: head + "v1beta1: CRD virtualmachines.cloudnative.czs is not Established"},
		"served, not yet discovered": {gvr: own("v1beta1"), readCRD: read(plain),
			want: head + "v1beta1: CRD virtualmachines.cloudnative.czs serves it, and discovery does not list it yet: try again"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := versionNotServed("HOST", tc.gvr, []string{"v1alpha1"}, tc.readCRD); got != tc.want {
				t.Errorf("versionNotServed =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
