package reconcile

import (
	"context"
	"errors"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
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
// only for a migration asked for and not yet acted on; its answer reaches the decision on a
// copy of the disk, and an error is the reconcile's.
func TestPinnedAskedOnRequestOnly(t *testing.T) {
	fields := decidecase.Fields(t)
	vmOf := func(annotation, recorded string) schema.VirtualMachine {
		raw := `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"vm","namespace":"ns"`
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
	tests := map[string]struct {
		vm    schema.VirtualMachine
		disk  *backend.Disk
		asked int
	}{
		"no request":       {vmOf("", ""), cached, 0},
		"request recorded": {vmOf("t1", "t1"), cached, 0},
		"no disk":          {vmOf("t1", ""), nil, 0},
		"new request":      {vmOf("t2", "t1"), cached, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := &pinningBackend{Backend: memory.New(), why: "its volume pv is a local volume on node-a"}
			c := &Controller{cfg: Config{Backend: b}}
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
	c := &Controller{cfg: Config{Backend: b}}
	if _, err := c.pinned(context.Background(), vmOf("t1", ""), backend.Owner{}, cached); err == nil {
		t.Error("an error of the backend is no error of the reconcile")
	}
}
