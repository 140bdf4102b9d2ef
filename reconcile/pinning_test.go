package reconcile

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// pinningBackend is the memory backend with a disk that answers DiskPinned, counting the
// questions.
type pinningBackend struct {
	*memory.Backend
	why   string
	err   error
	asked int
}

func (b *pinningBackend) DiskPinned(context.Context, backend.Owner) (string, error) {
	b.asked++
	return b.why, b.err
}

// TestPinnedAskedOnRequestOnly: the backend is asked whether the disk is bound to its node
// only for a live VM's migration asked for and not yet acted on, under --root-disk claim; its
// answer reaches the decision on a copy of the disk, and an error is the reconcile's. Under
// ephemeral (where the controller may not read claims and volumes, and a disk left from claim
// is one a new server does not mount) and for a deleted VM it is not asked: an error there
// held the VM's way out for ever.
func TestPinnedAskedOnRequestOnly(t *testing.T) {
	fields := decidecase.Fields(t)
	vmOf := func(annotation, recorded string, more ...string) schema.VirtualMachine {
		raw := `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"vm","namespace":"ns"` + strings.Join(more, "")
		if annotation != "" {
			raw += `,"annotations":{"cloudnative.czs/migrateRequestedAt":"` + annotation + `"}`
		}
		raw += `},"spec":{},"status":{`
		if recorded != "" {
			raw += `"migration":{"requestedAt":"` + recorded + `","phase":"Succeeded"}`
		}
		raw += `}}`
		vm, err := schema.Parse([]byte(raw), fields)
		if err != nil {
			t.Fatal(err)
		}
		return vm
	}
	cached := &backend.Disk{Name: "vm-rootdisk", Phase: backend.DiskBound}
	deleted := `,"deletionTimestamp":"2026-06-01T12:00:00Z","finalizers":["cloudnative.czs/vm-controller"]`
	tests := map[string]struct {
		vm    schema.VirtualMachine
		disk  *backend.Disk
		mode  decision.RootDiskMode
		asked int
	}{
		"no request":               {vmOf("", ""), cached, decision.RootDiskClaim, 0},
		"request recorded":         {vmOf("t1", "t1"), cached, decision.RootDiskClaim, 0},
		"no disk":                  {vmOf("t1", ""), nil, decision.RootDiskClaim, 0},
		"new request":              {vmOf("t2", "t1"), cached, decision.RootDiskClaim, 1},
		"new request, ephemeral":   {vmOf("t2", "t1"), cached, decision.RootDiskEphemeral, 0},
		"new request, VM deleted":  {vmOf("t2", "t1", deleted), cached, decision.RootDiskClaim, 0},
		"new request, zero policy": {vmOf("t2", "t1"), cached, "", 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := &pinningBackend{Backend: memory.New(), why: "its volume pv is a local volume on node-a"}
			policy := decision.DefaultPolicy
			policy.RootDisk = tc.mode
			c := &Controller{cfg: Config{Backend: b, Policy: policy}, opt: optionalOf(b)}
			got, err := c.pinned(context.Background(), tc.vm, backend.Owner{Namespace: "ns", Name: "vm"}, tc.disk)
			if err != nil {
				t.Fatal(err)
			}
			if b.asked != tc.asked {
				t.Fatalf("asked %d times, want %d", b.asked, tc.asked)
			}
			switch {
			case tc.asked == 0 && got != tc.disk:
				t.Errorf("disk %+v, want the cached one as it is", got)
			case tc.asked > 0 && (got == cached || got.Pinned != b.why || cached.Pinned != ""):
				t.Errorf("disk %+v (cached %+v): want a copy that says %q", got, cached, b.why)
			}
		})
	}
	b := &pinningBackend{Backend: memory.New(), err: errors.New("forbidden")}
	c := &Controller{cfg: Config{Backend: b}, opt: optionalOf(b)}
	if _, err := c.pinned(context.Background(), vmOf("t1", ""), backend.Owner{}, cached); err == nil {
		t.Error("an error of the backend is no error of the reconcile")
	}
}
