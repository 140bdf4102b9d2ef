//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The local cluster tests prove, through kubectl, what the cluster provides for the
// controller's tests beyond scheduling pods onto kwok nodes (docs/dev/local-cluster.md):
// claims that are provisioned, bound, grown and deleted (kube-controller-manager's PV
// controller and host-path provisioner, the API server's resize admission, cluster/resizer as
// driver and kubelet); pods that end on purpose and images that fail to pull (kwok Stages of
// cluster/stages.yaml); drains (kubectl drain, the eviction API, PodDisruptionBudgets) and
// lost nodes (nodes_test.go). When one of them fails, the cluster is broken, not the
// controller.

// claimYAML is a claim of size in ns; class "" is the default class; annotations are
// "key: value" lines.
func claimYAML(ns, name, class, size string, annotations ...string) string {
	y := "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n"
	if len(annotations) > 0 {
		y += "  annotations:\n"
		for _, a := range annotations {
			y += "    " + a + "\n"
		}
	}
	y += "spec:\n  accessModes: [ReadWriteOnce]\n  resources: {requests: {storage: " + size + "}}\n"
	if class != "" {
		y += "  storageClassName: " + class + "\n"
	}
	return y
}

// podYAML is a pod of restartPolicy Never in ns, labelled app: NAME, with one container,
// server, of image, that mounts claim (none if ""); extra is more of its spec (two-space
// indented, as onNode's).
func podYAML(ns, name, image, claim, extra string) string {
	y := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n  labels: {app: " + name + "}\n"
	y += "spec:\n  restartPolicy: Never\n  containers:\n  - name: server\n    image: " + image + "\n"
	if claim != "" {
		y += "    volumeMounts: [{name: disk, mountPath: /disk}]\n  volumes:\n  - {name: disk, persistentVolumeClaim: {claimName: " + claim + "}}\n"
	}
	return y + extra
}

// field reads one jsonpath of an object ("" if it or the object is missing); path may hold
// more than one, as ".a}|{.b". kubectl's output is trimmed, so a path whose first or last
// field may be empty is written to begin and end with one that is not.
func field(ns, object, path string) string {
	args := []string{"get", object, "-o", "jsonpath={" + path + "}"}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	out, _ := kubectlErr(args...)
	return out
}

// waitField waits until a jsonpath of an object reads want.
func waitField(t *testing.T, ns, object, path, want string) {
	t.Helper()
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := field(ns, object, path)
		return got == want, fmt.Sprintf("%s %s = %q, want %q", object, path, got, want)
	})
}

// boundServer makes a claim of class and 1Gi and a pod that mounts it, waits for the claim to
// be Bound and the pod Running, and returns the pod's UID and the claim's volume.
func boundServer(t *testing.T, ns, class string, claimAnnotations ...string) (uid, volume string) {
	t.Helper()
	apply(t, claimYAML(ns, "disk", class, "1Gi", claimAnnotations...)+"---\n"+podYAML(ns, "server", "img:1", "disk", ""))
	waitField(t, ns, "pvc/disk", ".status.phase", "Bound")
	waitField(t, ns, "pod/server", ".status.phase", "Running")
	return field(ns, "pod/server", ".metadata.uid"), field(ns, "pvc/disk", ".spec.volumeName")
}

// TestLocalClusterClaimBinds: a claim of the default class is provisioned by the host-path
// provisioner and bound at once, a pod on a kwok node that mounts it runs, and deleting the
// claim deletes its volume (reclaimPolicy Delete).
func TestLocalClusterClaimBinds(t *testing.T) {
	t.Parallel()
	ns := sharedKube().namespace(t)
	_, pv := boundServer(t, ns, "")
	if class := field(ns, "pvc/disk", ".spec.storageClassName"); class != "standard" {
		t.Errorf("the claim's class is %q, want the default standard", class)
	}
	got := field("", "pv/"+pv, `.metadata.annotations.pv\.kubernetes\.io/provisioned-by} {.spec.persistentVolumeReclaimPolicy} {.spec.capacity.storage} {.spec.claimRef.namespace}/{.spec.claimRef.name`)
	if want := "kubernetes.io/host-path Delete 1Gi " + ns + "/disk"; got != want {
		t.Errorf("volume %s: %q, want %q", pv, got, want)
	}
	kubectl(t, "-n", ns, "delete", "pod", "server")
	kubectl(t, "-n", ns, "delete", "pvc", "disk")
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := kubectlErr("get", "pv", pv)
		return isNotFound(err), fmt.Sprintf("volume %s still there: %v", pv, err)
	})
}

