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

// The pointing tests drive the controller by flags and field maps alone: the two served
// versions of this project's CRD on the same objects, a CRD of another group whose fields
// sit elsewhere, and the check command (and run's same checks) against a cluster.

// podSpecOf returns a VM's server pod's UID, image, cpu limit and owner (apiVersion/kind), or
// empty strings if there is none.
func podSpecOf(ns, pod string) (uid, image, cpu, owner string) {
	out, err := kubectlErr("-n", ns, "get", "pod", pod, "-o",
		`jsonpath={.metadata.uid} {.spec.containers[0].image} {.spec.containers[0].resources.limits.cpu} {.metadata.ownerReferences[0].apiVersion}/{.metadata.ownerReferences[0].kind}`)
	if err != nil {
		return "", "", "", ""
	}
	f := strings.Fields(out)
	for len(f) < 4 {
		f = append(f, "")
	}
	return f[0], f[1], f[2], f[3]
}

// TestPointVersions runs the controller on v1beta1, then on v1alpha1, over the same objects
// (written through either version): the second controller, once it has looked at them, has
// written neither and replaced no pod, and it honours spec.image as the first did.
func TestPointVersions(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	installCRDs(t)
	const image = "registry.example.org/vm/ubuntu:24.04"
	apply(t, fmt.Sprintf(`apiVersion: cloudnative.czs/v1beta1
kind: VirtualMachine
metadata: {name: imaged, namespace: %s}
spec: {image: %q, resource: {cpu: 100m, memory: 64Mi, rootDisk: 1Gi}}
---
apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: plain, namespace: %s}
spec: {resource: {cpu: 100m, memory: 64Mi, rootDisk: 1Gi}}
`, ns, image, ns))

	beta := startController(t, ns, "--api-version", "cloudnative.czs/v1beta1")
	waitPhase(t, ns, "imaged", "Active", "ServerReady", 3*time.Minute)
	waitPhase(t, ns, "plain", "Active", "ServerReady", 3*time.Minute)
	imagedUID, img, _, owner := podSpecOf(ns, "imaged-server")
	if img != image || owner != "cloudnative.czs/v1beta1/VirtualMachine" {
		t.Errorf("imaged's pod: image %q owner %q, want %s and the v1beta1 VM", img, owner, image)
	}
	plainUID, img, _, _ := podSpecOf(ns, "plain-server")
	if img != "registry.k8s.io/pause:3.10" {
		t.Errorf("plain's pod: image %q, want the default", img)
	}
	// The stored objects read the same through either version.
	if got := kubectl(t, "-n", ns, "get", "virtualmachines.v1alpha1.cloudnative.czs", "imaged", "-o", "jsonpath={.apiVersion} {.spec.image} {.status.phase}"); got != "cloudnative.czs/v1alpha1 "+image+" Active" {
		t.Errorf("imaged through v1alpha1: %q", got)
	}
	if err := beta.stop(t); err != nil {
		t.Fatalf("v1beta1 controller: %v", err)
	}
	rv := map[string]string{}
	for _, vm := range []string{"imaged", "plain"} {
		rv[vm] = vmField(ns, vm, ".metadata.resourceVersion")
	}

	// The second controller's first look at both VMs (its initial list queues them) comes
	// before the barrier's: after it, a write it was going to make has been made.
	alpha := startController(t, ns, "--api-version", "cloudnative.czs/v1alpha1", "--workers", "1")
	alpha.barrier(t)
	if n := reconciles(alpha.scrape(t)); n < 3 {
		t.Errorf("the v1alpha1 controller reconciled %v times, want at least 3 (imaged, plain, the barrier)", n)
	}
	for _, vm := range []string{"imaged", "plain"} {
		if now := vmField(ns, vm, ".metadata.resourceVersion"); now != rv[vm] {
			t.Errorf("%s was written by the v1alpha1 controller: resourceVersion %s -> %s", vm, rv[vm], now)
		}
	}
	if u, _, _, _ := podSpecOf(ns, "imaged-server"); u != imagedUID {
		t.Errorf("imaged's pod was replaced: %s -> %s", imagedUID, u)
	}
	if u, _, _, _ := podSpecOf(ns, "plain-server"); u != plainUID {
		t.Errorf("plain's pod was replaced: %s -> %s", plainUID, u)
	}

	// A new image written through v1alpha1 replaces the server.
	const next = "registry.example.org/vm/ubuntu:26.04"
	kubectl(t, "-n", ns, "patch", "virtualmachines.v1alpha1.cloudnative.czs", "imaged", "--type=merge", "-p", `{"spec":{"image":"`+next+`"}}`)
	eventually(t, 3*time.Minute, func() (bool, string) {
		u, img, _, _ := podSpecOf(ns, "imaged-server")
		return u != "" && u != imagedUID && img == next, fmt.Sprintf("pod %s image %s", u, img)
	})
	waitPhase(t, ns, "imaged", "Active", "ServerReady", 3*time.Minute)

	kubectl(t, "-n", ns, "delete", "virtualmachines.v1beta1.cloudnative.czs", "imaged", "plain", "--timeout=3m")
	for _, pod := range []string{"imaged-server", "plain-server"} {
		if u, _, _, _ := podSpecOf(ns, pod); u != "" {
			t.Errorf("pod %s left after its VM was deleted", pod)
		}
	}
}

