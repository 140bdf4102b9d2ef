//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"
)

// manifestObject is what the security test reads of each object `manifests` prints.
type manifestObject struct {
	Kind     string
	Metadata struct{ Name, Namespace string }
	Rules    []struct {
		APIGroups, Resources, Verbs, ResourceNames []string
	}
}

// parseManifests splits a YAML stream into its objects.
func parseManifests(t *testing.T, stream string) []manifestObject {
	t.Helper()
	var objs []manifestObject
	for _, doc := range strings.Split(stream, "\n---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		data, err := sigsyaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("manifests: %v\n%s", err, doc)
		}
		var o manifestObject
		if err := json.Unmarshal(data, &o); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	return objs
}

// TestSecurityNamespaceScoped deploys the controller for one namespace, B, from another, A,
// as `manifests --watch-nodes=false --watch-crd=false` prints it: nothing cluster-wide but the
// watch of B's own Namespace object (whether it is being deleted), the reading of
// StorageClasses (whether a VM's disk may grow; --root-disk claim) and of a claim's
// PersistentVolume (whether a migration can move the disk), nothing on
// Secrets, and a Deployment whose pods the restricted Pod Security Standard admits
// (non-root, no privilege escalation, no capabilities). The controller then runs with a token
// of that ServiceAccount alone, with leader election, and takes a VM through create, Active,
// a cpu change and deletion, without one request refused.
func TestSecurityNamespaceScoped(t *testing.T) {
	t.Parallel()
	a := testNamespace(t) // where the controller runs
	b := testNamespace(t) // the namespace it manages
	kubectl(t, "label", "namespace", a, "pod-security.kubernetes.io/enforce=restricted")

	out, stderr, code := runBinary(t, "manifests", "--namespace", a, "--watch-namespace", b, "--watch-nodes=false", "--watch-crd=false")
	if code != 0 {
		t.Fatalf("manifests: exit %d: %s", code, stderr)
	}
	kinds := map[string]int{}
	for _, o := range parseManifests(t, out) {
		kinds[o.Kind]++
		switch o.Kind {
		case "ClusterRole":
			// Cluster-scoped objects only: B's Namespace, StorageClasses, and the
			// PersistentVolume of a VM's claim, read for a migration or a replacement.
			want := []string{" namespaces list,watch " + b, "storage.k8s.io storageclasses list,watch ", " persistentvolumes get "}
			var got []string
			for _, r := range o.Rules {
				got = append(got, strings.Join(r.APIGroups, ",")+" "+strings.Join(r.Resources, ",")+" "+strings.Join(r.Verbs, ",")+" "+strings.Join(r.ResourceNames, ","))
			}
			if !slices.Equal(got, want) {
				t.Errorf("a namespace-scoped deployment has a ClusterRole %s granting %q; want only %q", o.Metadata.Name, got, want)
			}
		case "Role", "RoleBinding":
			if o.Metadata.Namespace != a && o.Metadata.Namespace != b {
				t.Errorf("%s %s in namespace %q, want %s or %s", o.Kind, o.Metadata.Name, o.Metadata.Namespace, a, b)
			}
		}
		for _, r := range o.Rules {
			for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs} {
				if slices.Contains(list, "*") {
					t.Errorf("%s %s grants a wildcard: %+v", o.Kind, o.Metadata.Name, r)
				}
			}
			if slices.Contains(r.Resources, "secrets") {
				t.Errorf("%s %s grants access to Secrets: %+v", o.Kind, o.Metadata.Name, r)
			}
			if o.Metadata.Namespace == a && !slices.Equal(r.Resources, []string{"leases"}) {
				t.Errorf("Role %s in the controller's own namespace grants more than its Lease: %+v", o.Metadata.Name, r)
			}
		}
	}
	if kinds["Role"] != 2 || kinds["RoleBinding"] != 2 || kinds["Deployment"] != 1 || kinds["ServiceAccount"] != 1 ||
		kinds["ClusterRole"] != 1 || kinds["ClusterRoleBinding"] != 1 {
		t.Errorf("manifests print %v; want a Role and RoleBinding in each namespace, the StorageClasses' ClusterRole and its binding, a ServiceAccount and a Deployment", kinds)
	}
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "clusterrole,clusterrolebinding", "vm-controller-"+a, "--ignore-not-found")
	})
	if _, _, err := runKubectl(out, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}

	// The Deployment's pods exist only if the restricted profile admitted them.
	eventually(t, 3*time.Minute, func() (bool, string) {
		pods, _ := kubectlErr("-n", a, "get", "pods", "-l", "app.kubernetes.io/name=vm-controller", "-o",
			`jsonpath={range .items[*]}{.spec.securityContext.runAsNonRoot}/{.spec.securityContext.runAsUser}{" "}{end}`)
		rs, _ := kubectlErr("-n", a, "get", "events", "--field-selector", "reason=FailedCreate", "-o", "jsonpath={.items[*].message}")
		return pods == "true/65532 true/65532", fmt.Sprintf("controller pods (runAsNonRoot/runAsUser): %q; FailedCreate: %s", pods, rs)
	})

	// The ServiceAccount may do its work in B and keep its Lease in A, and nothing else.
	sa := saKubeconfig(t, a, "vm-controller")
	for _, check := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "virtualmachines.cloudnative.czs", "-n", b}, "yes"},
		{[]string{"patch", "virtualmachines.cloudnative.czs/status", "-n", b}, "yes"},
		{[]string{"create", "pods", "-n", b}, "yes"},
		{[]string{"update", "leases.coordination.k8s.io", "-n", a}, "yes"},
		{[]string{"list", "virtualmachines.cloudnative.czs", "--all-namespaces"}, "no"},
		{[]string{"create", "pods", "-n", a}, "no"},
		{[]string{"update", "leases.coordination.k8s.io", "-n", b}, "no"},
		{[]string{"get", "secrets", "-n", a}, "no"},
		{[]string{"get", "secrets", "-n", b}, "no"},
		{[]string{"list", "secrets", "--all-namespaces"}, "no"},
		{[]string{"list", "nodes"}, "no"},
		{[]string{"create", "persistentvolumeclaims", "-n", b}, "yes"},
		{[]string{"create", "persistentvolumeclaims", "-n", a}, "no"},
		{[]string{"list", "storageclasses.storage.k8s.io"}, "yes"},
		{[]string{"create", "storageclasses.storage.k8s.io"}, "no"},
		{[]string{"get", "customresourcedefinitions.apiextensions.k8s.io"}, "no"},
	} {
		got, _, _ := runKubectl("", append([]string{"--kubeconfig", sa, "auth", "can-i"}, check.args...)...)
		if got != check.want {
			t.Errorf("kubectl auth can-i %s = %q, want %q", strings.Join(check.args, " "), got, check.want)
		}
	}

	c := startController(t, b, "--kubeconfig", sa, "--watch-nodes=false", "--watch-crd=false", "--leader-elect", "--lease-namespace", a, "--resize", "replace")
	exampleVM(t, b)
	waitPhase(t, b, "test-vm", "Active", "ServerReady", 3*time.Minute)
	first, _, _ := podOf(b, "test-vm")
	kubectl(t, "-n", b, "patch", "vm", "test-vm", "--type=merge", "-p", `{"spec":{"resource":{"cpu":3}}}`)
	eventually(t, 3*time.Minute, func() (bool, string) {
		uid, phase, cpu := podOf(b, "test-vm")
		return uid != first && phase == "Running" && cpu == "3", fmt.Sprintf("pod %s %s cpu %s", uid, phase, cpu)
	})
	waitPhase(t, b, "test-vm", "Active", "ServerReady", 3*time.Minute)
	kubectl(t, "-n", b, "delete", "vm", "test-vm", "--timeout=3m")
	if uid, _, _ := podOf(b, "test-vm"); uid != "" {
		t.Errorf("pod %s left after the VM was deleted", uid)
	}
	if holder := leaderOf(a, "vm-controller"); holder == "" {
		t.Errorf("no Lease vm-controller held in %s", a)
	}
	for _, line := range strings.Split(c.logText(), "\n") {
		if strings.Contains(line, "forbidden") {
			t.Errorf("a request was refused: %s", line)
		}
	}
}
