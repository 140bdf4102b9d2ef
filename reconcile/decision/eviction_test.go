package decision_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// holdsNext reports whether next, decided on what plan left, is the one that says the budget
// plan made or adopted holds a drain under way (the condition EvictionBlocked, with the
// Warning DrainBlocked), and nothing else: the plan that asks for a budget does not claim it,
// for the API server may refuse it (eviction.go: budgetHolds). The other plan that may follow
// another, besides growsNext.
func holdsNext(plan, next decision.Plan) bool {
	made := plan.Budget != nil && (plan.Budget.Op == decision.CreateBudget || plan.Budget.Op == decision.AdoptBudget)
	if !made || next.Finalizer != "" || next.Disk != nil || next.Server != nil || next.Budget != nil || next.Status == nil {
		return false
	}
	if c := next.Status.Condition(decision.ConditionEvictionBlocked); c == nil || c.Status != schema.ConditionTrue {
		return false
	}
	return !slices.ContainsFunc(next.Events, func(e decision.Event) bool { return e.Reason != decision.ReasonDrainBlocked })
}

// applyBudget carries out a plan's budget action on the in-memory backend, which holds the
// budget observed (have), and returns the budget as it is afterwards. A plan that makes a
// budget the VM has, adopts one that is not Unowned, records the kind on one that is not the
// VM's or records it already, or deletes one that is not the VM's, fails the test.
func applyBudget(t *testing.T, b *memory.Backend, owner backend.Owner, have *backend.Budget, act *decision.BudgetAction) *backend.Budget {
	t.Helper()
	if have != nil {
		b.SetBudget(owner, have)
	}
	if act != nil {
		var err error
		switch act.Op {
		case decision.CreateBudget:
			if have != nil {
				t.Fatalf("plan creates a budget while the VM has one")
			}
			_, err = b.CreateBudget(context.Background(), owner)
		case decision.AdoptBudget:
			if have == nil || !have.Unowned {
				t.Fatalf("plan adopts a budget %+v, which is not one to adopt", have)
			}
			_, err = b.AdoptBudget(context.Background(), owner)
		case decision.RecordBudgetKind:
			if have == nil || have.Unowned || !have.KindUnrecorded {
				t.Fatalf("plan records the kind on a budget %+v, which is not the VM's or records it already", have)
			}
			_, err = b.RecordBudgetKind(context.Background(), owner)
		case decision.DeleteBudget:
			if have == nil || have.Unowned {
				t.Fatalf("plan deletes a budget %+v, which is not the VM's", have)
			}
			err = b.DeleteBudget(context.Background(), owner)
		default:
			t.Fatalf("unknown budget operation %q", act.Op)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.ObserveBudget(owner)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// evictionEvents checks the Events of the eviction strategies' conditions in a plan whose
// status goes from current to st, and returns evs without them: ServerMoved, Normal, once,
// exactly when Moving goes because the server is ready; DrainBlocked, a Warning, once, exactly
// when EvictionBlocked comes, and on a server that runs on a cordoned node.
func evictionEvents(fail func(string, ...any), current, st schema.Status, srv *backend.Server, evs []decision.Event) []decision.Event {
	for _, c := range []struct {
		reason string
		typ    string
		want   bool
	}{
		{decision.ReasonServerMoved, corev1.EventTypeNormal, current.Condition(decision.ConditionMoving) != nil &&
			st.Condition(decision.ConditionMoving) == nil && srv != nil && srv.State == backend.StateReady && !srv.Deleting},
		{decision.ReasonDrainBlocked, corev1.EventTypeWarning, current.Condition(decision.ConditionEvictionBlocked) == nil &&
			st.Condition(decision.ConditionEvictionBlocked) != nil},
	} {
		i := slices.IndexFunc(evs, func(e decision.Event) bool { return e.Reason == c.reason })
		switch {
		case c.want && i < 0:
			fail("no %s event", c.reason)
		case !c.want && i >= 0:
			fail("a %s event without its condition's change", c.reason)
		case i >= 0:
			if evs[i].Type != c.typ || slices.ContainsFunc(evs[i+1:], func(e decision.Event) bool { return e.Reason == c.reason }) {
				fail("%s events %+v: want one, %s", c.reason, evs, c.typ)
			}
			evs = slices.Delete(slices.Clone(evs), i, i+1)
		}
	}
	if st.Condition(decision.ConditionEvictionBlocked) != nil && (srv == nil || !srv.Cordoned || srv.Deleting) {
		fail("EvictionBlocked without a server that stays on a cordoned node")
	}
	return evs
}

// fuzzEvictionStrategies are the --eviction-strategy values FuzzEviction decides under; the
// zero value means None.
var fuzzEvictionStrategies = []schema.EvictionStrategy{"", schema.EvictionNone, schema.EvictionReplace, schema.EvictionBlock}

// fuzzServerStates are the states FuzzEviction gives a server.
var fuzzServerStates = []backend.State{backend.StatePending, backend.StateStarting, backend.StateReady,
	backend.StateFailed, backend.StateStopped, backend.StateLost}

// FuzzEviction feeds Decide arbitrary VMs (any JSON object, its spec.evictionStrategy and
// conditions Moving and EvictionBlocked among what the fuzzer may write) with servers that are
// being evicted or not, on cordoned nodes or not, with or without the VM's budget (recording
// the VM's kind or not), under each
// --eviction-strategy, and checks what FuzzDecide checks (checkPlan, determinism, nothing
// left to do once the plan is carried out, budget included) and the strategies' own promises:
// a valid VM that is not being deleted has a budget, once its plan is carried out, exactly
// when its strategy is Block; an evicted server under Replace that has not ended is neither
// deleted nor joined by a second; Moving is only ever under Replace; the kind is recorded
// only on a Block VM's budget that lacks it. The seeds are the golden
// cases of testdata/decide (not claim/: it decides under --root-disk ephemeral). To fuzz for
// longer:
//
//	go test ./reconcile/decision -run '^$' -fuzz '^FuzzEviction$' -fuzztime 10m
func FuzzEviction(f *testing.F) {
	for _, file := range decidecase.Files(f, cases) { // decided under --root-disk ephemeral, as they are
		vm, server := decidecase.Input(f, file)
		own := casePolicy(f, file)
		var srv *backend.Server
		if server != nil {
			var err error
			if srv, err = memory.ParseServer(server, now); err != nil {
				f.Fatalf("%s: %v", file, err)
			}
		}
		budget := decidecase.Budget(f, file)
		hasBudget, unrecorded := budget != nil, budget != nil && budget.KindUnrecorded
		for i, s := range fuzzEvictionStrategies {
			if s != own.Eviction && i > 0 && own.Eviction != "" {
				continue
			}
			if srv == nil {
				f.Add(vm, uint8(i), false, uint8(0), false, "", false, "", hasBudget, unrecorded)
				continue
			}
			reason := ""
			if srv.Disruption != nil {
				reason = srv.Disruption.Reason
			}
			f.Add(vm, uint8(i), true, uint8(slices.Index(fuzzServerStates, srv.State)), srv.Deleting, srv.Node, srv.Cordoned, reason, hasBudget, unrecorded)
		}
	}
	fields := decidecase.Fields(f)
	f.Fuzz(func(t *testing.T, data []byte, strategy uint8, hasServer bool, state uint8, deleting bool, node string, cordoned bool,
		disruption string, hasBudget, kindUnrecorded bool) {
		var obj map[string]any
		if err := utiljson.Unmarshal(data, &obj); err != nil || obj == nil {
			return
		}
		if !utf8.ValidString(node) || !utf8.ValidString(disruption) {
			return
		}
		cached, err := vmcache.Compact(&unstructured.Unstructured{Object: obj}, fields)
		if err != nil {
			t.Fatal(err)
		}
		vm, err := cached.View(fields)
		if err != nil {
			t.Fatal(err)
		}
		policy := decision.DefaultPolicy
		policy.RootDisk = decision.RootDiskEphemeral
		policy.Eviction = fuzzEvictionStrategies[int(strategy)%len(fuzzEvictionStrategies)]
		var srv *backend.Server
		if hasServer {
			spec, _ := vm.Spec()
			srv = &backend.Server{Name: "test-vm-server", ID: "pod-uid-1", State: fuzzServerStates[int(state)%len(fuzzServerStates)],
				Detail: "Running", Deleting: deleting, Node: node, Cordoned: cordoned,
				Spec:  backend.Spec{CPU: spec.CPU, Memory: spec.Memory, RootDisk: spec.RootDisk, Image: policy.DefaultImage},
				Since: now.Add(-time.Minute)}
			if disruption != "" {
				srv.Disruption = &backend.Disruption{Reason: disruption}
			}
		}
		var budget *backend.Budget
		if hasBudget {
			budget = &backend.Budget{Name: "test-vm-block-eviction", ID: "pdb-uid-1", KindUnrecorded: kindUnrecorded}
		}
		plan := policy.Decide(decision.Input{VM: vm, Server: srv, Budget: budget, Now: now})
		checkPlan(t, policy, vm, srv, nil, plan)
		if again := policy.Decide(decision.Input{VM: vm, Server: srv, Budget: budget, Now: now}); renderPlan(t, again) != renderPlan(t, plan) {
			t.Fatalf("Decide is not deterministic:\n%s\nthen\n%s", renderPlan(t, plan), renderPlan(t, again))
		}
		w := applyPlanBudget(t, vm, srv, nil, budget, plan)
		if !w.gone {
			last, next := plan, policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Budget: w.budget, Now: now})
			if holdsNext(plan, next) {
				// The budget made during a drain holds it once it is seen.
				if w = applyPlanBudget(t, w.vm, w.srv, nil, w.budget, next); !w.gone {
					last, next = next, policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Budget: w.budget, Now: now})
				}
			}
			if !next.Empty() {
				t.Errorf("deciding again after carrying out\n%s\nasks for more:\n%s", renderPlan(t, last), renderPlan(t, next))
			}
		}
		if serverOp(plan) == decision.CreateServer {
			checkRefusalEviction(t, vm, plan, policy.Rejected(decision.Input{VM: vm, Now: now}, "exceeded quota"))
		}
		spec, errs := vm.Spec()
		strat := spec.EvictionStrategy
		if strat == "" {
			strat = policy.Eviction
		}
		if strat == "" {
			strat = schema.EvictionNone
		}
		if len(errs) == 0 && !vm.Deleting() && !vm.Paused() && (w.budget != nil) != (strat == schema.EvictionBlock) {
			t.Errorf("strategy %s: budget %+v after the plan\n%s", strat, w.budget, renderPlan(t, plan))
		}
		if (len(errs) > 0 && !vm.Deleting() || vm.Paused()) && plan.Budget != nil {
			t.Errorf("a budget action for a VM that is invalid or paused:\n%s", renderPlan(t, plan))
		}
		if vm.Deleting() && !vm.Paused() && plan.Budget != nil && plan.Budget.Op != decision.DeleteBudget {
			t.Errorf("a budget action other than its deletion for a VM being deleted:\n%s", renderPlan(t, plan))
		}
		if plan.Budget != nil && plan.Budget.Op == decision.RecordBudgetKind && (budget == nil || !budget.KindUnrecorded || strat != schema.EvictionBlock) {
			// A budget that records the kind is the steady VM's: recording it again would be
			// a request on every reconcile.
			t.Errorf("records the kind on a budget %+v under strategy %s:\n%s", budget, strat, renderPlan(t, plan))
		}
		if plan.Finalizer == decision.RemoveFinalizer && w.budget != nil {
			// A deletion that orphans the VM's dependents would leave it behind.
			t.Errorf("the finalizer comes off while the VM's budget %+v stays:\n%s", w.budget, renderPlan(t, plan))
		}
		if strat == schema.EvictionReplace && srv != nil && srv.Disruption != nil && len(errs) == 0 && !vm.Deleting() && !vm.Paused() &&
			srv.State != backend.StateFailed && srv.State != backend.StateStopped && plan.Server != nil {
			t.Errorf("acts on a server being evicted under Replace:\n%s", renderPlan(t, plan))
		}
		if st := plan.Status; st != nil && st.Condition(decision.ConditionMoving) != nil && (strat != schema.EvictionReplace || len(errs) > 0) {
			t.Errorf("Moving under strategy %s:\n%s", strat, renderPlan(t, plan))
		}
	})
}

