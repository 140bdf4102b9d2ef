package decision_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestStartThroughDiskConflict: a VM that heeds requests (RerunOnFailure, Once, Manual) under
// --root-disk claim is stopped on request, and a claim of its disk's name turns out to be
// another's (another object owns it, or a kept claim lost its label). The owner runs `kubectl
// vm start`: the decision refuses the start (DiskConflict), and the start stays pending, as
// it does through the other refusals (ServerRejected, InvalidSpec): the refusal's status does
// not record it. Once the conflict is lifted as the message says (the claim deleted, or its
// label put back), the start is carried out: a server is made, with no second request. Each
// step is decided on the VM as the one before wrote it, as a restarted controller would.
func TestStartThroughDiskConflict(t *testing.T) {
	file := filepath.Join(claimCases, "active-steady.txtar")
	policy := casePolicy(t, file)
	const start = "2026-06-01T11:59:00Z"
	lifts := map[string]func(w *world){
		"claim deleted": func(w *world) { w.disk = nil },
		"label put back": func(w *world) {
			d := *w.disk
			d.Owner, d.KeptMark = backend.DiskKept, true
			w.disk = &d
		},
	}
	for _, rs := range []schema.RunStrategy{schema.RunManual, schema.RunOnce, schema.RunRerunOnFailure} {
		for liftName, lift := range lifts {
			t.Run(fmt.Sprintf("%s/%s", rs, liftName), func(t *testing.T) {
				w := caseWorldUnder(t, file, rs)
				decide := func() decision.Plan {
					t.Helper()
					return policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Disk: w.disk, Now: now})
				}
				carry := func(p decision.Plan) { t.Helper(); w = applyPlanWorld(t, w, p) }

				// Stopped on request, the server gone.
				w.vm = patchVM(t, w.vm, `{"metadata":{"annotations":{"cloudnative.czs/stopRequestedAt":"2026-06-01T11:30:00Z"}}}`)
				carry(decide())
				w.srv = nil
				carry(decide())
				if st := w.vm.Status(); st.Reason != decision.ReasonStopped {
					t.Fatalf("the VM is not stopped: %s (%s)", st.Phase, st.Reason)
				}

				// The claim of the disk's name is another's; the VM stays stopped.
				other := *w.disk
				other.Owner, other.KeptMark = backend.DiskOther, false
				w.disk = &other
				carry(decide())

				// kubectl vm start: refused while the conflict holds, and kept pending.
				w.vm = patchVM(t, w.vm, fmt.Sprintf(`{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":%q}}}`, start))
				p := decide()
				if p.Server != nil {
					t.Fatalf("a server is acted on while the disk's name is another's:\n%s", renderPlan(t, p))
				}
				carry(p)
				st := w.vm.Status()
				if st.Phase != schema.PhaseFailed || st.Reason != decision.ReasonDiskConflict {
					t.Fatalf("the start with the claim another's is %s (%s), want %s (%s)", st.Phase, st.Reason, schema.PhaseFailed, decision.ReasonDiskConflict)
				}
				if st.StartRequestedAt == start {
					t.Errorf("the refusal records the start it did not carry out (status.startRequestedAt %s): it is never carried out", st.StartRequestedAt)
				}
				if again := decide(); !again.Empty() {
					t.Errorf("the refusal decided again asks for more:\n%s", renderPlan(t, again))
				}

				// The conflict lifted: the start is carried out, at most a disk's create and
				// binding later.
				lift(&w)
				p = decideUntilServerCreate(t, &w, decide, carry, "the conflict lifted")
				carry(p)
				if st := w.vm.Status(); st.StartRequestedAt != start || st.Reason != decision.ReasonServerCreating {
					t.Errorf("the start carried out, the status is %s (%s), startRequestedAt %q; want %s, %q",
						st.Phase, st.Reason, st.StartRequestedAt, decision.ReasonServerCreating, start)
				}
			})
		}
	}
}

