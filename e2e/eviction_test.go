//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The eviction strategies (docs/eviction.md) against the real eviction API: kubectl drain of
// a node of the test's own, the disruption controller of kube-controller-manager computing
// each PodDisruptionBudget's allowed disruptions, and the scheduler placing the next server.
//
// Each VM asks for 40 cpu, more than any shared node has, so its server can only run on a
// node of the test's own (64 cpu), and only once the test adds the toleration of that node's
// private taint to the pending pod: so only the test's pods
// are ever on its nodes, and a drain disturbs no other test.

// tolerate adds to the VM's pending server pod the toleration of node's private taint, so that
// the scheduler can put it there, and waits until it runs there.
func tolerate(t *testing.T, ns, vm, node string) {
	t.Helper()
	pod := vm + "-server"
	eventually(t, 2*time.Minute, func() (bool, string) {
		phase := field(ns, "pod/"+pod, ".status.phase")
		return phase == "Pending", "server pod phase " + phase
	})
	kubectl(t, "-n", ns, "patch", "pod", pod, "--type=json", "-p",
		fmt.Sprintf(`[{"op":"add","path":"/spec/tolerations/-","value":{"key":%q,"operator":"Equal","value":%q,"effect":"NoSchedule"}}]`, privateTaint, node))
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := field(ns, "pod/"+pod, ".spec.nodeName")
		return got == node, fmt.Sprintf("server pod on node %q, want %s", got, node)
	})
}

// serverWatch records every server pod of a VM the API server reports, from a watch that
// lists them first and then follows each change in order, so that it sees a pod however
// briefly it lived. Two pods alive at once would be two servers of one VM.
type serverWatch struct{ *kubectlWatch }

// watchServers starts a serverWatch of the pods labelled for VM vm in ns; it ends with the
// test.
func watchServers(t *testing.T, ns, vm string) *serverWatch {
	t.Helper()
	return &serverWatch{startKubectlWatch(t, "-n", ns, "get", "pod", "-l", "cloudnative.czs/vm="+vm, "--watch", "--output-watch-events",
		"-o", `jsonpath={.type} {.object.metadata.uid} {.object.spec.nodeName}{"\n"}`)}
}

