package command

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
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
	cl, err := newRunClients(cfg, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, client := range map[string]rest.Interface{
		"VM writes": cl.vmREST, "VM watch": cl.vmWatch, "pods": cl.proto.CoreV1().RESTClient(),
		"pod watch": cl.podWatch.CoreV1().RESTClient(), "lease": cl.kube.CoordinationV1().RESTClient(),
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
