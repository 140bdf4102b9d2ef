package decision_test

import (
	"fmt"
	"slices"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// FuzzDecide feeds Decide arbitrary VMs (any JSON object, as the cache would hold it),
// arbitrary observed servers (a resize of theirs included) and every resize policy, and checks
// that every plan is one the controller can carry out without contradicting itself or the
// world (see checkPlan), that deciding is deterministic, that a plan carried out leaves nothing
// more to do, and that a resize the backend refuses is not asked for again (checkRefused). The
// seeds are the golden cases of testdata/decide, each under its own policy and every other, and
// testdata/fuzz/FuzzDecide (which also keeps every input that once failed); plain `go test`
// runs them. To fuzz for longer (docs/reference/bad-input.md, Fuzzing):
//
//	go test ./reconcile/decision -run '^$' -fuzz '^FuzzDecide$' -fuzztime 10m
//
// The server's resize is its state (an index into fuzzResizeStates), the host's message and
// the cpu and memory in effect; the policy is its --resize mode (an index into fuzzResizeModes)
// and whether the backend can resize.
func FuzzDecide(f *testing.F) {
	for _, file := range decidecase.Files(f, cases) {
		vm, server := decidecase.Input(f, file)
		var srv *backend.Server
		if server != nil {
			var err error
			if srv, err = memory.ParseServer(server, now); err != nil {
				f.Fatalf("%s: %v", file, err)
			}
		}
		// The case's own policy first, then every other one.
		own := casePolicy(f, file)
		policies := []decision.Policy{own}
		for _, mode := range fuzzResizeModes[1:] {
			for _, can := range []bool{true, false} {
				if mode != own.Resize || can != own.CanResize {
					policies = append(policies, decision.Policy{Resize: mode, CanResize: can})
				}
			}
		}
		for _, p := range policies {
			mode := uint8(slices.Index(fuzzResizeModes, p.Resize))
			if srv == nil {
				f.Add(vm, false, "", "", "", false, int64(0), "", "", "", "", "", "", uint8(0), "", "", "", mode, p.CanResize)
				continue
			}
			f.Add(vm, true, string(srv.State), srv.Detail, srv.Message, srv.Deleting, int64(now.Sub(srv.Since)/time.Second),
				srv.Spec.CPU.String(), srv.Spec.Memory.String(), srv.Spec.RootDisk.String(), srv.Spec.Image, srv.Name, srv.ID,
				uint8(slices.Index(fuzzResizeStates, srv.Resize.State)), srv.Resize.Message,
				quantityString(srv.Resize.CPU), quantityString(srv.Resize.Memory), mode, p.CanResize)
		}
	}
	fields := decidecase.Fields(f)
	f.Fuzz(func(t *testing.T, data []byte, hasServer bool, state, detail, message string, deleting bool, since int64,
		cpu, memory, rootDisk, image, name, id string,
		resizeState uint8, resizeMessage, resizeCPU, resizeMemory string, mode uint8, canResize bool) {
		var obj map[string]any
		if err := utiljson.Unmarshal(data, &obj); err != nil || obj == nil {
			return // the cache holds objects only
		}
		for _, s := range []string{state, detail, message, image, name, id, resizeMessage} {
			if !utf8.ValidString(s) {
				return // a backend reports text (a pod's fields come from JSON)
			}
		}
		cached, err := vmcache.Compact(&unstructured.Unstructured{Object: obj}, fields)
		if err != nil {
			t.Fatal(err)
		}
		vm, err := cached.View(fields)
		if err != nil {
			t.Fatal(err)
		}
		var srv *backend.Server
		if hasServer {
			srv = &backend.Server{Name: name, ID: id, State: backend.State(state), Detail: detail, Message: message, Deleting: deleting,
				Spec: backend.Spec{CPU: quantity(cpu), Memory: quantity(memory), RootDisk: quantity(rootDisk), Image: image},
				Resize: backend.Resize{State: fuzzResizeStates[int(resizeState)%len(fuzzResizeStates)], Message: resizeMessage,
					CPU: quantity(resizeCPU), Memory: quantity(resizeMemory)}}
			if since != 0 {
				srv.Since = now.Add(-time.Duration(since) * time.Second)
			}
		}
		policy := decision.DefaultPolicy
		policy.Resize, policy.CanResize = fuzzResizeModes[int(mode)%len(fuzzResizeModes)], canResize
		plan := policy.Decide(vm, srv, now)
		checkPlan(t, policy, vm, srv, plan)
		if again := policy.Decide(vm, srv, now); renderPlan(t, again) != renderPlan(t, plan) {
			t.Fatalf("Decide is not deterministic:\n%s\nthen\n%s", renderPlan(t, plan), renderPlan(t, again))
		}
		vm2, srv2, gone := applyPlan(t, vm, srv, plan)
		if !gone {
			if next := policy.Decide(vm2, srv2, now); !next.Empty() {
				t.Errorf("deciding again after carrying out\n%s\nasks for more:\n%s", renderPlan(t, plan), renderPlan(t, next))
			}
		}
		if plan.Server != nil && plan.Server.Op == decision.ResizeServer {
			checkRefused(t, policy, vm, srv, resizeMessage)
		}
		checkRejected(t, policy, vm, message)
	})
}

// fuzzResizeStates are the resize states FuzzDecide gives a server: the five a backend
// reports, and one it may report in the future, which the decision must bear.
var fuzzResizeStates = []backend.ResizeState{backend.ResizeNone, backend.ResizePending, backend.ResizeDeferred,
	backend.ResizeInfeasible, backend.ResizeInProgress, "Paused"}

// fuzzResizeModes are the --resize modes FuzzDecide decides under; the zero mode means
// in-place.
var fuzzResizeModes = []decision.ResizeMode{"", decision.ResizeInPlace, decision.ResizeReplace, decision.ResizeManual}

// quantityString is q as a backend would write it; "" for zero, which a Resize uses for "not
// told".
func quantityString(q resource.Quantity) string {
	if q.IsZero() {
		return ""
	}
	return q.String()
}

// quantity parses a quantity the way a backend reports one; what does not parse is zero.
func quantity(s string) resource.Quantity {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}
	}
	return q
}

