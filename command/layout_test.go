package command

import (
	"context"
	"errors"
	"testing"

	"github.com/cloudnative-czs/vm-controller/crds"
)

// TestLayoutChanged: run fails (the process exits non-zero, its Deployment restarts it) when
// it ended because the CRD no longer gives the field map chosen from it, and only then: a
// signal's end is a clean stop.
func TestLayoutChanged(t *testing.T) {
	changed := &crds.LayoutChanged{CRD: "virtualmachines.other.example.org", Version: "v1alpha1"}

	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(changed)
	err := layoutChanged(ctx)
	if !errors.Is(err, changed) {
		t.Fatalf("layoutChanged = %v, want it to wrap %v", err, changed)
	}
	if want := "the schema of v1alpha1 in CRD virtualmachines.other.example.org no longer gives the field map chosen from it; exiting so that a restart chooses it again"; err.Error() != want {
		t.Errorf("layoutChanged = %q, want %q", err, want)
	}

	signalled, stop := context.WithCancelCause(context.Background())
	stop(nil)
	if err := layoutChanged(signalled); err != nil {
		t.Errorf("layoutChanged after a signal = %v, want nil", err)
	}
}
