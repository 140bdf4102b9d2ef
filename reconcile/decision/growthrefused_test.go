package decision_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/convert"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/internal/golden"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// quotaRefusal is the API server's refusal of a growth in these tests.
const quotaRefusal = "exceeded quota: requested storage 50G, limited 45G"

// growthCase is a golden case whose plan grows the disk, as the tests of a refused growth take it.
type growthCase struct {
	name   string
	in     decision.Input
	policy decision.Policy
	plan   decision.Plan
}

// growthCases are the golden cases whose plan grows the disk; at least one.
func growthCases(t *testing.T) []growthCase {
	t.Helper()
	var cases []growthCase
	for _, file := range caseFiles(t) {
		vm, srv := decidecase.Read(t, file)
		in := decision.Input{VM: vm, Server: srv, Gone: decidecase.Gone(t, file), Disk: decidecase.Disk(t, file), Budget: decidecase.Budget(t, file), Now: now}
		policy := casePolicy(t, file)
		if plan := policy.Decide(in); plan.Disk != nil && plan.Disk.Op == decision.ExpandDisk {
			cases = append(cases, growthCase{strings.TrimSuffix(filepath.Base(file), ".txtar"), in, policy, plan})
		}
	}
	if len(cases) == 0 {
		t.Fatal("no golden case grows a disk")
	}
	return cases
}

// TestGrowthRefusedCases: for every golden case whose plan grows the disk, the growth refused
// by the API server gives a plan without the disk's action and with the plan's budget action,
// decided on the disk as refused by the API server (which is returned, in.Disk left as it
// was), a status that records the size the claim asks for and says the growth was refused
// (DiskResizeInfeasible, quoting the refusal), by the API server, not the storage, which never
// saw it, and what to do (raise the quota, or ask for less), another look within
// RejectedRetry; and, carried out and decided again on the disk as it is, the growth asked
// again and refused again writes nothing more.
func TestGrowthRefusedCases(t *testing.T) {
	for _, gc := range growthCases(t) {
		in, policy, plan := gc.in, gc.policy, gc.plan
		t.Run(gc.name, func(t *testing.T) {
			asked, before := in.Disk.Requested.String(), *in.Disk
			re, refused := policy.GrowthRefused(in, plan, quotaRefusal)
			if !reflect.DeepEqual(*in.Disk, before) {
				t.Errorf("in.Disk changed: %+v, was %+v", *in.Disk, before)
			}
			if refused == nil || refused.Requested.Cmp(plan.Disk.Spec.Size) != 0 || refused.Growth.State != backend.GrowthInfeasible ||
				refused.Growth.Kept == nil || refused.Growth.Kept.Cmp(before.Requested) != 0 || !strings.Contains(refused.Growth.Message, quotaRefusal) {
				t.Fatalf("disk decided on %+v, want the size asked and the growth refused by the API server, keeping the claim's %s, quoting the refusal",
					refused, before.Requested.String())
			}
			if re.Disk != nil || !reflect.DeepEqual(re.Budget, plan.Budget) {
				t.Errorf("disk action %+v, budget %+v: want none, and the plan's budget %+v", re.Disk, re.Budget, plan.Budget)
			}
			if re.RequeueAfter <= 0 || time.Duration(re.RequeueAfter) > decision.RejectedRetry {
				t.Errorf("looked at again after %v, want within %v", time.Duration(re.RequeueAfter), decision.RejectedRetry)
			}
			if re.Status != nil && re.Status.RootDisk != nil && re.Status.RootDisk.Request != "" && re.Status.RootDisk.Request != asked {
				t.Errorf("status.rootDisk.request %s, want the claim's %s", re.Status.RootDisk.Request, asked)
			}

			w := applyPlanWorld(t, world{vm: in.VM, srv: in.Server, lastGone: in.Gone, disk: in.Disk, budget: in.Budget}, re)
			st := w.vm.Status()
			if c := st.Condition(schema.ConditionDiskResizing); c == nil || c.Reason != decision.ReasonDiskResizeInfeasible || !strings.Contains(c.Message, quotaRefusal) {
				t.Errorf("DiskResizing %+v: want %s quoting the refusal", c, decision.ReasonDiskResizeInfeasible)
			} else if !strings.Contains(c.Message, "the API server refused") || strings.Contains(c.Message, "the storage refused") ||
				!strings.Contains(c.Message, "raise the quota, or ask for less") {
				t.Errorf("DiskResizing says %q: want the API server's refusal, not the storage's, and what to do", c.Message)
			}
			again := decision.Input{VM: w.vm, Server: w.srv, Gone: w.lastGone, Disk: w.disk, Budget: w.budget, Now: now.Add(time.Minute)}
			next := policy.Decide(again)
			if next.Disk == nil || next.Disk.Op != decision.ExpandDisk {
				t.Fatalf("decided again on the disk as it is: disk action %+v, want the growth asked again", next.Disk)
			}
			if re2, _ := policy.GrowthRefused(again, next, quotaRefusal); re2.Status != nil || len(re2.Events) > 0 || re2.Server != nil {
				t.Errorf("refused again, the plan asks for more:\n%s", renderPlan(t, re2))
			}
		})
	}
}

// TestGrowthRefusedGolden: the plan of each golden case whose plan grows the disk, with the
// growth refused by the API server (quotaRefusal), as testdata/growthrefused/<case>.golden:
// the message of the refusal, and all else, for review. The storage's own refusal of a growth
// is the golden case claim/grow-refused.
//
//	go test ./reconcile/decision -run '^TestGrowthRefusedGolden$' -update
func TestGrowthRefusedGolden(t *testing.T) {
	for _, gc := range growthCases(t) {
		t.Run(gc.name, func(t *testing.T) {
			re, _ := gc.policy.GrowthRefused(gc.in, gc.plan, quotaRefusal)
			golden.Check(t, filepath.Join("testdata", "growthrefused", gc.name+".golden"), []byte(renderPlan(t, re)))
		})
	}
}

