//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The status says where a VM runs and why it is stuck, in kubectl's and the GitOps tools'
// terms: status.server.node and .ip as the Node and IP columns of -o wide, the reasons
// Unschedulable and ImagePullFailing with the scheduler's and the kubelet's words, and the
// kstatus conditions (Ready, Reconciling, Stalled) that kubectl wait reads.

// statusVM applies a VM of name in ns with cpu and, if not "", an image of its own.
func statusVM(t *testing.T, ns, name, cpu, image string) {
	t.Helper()
	extra := ""
	if image != "" {
		extra = "\n  image: " + image
	}
	apply(t, fmt.Sprintf(`apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: %s, namespace: %s}
spec:
  action: active
  resource: {cpu: %s, memory: 64Mi, rootDisk: 1Gi}%s
`, name, ns, cpu, extra))
}

// wideRow is the VM's row of kubectl get vm -o wide, by column.
func wideRow(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(kubectl(t, "-n", ns, "get", "vm", name, "-o", "wide")), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get vm -o wide: %q", lines)
	}
	// Columns are cut where the header's words begin: a cell may be empty.
	header := lines[0]
	var starts []int
	for i := range header {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
		}
	}
	row := map[string]string{}
	line := lines[1]
	for i, s := range starts {
		end := len(line)
		if i+1 < len(starts) {
			end = min(starts[i+1], end)
		}
		value := ""
		if s < end {
			value = strings.TrimSpace(line[s:end])
		}
		row[strings.Fields(header[s:])[0]] = value
	}
	return row
}

// kubectlWait runs kubectl wait for cond on the VM, and tells whether it held within timeout,
// with kubectl's output.
func kubectlWait(ns, name, cond string, timeout time.Duration) (bool, string) {
	out, stderr, err := runKubectl("", "-n", ns, "wait", "--for=condition="+cond, "vm/"+name, "--timeout="+timeout.String())
	return err == nil, strings.TrimSpace(out + stderr)
}

// TestStatusWhereItRuns: kubectl wait --for=condition=Ready returns once the VM runs; the
// status names the node and the address of its server pod, and kubectl get -o wide shows them
// as Node and IP; a running VM is neither Reconciling nor Stalled, and every condition speaks
// for the VM's generation.
func TestStatusWhereItRuns(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns)
	statusVM(t, ns, "where", "100m", "")

	if ok, out := kubectlWait(ns, "where", "Ready", 3*time.Minute); !ok {
		t.Fatalf("kubectl wait --for=condition=Ready: %s", out)
	}
	node, ip := field(ns, "pod/where-server", ".spec.nodeName"), field(ns, "pod/where-server", ".status.podIP")
	if node == "" || ip == "" {
		t.Fatalf("the server pod has node %q, IP %q", node, ip)
	}
	eventually(t, time.Minute, func() (bool, string) {
		got := vmField(ns, "where", ".status.server.node") + " " + vmField(ns, "where", ".status.server.ip")
		return got == node+" "+ip, fmt.Sprintf("status.server node and ip %q, want %q", got, node+" "+ip)
	})
	row := wideRow(t, ns, "where")
	if row["NODE"] != node || row["IP"] != ip || row["PHASE"] != "Active" || row["REASON"] != "ServerReady" {
		t.Errorf("kubectl get vm -o wide: %v; want NODE %s, IP %s, Active, ServerReady", row, node, ip)
	}
	if c := condition(ns, "where", "Reconciling") + condition(ns, "where", "Stalled"); c != "" {
		t.Errorf("a running VM has Reconciling or Stalled: %q", c)
	}
	gen := vmField(ns, "where", ".metadata.generation")
	if g := vmField(ns, "where", `.status.conditions[?(@.type=="Ready")].observedGeneration`); g != gen {
		t.Errorf("Ready observedGeneration %q, want the generation %q", g, gen)
	}
	if g := vmField(ns, "where", ".status.observedGeneration"); g != gen {
		t.Errorf("status.observedGeneration %q, want %q", g, gen)
	}
}

