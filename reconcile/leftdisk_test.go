package reconcile

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestControllerEphemeralLeftDisk: a controller under --root-disk ephemeral still observes the
// disk a VM has from --root-disk claim, and takes it out with the VM as the reclaim policy
// says: under Retain the disk stays, let go of (no owner, so that the garbage collector does
// not delete it with the VM); under Delete it is deleted, as under claim. A VM without a
// disk goes with nothing asked of disks.
func TestControllerEphemeralLeftDisk(t *testing.T) {
	tests := map[string]struct {
		policy  string            // the VM's reclaim policy
		owner   backend.DiskOwner // its disk's owner as the controller finds it
		events  string            // the reasons recorded
		deleted bool              // the disk is deleted
	}{
		"retain, owned": {policy: "Retain", owner: backend.DiskOwned, events: decision.ReasonDiskRetained},
		"retain, kept":  {policy: "Retain", owner: backend.DiskKept, events: decision.ReasonDiskRetained},
		"delete":        {policy: "Delete", owner: backend.DiskOwned, events: decision.ReasonDeletingDisk, deleted: true},
		"no disk":       {policy: "Retain"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w, owner := deletedWithDisk(t, tc.policy, tc.owner)
			if tc.owner == "" {
				w.servers.SetDisk(owner, nil)
			}
			policy := decision.DefaultPolicy
			policy.RootDisk = decision.RootDiskEphemeral
			c := New(Config{VMs: w.source(), Backend: w.servers, Policy: policy, Retry: quickRetry(),
				Report: w.report(nil), Now: func() time.Time { return now }})
			ctx := start(t, c)
			c.processNextItem(ctx)

			if fs := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(); len(fs) != 0 {
				t.Errorf("finalizers %v, want none", fs)
			}
			if got := strings.Join(w.reasons(), ","); got != tc.events {
				t.Errorf("events %q, want %q", got, tc.events)
			}
			d, _ := w.servers.ObserveDisk(owner)
			switch {
			case tc.owner == "" && d != nil:
				t.Errorf("disk %+v made for a VM that had none", d)
			case tc.owner == "":
			case d == nil || d.ID != "d1":
				t.Errorf("disk %+v, want d1", d)
			case d.Deleting != tc.deleted:
				t.Errorf("disk deleting %v, want %v", d.Deleting, tc.deleted)
			case !tc.deleted && d.Owner != backend.DiskKept:
				t.Errorf("disk owned %s after the VM is deleted under Retain, want %s", d.Owner, backend.DiskKept)
			}
		})
	}
}

// pinningRefused answers DiskPinned as the pods backend does under --root-disk ephemeral's
// permissions (no get of claims, nothing of volumes).
type pinningRefused struct{ *memory.Backend }

func (pinningRefused) DiskPinned(context.Context, backend.Owner) (backend.Pin, error) {
	return backend.Pin{}, apierrors.NewForbidden(k8sschema.GroupResource{Resource: "persistentvolumeclaims"}, "test-vm-rootdisk", nil)
}

// TestControllerEphemeralMigrateRequestDeleted: under --root-disk ephemeral, a deleted VM with
// a disk left from claim and a migrate request it was not acted on goes as its reclaim policy
// says. Whether a disk is pinned to its node is not asked (the permissions of ephemeral do not
// let the controller read claims and volumes): asking failed every reconcile, and the VM stayed
// Terminating for ever.
func TestControllerEphemeralMigrateRequestDeleted(t *testing.T) {
	w, _ := deletedWithDisk(t, "Delete", backend.DiskOwned)
	u := w.vm(t, testVM.Namespace, testVM.Name)
	u.SetAnnotations(map[string]string{schema.AnnotationMigrateRequestedAt: "2026-06-01T11:58:00Z"})
	if err := w.client.Tracker().Update(vmGVR, u, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	c := New(Config{VMs: w.source(), Backend: pinningRefused{w.servers}, Policy: policy, Retry: quickRetry(),
		Report: w.report(nil), Now: func() time.Time { return now }})
	ctx := start(t, c)
	for range 3 {
		c.processNextItem(ctx)
	}
	if fs := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(); len(fs) != 0 {
		t.Errorf("finalizers %v after 3 reconciles, want none: the VM has no server and its disk goes with it", fs)
	}
	if got := w.reasons(); !slices.Contains(got, decision.ReasonDeletingDisk) {
		t.Errorf("events %v, want %s", got, decision.ReasonDeletingDisk)
	}
}