// checkPlan fails the test if plan contradicts itself, the world it was decided for or the
// policy p: it creates a server while one exists, deletes one that is not there (or is
// already going), resizes in place where p or the server does not allow it, replaces a running
// server under --resize manual, moves the finalizer the wrong way, reports Active without a
// ready server, reports a resize of a server that is not being resized, writes a status that
// differs from the current one only in its times, or asks to be requeued while it acts on the
// server.
func checkPlan(t *testing.T, p decision.Policy, vm schema.VirtualMachine, srv *backend.Server, plan decision.Plan) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s\nVM: %s\nserver: %+v\nplan:\n%s", fmt.Sprintf(format, args...), vm.JSON(), srv, renderPlan(t, plan))
	}
	if vm.Paused() {
		checkPaused(fail, vm, plan)
		return
	}
	spec, specErrs := vm.Spec()
	current := vm.Status()
	hasFinalizer := vm.HasFinalizer(schema.Finalizer)

	switch plan.Finalizer {
	case "":
	case decision.AddFinalizer:
		if hasFinalizer || vm.Deleting() {
			fail("adds the finalizer to a VM that has it or is being deleted")
		}
	case decision.RemoveFinalizer:
		if !hasFinalizer || !vm.Deleting() || srv != nil || plan.Server != nil {
			fail("removes the finalizer while the VM is not being deleted, lacks it, or has a server")
		}
	default:
		fail("unknown finalizer change %q", plan.Finalizer)
	}

	if a := plan.Server; a != nil {
		if a.Event.Reason == "" || a.Event.Message == "" || (a.Event.Type != corev1.EventTypeNormal && a.Event.Type != corev1.EventTypeWarning) {
			fail("server action without a proper event: %+v", a.Event)
		}
		switch a.Op {
		case decision.CreateServer:
			switch {
			case srv != nil:
				fail("creates a server while one exists")
			case vm.Deleting() || len(specErrs) > 0 || spec.Action != schema.ActionActive:
				fail("creates a server for a VM that is being deleted, invalid or inactive")
			case !hasFinalizer && plan.Finalizer != decision.AddFinalizer:
				fail("creates a server without the finalizer that guarantees its cleanup")
			case a.Spec == nil || a.Spec.CPU.Sign() <= 0 || a.Spec.Memory.Sign() <= 0 || a.Spec.RootDisk.Sign() <= 0 || a.Spec.Image == "":
				fail("creates a server of an impossible spec")
			case !a.Spec.Equal(backend.Spec{CPU: spec.CPU, Memory: spec.Memory, RootDisk: spec.RootDisk, Image: a.Spec.Image}) ||
				spec.Image != "" && a.Spec.Image != spec.Image:
				fail("creates a server other than the spec asks for")
			}
		case decision.DeleteServer:
			switch {
			case srv == nil || srv.Deleting:
				fail("deletes a server that is not there or already going")
			case p.Resize == decision.ResizeManual && a.Event.Reason == decision.ReasonReplacingServer &&
				srv.State != backend.StateFailed && srv.State != backend.StateStopped:
				fail("replaces a server that has not ended under --resize manual")
			}
		case decision.ResizeServer:
			switch {
			case !p.CanResize || p.Resize == decision.ResizeReplace:
				fail("resizes in place under --resize %q with canResize %v", p.Resize, p.CanResize)
			case srv == nil || srv.Deleting || (srv.State != backend.StateReady && srv.State != backend.StateStarting):
				fail("resizes a server that is not there, going or not running")
			case vm.Deleting() || len(specErrs) > 0 || spec.Action != schema.ActionActive:
				fail("resizes the server of a VM that is being deleted, invalid or inactive")
			case a.Spec == nil || !backend.ResizeOnly(srv.Spec, *a.Spec):
				fail("resizes a server to a spec that differs in more than cpu and memory, or in nothing")
			case a.Spec.CPU.Cmp(spec.CPU) != 0 || a.Spec.Memory.Cmp(spec.Memory) != 0:
				fail("resizes a server to other cpu and memory than the spec asks for")
			}
		default:
			fail("unknown server operation %q", a.Op)
		}
		if plan.RequeueAfter != 0 {
			fail("asks to be requeued while it acts on the server")
		}
	}
	if plan.RequeueAfter < 0 {
		fail("negative requeue")
	}

	st := plan.Status
	if st == nil {
		if len(plan.Events) > 0 {
			fail("events without a status change")
		}
		return
	}
	if st.SameAs(current) {
		fail("writes a status that differs from the current one only in its times")
	}
	if !st.LastUpdateTime.Equal(now) {
		fail("status lastUpdateTime %s, want the decision's time %s", st.LastUpdateTime, now)
	}
	if st.ObservedGeneration != vm.Generation() {
		fail("status observedGeneration %d, want the VM's generation %d", st.ObservedGeneration, vm.Generation())
	}
	ready := 0
	for _, c := range st.Conditions {
		if c.Type != schema.ConditionReady {
			continue
		}
		ready++
		want := map[schema.Phase]schema.ConditionStatus{schema.PhaseActive: schema.ConditionTrue, schema.PhaseUnknown: schema.ConditionUnknown}[st.Phase]
		if want == "" {
			want = schema.ConditionFalse
		}
		if c.Status != want || c.Reason != st.Reason || c.Message != st.Message || c.ObservedGeneration != st.ObservedGeneration {
			fail("Ready condition %+v does not match phase %s, reason %s", c, st.Phase, st.Reason)
		}
	}
	if ready == 0 {
		fail("status without a Ready condition")
	}

	// Resizing follows a resize of a running server that stays; RestartRequired, under
	// --resize manual, a server kept as it is. Never both.
	resizing, restartRequired := st.Condition(schema.ConditionResizing), st.Condition(schema.ConditionRestartRequired)
	if c := resizing; c != nil {
		stays := plan.Server == nil || plan.Server.Op == decision.ResizeServer
		if !decision.UnderWay(c.Reason) || c.Status != schema.ConditionTrue || c.ObservedGeneration != st.ObservedGeneration ||
			srv == nil || srv.Deleting || !decision.Running(srv) || !stays {
			fail("Resizing condition %+v without a resize under way of a running server that stays", *c)
		}
	}
	if c := restartRequired; c != nil {
		if p.Resize != decision.ResizeManual || c.Status != schema.ConditionTrue || c.ObservedGeneration != st.ObservedGeneration ||
			srv == nil || srv.Deleting || plan.Server != nil || resizing != nil {
			fail("RestartRequired condition %+v other than for a server kept under --resize manual", *c)
		}
	}

	// What the status says about the server must be the server there is (or is being made).
	creates := plan.Server != nil && plan.Server.Op == decision.CreateServer
	switch {
	case creates:
		if st.Server == nil || st.Server.State != string(corev1.PodPending) {
			fail("creates a server but the status does not name a pending one")
		}
	case srv == nil:
		if st.Server != nil {
			fail("status names a server while there is none")
		}
	default:
		if st.Server == nil || st.Server.ID != srv.ID || st.Server.Name != srv.Name {
			fail("status names a server other than the one there is")
		}
	}

	switch st.Phase {
	case schema.PhaseActive:
		stays := plan.Server == nil || plan.Server.Op == decision.ResizeServer // a resize keeps the server
		if srv == nil || srv.State != backend.StateReady || srv.Deleting || !stays || st.Reason != decision.ReasonServerReady {
			fail("Active without a ready server that stays")
		}
	case schema.PhaseTerminating:
		if !vm.Deleting() {
			fail("Terminating while the VM is not being deleted")
		}
	case schema.PhaseInactive:
		if vm.Deleting() || len(specErrs) > 0 || spec.Action != schema.ActionInactive {
			fail("Inactive while the VM does not ask for it")
		}
	case schema.PhaseCreating, schema.PhaseFailed, schema.PhaseUnknown:
		if vm.Deleting() {
			fail("phase %s while the VM is being deleted", st.Phase)
		}
	default:
		fail("unknown phase %q", st.Phase)
	}
	if (len(specErrs) > 0 && !vm.Deleting()) != (st.Reason == decision.ReasonInvalidSpec) {
		fail("reason %s for a spec with errors %v", st.Reason, specErrs)
	}

	// One event per change of phase or reason, unless the server action's event explains it.
	// A server that went without the controller deleting it (only one the status named) is a
	// Warning ServerMissing: beside the action that replaces it, or instead of the transition
	// to waiting for it to go.
	changed := st.Phase != current.Phase || st.Reason != current.Reason
	evs := resumedEvents(fail, current, *st, plan.Events)
	if len(evs) == 1 && evs[0].Reason == decision.ReasonServerMissing {
		named := current.Server != nil && current.Server.Name != ""
		creates := plan.Server != nil && plan.Server.Op == decision.CreateServer
		if evs[0].Type != corev1.EventTypeWarning || !named || !(creates || st.Reason == decision.ReasonServerReplacing) || !changed {
			fail("event %+v: ServerMissing only as a Warning about a server the status named, when it is replaced", evs[0])
		}
		if creates {
			evs = nil
		} else {
			evs = []decision.Event{{Type: corev1.EventTypeNormal, Reason: st.Reason, Message: evs[0].Message}}
		}
	}
	// ServerResized comes last, once, with the Resizing condition of a resize the host took
	// going away, and the new size in effect.
	if n := len(evs); n > 0 && evs[n-1].Reason == decision.ReasonServerResized {
		was := current.Condition(schema.ConditionResizing)
		if was == nil || !decision.UnderWay(was.Reason) || resizing != nil || plan.Server != nil || srv == nil || !srv.Resize.Done(srv.Spec) {
			fail("event %+v without a resize under way done and its Resizing condition going away", evs[n-1])
		}
		evs = evs[:n-1]
	}
	switch {
	case plan.Server != nil || !changed:
		if len(evs) != 0 {
			fail("events %+v besides the server action's, or without a change of phase or reason", plan.Events)
		}
	case len(evs) != 1 || evs[0].Reason != st.Reason:
		fail("want one event with reason %s for the change of phase or reason", st.Reason)
	default:
		warning := st.Phase == schema.PhaseFailed || st.Phase == schema.PhaseUnknown
		if (evs[0].Type == corev1.EventTypeWarning) != warning || evs[0].Message == "" {
			fail("event %+v: want a Warning exactly for Failed and Unknown, with a note", evs[0])
		}
	}
	if _, err := schema.StatusPatch(vm.Fields(), *st, vm.ResourceVersion()); err != nil {
		fail("the status does not render: %v", err)
	}
}

