//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The smoke tests check the plumbing every other e2e test relies on: the apiserver and its
// version, CRDs, scheduling onto kwok nodes and garbage collection. When one of them fails,
// the cluster is broken, not the controller.

// TestSmokeServerVersion checks that the apiserver is the one cluster/tools pins and that
// kubectl talks to it without a version-skew warning (which a build without version
// ldflags, v0.0.0-master, would cause).
func TestSmokeServerVersion(t *testing.T) {
	t.Parallel()
	if got := kubectl(t, "get", "--raw", "/readyz"); got != "ok" {
		t.Fatalf("/readyz = %q, want ok", got)
	}
	want := pinnedKubeVersion(t)
	out, stderr, err := runKubectl("", "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ClientVersion struct{ GitVersion string } `json:"clientVersion"`
		ServerVersion struct{ GitVersion string } `json:"serverVersion"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("kubectl version -o json: %v\n%s", err, out)
	}
	if v.ServerVersion.GitVersion != want {
		t.Errorf("server version %q, want %q (cluster/tools/go.mod)", v.ServerVersion.GitVersion, want)
	}
	if strings.Contains(stderr, "WARNING") {
		t.Errorf("kubectl version warns: %s", stderr)
	}
}

// pinnedKubeVersion reads the Kubernetes version from the tools module that builds the
// control plane, so the test follows the pin instead of repeating it.
func pinnedKubeVersion(t testing.TB) string {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join(repoRoot(), "cluster", "tools", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes\s+(v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("no k8s.io/kubernetes requirement in cluster/tools/go.mod")
	}
	return string(m[1])
}

// TestSmokeCustomResource checks that the project's CRD (crds/) applies and becomes
// Established, and that a VirtualMachine can be created, read back and deleted. No
// controller watches the test's namespace, so this is the apiserver alone.
func TestSmokeCustomResource(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	// Applying is idempotent, so this is safe next to other tests that install the CRD too;
	// it stays installed afterwards because they may still be using it.
	kubectl(t, "apply", "-f", filepath.Join(repoRoot(), "crds"))
	waitEstablished(t, "virtualmachines.cloudnative.czs")

	apply(t, `apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: smoke, namespace: `+ns+`}
spec:
  resource: {cpu: 1, memory: 64Mi, rootDisk: 1Gi}
`)
	// The full resource name, so kubectl never resolves "vm" through a stale discovery cache.
	const res = "virtualmachines.cloudnative.czs"
	if got := kubectl(t, "get", res, "smoke", "-n", ns, "-o", "jsonpath={.spec.resource.memory}"); got != "64Mi" {
		t.Fatalf("spec.resource.memory = %q, want 64Mi", got)
	}
	kubectl(t, "delete", res, "smoke", "-n", ns, "--timeout=3m")
	if _, err := kubectlErr("get", res, "smoke", "-n", ns); !isNotFound(err) {
		t.Fatalf("after delete: want NotFound, got %v", err)
	}
}

// TestSmokePodRunsOnKwokNode checks that the scheduler binds a pod to a fake node and kwok
// reports it Running: the image is never pulled, so any name will do. The pod requests what
// a VM's server does (cpu, memory, ephemeral-storage for the root disk), so the fake nodes
// must advertise all three.
func TestSmokePodRunsOnKwokNode(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	apply(t, `apiVersion: v1
kind: Pod
metadata: {name: smoke, namespace: `+ns+`}
spec:
  containers:
  - name: main
    image: example.invalid/smoke:1
    resources:
      requests: {cpu: "2", memory: 4G, ephemeral-storage: 40G}
      limits: {cpu: "2", memory: 4G, ephemeral-storage: 40G}
`)
	var node string
	eventually(t, 3*time.Minute, func() (bool, string) {
		out, err := kubectlErr("get", "pod", "smoke", "-n", ns, "-o",
			`jsonpath={.spec.nodeName} {.status.phase} {.status.conditions[?(@.type=="PodScheduled")].message}`)
		if err != nil {
			return false, err.Error()
		}
		node, _, _ = strings.Cut(out, " ")
		return strings.Contains(out, " Running"), "nodeName phase scheduling-message = " + out
	})
	if got := kubectl(t, "get", "node", node, "-o", `jsonpath={.metadata.annotations.kwok\.x-k8s\.io/node}`); got != "fake" {
		t.Errorf("pod runs on node %s whose kwok.x-k8s.io/node annotation is %q, want fake", node, got)
	}
}

// TestSmokeGarbageCollection checks that the controller manager's garbage collector
// deletes a dependent once its owner is gone, which owner references on controller-made
// objects rely on.
func TestSmokeGarbageCollection(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	apply(t, `apiVersion: v1
kind: ConfigMap
metadata: {name: owner, namespace: `+ns+`}
`)
	uid := kubectl(t, "get", "configmap", "owner", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	apply(t, `apiVersion: v1
kind: ConfigMap
metadata:
  name: dependent
  namespace: `+ns+`
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: owner, uid: `+uid+`}
`)
	kubectl(t, "delete", "configmap", "owner", "-n", ns)
	eventually(t, 3*time.Minute, func() (bool, string) {
		out, err := kubectlErr("get", "configmap", "dependent", "-n", ns, "-o", "name")
		if isNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, "dependent still exists: " + out
	})
}