// TestStartThroughBackendRefusal: as TestStartThroughDiskConflict, for the refusals the
// backend answers a start's plan with: the disk's create refused (DiskRejected: a quota on
// storage), the server's create refused (ServerRejected). The plan that carries the start out
// records it, but that plan's status is not written: the refusal's plan is, which records no
// request, and the start stays pending until the create goes through.
func TestStartThroughBackendRefusal(t *testing.T) {
	file := filepath.Join(claimCases, "active-steady.txtar")
	policy := casePolicy(t, file)
	const start = "2026-06-01T11:59:00Z"
	refusals := map[string]struct {
		diskGone bool // the disk was deleted while the VM was stopped: the start makes it first
		refuse   func(in decision.Input, p decision.Plan) decision.Plan
		reason   string
	}{
		"disk refused": {diskGone: true, reason: decision.ReasonDiskRejected, refuse: func(in decision.Input, p decision.Plan) decision.Plan {
			if p.Disk == nil || p.Disk.Op != decision.CreateDisk {
				t.Fatalf("no disk create to refuse:\n%s", renderPlan(t, p))
			}
			return policy.DiskRejected(in, `persistentvolumeclaims "test-vm-rootdisk" is forbidden: exceeded quota`, false)
		}},
		"server refused": {reason: decision.ReasonServerRejected, refuse: func(in decision.Input, p decision.Plan) decision.Plan {
			if serverOp(p) != decision.CreateServer {
				t.Fatalf("no server create to refuse:\n%s", renderPlan(t, p))
			}
			return policy.Rejected(in, `pods "test-vm-server" is forbidden: exceeded quota`)
		}},
	}
	for _, rs := range []schema.RunStrategy{schema.RunManual, schema.RunOnce, schema.RunRerunOnFailure} {
		for name, tc := range refusals {
			t.Run(fmt.Sprintf("%s/%s", rs, name), func(t *testing.T) {
				w := caseWorldUnder(t, file, rs)
				in := func() decision.Input { return decision.Input{VM: w.vm, Server: w.srv, Disk: w.disk, Now: now} }
				carry := func(p decision.Plan) { t.Helper(); w = applyPlanWorld(t, w, p) }

				w.vm = patchVM(t, w.vm, `{"metadata":{"annotations":{"cloudnative.czs/stopRequestedAt":"2026-06-01T11:30:00Z"}}}`)
				carry(policy.Decide(in()))
				w.srv = nil
				if tc.diskGone {
					w.disk = nil
				}
				carry(policy.Decide(in()))
				if st := w.vm.Status(); st.Reason != decision.ReasonStopped {
					t.Fatalf("the VM is not stopped: %s (%s)", st.Phase, st.Reason)
				}

				// The start's create refused: the start stays pending.
				w.vm = patchVM(t, w.vm, fmt.Sprintf(`{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":%q}}}`, start))
				carry(tc.refuse(in(), policy.Decide(in())))
				if st := w.vm.Status(); st.Reason != tc.reason || st.StartRequestedAt == start {
					t.Fatalf("the refused start is %s (%s), startRequestedAt %q; want %s, the start pending", st.Phase, st.Reason, st.StartRequestedAt, tc.reason)
				}

				// The cause fixed: the start is carried out.
				carry(decideUntilServerCreate(t, &w, func() decision.Plan { return policy.Decide(in()) }, carry, "the refusal lifted"))
				if st := w.vm.Status(); st.StartRequestedAt != start {
					t.Errorf("the start carried out, status.startRequestedAt is %q, want %q", st.StartRequestedAt, start)
				}
			})
		}
	}
}

// decideUntilServerCreate decides on *w, carrying each plan out, until a plan creates the
// server, which it returns uncarried. A pending disk the plans made is bound between steps,
// as the storage would: the pending start may take a disk's create and binding before its
// server. It fails the test, naming what was lifted, if no server is made within three steps
// or a plan asks for nothing first.
func decideUntilServerCreate(t *testing.T, w *world, decide func() decision.Plan, carry func(decision.Plan), lifted string) decision.Plan {
	t.Helper()
	for step := 0; ; step++ {
		p := decide()
		if serverOp(p) == decision.CreateServer {
			return p
		}
		if step == 3 || p.Empty() {
			t.Fatalf("%s, the pending start makes no server (%s (%s)):\n%s",
				lifted, w.vm.Status().Phase, w.vm.Status().Reason, renderPlan(t, p))
		}
		carry(p)
		if w.disk != nil && w.disk.Phase == backend.DiskPending {
			bound := *w.disk
			bound.Phase, bound.Capacity = backend.DiskBound, bound.Requested
			w.disk = &bound
		}
	}
}

// caseWorldUnder is the world of the case in file (its VM, server and disk), the VM's run
// strategy set to rs.
func caseWorldUnder(t *testing.T, file string, rs schema.RunStrategy) world {
	t.Helper()
	vm, srv := decidecase.Read(t, file)
	return world{vm: patchVM(t, vm, fmt.Sprintf(`{"spec":{"action":%q}}`, vm.Fields().StrategyWord(rs))), srv: srv,
		disk: decidecase.Disk(t, file)}
}
