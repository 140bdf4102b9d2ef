package decision_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestResizeRefusedRoom: a resize the API server refuses outright (ResizeRefused) under
// --resize in-place is recorded in Resizing, for the replacement the next decision makes, when
// a node has room for the new size or the nodes are unknown; when none has, the server is kept
// at once: RestartRequired=ResizeNoRoom says which figure no node that takes it has (the only
// ones counted: a cordoned node is not, for this VM, which has no placement and so tolerates
// no cordon), or that every node is cordoned, and how to go on, a Normal Event of that reason says it once, and the next
// decision keeps it and writes nothing.
func TestResizeRefusedRoom(t *testing.T) {
	file := filepath.Join(cases, "cpu-resize-requested.txtar")
	vm, srv := decidecase.Read(t, file)
	const why = `resize pod test-vm-server: resize is infeasible: pods "test-vm-server" is forbidden: Node didn't have enough capacity`
	host := func(name, cpu, memory string) backend.Host {
		return backend.Host{Name: name, CPU: resource.MustParse(cpu), Memory: resource.MustParse(memory)}
	}
	cordoned := host("n3", "96", "512Gi")
	cordoned.Unschedulable = true
	for name, tc := range map[string]struct {
		hosts     *backend.Hosts
		condition string // Type/Reason of the lifecycle condition the refusal records
		says      string // what its message says
	}{
		"nodes unknown": {condition: "Resizing/ResizeInfeasible", says: "the node cannot resize it in place: " + why},
		"a node has room": {hosts: backend.NewHosts([]backend.Host{host("n1", "8", "8Gi"), host("n2", "2", "64Gi")}),
			condition: "Resizing/ResizeInfeasible", says: "the node cannot resize it in place: " + why},
		"no node has the cpu": {hosts: backend.NewHosts([]backend.Host{host("n1", "3", "8Gi"), host("n2", "2", "64Gi"), cordoned}),
			condition: "RestartRequired/ResizeNoRoom", says: "among the nodes not cordoned or tainted against it, no node has allocatable cpu 4 (the largest has 3), so a new server"},
		"no node has either": {hosts: backend.NewHosts([]backend.Host{host("n1", "3", "2Gi"), host("n2", "1", "1Gi")}),
			condition: "RestartRequired/ResizeNoRoom", says: "no node has allocatable cpu 4 (the largest has 3) or memory 4G (the largest has 2Gi)"},
		"every node cordoned": {hosts: backend.NewHosts([]backend.Host{cordoned}), condition: "RestartRequired/ResizeNoRoom",
			says: ": every node is cordoned or tainted against it, so"},
		"no node": {hosts: backend.NewHosts(nil), condition: "RestartRequired/ResizeNoRoom", says: ": no node is there, so"},
	} {
		t.Run(name, func(t *testing.T) {
			p := decision.DefaultPolicy
			p.RootDisk = decision.RootDiskEphemeral
			in := decision.Input{VM: vm, Server: srv, Hosts: tc.hosts, Now: now}
			if plan := p.Decide(in); plan.Server == nil || plan.Server.Op != decision.ResizeServer {
				t.Fatalf("plan %+v, want a resize", plan.Server)
			}
			refused := p.ResizeRefused(in, why)
			if refused.Server != nil || refused.Status == nil {
				t.Fatalf("ResizeRefused plans\n%s", renderPlan(t, refused))
			}
			typ, reason, _ := strings.Cut(tc.condition, "/")
			c := refused.Status.Condition(typ)
			if c == nil || c.Reason != reason || !strings.Contains(c.Message, tc.says) {
				t.Fatalf("condition %s: %+v, want reason %s saying %q", typ, c, reason, tc.says)
			}
			wantEvents := []decision.Event(nil)
			if typ == schema.ConditionRestartRequired {
				wantEvents = []decision.Event{{Type: decision.EventNormal, Reason: reason, Message: c.Message}}
			}
			if !slices.Equal(refused.Events, wantEvents) {
				t.Errorf("ResizeRefused events %+v, want %+v", refused.Events, wantEvents)
			}
			w := applyPlan(t, vm, srv, nil, refused)
			next := p.Decide(decision.Input{VM: w.vm, Server: w.srv, Hosts: tc.hosts, Now: now})
			if typ == schema.ConditionResizing {
				if next.Server == nil || next.Server.Op != decision.DeleteServer {
					t.Errorf("after the refusal: %+v, want the server replaced", next.Server)
				}
				return
			}
			if !next.Empty() {
				t.Errorf("after the refusal, with the server kept:\n%s", renderPlan(t, next))
			}
			if !strings.Contains(c.Message, "set the spec back to cpu 2, memory 4G; or add a node that fits, uncordon one, or give the VM a placement that tolerates a tainted one, then restart the VM: kubectl vm restart test-vm") {
				t.Errorf("RestartRequired %q does not say how to go on", c.Message)
			}
		})
	}
}
