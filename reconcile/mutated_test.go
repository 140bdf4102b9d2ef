package reconcile

import (
	"context"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestApplyDiskCheckMutated: the check before a disk's delete (asDecided) is a write that
// changes nothing, unless an admission policy changes the VM on every update: one that sets
// rootDiskReclaimPolicy: Retain on a VM that names none (a MutatingAdmissionPolicy installed
// after the VM was made) turns the check into a write of Retain. The plan was decided on the
// VM without it: the disk is not deleted, nothing more of the plan is done, and the VM as the
// check returned it is what the loop decides on next.
func TestApplyDiskCheckMutated(t *testing.T) {
	w, owner := deletedWithDisk(t, "Delete", backend.DiskOwned)
	u := w.vm(t, testVM.Namespace, testVM.Name)
	unstructured.RemoveNestedField(u.Object, "spec", "rootDiskReclaimPolicy") // the default: Delete
	if err := w.client.Tracker().Update(vmGVR, u, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
	w.client.PrependReactor("patch", "virtualmachines", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		if p.GetSubresource() != "" {
			return false, nil, nil
		}
		var body map[string]any
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			return true, nil, err
		}
		if cur := w.vm(t, testVM.Namespace, testVM.Name); cur.Object["spec"].(map[string]any)["rootDiskReclaimPolicy"] == nil {
			spec, _ := body["spec"].(map[string]any)
			if spec == nil {
				spec = map[string]any{}
				body["spec"] = spec
			}
			spec["rootDiskReclaimPolicy"] = "Retain"
		}
		raw, err := json.Marshal(body)
		if err != nil {
			return true, nil, err
		}
		return w.patch(k8stesting.NewPatchAction(vmGVR, p.GetNamespace(), p.GetName(), types.MergePatchType, raw))
	})
	vm := cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields)
	seen, _ := w.servers.ObserveDisk(owner)
	plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Disk: seen, Now: now})
	if plan.Disk == nil || plan.Disk.Op != decision.DeleteDisk || plan.Finalizer != decision.RemoveFinalizer {
		t.Fatalf("the plan of a deleted VM under Delete whose server is gone: disk %+v, finalizer %v", plan.Disk, plan.Finalizer)
	}
	out, err := w.diskApplier().applyPlan(context.Background(), decision.Input{VM: vm, Disk: seen}, owner, plan)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	after, _ := w.servers.ObserveDisk(owner)
	if after == nil || after.Deleting {
		t.Fatalf("the disk was deleted though the check's own write made the VM say Retain: %+v", after)
	}
	cur := w.vm(t, testVM.Namespace, testVM.Name)
	if got := cur.Object["spec"].(map[string]any)["rootDiskReclaimPolicy"]; got != "Retain" {
		t.Fatalf("the admission policy did not run: policy %v", got)
	}
	if len(cur.GetFinalizers()) == 0 {
		t.Errorf("the finalizer came off on a plan decided before the VM said Retain")
	}
	if out.last == nil || out.last.rv != cur.GetResourceVersion() {
		t.Errorf("the loop does not decide next on the VM as the check wrote it: %+v, want resourceVersion %s", out.last, cur.GetResourceVersion())
	}
}
