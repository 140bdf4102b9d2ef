//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFencedLeaderWritesNothing: a leader paused for longer than its Lease (SIGSTOP, as a
// frozen node or heavy swapping would) while it reconciles a VM's change resumes after the
// standby has taken over, and writes nothing it decided on before: its writes are fenced by
// the freshness of its Lease. In the meantime the user set the VM's disk to Retain, the new
// leader released the claim, and the VM was deleted: the claim survives, unowned. Before the
// fence, the resumed leader's next decision round re-adopted the claim for the VM that was
// gone, and the garbage collector deleted it with its volume.
//
// The leader is stopped as soon as its log says it applies a plan for the change, so that it
// resumes in the middle of acting on it; and its log must then say that the fence refused
// what came next: without that, the test would pass with the fence broken whenever the
// pause fell between reconciles.
func TestFencedLeaderWritesNothing(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	const lease = "vm-controller"
	replica := func(id string) *controller {
		return startController(t, ns, "--leader-elect", "--lease-namespace", ns, "--holder-identity", id,
			"--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "500ms")
	}
	a := replica("a")
	eventually(t, time.Minute, func() (bool, string) {
		holder := leaderOf(ns, lease)
		return holder == "a", "lease holder " + holder
	})
	a.waitReady(t)
	b := replica("b")
	b.waitReady(t)
	// A stopped process ignores SIGTERM: the cleanup, which runs before the controllers'
	// (registered earlier), lets it go on first.
	t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) })

	diskVM(t, ns, "vm", "100m", "1Gi", "  rootDiskReclaimPolicy: Delete\n")
	waitPhase(t, ns, "vm", "Active", "", 2*time.Minute)
	claim := claimUID(ns, "vm")
	if claim == "" {
		t.Fatal("the VM has no claim")
	}

	// A change the leader acts on in several rounds (a new server, then the status), and
	// the leader frozen as it does: as soon as its log says it applies a plan for the VM.
	before := len(a.logText())
	kubectl(t, "-n", ns, "patch", vmRes, "vm", "--type=merge", "-p", `{"spec":{"image":"registry.k8s.io/pause:3.8"}}`)
	applying := `msg="Applying plan" vm=` + ns + `/vm `
	for deadline := time.Now().Add(time.Minute); !strings.Contains(a.logText()[before:], applying); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the leader applied no plan for the change within a minute:\n%s", lastLines(a.logText()[before:], 20))
		}
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() (bool, string) {
		state := processState(a.cmd.Process.Pid)
		return state == "T", "process state " + state
	})
	eventually(t, time.Minute, func() (bool, string) {
		holder := leaderOf(ns, lease)
		return holder == "b", "lease holder " + holder
	})
	// The mark is taken once the process is stopped and b leads, seconds later: what the
	// process wrote before it stopped has been read from its pipe by then, so that nothing
	// it logged before the stop is taken for something it did after.
	frozen := len(a.logText())
	eventually(t, 2*time.Minute, func() (bool, string) {
		got := field(ns, "vm/vm", `.status.reason}|{.status.observedGeneration}|{.metadata.generation`)
		parts := strings.Split(got, "|")
		return len(parts) == 3 && parts[0] == "ServerReady" && parts[1] == parts[2], "reason|observedGeneration|generation = " + got
	})
	kubectl(t, "-n", ns, "patch", vmRes, "vm", "--type=merge", "-p", `{"spec":{"rootDiskReclaimPolicy":"Retain"}}`)
	eventually(t, time.Minute, func() (bool, string) {
		got := field(ns, "pvc/vm-rootdisk", `.metadata.ownerReferences}|{.metadata.annotations.cloudnative\.czs/kept`)
		return got == "|true", "claim owners|kept = " + got
	})
	kubectl(t, "-n", ns, "delete", vmRes, "vm", "--wait=false")
	eventually(t, time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", vmRes, "vm")
		return isNotFound(err), fmt.Sprintf("VM still there (%v)", err)
	})
	if got := len(a.logText()); got != frozen {
		t.Fatalf("the stopped leader logged %d bytes while stopped", got-frozen)
	}

	// Resumed, it finds another leader and exits; meanwhile, it writes nothing.
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(t, a); err == nil {
		t.Error("the resumed leader exited 0, want a failure: it lost the Lease")
	}
	// Long enough for the garbage collector to delete a claim owned by the VM that is gone.
	time.Sleep(10 * time.Second)
	got := field(ns, "pvc/vm-rootdisk", `.metadata.uid}|{.metadata.ownerReferences}|{.metadata.deletionTimestamp`)
	if want := claim + "||"; got != want {
		t.Errorf("claim uid|owners|deletionTimestamp = %q, want %q: the Retain claim must survive unowned", got, want)
	}
	resumed := a.logText()[frozen:]
	if strings.Contains(resumed, `msg="Applying plan"`) {
		t.Errorf("the resumed leader applied a plan decided on before its pause:\n%s", resumed)
	}
	if strings.Contains(resumed, "Reconcile failed") {
		t.Errorf("the resumed leader logged failed reconciles, want fenced ones:\n%s", resumed)
	}
	// The fence refused something: a write, or a decision round (reconcile/controller.go).
	if !strings.Contains(resumed, `msg="Writes fenced: the leader Lease was not renewed in time; holding reconciles until it is"`) &&
		!strings.Contains(resumed, `msg="Fenced; will look again"`) {
		t.Errorf("the resumed leader's log says nothing was fenced: the test proves nothing of the fence:\n%s", resumed)
	}
	t.Logf("the resumed leader's log:\n%s", lastLines(resumed, 15))
}

// processState is the state letter of process pid as /proc has it ("T": stopped by a signal),
// or why it cannot be read.
func processState(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return err.Error()
	}
	// pid (comm) state ...: comm may hold spaces and parentheses; the state follows the last ")".
	stat := string(raw)
	i := strings.LastIndex(stat, ")")
	if i < 0 || i+2 >= len(stat) {
		return "unreadable: " + stat
	}
	return stat[i+2 : i+3]
}
