//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// setUsage makes kwok report a pod's usage through a ResourceUsage object named after it,
// which changes the usage without touching the pod (so no pod event reaches the controller).
func setUsage(t *testing.T, ns, pod, cpu, memory string) {
	t.Helper()
	apply(t, fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ResourceUsage
metadata: {name: %s, namespace: %s}
spec:
  usages:
  - usage:
      cpu: {value: %s}
      memory: {value: %s}
`, pod, ns, cpu, memory))
}

// TestUsage: the usage metrics-server reports for a VM's server reaches the VM's status and
// the per-VM gauges, follows a change, and the controller's usage writes make it reconcile
// nothing.
func TestUsage(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns, "--workers", "1", "--usage-interval", "2s", "--usage-threshold", "0.1", "--usage-max-interval", "1m")
	apply(t, fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: busy, namespace: %s}\nspec: {resource: {cpu: 1, memory: 1Gi, rootDisk: 1Gi}}\n", ns))
	waitPhase(t, ns, "busy", "Active", "ServerReady", 3*time.Minute)
	setUsage(t, ns, "busy-server", "250m", "100Mi")

	usage := func() string {
		return vmField(ns, "busy", ".status.server.usage.cpu") + "/" + vmField(ns, "busy", ".status.server.usage.memory")
	}
	// metrics-server scrapes kwok every few seconds; the first figures take up to a minute.
	eventually(t, 3*time.Minute, func() (bool, string) { u := usage(); return u == "250m/100Mi", "usage " + u })
	if r := vmField(ns, "busy", `.status.conditions[?(@.type=="UsageReported")].status`); r != "True" {
		t.Errorf("UsageReported condition = %q, want True", r)
	}

	// The usage changes over time; the status follows, and the controller, whose own
	// usage writes are the only change to the VM, reconciles it no more. Reconciles of busy
	// are counted (its "Reconciled" debug lines) at two barriers, one before the change and
	// one after its write: with one worker, a reconcile the write caused would have logged
	// before the second barrier's status was written.
	busyLine := regexp.MustCompile(`msg=Reconciled vm=` + regexp.QuoteMeta(ns+"/busy") + ` `)
	reconciled := func() int {
		c.barrier(t)
		return len(busyLine.FindAllString(c.logText(), -1))
	}
	before := reconciled()
	if before == 0 {
		t.Fatalf("no Reconciled line for busy in the log, so counting them would prove nothing:\n%s", c.tail(20))
	}
	rv := vmField(ns, "busy", ".metadata.resourceVersion")
	setUsage(t, ns, "busy-server", "600m", "300Mi")
	eventually(t, 3*time.Minute, func() (bool, string) { u := usage(); return u == "600m/300Mi", "usage " + u })
	if now := vmField(ns, "busy", ".metadata.resourceVersion"); now == rv {
		t.Fatalf("the usage change wrote nothing")
	}
	if after := reconciled(); after != before {
		t.Errorf("usage writes made the controller reconcile the VM %d more times", after-before)
	}
	m := c.scrape(t)
	labels := fmt.Sprintf(`{name="busy",namespace="%s"}`, ns)
	if v := metric(m, "vmcontroller_vm_cpu_usage_cores"+labels); v < 0.59 || v > 0.61 {
		t.Errorf("vmcontroller_vm_cpu_usage_cores%s = %v, want 0.6", labels, v)
	}
	if v := metric(m, "vmcontroller_vm_memory_usage_bytes"+labels); v != 300*1024*1024 {
		t.Errorf("vmcontroller_vm_memory_usage_bytes%s = %v, want %d", labels, v, 300*1024*1024)
	}

	// Inactive: no server, no usage, no gauge.
	kubectl(t, "-n", ns, "patch", "vm", "busy", "--type=merge", "-p", `{"spec":{"action":"inactive"}}`)
	waitPhase(t, ns, "busy", "Inactive", "ServerStopped", 3*time.Minute)
	if u := usage(); u != "/" {
		t.Errorf("an Inactive VM still reports usage %s", u)
	}
	eventually(t, 3*time.Minute, func() (bool, string) {
		m := c.scrape(t)
		return !strings.Contains(m, "vmcontroller_vm_cpu_usage_cores"+labels), "gauge still there"
	})
}
