package decision_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// byHand is the command the Events of a layout without a reclaim policy give for the claim
// of the cases' VM: the one way to have a kept disk gone where no VM can name Delete.
const byHand = "kubectl delete pvc test-vm-rootdisk -n default"

// withoutReclaim is the cases' layout without spec.rootDiskReclaimPolicy, as a CRD of an
// earlier release, or a field map that maps no reclaim policy, has it.
func withoutReclaim(t *testing.T) schema.Fields {
	t.Helper()
	f, left := decidecase.Fields(t).Without(map[string]bool{"spec.rootDiskReclaimPolicy": true})
	if len(left) != 1 || f.RootDiskReclaimPolicy != "" {
		t.Fatalf("layout without the reclaim policy: left out %v", left)
	}
	return f
}

// TestLayoutWithoutReclaim: in a layout without a reclaim policy, the claim cases of a VM
// that names none are decided as in the built-in layout: a disk the VM owns goes with it, and
// one kept already (an earlier VM's, one marked kept, one that lost its owner reference while
// the VM lived) stays kept, the safe side. The Events that keep a disk do not send the user to
// name Delete, which the resource cannot hold, nor say the disk stays kept "unless it says
// Delete": they say so, and give the claim's deletion by hand. The plan, carried out, leaves
// nothing more to do.
func TestLayoutWithoutReclaim(t *testing.T) {
	without := withoutReclaim(t)
	for name, tc := range map[string]struct {
		op     decision.DiskOp
		reason string
	}{
		"adopt":                  {op: decision.AdoptDisk, reason: decision.ReasonAdoptingDisk},
		"adopt-marked":           {op: decision.AdoptDisk, reason: decision.ReasonAdoptingDisk},
		"retain-unset-unmarked":  {op: decision.ReleaseDisk, reason: decision.ReasonRetainingDisk},
		"delete-kept-unset":      {op: decision.ReleaseDisk, reason: decision.ReasonDiskRetained},
		"ephemeral-retain-unset": {op: decision.ReleaseDisk, reason: decision.ReasonRetainingDisk},
		"delete-orphaned-unset":  {op: decision.DeleteDisk, reason: decision.ReasonDeletingDisk},
		"delete-disk":            {op: decision.DeleteDisk, reason: decision.ReasonDeletingDisk},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(claimCases, name+".txtar")
			builtin, srv := decidecase.Read(t, file)
			if spec, _ := builtin.Spec(); spec.ReclaimPolicySet {
				t.Fatalf("%s: the VM names a reclaim policy: not a case of one that names none", file)
			}
			raw, _ := decidecase.Input(t, file)
			vm, err := schema.Parse(raw, without)
			if err != nil {
				t.Fatal(err)
			}
			disk := decidecase.Disk(t, file)
			policy := casePolicy(t, file)
			plan := policy.Decide(decision.Input{VM: vm, Server: srv, Disk: disk, Now: now})
			want := policy.Decide(decision.Input{VM: builtin, Server: srv, Disk: disk, Now: now})
			if plan.Disk == nil || want.Disk == nil {
				t.Fatalf("no disk action:\n%s\nin the built-in layout:\n%s", renderPlan(t, plan), renderPlan(t, want))
			}
			a := plan.Disk
			if a.Op != tc.op || a.Event.Reason != tc.reason {
				t.Errorf("disk %s with %s, want %s with %s", a.Op, a.Event.Reason, tc.op, tc.reason)
			}
			if a.Op != want.Disk.Op || (a.Spec == nil) != (want.Disk.Spec == nil) || a.Spec != nil && a.Spec.Keep != want.Disk.Spec.Keep {
				t.Errorf("disk %s %+v; in the built-in layout %s %+v", a.Op, a.Spec, want.Disk.Op, want.Disk.Spec)
			}
			msg := a.Event.Message
			for _, never := range []string{"kubectl patch", "rootDiskReclaimPolicy"} {
				if strings.Contains(msg, never) {
					t.Errorf("the Event says %q, which the layout cannot hold: %s", never, msg)
				}
			}
			kept := a.Op != decision.DeleteDisk
			if got := strings.Contains(msg, byHand); got != kept {
				t.Errorf("the Event gives %q: %v, want %v: %s", byHand, got, kept, msg)
			}
			if kept && !strings.Contains(msg, "has no reclaim policy field, so it cannot say Delete") {
				t.Errorf("the Event does not say the VM cannot say Delete: %s", msg)
			}
			if kept && strings.Contains(msg, "unless") {
				t.Errorf("the Event says the disk could go unless something, in a layout that cannot say it: %s", msg)
			}

			w := applyPlanWorld(t, world{vm: vm, srv: srv, disk: disk}, plan)
			if w.gone {
				return
			}
			if next := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Gone: w.lastGone, Disk: w.disk, Budget: w.budget, Now: now}); !next.Empty() {
				t.Errorf("deciding again after applying the plan asks for more:\n%s", renderPlan(t, next))
			}
		})
	}
}

// TestDiskReleaseRefusedWithoutReclaim: a deleted VM whose kept disk's release is refused
// tells, in a layout without a reclaim policy, to delete the claim rather than to set a
// policy to Delete the resource has no field for; in the built-in layout it tells to set it.
func TestDiskReleaseRefusedWithoutReclaim(t *testing.T) {
	file := filepath.Join(claimCases, "delete-kept-unset.txtar")
	builtin, _ := decidecase.Read(t, file)
	raw, _ := decidecase.Input(t, file)
	vm, err := schema.Parse(raw, withoutReclaim(t))
	if err != nil {
		t.Fatal(err)
	}
	const setDelete = "set the VM's reclaim policy to Delete"
	for name, tc := range map[string]struct {
		vm          schema.VirtualMachine
		says, never string
	}{
		"built-in":        {builtin, setDelete, byHand},
		"without reclaim": {vm, byHand, "set the VM's reclaim policy"},
	} {
		t.Run(name, func(t *testing.T) {
			p := decision.DefaultPolicy.DiskReleaseRefused(decision.Input{VM: tc.vm, Disk: &backend.Disk{Name: "test-vm-rootdisk"}, Now: now}, "forbidden")
			if p.Status == nil || p.Status.Reason != decision.ReasonDiskReleaseRefused {
				t.Fatalf("not DiskReleaseRefused:\n%s", renderPlan(t, p))
			}
			msg := p.Status.Message
			if !strings.Contains(msg, tc.says) || strings.Contains(msg, tc.never) {
				t.Errorf("message %q: want %q, not %q", msg, tc.says, tc.never)
			}
		})
	}
}
