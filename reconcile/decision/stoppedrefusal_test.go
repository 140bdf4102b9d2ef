package decision_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestRefusalKeepsStopped: a VM that heeds requests (RerunOnFailure, Once, Manual) under
// --root-disk claim is stopped (on request; after a clean shutdown whose pod was removed
// since; under Once, after a failure whose pod was removed since), then the controller
// refuses it: the release of its disk that reclaim policy Retain asks for is refused
// (DiskRejected, DiskConflict), or its spec is invalid (memory 100m). Once the refusal is
// lifted (the release allowed, the spec fixed), the VM is stopped as it was: no server is
// made, the status says what it said before the refusal, and a start request starts it as
// ever. The refusal's status carries the record of it (the condition Stopped), so that a
// restarted controller knows it too: each step is decided on the VM as the one before wrote
// it.
func TestRefusalKeepsStopped(t *testing.T) {
	file := filepath.Join(claimCases, "active-steady.txtar")
	policy := casePolicy(t, file)
	// The ways a VM comes to be stopped: from the case's running VM, the server's end or a
	// stop request, decided and carried out until the server is gone.
	stops := map[string]struct {
		end        backend.State // the server's end; "" for a stop request
		strategies []schema.RunStrategy
		reason     string // the reason of the stopped VM
	}{
		"stopped on request":     {"", []schema.RunStrategy{schema.RunManual, schema.RunOnce, schema.RunRerunOnFailure}, decision.ReasonStopped},
		"shut down, pod removed": {backend.StateStopped, []schema.RunStrategy{schema.RunManual, schema.RunOnce, schema.RunRerunOnFailure}, decision.ReasonGuestShutDown},
		"failed, pod removed":    {backend.StateFailed, []schema.RunStrategy{schema.RunManual, schema.RunOnce}, decision.ReasonServerFailed},
	}
	// The refusals, each of the stopped VM, and how each is lifted.
	refusals := map[string]struct {
		patch  string // a change of the VM that the controller refuses
		reason string // the refusal's
		refuse func(in decision.Input) decision.Plan
		lift   string // the change that lifts it ("": the backend allows what it refused)
	}{
		"release refused": {patch: `{"metadata":{"generation":2},"spec":{"rootDiskReclaimPolicy":"Retain"}}`, reason: decision.ReasonDiskRejected,
			refuse: func(in decision.Input) decision.Plan {
				return policy.DiskRejected(in, `admission webhook "claims.example.com" denied the request`, false)
			}},
		"release in conflict": {patch: `{"metadata":{"generation":2},"spec":{"rootDiskReclaimPolicy":"Retain"}}`, reason: decision.ReasonDiskConflict,
			refuse: func(in decision.Input) decision.Plan {
				return policy.DiskRejected(in, "the claim is another's", true)
			}},
		"invalid spec": {patch: `{"metadata":{"generation":2},"spec":{"resource":{"memory":"100m"}}}`, reason: decision.ReasonInvalidSpec,
			lift: `{"metadata":{"generation":3},"spec":{"resource":{"memory":"4G"}}}`},
		"invalid placement": {patch: `{"metadata":{"generation":2},"spec":{"placement":"ssd"}}`, reason: decision.ReasonInvalidSpec,
			lift: `{"metadata":{"generation":3},"spec":{"placement":null}}`},
	}
	for stopName, stop := range stops {
		for _, rs := range stop.strategies {
			for refName, ref := range refusals {
				t.Run(fmt.Sprintf("%s/%s/%s", rs, stopName, refName), func(t *testing.T) {
					vm, srv := decidecase.Read(t, file)
					disk := decidecase.Disk(t, file)
					w := world{vm: patchVM(t, vm, fmt.Sprintf(`{"spec":{"action":%q}}`, vm.Fields().StrategyWord(rs))), srv: srv, disk: disk}
					decide := func() decision.Plan {
						t.Helper()
						return policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Disk: w.disk, Now: now})
					}
					carry := func(p decision.Plan) {
						t.Helper()
						w = applyPlanWorld(t, w, p)
					}
					// Stopped: the server ends or a stop deletes it, and it is gone.
					if stop.end == "" {
						w.vm = patchVM(t, w.vm, `{"metadata":{"annotations":{"cloudnative.czs/stopRequestedAt":"2026-06-01T11:30:00Z"}}}`)
					} else {
						ended := *w.srv
						ended.State = stop.end
						w.srv = &ended
					}
					carry(decide())
					w.srv = nil // deleted by the stop, or the ended pod removed
					carry(decide())
					stopped := w.vm.Status()
					if stopped.Reason != stop.reason || stopped.Server != nil {
						t.Fatalf("the VM is not stopped as the case has it: %s (%s), server %+v", stopped.Phase, stopped.Reason, stopped.Server)
					}

					// Refused.
					w.vm = patchVM(t, w.vm, ref.patch)
					p := decide()
					if ref.refuse != nil {
						if p.Disk == nil || p.Disk.Op != decision.ReleaseDisk {
							t.Fatalf("no release to refuse:\n%s", renderPlan(t, p))
						}
						p = ref.refuse(decision.Input{VM: w.vm, Disk: w.disk, Now: now})
					}
					carry(p)
					if st := w.vm.Status(); st.Phase != schema.PhaseFailed || st.Reason != ref.reason {
						t.Fatalf("the refusal's status is %s (%s), want %s (%s)", st.Phase, st.Reason, schema.PhaseFailed, ref.reason)
					}
					if again := decide(); ref.refuse == nil && !again.Empty() {
						t.Fatalf("the refusal decided again asks for more:\n%s", renderPlan(t, again))
					}

					// Lifted: stopped as before, the disk released if it was to be.
					if ref.lift != "" {
						w.vm = patchVM(t, w.vm, ref.lift)
					}
					p = decide()
					if p.Server != nil {
						t.Fatalf("the refusal lifted, the stopped VM gets a server:\n%s", renderPlan(t, p))
					}
					if ref.refuse != nil && (p.Disk == nil || p.Disk.Op != decision.ReleaseDisk) {
						t.Errorf("the refusal lifted, the release is not asked for again:\n%s", renderPlan(t, p))
					}
					carry(p)
					st := w.vm.Status()
					if st.Phase != stopped.Phase || st.Reason != stopped.Reason || st.Message != stopped.Message {
						t.Errorf("the refusal lifted, the status is %s (%s) %q, want it as before the refusal: %s (%s) %q",
							st.Phase, st.Reason, st.Message, stopped.Phase, stopped.Reason, stopped.Message)
					}
					if c := st.Condition(decision.ConditionRefusedWhileStopped); c != nil {
						t.Errorf("the refusal lifted, the status keeps its record: %+v", *c)
					}
					if again := decide(); !again.Empty() {
						t.Errorf("deciding again asks for more:\n%s", renderPlan(t, again))
					}

					// A start request starts it.
					w.vm = patchVM(t, w.vm, `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"2026-06-01T11:59:00Z"}}}`)
					if p := decide(); serverOp(p) != decision.CreateServer {
						t.Errorf("a start request does not start the VM:\n%s", renderPlan(t, p))
					}
				})
			}
		}
	}
}

