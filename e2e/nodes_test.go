//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// Nodes of a test's own, for tests that drain, cordon, taint or lose a node: the shared
// cluster's nodes carry every other test's pods, so a test never does that to them. A node of
// its own is a kwok node like the shared ones (kwok plays its kubelet, and so does the local
// cluster's stand-in, cluster/resizer), made with newNode and gone when the test ends. See
// docs/dev/local-cluster.md.

// privateTaint is the key of the taint newNode gives a node, with the node's name as its value
// and effect NoSchedule, so that only the pods of the test that made it (which tolerate it,
// see onNode) are scheduled there.
const privateTaint = "e2e.kwok.cloudnative.czs/node"

// lostHolder is the holder of a node's Lease that loses the node: kwok stops playing a node
// whose Lease another holds, and cluster/resizer stops too for this holder (its LostHolder).
const lostHolder = "node-lost.kwok.cloudnative.czs"

// nodeSpec is what a test asks of a node of its own.
type nodeSpec struct {
	Labels map[string]string // more labels, beside kwok's (type: kwok, kubernetes.io/hostname: NAME, ...)
	Taints []string          // more taints, as kubectl taint writes them: KEY[=VALUE]:EFFECT
	// Shared leaves out the private taint, so that any pod may be scheduled there, those of
	// other tests too: only for a test that does not drain, taint or lose the node.
	Shared bool
	// CPU is the node's cpu (allocatable and capacity); empty: 32, as the shared nodes. A pod
	// that asks for more than 32 has no other node.
	CPU string
}

