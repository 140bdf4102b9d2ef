package decision_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestStopBesideInvalidSpec: a running VM whose spec turns invalid (a cpu of 0, which another
// group's CRD lets through, or a value stored before a validation rule) keeps its server and
// is Failed (InvalidSpec). Its owner stops it to free the node, as docs/run-strategies.md
// says: under Always `kubectl vm stop` sets Halted, under RerunOnFailure, Once and Manual it
// writes a stop request. The server is deleted all the same (its deletion needs nothing of the
// invalid field), the status stays InvalidSpec and says so, and a second look asks for
// nothing more. Once the server is gone and the spec is fixed, the VM is stopped, not started:
// ServerStopped under Halted, Stopped on request under the others. Each step is decided on
// the VM as the one before wrote it.
func TestStopBesideInvalidSpec(t *testing.T) {
	file := filepath.Join(cases, "active-steady.txtar")
	policy := casePolicy(t, file)
	tests := map[schema.RunStrategy]struct {
		stop    string // the write of kubectl vm stop
		stopped string // the reason once the spec is fixed
	}{
		schema.RunAlways:         {`{"metadata":{"generation":3},"spec":{"action":"inactive"}}`, decision.ReasonServerStopped},
		schema.RunRerunOnFailure: {`{"metadata":{"annotations":{"cloudnative.czs/stopRequestedAt":"2026-06-01T11:59:00.000Z"}}}`, decision.ReasonStopped},
		schema.RunOnce:           {`{"metadata":{"annotations":{"cloudnative.czs/stopRequestedAt":"2026-06-01T11:59:00.000Z"}}}`, decision.ReasonStopped},
		schema.RunManual:         {`{"metadata":{"annotations":{"cloudnative.czs/stopRequestedAt":"2026-06-01T11:59:00.000Z"}}}`, decision.ReasonStopped},
	}
	for rs, tc := range tests {
		t.Run(string(rs), func(t *testing.T) {
			vm, srv := decidecase.Read(t, file)
			w := world{vm: patchVM(t, vm, fmt.Sprintf(`{"spec":{"action":%q}}`, vm.Fields().StrategyWord(rs))), srv: srv}
			decide := func() decision.Plan {
				t.Helper()
				return policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now})
			}
			carry := func(p decision.Plan) { t.Helper(); w = applyPlanWorld(t, w, p) }

			// The spec turns invalid: the server is kept.
			w.vm = patchVM(t, w.vm, `{"metadata":{"generation":2},"spec":{"resource":{"cpu":"0"}}}`)
			p := decide()
			if p.Server != nil {
				t.Fatalf("the spec turned invalid, the server is acted on:\n%s", renderPlan(t, p))
			}
			carry(p)

			// kubectl vm stop: the server is deleted all the same.
			w.vm = patchVM(t, w.vm, tc.stop)
			p = decide()
			if serverOp(p) != decision.DeleteServer {
				t.Fatalf("stopped beside an invalid spec, the server is kept:\n%s", renderPlan(t, p))
			}
			carry(p)
			st := w.vm.Status()
			if st.Phase != schema.PhaseFailed || st.Reason != decision.ReasonInvalidSpec || !strings.Contains(st.Message, "being deleted all the same") {
				t.Errorf("the stop beside an invalid spec is %s (%s) %q; want %s (%s), saying the server is being deleted",
					st.Phase, st.Reason, st.Message, schema.PhaseFailed, decision.ReasonInvalidSpec)
			}
			if again := decide(); !again.Empty() {
				t.Errorf("decided again while the server goes, asks for more:\n%s", renderPlan(t, again))
			}

			// The server gone: nothing more while the spec is invalid.
			w.srv = nil
			carry(decide())
			if st := w.vm.Status(); st.Reason != decision.ReasonInvalidSpec || st.Server != nil {
				t.Errorf("the server gone, the status is %s (%s), server %+v", st.Phase, st.Reason, st.Server)
			}
			if again := decide(); !again.Empty() {
				t.Errorf("decided again once the server is gone, asks for more:\n%s", renderPlan(t, again))
			}

			// The spec fixed: stopped, with no server.
			w.vm = patchVM(t, w.vm, `{"metadata":{"generation":4},"spec":{"resource":{"cpu":2}}}`)
			p = decide()
			if p.Server != nil {
				t.Fatalf("the spec fixed, the stopped VM gets a server:\n%s", renderPlan(t, p))
			}
			carry(p)
			if st := w.vm.Status(); st.Phase != schema.PhaseInactive || st.Reason != tc.stopped {
				t.Errorf("the spec fixed, the status is %s (%s), want %s (%s)", st.Phase, st.Reason, schema.PhaseInactive, tc.stopped)
			}
		})
	}
}
