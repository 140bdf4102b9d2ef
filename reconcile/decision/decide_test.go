package decision_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/txtar"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"gopkg.in/yaml.v3"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/internal/golden"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// now is the clock of every golden case; times in the inputs are written relative to it.
var now = decidecase.Now

// cases is the directory of the golden cases, and claimCases that of the cases of VMs with
// disks of their own (--root-disk claim).
var (
	cases      = filepath.Join("..", "..", "testdata", "decide")
	claimCases = filepath.Join(cases, "claim")
)

// caseFiles are the golden cases of both directories.
func caseFiles(t testing.TB) []string {
	return append(decidecase.Files(t, cases), decidecase.Files(t, claimCases)...)
}

// TestDecideGolden feeds each testdata/decide/<case>.txtar (a VM as a patch of the shared
// base.yaml, and optionally the server and the disk the backend observed and the nodes it
// knows) to Decide and compares the plan, as YAML, with <case>.golden; testdata/decide/claim/
// holds the cases of VMs with disks of their own, with a base.yaml of their own. It then
// applies the plan to an in-memory world and decides again: a correct decision leaves nothing
// more to do.
func TestDecideGolden(t *testing.T) {
	for _, file := range caseFiles(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".txtar")
		if filepath.Dir(file) == claimCases {
			name = "claim/" + name
		}
		t.Run(name, func(t *testing.T) {
			vm, srv := decidecase.Read(t, file)
			gone := decidecase.Gone(t, file)
			disk := decidecase.Disk(t, file)
			budget := decidecase.Budget(t, file)
			hosts := decidecase.Hosts(t, file)
			policy := casePolicy(t, file)
			plan := policy.Decide(decision.Input{VM: vm, Server: srv, Gone: gone, Disk: disk, Budget: budget, Hosts: hosts, Now: now})
			got := renderPlan(t, plan)
			if again := renderPlan(t, policy.Decide(decision.Input{VM: vm, Server: srv, Gone: gone, Disk: disk, Budget: budget, Hosts: hosts, Now: now})); again != got {
				t.Fatalf("Decide is not deterministic:\n%s\nthen\n%s", got, again)
			}
			golden.Check(t, strings.TrimSuffix(file, ".txtar")+".golden", []byte(got))

			w := applyPlanWorld(t, world{vm: vm, srv: srv, lastGone: gone, disk: disk, budget: budget}, plan)
			if w.gone {
				return
			}
			next := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Gone: w.lastGone, Disk: w.disk, Budget: w.budget, Hosts: hosts, Now: now})
			if growsNext(plan, next) || holdsNext(plan, next) { // the plans that may follow another (fuzz_test.go, eviction_test.go)
				if w = applyPlanWorld(t, w, next); w.gone {
					return
				}
				next = policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Gone: w.lastGone, Disk: w.disk, Budget: w.budget, Hosts: hosts, Now: now})
			}
			if !next.Empty() {
				t.Errorf("deciding again after applying the plan asks for more:\n%s", renderPlan(t, next))
			}
		})
	}
}

// casePolicy is DefaultPolicy with the settings of the case's policy.yaml, if it has one:
//
//	resize: manual     # --resize
//	canResize: false   # a backend that cannot resize in place
//	rootDisk: claim    # --root-disk
//	eviction: Replace  # --eviction-strategy
//
// A case decides under --root-disk ephemeral unless it is under testdata/decide/claim/: the
// cases written before VMs had disks of their own keep the plans they always had.
func casePolicy(t testing.TB, file string) decision.Policy {
	t.Helper()
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := decision.DefaultPolicy
	if filepath.Dir(file) != claimCases {
		p.RootDisk = decision.RootDiskEphemeral
	}
	for _, f := range ar.Files {
		if f.Name != "policy.yaml" {
			continue
		}
		var in struct {
			Resize    decision.ResizeMode     `yaml:"resize"`
			CanResize *bool                   `yaml:"canResize"`
			RootDisk  decision.RootDiskMode   `yaml:"rootDisk"`
			Eviction  schema.EvictionStrategy `yaml:"eviction"`
		}
		dec := yaml.NewDecoder(bytes.NewReader(f.Data))
		dec.KnownFields(true)
		if err := dec.Decode(&in); err != nil {
			t.Fatalf("%s: policy.yaml: %v", file, err)
		}
		if in.Resize != "" {
			p.Resize = in.Resize
		}
		if in.CanResize != nil {
			p.CanResize = *in.CanResize
		}
		if in.RootDisk != "" {
			p.RootDisk = in.RootDisk
		}
		if in.Eviction != "" {
			p.Eviction = in.Eviction
		}
	}
	return p
}