// newNode makes a kwok node for the test alone, with the labels and taints of spec, waits
// until it is Ready and returns its name; the node is deleted when the test ends. Like the
// shared nodes it has 32 cpu (or spec.CPU), 256Gi memory, 10Ti ephemeral-storage and 110
// pods, and unless spec.Shared the private taint (see onNode).
func newNode(t *testing.T, spec nodeSpec) string {
	t.Helper()
	base := strings.Trim(notNameChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 40 {
		base = strings.Trim(base[:40], "-")
	}
	name := "e2e-" + base + "-" + randomSuffix(t) // at most 51 characters: a label value (kubernetes.io/hostname)
	labels := map[string]string{
		"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"kubernetes.io/role": "agent", "node-role.kubernetes.io/agent": "",
	}
	maps.Copy(labels, spec.Labels)
	taints := spec.Taints
	if !spec.Shared {
		taints = append([]string{privateTaint + "=" + name + ":NoSchedule"}, taints...)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Node
metadata:
  name: %s
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
    metrics.k8s.io/resource-metrics-path: /metrics/nodes/%s/metrics/resource
  labels:
`, name, name)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		fmt.Fprintf(&b, "    %q: %q\n", k, labels[k])
	}
	b.WriteString("spec:\n  taints:\n")
	for _, taint := range taints {
		kv, effect, ok := strings.Cut(taint, ":")
		if !ok {
			t.Fatalf("taint %q: want KEY[=VALUE]:EFFECT", taint)
		}
		key, value, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "  - {key: %q, value: %q, effect: %q}\n", key, value, effect)
	}
	cpu := spec.CPU
	if cpu == "" {
		cpu = "32"
	}
	fmt.Fprintf(&b, `status:
  allocatable: {cpu: %q, memory: 256Gi, ephemeral-storage: 10Ti, pods: "110"}
  capacity: {cpu: %q, memory: 256Gi, ephemeral-storage: 10Ti, pods: "110"}
  nodeInfo: {architecture: amd64, operatingSystem: linux}
`, cpu, cpu)
	if _, stderr, err := runKubectl(b.String(), "create", "-f", "-"); err != nil {
		t.Fatalf("%v\n%s\nmanifest:\n%s", err, stderr, b.String())
	}
	t.Cleanup(func() { deleteNode(t, name) })
	eventually(t, 2*time.Minute, func() (bool, string) {
		ready := nodeCondition(name, "Ready")
		return ready == "True", fmt.Sprintf("node %s Ready %q", name, ready)
	})
	return name
}

// onNode is the part of a pod's spec (two-space indented, under spec:) that puts it on a node
// of newNode: a nodeSelector for the node's hostname and a toleration of its private taint.
func onNode(name string) string {
	return fmt.Sprintf(`  nodeSelector: {kubernetes.io/hostname: %s}
  tolerations:
  - {key: %s, operator: Equal, value: %s, effect: NoSchedule}
`, name, privateTaint, name)
}

// deleteNode deletes a node; pods still bound to it are removed by kube-controller-manager's
// pod garbage collector some time later (about a minute), as on any cluster.
func deleteNode(t testing.TB, name string) {
	t.Helper()
	if _, err := kubectlErr("delete", "node", name, "--ignore-not-found"); err != nil {
		t.Errorf("delete node %s: %v", name, err)
	}
}

// drainNode runs kubectl drain on a node, as an administrator would before maintenance:
// cordon, then evict its pods through the eviction API (which honours PodDisruptionBudgets,
// retrying every 5 s while one refuses) and wait until they are gone, for at most timeout.
// Pods without a controller are evicted too (--force); args are more flags. It tells whether
// the drain finished and returns kubectl's output, stdout and stderr together, which says why
// not ("Cannot evict pod as it would violate the pod's disruption budget.").
func drainNode(t testing.TB, name string, timeout time.Duration, args ...string) (finished bool, output string) {
	t.Helper()
	if timeout >= kubectlTimeout {
		t.Fatalf("drain timeout %s: want less than kubectl's bound %s", timeout, kubectlTimeout)
	}
	all := append([]string{"drain", name, "--ignore-daemonsets", "--delete-emptydir-data", "--force",
		"--timeout=" + timeout.String()}, args...)
	stdout, stderr, err := runKubectl("", all...)
	return err == nil, stdout + "\n" + stderr
}

// loseNode makes a node unreachable, as a machine that loses power or network: its
// heartbeats stop. It takes the node's Lease (kube-node-lease) for lostHolder, so kwok, which
// renews a node's Lease and plays its kubelet only while it holds it, stops doing both, and so
// does cluster/resizer. After --node-monitor-grace-period (40 s on the local cluster,
// cluster/kwokctl.yaml), kube-controller-manager's node lifecycle controller sets the node's
// conditions Unknown ("Kubelet stopped posting node status."), taints it
// node.kubernetes.io/unreachable (NoSchedule and NoExecute) and marks its pods not Ready; the
// pods stay bound to it, a deleted one stays Terminating, and once their toleration of the
// NoExecute taint runs out (300 s by default) they are evicted, as on a real cluster. The node
// stays lost until findNode or its deletion.
func loseNode(t testing.TB, name string) {
	t.Helper()
	// A day: kwok takes a Lease back once it has expired.
	patch := fmt.Sprintf(`{"spec":{"holderIdentity":%q,"leaseDurationSeconds":86400,"renewTime":%q}}`,
		lostHolder, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
	kubectl(t, "-n", "kube-node-lease", "patch", "lease", name, "--type=merge", "-p", patch)
}

// findNode gives back a node that loseNode lost: it deletes the node's Lease, kwok makes a new
// one and plays the node again, which reports Ready, and the node lifecycle controller lifts
// the unreachable taints.
func findNode(t testing.TB, name string) {
	t.Helper()
	kubectl(t, "-n", "kube-node-lease", "delete", "lease", name)
}

// nodeCondition is the status of the node's condition of type typ ("" if it has none).
func nodeCondition(name, typ string) string {
	out, _ := kubectlErr("get", "node", name, "-o", fmt.Sprintf(`jsonpath={.status.conditions[?(@.type=="%s")].status}`, typ))
	return out
}

// nodeTaints is the node's taints as KEY:EFFECT, sorted.
func nodeTaints(name string) []string {
	out, _ := kubectlErr("get", "node", name, "-o", `jsonpath={range .spec.taints[*]}{.key}:{.effect}{"\n"}{end}`)
	taints := strings.Fields(out)
	slices.Sort(taints)
	return taints
}
