package command

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

// TestLimitQPS: --qps 0 turns client-go's limiter off (QPS 0 in a rest.Config would mean 5);
// a --qps above 0 is the limit, with --burst.
func TestLimitQPS(t *testing.T) {
	tests := map[string]struct {
		qps       float64
		burst     int
		wantQPS   float32
		wantBurst int
	}{
		"no limit":  {0, 100, -1, 100},
		"a limit":   {50, 100, 50, 100},
		"a trickle": {0.5, 1, 0.5, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var cfg rest.Config
			limitQPS(&cfg, tc.qps, tc.burst)
			if cfg.QPS != tc.wantQPS || cfg.Burst != tc.wantBurst {
				t.Errorf("QPS %g, burst %d; want %g, %d", cfg.QPS, cfg.Burst, tc.wantQPS, tc.wantBurst)
			}
			// What client-go makes of it: a limiter exactly when there is a limit.
			client, err := rest.RESTClientFor(&rest.Config{Host: "https://127.0.0.1:1", QPS: cfg.QPS, Burst: cfg.Burst,
				ContentConfig: rest.ContentConfig{GroupVersion: &k8sschema.GroupVersion{Version: "v1"}, NegotiatedSerializer: scheme.Codecs.WithoutConversion()}})
			if err != nil {
				t.Fatal(err)
			}
			if limited := client.GetRateLimiter() != nil; limited != (tc.qps > 0) {
				t.Errorf("client-go rate limiter present: %t, want %t", limited, tc.qps > 0)
			}
		})
	}
}

// TestQPSRangeFitsClientGo: the ends of the range Validate accepts for --qps and --usage-qps
// (minQPS, maxQPS) stay a limit in client-go's float32: neither 0, which client-go reads as
// its default of 5 per second, nor +Inf.
func TestQPSRangeFitsClientGo(t *testing.T) {
	for _, qps := range []float64{minQPS, maxQPS} {
		var cfg rest.Config
		limitQPS(&cfg, qps, 1)
		if !(cfg.QPS > 0) || math.IsInf(float64(cfg.QPS), 0) {
			t.Errorf("--qps %g: rest.Config.QPS %g, want a positive finite limit", qps, cfg.QPS)
		}
		if got := float64(cfg.QPS); math.Abs(got-qps) > qps*1e-6 {
			t.Errorf("--qps %g: rest.Config.QPS %g", qps, got)
		}
	}
}

// TestHTTP1: against a server that speaks both, a client of the configuration http1 made
// speaks HTTP/1.1 (through the keep-alive dialer), and one of client-go's own HTTP/2.
func TestHTTP1(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Success","message":%q}`, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	// proto is the protocol a client of cfg spoke to the server.
	proto := func(cfg *rest.Config) string {
		t.Helper()
		cfg.ContentConfig = rest.ContentConfig{GroupVersion: &k8sschema.GroupVersion{Version: "v1"}, NegotiatedSerializer: scheme.Codecs.WithoutConversion()}
		client, err := rest.RESTClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		body, err := client.Get().AbsPath("/proto").DoRaw(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var status metav1.Status
		if err := json.Unmarshal(body, &status); err != nil {
			t.Fatal(err)
		}
		return status.Message
	}
	tests := map[string]struct {
		http2 bool
		want  string
	}{
		"default": {false, "HTTP/1.1"},
		"--http2": {true, "HTTP/2.0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
			if !tc.http2 {
				http1(cfg)
			}
			if got := proto(cfg); got != tc.want {
				t.Errorf("spoke %s, want %s", got, tc.want)
			}
		})
	}
}

// TestUnlimited: the watches' copy of a rate-limited config has no limiter, and the config
// the writes use keeps its own.
func TestUnlimited(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1", ContentConfig: rest.ContentConfig{GroupVersion: &k8sschema.GroupVersion{Version: "v1"},
		NegotiatedSerializer: scheme.Codecs.WithoutConversion()}}
	limitQPS(cfg, 50, 100)
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	for name, tc := range map[string]struct {
		cfg     *rest.Config
		limited bool
	}{"writes": {cfg, true}, "watches": {unlimited(cfg), false}} {
		client, err := rest.RESTClientFor(tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := client.GetRateLimiter() != nil; got != tc.limited {
			t.Errorf("%s: rate limiter present: %t, want %t", name, got, tc.limited)
		}
	}
}

