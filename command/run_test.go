package command

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/cloudnative-czs/vm-controller/backend/pods"
)

func TestRunConfigValidate(t *testing.T) {
	tests := map[string]validateCase{
		"defaults":                     {},
		"qps 0 is no limit":            {args: []string{"--qps", "0"}},
		"a qps limit":                  {args: []string{"--qps", "50", "--burst", "100"}},
		"usage off":                    {args: []string{"--usage-interval", "0"}},
		"log level debug":              {args: []string{"--log-level", "debug"}},
		"log level":                    {[]string{"--log-level", "loud"}, "--log-level", `--log-level "loud": want debug, info, warn or error`},
		"log format":                   {[]string{"--log-format", "xml"}, "--log-format", `--log-format "xml": want text or json`},
		"api version":                  {[]string{"--api-version", "nogroup"}, "api version", `api version "nogroup": want group/version, such as cloudnative.czs/v1alpha1`},
		"resource":                     {[]string{"--resource", "Virtual.Machines"}, "resource", `resource "Virtual.Machines": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
		"namespace":                    {[]string{"--namespace", "Bad_NS"}, "--namespace", `--namespace "Bad_NS": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		"selector":                     {[]string{"--selector", "a in (("}, "--selector", `--selector: unable to parse requirement: found '(', expected: ',', ')' or identifier`},
		"workers":                      {[]string{"--workers", "0"}, "--workers", "--workers must be at least 1, got 0"},
		"workers past 10000":           {[]string{"--workers", "100000000"}, "--workers", "--workers must be at most 10000, got 100000000"},
		"10000 workers":                {args: []string{"--workers", "10000"}},
		"burst":                        {[]string{"--burst", "0"}, "--burst", "--burst must be at least 1, got 0"},
		"retry burst":                  {[]string{"--retry-burst", "0"}, "--retry-burst", "--retry-burst must be at least 1, got 0"},
		"negative qps":                 {[]string{"--qps", "-1"}, "--qps", "--qps -1: want 0 (no client-side limit) or 0.01 to 1000000"},
		"retry qps":                    {[]string{"--retry-qps", "0"}, "--retry-qps", "--retry-qps 0: want 0.01 to 1000000"},
		"resync":                       {[]string{"--resync", "-1s"}, "--resync", "--resync must not be negative"},
		"events":                       {[]string{"--events", "normal"}, "--events", `--events "normal": want all or warnings`},
		"restricted server pods":       {args: []string{"--server-pod-security", "restricted"}},
		"server pods as they are":      {args: []string{"--server-pod-security", "none"}},
		"baseline server pods":         {[]string{"--server-pod-security", "baseline"}, "--server-pod-security", `--server-pod-security "baseline": want none or restricted`},
		"server pod security case":     {[]string{"--server-pod-security", "Restricted"}, "--server-pod-security", `--server-pod-security "Restricted": want none or restricted`},
		"no server pod security":       {[]string{"--server-pod-security", ""}, "--server-pod-security", `--server-pod-security "": want none or restricted`},
		"restart backoff":              {[]string{"--restart-backoff", "0"}, "--restart-backoff", "--restart-backoff must be positive and at most --max-restart-backoff"},
		"max restart backoff":          {[]string{"--restart-backoff", "10m"}, "--max-restart-backoff", "--restart-backoff must be positive and at most --max-restart-backoff"},
		"server image":                 {[]string{"--server-image", ""}, "--server-image", "--server-image must not be empty"},
		"stalled after":                {[]string{"--stalled-after", "-1m"}, "--stalled-after", "--stalled-after must not be negative, got -1m0s"},
		"never stalled":                {args: []string{"--stalled-after", "0"}},
		"resize manual":                {args: []string{"--resize", "manual"}},
		"eviction strategy Replace":    {args: []string{"--eviction-strategy", "Replace"}},
		"eviction strategy Block":      {args: []string{"--eviction-strategy", "Block"}},
		"eviction strategy":            {[]string{"--eviction-strategy", "block"}, "--eviction-strategy", `--eviction-strategy "block": want None, Replace or Block`},
		"resize":                       {[]string{"--resize", "hotplug"}, "--resize", `--resize "hotplug": want in-place, replace or manual`},
		"root disk":                    {[]string{"--root-disk", "pvc"}, "--root-disk", `--root-disk "pvc": want claim or ephemeral`},
		"ephemeral":                    {args: []string{"--root-disk", "ephemeral"}},
		"retry base delay":             {[]string{"--retry-base-delay", "0"}, "--retry-base-delay", "--retry-base-delay must be positive and at most --retry-max-delay"},
		"reconcile timeout":            {[]string{"--reconcile-timeout", "0"}, "--reconcile-timeout", "--reconcile-timeout must be at least 1s, got 0s"},
		"a longer reconcile timeout":   {args: []string{"--reconcile-timeout", "5m"}},
		"retry max delay":              {[]string{"--retry-base-delay", "2s", "--retry-max-delay", "1s"}, "--retry-max-delay", "--retry-base-delay must be positive and at most --retry-max-delay"},
		"usage interval":               {[]string{"--usage-interval", "-1s"}, "--usage-interval", "want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval"},
		"usage threshold":              {[]string{"--usage-threshold", "-0.1"}, "--usage-threshold", "want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval"},
		"usage max interval":           {[]string{"--usage-max-interval", "30s"}, "--usage-max-interval", "want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval"},
		"usage qps":                    {[]string{"--usage-qps", "0"}, "--usage-qps", "--usage-qps 0: want 0.01 to 1000000"},
		"usage burst":                  {[]string{"--usage-burst", "0"}, "--usage-burst", "--usage-burst must be at least 1, got 0"},
		"lease duration":               {[]string{"--lease-duration", "1s"}, "--lease-duration", "want --lease-duration > --renew-deadline > 1.2 x --retry-period > 0, got 1s, 10s, 500ms"},
		"renew deadline":               {[]string{"--renew-deadline", "400ms"}, "--renew-deadline", "want --lease-duration > --renew-deadline > 1.2 x --retry-period > 0, got 15s, 400ms, 500ms"},
		"retry period":                 {[]string{"--retry-period", "0"}, "--retry-period", "want --lease-duration > --renew-deadline > 1.2 x --retry-period > 0, got 15s, 10s, 0s"},
		"renew deadline in the jitter": {[]string{"--renew-deadline", "550ms"}, "--renew-deadline", "want --lease-duration > --renew-deadline > 1.2 x --retry-period > 0, got 15s, 550ms, 500ms"},
		"renew deadline past it":       {args: []string{"--renew-deadline", "601ms"}},
		"lease duration in part seconds": {[]string{"--lease-duration", "2.9s", "--renew-deadline", "2.5s"}, "--lease-duration",
			"--lease-duration must be a whole number of seconds (the Lease records it so), got 2.9s"},
		"lease duration under a second": {[]string{"--lease-duration", "900ms", "--renew-deadline", "700ms"}, "--lease-duration",
			"--lease-duration must be a whole number of seconds (the Lease records it so), got 900ms"},
		"whole seconds":                {args: []string{"--lease-duration", "3s", "--renew-deadline", "2.5s"}},
		"lease name":                   {[]string{"--lease-name", "Bad/Name"}, "--lease-name", "--lease-name \"Bad/Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"},
		"empty lease name":             {[]string{"--lease-name", ""}, "--lease-name", "--lease-name \"\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"},
		"lease namespace":              {[]string{"--lease-namespace", "Bad_NS"}, "--lease-namespace", "--lease-namespace \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"},
		"max backoff past a year":      {[]string{"--max-restart-backoff", "2000000h"}, "--max-restart-backoff", "--max-restart-backoff must be at most 8760h0m0s, got 2000000h0m0s"},
		"a year of backoff":            {args: []string{"--max-restart-backoff", "8760h"}},
		"restart backoff past a year":  {[]string{"--restart-backoff", "8761h", "--max-restart-backoff", "9000h"}, "--restart-backoff", "--restart-backoff must be at most 8760h0m0s, got 8761h0m0s"},
		"stalled after past a year":    {[]string{"--stalled-after", "1000000h"}, "--stalled-after", "--stalled-after must be at most 8760h0m0s, got 1000000h0m0s"},
		"resync past a year":           {[]string{"--resync", "1000000h"}, "--resync", "--resync must be at most 8760h0m0s, got 1000000h0m0s"},
		"retry max delay past a year":  {[]string{"--retry-max-delay", "2562047h"}, "--retry-max-delay", "--retry-max-delay must be at most 8760h0m0s, got 2562047h0m0s"},
		"reconcile timeout too long":   {[]string{"--reconcile-timeout", "9000h"}, "--reconcile-timeout", "--reconcile-timeout must be at most 8760h0m0s, got 9000h0m0s"},
		"shutdown timeout past a year": {[]string{"--shutdown-timeout", "9000h"}, "--shutdown-timeout", "--shutdown-timeout must be at most 8760h0m0s, got 9000h0m0s"},
		"negative shutdown timeout":    {[]string{"--shutdown-timeout", "-1s"}, "--shutdown-timeout", "--shutdown-timeout must not be negative, got -1s"},
		"lease duration past a year": {[]string{"--lease-duration", "1000000h", "--renew-deadline", "1h", "--retry-period", "1m"}, "--lease-duration",
			"--lease-duration must be at most 8760h0m0s, got 1000000h0m0s"},
		"usage intervals past a year": {[]string{"--usage-interval", "2500000h", "--usage-max-interval", "2500000h"}, "--usage-interval",
			"--usage-interval must be at most 8760h0m0s, got 2500000h0m0s"},
		"qps under float32":        {[]string{"--qps", "1e-50"}, "--qps", "--qps 1e-50: want 0 (no client-side limit) or 0.01 to 1000000"},
		"qps past float32":         {[]string{"--qps", "1e39"}, "--qps", "--qps 1e+39: want 0 (no client-side limit) or 0.01 to 1000000"},
		"qps NaN":                  {[]string{"--qps", "NaN"}, "--qps", "--qps NaN: want 0 (no client-side limit) or 0.01 to 1000000"},
		"qps Inf":                  {[]string{"--qps", "Inf"}, "--qps", "--qps +Inf: want 0 (no client-side limit) or 0.01 to 1000000"},
		"the lowest qps":           {args: []string{"--qps", "0.01"}},
		"the highest qps":          {args: []string{"--qps", "1e6", "--retry-qps", "1e6", "--usage-qps", "1e6"}},
		"a trickle of retries":     {[]string{"--retry-qps", "1e-50"}, "--retry-qps", "--retry-qps 1e-50: want 0.01 to 1000000"},
		"usage qps past float32":   {[]string{"--usage-qps", "1e39"}, "--usage-qps", "--usage-qps 1e+39: want 0.01 to 1000000"},
		"usage qps NaN":            {[]string{"--usage-qps", "NaN"}, "--usage-qps", "--usage-qps NaN: want 0.01 to 1000000"},
		"usage threshold NaN":      {[]string{"--usage-threshold", "NaN"}, "--usage-threshold", "want --usage-interval >= 0, --usage-threshold >= 0 and --usage-max-interval >= --usage-interval"},
		"schema file is not read":  {args: []string{"--schema-file", "/nonexistent.yaml"}},
		"group without a map okay": {args: []string{"--api-version", "compute.example.org/v1"}},
		"a version without a map": {[]string{"--api-version", "cloudnative.czs/v9"}, "--api-version",
			`--api-version cloudnative.czs/v9: no built-in field map for version "v9" of cloudnative.czs (built in: v1, v1alpha1, v1beta1)`},
		"a version with a map file": {args: []string{"--api-version", "cloudnative.czs/v9", "--schema-file", "/nonexistent.yaml"}},
		"metrics addr without a port": {[]string{"--metrics-addr", "bogus"}, "--metrics-addr",
			`--metrics-addr "bogus": address bogus: missing port in address; want HOST:PORT, such as :8080, or empty for none`},
		"health addr port past 65535": {[]string{"--health-addr", ":99999"}, "--health-addr",
			`--health-addr ":99999": port "99999" is neither a number from 0 to 65535 nor a known service name; want HOST:PORT, such as :8080, or empty for none`},
		"health addr port an unknown name": {[]string{"--health-addr", "localhost:no-such-service"}, "--health-addr",
			`--health-addr "localhost:no-such-service": port "no-such-service" is neither a number from 0 to 65535 nor a known service name; want HOST:PORT, such as :8080, or empty for none`},
		"health addr port a service name": {args: []string{"--health-addr", "localhost:http"}},
		"endpoints off":                   {args: []string{"--metrics-addr", "", "--health-addr", ""}},
		"endpoints on any port":           {args: []string{"--metrics-addr", ":0", "--health-addr", "127.0.0.1:0"}},
		"endpoints on IPv6":               {args: []string{"--metrics-addr", "[::1]:9090", "--health-addr", "[::]:9091"}},
	}
	checkValidate(t, tests, func(args []string) error {
		c := &runConfig{}
		parseFlags(t, runCommand(c), args...)
		return c.Validate()
	})
}

// TestRunPodsConfig: --server-pod-security reaches the pod backend's configuration, none by
// default. (Baseline is no setting: the pods meet it as they are, and a value that changes
// nothing would read as one that does something.)
func TestRunPodsConfig(t *testing.T) {
	for args, want := range map[string]pods.PodSecurity{
		"":                                 pods.PodSecurityNone,
		"--server-pod-security=none":       pods.PodSecurityNone,
		"--server-pod-security=restricted": pods.PodSecurityRestricted,
	} {
		c := &runConfig{}
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		parseFlags(t, runCommand(c), argv...)
		if got := c.podsConfig().PodSecurity; got != want {
			t.Errorf("%q: the pod backend's PodSecurity is %q, want %q", args, got, want)
		}
	}
}

// TestRunLogsWarnings: run logs each start-up check that passed with a caveat, one line per
// check with the check and its detail, and starts. It kept only the failed ones: a denied
// list on pod metrics (usage one request per VM) went unsaid until the leader's first list,
// and a cluster without a default StorageClass was not said at all.
func TestRunLogsWarnings(t *testing.T) {
	srv := newFakeAPIServer(t, ownGVR, establishedCRD(t, ownCRDFile))
	srv.classes = map[string]bool{"fixed-size": false}
	srv.denies = func(a *authorizationv1.ResourceAttributes) bool {
		return a.Group == "metrics.k8s.io" && a.Resource == "pods" && a.Verb == "list"
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	vms := "/apis/" + ownGVR.GroupVersion().String() + "/" + ownGVR.Resource
	srv.onRequest = func(req string) {
		if req == "GET "+vms {
			cancel() // the controller has started: stop it
		}
	}
	var out, log lockedBuffer
	a := App("")
	a.Writer, a.ErrWriter = &out, &log
	if err := a.RunContext(ctx, []string{"vm-controller", "run", "--kubeconfig", srv.kubeconfig(t), "--metrics-addr=", "--health-addr="}); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if ctx.Err() == nil {
		t.Fatalf("run returned before its controller listed VMs:\n%s", log.String())
	}
	for _, want := range []string{
		`level=WARN msg="Start-up check passed with a warning" check=storage detail="the cluster has no default StorageClass: `,
		`level=WARN msg="Start-up check passed with a warning" check=rbac detail="RBAC denies list on pods.metrics.k8s.io in all namespaces: usage is read one request per VM, `,
	} {
		if n := strings.Count(log.String(), want); n != 1 {
			t.Errorf("run logged %s %d times, want once:\n%s", want, n, log.String())
		}
	}
	if n := strings.Count(log.String(), "Start-up check passed with a warning"); n != 2 {
		t.Errorf("%d start-up warnings, want 2:\n%s", n, log.String())
	}
}

// TestRunNamesTheVariable: run's refusal of a value set by an environment variable names the
// variable, which is what the user set: "--workers must be at least 1, got 0" named a flag
// never typed. A value the command line gave names the flag alone.
func TestRunNamesTheVariable(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		args []string
		want string
	}{
		"workers":                         {map[string]string{"VMC_WORKERS": "0"}, nil, "--workers (from VMC_WORKERS) must be at least 1, got 0"},
		"workers on the command line too": {map[string]string{"VMC_WORKERS": "5"}, []string{"--workers", "0"}, "--workers must be at least 1, got 0"},
		"resync":                          {map[string]string{"VMC_RESYNC": "-1m"}, nil, "--resync (from VMC_RESYNC) must not be negative"},
		"metrics addr":                    {map[string]string{"VMC_METRICS_ADDR": "bogus"}, nil, `--metrics-addr (from VMC_METRICS_ADDR) "bogus": address bogus: missing port in address; want HOST:PORT, such as :8080, or empty for none`},
		"retry delays": {map[string]string{"VMC_RETRY_BASE_DELAY": "2s"}, []string{"--retry-max-delay", "1s"},
			"--retry-base-delay (from VMC_RETRY_BASE_DELAY) must be positive and at most --retry-max-delay"},
		"lease timings": {map[string]string{"VMC_RENEW_DEADLINE": "400ms"}, nil,
			"want --lease-duration > --renew-deadline (from VMC_RENEW_DEADLINE) > 1.2 x --retry-period > 0, got 15s, 400ms, 500ms"},
		"a duration past a year": {map[string]string{"VMC_SHUTDOWN_TIMEOUT": "9000h"}, nil,
			"--shutdown-timeout (from VMC_SHUTDOWN_TIMEOUT) must be at most 8760h0m0s, got 9000h0m0s"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, f := range runCommand(&runConfig{}).Flags {
				for _, e := range f.(cli.DocGenerationFlag).GetEnvVars() {
					unsetenv(t, e)
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var stderr bytes.Buffer
			code := RunMain(App(""), "vm-controller", append([]string{"vm-controller", "run"}, tc.args...), &stderr)
			if got := stderr.String(); code != 2 || got != "vm-controller: "+tc.want+"\n" {
				t.Errorf("exit %d, %q; want exit 2, %q", code, got, "vm-controller: "+tc.want)
			}
		})
	}
}

// TestRunRefusesAnAddressBeforeTheCluster: a bad --metrics-addr or --health-addr is a bad flag
// (exit 2, nothing asked of the cluster); a port in use fails run (exit 1) before it asks the
// cluster anything. Both were said only after the checks and the controller's start ("Starting
// vm-controller"), bogus with exit 1.
func TestRunRefusesAnAddressBeforeTheCluster(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	tests := map[string]struct {
		args []string
		code int
		want string
	}{
		"metrics addr without a port": {[]string{"--metrics-addr", "bogus", "--health-addr="}, 2,
			`--metrics-addr "bogus": address bogus: missing port in address; want HOST:PORT, such as :8080, or empty for none`},
		"health addr port past 65535": {[]string{"--metrics-addr=", "--health-addr", ":99999"}, 2,
			`--health-addr ":99999": port "99999" is neither a number from 0 to 65535 nor a known service name; want HOST:PORT, such as :8080, or empty for none`},
		"health port in use": {[]string{"--metrics-addr", "127.0.0.1:0", "--health-addr", taken.Addr().String()}, 1,
			"health endpoint: listen tcp " + taken.Addr().String() + ": bind: address already in use"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			unsetenv(t, "VMC_METRICS_ADDR", "VMC_HEALTH_ADDR", "VMC_KUBECONFIG", "VMC_CONTEXT")
			srv := newFakeAPIServer(t, ownGVR, establishedCRD(t, ownCRDFile))
			var stderr bytes.Buffer
			a := App("")
			a.ErrWriter = io.Discard // the log
			args := append([]string{"vm-controller", "run", "--kubeconfig", srv.kubeconfig(t)}, tc.args...)
			code := RunMain(a, "vm-controller", args, &stderr)
			if got := stderr.String(); code != tc.code || got != "vm-controller: "+tc.want+"\n" {
				t.Errorf("exit %d, %q; want exit %d, %q", code, got, tc.code, "vm-controller: "+tc.want)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if len(srv.requests) > 0 {
				t.Errorf("run asked the cluster %v first", srv.requests)
			}
		})
	}
}
