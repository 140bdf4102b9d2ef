package decision_test

import (
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestKstatus reads the VMs the decision leaves behind as the GitOps tools do, with kstatus
// itself (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute on the object as unstructured):
// each golden case's plan is carried out, and the VM it leaves is Current when its server
// runs as asked, InProgress while the controller works toward the spec, Failed when it
// cannot get there without a change, Terminating while it is deleted.
func TestKstatus(t *testing.T) {
	tests := map[string]kstatus.Status{
		"active-steady":                 kstatus.CurrentStatus,
		"kstatus-ready":                 kstatus.CurrentStatus,
		"status-node-ip":                kstatus.CurrentStatus,
		"active-new-generation":         kstatus.CurrentStatus,
		"create-new":                    kstatus.InProgressStatus,
		"pending-steady":                kstatus.InProgressStatus,
		"stuck-unschedulable":           kstatus.InProgressStatus,
		"stuck-image-pull":              kstatus.InProgressStatus,
		"stuck-scheduled":               kstatus.InProgressStatus,
		"failed-backoff-wait":           kstatus.InProgressStatus,
		"inactive-with-server":          kstatus.InProgressStatus,
		"cpu-resize-requested":          kstatus.InProgressStatus,
		"kstatus-invalid-fixed-stalled": kstatus.InProgressStatus,
		"stuck-unschedulable-stalled":   kstatus.FailedStatus,
		"stuck-image-pull-stalled":      kstatus.FailedStatus,
		"invalid-steady":                kstatus.FailedStatus,
		"invalid-memory-zero":           kstatus.FailedStatus,
		"claim/conflict":                kstatus.FailedStatus,
		"claim/shrink-refused":          kstatus.FailedStatus,
		"delete-with-server":            kstatus.TerminatingStatus,
		// A VM stopped as asked carries no Ready condition (kstatus would read Ready False as
		// InProgress, and a GitOps tool would wait on a halted VM for ever): Current, as are
		// the run strategies' stopped VMs and a VM of an earlier release once its Ready goes.
		"inactive-steady":                kstatus.CurrentStatus,
		"inactive-ready-dropped":         kstatus.CurrentStatus,
		"strategy-once-stopped-steady":   kstatus.CurrentStatus,
		"strategy-manual-stopped-steady": kstatus.CurrentStatus,
		"strategy-once-failed":           kstatus.FailedStatus,
		"strategy-rerun-failed":          kstatus.InProgressStatus,
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(cases, filepath.FromSlash(name)+".txtar")
			vm, srv := decidecase.Read(t, file)
			disk := decidecase.Disk(t, file)
			policy := casePolicy(t, file)
			w := applyPlan(t, vm, srv, disk, policy.Decide(decision.Input{VM: vm, Server: srv, Disk: disk, Now: now}))
			if got := compute(t, w.vm); got.Status != want {
				t.Errorf("kstatus %s (%s), want %s; status:\n%s", got.Status, got.Message, want, w.vm.JSON())
			}
		})
	}
	// A server the backend refused (a quota): Failed, not retried in a storm.
	file := filepath.Join(cases, "create-new.txtar")
	vm, _ := decidecase.Read(t, file)
	plan := casePolicy(t, file).Rejected(decision.Input{VM: vm, Now: now}, `pods "test-vm-server" is forbidden: exceeded quota: compute`)
	w := applyPlan(t, vm, nil, nil, plan)
	if got := compute(t, w.vm); got.Status != kstatus.FailedStatus {
		t.Errorf("a refused server: kstatus %s (%s), want Failed", got.Status, got.Message)
	}
	if c := w.vm.Status().Condition(schema.ConditionStalled); c == nil || c.Reason != decision.ReasonServerRejected {
		t.Errorf("a refused server: Stalled %+v, want reason %s", c, decision.ReasonServerRejected)
	}
}

// compute is kstatus's reading of vm, decoded as client-go decodes an object (integers as
// int64, which kstatus's accessors insist on).
func compute(t *testing.T, vm schema.VirtualMachine) *kstatus.Result {
	t.Helper()
	var obj map[string]any
	if err := utiljson.Unmarshal(vm.JSON(), &obj); err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
