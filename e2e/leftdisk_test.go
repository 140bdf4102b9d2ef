//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestDiskKeptAfterEphemeralSwitch: VMs get their claims under --root-disk claim; the
// controller is then run with --root-disk ephemeral. The reclaim policy still holds for the
// claims made before: Retain set under ephemeral lets go of the claim (no owner reference),
// and deleting that VM keeps it (the same UID, not being deleted, after the garbage collector
// had its chance, DiskRetained); deleting a VM under Delete deletes its claim.
func TestDiskKeptAfterEphemeralSwitch(t *testing.T) {
	t.Parallel()
	ns := testNamespace(t)
	claimMode := startController(t, ns)
	claimMode.waitReady(t)
	diskVM(t, ns, "kept", "1", "1Gi", "")
	diskVM(t, ns, "gone", "1", "1Gi", "")
	waitPhase(t, ns, "kept", "Active", "", 2*time.Minute)
	waitPhase(t, ns, "gone", "Active", "", 2*time.Minute)
	claim := claimUID(ns, "kept")
	for _, vm := range []string{"kept", "gone"} {
		if owner := field(ns, "pvc/"+vm+"-rootdisk", ".metadata.ownerReferences[0].kind"); owner != "VirtualMachine" {
			t.Fatalf("claim of %s owned by %q, want its VM", vm, owner)
		}
	}
	if err := claimMode.stop(t); err != nil {
		t.Fatalf("stop the controller under claim: %v", err)
	}

	startController(t, ns, "--root-disk", "ephemeral").waitReady(t)
	kubectl(t, "-n", ns, "patch", vmRes, "kept", "--type=merge", "-p", `{"spec":{"rootDiskReclaimPolicy":"Retain"}}`)
	eventually(t, time.Minute, func() (bool, string) {
		owners := field(ns, "pvc/kept-rootdisk", ".metadata.ownerReferences")
		return owners == "", "claim owners " + owners
	})
	if n, notes := occurrences(t, ns, "kept", "RetainingDisk"); n != 1 {
		t.Errorf("RetainingDisk occurred %d times (%q), want once", n, notes)
	}

	kubectl(t, "-n", ns, "delete", vmRes, "kept", "gone", "--timeout=2m")
	eventually(t, 2*time.Minute, func() (bool, string) {
		n, notes := occurrences(t, ns, "kept", "DiskRetained")
		return n == 1, fmt.Sprintf("DiskRetained %d: %q", n, notes)
	})
	eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := kubectlErr("-n", ns, "get", "pvc", "gone-rootdisk")
		return isNotFound(err), fmt.Sprintf("claim of the VM deleted under Delete still there: %v", err)
	})
	// The garbage collector has had its chance by the time the other VM's claim is gone: the
	// kept claim is the same, owned by nothing, not being deleted.
	if got := field(ns, "pvc/kept-rootdisk", `.metadata.uid}|{.metadata.ownerReferences}|{.metadata.deletionTimestamp`); got != claim+"||" {
		t.Errorf("kept claim uid|owners|deletion = %q after its VM went under Retain, want %s||", got, claim)
	}
}
