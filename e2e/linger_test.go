//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A server that ended while a sidecar keeps its pod running: a service mesh injects the sidecar
// into the server pod as the pod is created, by a mutating admission step of the API server (a
// MutatingAdmissionPolicy here, as a mesh's webhook would), and the local cluster ends only the
// server container (end.kwok.cloudnative.czs/container, cluster/stages.yaml), so the pod stays
// Running with the sidecar.

// sidecarImage is the image of the sidecar injectSidecar adds; kwok runs any image.
const sidecarImage = "docker.io/istio/proxyv2:1.24.0"

// injectSidecar makes the API server add the container name to every pod created in ns, as a
// service mesh injects its proxy (mutatePods), and returns once it does.
func injectSidecar(t *testing.T, ns, name string) {
	t.Helper()
	mutatePods(t, ns, name, fmt.Sprintf(`  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{containers: [Object.spec.containers{name: %q, image: %q}]}}
`, name, sidecarImage), "{.spec.containers[*].name}", "server "+name)
}

// mutatePods makes the API server apply mutations (the list of a MutatingAdmissionPolicy's
// spec.mutations, as YAML indented under it) to every pod created in ns: a policy named after
// ns and name, bound to ns alone (by namespaceSelector), so other tests' pods are left as they
// are, deleted when the test ends. It returns once the API server applies it: its admission
// reads policies from a cache of its own, so a pod created right after the binding could still
// go without the change; a server-side dry run of a pod in ns goes through the same admission,
// and shows it when jsonpath (a kubectl -o jsonpath) reads want from the pod.
func mutatePods(t *testing.T, ns, name, mutations, jsonpath, want string) {
	t.Helper()
	policy := ns + "-" + name
	t.Cleanup(func() {
		for _, kind := range []string{"mutatingadmissionpolicybinding", "mutatingadmissionpolicy"} {
			if _, err := kubectlErr("delete", kind, policy, "--ignore-not-found", "--wait=false"); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	apply(t, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [pods]
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
%[2]s---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: %[3]s}
`, policy, mutations, ns))
	probe := podYAML(ns, name+"-probe", "img:1", "", "")
	eventually(t, time.Minute, func() (bool, string) {
		out, _, err := runKubectl(probe, "create", "--dry-run=server", "-f", "-", "-o", "jsonpath="+jsonpath)
		return err == nil && out == want, fmt.Sprintf("a pod created in %s reads %q at %s (err %v), want %q", ns, out, jsonpath, err, want)
	})
}

// endContainer ends container of pod in ns as the local cluster does for the annotation
// end.kwok.cloudnative.czs/container (with more annotations, as "KEY=VALUE"), and waits until
// the pod's status says it has ended. A cluster whose kwok has not that stage (one created
// before it was added) leaves the container running: the failure says so.
func endContainer(t *testing.T, ns, pod, container string, annotations ...string) {
	t.Helper()
	kubectl(t, append([]string{"-n", ns, "annotate", "pod", pod, "end.kwok.cloudnative.czs/container=" + container}, annotations...)...)
	state := fmt.Sprintf(`.status.containerStatuses[?(@.name=="%s")].state`, container)
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := field(ns, "pod/"+pod, state)
		return strings.Contains(got, `"terminated"`), fmt.Sprintf("container %s of pod %s is %s: the cluster's kwok did not end it; "+
			"a cluster created before the stage pod-end-container of cluster/stages.yaml lacks it (make cluster-down; make cluster)", container, pod, got)
	})
}

// TestRunStrategyOnceLingers: under runStrategy Once, a server that shut down cleanly while an
// injected sidecar keeps its pod Running leaves the VM Inactive (GuestShutDown) with the ended
// server kept, and the status says which container keeps the pod running, on which node, what
// it holds there and how to free it; that status is written once, not again by a later
// reconcile nor by a new controller; `kubectl vm stop` then deletes the pod.
func TestRunStrategyOnceLingers(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	const vm, pod, sidecar = "linger", "linger-server", "istio-proxy"
	injectSidecar(t, ns, sidecar)
	c := startController(t, ns, "--workers", "1")
	strategyVM(t, ns, vm, "once")
	waitPhase(t, ns, vm, "Active", "ServerReady", 2*time.Minute)
	uid := podUID(t, ns, vm)
	if got := field(ns, "pod/"+pod, ".spec.containers[*].name"); got != "server "+sidecar {
		t.Fatalf("server pod's containers %q, want server and the injected %s", got, sidecar)
	}

	endContainer(t, ns, pod, "server")
	waitPhase(t, ns, vm, "Inactive", "GuestShutDown", 2*time.Minute)
	node := field(ns, "pod/"+pod, ".spec.nodeName")
	// The pod as the kubelet left it: Running, not Ready, the server exited 0, the sidecar runs.
	want := uid + " Running False 0 " + sidecar
	got := field(ns, "pod/"+pod, `.metadata.uid} {.status.phase} {.status.conditions[?(@.type=="Ready")].status} `+
		`{.status.containerStatuses[?(@.name=="server")].state.terminated.exitCode} `+
		`{.status.containerStatuses[?(@.state.running)].name`)
	if got != want {
		t.Fatalf("server pod (uid phase ready exit-code running-containers) %q, want %q: the ended server kept as it is", got, want)
	}
	if got := vmField(ns, vm, ".status.server.state"); got != "Running" {
		t.Errorf("status.server.state %q, want Running (the pod's phase)", got)
	}
	msg := vmField(ns, vm, ".status.message")
	keeps := fmt.Sprintf("but container %[1]s keeps its pod running on node %[2]s, holding its cpu (100m) and memory (64Mi) there: "+
		"to free them, stop the VM (kubectl vm stop %[3]s -n %[4]s) or start it again (kubectl vm start %[3]s -n %[4]s), which replaces it", sidecar, node, vm, ns)
	if !strings.HasPrefix(msg, "Server "+pod+" shut down cleanly") || !strings.HasSuffix(msg, keeps) {
		t.Fatalf("status.message %q, want the clean shutdown, then %q", msg, keeps)
	}

	// Written once: neither the echo of that write nor a later reconcile, nor a new
	// controller's first one, writes the VM again.
	rv := vmField(ns, vm, ".metadata.resourceVersion")
	c.barrier(t)
	if err := c.stop(t); err != nil {
		t.Fatal(err)
	}
	c = startController(t, ns, "--workers", "1")
	c.barrier(t)
	if got := vmField(ns, vm, ".metadata.resourceVersion"); got != rv {
		t.Errorf("VM written again (resourceVersion %s -> %s) with nothing new: status.message now %q", rv, got, vmField(ns, vm, ".status.message"))
	}
	if n, notes := occurrences(t, ns, vm, "GuestShutDown"); n != 1 {
		t.Errorf("%d GuestShutDown Events, want 1:\n%s", n, notes)
	}
	if got := podUID(t, ns, vm); got != uid {
		t.Fatalf("server pod %q after the controller's restart, want the ended %s kept", got, uid)
	}

	if out := mustVM(t, "stop", vm, "-n", ns); !strings.Contains(out, "stop requested") {
		t.Fatalf("kubectl vm stop said %q", out)
	}
	waitPhase(t, ns, vm, "Inactive", "Stopped", 2*time.Minute)
	if got, _, _ := podOf(ns, vm); got != "" {
		t.Fatalf("server pod %s still there after kubectl vm stop (the ended one was %s)", got, uid)
	}
}

// TestLocalClusterContainerEnds: a running pod annotated end.kwok.cloudnative.czs/container
// has only that container end, with the exit code, reason and message asked for, while its
// sidecar runs on: the pod stays Running, not Ready, naming the container that is not.
func TestLocalClusterContainerEnds(t *testing.T) {
	t.Parallel()
	ns := sharedKube().namespace(t)
	apply(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: server, namespace: %s}
spec:
  restartPolicy: Never
  containers:
  - {name: server, image: "img:1"}
  - {name: sidecar, image: %q}
`, ns, sidecarImage))
	waitField(t, ns, "pod/server", ".status.phase", "Running")
	endContainer(t, ns, "server", "server", "end.kwok.cloudnative.czs/exit-code=3", "end.kwok.cloudnative.czs/message=guest panicked")
	got := field(ns, "pod/server", `.status.phase}|{.status.conditions[?(@.type=="Ready")].reason}|`+
		`{.status.conditions[?(@.type=="Ready")].message}|`+
		`{.status.containerStatuses[?(@.name=="server")].state.terminated.exitCode}|`+
		`{.status.containerStatuses[?(@.name=="server")].state.terminated.reason}|`+
		`{.status.containerStatuses[?(@.name=="server")].state.terminated.message}|`+
		`{.status.containerStatuses[?(@.state.running)].name`)
	if want := "Running|ContainersNotReady|containers with unready status: [server]|3|Error|guest panicked|sidecar"; got != want {
		t.Errorf("pod %q, want %q", got, want)
	}
}