// TestRefusalKeepsStoppedWhileLost: a VM being stopped (a stop request under RerunOnFailure;
// Halted, then Manual) whose server's node does not answer (NodeLost in phase Inactive) is
// refused (its disk; its spec, fixed since) while the server's deletion waits for the node.
// Once the refusal is lifted the VM is being stopped as before: NodeLost in phase Inactive
// while the node does not answer (not Unknown: the status does not claim the server), and
// stopped once the server is gone, with no new server.
func TestRefusalKeepsStoppedWhileLost(t *testing.T) {
	tests := map[string]struct {
		file string
		want string // the reason once the server is gone
	}{
		"stop request": {"strategy-rerun-stop-lost-deleting", decision.ReasonStopped},
		"Halted":       {"strategy-manual-halted-lost-deleting", decision.ReasonNotStarted},
	}
	refusals := map[string]func(p decision.Policy, vm schema.VirtualMachine, srv *backend.Server) (refused, lifted schema.VirtualMachine){
		"disk": func(p decision.Policy, vm schema.VirtualMachine, srv *backend.Server) (schema.VirtualMachine, schema.VirtualMachine) {
			w := applyPlan(t, vm, srv, nil, p.DiskRejected(decision.Input{VM: vm, Server: srv, Now: now}, "denied", false))
			return w.vm, w.vm
		},
		"spec": func(p decision.Policy, vm schema.VirtualMachine, srv *backend.Server) (schema.VirtualMachine, schema.VirtualMachine) {
			gen := vm.Generation()
			invalid := patchVM(t, vm, fmt.Sprintf(`{"metadata":{"generation":%d},"spec":{"resource":{"memory":"100m"}}}`, gen+1))
			w := applyPlan(t, invalid, srv, nil, p.Decide(decision.Input{VM: invalid, Server: srv, Now: now}))
			return w.vm, patchVM(t, w.vm, fmt.Sprintf(`{"metadata":{"generation":%d},"spec":{"resource":{"memory":"4G"}}}`, gen+2))
		},
	}
	for name, tc := range tests {
		for refusal, refuse := range refusals {
			t.Run(name+"/"+refusal, func(t *testing.T) {
				file := filepath.Join(cases, tc.file+".txtar")
				vm, srv := decidecase.Read(t, file)
				policy := casePolicy(t, file)
				w := applyPlan(t, vm, srv, nil, policy.Decide(decision.Input{VM: vm, Server: srv, Now: now}))
				if st := w.vm.Status(); st.Phase != schema.PhaseInactive || st.Reason != decision.ReasonNodeLost {
					t.Fatalf("the case is %s (%s), want %s (%s)", st.Phase, st.Reason, schema.PhaseInactive, decision.ReasonNodeLost)
				}
				before := w.vm.Status()
				refused, vm := refuse(policy, w.vm, w.srv)
				if c := refused.Status().Condition(decision.ConditionRefusedWhileStopped); c == nil {
					t.Fatalf("the refusal keeps no record of the stop: %+v", refused.Status().Conditions)
				}
				p := policy.Decide(decision.Input{VM: vm, Server: w.srv, Now: now})
				if p.Server != nil {
					t.Fatalf("the refusal lifted, the server is acted on:\n%s", renderPlan(t, p))
				}
				w = applyPlan(t, vm, w.srv, nil, p)
				if st := w.vm.Status(); st.Phase != schema.PhaseInactive || st.Reason != decision.ReasonNodeLost || st.Message != before.Message {
					t.Errorf("the refusal lifted, the status is %s (%s) %q; want it as before: %s (%s) %q",
						st.Phase, st.Reason, st.Message, before.Phase, before.Reason, before.Message)
				}
				p = policy.Decide(decision.Input{VM: w.vm, Now: now}) // the server is gone
				if p.Server != nil {
					t.Fatalf("the server gone, the VM gets one:\n%s", renderPlan(t, p))
				}
				if st := applyPlan(t, w.vm, nil, nil, p).vm.Status(); st.Phase != schema.PhaseInactive || st.Reason != tc.want {
					t.Errorf("the server gone, the status is %s (%s), want %s (%s)", st.Phase, st.Reason, schema.PhaseInactive, tc.want)
				}
			})
		}
	}
}

