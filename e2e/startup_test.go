//go:build e2e

package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestStartupReadsCRDOnce: run and check read the resource's CRD from the API server once per
// start, whatever needs it: for this project's group the CRD check; for a CRD of another group
// without --schema-file also the field map its schema chooses and, as the CRD has no status
// subresource, the status route. Both talk to the real API server through a proxy of the
// test's own, which counts the requests they make and nothing else's.
func TestStartupReadsCRDOnce(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	installCRDs(t)
	// The project's CRD without the status subresource, under a group of this test's own.
	const group = "startonce.example.org"
	other := "virtualmachines." + group
	data, err := os.ReadFile(filepath.Join(repoRoot(), "testdata", "crds", "no-status.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	apply(t, strings.ReplaceAll(string(data), "nostatus.example.org", group))
	t.Cleanup(func() {
		if _, err := kubectlErr("delete", "crd", other, "--wait=false", "--ignore-not-found"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	waitEstablished(t, other)

	for name, tc := range map[string]struct {
		apiVersion, crd string
		rows            string // check's first rows
	}{
		"own group":     {"cloudnative.czs/v1alpha1", "virtualmachines.cloudnative.czs", "discovery pass,crd pass,fields pass"},
		"another group": {group + "/v1alpha1", other, "fieldmap pass,discovery pass,crd WARN,fields pass"},
	} {
		t.Run(name, func(t *testing.T) {
			p := newCountingProxy(t)
			flags := []string{"--kubeconfig", p.kubeconfig, "--namespace", ns, "--api-version", tc.apiVersion}
			rows, failed, code := checkRows(t, flags...)
			if n := len(strings.Split(tc.rows, ",")); code != 0 || len(rows) < n || strings.Join(rows[:n], ",") != tc.rows {
				t.Fatalf("check: exit %d, rows %v, failed %v", code, rows, failed)
			}
			checked := p.crdReads(tc.crd)
			if checked != 1 {
				t.Errorf("check read CRD %s %d times, want once", tc.crd, checked)
			}
			c := startController(t, ns, flags...)
			c.waitReady(t)
			if n := p.crdReads(tc.crd) - checked; n != 1 {
				t.Errorf("run read CRD %s %d times before its caches synced, want once\n%s", tc.crd, n, c.tail(20))
			}
		})
	}
}

// countingProxy is a plain-HTTP proxy to the cluster's API server that forwards every request
// as the kubeconfig's user and counts them by method and path.
type countingProxy struct {
	kubeconfig string // a kubeconfig that points at the proxy

	mu       sync.Mutex
	requests map[string]int
}

func newCountingProxy(t *testing.T) *countingProxy {
	t.Helper()
	var cfg struct {
		Clusters []struct {
			Cluster struct {
				Server string `json:"server"`
				CA     string `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
		Users []struct {
			User struct {
				Cert string `json:"client-certificate-data"`
				Key  string `json:"client-key-data"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := json.Unmarshal([]byte(kubectl(t, "config", "view", "--raw", "--minify", "--flatten", "-o", "json")), &cfg); err != nil ||
		len(cfg.Clusters) == 0 || len(cfg.Users) == 0 {
		t.Fatalf("read the kubeconfig: %v", err)
	}
	decode := func(s string) []byte {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("read the kubeconfig: %v", err)
		}
		return b
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(decode(cfg.Clusters[0].Cluster.CA)) {
		t.Fatal("the kubeconfig's certificate authority is not PEM")
	}
	pair, err := tls.X509KeyPair(decode(cfg.Users[0].User.Cert), decode(cfg.Users[0].User.Key))
	if err != nil {
		t.Fatalf("the kubeconfig's user has no client certificate: %v", err)
	}
	upstream, err := url.Parse(cfg.Clusters[0].Cluster.Server)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}}, ForceAttemptHTTP2: true}
	rp.FlushInterval = -1 // watches stream
	p := &countingProxy{requests: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests[r.Method+" "+r.URL.Path]++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections() // the watches of a stopped controller
		srv.Close()
	})
	p.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p.kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q}}]
users: [{name: proxy, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]
current-context: proxy
`, srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// crdReads is how many times the CRD named name was read (a GET by name, not the list and
// watch of the controller's CRD watch).
func (p *countingProxy) crdReads(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests["GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name]
}
