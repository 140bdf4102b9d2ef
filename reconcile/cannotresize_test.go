package reconcile

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// noResizer is the memory backend seen through backend.Backend alone: a backend that cannot
// resize a server in place (no backend.Resizer).
type noResizer struct{ backend.Backend }

// TestBackendCannotResize: over a backend without backend.Resizer, a change of a running
// server's cpu replaces the server, whatever the policy given to New says of resizing. Told the
// backend could resize, the decision asked for a resize that applying refuses as an error, and
// the VM was retried for ever without its new size.
func TestBackendCannotResize(t *testing.T) {
	w := newWorld(t, "cpu-resize-requested")
	vm := w.view(t, "cpu-resize-requested")
	_, srv := decidecase.Read(t, caseFile("cpu-resize-requested"))
	owner := ownerOf(vm)
	w.servers.Set(owner, srv)
	r := &results{}
	policy := serverPolicy // CanResize true, as run's flags give it
	c := New(Config{VMs: w.source(), Backend: noResizer{w.servers}, Policy: policy, Report: w.report(r),
		Now: func() time.Time { return now }})
	ctx := start(t, c)
	c.processNextItem(ctx)

	if got := r.last(); got != ResultSuccess && got != ResultRequeue {
		t.Errorf("reconcile: %s, want the plan carried out", got)
	}
	if s, _ := w.servers.Observe(owner); s == nil || !s.Deleting || s.Spec.CPU.String() != srv.Spec.CPU.String() {
		t.Errorf("server %v, want it going to be replaced, not resized", describe(s))
	}
	evs := w.events()
	if !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Normal ReplacingServer ") }) {
		t.Errorf("events %q, want a ReplacingServer", evs)
	}
}

// describe is what the test says of a server: whether it is going, and its cpu.
func describe(s *backend.Server) string {
	if s == nil {
		return "none"
	}
	return "deleting=" + strconv.FormatBool(s.Deleting) + " cpu=" + s.Spec.CPU.String()
}

// TestBackendKeepsNoDisks: over a backend without backend.Disks, New gives each server a root
// disk of its own (RootDiskEphemeral), whatever the policy says, and warns once; over one with
// disks, the policy's mode stands. Told the backend kept disks, a decision would plan a disk
// that applying has nowhere to make.
func TestBackendKeepsNoDisks(t *testing.T) {
	w := newWorld(t, "cpu-resize-requested")
	for name, b := range map[string]backend.Backend{"memory": w.servers, "no disks": noResizer{w.servers}} {
		t.Run(name, func(t *testing.T) {
			var logs strings.Builder
			policy := serverPolicy
			policy.RootDisk = decision.RootDiskClaim
			c := New(Config{VMs: w.source(), Backend: b, Policy: policy, Report: Report{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
			want, warned := decision.RootDiskClaim, false
			if name == "no disks" {
				want, warned = decision.RootDiskEphemeral, true
			}
			if got := c.cfg.Policy.RootDisk; got != want {
				t.Errorf("root disk %q, want %q", got, want)
			}
			if got := strings.Contains(logs.String(), "The backend keeps no disks"); got != warned {
				t.Errorf("warned %t, want %t: %s", got, warned, logs.String())
			}
		})
	}
}