// TestEvictionPreferenceNeverReplaces: under Replace, a server evicted from node-a by what is
// no drain (node-a stays schedulable) is followed, once it is gone, by a server that prefers,
// and only prefers, any other node (PreferAvoidNode, not AvoidNode). Wherever that server
// lands (node-b, or node-a again when no other node fits) and whether its backend reports the
// preference back (the in-memory backend does, pods do not), it is never replaced or deleted
// for the preference: it runs, Moving goes once it is ready, and nothing is left to do. A
// server of a VM not moving that reports a preference is left alone too.
func TestEvictionPreferenceNeverReplaces(t *testing.T) {
	policy := decision.DefaultPolicy
	policy.RootDisk = decision.RootDiskEphemeral
	base, evicting := decidecase.Read(t, filepath.Join(cases, "evict-replace-undrained.txtar"))
	for _, c := range []struct {
		node     string
		reported bool // the backend reports the preference back
	}{{"node-b", true}, {"node-b", false}, {"node-a", true}, {"node-a", false}} {
		name := fmt.Sprintf("on %s, reported %t", c.node, c.reported)
		srv := *evicting
		w := world{vm: base, srv: &srv}
		decide := func() decision.Plan {
			p := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now})
			w = applyPlan(t, w.vm, w.srv, nil, p)
			return p
		}
		decide() // ServerEvicted, from node-a
		w.srv = nil
		p := decide()
		if a := p.Server; a == nil || a.Op != decision.CreateServer || a.Spec.PreferAvoidNode != "node-a" || a.Spec.AvoidNode != "" {
			t.Fatalf("%s: the server after the eviction: %+v, want one created preferring any node but node-a", name, p.Server)
		}
		if w.srv == nil || w.srv.Spec.PreferAvoidNode != "node-a" {
			t.Fatalf("%s: the in-memory backend lost the preference: %+v", name, w.srv)
		}
		if !c.reported {
			w.srv.Spec.PreferAvoidNode = ""
		}
		for _, state := range []backend.State{backend.StatePending, backend.StateStarting, backend.StateReady} {
			w.srv.State, w.srv.Detail = state, string(state)
			if state != backend.StatePending {
				w.srv.Node = c.node
			}
			if p := decide(); p.Server != nil {
				t.Fatalf("%s: a %s server is acted on: %+v", name, state, p.Server)
			}
		}
		st := w.vm.Status()
		if st.Phase != schema.PhaseActive || st.Condition(decision.ConditionMoving) != nil {
			t.Errorf("%s: %s/%s with Moving %+v, want Active with the move over", name, st.Phase, st.Reason, st.Condition(decision.ConditionMoving))
		}
		if next := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now}); !next.Empty() {
			t.Errorf("%s: deciding the moved VM again asks for more: %+v", name, next)
		}
	}

	// A running server of a VM that is not moving, which reports a node to prefer against.
	vm, running := decidecase.Read(t, filepath.Join(cases, "active-steady.txtar"))
	if running == nil {
		t.Fatal("active-steady: no server")
	}
	running.Spec.PreferAvoidNode = "node-a"
	if p := policy.Decide(decision.Input{VM: vm, Server: running, Now: now}); !p.Empty() {
		t.Errorf("a running server that prefers to avoid node-a is acted on: %+v", p)
	}
}