// checkRefused checks what follows a resize in place the backend refuses
// (backend.ErrResizeInfeasible): the refusal's plan writes a status and nothing else; carried
// out, the next decision does not ask for the same resize again but falls back on the policy,
// a replacement, or under --resize manual nothing (the refusal's RestartRequired stands); and
// that decision carried out leaves nothing more to do.
func checkRefused(t *testing.T, p decision.Policy, vm schema.VirtualMachine, srv *backend.Server, why string) {
	t.Helper()
	refused := p.ResizeRefused(vm, srv, why, now)
	if refused.Server != nil || refused.Finalizer != "" || refused.Status == nil {
		t.Errorf("ResizeRefused plans other than a status:\n%s", renderPlan(t, refused))
		return
	}
	vm2, srv2, _ := applyPlan(t, vm, srv, refused)
	next := p.Decide(vm2, srv2, now)
	checkPlan(t, p, vm2, srv2, next)
	if manual := p.Resize == decision.ResizeManual; manual && !next.Empty() || !manual && (next.Server == nil || next.Server.Op != decision.DeleteServer) {
		t.Errorf("after the refusal under --resize %q the decision is\n%s", p.Resize, renderPlan(t, next))
	}
	if vm3, srv3, gone := applyPlan(t, vm2, srv2, next); !gone {
		if again := p.Decide(vm3, srv3, now); !again.Empty() {
			t.Errorf("deciding again after carrying out\n%s\nasks for more:\n%s", renderPlan(t, next), renderPlan(t, again))
		}
	}
}

// checkRejected checks the plan for a VM whose server the backend refused: Failed with the
// reason, no other action, and a later look.
func checkRejected(t *testing.T, policy decision.Policy, vm schema.VirtualMachine, why string) {
	t.Helper()
	p := policy.Rejected(vm, why, now)
	if p.Server != nil || p.Finalizer != "" || p.RequeueAfter != decision.Duration(decision.RejectedRetry) {
		t.Errorf("Rejected plans more than a status and a requeue:\n%s", renderPlan(t, p))
	}
	if p.Status != nil && (p.Status.Phase != schema.PhaseFailed || p.Status.Reason != decision.ReasonServerRejected || p.Status.Server != nil) {
		t.Errorf("Rejected status %+v", p.Status)
	}
	if p.Status == nil && vm.Status().Reason != decision.ReasonServerRejected {
		t.Errorf("Rejected writes no status for a VM whose status says %s", vm.Status().Reason)
	}
}
