package reconcile

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestRejectedReportsBoundDisk: a VM whose claim was made and bound since its status said
// Pending, and whose server the backend refuses (ServerRejected, tried again every minute),
// reports the disk Bound in the refusal's status, not Pending for as long as the refusals last.
func TestRejectedReportsBoundDisk(t *testing.T) {
	w := newWorld(t, "create-new")
	vm := w.view(t, "create-new")
	// The disk made, its status written (Pending), then bound.
	plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Now: now})
	if _, err := w.diskApplier().apply(context.Background(), vm, ownerOf(vm), nil, nil, plan); err != nil {
		t.Fatal(err)
	}
	vm = cachedView(t, w.vm(t, "default", "test-vm"), w.fields)
	disk := &backend.Disk{Name: "test-vm-rootdisk", ID: "d1", Version: "2", Phase: backend.DiskBound, Requested: resource.MustParse("40G"),
		Capacity: resource.MustParse("40G"), Owner: backend.DiskOwned}
	w.servers.SetDisk(ownerOf(vm), disk)
	w.servers.FailCreate(fmt.Errorf("pods is forbidden: no PriorityClass with name gold was found: %w", backend.ErrRejected))
	seen, _ := w.servers.ObserveDisk(ownerOf(vm))
	plan = decision.DefaultPolicy.Decide(decision.Input{VM: vm, Disk: seen, Now: now})
	if _, err := w.diskApplier().apply(context.Background(), vm, ownerOf(vm), nil, seen, plan); err != nil {
		t.Fatal(err)
	}
	if got := status(t, w, testVM, "rootDisk", "phase"); got != "Bound" || status(t, w, testVM, "reason") != decision.ReasonServerRejected {
		t.Errorf("after the refusal: %s, rootDisk phase %q; want ServerRejected, Bound", status(t, w, testVM, "reason"), got)
	}
}
