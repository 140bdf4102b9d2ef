//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestNoStatusSubresource: a CRD without the status subresource (the original tutorial's
// CRD had none; testdata/crds/no-status.yaml is the project's CRD so, under another group)
// is a warning for check, not a failure. The controller says at start that it writes status
// through the main resource, and brings a VM to Active that way. There every status write
// makes a new generation; the controller claims it, so observedGeneration equals generation
// once it has caught up, and its own writes start no further reconcile: the VM's
// resourceVersion stays as it is across a barrier. Deleting the VM removes its pod before
// the finalizer.
func TestNoStatusSubresource(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	const group, res = "nostatus.example.org", "virtualmachines.nostatus.example.org"
	applyCRD(t, ns, "no-status.yaml", res)

	flags := []string{"--kubeconfig", kubeconfig, "--api-version", group + "/v1alpha1", "--namespace", ns}
	rows, failed, code := checkRows(t, flags...)
	if code != 0 || len(failed) > 0 || len(rows) < 4 || strings.Join(rows[:4], ",") != "fieldmap pass,discovery pass,crd WARN,fields pass" {
		t.Errorf("check: exit %d, rows %v, failed %v", code, rows, failed)
	}
	table, _, _ := runBinary(t, append([]string{"check"}, flags...)...)
	if want := "has no status subresource in version v1alpha1"; !strings.Contains(table, want) {
		t.Errorf("check does not say %q:\n%s", want, table)
	}

	// One worker, for the barrier; no usage sampling, whose writes would move the
	// resourceVersion this test watches stand still.
	c := startController(t, ns, "--api-version", group+"/v1alpha1", "--workers", "1", "--usage-interval", "0")
	if log := c.logText(); !strings.Contains(log, "Status subresource missing; writing status through the main resource") {
		t.Errorf("run does not log that it writes status through the main resource:\n%s", c.tail(20))
	}
	field := func(name, path string) string {
		out, _ := kubectlErr("-n", ns, "get", res, name, "-o", "jsonpath={"+path+"}")
		return out
	}
	// caughtUp reports whether the controller has written the status of name's current
	// generation: on this CRD only its claim makes the two equal, and the Ready condition's,
	// where the VM has one (a VM stopped as asked, such as the barrier, carries none).
	caughtUp := func(name string) (bool, string) {
		f := strings.Fields(field(name, `.metadata.generation} {.status.observedGeneration} {.status.conditions[?(@.type=="Ready")].observedGeneration`))
		return (len(f) == 2 || len(f) == 3 && f[1] == f[2]) && f[0] == f[1], fmt.Sprintf("%s generation, observedGeneration, Ready's: %v", name, f)
	}
	// barrier returns once the reconciles queued before it have finished (see
	// controller.barrier; that one is for the project's group): it changes the spec of the
	// Inactive VM "barrier" and waits until its status has caught up.
	barrier := func() {
		t.Helper()
		c.drained(t)
		touchBarrier(t, ns, res, group+"/v1alpha1")
		eventually(t, 3*time.Minute, func() (bool, string) { return caughtUp(barrierVM) })
	}

	c.waitReady(t)
	apply(t, fmt.Sprintf(`apiVersion: %s/v1alpha1
kind: VirtualMachine
metadata: {name: plain, namespace: %s}
spec: {resource: {cpu: 100m, memory: 64Mi, rootDisk: 1Gi}}
`, group, ns))
	eventually(t, 3*time.Minute, func() (bool, string) {
		got := field("plain", ".status.phase") + "/" + field("plain", ".status.reason")
		return got == "Active/ServerReady", "plain is " + got + ": " + field("plain", ".status.message")
	})
	uid, _, _, owner := podSpecOf(ns, "plain-server")
	if owner != group+"/v1alpha1/VirtualMachine" || field("plain", ".status.server.id") != uid {
		t.Errorf("plain's pod %s is owned by %q; status names server %q", uid, owner, field("plain", ".status.server.id"))
	}

	barrier()
	if ok, seen := caughtUp("plain"); !ok {
		t.Errorf("Active, and the status has not caught up: %s", seen)
	}
	rv := field("plain", ".metadata.resourceVersion")
	barrier()
	if later := field("plain", ".metadata.resourceVersion"); later != rv {
		t.Errorf("plain was written again while nothing changed: resourceVersion %s, then %s (generation %s)", rv, later, field("plain", ".metadata.generation"))
	}

	// Orphan deletion: only the controller's finalizer can remove the pod first.
	kubectl(t, "-n", ns, "delete", res, "plain", "--cascade=orphan", "--wait=false")
	eventually(t, 3*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", res, "plain")
		u, _, _, _ := podSpecOf(ns, "plain-server")
		if isNotFound(err) && u != "" {
			t.Fatalf("the VM was removed while its pod %s still exists", u)
		}
		return isNotFound(err), fmt.Sprintf("vm: %v, pod %q", err, u)
	})
}
