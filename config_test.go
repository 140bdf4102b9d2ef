package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// parseFlags fills a command's configuration from args the way the command line does: every
// flag's declared default, then the arguments. VMC_ variables of the test's environment are
// cleared first, so that the defaults are the declared ones.
func parseFlags(t *testing.T, cmd *cli.Command, args ...string) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "VMC_") || name == "KUBECONFIG" {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	set := flag.NewFlagSet(cmd.Name, flag.ContinueOnError)
	for _, f := range cmd.Flags {
		if err := f.Apply(set); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.Parse(args); err != nil {
		t.Fatal(err)
	}
}

// validateCase is one row of a Validate table: the arguments, and the error they give ("" for
// none). A row's error must name its flag, given as it appears in the message.
type validateCase struct {
	args []string
	flag string // the flag the error names; "" for a valid row
	want string
}

func checkValidate(t *testing.T, tests map[string]validateCase, validate func(args []string) error) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := validate(tc.args)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("Validate() = %q, want %q", got, tc.want)
			}
			if tc.want != "" && !strings.Contains(got, tc.flag) {
				t.Errorf("the error %q does not name %s", got, tc.flag)
			}
		})
	}
}

func TestRunConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":                 {},
		"qps 0 is no limit":        {args: []string{"--qps", "0"}},
		"a qps limit":              {args: []string{"--qps", "50", "--burst", "100"}},
		"usage off":                {args: []string{"--usage-interval", "0"}},
		"log level debug":          {args: []string{"--log-level", "debug"}},
		"log level":                {[]string{"--log-level", "loud"}, "--log-level", `--log-level "loud": want debug, info, warn or error`},
		"log format":               {[]string{"--log-format", "xml"}, "--log-format", `--log-format "xml": want text or json`},
		"api version":              {[]string{"--api-version", "nogroup"}, "api version", `api version "nogroup": want group/version, such as cloudnative.czs/v1alpha1`},
		"resource":                 {[]string{"--resource", "Virtual.Machines"}, "resource", `resource "Virtual.Machines": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
		"namespace":                {[]string{"--namespace", "Bad_NS"}, "--namespace", `--namespace "Bad_NS": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		"selector":                 {[]string{"--selector", "a in (("}, "--selector", `--selector: unable to parse requirement: found '(', expected: ',', ')' or identifier`},
		"workers":                  {[]string{"--workers", "0"}, "--workers", "--workers must be at least 1, got 0"},
		"burst":                    {[]string{"--burst", "0"}, "--burst", "--burst must be at least 1, got 0"},
		"retry burst":              {[]string{"--retry-burst", "0"}, "--retry-burst", "--retry-burst must be at least 1, got 0"},
		"negative qps":             {[]string{"--qps", "-1"}, "--qps", "--qps must not be negative, got -1"},
		"retry qps":                {[]string{"--retry-qps", "0"}, "--retry-qps", "--retry-qps must be greater than 0, got 0"},
		"resync":                   {[]string{"--resync", "-1s"}, "--resync", "--resync must not be negative"},
		"events":                   {[]string{"--events", "normal"}, "--events", `--events "normal": want all or warnings`},
		"restart backoff":          {[]string{"--restart-backoff", "0"}, "--restart-backoff", "--restart-backoff must be positive and at most --max-restart-backoff"},
		"max restart backoff":      {[]string{"--restart-backoff", "10m"}, "--max-restart-backoff", "--restart-backoff must be positive and at most --max-restart-backoff"},
		"server image":             {[]string{"--server-image", ""}, "--server-image", "--server-image must not be empty"},
		"resize manual":            {args: []string{"--resize", "manual"}},
		"resize":                   {[]string{"--resize", "hotplug"}, "--resize", `--resize "hotplug": want in-place, replace or manual`},
		"retry base delay":         {[]string{"--retry-base-delay", "0"}, "--retry-base-delay", "--retry-base-delay must be positive and at most --retry-max-delay"},
		"retry max delay":          {[]string{"--retry-base-delay", "2s", "--retry-max-delay", "1s"}, "--retry-max-delay", "--retry-base-delay must be positive and at most --retry-max-delay"},
		"usage interval":           {[]string{"--usage-interval", "-1s"}, "--usage-interval", "want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval"},
		"usage threshold":          {[]string{"--usage-threshold", "-0.1"}, "--usage-threshold", "want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval"},
		"usage max interval":       {[]string{"--usage-max-interval", "30s"}, "--usage-max-interval", "want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval"},
		"usage qps":                {[]string{"--usage-qps", "0"}, "--usage-qps", "--usage-qps must be greater than 0 and --usage-burst at least 1"},
		"usage burst":              {[]string{"--usage-burst", "0"}, "--usage-burst", "--usage-qps must be greater than 0 and --usage-burst at least 1"},
		"lease duration":           {[]string{"--lease-duration", "1s"}, "--lease-duration", "want --lease-duration > --renew-deadline > --retry-period > 0, got 1s, 10s, 500ms"},
		"renew deadline":           {[]string{"--renew-deadline", "400ms"}, "--renew-deadline", "want --lease-duration > --renew-deadline > --retry-period > 0, got 15s, 400ms, 500ms"},
		"retry period":             {[]string{"--retry-period", "0"}, "--retry-period", "want --lease-duration > --renew-deadline > --retry-period > 0, got 15s, 10s, 0s"},
		"schema file is not read":  {args: []string{"--schema-file", "/nonexistent.yaml"}},
		"group without a map okay": {args: []string{"--api-version", "compute.example.org/v1"}},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &runConfig{}
		parseFlags(t, runCommand(c), args...)
		return c.Validate()
	})
}

func TestCheckConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":    {},
		"api version": {[]string{"--api-version", "v1"}, "api version", `api version "v1": want group/version, such as cloudnative.czs/v1alpha1`},
		"namespace":   {[]string{"--namespace", "A_B"}, "--namespace", `--namespace "A_B": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &checkConfig{}
		parseFlags(t, checkCommand(c), args...)
		return c.Validate()
	})
}

func TestPlanConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":            {},
		"a time":              {args: []string{"--now", "2026-06-01T12:00:00Z"}},
		"an api version":      {args: []string{"--api-version", "compute.example.org/v1"}},
		"now":                 {[]string{"--now", "yesterday"}, "--now", `--now "yesterday": want a time such as 2026-06-01T12:00:00Z`},
		"server image":        {[]string{"--server-image", ""}, "--server-image", "--server-image must not be empty"},
		"resize":              {[]string{"--resize", "in_place"}, "--resize", `--resize "in_place": want in-place, replace or manual`},
		"restart backoff":     {[]string{"--restart-backoff", "-1s"}, "--restart-backoff", "--restart-backoff must be positive and at most --max-restart-backoff"},
		"max restart backoff": {[]string{"--max-restart-backoff", "1s"}, "--max-restart-backoff", "--restart-backoff must be positive and at most --max-restart-backoff"},
		"api version":         {[]string{"--api-version", "v1"}, "--api-version", `--api-version "v1": want group/version, such as cloudnative.czs/v1alpha1`},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &planConfig{}
		parseFlags(t, planCommand(c), args...)
		return c.Validate()
	})
}

func TestManifestsConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":        {},
		"one namespace":   {args: []string{"--namespace", "vms", "--watch-namespace", "vms"}},
		"api version":     {[]string{"--api-version", "v1"}, "api version", `api version "v1": want group/version, such as cloudnative.czs/v1alpha1`},
		"namespace":       {[]string{"--namespace", "A_B"}, "--namespace", `--namespace "A_B": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		"watch namespace": {[]string{"--watch-namespace", "A_B"}, "--watch-namespace", `--watch-namespace "A_B": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		"replicas":        {[]string{"--replicas", "0"}, "--replicas", "--replicas must be at least 1, got 0"},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &manifestsConfig{}
		parseFlags(t, manifestsCommand(c), args...)
		return c.Validate()
	})
}

// TestManifestsImage: the default image is the one `make image` builds.
func TestManifestsImage(t *testing.T) {
	c := &manifestsConfig{}
	parseFlags(t, manifestsCommand(c))
	if want := "ghcr.io/cloudnative-czs/vm-controller:" + imageTag(); c.Image != want {
		t.Errorf("--image defaults to %q, want %q", c.Image, want)
	}
}

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
