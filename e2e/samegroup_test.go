//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestSameGroupShape: a copy of the project's CRD under another group needs no field map,
// also one of an earlier release, without the disk's fields (testdata/crds/same-shape.yaml).
// check says which built-in layout the CRD's schema chose and why, and a controller pointed
// at the group with --api-version alone manages its VMs at the built-in paths, its disks
// included (which such a status does not report).
func TestSameGroupShape(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	const group, res = "other.example.org", "virtualmachines.other.example.org"
	applyCRD(t, ns, "same-shape.yaml", res)

	flags := []string{"--kubeconfig", kubeconfig, "--api-version", group + "/v1alpha1", "--namespace", ns}
	rows, failed, code := checkRows(t, flags...)
	if code != 0 || len(failed) > 0 || len(rows) < 4 || strings.Join(rows[:4], ",") != "fieldmap pass,discovery pass,crd pass,fields pass" {
		t.Errorf("check: exit %d, rows %v, failed %v", code, rows, failed)
	}
	table, _, _ := runBinary(t, append([]string{"check"}, flags...)...)
	if want := "built-in layout of cloudnative.czs/v1alpha1 without spec.rootDiskStorageClassName, spec.rootDiskReclaimPolicy, spec.evictionStrategy, spec.placement, status.rootDisk.claimName, status.rootDisk.phase, status.rootDisk.capacity, status.rootDisk.request, status.server.node, status.server.ip, status.nextRetryTime, status.startRequestedAt, status.stopRequestedAt, status.migration, which the CRD's schema lacks"; !strings.Contains(table, want) {
		t.Errorf("check does not say %q:\n%s", want, table)
	}

	c := startController(t, ns, "--api-version", group+"/v1alpha1")
	if log := c.logText(); !strings.Contains(log, "built-in layout of cloudnative.czs/v1alpha1") {
		t.Errorf("run does not log the map it chose:\n%s", c.tail(20))
	}
	apply(t, fmt.Sprintf(`apiVersion: %s/v1alpha1
kind: VirtualMachine
metadata: {name: twin, namespace: %s}
spec: {resource: {cpu: 100m, memory: 64Mi, rootDisk: 1Gi}}
`, group, ns))
	field := func(path string) string {
		out, _ := kubectlErr("-n", ns, "get", res, "twin", "-o", "jsonpath={"+path+"}")
		return out
	}
	eventually(t, 3*time.Minute, func() (bool, string) {
		got := field(".status.phase") + "/" + field(".status.reason")
		return got == "Active/ServerReady", "twin is " + got + ": " + field(".status.message")
	})
	if _, _, _, owner := podSpecOf(ns, "twin-server"); owner != group+"/v1alpha1/VirtualMachine" {
		t.Errorf("twin's pod is owned by %q, want the %s VM", owner, group)
	}
	kubectl(t, "-n", ns, "patch", res, "twin", "--type=merge", "-p", `{"spec":{"action":"inactive"}}`)
	eventually(t, 3*time.Minute, func() (bool, string) {
		got := field(".status.phase") + "/" + field(".status.reason")
		return got == "Inactive/ServerStopped", "twin is " + got
	})
	kubectl(t, "-n", ns, "delete", res, "twin", "--timeout=3m")
}
