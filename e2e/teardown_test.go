//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestNamespaceDeletedWithVMs deletes, with kubectl, a namespace holding Active VMs. Its pods
// go before its VMs; the controller leaves the VMs alone meanwhile (no server made again, no
// status written), then removes each VM's finalizer once its deletion comes, and the
// namespace is gone. Its log, at debug level, lists every plan it applied: after the
// namespace's deletion, only the finalizers' removals.
func TestNamespaceDeletedWithVMs(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns, "--root-disk", "ephemeral")
	const n = 20
	if _, _, err := runKubectl(vmList(ns, "t", n), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func() (bool, string) {
		got := countActive(t, ns)
		return got.active == n && got.pods == n, fmt.Sprintf("%d/%d active, %d pods", got.active, got.vms, got.pods)
	})
	before := len(c.logText())

	kubectl(t, "delete", "namespace", ns, "--wait=false")
	eventually(t, 3*time.Minute, func() (bool, string) {
		out, err := kubectlErr("get", "namespace", ns, "-o", "jsonpath={.status.phase}")
		if isNotFound(err) {
			return true, ""
		}
		vms, _ := kubectlErr("-n", ns, "get", "vm", "-o", "name")
		return false, fmt.Sprintf("namespace %s %s; VMs left: %d", ns, out, strings.Count(vms, "/"))
	})

	after := c.logText()[before:]
	plans := regexp.MustCompile(`msg="Applying plan" vm=\S+ .*finalizer=(\S*) disk=(\S*) server=(\S*) budget=(\S*) status=(\S+) events=(\d+)`).FindAllStringSubmatch(after, -1)
	removed := 0
	for _, p := range plans {
		for i := 1; i <= 4; i++ {
			p[i] = strings.Trim(p[i], `"`) // slog quotes an empty value
		}
		if p[1] != "remove" || p[2] != "" || p[3] != "" || p[4] != "" || p[5] != "false" || p[6] != "0" {
			t.Errorf("in the namespace's deletion, a plan with finalizer=%q disk=%q server=%q budget=%q status=%s events=%s; want only finalizer removals", p[1], p[2], p[3], p[4], p[5], p[6])
			continue
		}
		removed++
	}
	if removed != n {
		t.Errorf("%d finalizer removals after the namespace's deletion, want %d (one per VM)", removed, n)
	}
	if !strings.Contains(after, "Namespace is being deleted: waiting for the VM's deletion") {
		t.Errorf("the controller never said it left a VM to its namespace's deletion")
	}
	if strings.Contains(after, "level=ERROR") {
		t.Errorf("errors in the namespace's deletion:\n%s", c.tail(30))
	}
}
