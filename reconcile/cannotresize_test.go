package reconcile

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
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