// installMachineCRD installs the CRD of another group from testdata/machines and removes it
// when the test ends, first releasing any Machine the controller could not (a failed test
// stops the controller before this cleanup runs).
func installMachineCRD(t *testing.T, ns string) {
	t.Helper()
	kubectl(t, "apply", "-f", filepath.Join(repoRoot(), "testdata", "machines", "crd.yaml"))
	t.Cleanup(func() {
		releaseFinalizers(ns, "machines.compute.example.org")
		if _, err := kubectlErr("delete", "crd", "machines.compute.example.org", "--wait=false", "--ignore-not-found"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	waitEstablished(t, "machines.compute.example.org")
}

// TestPointFieldMap manages Machines of compute.example.org, whose fields sit at other paths
// and whose action is spec.power "On"/"Off", with flags and testdata/machines/fieldmap.yaml
// alone: Active with a pod, a spec change replaces the pod, Off removes it, delete cleans up.
func TestPointFieldMap(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	installMachineCRD(t, ns)
	startController(t, ns, "--api-version", "compute.example.org/v1", "--resource", "machines",
		"--schema-file", filepath.Join(repoRoot(), "testdata", "machines", "fieldmap.yaml"))
	const image = "registry.example.org/vm/debian:13"
	apply(t, fmt.Sprintf(`apiVersion: compute.example.org/v1
kind: Machine
metadata: {name: box, namespace: %s}
spec: {bootImage: %q, shape: {cores: 1, ram: 64Mi}, disks: {boot: {size: 1Gi}}}
`, ns, image))
	field := func(path string) string {
		out, _ := kubectlErr("-n", ns, "get", "machines.compute.example.org", "box", "-o", "jsonpath={"+path+"}")
		return out
	}
	waitState := func(state, reason string) {
		t.Helper()
		eventually(t, 3*time.Minute, func() (bool, string) {
			got := field(".status.state") + "/" + field(".status.stateReason")
			return got == state+"/"+reason, "box is " + got + ": " + field(".status.detail")
		})
	}

	waitState("Active", "ServerReady")
	uid, img, cpu, owner := podSpecOf(ns, "box-server")
	if img != image || cpu != "1" || owner != "compute.example.org/v1/Machine" {
		t.Errorf("box's pod: image %q cpu %q owner %q", img, cpu, owner)
	}
	got := kubectl(t, "-n", ns, "get", "machines.compute.example.org", "box", "-o",
		`jsonpath={.status.instance.name} {.status.instance.uid} {.status.instance.podPhase} {.status.seenGeneration} {.status.health[?(@.type=="Ready")].status}`)
	if want := "box-server " + uid + " Running 1 True"; got != want {
		t.Errorf("status at the map's paths: %q, want %q", got, want)
	}

	waitResizable(t, ns, "box-server")
	kubectl(t, "-n", ns, "patch", "machines.compute.example.org", "box", "--type=merge", "-p", `{"spec":{"shape":{"cores":2}}}`)
	eventually(t, 3*time.Minute, func() (bool, string) {
		u, _, c, _ := podSpecOf(ns, "box-server")
		// A cpu change is a resize in place (--resize in-place, the default): same pod.
		return u == uid && c == "2", fmt.Sprintf("pod %s cpu %s", u, c)
	})
	waitState("Active", "ServerReady")
	if g := field(".status.seenGeneration"); g != "2" {
		t.Errorf("seenGeneration %q, want 2", g)
	}

	kubectl(t, "-n", ns, "patch", "machines.compute.example.org", "box", "--type=merge", "-p", `{"spec":{"power":"Off"}}`)
	waitState("Inactive", "ServerStopped")
	if u, _, _, _ := podSpecOf(ns, "box-server"); u != "" {
		t.Errorf("a powered-off Machine still has pod %s", u)
	}
	kubectl(t, "-n", ns, "patch", "machines.compute.example.org", "box", "--type=merge", "-p", `{"spec":{"power":"On"}}`)
	waitState("Active", "ServerReady")

	// Orphan deletion: only the controller's finalizer can remove the pod first.
	kubectl(t, "-n", ns, "delete", "machines.compute.example.org", "box", "--cascade=orphan", "--wait=false")
	eventually(t, 3*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", "machines.compute.example.org", "box")
		u, _, _, _ := podSpecOf(ns, "box-server")
		if isNotFound(err) && u != "" {
			t.Fatalf("the Machine was removed while its pod %s still exists", u)
		}
		return isNotFound(err), fmt.Sprintf("machine: %v, pod %q", err, u)
	})
}

// runBinary runs vm-controller and returns its stdout, stderr and exit code.
func runBinary(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(controllerBinary(t), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// checkRows runs the check command and parses its table into "name result" pairs and the
// details of the failed rows.
func checkRows(t *testing.T, args ...string) (rows []string, failed []string, code int) {
	t.Helper()
	table, stderr, code := runBinary(t, append([]string{"check"}, args...)...)
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	if len(lines) == 0 || strings.Join(strings.Fields(lines[0]), " ") != "CHECK RESULT DETAIL" {
		t.Fatalf("check %s: exit %d, no table:\n%s\nstderr: %s", strings.Join(args, " "), code, table, stderr)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 3 {
			t.Fatalf("short row %q", l)
		}
		rows = append(rows, f[0]+" "+f[1])
		if f[1] == "FAIL" {
			// The detail is everything after the first two columns.
			rest := strings.TrimLeft(l[len(f[0]):], " ")
			failed = append(failed, strings.TrimLeft(rest[len(f[1]):], " "))
		}
	}
	return rows, failed, code
}

// saKubeconfig writes a kubeconfig for the cluster that authenticates as a ServiceAccount.
func saKubeconfig(t *testing.T, ns, sa string) string {
	t.Helper()
	var cfg struct {
		Clusters []struct {
			Cluster map[string]any `json:"cluster"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal([]byte(kubectl(t, "config", "view", "--raw", "--minify", "-o", "json")), &cfg); err != nil || len(cfg.Clusters) == 0 {
		t.Fatalf("read the kubeconfig: %v", err)
	}
	token := kubectl(t, "-n", ns, "create", "token", sa, "--duration", "10m")
	out, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "sa",
		"clusters": []any{map[string]any{"name": "c", "cluster": cfg.Clusters[0].Cluster}},
		"users":    []any{map[string]any{"name": sa, "user": map[string]any{"token": token}}},
		"contexts": []any{map[string]any{"name": "sa", "context": map[string]any{"cluster": "c", "user": sa, "namespace": ns}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// rbacFor renders RBAC objects granting rules to a ServiceAccount: namespaced rules in a Role
// of ns, cluster-scoped ones in a ClusterRole named after ns.
func rbacFor(ns, sa string, rules []access.Rule) string {
	render := func(cluster bool) string {
		var b strings.Builder
		for _, r := range rules {
			if r.Cluster == cluster {
				verbs, _ := json.Marshal(r.Verbs)
				fmt.Fprintf(&b, "- {apiGroups: [%q], resources: [%q], verbs: %s}\n", r.Group, r.Resource, verbs)
			}
		}
		if b.Len() == 0 {
			return "[]\n"
		}
		return "\n" + b.String()
	}
	return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: %[2]s, namespace: %[1]s}
rules: %[3]s---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %[2]s, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: %[2]s}
subjects: [{kind: ServiceAccount, name: %[2]s, namespace: %[1]s}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: %[1]s-%[2]s}
rules: %[4]s---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[1]s-%[2]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: %[1]s-%[2]s}
subjects: [{kind: ServiceAccount, name: %[2]s, namespace: %[1]s}]
`, ns, sa, render(false), render(true))
}

// TestPointCheck runs the check command as the cluster's admin (every check passes), with a
// field map the CRD does not fit, and as a ServiceAccount that lacks permissions and then has
// exactly those of access.Rules; run refuses to start with the same messages.
func TestPointCheck(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	installCRDs(t)
	gvr := k8sschema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1beta1", Resource: "virtualmachines"}
	rules := access.Rules(access.Needs{GVR: gvr, WatchNodes: true, WatchCRD: true, Usage: true, Disks: true})
	flags := []string{"--api-version", "cloudnative.czs/v1beta1", "--namespace", ns}

	rows, _, code := checkRows(t, append([]string{"--kubeconfig", kubeconfig}, flags...)...)
	want := []string{"discovery pass", "crd pass", "fields pass", "storage pass", "namespace pass"}
	for range rules {
		want = append(want, "rbac pass")
	}
	if code != 0 || strings.Join(rows, ",") != strings.Join(want, ",") {
		t.Errorf("check as admin: exit %d, rows %v", code, rows)
	}

	// A field map with two paths the CRD does not have.
	data, err := os.ReadFile(filepath.Join(repoRoot(), "schema", "fieldmaps", "v1beta1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.NewReplacer("reason: status.reason", "reason: status.why", "consecutiveFailures: status.consecutiveFailures", "consecutiveFailures: status.restarts.count").Replace(string(data))
	badMap := filepath.Join(t.TempDir(), "map.yaml")
	if err := os.WriteFile(badMap, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, failed, code := checkRows(t, append([]string{"--kubeconfig", kubeconfig, "--schema-file", badMap}, flags...)...)
	wantFailed := []string{
		`field map: status.reason at status.why: the schema has no property "why" under status`,
		`field map: status.consecutiveFailures at status.restarts.count: the schema has no property "restarts" under status`,
	}
	if code != 1 || strings.Join(failed, "\n") != strings.Join(wantFailed, "\n") {
		t.Errorf("check with a bad map: exit %d, failed %q", code, failed)
	}
	expectRunRefused(t, append([]string{"run", "--kubeconfig", kubeconfig, "--schema-file", badMap}, flags...), wantFailed)

	// A ServiceAccount that may only read VMs and pods.
	const sa = "vmc"
	kubectl(t, "-n", ns, "create", "serviceaccount", sa)
	readOnly := []access.Rule{
		{Group: "cloudnative.czs", Resource: "virtualmachines", Verbs: []string{"list", "watch"}},
		{Group: "", Resource: "pods", Verbs: []string{"get", "list", "watch"}},
	}
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "clusterrole,clusterrolebinding", ns+"-"+sa, "--ignore-not-found")
	})
	apply(t, rbacFor(ns, sa, readOnly))
	saConfig := saKubeconfig(t, ns, sa)
	_, failed, code = checkRows(t, append([]string{"--kubeconfig", saConfig}, flags...)...)
	wantFailed = []string{
		fmt.Sprintf("cannot read CRD virtualmachines.cloudnative.czs: customresourcedefinitions.apiextensions.k8s.io \"virtualmachines.cloudnative.czs\" is forbidden: User \"system:serviceaccount:%s:%s\" cannot get resource \"customresourcedefinitions\" in API group \"apiextensions.k8s.io\" at the cluster scope", ns, sa),
		fmt.Sprintf("RBAC denies patch on virtualmachines.cloudnative.czs in namespace %s (needed: adds and removes the cleanup finalizer)", ns),
		fmt.Sprintf("RBAC denies patch on virtualmachines.cloudnative.czs/status in namespace %s (needed: writes the status)", ns),
		fmt.Sprintf("RBAC denies update on virtualmachines.cloudnative.czs/finalizers in namespace %s (needed: lets server pods block their VM's deletion (ownerReferences with blockOwnerDeletion))", ns),
		fmt.Sprintf("RBAC denies create, patch, delete on pods in namespace %s (needed: creates, watches and deletes the server pods; get reads a pod whose name is taken, or that the cache does not show yet; patch records the cpu and memory a server was made for (cloudnative.czs/resources))", ns),
		fmt.Sprintf("RBAC denies patch on pods/resize in namespace %s (needed: changes a running server's cpu and memory in place (in-place pod resize))", ns),
		fmt.Sprintf("RBAC denies create, patch on events.events.k8s.io in namespace %s (needed: records Events on VMs; patch updates a repeating event's series)", ns),
		fmt.Sprintf("RBAC denies get, list, watch, create, patch, delete on poddisruptionbudgets.policy in namespace %s (needed: keeps a PodDisruptionBudget over the server of each VM whose eviction strategy is Block, so that a drain waits for it; get reads a budget whose name is taken; patch adopts one an earlier VM of the name left behind, and records the VM's kind on one an earlier version made)", ns),
		"RBAC denies list, watch on namespaces cluster-wide (needed: leaves the VMs of a namespace being deleted to that deletion: no server made again, no status written, only the finalizer removed)",
		fmt.Sprintf("RBAC denies get, list, watch, create, patch, delete on persistentvolumeclaims in namespace %s (needed: creates, watches, grows, keeps and deletes each VM's disk (--root-disk claim); get reads a claim whose name is taken, or a deleted VM's claim the cache does not show)", ns),
		"RBAC denies list, watch on storageclasses.storage.k8s.io cluster-wide (needed: tells whether a disk's StorageClass lets it grow (allowVolumeExpansion), and which class is the default (check))",
		fmt.Sprintf("RBAC denies list, watch on events in namespace %s (needed: reads the Events on claims (field-selected) to say why a VM's disk is not bound)", ns),
		"RBAC denies get on persistentvolumes cluster-wide (needed: tells, when a migration is asked for, or a running server is to be replaced or resized for a new spec, whether a VM's disk is bound to its node (a local volume) and cannot follow it, and which nodes it can be reached from (its node affinity))",
		fmt.Sprintf("RBAC denies get, list on pods.metrics.k8s.io in namespace %s (needed: samples the usage of each Active VM's server pod for status.server.usage)", ns),
		"RBAC denies list, watch on nodes cluster-wide (needed: tells a server on a lost node (node not Ready, or gone) from a running one)",
		"RBAC denies get, list, watch on customresourcedefinitions.apiextensions.k8s.io cluster-wide (needed: checks the VM resource's CRD (status subresource, schema) and notices when it goes or comes back; this CRD only)",
	}
	if code != 1 || strings.Join(failed, "\n") != strings.Join(wantFailed, "\n") {
		t.Errorf("check as a read-only ServiceAccount: exit %d, failed:\n%s\nwant:\n%s", code, strings.Join(failed, "\n"), strings.Join(wantFailed, "\n"))
	}
	expectRunRefused(t, append([]string{"run", "--kubeconfig", saConfig}, flags...), wantFailed)

	// Exactly the permissions of access.Rules: everything passes. RBAC changes reach the
	// authorizer's cache within moments, hence the wait.
	apply(t, rbacFor(ns, sa, rules))
	eventually(t, 3*time.Minute, func() (bool, string) {
		rows, failed, code = checkRows(t, append([]string{"--kubeconfig", saConfig}, flags...)...)
		return code == 0 && strings.Join(rows, ",") == strings.Join(want, ","), fmt.Sprintf("exit %d, rows %v, failed %q", code, rows, failed)
	})
}

// expectRunRefused checks that run exits 1 before starting, with one stderr line per failed
// check, the same messages check printed.
func expectRunRefused(t *testing.T, args []string, failed []string) {
	t.Helper()
	_, stderr, code := runBinary(t, args...)
	var want []string
	for _, f := range failed {
		want = append(want, "vm-controller: "+f)
	}
	if code != 1 || strings.TrimRight(stderr, "\n") != strings.Join(want, "\n") {
		t.Errorf("run: exit %d, stderr:\n%s\nwant exit 1 and:\n%s", code, stderr, strings.Join(want, "\n"))
	}
}