func renderPlan(t *testing.T, p decision.Plan) string {
	t.Helper()
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(p); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// world is the world a plan was carried out on: the VM, its server and its disk as they are
// now, what the backend remembers of a server gone while disrupted (lastGone,
// backend.Departures), and whether the VM was released for deletion (gone).
type world struct {
	vm       schema.VirtualMachine
	srv      *backend.Server
	lastGone *backend.Gone
	disk     *backend.Disk
	budget   *backend.Budget
	gone     bool
}

// applyPlan carries out a plan on a copy of the world the way the controller would: the
// finalizer change and the status as patches on the VM's JSON, the disk and server actions
// on an in-memory backend.
func applyPlan(t *testing.T, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk, p decision.Plan) world {
	t.Helper()
	return applyPlanBudget(t, vm, srv, disk, nil, p)
}

// applyPlanBudget is applyPlan in a world that also holds the VM's disruption budget.
func applyPlanBudget(t *testing.T, vm schema.VirtualMachine, srv *backend.Server, disk *backend.Disk, budget *backend.Budget, p decision.Plan) world {
	t.Helper()
	return applyPlanWorld(t, world{vm: vm, srv: srv, disk: disk, budget: budget}, p)
}

// applyPlanWorld is applyPlan in the world in: its VM, server, disk and budget, and the
// server the backend remembers going while disrupted.
func applyPlanWorld(t *testing.T, in world, p decision.Plan) world {
	t.Helper()
	vm, srv, disk, budget := in.vm, in.srv, in.disk, in.budget
	raw := vm.JSON()
	servers := memory.New()
	owner := backend.Owner{APIVersion: vm.APIVersion(), Kind: vm.Kind(), Namespace: vm.Namespace(), Name: vm.Name(), UID: vm.UID()}
	if srv != nil {
		servers.Set(owner, srv)
	}
	servers.SetGone(owner, in.lastGone)
	if disk != nil {
		servers.SetDisk(owner, disk)
	}
	// A resize is taken and left pending, where the plan's status says it is; so is a disk's
	// growth.
	servers.AnswerResizes(memory.ResizeAnswer{State: backend.ResizePending})
	servers.AnswerGrowth(backend.Growth{State: backend.GrowthPending})
	if a := p.Disk; a != nil {
		var err error
		var made *backend.Disk
		switch a.Op {
		case decision.CreateDisk:
			if disk != nil {
				t.Fatalf("plan creates a disk while one of its name exists")
			}
			made, err = servers.CreateDisk(context.Background(), owner, *a.Spec)
			p.CreatedDisk(made)
		case decision.AdoptDisk, decision.ExpandDisk, decision.ReleaseDisk, decision.RecordDiskKind:
			seen, _ := servers.ObserveDisk(owner) // disk, as the world holds it (SetDisk gives it a version)
			_, err = servers.UpdateDisk(context.Background(), owner, seen, *a.Spec)
		case decision.DeleteDisk:
			if disk == nil || !disk.Owner.Mine() {
				t.Fatalf("plan deletes a disk that is not the VM's")
			}
			seen, _ := servers.ObserveDisk(owner) // disk, as the world holds it (SetDisk gives it a version)
			err = servers.DeleteDisk(context.Background(), owner, seen)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if p.Server != nil {
		switch p.Server.Op {
		case decision.CreateServer:
			if srv != nil {
				t.Fatalf("plan creates a server while one exists")
			}
			created, err := servers.Create(context.Background(), owner, *p.Server.Spec)
			if err != nil {
				t.Fatal(err)
			}
			p.Created(created)
		case decision.DeleteServer:
			if srv == nil {
				t.Fatalf("plan deletes a server that does not exist")
			}
			if err := servers.Delete(context.Background(), owner); err != nil {
				t.Fatal(err)
			}
		case decision.ResizeServer:
			if _, err := servers.Resize(context.Background(), owner, *p.Server.Spec); err != nil {
				t.Fatal(err)
			}
		}
	}
	budget = applyBudget(t, servers, owner, budget, p.Budget)
	srv, err := servers.Observe(owner)
	if err != nil {
		t.Fatal(err)
	}
	lastGone := servers.LastGone(owner)
	disk, err = servers.ObserveDisk(owner)
	if err != nil {
		t.Fatal(err)
	}
	if p.Finalizer != "" {
		fins := []string{}
		for _, f := range vm.Finalizers() {
			if f != schema.Finalizer {
				fins = append(fins, f)
			}
		}
		if p.Finalizer == decision.AddFinalizer {
			if vm.HasFinalizer(schema.Finalizer) {
				t.Fatalf("plan adds a finalizer the VM has")
			}
			fins = append(fins, schema.Finalizer)
		} else if !vm.HasFinalizer(schema.Finalizer) {
			t.Fatalf("plan removes a finalizer the VM lacks")
		}
		raw = mergePatch(t, raw, map[string]any{"metadata": map[string]any{"finalizers": fins}})
		if p.Finalizer == decision.RemoveFinalizer && vm.Deleting() {
			return world{vm: vm, srv: srv, lastGone: lastGone, disk: disk, budget: budget, gone: true}
		}
	}
	if p.Status != nil {
		patch, err := schema.StatusPatch(vm.Fields(), *p.Status, "")
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = jsonpatch.MergePatch(raw, patch); err != nil {
			t.Fatal(err)
		}
	}
	next, err := schema.Parse(raw, vm.Fields())
	if err != nil {
		t.Fatal(err)
	}
	return world{vm: next, srv: srv, lastGone: lastGone, disk: disk, budget: budget}
}

func mergePatch(t *testing.T, raw []byte, patch map[string]any) []byte {
	t.Helper()
	p, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonpatch.MergePatch(raw, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRefusalThroughNodeLost: a resize refused under --resize in-place, met under manual
// while the server's node does not answer, and decided again once it answers. The refusal
// stays on record through both decisions, and RestartRequired names the refusal's cause, not
// the node's state when it was first written.
func TestRefusalThroughNodeLost(t *testing.T) {
	file := filepath.Join(cases, "resize-refused-then-manual-lost.txtar")
	vm, srv := decidecase.Read(t, file)
	policy := casePolicy(t, file)
	if srv.State != backend.StateLost {
		t.Fatalf("%s: server is %s, want Lost", file, srv.State)
	}
	refusal := vm.Status().Condition(schema.ConditionResizing)
	if refusal == nil || refusal.Reason != decision.ReasonResizeInfeasible {
		t.Fatalf("%s: no refusal on record: %+v", file, refusal)
	}
	w := applyPlan(t, vm, srv, nil, policy.Decide(decision.Input{VM: vm, Server: srv, Now: now}))
	vm, srv = w.vm, w.srv

	back := *srv
	back.State, back.Message = backend.StateReady, ""
	plan := policy.Decide(decision.Input{VM: vm, Server: &back, Now: now.Add(time.Minute)})
	if plan.Server != nil {
		t.Fatalf("the refused resize is asked for again: %+v", plan.Server)
	}
	vm = applyPlan(t, vm, &back, nil, plan).vm

	st := vm.Status()
	if st.Phase != schema.PhaseActive {
		t.Errorf("phase %s, want %s", st.Phase, schema.PhaseActive)
	}
	c := st.Condition(schema.ConditionRestartRequired)
	switch {
	case c == nil:
		t.Fatalf("no RestartRequired: %+v", st.Conditions)
	case c.Reason != decision.ReasonResizeInfeasible:
		t.Errorf("RestartRequired reason %s, want %s", c.Reason, decision.ReasonResizeInfeasible)
	case !strings.Contains(c.Message, refusal.Message) || strings.Contains(c.Message, "not running"):
		t.Errorf("RestartRequired message does not give the refusal's cause (%q): %q", refusal.Message, c.Message)
	}
}

// TestStopThroughNodeLost: a VM stopped (Halted, a stop request under each strategy that
// heeds one) or deleted while its server's node does not answer. The server's deletion cannot
// finish: the VM says NodeLost, with a Warning, in the phase of what waits for it, for as
// long as the node is lost; once the node is deleted and the server with it, the VM is
// stopped, or released, and no new server is made, nor a ServerMissing said.
func TestStopThroughNodeLost(t *testing.T) {
	tests := map[string]struct {
		file   string // the golden case it starts from
		patch  string // a merge patch of its VM ("" none)
		phase  schema.Phase
		reason string // once the server is gone; "" for a VM released
	}{
		"Halted":                    {"nodelost-halted.txtar", "", schema.PhaseInactive, decision.ReasonServerStopped},
		"stop under Manual":         {"strategy-manual-stop-lost.txtar", "", schema.PhaseInactive, decision.ReasonStopped},
		"stop under Once":           {"strategy-manual-stop-lost.txtar", `{"spec":{"action":"once"}}`, schema.PhaseInactive, decision.ReasonStopped},
		"stop under RerunOnFailure": {"strategy-manual-stop-lost.txtar", `{"spec":{"action":"rerunOnFailure"}}`, schema.PhaseInactive, decision.ReasonStopped},
		"VM deleted":                {"nodelost-vm-deleted.txtar", "", schema.PhaseTerminating, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(cases, tc.file)
			vm, srv := decidecase.Read(t, file)
			policy := casePolicy(t, file)
			if tc.patch != "" {
				raw, err := jsonpatch.MergePatch(vm.JSON(), []byte(tc.patch))
				if err != nil {
					t.Fatal(err)
				}
				if vm, err = schema.Parse(raw, vm.Fields()); err != nil {
					t.Fatal(err)
				}
			}
			var events []decision.Event
			at := now
			for range 3 { // the stop, then the node still lost
				plan := policy.Decide(decision.Input{VM: vm, Server: srv, Now: at})
				events = append(events, plan.Events...)
				w := applyPlan(t, vm, srv, nil, plan)
				vm, srv, at = w.vm, w.srv, at.Add(time.Minute)
			}
			if srv == nil || srv.State != backend.StateLost || !srv.Deleting {
				t.Fatalf("server %+v, want one being deleted on a node that does not answer", srv)
			}
			st := vm.Status()
			if st.Phase != tc.phase || st.Reason != decision.ReasonNodeLost || !strings.Contains(st.Message, "kubectl delete node node-a") {
				t.Errorf("while the node is lost: %s/%s %q, want %s/NodeLost with the way out", st.Phase, st.Reason, st.Message, tc.phase)
			}
			if c := st.Condition(schema.ConditionReconciling); c != nil && tc.phase == schema.PhaseInactive {
				t.Errorf("Reconciling while the stop waits for the node: %+v", *c)
			}
			if !slices.ContainsFunc(events, func(e decision.Event) bool {
				return e.Type == decision.EventWarning && e.Reason == decision.ReasonNodeLost
			}) {
				t.Errorf("no Warning NodeLost in %+v", events)
			}

			// The node is deleted, and its pods with it.
			plan := policy.Decide(decision.Input{VM: vm, Now: at})
			if plan.Server != nil {
				t.Errorf("once the server is gone: %s server", plan.Server.Op)
			}
			for _, e := range plan.Events {
				if e.Reason == decision.ReasonServerMissing {
					t.Errorf("the server the controller deleted is called missing: %+v", e)
				}
			}
			w := applyPlan(t, vm, nil, nil, plan)
			switch {
			case tc.reason == "" && !w.gone:
				t.Errorf("the deleted VM is not released: %+v", plan)
			case tc.reason != "" && (w.vm.Status().Phase != tc.phase || w.vm.Status().Reason != tc.reason):
				t.Errorf("once the server is gone: %s/%s, want %s/%s", w.vm.Status().Phase, w.vm.Status().Reason, tc.phase, tc.reason)
			}
		})
	}
}

// TestReplaceThroughNodeLost: a VM whose server the controller deletes for a new one (a
// restart, a spec change) while the server's node does not answer, under each strategy. The
// deletion cannot finish: the VM says NodeLost, in phase Creating (a new server is what
// waits), without claiming the server (ClaimedServer); once the node is deleted and the
// server with it, the new server is made, under Manual and Once too, and no ServerMissing is
// said: the controller deleted that server.
func TestReplaceThroughNodeLost(t *testing.T) {
	replacements := map[string]string{ // a merge patch that asks for a new server
		"restart":     `{"metadata":{"annotations":{"cloudnative.czs/restartedAt":"2026-06-01T11:59:00Z"}}}`,
		"spec change": `{"metadata":{"generation":2},"spec":{"image":"registry.example/fixed:1"}}`,
	}
	strategies := map[string]string{"Always": "active", "RerunOnFailure": "rerunOnFailure", "Once": "once", "Manual": "manual"}
	for what, patch := range replacements {
		for strategy, action := range strategies {
			t.Run(what+" under "+strategy, func(t *testing.T) {
				file := filepath.Join(cases, "node-lost.txtar")
				vm, srv := decidecase.Read(t, file)
				policy := casePolicy(t, file)
				vm = patchVM(t, vm, `{"spec":{"action":"`+action+`"},"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"2026-06-01T11:00:00.000Z"}},"status":{"startRequestedAt":"2026-06-01T11:00:00.000Z"}}`)
				vm = applyPlan(t, vm, srv, nil, policy.Decide(decision.Input{VM: vm, Server: srv, Now: now})).vm // NodeLost, Unknown
				vm = patchVM(t, vm, patch)
				at := now.Add(time.Minute)
				for i := range 3 { // the deletion, then the node still lost
					plan := policy.Decide(decision.Input{VM: vm, Server: srv, Now: at})
					if i == 0 && (plan.Server == nil || plan.Server.Op != decision.DeleteServer) {
						t.Fatalf("no deletion for the %s: %+v", what, plan.Server)
					}
					w := applyPlan(t, vm, srv, nil, plan)
					vm, srv, at = w.vm, w.srv, at.Add(time.Minute)
				}
				waitsOnLostNode(t, policy, vm, at, "force-delete server test-vm-server")
			})
		}
	}
}

// TestStartThroughNodeLost: a VM stopped (Halted, a stop request) while its server's node does
// not answer, so that the stop's deletion cannot finish (NodeLost, Inactive), is then started:
// by a start request, or by a run strategy that runs it. The new server waits for that
// deletion: the VM says NodeLost still, in phase Creating, without claiming the server, for
// as long as the node is lost (not ServerReplacing, which hides why nothing moves and the way
// out; not Unknown, which would call the server's going missing). Once the node is deleted and
// the server with it, the new server is made, ServerCreating, with the start recorded and no
// ServerMissing said.
func TestStartThroughNodeLost(t *testing.T) {
	tests := map[string]struct {
		file      string // the golden case that stops the VM
		stopUnder string // the run strategy it is stopped under ("" the case's)
		action    string // the run strategy it is started under ("" the stop's)
		start     bool   // started by a start request
	}{
		"Halted, then Always":             {"nodelost-halted.txtar", "", "active", false},
		"Halted, then RerunOnFailure":     {"nodelost-halted.txtar", "", "rerunOnFailure", false},
		"Halted, then Once":               {"nodelost-halted.txtar", "", "once", false},
		"Halted, then Manual and a start": {"nodelost-halted.txtar", "", "manual", true},
		"stop under Manual, then a start": {"strategy-manual-stop-lost.txtar", "", "", true},
		"stop under Manual, then Always":  {"strategy-manual-stop-lost.txtar", "", "active", false},
		"stop under Once, then a start":   {"strategy-manual-stop-lost.txtar", "once", "", true},
		"stop under Rerun, then a start":  {"strategy-manual-stop-lost.txtar", "rerunOnFailure", "", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(cases, tc.file)
			vm, srv := decidecase.Read(t, file)
			policy := casePolicy(t, file)
			if tc.stopUnder != "" {
				vm = patchVM(t, vm, `{"spec":{"action":"`+tc.stopUnder+`"}}`)
			}
			at := now
			for range 2 { // the stop, then the node still lost
				w := applyPlan(t, vm, srv, nil, policy.Decide(decision.Input{VM: vm, Server: srv, Now: at}))
				vm, srv, at = w.vm, w.srv, at.Add(time.Minute)
			}
			if st := vm.Status(); st.Phase != schema.PhaseInactive || st.Reason != decision.ReasonNodeLost {
				t.Fatalf("stopped: %s/%s, want Inactive/NodeLost", st.Phase, st.Reason)
			}
			if tc.action != "" {
				vm = patchVM(t, vm, `{"spec":{"action":"`+tc.action+`"}}`)
			}
			if tc.start {
				vm = patchVM(t, vm, `{"metadata":{"annotations":{"cloudnative.czs/startRequestedAt":"2026-06-01T12:01:30.000Z"}}}`)
			}
			for range 3 { // the start, then the node still lost
				w := applyPlan(t, vm, srv, nil, policy.Decide(decision.Input{VM: vm, Server: srv, Now: at}))
				vm, srv, at = w.vm, w.srv, at.Add(time.Minute)
			}
			plan := waitsOnLostNode(t, policy, vm, at, "kubectl delete node node-a")
			st := applyPlan(t, vm, nil, nil, plan).vm.Status()
			if st.Phase != schema.PhaseCreating || st.Reason != decision.ReasonServerCreating {
				t.Errorf("once the server is gone: %s/%s, want Creating/ServerCreating", st.Phase, st.Reason)
			}
			if r := vm.StartRequested().Value; tc.start && st.StartRequestedAt != r {
				t.Errorf("start request %s not recorded: startRequestedAt %q", r, st.StartRequestedAt)
			}
		})
	}
}

// waitsOnLostNode checks a VM whose new server waits for the deletion of one on a node that
// does not answer: its status says NodeLost, in phase Creating, with the way out wayOut and
// without claiming the server the controller deletes; and once the node is deleted, and the
// server with it (a decision at at that observes none), the new server is made with no
// ServerMissing said. It returns that decision's plan.
func waitsOnLostNode(t *testing.T, policy decision.Policy, vm schema.VirtualMachine, at time.Time, wayOut string) decision.Plan {
	t.Helper()
	st := vm.Status()
	if st.Phase != schema.PhaseCreating || st.Reason != decision.ReasonNodeLost || !strings.Contains(st.Message, wayOut) {
		t.Errorf("while the node is lost: %s/%s %q, want Creating/NodeLost with the way out", st.Phase, st.Reason, st.Message)
	}
	if c := decision.ClaimedServer(st); c != "" {
		t.Errorf("the status claims server %s, which the controller deletes", c)
	}
	plan := policy.Decide(decision.Input{VM: vm, Now: at})
	if plan.Server == nil || plan.Server.Op != decision.CreateServer {
		t.Fatalf("once the server is gone: %+v, no new server", plan.Server)
	}
	for _, e := range plan.Events {
		if e.Reason == decision.ReasonServerMissing {
			t.Errorf("the server the controller deleted is called missing: %+v", e)
		}
	}
	return plan
}
