package reconcile

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
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
			c := New(Config{Client: w.client, GVR: vmGVR, Fields: w.fields, Backend: w.servers, Policy: policy,
				Recorder: w.recorder, Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now },
				RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Millisecond, time.Millisecond)})
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
