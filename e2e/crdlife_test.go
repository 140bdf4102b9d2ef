//go:build e2e

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCRDLife follows the resource's CRD through deletion, re-creation and a version that
// stops being served: the controller cleans up while the CRD is being deleted, says so in its
// log, metrics and readiness while the resource is gone, and resumes by itself when it is
// back. It uses a CRD of its own (the project's, under a group made up for this test), since
// other tests need the shared one to stay.
func TestCRDLife(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	group := "life-" + hex.EncodeToString(suffix) + ".example.org"
	crd := filepath.Join(repoRoot(), "crds", "virtualmachines.cloudnative.czs.yaml")
	data, err := os.ReadFile(crd)
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.ReplaceAll(string(data), "cloudnative.czs", group)
	name := "virtualmachines." + group
	create := func() {
		t.Helper()
		if _, _, err := runKubectl(manifest, "apply", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		waitEstablished(t, name)
	}
	create()
	t.Cleanup(func() {
		releaseFinalizers(ns, name)
		_, _ = kubectlErr("delete", "crd", name, "--ignore-not-found", "--wait=false")
	})

	// v1beta1 (not the storage version, so it can stop being served) with its field map.
	c := startController(t, ns, "--api-version", group+"/v1beta1",
		"--schema-file", filepath.Join(repoRoot(), "schema", "fieldmaps", "v1beta1.yaml"))
	vm := func(n string) string {
		return fmt.Sprintf("apiVersion: %s/v1beta1\nkind: VirtualMachine\nmetadata: {name: %s, namespace: %s}\nspec: {resource: {cpu: 100m, memory: 64Mi, rootDisk: 1Gi}}\n", group, n, ns)
	}
	phase := func(n string) string {
		out, _ := kubectlErr("-n", ns, "get", "virtualmachines."+group, n, "-o", "jsonpath={.status.phase}")
		return out
	}
	state := func() (served float64, ready int) {
		return metric(c.scrape(t), "vmcontroller_resource_served"), httpStatus(t, "http://"+c.addr(t, "health")+"/readyz")
	}
	apply(t, vm("one"))
	eventually(t, 3*time.Minute, func() (bool, string) { p := phase("one"); return p == "Active", "one is " + p })

	// Deleting the CRD deletes its objects; the finalizer holds each until its pod is gone.
	kubectl(t, "delete", "crd", name, "--wait=false")
	eventually(t, 3*time.Minute, func() (bool, string) {
		_, err := kubectlErr("get", "crd", name)
		u, _, _ := podOf(ns, "one")
		return isNotFound(err) && u == "", fmt.Sprintf("crd error %v, pod %q", err, u)
	})
	eventually(t, 3*time.Minute, func() (bool, string) {
		s, r := state()
		return s == 0 && r == 503, fmt.Sprintf("resource_served %v, /readyz %d", s, r)
	})
	// The log line comes before the metric moves, and the log is a file the process writes
	// itself: it is there now.
	if !strings.Contains(c.logText(), "The VM resource is not served") {
		t.Errorf("the log does not say the resource is not served:\n%s", c.tail(10))
	}

	// Back again: the controller resumes without a restart.
	create()
	apply(t, vm("two"))
	eventually(t, 3*time.Minute, func() (bool, string) { p := phase("two"); return p == "Active", "two is " + p })
	if s, r := state(); s != 1 || r != 200 || !strings.Contains(c.logText(), "served again") {
		t.Errorf("after the CRD came back: resource_served %v, /readyz %d, log:\n%s", s, r, c.tail(10))
	}

	// The watched version stops being served, then is served again.
	setServed := func(on bool) {
		t.Helper()
		kubectl(t, "patch", "crd", name, "--type=json", "-p",
			fmt.Sprintf(`[{"op":"test","path":"/spec/versions/1/name","value":"v1beta1"},{"op":"replace","path":"/spec/versions/1/served","value":%t}]`, on))
	}
	setServed(false)
	eventually(t, 3*time.Minute, func() (bool, string) {
		s, r := state()
		return s == 0 && r == 503, fmt.Sprintf("resource_served %v, /readyz %d", s, r)
	})
	if !strings.Contains(c.logText(), "does not serve version v1beta1") {
		t.Errorf("the log does not say the version stopped being served:\n%s", c.tail(10))
	}
	setServed(true)
	apply(t, vm("three"))
	eventually(t, 3*time.Minute, func() (bool, string) { p := phase("three"); return p == "Active", "three is " + p })
	if s, r := state(); s != 1 || r != 200 {
		t.Errorf("after the version was served again: resource_served %v, /readyz %d", s, r)
	}
}