// TestGrowthRefusedLayouts: the status of a growth the API server refused says the size the
// claim still asks for, and names the fields to change by their paths in the VM's layout: the
// spec's rootDisk (spec.resource.rootDisk in v1alpha1, spec.rootDisk.size in v1), and the
// status field that records the claim's size where the layout has one, none where it has not
// (a CRD of an earlier release, a field map without status.rootDisk.request).
func TestGrowthRefusedLayouts(t *testing.T) {
	file := filepath.Join(claimCases, "grow.txtar")
	raw, _ := decidecase.Input(t, file)
	v1, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	conv, err := convert.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	rawV1, _, err := conv.Convert(raw, k8sschema.GroupVersion{Group: schema.Group, Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	without := func(f schema.Fields) schema.Fields {
		out, left := f.Without(map[string]bool{"status.rootDisk.request": true})
		if len(left) != 1 || out.RootDiskRequest != "" {
			t.Fatalf("layout without status.rootDisk.request: left out %v", left)
		}
		return out
	}
	for name, tc := range map[string]struct {
		raw    []byte
		fields schema.Fields
		want   string // what the message says after the refusal
	}{
		"v1alpha1": {raw, decidecase.Fields(t), "; the storage was not asked, and the claim still asks for 40G (status.rootDisk.request): " +
			"raise the quota, or ask for less (a spec.resource.rootDisk the quota allows, no less than 40G)"},
		"v1alpha1 without status.rootDisk.request": {raw, without(decidecase.Fields(t)), "; the storage was not asked, and the claim still asks for 40G: " +
			"raise the quota, or ask for less (a spec.resource.rootDisk the quota allows, no less than 40G)"},
		"v1": {rawV1, v1, "; the storage was not asked, and the claim still asks for 40G (status.rootDisk.request): " +
			"raise the quota, or ask for less (a spec.rootDisk.size the quota allows, no less than 40G)"},
		"v1 without status.rootDisk.request": {rawV1, without(v1), "; the storage was not asked, and the claim still asks for 40G: " +
			"raise the quota, or ask for less (a spec.rootDisk.size the quota allows, no less than 40G)"},
	} {
		t.Run(name, func(t *testing.T) {
			vm, err := schema.Parse(tc.raw, tc.fields)
			if err != nil {
				t.Fatal(err)
			}
			_, srv := decidecase.Read(t, file)
			in := decision.Input{VM: vm, Server: srv, Disk: decidecase.Disk(t, file), Now: now}
			policy := casePolicy(t, file)
			plan := policy.Decide(in)
			if plan.Disk == nil || plan.Disk.Op != decision.ExpandDisk {
				t.Fatalf("plan %+v: want the disk grown", plan.Disk)
			}
			re, _ := policy.GrowthRefused(in, plan, quotaRefusal)
			if re.Status == nil {
				t.Fatal("no status written")
			}
			c := re.Status.Condition(schema.ConditionDiskResizing)
			if c == nil || !strings.HasSuffix(c.Message, "("+quotaRefusal+")"+tc.want) {
				t.Errorf("DiskResizing %+v: want the message to end with the refusal and %q", c, tc.want)
			}
		})
	}
}

// TestGrowthRefusedWithoutGrowth: a plan that grows no disk, or an input without a disk, is
// no growth refused: the plan is returned as it is, with the disk it was decided on.
func TestGrowthRefusedWithoutGrowth(t *testing.T) {
	file := filepath.Join(claimCases, "grow.txtar")
	vm, srv := decidecase.Read(t, file)
	disk := decidecase.Disk(t, file)
	in := decision.Input{VM: vm, Server: srv, Disk: disk, Now: now}
	policy := casePolicy(t, file)
	grows := policy.Decide(in)
	for name, tc := range map[string]struct {
		in   decision.Input
		plan decision.Plan
	}{
		"no disk action": {in, decision.Plan{Status: grows.Status}},
		"no disk":        {decision.Input{VM: vm, Server: srv, Now: now}, grows},
	} {
		t.Run(name, func(t *testing.T) {
			re, d := policy.GrowthRefused(tc.in, tc.plan, quotaRefusal)
			if renderPlan(t, re) != renderPlan(t, tc.plan) || d != tc.in.Disk {
				t.Errorf("plan\n%s\ndisk %+v: want the plan and the disk as given", renderPlan(t, re), d)
			}
		})
	}
}

// TestGrowthRefusedKeepsBudgetAction: the budget action of the plan whose growth was refused
// is carried out all the same: the decision made again on the refused disk does not replace
// it (the plan's is what the budget was decided on).
func TestGrowthRefusedKeepsBudgetAction(t *testing.T) {
	file := filepath.Join(claimCases, "grow.txtar")
	vm, srv := decidecase.Read(t, file)
	in := decision.Input{VM: vm, Server: srv, Disk: decidecase.Disk(t, file), Now: now}
	policy := casePolicy(t, file)
	plan := policy.Decide(in)
	plan.Budget = &decision.BudgetAction{Op: decision.RecordBudgetKind, Name: "test-vm-block-eviction"}
	if re, _ := policy.GrowthRefused(in, plan, quotaRefusal); !reflect.DeepEqual(re.Budget, plan.Budget) {
		t.Errorf("budget action %+v, want the plan's %+v", re.Budget, plan.Budget)
	}
}