// TestRefusalWithoutRecord: why a refusal's status that carries no RefusedWhileStopped (one
// an earlier version wrote over a stopped VM's status, which it did not record) is read as
// that of a VM on its way, and starts it once lifted. Two Manual VMs under --root-disk
// claim come, by the verbs of docs/run-strategies.md, to the same refusal: the release of
// the disk that reclaim policy Retain asks for is refused (DiskRejected), while no server
// runs. One was stopped on request, and then asked to restart (recorded, with nothing to
// restart); the other was stopped the same way, then started by its spec (Halted, then
// kubectl vm start: Always), set back to Manual while it ran, and is restarting: the restart
// deleted its server and the refused release came with the next one's create. The first
// refusal's status records the stopped status it replaced; without that record, as an
// earlier version wrote it, it is the second's byte for byte: the same phase, reason and
// message, no server, the same run strategy, the same start, stop and restart requests
// recorded (the stop the later one), the same Ready and kstatus conditions. Their times,
// equal here under one clock, tell nothing either: Ready turns False at the refusal's write
// also for a VM that ran until then (under RerunOnFailure, one whose server someone deleted
// and whose replacement's create is refused). The decision is a function of what it is
// given, so no rule on that status keeps the first VM stopped without keeping the second,
// whose owner asked for a restart, stopped too: the second must start, and so the first
// does.
func TestRefusalWithoutRecord(t *testing.T) {
	file := filepath.Join(claimCases, "active-steady.txtar")
	policy := casePolicy(t, file)
	vm, srv := decidecase.Read(t, file)
	disk := decidecase.Disk(t, file)
	start := world{vm: patchVM(t, vm, `{"spec":{"action":"manual"}}`), srv: srv, disk: disk}
	const (
		stop    = `{"metadata":{"annotations":{"cloudnative.czs/stopRequestedAt":"2026-06-01T11:30:00Z"}}}`
		restart = `{"metadata":{"annotations":{"cloudnative.czs/restartedAt":"2026-06-01T11:50:00Z"}}}`
		retain  = `{"metadata":{"generation":5},"spec":{"rootDiskReclaimPolicy":"Retain"}}`
	)
	// step patches w's VM (unless patch is ""), decides and carries the plan out; ready
	// then makes its server ready, gone removes it.
	step := func(w *world, patch string) decision.Plan {
		t.Helper()
		if patch != "" {
			w.vm = patchVM(t, w.vm, patch)
		}
		p := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Disk: w.disk, Now: now})
		*w = applyPlanWorld(t, *w, p)
		return p
	}
	ready := func(w *world) {
		r := *w.srv
		r.State, r.Detail = backend.StateReady, "Running"
		w.srv = &r
		step(w, "")
	}
	refuse := func(w *world) {
		t.Helper()
		p := step(&world{vm: w.vm, srv: w.srv, disk: w.disk}, retain)
		if p.Disk == nil || p.Disk.Op != decision.ReleaseDisk {
			t.Fatalf("no release to refuse:\n%s", renderPlan(t, p))
		}
		w.vm = patchVM(t, w.vm, retain)
		*w = applyPlanWorld(t, *w, policy.DiskRejected(decision.Input{VM: w.vm, Disk: w.disk, Now: now}, "denied", false))
		if st := w.vm.Status(); st.Reason != decision.ReasonDiskRejected || st.Server != nil {
			t.Fatalf("the refusal's status is %s (%s), server %+v", st.Phase, st.Reason, st.Server)
		}
	}

	stopped := start
	step(&stopped, stop)
	stopped.srv = nil // the stop's deletion done
	step(&stopped, "")
	step(&stopped, restart)
	if st := stopped.vm.Status(); st.Reason != decision.ReasonStopped || st.RestartedAt == "" {
		t.Fatalf("the first VM is %s (%s), restart %q; want it stopped, the restart recorded", st.Phase, st.Reason, st.RestartedAt)
	}
	refuse(&stopped)
	if !decision.RefusedWhileStopped(stopped.vm.Status()) {
		t.Fatalf("the refusal of the stopped VM keeps no record: %+v", stopped.vm.Status().Conditions)
	}

	running := start
	step(&running, stop)
	running.srv = nil
	step(&running, "")
	step(&running, `{"metadata":{"generation":2},"spec":{"action":"inactive"}}`)
	step(&running, `{"metadata":{"generation":3},"spec":{"action":"active"}}`) // kubectl vm start on Halted
	ready(&running)
	step(&running, `{"metadata":{"generation":4},"spec":{"action":"manual"}}`)
	if st := running.vm.Status(); st.Phase != schema.PhaseActive {
		t.Fatalf("the second VM is %s (%s), want it running", st.Phase, st.Reason)
	}
	if p := step(&running, restart); serverOp(p) != decision.DeleteServer {
		t.Fatalf("the restart deletes no server:\n%s", renderPlan(t, p))
	}
	running.srv = nil // the restart's deletion done
	refuse(&running)
	if c := running.vm.Status().Condition(decision.ConditionRefusedWhileStopped); c != nil {
		t.Fatalf("the refusal of the restarting VM records a stop: %+v", *c)
	}

	// The first refusal as an earlier version wrote it: without the record.
	st := stopped.vm.Status()
	st.Conditions = schema.RemoveCondition(st.Conditions, decision.ConditionRefusedWhileStopped)
	patch, err := schema.StatusPatch(stopped.vm.Fields(), st, "")
	if err != nil {
		t.Fatal(err)
	}
	earlier := patchVM(t, stopped.vm, string(patch))
	if a, b := earlier.JSON(), running.vm.JSON(); string(a) != string(b) {
		t.Fatalf("the refusals differ without the record:\n%s\n%s", a, b)
	}
	if !equality.Semantic.DeepEqual(stopped.disk, running.disk) {
		t.Fatalf("the disks differ:\n%+v\n%+v", stopped.disk, running.disk)
	}

	// Lifted (the release let through): the restarting VM gets its server; the stopped one
	// does by its record's absence only.
	if p := policy.Decide(decision.Input{VM: running.vm, Disk: running.disk, Now: now}); serverOp(p) != decision.CreateServer {
		t.Errorf("the restart's refusal lifted, the VM gets no server:\n%s", renderPlan(t, p))
	}
	if p := policy.Decide(decision.Input{VM: stopped.vm, Disk: stopped.disk, Now: now}); p.Server != nil {
		t.Errorf("the stopped VM's refusal lifted, with its record, the VM gets a server:\n%s", renderPlan(t, p))
	}
}

