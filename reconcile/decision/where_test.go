package decision_test

import (
	"path/filepath"
	"testing"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestWhereWithoutPlace: under a layout without status.server.node and .ip (a CRD of an
// earlier release), the status does not say where the server runs, and a VM whose server
// has a node and an address is steady all the same: nothing is written that could not be
// read back. With the built-in layout the same case writes both.
func TestWhereWithoutPlace(t *testing.T) {
	file := filepath.Join(cases, "status-node-ip.txtar")
	raw, _ := decidecase.Input(t, file)
	_, srv := decidecase.Read(t, file)
	policy := casePolicy(t, file)
	if srv.Node == "" || srv.IP == "" {
		t.Fatalf("%s: the server has no node or IP", file)
	}
	full := decidecase.Fields(t)
	without, left := full.Without(map[string]bool{"status.server.node": true, "status.server.ip": true})
	if len(left) != 2 {
		t.Fatalf("layout without node and IP: left out %v", left)
	}
	for name, tc := range map[string]struct {
		fields schema.Fields
		writes bool
	}{"built-in": {full, true}, "without node and IP": {without, false}} {
		t.Run(name, func(t *testing.T) {
			vm, err := schema.Parse(raw, tc.fields)
			if err != nil {
				t.Fatal(err)
			}
			plan := policy.Decide(decision.Input{VM: vm, Server: srv, Now: now})
			if (plan.Status != nil) != tc.writes {
				t.Fatalf("writes a status: %v, want %v:\n%s", plan.Status != nil, tc.writes, renderPlan(t, plan))
			}
			if plan.Status != nil {
				if s := plan.Status.Server; s == nil || s.Node != srv.Node || s.IP != srv.IP {
					t.Errorf("status.server %+v, want node %s, IP %s", s, srv.Node, srv.IP)
				}
				w := applyPlan(t, vm, srv, nil, plan)
				if next := policy.Decide(decision.Input{VM: w.vm, Server: w.srv, Disk: w.disk, Now: now}); !next.Empty() {
					t.Errorf("deciding again asks for more:\n%s", renderPlan(t, next))
				}
			}
		})
	}
}