// TestLocalClusterClaimGrowsOnline: growing the claim of a running pod ends with the claim's
// capacity and its volume at the new size, no resize state or condition left, and the same pod
// running all along.
func TestLocalClusterClaimGrowsOnline(t *testing.T) {
	t.Parallel()
	ns := sharedKube().namespace(t)
	uid, pv := boundServer(t, ns, "")
	kubectl(t, "-n", ns, "patch", "pvc", "disk", "-p", `{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`)
	waitField(t, ns, "pvc/disk", ".status.capacity.storage}|{.status.allocatedResourceStatuses}|{.status.conditions}|{.metadata.name", "2Gi|||disk")
	if got := field("", "pv/"+pv, ".spec.capacity.storage"); got != "2Gi" {
		t.Errorf("volume %s capacity %s, want 2Gi", pv, got)
	}
	if got := field(ns, "pod/server", ".metadata.uid} {.status.phase"); got != uid+" Running" {
		t.Errorf("the pod is %q after the expansion, want %s Running: the same pod", got, uid)
	}
}

// TestLocalClusterClaimRefused: a claim annotated expand.kwok.cloudnative.czs/answer=Infeasible
// shows a driver's refusal (ControllerResizeInfeasible, a ControllerResizeError condition) and
// keeps its size; with the annotation removed, the expansion goes ahead.
func TestLocalClusterClaimRefused(t *testing.T) {
	t.Parallel()
	ns := sharedKube().namespace(t)
	_, pv := boundServer(t, ns, "", "expand.kwok.cloudnative.czs/answer: Infeasible")
	kubectl(t, "-n", ns, "patch", "pvc", "disk", "-p", `{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`)
	waitField(t, ns, "pvc/disk", ".status.allocatedResourceStatuses.storage", "ControllerResizeInfeasible")
	cond := field(ns, "pvc/disk", `.status.conditions[?(@.type=="ControllerResizeError")].status} {.status.conditions[?(@.type=="ControllerResizeError")].message`)
	if !strings.HasPrefix(cond, "True failed to expand pvc with rpc error: code = OutOfRange") {
		t.Errorf("ControllerResizeError condition: %q", cond)
	}
	if got := field(ns, "pvc/disk", ".status.capacity.storage") + " " + field("", "pv/"+pv, ".spec.capacity.storage"); got != "1Gi 1Gi" {
		t.Errorf("claim and volume capacity %s after the refusal, want 1Gi 1Gi", got)
	}
	kubectl(t, "-n", ns, "annotate", "pvc", "disk", "expand.kwok.cloudnative.czs/answer-")
	waitField(t, ns, "pvc/disk", ".status.capacity.storage}|{.status.allocatedResourceStatuses}|{.status.conditions}|{.metadata.name", "2Gi|||disk")
}

// TestLocalClusterClaimFixedSize: the API server refuses to grow a claim whose class does not
// allow expansion.
func TestLocalClusterClaimFixedSize(t *testing.T) {
	t.Parallel()
	ns := sharedKube().namespace(t)
	apply(t, claimYAML(ns, "disk", "fixed-size", "1Gi"))
	waitField(t, ns, "pvc/disk", ".status.phase", "Bound")
	_, err := kubectlErr("-n", ns, "patch", "pvc", "disk", "-p", `{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`)
	if err == nil || !strings.Contains(err.Error(), "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize") {
		t.Fatalf("growing a fixed-size claim: %v; want the API server's refusal", err)
	}
	if got := field(ns, "pvc/disk", ".spec.resources.requests.storage"); got != "1Gi" {
		t.Errorf("request %s after the refusal, want 1Gi", got)
	}
}

// TestLocalClusterWaitForFirstConsumer: a claim of class wait-for-consumer stays Pending, with
// the PV controller's WaitForFirstConsumer event, until a pod that uses it is scheduled; the
// scheduler names the pod's node on the claim, the volume is provisioned and bound, and the pod
// runs there. The host-path volume has no node affinity: any node can mount it later.
func TestLocalClusterWaitForFirstConsumer(t *testing.T) {
	t.Parallel()
	ns := sharedKube().namespace(t)
	apply(t, claimYAML(ns, "disk", "wait-for-consumer", "1Gi"))
	eventually(t, 2*time.Minute, func() (bool, string) {
		out, _ := kubectlErr("-n", ns, "get", "events", "--field-selector", "involvedObject.name=disk,reason=WaitForFirstConsumer", "-o", "name")
		return out != "", "no WaitForFirstConsumer event for the claim"
	})
	if got := field(ns, "pvc/disk", ".status.phase}/{.spec.volumeName"); got != "Pending/" {
		t.Fatalf("claim %q before any pod uses it, want Pending without a volume", got)
	}
	apply(t, podYAML(ns, "server", "img:1", "disk", ""))
	waitField(t, ns, "pod/server", ".status.phase", "Running")
	node := field(ns, "pod/server", ".spec.nodeName")
	if got := field(ns, "pvc/disk", `.status.phase} {.metadata.annotations.volume\.kubernetes\.io/selected-node`); got != "Bound "+node {
		t.Errorf("claim %q, want Bound with the pod's node %s selected", got, node)
	}
	if got := field("", "pv/"+field(ns, "pvc/disk", ".spec.volumeName"), ".spec.nodeAffinity"); got != "" {
		t.Errorf("the volume has a node affinity: %s", got)
	}
}