// TestStatusUnschedulable: a VM asking for more cpu than any node has says Unschedulable with
// the scheduler's words, is Reconciling, then Stalled once --stalled-after has passed (one
// Warning), and kubectl wait for Ready gives up on it; a spec a node can take brings it to
// Active, and Stalled goes.
func TestStatusUnschedulable(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns, "--stalled-after", "5s")
	statusVM(t, ns, "big", "1000", "")

	waitPhase(t, ns, "big", "Creating", "Unschedulable", 3*time.Minute)
	if msg := vmField(ns, "big", ".status.message"); !strings.HasPrefix(msg, "Server big-server cannot be scheduled: ") ||
		!strings.Contains(msg, "Insufficient cpu") {
		t.Errorf("message %q, want the scheduler's words", msg)
	}
	eventually(t, 2*time.Minute, func() (bool, string) {
		s, r := condition(ns, "big", "Stalled"), condition(ns, "big", "Reconciling")
		return s == "True/Unschedulable" && r == "", fmt.Sprintf("Stalled %q, Reconciling %q", s, r)
	})
	if g, gen := vmField(ns, "big", `.status.conditions[?(@.type=="Stalled")].observedGeneration`), vmField(ns, "big", ".metadata.generation"); g != gen {
		t.Errorf("Stalled observedGeneration %q, want %q", g, gen)
	}
	if ok, out := kubectlWait(ns, "big", "Ready", 3*time.Second); ok {
		t.Errorf("kubectl wait --for=condition=Ready held for an unschedulable VM: %s", out)
	}
	if ok, out := kubectlWait(ns, "big", "Stalled", 10*time.Second); !ok {
		t.Errorf("kubectl wait --for=condition=Stalled: %s", out)
	}
	eventually(t, time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "big", "Stalled")
		return n == 1 && strings.Contains(notes, "it will not start without a change"), fmt.Sprintf("Stalled events %d: %s", n, notes)
	})
	if row := wideRow(t, ns, "big"); row["NODE"] != "" || row["IP"] != "" || row["REASON"] != "Unschedulable" {
		t.Errorf("kubectl get vm -o wide: %v; want no node, no IP, Unschedulable", row)
	}

	// A size a node can take: the server is replaced, and the VM gets there.
	kubectl(t, "-n", ns, "patch", "vm", "big", "--type=merge", "-p", `{"spec":{"resource":{"cpu":"100m"}}}`)
	if ok, out := kubectlWait(ns, "big", "Ready", 3*time.Minute); !ok {
		t.Fatalf("kubectl wait --for=condition=Ready after the fix: %s", out)
	}
	if c := condition(ns, "big", "Stalled") + condition(ns, "big", "Reconciling"); c != "" {
		t.Errorf("Active, yet Stalled or Reconciling: %q", c)
	}
}

// TestStatusImagePullFails: a VM whose image cannot be pulled (the local cluster fails every
// pull from pull-fails.invalid) says ImagePullFailing with the kubelet's words, on its node
// and with its address, and is Stalled once --stalled-after has passed.
func TestStatusImagePullFails(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns, "--stalled-after", "5s")
	statusVM(t, ns, "pull", "100m", "pull-fails.invalid/vm:1")

	waitPhase(t, ns, "pull", "Creating", "ImagePullFailing", 3*time.Minute)
	eventually(t, 2*time.Minute, func() (bool, string) {
		msg := vmField(ns, "pull", ".status.message")
		return strings.HasPrefix(msg, "Server pull-server cannot pull its image: ") && strings.Contains(msg, "pull-fails.invalid") &&
			strings.Contains(msg, "no such host"), "message " + msg
	})
	eventually(t, 2*time.Minute, func() (bool, string) {
		s := condition(ns, "pull", "Stalled")
		return s == "True/ImagePullFailing", "Stalled " + s
	})
	node := field(ns, "pod/pull-server", ".spec.nodeName")
	if row := wideRow(t, ns, "pull"); node == "" || row["NODE"] != node || row["IP"] == "" {
		t.Errorf("kubectl get vm -o wide: %v; want node %q and an IP", row, node)
	}
	if ok, out := kubectlWait(ns, "pull", "Ready", 3*time.Second); ok {
		t.Errorf("kubectl wait --for=condition=Ready held for a VM whose image cannot be pulled: %s", out)
	}
}
