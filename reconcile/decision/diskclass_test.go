package decision_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestDiskClassChangeSaid: a VM whose spec names another storage class than its disk's (a
// claim's class cannot change) is told so, with what to do, rather than left waiting on the
// old class with nothing said: Stalled names the class that does not apply, and for a disk
// never bound (which holds no data), WaitingForDisk says how to have it made again in the
// new class. No decision deletes the disk.
func TestDiskClassChangeSaid(t *testing.T) {
	tests := map[string]struct {
		file    string
		message []string // what the status message says, besides the binder's word
		stalled []string // what Stalled says
	}{
		"pending": {file: "class-changed-pending",
			message: []string{`storageclass.storage.k8s.io "fast" not found`, `"standard" does not apply`, "kubectl delete pvc test-vm-rootdisk"},
			stalled: []string{`spec.rootDiskStorageClassName "standard" does not apply to disk test-vm-rootdisk`, `storage class "fast"`,
				"kubectl delete pvc test-vm-rootdisk -n default"}},
		"bound": {file: "class-changed-bound",
			message: []string{"Server test-vm-server is running and ready"},
			stalled: []string{`spec.rootDiskStorageClassName "fast" does not apply to disk test-vm-rootdisk`, `storage class "standard"`,
				"keeps its class and its data"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(claimCases, tc.file+".txtar")
			vm, srv := decidecase.Read(t, file)
			disk := decidecase.Disk(t, file)
			p := casePolicy(t, file)
			plan := p.Decide(decision.Input{VM: vm, Server: srv, Disk: disk, Now: now})
			if plan.Disk != nil {
				t.Errorf("the plan acts on the disk: %+v", plan.Disk)
			}
			if plan.Status == nil {
				t.Fatalf("no status written:\n%s", renderPlan(t, plan))
			}
			for _, s := range tc.message {
				if !strings.Contains(plan.Status.Message, s) {
					t.Errorf("the status message %q does not say %q", plan.Status.Message, s)
				}
			}
			c := plan.Status.Condition(schema.ConditionStalled)
			if c == nil {
				t.Fatalf("not Stalled:\n%s", renderPlan(t, plan))
			}
			for _, s := range tc.stalled {
				if !strings.Contains(c.Message, s) {
					t.Errorf("Stalled %q does not say %q", c.Message, s)
				}
			}
		})
	}
}