// TestLocalClusterPodEnds: a running pod annotated end.kwok.cloudnative.czs/phase ends as a
// kubelet reports it: Succeeded with exit code 0 (a guest that shut down), or Failed with the
// exit code, reason and message asked for (a guest that crashed).
func TestLocalClusterPodEnds(t *testing.T) {
	t.Parallel()
	ns := sharedKube().namespace(t)
	for _, tc := range []struct {
		name        string
		annotations []string
		want        string // phase|Ready's reason|exit code|reason|message|name
	}{
		{"succeeded", []string{"end.kwok.cloudnative.czs/phase=Succeeded"}, "Succeeded|PodCompleted|0|Completed||succeeded"},
		{"failed", []string{"end.kwok.cloudnative.czs/phase=Failed", "end.kwok.cloudnative.czs/exit-code=3",
			"end.kwok.cloudnative.czs/message=guest panicked"}, "Failed|PodFailed|3|Error|guest panicked|failed"},
		{"killed", []string{"end.kwok.cloudnative.czs/phase=Failed", "end.kwok.cloudnative.czs/exit-code=137",
			"end.kwok.cloudnative.czs/reason=OOMKilled"}, "Failed|PodFailed|137|OOMKilled||killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			apply(t, podYAML(ns, tc.name, "img:1", "", ""))
			waitField(t, ns, "pod/"+tc.name, ".status.phase", "Running")
			kubectl(t, append([]string{"-n", ns, "annotate", "pod", tc.name}, tc.annotations...)...)
			waitField(t, ns, "pod/"+tc.name, ".status.phase", strings.Split(tc.want, "|")[0])
			got := field(ns, "pod/"+tc.name, `.status.phase}|{.status.conditions[?(@.type=="Ready")].reason}|`+
				`{.status.containerStatuses[0].state.terminated.exitCode}|{.status.containerStatuses[0].state.terminated.reason}|`+
				`{.status.containerStatuses[0].state.terminated.message}|{.metadata.name`)
			if got != tc.want {
				t.Errorf("pod %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLocalClusterImagePullFails: a pod whose image is in the registry pull-fails.invalid stays
// Pending with its container waiting in ImagePullBackOff, saying why.
func TestLocalClusterImagePullFails(t *testing.T) {
	t.Parallel()
	ns := sharedKube().namespace(t)
	apply(t, podYAML(ns, "server", "pull-fails.invalid/vm:1", "", ""))
	waitField(t, ns, "pod/server", ".status.containerStatuses[0].state.waiting.reason", "ImagePullBackOff")
	got := field(ns, "pod/server", `.status.phase} {.status.conditions[?(@.type=="Ready")].status} {.status.containerStatuses[0].state.waiting.message`)
	if want := `Pending False Back-off pulling image "pull-fails.invalid/vm:1": ErrImagePull: `; !strings.HasPrefix(got, want) ||
		!strings.Contains(got, "lookup pull-fails.invalid: no such host") {
		t.Errorf("pod %q, want it to begin %q and name the registry", got, want)
	}
}

// TestLocalClusterDrain: kubectl drain of a node with a pod under a PodDisruptionBudget of
// minAvailable 1 cordons the node but does not finish, saying why; without the budget it
// evicts the pod (the API server marks it DisruptionTarget, the stand-in kubelet ends it at
// once) and finishes with the pod gone.
func TestLocalClusterDrain(t *testing.T) {
	t.Parallel()
	ns := sharedKube().namespace(t)
	node := newNode(t, nodeSpec{})
	apply(t, podYAML(ns, "server", "img:1", "", onNode(node))+`---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: server, namespace: `+ns+`}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: server}}
`)
	waitField(t, ns, "pod/server", ".status.phase", "Running")
	waitField(t, ns, "pdb/server", ".status.currentHealthy}/{.status.disruptionsAllowed", "1/0")
	uid := field(ns, "pod/server", ".metadata.uid")

	finished, out := drainNode(t, node, 15*time.Second)
	if finished || !strings.Contains(out, "Cannot evict pod as it would violate the pod's disruption budget.") {
		t.Fatalf("drain with the budget: finished %v; want it not to finish, because of the budget:\n%s", finished, out)
	}
	if got := field("", "node/"+node, ".spec.unschedulable"); got != "true" {
		t.Errorf("node unschedulable %q after the drain, want true (cordoned)", got)
	}
	if got := field(ns, "pod/server", ".metadata.deletionTimestamp}|{.metadata.uid}|{.status.phase"); got != "|"+uid+"|Running" {
		t.Errorf("pod %q after the refused drain, want %s Running, not deleted", got, uid)
	}

	// Without the budget. A finalizer of the test's holds the evicted pod, so that the test sees
	// what the eviction and the kubelet left on it before it goes.
	kubectl(t, "-n", ns, "delete", "pdb", "server")
	kubectl(t, "-n", ns, "patch", "pod", "server", "--type=merge", "-p", `{"metadata":{"finalizers":["e2e.kwok.cloudnative.czs/hold"]}}`)
	type result struct {
		finished bool
		out      string
	}
	done := make(chan result, 1)
	go func() {
		f, o := drainNode(t, node, 2*time.Minute)
		done <- result{f, o}
	}()
	// The eviction deletes the pod gracefully (its 30 s); the stand-in kubelet then deletes it at
	// once, as a kubelet does once the containers have stopped: grace period 0.
	waitField(t, ns, "pod/server", `.status.conditions[?(@.type=="DisruptionTarget")].reason} {.metadata.deletionGracePeriodSeconds`,
		"EvictionByEvictionAPI 0")
	kubectl(t, "-n", ns, "patch", "pod", "server", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	r := <-done
	if !r.finished || !strings.Contains(r.out, "node/"+node+" drained") {
		t.Fatalf("drain without the budget: finished %v; want it drained:\n%s", r.finished, r.out)
	}
	if _, err := kubectlErr("-n", ns, "get", "pod", "server"); !isNotFound(err) {
		t.Errorf("the pod is still there after the drain: %v", err)
	}
}

// TestLocalClusterLostNode: a node that loseNode lost is marked Unknown and tainted unreachable
// by the node lifecycle controller, its pod is marked not Ready, and a pod deleted there stays
// Terminating, since no kubelet ends it; given back with findNode, the node is Ready again,
// untainted, and the pod is ended.
func TestLocalClusterLostNode(t *testing.T) {
	t.Parallel()
	ns := sharedKube().namespace(t)
	lost, other := newNode(t, nodeSpec{}), newNode(t, nodeSpec{})
	apply(t, podYAML(ns, "server", "img:1", "", onNode(lost))+"---\n"+podYAML(ns, "barrier", "img:1", "", onNode(other)))
	waitField(t, ns, "pod/server", ".status.phase", "Running")
	waitField(t, ns, "pod/barrier", ".status.phase", "Running")

	loseNode(t, lost)
	eventually(t, 3*time.Minute, func() (bool, string) {
		ready, taints := nodeCondition(lost, "Ready"), nodeTaints(lost)
		return ready == "Unknown" && strings.Join(taints, " ") == "e2e.kwok.cloudnative.czs/node:NoSchedule node.kubernetes.io/unreachable:NoExecute node.kubernetes.io/unreachable:NoSchedule",
			fmt.Sprintf("node %s Ready %q, taints %v", lost, ready, taints)
	})
	waitField(t, ns, "pod/server", `.status.conditions[?(@.type=="Ready")].status`, "False")

	// Deleted there, the pod stays Terminating: cluster/resizer has handled a later deletion, of
	// the barrier pod on a node that answers, by the time that one is gone.
	kubectl(t, "-n", ns, "delete", "pod", "server", "--wait=false")
	kubectl(t, "-n", ns, "delete", "pod", "barrier")
	if got := field(ns, "pod/server", ".metadata.deletionTimestamp"); got == "" {
		t.Fatalf("the pod on the lost node is gone or not terminating (deletionTimestamp %q): something ended it", got)
	}

	findNode(t, lost)
	eventually(t, 3*time.Minute, func() (bool, string) {
		ready, taints := nodeCondition(lost, "Ready"), nodeTaints(lost)
		return ready == "True" && strings.Join(taints, " ") == "e2e.kwok.cloudnative.czs/node:NoSchedule",
			fmt.Sprintf("node %s Ready %q, taints %v", lost, ready, taints)
	})
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", "pod", "server")
		return isNotFound(err), fmt.Sprintf("the pod on the node given back is still there: %v", err)
	})
}
