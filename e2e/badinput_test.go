//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/access"
)

// The bad-input tests cover the rows of the table in docs/reference/bad-input.md that the other tests do
// not (TestControllerBadInput, TestControllerAdmission, TestControllerUnrunnableSpec,
// TestPointCheck, the plan command's golden cases, schema's field-map tests): each kind of
// bad flag, kubeconfig or environment gives one line on stderr and its exit code, and a
// server the cluster refuses gives a Failed VM with the reason.

// TestBadInputFlags runs the binary with each kind of bad flag, environment variable, field
// map and kubeconfig, and checks the one line on stderr and the exit code: 2 for what is
// wrong on the command line, 1 for what is wrong with the cluster or the kubeconfig.
func TestBadInputFlags(t *testing.T) {
	t.Parallel()
	bin := controllerBinary(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	emptyMap := write("empty-map.yaml", "spec: {}\n")
	notYAML := write("not-yaml", "clusters: [\n")
	refused := write("refused", refusedKubeconfig(t))
	machineMap := filepath.Join(repoRoot(), "testdata", "machines", "fieldmap.yaml")
	cases := map[string]struct {
		args  []string
		env   []string // the whole environment besides PATH; nil: the test's own
		stdin string
		code  int
		want  string // in the one line on stderr
	}{
		"log level":              {[]string{"run", "--log-level", "loud"}, nil, "", 2, `--log-level "loud": want debug, info, warn or error`},
		"resource not a name":    {[]string{"run", "--resource", "Virtual.Machines"}, nil, "", 2, `resource "Virtual.Machines": a DNS-1035 label must consist of`},
		"group without a map":    {[]string{"run", "--api-version", "compute.example.org/v1"}, nil, "", 2, `--api-version compute.example.org/v1: no built-in field map for group "compute.example.org"`},
		"qps":                    {[]string{"run", "--qps", "-1"}, nil, "", 2, "--qps -1: want 0 (no client-side limit) or 0.01 to 1000000"},
		"qps under float32":      {[]string{"run", "--qps", "1e-50"}, nil, "", 2, "--qps 1e-50: want 0 (no client-side limit) or 0.01 to 1000000"},
		"usage qps too high":     {[]string{"run", "--usage-qps", "1e39"}, nil, "", 2, "--usage-qps 1e+39: want 0.01 to 1000000"},
		"negative resync":        {[]string{"run", "--resync", "-1s"}, nil, "", 2, "--resync must not be negative"},
		"restart backoff":        {[]string{"run", "--restart-backoff", "10m"}, nil, "", 2, "--restart-backoff must be positive and at most --max-restart-backoff"},
		"retry delays":           {[]string{"run", "--retry-base-delay", "2s", "--retry-max-delay", "1s"}, nil, "", 2, "--retry-base-delay must be positive and at most --retry-max-delay"},
		"backoff past a year":    {[]string{"run", "--max-restart-backoff", "2000000h"}, nil, "", 2, "--max-restart-backoff must be at most 8760h0m0s, got 2000000h0m0s"},
		"lease past a year":      {[]string{"run", "--lease-duration", "1000000h", "--renew-deadline", "1h", "--retry-period", "1m"}, nil, "", 2, "--lease-duration must be at most 8760h0m0s, got 1000000h0m0s"},
		"plan: backoff too long": {[]string{"plan", "--max-restart-backoff", "2000000h", filepath.Join(repoRoot(), "examples", "test-vm.yaml")}, nil, "", 2, "--max-restart-backoff must be at most 8760h0m0s, got 2000000h0m0s"},
		"empty server image":     {[]string{"run", "--server-image", ""}, nil, "", 2, "--server-image must not be empty"},
		"lease timings":          {[]string{"run", "--lease-duration", "1s"}, nil, "", 2, "want --lease-duration > --renew-deadline > 1.2 x --retry-period > 0, got 1s, 10s, 500ms"},
		"not a duration":         {[]string{"run", "--resync", "5x"}, nil, "", 2, `invalid value "5x" for flag -resync: parse error (see --help)`},
		"environment variable":   {[]string{"run"}, []string{"VMC_WORKERS=abc"}, "", 2, `could not parse "abc" as int value from environment variable "VMC_WORKERS" for flag workers`},
		"field map missing":      {[]string{"run", "--schema-file", filepath.Join(dir, "none.yaml")}, nil, "", 2, "read field map: open " + filepath.Join(dir, "none.yaml") + ": no such file or directory"},
		"field map incomplete":   {[]string{"run", "--schema-file", emptyMap}, nil, "", 2, "field map " + emptyMap + ": spec.action.path is required; spec.resource.cpu is required;"},
		"namespace not a name":   {[]string{"run", "--namespace", "Bad_NS", "--metrics-addr", "", "--health-addr", ""}, nil, "", 2, `--namespace "Bad_NS"`},
		"unknown command":        {[]string{"rnu"}, nil, "", 2, `"rnu"`},
		"manifests namespace":    {[]string{"manifests", "--namespace", "A_B"}, nil, "", 2, `--namespace "A_B": a lowercase RFC 1123 label must consist of`},
		"manifests replicas":     {[]string{"manifests", "--replicas", "0"}, nil, "", 2, "--replicas must be at least 1, got 0"},
		"manifests replicas wrap": {[]string{"manifests", "--replicas", "4294967297"}, nil, "", 2,
			"--replicas must be at most 2147483647 (a Deployment's replicas are int32), got 4294967297"},
		"workers past 10000":     {[]string{"run", "--workers", "100000000"}, nil, "", 2, "--workers must be at most 10000, got 100000000"},
		"manifests argument":     {[]string{"manifests", "extra"}, nil, "", 2, `manifests takes no arguments, got ["extra"] (see --help)`},
		"check api version":      {[]string{"check", "--api-version", "v1"}, nil, "", 2, `api version "v1": want group/version, such as cloudnative.czs/v1alpha1`},
		"kubeconfig not YAML":    {[]string{"run", "--kubeconfig", notYAML}, nil, "", 1, "kubeconfig " + notYAML + ": not a kubeconfig file (not YAML: line 1:"},
		"no kubeconfig":          {[]string{"run"}, []string{"HOME=" + dir}, "", 1, "kubeconfig: invalid configuration: no configuration has been provided"},
		"credentials refused":    {[]string{"run", "--kubeconfig", refused}, nil, "", 1, "refused the credentials (401 Unauthorized)"},
		"check without a config": {[]string{"check"}, []string{"HOME=" + dir}, "", 1, "kubeconfig: invalid configuration: no configuration has been provided"},
		"group not served": {[]string{"run", "--api-version", "absent.example.org/v1", "--schema-file", machineMap}, nil, "", 1,
			"does not serve absent.example.org/v1: install the CRD first (vm-controller crds | kubectl apply -f -)"},
		"cluster-scoped resource": {[]string{"run", "--api-version", "apiextensions.k8s.io/v1", "--resource", "customresourcedefinitions", "--schema-file", machineMap}, nil, "", 1,
			"customresourcedefinitions.apiextensions.k8s.io is cluster-scoped; vm-controller manages namespaced resources"},
		"plan: VM without a name":      {[]string{"plan"}, nil, "apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nspec: {}\n", 1, "stdin: the VM has no metadata.name"},
		"plan: VM without a version":   {[]string{"plan"}, nil, "metadata: {name: x}\n", 1, `stdin: apiVersion "": want group/version, such as cloudnative.czs/v1alpha1`},
		"plan: server file unreadable": {[]string{"plan", "--server", filepath.Join(dir, "none.yaml"), filepath.Join(repoRoot(), "examples", "test-vm.yaml")}, nil, "", 1, "read --server: open " + filepath.Join(dir, "none.yaml")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Stdin = strings.NewReader(tc.stdin)
			if tc.env != nil {
				cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, tc.env...)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(2 * time.Minute): // only stops a hung process
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("still running after 2m, want exit %d with %q; stderr:\n%s", tc.code, tc.want, lastLines(stderr.String(), 5))
			}
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if code != tc.code || len(lines) != 1 || !strings.HasPrefix(lines[0], "vm-controller: ") || !strings.Contains(lines[0], tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and one line containing %q", code, stderr.String(), tc.code, tc.want)
			}
		})
	}
}