// TestRunClientsShareConnections: the controller's clients go over one pool of connections, so
// that requests made one after the other through each of them reuse one connection (each
// client had a pool of its own, and opened a connection, with its TLS handshake, of its own).
func TestRunClientsShareConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Success"}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
	http1(cfg)
	limitQPS(cfg, 0, 100)
	cl, err := newRunClients(cfg, 0, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, client := range map[string]rest.Interface{
		"VM writes": cl.vmREST, "VM watch": cl.vmWatch, "pods": cl.proto.CoreV1().RESTClient(),
		"pod watch": cl.podWatch.CoreV1().RESTClient(), "lease": cl.lease.CoordinationV1().RESTClient(),
	} {
		if _, err := client.Get().AbsPath("/status").DoRaw(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// The dynamic client's answer is the server's Status, whatever it makes of it: what
	// counts is the connection the request went over.
	_, _ = cl.dynamic.Resource(k8sschema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("a").Get(ctx, "b", metav1.GetOptions{})
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for requests one after the other, want 1", n)
	}
}

// TestKubeconfigFiles: --kubeconfig is one file; $KUBECONFIG a list of files, merged as
// kubectl merges them (a file that is missing is skipped, every file missing is refused),
// never taken for one file's name; a missing or broken file is one clear error.
func TestKubeconfigFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	// The cluster in one file, the user and the context in another: neither works alone.
	clusterFile := write("cluster.yaml", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://cluster.example.org:6443"}}]
current-context: dev
`)
	userFile := write("user.yaml", `apiVersion: v1
kind: Config
users: [{name: u, user: {token: from-the-second-file}}]
contexts: [{name: dev, context: {cluster: c, user: u, namespace: vms}}]
`)
	whole := write("whole.yaml", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://whole.example.org:6443"}}]
users: [{name: u, user: {token: whole}}]
contexts: [{name: w, context: {cluster: c, user: u}}]
current-context: w
`)
	notYAML := write("not-yaml", "clusters: [\n")
	text := write("hostname", "node-a\n")
	pod := write("pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
	other := write("other.yaml", "replicas: 3\n")
	// Contexts, and none of them current; a current context that names a cluster not there.
	noCurrent := write("no-current.yaml", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://cluster.example.org:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: dev, context: {cluster: c, user: u}}]
`)
	noCluster := write("no-cluster.yaml", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://cluster.example.org:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: dev, context: {cluster: missing, user: u}}]
current-context: dev
`)
	missing, missing2 := filepath.Join(dir, "none.yaml"), filepath.Join(dir, "none2.yaml")
	list := func(files ...string) string { return strings.Join(files, string(filepath.ListSeparator)) }

	tests := map[string]struct {
		flag    string // --kubeconfig
		env     string // $KUBECONFIG
		host    string // the server the configuration reaches
		token   string
		ns      string // the namespace a client defaults to
		wantErr string // the whole error, or with a trailing "...", its beginning
		context string // --context
	}{
		"$KUBECONFIG lists two files":           {env: list(clusterFile, userFile), host: "https://cluster.example.org:6443", token: "from-the-second-file", ns: "vms"},
		"the first file of the list wins":       {env: list(whole, clusterFile, userFile), host: "https://whole.example.org:6443", token: "whole", ns: "default"},
		"a missing file of the list is skipped": {env: list(missing, clusterFile, userFile), host: "https://cluster.example.org:6443", token: "from-the-second-file", ns: "vms"},
		"$KUBECONFIG one file":                  {env: whole, host: "https://whole.example.org:6443", token: "whole", ns: "default"},
		"--kubeconfig":                          {flag: whole, host: "https://whole.example.org:6443", token: "whole", ns: "default"},
		"--kubeconfig before $KUBECONFIG":       {flag: whole, env: list(clusterFile, userFile), host: "https://whole.example.org:6443", token: "whole", ns: "default"},
		"--kubeconfig missing":                  {flag: missing, wantErr: "kubeconfig: stat " + missing + ": no such file or directory"},
		"--kubeconfig is one file, not a list":  {flag: list(clusterFile, userFile), wantErr: "kubeconfig: stat " + list(clusterFile, userFile) + ": no such file or directory"},
		"$KUBECONFIG missing":                   {env: missing, wantErr: "kubeconfig: stat " + missing + ": no such file or directory"},
		"$KUBECONFIG lists only missing files":  {env: list(missing, missing2), wantErr: "kubeconfig: none of the files $KUBECONFIG lists exists (" + missing + ", " + missing2 + "): file does not exist"},
		"--kubeconfig not YAML":                 {flag: notYAML, wantErr: "kubeconfig " + notYAML + ": not a kubeconfig file (not YAML: line 1: did not find expected node content)"},
		"a file of $KUBECONFIG not YAML":        {env: list(clusterFile, notYAML), wantErr: "kubeconfig " + notYAML + ": not a kubeconfig file (not YAML: line 1: did not find expected node content)"},
		"--kubeconfig a text file":              {flag: text, wantErr: "kubeconfig " + text + ": not a kubeconfig file (plain text, not a YAML mapping)"},
		"a text file of $KUBECONFIG":            {env: list(text, clusterFile, userFile), wantErr: "kubeconfig " + text + ": not a kubeconfig file (plain text, not a YAML mapping)"},
		"--kubeconfig of another kind":          {flag: pod, wantErr: "kubeconfig " + pod + ": not a kubeconfig file (kind Pod, not Config)"},
		"--kubeconfig of other YAML":            {flag: other, wantErr: "kubeconfig " + other + ": not a kubeconfig file (no clusters, users or contexts)"},
		"--kubeconfig a directory":              {flag: dir, wantErr: "kubeconfig: read " + dir + ": is a directory"},
		"no kubeconfig at all":                  {wantErr: "kubeconfig: invalid configuration: no configuration has been provided..."},
		"a cluster without a user or a context": {env: clusterFile,
			wantErr: "kubeconfig " + clusterFile + `: current context "dev" is not in the file (set one with kubectl config use-context, or give --context)`},
		"no current context": {flag: noCurrent,
			wantErr: "kubeconfig " + noCurrent + ": no current context (set one with kubectl config use-context, or give --context)"},
		"no current context in any file": {env: list(noCurrent, missing, other),
			wantErr: "kubeconfig " + noCurrent + ", " + other + ": no current context (set one with kubectl config use-context, or give --context)"},
		"the context's cluster missing": {flag: noCluster,
			wantErr: "kubeconfig " + noCluster + `: context "dev" names cluster "missing", which is not in the file`},
		"--context names a cluster missing": {flag: noCluster, context: "dev",
			wantErr: "kubeconfig " + noCluster + `: context "dev" names cluster "missing", which is not in the file`},
		"the context's cluster in none of the files": {env: list(noCluster, noCurrent),
			wantErr: "kubeconfig " + noCluster + ", " + noCurrent + `: context "dev" names cluster "missing", which is not in any of the files`},
		"an unknown --context": {flag: noCurrent, context: "nope", wantErr: `kubeconfig: context "nope" does not exist`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tc.env)
			if tc.env == "" && tc.flag == "" {
				if _, err := os.Stat(clientcmd.RecommendedHomeFile); err == nil {
					t.Skipf("%s exists", clientcmd.RecommendedHomeFile)
				}
				t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
			}
			var args []string
			if tc.flag != "" {
				args = []string{"--kubeconfig", tc.flag}
			}
			if tc.context != "" {
				args = append(args, "--context", tc.context)
			}
			f := parseClusterFlags(t, args...)
			cfg, err := f.restConfig("test")
			if tc.wantErr != "" {
				got := fmt.Sprint(err)
				if prefix, ok := strings.CutSuffix(tc.wantErr, "..."); ok && strings.HasPrefix(got, prefix) || got == tc.wantErr {
					return
				}
				t.Fatalf("error %q, want %q", got, tc.wantErr)
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != tc.host || cfg.BearerToken != tc.token {
				t.Errorf("server %s with token %q, want %s with %q", cfg.Host, cfg.BearerToken, tc.host, tc.token)
			}
			if ns, err := f.namespace(); err != nil || ns != tc.ns {
				t.Errorf("namespace %q (%v), want %q", ns, err, tc.ns)
			}
		})
	}
}

// TestCommandsRefuseANonKubeconfig: every command that reads a kubeconfig says, in one line,
// that a file which is none is not a kubeconfig file, not client-go's decoder's words.
func TestCommandsRefuseANonKubeconfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hostname")
	if err := os.WriteFile(file, []byte("node-a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unsetenv(t, "VMC_KUBECONFIG", "VMC_CONTEXT")
	want := "kubeconfig " + file + ": not a kubeconfig file (plain text, not a YAML mapping)"
	run := func(app *cli.App, args ...string) string {
		var out bytes.Buffer
		app.Writer, app.ErrWriter = &out, &out
		return fmt.Sprint(app.Run(args))
	}
	for _, args := range [][]string{
		{"run"}, {"check"}, {"migrate"}, {"webhook", "--secret", "s", "--namespace", "ns"},
	} {
		if got := run(App(""), append(append([]string{"vm-controller"}, args...), "--kubeconfig", file)...); got != want {
			t.Errorf("vm-controller %s: %q, want %q", args[0], got, want)
		}
	}
	for _, verb := range []string{"start", "stop", "restart", "status", "migrate", "wait --for=phase=Active"} {
		args := append([]string{PluginName}, strings.Fields(verb)...)
		if got := run(Plugin(""), PluginArgs(append(args, "vm1", "--kubeconfig", file))...); got != want {
			t.Errorf("kubectl vm %s: %q, want %q", verb, got, want)
		}
	}
}

// TestCommandsSayTheContextIsUnusable: run, check and the kubectl plugin's verbs say, in one
// line that names the kubeconfig, that it has no current context, or that its context names a
// cluster it does not have; client-go said both as "invalid configuration: no configuration
// has been provided, try setting KUBERNETES_MASTER environment variable".
func TestCommandsSayTheContextIsUnusable(t *testing.T) {
	dir := t.TempDir()
	unsetenv(t, "VMC_KUBECONFIG", "VMC_CONTEXT")
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod, where client-go would take the in-cluster config
	for name, tc := range map[string]struct{ context, cluster, want string }{
		"no current context":        {cluster: "c", want: ": no current context (set one with kubectl config use-context, or give --context)"},
		"a cluster not in the file": {context: "dev", cluster: "missing", want: `: context "dev" names cluster "missing", which is not in the file`},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: dev, context: {cluster: %s, user: u}}]
current-context: %q
`, tc.cluster, tc.context)
			if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			want := "kubeconfig " + file + tc.want
			for _, args := range [][]string{{"run"}, {"check"}} {
				var stderr bytes.Buffer
				code := RunMain(App(""), "vm-controller", append(append([]string{"vm-controller"}, args...), "--kubeconfig", file), &stderr)
				if got := stderr.String(); code != 1 || got != "vm-controller: "+want+"\n" {
					t.Errorf("vm-controller %s: exit %d, %q; want exit 1, %q", args[0], code, got, want)
				}
			}
			for _, verb := range []string{"start", "status"} {
				var stderr bytes.Buffer
				code := RunMain(Plugin(""), "kubectl vm", PluginArgs([]string{PluginName, verb, "vm1", "--kubeconfig", file}), &stderr)
				if got := stderr.String(); code != 1 || got != "kubectl vm: "+want+"\n" {
					t.Errorf("kubectl vm %s: exit %d, %q; want exit 1, %q", verb, code, got, want)
				}
			}
		})
	}
}

// TestCommandsReadKubeconfigList: check and the kubectl plugin reach the cluster of a
// $KUBECONFIG that lists two files, the cluster in one and the user and the context in the
// other (both failed at once with "kubeconfig: stat a:b: no such file or directory").
func TestCommandsReadKubeconfigList(t *testing.T) {
	srv := newFakeAPIServer(t, ownGVR, establishedCRD(t, ownCRDFile))
	dir := t.TempDir()
	clusterFile, userFile := filepath.Join(dir, "cluster.yaml"), filepath.Join(dir, "user.yaml")
	for file, data := range map[string]string{
		clusterFile: fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: fake, cluster: {server: %q}}]\ncurrent-context: fake\n", srv.URL),
		userFile:    "apiVersion: v1\nkind: Config\nusers: [{name: fake, user: {token: fake}}]\ncontexts: [{name: fake, context: {cluster: fake, user: fake, namespace: vms}}]\n",
	} {
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBECONFIG", clusterFile+string(filepath.ListSeparator)+userFile)
	unsetenv(t, "VMC_KUBECONFIG", "VMC_CONTEXT")

	var out, errOut bytes.Buffer
	a := App("")
	a.Writer, a.ErrWriter = &out, &errOut
	if err := a.Run([]string{"vm-controller", "check", "--api-version", ownGVR.GroupVersion().String()}); err != nil {
		t.Fatalf("check: %v\n%s%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "the cluster at "+srv.URL+" serves") {
		t.Errorf("check did not reach the cluster of the two files:\n%s", out.String())
	}

	// The VM does not exist: what counts is that the plugin asked the cluster of the first
	// file for it, in the namespace of the second file's context.
	p := Plugin("")
	p.Writer, p.ErrWriter = &out, &errOut
	err := p.Run([]string{"kubectl vm", "status", "--api-version", ownGVR.GroupVersion().String(), "vm1"})
	if err == nil || strings.HasPrefix(err.Error(), "kubeconfig:") {
		t.Fatalf("status: %v, want the VM not found", err)
	}
	if want := "GET /apis/" + ownGVR.GroupVersion().String() + "/namespaces/vms/" + ownGVR.Resource + "/vm1"; srv.count(want) != 1 {
		t.Errorf("the plugin did not ask %s (error %v); it asked %v", want, err, srv.requests)
	}
}

// parseClusterFlags fills clusterFlags from args and the environment as a command's flags do,
// without VMC_KUBECONFIG and VMC_CONTEXT.
func parseClusterFlags(t *testing.T, args ...string) clusterFlags {
	t.Helper()
	unsetenv(t, "VMC_KUBECONFIG", "VMC_CONTEXT")
	var f clusterFlags
	set := flag.NewFlagSet("test", flag.ContinueOnError)
	for _, fl := range f.flags() {
		if err := fl.Apply(set); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// unsetenv unsets the variables for the test: set, even to "", one would be read.
func unsetenv(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
}

// TestRunClientsLeaseOutsideBucket: with --qps set, a Lease renewal is sent at once behind a
// burst of requests queued in the bucket the VM writes, pods and Events share. In that
// bucket, the renewal, bounded by --renew-deadline, failed before it was sent, and the leader
// gave up its Lease because it was busy.
func TestRunClientsLeaseOutsideBucket(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"vm-controller","namespace":"ns"}}`)
	}))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	limitQPS(cfg, 5, 10) // --qps 5 --burst 10
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	cl, err := newRunClients(cfg, 20, 40, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A burst of Events waiting for the shared bucket, as the broadcaster's goroutines do.
	bucket := cl.proto.EventsV1().RESTClient().GetRateLimiter()
	burst, cancel := context.WithCancel(context.Background())
	var waiting sync.WaitGroup
	for range 100 {
		waiting.Go(func() { _ = bucket.Wait(burst) })
	}
	defer func() { cancel(); waiting.Wait() }()
	time.Sleep(100 * time.Millisecond)
	// The renewal, as client-go's elector makes it: under --renew-deadline.
	ctx, cancelRenew := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelRenew()
	if _, err := cl.lease.CoordinationV1().Leases("ns").Get(ctx, "vm-controller", metav1.GetOptions{}); err != nil {
		t.Errorf("a Lease read behind 100 requests in the bucket at --qps 5: %v", err)
	}
}

// TestKubeconfigFromPipe: a kubeconfig that can be read once only (--kubeconfig
// <(kubectl config view --raw), /dev/stdin) is read once, by client-go: the files are read
// again only to say which is no kubeconfig when client-go cannot load them.
func TestKubeconfigFromPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		defer w.Close()
		_, _ = w.WriteString(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://piped.example.org:6443"}}]
users: [{name: u, user: {token: piped}}]
contexts: [{name: p, context: {cluster: c, user: u}}]
current-context: p
`)
	}()
	t.Setenv("KUBECONFIG", "")
	f := parseClusterFlags(t, "--kubeconfig", fmt.Sprintf("/dev/fd/%d", r.Fd()))
	cfg, err := f.restConfig("test")
	if err != nil {
		t.Fatalf("a kubeconfig from a pipe: %v", err)
	}
	if cfg.Host != "https://piped.example.org:6443" || cfg.BearerToken != "piped" {
		t.Errorf("server %s with token %q, want the piped configuration's", cfg.Host, cfg.BearerToken)
	}
}
