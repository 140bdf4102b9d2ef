//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPodSecurityRestricted runs VMs in a namespace that enforces the restricted Pod Security
// Standard (pod-security.kubernetes.io/enforce=restricted). Without --server-pod-security the
// API server refuses the server pod, and the VM is Failed, ServerRejected, quoting Pod
// Security admission and naming the flag; the controller started again with
// --server-pod-security restricted makes a pod the admission takes, and the VM becomes Active.
// Started once more without the flag, the controller leaves that server running: the setting
// is no part of the server's spec, and a flag flipped replaces no server.
//
// The cluster's nodes are kwok's, which run no container: runAsNonRoot, which the kubelet
// checks against the image's user as it starts the container, is checked here only by the
// admission, as a field the pod must set.
func TestPodSecurityRestricted(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	kubectl(t, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
	vm := func(name string) string {
		return fmt.Sprintf("apiVersion: cloudnative.czs/v1alpha1\nkind: VirtualMachine\nmetadata: {name: %s, namespace: %s}\nspec: {resource: {cpu: 10m, memory: 16Mi, rootDisk: 100Mi}}\n", name, ns)
	}

	c := startController(t, ns, "--workers", "1")
	apply(t, vm("vm"))
	waitPhase(t, ns, "vm", "Failed", "ServerRejected", 3*time.Minute)
	msg := vmField(ns, "vm", ".status.message")
	for _, want := range []string{`The server was refused: create pod vm-server: rejected: pods "vm-server" is forbidden: violates PodSecurity "restricted:latest": `,
		"allowPrivilegeEscalation != false", "unrestricted capabilities", "runAsNonRoot != true", "seccompProfile",
		"; run the controller with --server-pod-security=restricted to make server pods that the restricted Pod Security Standard admits (docs/deploying.md)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("status.message %q does not say %q", msg, want)
		}
	}
	if err := c.stop(t); err != nil {
		t.Fatalf("the controller without the setting: %v", err)
	}

	// With the setting, the refused VM gets its server, and a new one is made so at once.
	c = startController(t, ns, "--workers", "1", "--server-pod-security", "restricted")
	apply(t, vm("new"))
	for _, name := range []string{"vm", "new"} {
		waitPhase(t, ns, name, "Active", "ServerReady", 3*time.Minute)
		got := kubectl(t, "-n", ns, "get", "pod", name+"-server", "-o", `jsonpath={.spec.securityContext.runAsNonRoot} {.spec.securityContext.seccompProfile.type} `+
			`{.spec.containers[0].securityContext.allowPrivilegeEscalation} {.spec.containers[0].securityContext.capabilities.drop}`)
		if want := `true RuntimeDefault false ["ALL"]`; got != want {
			t.Errorf("pod %s-server: runAsNonRoot, seccomp profile, allowPrivilegeEscalation, capabilities dropped: %q, want %q", name, got, want)
		}
	}
	server := field(ns, "pod/vm-server", ".metadata.uid")
	if err := c.stop(t); err != nil {
		t.Fatalf("the controller with the setting: %v", err)
	}

	// Without it again: the server made with it runs on.
	c = startController(t, ns, "--workers", "1")
	c.barrier(t)
	if got := field(ns, "pod/vm-server", ".metadata.uid"); got != server {
		t.Errorf("the server was replaced when the setting was dropped: pod %s, was %s", got, server)
	}
	waitPhase(t, ns, "vm", "Active", "ServerReady", time.Minute)
}
