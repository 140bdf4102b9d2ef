//go:build e2e

package e2e

import (
	"testing"
	"time"
)

// TestLifecyclePaused: a paused VM whose server pod is deleted gets no replacement (no pod, no
// ServerMissing, its status as it was but the Paused condition) until it is resumed; then it
// gets a new pod and is Active again without the condition. Deleted while paused, it waits with
// its pod, the condition saying why, and goes once resumed. Each "nothing happened" is checked
// after a barrier.
func TestLifecyclePaused(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	c := startController(t, ns, "--workers", "1")
	first := lifecycleVM(t, ns, "held")

	kubectl(t, "annotate", vmRes, "held", "-n", ns, "cloudnative.czs/paused=true")
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := condition(ns, "held", "Paused")
		return got == "True/Paused", "Paused condition " + got
	})
	kubectl(t, "-n", ns, "delete", "pod", "held-server") // waits until the pod is gone
	c.barrier(t)
	if uid, _, _ := podOf(ns, "held"); uid != "" {
		t.Fatalf("pod %s made for a paused VM (the deleted one was %s)", uid, first)
	}
	if got := vmField(ns, "held", ".status.phase") + "/" + vmField(ns, "held", ".status.reason"); got != "Active/ServerReady" {
		t.Errorf("a paused VM's status became %s; want it as it was, Active/ServerReady", got)
	}
	for _, reason := range []string{"ServerMissing", "CreatingServer"} {
		want := 0
		if reason == "CreatingServer" {
			want = 1 // the first pod's
		}
		if n, notes := occurrences(t, ns, "held", reason); n != want {
			t.Errorf("%d %s Events while paused, want %d:\n%s", n, reason, want, notes)
		}
	}

	kubectl(t, "annotate", vmRes, "held", "-n", ns, "cloudnative.czs/paused-")
	eventually(t, 2*time.Minute, func() (bool, string) {
		uid, phase, _ := podOf(ns, "held")
		return uid != "" && uid != first && phase == "Running", "pod " + uid + " " + phase
	})
	waitPhase(t, ns, "held", "Active", "ServerReady", 2*time.Minute)
	if got := condition(ns, "held", "Paused"); got != "" {
		t.Errorf("Paused condition %s once resumed, want none", got)
	}
	eventually(t, 2*time.Minute, func() (bool, string) {
		n, _ := occurrences(t, ns, "held", "Resumed")
		return n == 1, "Resumed Events"
	})

	// Deleted while paused: the VM and its pod stay until it is resumed.
	second, _, _ := podOf(ns, "held")
	kubectl(t, "annotate", vmRes, "held", "-n", ns, "cloudnative.czs/paused=true")
	kubectl(t, "-n", ns, "delete", vmRes, "held", "--wait=false")
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := condition(ns, "held", "Paused")
		return got == "True/DeletionPaused", "Paused condition " + got
	})
	c.barrier(t)
	if uid, _, _ := podOf(ns, "held"); uid != second {
		t.Fatalf("pod %q of a paused VM being deleted, want %s kept", uid, second)
	}
	if got := vmField(ns, "held", ".metadata.name"); got != "held" {
		t.Fatalf("the paused VM went: %q", got)
	}
	kubectl(t, "annotate", vmRes, "held", "-n", ns, "cloudnative.czs/paused-")
	eventually(t, 2*time.Minute, func() (bool, string) {
		uid, _, _ := podOf(ns, "held")
		return vmField(ns, "held", ".metadata.name") == "" && uid == "", "VM or pod left: pod " + uid
	})
}