// refusedKubeconfig is a kubeconfig for the cluster with a token the API server does not
// accept.
func refusedKubeconfig(t *testing.T) string {
	t.Helper()
	var cfg struct {
		Clusters []struct {
			Cluster map[string]any `json:"cluster"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal([]byte(kubectl(t, "config", "view", "--raw", "--minify", "--flatten", "-o", "json")), &cfg); err != nil || len(cfg.Clusters) == 0 {
		t.Fatalf("read the kubeconfig: %v", err)
	}
	out, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "c",
		"clusters": []any{map[string]any{"name": "c", "cluster": cfg.Clusters[0].Cluster}},
		"users":    []any{map[string]any{"name": "u", "user": map[string]any{"token": "not-a-token"}}},
		"contexts": []any{map[string]any{"name": "c", "context": map[string]any{"cluster": "c", "user": "u"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestBadInputLeaseDenied: with --leader-elect, an identity that may not use the Lease is
// refused before the controller starts, with the permission it lacks.
func TestBadInputLeaseDenied(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	installCRDs(t)
	const sa = "no-lease"
	kubectl(t, "-n", ns, "create", "serviceaccount", sa)
	gvr := k8sschema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1alpha1", Resource: "virtualmachines"}
	apply(t, rbacFor(ns, sa, access.Rules(access.Needs{GVR: gvr}))) // no Lease among them
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "clusterrole,clusterrolebinding", ns+"-"+sa, "--ignore-not-found")
	})
	config := saKubeconfig(t, ns, sa)
	want := fmt.Sprintf("vm-controller: RBAC denies get, create, update on leases.coordination.k8s.io in namespace %s (needed: ", ns)
	eventually(t, 3*time.Minute, func() (bool, string) { // RBAC reaches the authorizer within moments
		_, stderr, code := runBinary(t, "run", "--kubeconfig", config, "--namespace", ns, "--watch-nodes=false", "--watch-crd=false",
			"--leader-elect", "--lease-namespace", ns)
		denied := false
		for _, line := range strings.Split(stderr, "\n") {
			denied = denied || strings.HasPrefix(line, want)
		}
		return code == 1 && denied, fmt.Sprintf("exit %d, stderr %q", code, stderr)
	})
}

// TestBadInputServerRefused: a server the cluster refuses (a quota, a pod of the server's name
// that another owner has) leaves the VM Failed with reason ServerRejected, a message that
// says why, and a Warning event; nothing else is touched.
func TestBadInputServerRefused(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	sharedKube().waitDefaultServiceAccount(t, ns)
	apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: taken-server, namespace: %s}
spec: {containers: [{name: c, image: example.invalid/other:1}]}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: no-big-pods, namespace: %s}
spec: {hard: {limits.cpu: "4"}}
`, ns, ns))
	eventually(t, 3*time.Minute, func() (bool, string) { // the quota is enforced once counted
		out, _ := kubectlErr("-n", ns, "get", "resourcequota", "no-big-pods", "-o", "jsonpath={.status.hard.limits\\.cpu}")
		return out == "4", "quota status.hard: " + out
	})
	startController(t, ns)
	apply(t, fmt.Sprintf(`apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: taken, namespace: %s}
spec: {resource: {cpu: 10m, memory: 16Mi, rootDisk: 100Mi}}
---
apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: big, namespace: %s}
spec: {resource: {cpu: 8, memory: 16Mi, rootDisk: 100Mi}}
`, ns, ns))
	for vm, want := range map[string]string{
		"taken": "The server was refused: pod taken-server already exists and this VM does not control it",
		"big":   "The server was refused: create pod big-server: rejected: pods \"big-server\" is forbidden: exceeded quota: no-big-pods",
	} {
		waitPhase(t, ns, vm, "Failed", "ServerRejected", 3*time.Minute)
		if msg := vmField(ns, vm, ".status.message"); !strings.HasPrefix(msg, want) {
			t.Errorf("%s: status.message %q, want it to start %q", vm, msg, want)
		}
		eventually(t, 3*time.Minute, func() (bool, string) {
			out, _ := kubectlErr("-n", ns, "get", "events", "--field-selector", "involvedObject.name="+vm+",reason=ServerRejected", "-o", "jsonpath={.items[*].type}")
			return out == "Warning", "ServerRejected events: " + out
		})
	}
	if owner := kubectl(t, "-n", ns, "get", "pod", "taken-server", "-o", "jsonpath={.metadata.ownerReferences}"); owner != "" {
		t.Errorf("the other owner's pod was taken over: ownerReferences %s", owner)
	}
}
