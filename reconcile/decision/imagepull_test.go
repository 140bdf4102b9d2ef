package decision_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// pullStep is one look at a VM whose server cannot pull its image: what the kubelet says
// then, and when.
type pullStep struct {
	at      time.Duration // after the first look
	message string        // the wait's message, as the pods backend gives it
	backOff bool          // the kubelet backs off (ImagePullBackOff)
}

// pullSteps decides the VM of the case stuck-image-pull-first-error at each step, with the
// server waiting as the step says and no start (as the pods backend gives an image's wait),
// applies each plan, and returns the status after each step and the number of status writes.
// Each step decides from the VM as written and the server alone, as a controller just
// restarted would: nothing of the earlier decisions is kept but in the status.
func pullSteps(t *testing.T, steps []pullStep) (statuses []schema.Status, writes int) {
	t.Helper()
	file := filepath.Join(cases, "stuck-image-pull-first-error.txtar")
	vm, srv := decidecase.Read(t, file)
	p := casePolicy(t, file)
	w := world{vm: vm, srv: srv}
	for _, s := range steps {
		w.srv.Waiting = backend.Waiting{Reason: backend.WaitImage, Message: s.message, BackOff: s.backOff}
		at := now.Add(s.at)
		plan := p.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: at})
		if again := p.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: at}); renderPlan(t, again) != renderPlan(t, plan) {
			t.Fatalf("at +%s, Decide is not deterministic", s.at)
		}
		if plan.Status != nil {
			writes++
		}
		kept := *w.srv
		w = applyPlanWorld(t, w, plan)
		w.srv = &kept
		statuses = append(statuses, w.vm.Status())
	}
	return statuses, writes
}

// TestImagePullStalledFromFirstReport: an image pull is Stalled --stalled-after past the
// first report of its failure, not past the pod's start. A large image pulled for minutes
// before one error the kubelet retries is no reason for GitOps tools to fail a rollout at
// once. The clock is the Ready condition's transition time of the status that first says
// ImagePullFailing: it holds through later writes while the server waits (a new cause, as
// here at +2m), which a clock read from lastUpdateTime would start again, and through
// restarts, since each decision reads it from the status alone.
func TestImagePullStalledFromFirstReport(t *testing.T) {
	const eof = `ErrImagePull: failed to pull and unpack image "registry.example/vm:1": failed to copy: unexpected EOF`
	const denied = `ErrImagePull: failed to pull image "registry.example/vm:1": pull access denied`
	stalledAfter := casePolicy(t, filepath.Join(cases, "stuck-image-pull-first-error.txtar")).StalledAfter
	statuses, _ := pullSteps(t, []pullStep{
		{at: 0, message: eof},
		{at: 2 * time.Minute, message: denied},
		{at: stalledAfter - time.Second, message: denied},
		{at: stalledAfter, message: denied},
	})
	stalled := func(st schema.Status) *schema.Condition { return st.Condition(schema.ConditionStalled) }
	for i, st := range statuses[:3] {
		if st.Reason != "ImagePullFailing" || stalled(st) != nil {
			t.Errorf("step %d: reason %s, Stalled %+v; want ImagePullFailing, not Stalled", i, st.Reason, stalled(st))
		}
	}
	if got := statuses[1].Message; !strings.Contains(got, "pull access denied") {
		t.Errorf("after a new cause, message %q; want it", got)
	}
	last := statuses[3]
	c := stalled(last)
	if c == nil || !strings.Contains(c.Message, "stuck since "+now.Format(time.RFC3339)) {
		t.Fatalf("--stalled-after past the first report: Stalled %+v, want it, stuck since %s", c, now.Format(time.RFC3339))
	}
	if r := last.Condition(schema.ConditionReady); r == nil || !r.LastTransitionTime.Equal(now) {
		t.Errorf("Ready %+v: want its transition time the first report's, %s", r, now)
	}
}

// TestImagePullBackOffKeepsCause: the kubelet alternates between ErrImagePull, whose message
// gives the cause, and ImagePullBackOff, whose message most often only says it waits. While
// the status reports the wait, a back-off keeps the message with the cause: the status is
// written when the cause first shows and when it changes, not at each retry, and does not
// end up showing the message without the cause.
func TestImagePullBackOffKeepsCause(t *testing.T) {
	const denied = `ErrImagePull: failed to pull image "registry.example/vm:1": pull access denied`
	const backOff = `ImagePullBackOff: Back-off pulling image "registry.example/vm:1"`
	const timeout = `ErrImagePull: failed to pull image "registry.example/vm:1": i/o timeout`
	statuses, writes := pullSteps(t, []pullStep{
		{at: 0, message: denied},
		{at: 10 * time.Second, message: backOff, backOff: true},
		{at: 30 * time.Second, message: denied},
		{at: 70 * time.Second, message: backOff, backOff: true},
		{at: 150 * time.Second, message: timeout},
		{at: 160 * time.Second, message: backOff, backOff: true},
	})
	for i, want := range []string{denied, denied, denied, denied, timeout, timeout} {
		if got := statuses[i].Message; !strings.HasSuffix(got, ": "+want) {
			t.Errorf("step %d: message %q; want the cause %q", i, got, want)
		}
	}
	if writes != 2 {
		t.Errorf("%d status writes; want 2: the first cause and the new one", writes)
	}
}