// servers reads the watch so far: the pods it saw, in order, and the most that were alive at
// once (a pod is alive from its first event to its DELETED).
func (w *serverWatch) servers(t *testing.T) (uids []string, most int) {
	t.Helper()
	w.running(t)
	alive := map[string]bool{}
	for _, line := range w.lines() {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		typ, uid := f[0], f[1]
		if typ == "DELETED" {
			delete(alive, uid)
			continue
		}
		if !alive[uid] && !contains(uids, uid) {
			uids = append(uids, uid)
		}
		alive[uid] = true
		most = max(most, len(alive))
	}
	return uids, most
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// evictVM applies a VM of 40 cpu with the eviction strategy given (v1alpha1).
func evictVM(t *testing.T, ns, name, strategy string) {
	t.Helper()
	diskVM(t, ns, name, "40", "1Gi", "  evictionStrategy: "+strategy+"\n")
}

// TestEvictionReplace: under evictionStrategy Replace, kubectl drain of the server's node
// finishes; the VM says it was evicted (ServerEvicted, the condition Moving), its next server
// runs on another node with the same claim, and the VM is Active again with ServerMoved; the
// pod watch saw two server pods in all, never both at once.
func TestEvictionReplace(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	from := newNode(t, nodeSpec{CPU: "64"})
	to := newNode(t, nodeSpec{CPU: "64"})
	startController(t, ns, "--watch-nodes").waitReady(t)
	w := watchServers(t, ns, "vm")
	evictVM(t, ns, "vm", "Replace")
	tolerate(t, ns, "vm", from)
	waitPhase(t, ns, "vm", "Active", "ServerReady", 2*time.Minute)
	claim, first := claimUID(ns, "vm"), field(ns, "pod/vm-server", ".metadata.uid")

	if finished, out := drainNode(t, from, 90*time.Second); !finished {
		t.Fatalf("the drain did not finish under Replace:\n%s", out)
	}
	second := newServer(t, ns, "vm", first)
	eventually(t, 2*time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "vm", "ServerEvicted")
		return n == 1 && strings.Contains(notes, "evicted from node "+from) && strings.Contains(notes, "EvictionByEvictionAPI"),
			fmt.Sprintf("ServerEvicted %d: %q", n, notes)
	})
	if got := condition(ns, "vm", "Moving"); got != "True/ServerEvicted" {
		t.Errorf("condition Moving %q while the new server waits, want True/ServerEvicted", got)
	}
	tolerate(t, ns, "vm", to)
	waitPhase(t, ns, "vm", "Active", "ServerReady", 2*time.Minute)
	if got := condition(ns, "vm", "Moving"); got != "" {
		t.Errorf("condition Moving %q once Active, want none", got)
	}
	if got := claimUID(ns, "vm"); got != claim {
		t.Errorf("claim %q after the move, want the same %s", got, claim)
	}
	mountsClaim(t, ns, "vm")
	eventually(t, 2*time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "vm", "ServerMoved")
		return n == 1 && strings.Contains(notes, "on node "+to) && strings.Contains(notes, "from node "+from),
			fmt.Sprintf("ServerMoved %d: %q", n, notes)
	})
	for _, reason := range []string{"MovingServer"} {
		if n, notes := occurrences(t, ns, "vm", reason); n != 1 {
			t.Errorf("%s occurred %d times (%q), want once", reason, n, notes)
		}
	}
	if n, notes := occurrences(t, ns, "vm", "ServerMissing"); n != 0 {
		t.Errorf("ServerMissing occurred %d times (%q): an eviction under Replace is no missing server", n, notes)
	}
	if got := vmField(ns, "vm", ".status.consecutiveFailures"); got != "" && got != "0" {
		t.Errorf("consecutiveFailures %q after the move: an eviction is no failure", got)
	}
	// The watch has seen the second pod (newServer read it back from the API server after
	// the watch started); it is complete up to it.
	eventually(t, time.Minute, func() (bool, string) {
		uids, _ := w.servers(t)
		return contains(uids, second), fmt.Sprintf("watch saw %v, not yet %s", uids, second)
	})
	if uids, most := w.servers(t); len(uids) != 2 || uids[0] != first || uids[1] != second || most != 1 {
		t.Errorf("server pods %v, at most %d at once; want %s then %s, one at a time", uids, most, first, second)
	}
}

// TestEvictionBlock: under evictionStrategy Block, the VM's PodDisruptionBudget makes kubectl
// drain of the server's node wait: it does not finish, and its output says the eviction would
// violate the pod's disruption budget; the budget's name and annotation and the VM's
// condition EvictionBlocked (with a Warning) name the VM and the way out, and the server is
// untouched. Once the strategy is Replace, the budget goes and the drain finishes.
func TestEvictionBlock(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	node := newNode(t, nodeSpec{CPU: "64"})
	startController(t, ns, "--watch-nodes").waitReady(t)
	evictVM(t, ns, "vm", "Block")
	tolerate(t, ns, "vm", node)
	waitPhase(t, ns, "vm", "Active", "ServerReady", 2*time.Minute)
	server := field(ns, "pod/vm-server", ".metadata.uid")
	// The disruption controller has counted the server: no disruption is allowed.
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := field(ns, "pdb/vm-block-eviction", ".status.currentHealthy}/{.status.disruptionsAllowed")
		return got == "1/0", "budget currentHealthy/disruptionsAllowed " + got
	})
	if got := field(ns, "pdb/vm-block-eviction", `.metadata.annotations.cloudnative\.czs/blocks-eviction-of`); !strings.Contains(got, "kubectl vm migrate vm -n "+ns+",") {
		t.Errorf("budget annotation %q does not say how to move the VM", got)
	}
	if got := field(ns, "pdb/vm-block-eviction", ".metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name"); got != "VirtualMachine/vm" {
		t.Errorf("budget owner %q, want VirtualMachine/vm", got)
	}

	finished, out := drainNode(t, node, 20*time.Second)
	if finished {
		t.Fatalf("the drain finished under Block:\n%s", out)
	}
	if !strings.Contains(out, "disruption budget") || !strings.Contains(out, "vm-server") {
		t.Errorf("the drain's output does not say the budget of vm-server holds it:\n%s", out)
	}
	t.Logf("kubectl drain said:\n%s", out)
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := condition(ns, "vm", "EvictionBlocked")
		return got == "True/DrainBlocked", "condition EvictionBlocked " + got
	})
	msg := field(ns, "vm/vm", `.status.conditions[?(@.type=="EvictionBlocked")].message`)
	for _, want := range []string{"Node " + node + " is cordoned", "kubectl vm migrate vm -n " + ns + " (or stop it)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("EvictionBlocked message %q does not say %q", msg, want)
		}
	}
	eventually(t, time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "vm", "DrainBlocked")
		return n == 1, fmt.Sprintf("DrainBlocked %d: %q", n, notes)
	})
	if got := field(ns, "pod/vm-server", ".metadata.uid}/{.metadata.deletionTimestamp"); got != server+"/" {
		t.Errorf("server pod %q after the refused drain, want %s untouched", got, server)
	}
	waitPhase(t, ns, "vm", "Active", "ServerReady", time.Minute)

	// The owner lets it go: the budget goes, and the drain finishes.
	kubectl(t, "-n", ns, "patch", vmRes, "vm", "--type=merge", "-p", `{"spec":{"evictionStrategy":"Replace"}}`)
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", "pdb", "vm-block-eviction")
		return err != nil, "the budget is still there"
	})
	if finished, out := drainNode(t, node, 90*time.Second); !finished {
		t.Fatalf("the drain did not finish once the strategy was Replace:\n%s", out)
	}
	newServer(t, ns, "vm", server)
	if got := condition(ns, "vm", "EvictionBlocked"); got != "" {
		t.Errorf("condition EvictionBlocked %q after the drain, want none", got)
	}
}