// TestEvictedFromWithoutServerNode: in a layout with no place for the server's node (the
// v1alpha1 CRD before placement, a field map without it), the server that follows an eviction
// under Replace still prefers any node but the one it was evicted from, which the condition
// Moving names.
func TestEvictedFromWithoutServerNode(t *testing.T) {
	raw, _ := decidecase.Input(t, filepath.Join(cases, "evict-replace-gone.txtar"))
	for _, node := range []bool{true, false} {
		f := decidecase.Fields(t)
		if !node {
			f.ServerNode = ""
		}
		vm, err := schema.Parse(raw, f)
		if err != nil {
			t.Fatal(err)
		}
		p := decision.DefaultPolicy
		p.RootDisk = decision.RootDiskEphemeral
		plan := p.Decide(decision.Input{VM: vm, Now: now})
		if plan.Server == nil || plan.Server.Spec == nil || plan.Server.Spec.PreferAvoidNode != "node-a" {
			t.Errorf("layout with the server's node %v: plan %+v, want a create that prefers any node but node-a", node, plan.Server)
		}
	}
}

// TestLingeringKeepersBounded: a server that ended while many sidecars keep its pod running
// (a mesh's proxy and several agents) is said in messages that name the first few, in the
// order the backend gives (by name), count the rest, and keep their end, what frees the node:
// the status of a kept ended server and its Event, and EvictionBlocked and its Warning under
// a drain; each within an Event's note (eventNoteLimit in package reconcile, 1024 bytes),
// past which the end would be cut.
func TestLingeringKeepersBounded(t *testing.T) {
	const noteLimit = 1024
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("sidecar-%02d-%s", i, strings.Repeat("x", 52))) // 63 bytes, the most a container's name has
	}
	for _, name := range []string{"strategy-once-succeeded-lingers", "strategy-manual-failed-lingers", "evict-block-cordoned-shutdown-lingers"} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(cases, name+".txtar")
			vm, srv := decidecase.Read(t, file)
			srv.KeptBy = many
			plan := casePolicy(t, file).Decide(decision.Input{VM: vm, Server: srv, Budget: decidecase.Budget(t, file), Now: now})
			if plan.Status == nil {
				t.Fatal("no status written")
			}
			messages := []string{plan.Status.Message}
			for _, c := range plan.Status.Conditions {
				messages = append(messages, c.Message)
			}
			for _, e := range plan.Events {
				messages = append(messages, e.Message)
			}
			named := 0
			for _, m := range messages {
				if !strings.Contains(m, many[0]) {
					continue
				}
				named++
				if len(m) > noteLimit || !strings.Contains(m, "containers "+many[0]+", "+many[1]+", "+many[2]+" and 37 more keep its pod running") ||
					!strings.Contains(m, "to free") || !strings.HasSuffix(m, "which replaces it") {
					t.Errorf("message of %d bytes: %q; want at most %d, naming three containers and counting the rest, ending with what frees the node", len(m), m, noteLimit)
				}
			}
			if named < 2 {
				t.Errorf("%d messages name the containers, want the status's or a condition's and its Event's: %q", named, messages)
			}
		})
	}
}