// TestRefusalLiftedRunsAsAsked: a refusal lifted leaves the VM as its owner last asked,
// whatever the refusal (its spec, under --root-disk claim its disk's name another's) and
// whether the refusal replaced a status or was the VM's first. A Manual VM restarting when
// its spec is made invalid (the restart's deletion done, its create not yet made) gets its
// server once the spec is fixed: the refusal replaced a VM on its way, not a stopped one, and
// keeps no record (RefusedWhileStopped). A new VM refused from its first decision on is, once
// the refusal is lifted, what a new VM of its fixed spec is: a Manual (or Halted) one stays
// stopped (NotStarted: its refusal records it so; ServerStopped), any other starts; one whose
// invalid spec named no run strategy is what the strategy it is fixed to makes it. Each step
// is decided on the VM as the one before wrote it.
func TestRefusalLiftedRunsAsAsked(t *testing.T) {
	const invalid = `{"spec":{"resource":{"memory":"100m"}}}`
	tests := map[string]struct {
		file    string   // the golden case the VM starts from
		patches []string // the VM's changes, each decided and carried out in turn
		gone    int      // the server's deletion done after the patch of this index (-1: never)
		refusal string   // the reason of the refused status (the last but one)
		lift    string   // the change that lifts the refusal
		want    string   // the reason once the refusal is lifted
		create  bool     // the lifted refusal's plan creates a server
	}{
		"Manual restarting, spec invalid": {file: "active-steady", gone: 1,
			patches: []string{`{"spec":{"action":"manual"}}`, `{"metadata":{"annotations":{"cloudnative.czs/restartedAt":"2026-06-01T11:50:00Z"}}}`,
				`{"metadata":{"generation":2},"spec":{"resource":{"memory":"100m"}}}`},
			refusal: decision.ReasonInvalidSpec, lift: `{"metadata":{"generation":3},"spec":{"resource":{"memory":"4G"}}}`,
			want: decision.ReasonServerCreating, create: true},
		"Manual restarting, spec invalid while the server goes": {file: "active-steady", gone: 2,
			patches: []string{`{"spec":{"action":"manual"}}`, `{"metadata":{"annotations":{"cloudnative.czs/restartedAt":"2026-06-01T11:50:00Z"}}}`,
				`{"metadata":{"generation":2},"spec":{"resource":{"memory":"100m"}}}`},
			refusal: decision.ReasonInvalidSpec, lift: `{"metadata":{"generation":3},"spec":{"resource":{"memory":"4G"}}}`,
			want: decision.ReasonServerCreating, create: true},
		"new Manual, spec invalid": {file: "strategy-manual-new", gone: -1, patches: []string{invalid},
			refusal: decision.ReasonInvalidSpec, lift: `{"metadata":{"generation":2},"spec":{"resource":{"memory":"4G"}}}`,
			want: decision.ReasonNotStarted},
		"new Manual with a start request, spec invalid": {file: "strategy-manual-new", gone: -1,
			patches: []string{`{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"2026-06-01T11:50:00Z"}},"spec":{"resource":{"memory":"100m"}}}`},
			refusal: decision.ReasonInvalidSpec, lift: `{"metadata":{"generation":2},"spec":{"resource":{"memory":"4G"}}}`,
			want: decision.ReasonServerCreating, create: true},
		"new Halted, spec invalid": {file: "strategy-manual-new", gone: -1, patches: []string{`{"spec":{"action":"inactive","resource":{"memory":"100m"}}}`},
			refusal: decision.ReasonInvalidSpec, lift: `{"metadata":{"generation":2},"spec":{"resource":{"memory":"4G"}}}`,
			want: decision.ReasonServerStopped},
		"new Once, spec invalid": {file: "strategy-manual-new", gone: -1, patches: []string{`{"spec":{"action":"once","resource":{"memory":"100m"}}}`},
			refusal: decision.ReasonInvalidSpec, lift: `{"metadata":{"generation":2},"spec":{"resource":{"memory":"4G"}}}`,
			want: decision.ReasonServerCreating, create: true},
		"new RerunOnFailure, spec invalid": {file: "strategy-manual-new", gone: -1, patches: []string{`{"spec":{"action":"rerunOnFailure","resource":{"memory":"100m"}}}`},
			refusal: decision.ReasonInvalidSpec, lift: `{"metadata":{"generation":2},"spec":{"resource":{"memory":"4G"}}}`,
			want: decision.ReasonServerCreating, create: true},
		"new Always, spec invalid": {file: "strategy-manual-new", gone: -1, patches: []string{`{"spec":{"action":"active","resource":{"memory":"100m"}}}`},
			refusal: decision.ReasonInvalidSpec, lift: `{"metadata":{"generation":2},"spec":{"resource":{"memory":"4G"}}}`,
			want: decision.ReasonServerCreating, create: true},
	}
	for _, rs := range schema.RunStrategies { // a new VM whose spec names no run strategy, fixed to each
		want, create := decision.ReasonServerCreating, true
		switch rs {
		case schema.RunManual:
			want, create = decision.ReasonNotStarted, false
		case schema.RunHalted:
			want, create = decision.ReasonServerStopped, false
		}
		tests["new, no run strategy, fixed to "+string(rs)] = struct {
			file    string
			patches []string
			gone    int
			refusal string
			lift    string
			want    string
			create  bool
		}{file: "invalid-action-missing", gone: -1, refusal: decision.ReasonInvalidSpec,
			lift: fmt.Sprintf(`{"metadata":{"generation":2},"spec":{"action":%q}}`, decidecase.Fields(t).StrategyWord(rs)), want: want, create: create}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(cases, tc.file+".txtar")
			vm, srv := decidecase.Read(t, file)
			policy := casePolicy(t, file)
			w := world{vm: vm, srv: srv}
			decide := func() decision.Plan {
				t.Helper()
				p := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now})
				w = applyPlanWorld(t, w, p)
				return p
			}
			for i, patch := range tc.patches {
				w.vm = patchVM(t, w.vm, patch)
				decide()
				if i == tc.gone {
					w.srv = nil
				}
			}
			decide() // the server's deletion seen, if it was done after the last change; a new VM's first decision
			if st := w.vm.Status(); st.Reason != tc.refusal {
				t.Fatalf("the refused status is %s (%s), want %s", st.Phase, st.Reason, tc.refusal)
			}
			if again := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Now: now}); !again.Empty() {
				t.Fatalf("the refusal decided again asks for more:\n%s", renderPlan(t, again))
			}
			w.vm = patchVM(t, w.vm, tc.lift)
			p := decide()
			if (serverOp(p) == decision.CreateServer) != tc.create {
				t.Errorf("the refusal lifted, creates a server: %v, want %v:\n%s", serverOp(p) == decision.CreateServer, tc.create, renderPlan(t, p))
			}
			if st := w.vm.Status(); st.Reason != tc.want {
				t.Errorf("the refusal lifted, the status is %s (%s) %q, want %s", st.Phase, st.Reason, st.Message, tc.want)
			}
			if c := w.vm.Status().Condition(decision.ConditionRefusedWhileStopped); c != nil {
				t.Errorf("the refusal lifted, the status keeps its record: %+v", *c)
			}
		})
	}
}