// TestEvictionBlockDeletedOrphanCreatedAgain: a Block VM deleted with kubectl delete
// --cascade=orphan, whose budget the garbage collector leaves with no owner, goes with its
// budget (the controller deletes it on the way out), and a VM created again with the name is
// Active with a budget of its own: controlled by the new VM and selecting its server.
func TestEvictionBlockDeletedOrphanCreatedAgain(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	startController(t, ns).waitReady(t)
	diskVM(t, ns, "vm", "1", "1Gi", "  evictionStrategy: Block\n")
	waitPhase(t, ns, "vm", "Active", "ServerReady", 2*time.Minute)
	first := vmField(ns, "vm", ".metadata.uid")
	eventually(t, time.Minute, func() (bool, string) {
		got := field(ns, "pdb/vm-block-eviction", ".metadata.ownerReferences[0].uid")
		return got == first, fmt.Sprintf("budget owner %q, want the VM %s", got, first)
	})

	kubectl(t, "-n", ns, "delete", "vm", "vm", "--cascade=orphan", "--wait=false")
	eventually(t, 3*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", "vm", "vm")
		return isNotFound(err), fmt.Sprintf("vm error %v", err)
	})
	if out, err := kubectlErr("-n", ns, "get", "pdb", "vm-block-eviction", "-o", "jsonpath={.metadata.ownerReferences}"); !isNotFound(err) {
		t.Errorf("the budget outlived the VM deleted with --cascade=orphan (owners %q, error %v)", out, err)
	}

	diskVM(t, ns, "vm", "1", "1Gi", "  evictionStrategy: Block\n")
	waitPhase(t, ns, "vm", "Active", "ServerReady", 3*time.Minute)
	second := vmField(ns, "vm", ".metadata.uid")
	if second == "" || second == first {
		t.Fatalf("the VM created again has UID %q, the deleted one had %s", second, first)
	}
	eventually(t, time.Minute, func() (bool, string) {
		got := field(ns, "pdb/vm-block-eviction", `.metadata.ownerReferences[?(@.controller==true)].uid}/{.spec.selector.matchLabels.cloudnative\.czs/vm-uid`)
		return got == second+"/"+second, fmt.Sprintf("budget controller/selected VM UID %q, want the new VM's %s", got, second)
	})
	if got := field(ns, "pod/vm-server", `.metadata.labels.cloudnative\.czs/vm-uid`); got != second {
		t.Errorf("server pod labelled for VM %q, want the new VM's %s", got, second)
	}
	if got := condition(ns, "vm", "Ready"); got != "True/ServerReady" {
		t.Errorf("condition Ready %q, want True/ServerReady", got)
	}
}
