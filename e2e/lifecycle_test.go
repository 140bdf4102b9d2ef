//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The lifecycle tests drive a VM through kubectl and watch its server pod: a resize in place
// keeps the pod (same UID), a refused one falls back by --resize, and a restart annotation
// replaces the pod exactly once. The local cluster's stand-in kubelet (cluster/resizer)
// answers the resizes; the pod annotation resize.kwok.cloudnative.czs/answer forces its answer.

const vmRes = "virtualmachines.cloudnative.czs"

// lifecycleVM creates an Active VM of cpu 1 and waits for it to be Active; it returns the
// server pod's UID.
func lifecycleVM(t *testing.T, ns, name string) string {
	t.Helper()
	apply(t, `apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: `+name+`, namespace: `+ns+`}
spec:
  action: active
  resource: {cpu: 1, memory: 64Mi, rootDisk: 1Gi}
`)
	waitPhase(t, ns, name, "Active", "", 2*time.Minute)
	waitResizable(t, ns, name+"-server")
	return podUID(t, ns, name)
}

// waitResizable waits until pod's node reports its container's resources, without which the
// API server refuses a resize of the running pod (the node does not support it) and the
// controller, rightly, replaces the server instead. A kubelet reports them as it starts the
// container; on kwok's nodes the local cluster's stand-in (cluster/resizer) does so a moment
// after kwok marks the pod running, and a test that resizes in place waits for that moment.
func waitResizable(t *testing.T, ns, pod string) {
	t.Helper()
	eventually(t, 2*time.Minute, func() (bool, string) {
		cpu, _ := kubectlErr("get", "pod", pod, "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].resources.limits.cpu}")
		return cpu != "", "pod " + pod + " without the resources of its container in its status"
	})
}

func podUID(t *testing.T, ns, name string) string {
	t.Helper()
	return kubectl(t, "get", "pod", name+"-server", "-n", ns, "-o", "jsonpath={.metadata.uid}")
}

// condition is the VM's condition of type typ as "Status/Reason", or "" when it has none.
func condition(ns, name, typ string) string {
	out, _ := kubectlErr("get", vmRes, name, "-n", ns, "-o",
		fmt.Sprintf(`jsonpath={.status.conditions[?(@.type=="%s")].status}/{.status.conditions[?(@.type=="%s")].reason}`, typ, typ))
	if out == "/" {
		return ""
	}
	return out
}

// TestLifecycleResizeInPlace: kubectl patch cpu 1 -> 2 keeps the pod's UID, and the VM ends
// Active with the new cpu in effect and no Resizing condition.
func TestLifecycleResizeInPlace(t *testing.T) {
	ns := testNamespace(t)
	startController(t, ns).waitReady(t)
	uid := lifecycleVM(t, ns, "grow")
	kubectl(t, "patch", vmRes, "grow", "-n", ns, "--type", "merge", "-p", `{"spec":{"resource":{"cpu":"2"}}}`)
	eventually(t, 2*time.Minute, func() (bool, string) {
		cpu, _ := kubectlErr("get", "pod", "grow-server", "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].resources.limits.cpu}")
		c := condition(ns, "grow", "Resizing")
		return cpu == "2" && c == "", "cpu in effect " + cpu + ", Resizing " + c
	})
	waitPhase(t, ns, "grow", "Active", "", 2*time.Minute)
	if got := podUID(t, ns, "grow"); got != uid {
		t.Errorf("pod UID %s after the resize, want %s (the same pod)", got, uid)
	}
}

// TestLifecycleInfeasible: a resize the node answers Infeasible replaces the pod under
// --resize in-place, and under manual keeps it with RestartRequired=ResizeInfeasible.
func TestLifecycleInfeasible(t *testing.T) {
	for _, mode := range []string{"in-place", "manual"} {
		t.Run(mode, func(t *testing.T) {
			ns := testNamespace(t)
			startController(t, ns, "--resize", mode).waitReady(t)
			uid := lifecycleVM(t, ns, "big")
			kubectl(t, "annotate", "pod", "big-server", "-n", ns, "resize.kwok.cloudnative.czs/answer=Infeasible")
			kubectl(t, "patch", vmRes, "big", "-n", ns, "--type", "merge", "-p", `{"spec":{"resource":{"cpu":"2"}}}`)
			if mode == "manual" {
				eventually(t, 2*time.Minute, func() (bool, string) {
					c := condition(ns, "big", "RestartRequired")
					return c == "True/ResizeInfeasible", c
				})
				if got := podUID(t, ns, "big"); got != uid {
					t.Errorf("pod UID %s under manual, want %s (kept)", got, uid)
				}
				return
			}
			eventually(t, 2*time.Minute, func() (bool, string) {
				got, _ := kubectlErr("get", "pod", "big-server", "-n", ns, "-o", "jsonpath={.metadata.uid}/{.spec.containers[0].resources.limits.cpu}")
				return !strings.HasPrefix(got, uid) && strings.HasSuffix(got, "/2"), got
			})
			waitPhase(t, ns, "big", "Active", "", 2*time.Minute)
		})
	}
}

// TestLifecycleRestart: a new restartedAt gives exactly one new pod, and a controller restart
// after it does not give a second.
func TestLifecycleRestart(t *testing.T) {
	ns := testNamespace(t)
	c := startController(t, ns)
	c.waitReady(t)
	uid := lifecycleVM(t, ns, "again")
	kubectl(t, "annotate", vmRes, "again", "-n", ns, "cloudnative.czs/restartedAt=2026-06-01T12:00:00Z", "--overwrite")
	var second string
	eventually(t, 2*time.Minute, func() (bool, string) {
		got, _ := kubectlErr("get", "pod", "again-server", "-n", ns, "-o", "jsonpath={.metadata.uid}")
		rec, _ := kubectlErr("get", vmRes, "again", "-n", ns, "-o", "jsonpath={.status.restartedAt}")
		second = got
		return got != "" && got != uid && rec == "2026-06-01T12:00:00Z", got + " restartedAt " + rec
	})
	waitPhase(t, ns, "again", "Active", "", 2*time.Minute)
	if err := c.stop(t); err != nil {
		t.Fatal(err)
	}
	c2 := startController(t, ns, "--workers", "1")
	c2.waitReady(t)
	c2.barrier(t)
	waitPhase(t, ns, "again", "Active", "", 2*time.Minute)
	if got := podUID(t, ns, "again"); got != second {
		t.Errorf("pod UID %s after a controller restart, want %s: the restart was carried out twice", got, second)
	}
}
