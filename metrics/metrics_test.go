package metrics

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cloudnative-czs/vm-controller/reconcile"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// gathered returns the samples of one metric family of a registry, by the value of label.
func gathered(t *testing.T, reg *prometheus.Registry, family, label string) map[string]*dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.Metric{}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out[l.GetValue()] = m
				}
			}
		}
	}
	return out
}

// TestPhasesExportedAtZero: every phase is exported, 0 when no VM is in it. A phase that
// emptied used to vanish from the scrape, and Prometheus' min_over_time, which skips the
// gap, held VirtualMachinesStuckCreating true for half an hour after one VM started.
func TestPhasesExportedAtZero(t *testing.T) {
	m := &Metrics{registry: prometheus.NewRegistry()}
	counts := map[string]int{string(schema.PhaseCreating): 1, "FromANewerRelease": 2}
	m.CountPhases(func() map[string]int { return counts })

	got := gathered(t, m.registry, Namespace+"_vms", "phase")
	if v := got[string(schema.PhaseCreating)].GetGauge().GetValue(); v != 1 {
		t.Errorf("Creating = %v with one VM Creating, want 1", v)
	}
	counts = map[string]int{string(schema.PhaseActive): 1}
	got = gathered(t, m.registry, Namespace+"_vms", "phase")
	for _, p := range schema.Phases {
		s, ok := got[string(p)]
		if !ok {
			t.Errorf("phase %s is not exported", p)
			continue
		}
		want := float64(counts[string(p)])
		if v := s.GetGauge().GetValue(); v != want {
			t.Errorf("phase %s = %v, want %v", p, v, want)
		}
	}
	if _, ok := got[reconcile.NoPhase]; !ok {
		t.Errorf("phase %s (VMs without a status yet) is not exported", reconcile.NoPhase)
	}
	if _, ok := got["FromANewerRelease"]; ok {
		t.Errorf("a phase no VM is in any more, and no known one, is still exported")
	}
}

// TestPhasesExportedAsCounted: a phase count reports that is none of the known ones (a
// status written by another release) is exported too.
func TestPhasesExportedAsCounted(t *testing.T) {
	m := &Metrics{registry: prometheus.NewRegistry()}
	m.CountPhases(func() map[string]int { return map[string]int{"FromANewerRelease": 2} })
	got := gathered(t, m.registry, Namespace+"_vms", "phase")
	if v := got["FromANewerRelease"].GetGauge().GetValue(); v != 2 {
		t.Errorf("FromANewerRelease = %v, want 2", v)
	}
	if n := len(got); n != len(reconcile.CountedPhases())+1 {
		t.Errorf("%d phases exported, want the %d known and the one counted: %v", n, len(reconcile.CountedPhases()), got)
	}
}

// TestResultsBornAtZero: every result of a reconcile has its series from the start, at 0,
// in the counter and the histogram. The panic series used to be born at 1 on the first
// panic, which increase() reads as no increase: VMControllerReconcilePanics missed it.
func TestResultsBornAtZero(t *testing.T) {
	m := exercised() // one success recorded
	counts := gathered(t, m.registry, Namespace+"_reconcile_total", "result")
	durations := gathered(t, m.registry, Namespace+"_reconcile_duration_seconds", "result")
	if len(reconcile.Results) < 2 {
		t.Fatalf("reconcile.Results = %v", reconcile.Results)
	}
	for _, r := range reconcile.Results {
		want := 0.0
		if r == reconcile.ResultSuccess {
			want = 1
		}
		c, ok := counts[r]
		if !ok {
			t.Errorf("%s_reconcile_total{result=%q} is not exported before the first such reconcile", Namespace, r)
		} else if v := c.GetCounter().GetValue(); v != want {
			t.Errorf("%s_reconcile_total{result=%q} = %v, want %v", Namespace, r, v, want)
		}
		d, ok := durations[r]
		if !ok {
			t.Errorf("%s_reconcile_duration_seconds{result=%q} is not exported before the first such reconcile", Namespace, r)
		} else if n := d.GetHistogram().GetSampleCount(); n != uint64(want) {
			t.Errorf("%s_reconcile_duration_seconds_count{result=%q} = %v, want %v", Namespace, r, n, want)
		}
	}
}

// reasonSamples returns the samples of vmcontroller_vm_reasons by phase and reason.
func reasonSamples(t *testing.T, reg *prometheus.Registry) map[reconcile.PhaseReason]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[reconcile.PhaseReason]float64{}
	for _, f := range families {
		if f.GetName() != Namespace+"_vm_reasons" {
			continue
		}
		for _, m := range f.GetMetric() {
			var pr reconcile.PhaseReason
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "phase":
					pr.Phase = l.GetValue()
				case "reason":
					pr.Reason = l.GetValue()
				}
			}
			if _, twice := out[pr]; twice {
				t.Errorf("phase %q reason %q is exported twice", pr.Phase, pr.Reason)
			}
			out[pr] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestReasonsExported: VMs are counted by phase and reason, every pair the controller writes
// exported at 0 when no VM has it (as every phase is: TestPhasesExportedAtZero), and the
// reasons the controller does not write counted together as Other, whatever their number:
// status.reason is a free string, and a label of each would let whoever writes statuses make
// series at will.
func TestReasonsExported(t *testing.T) {
	m := &Metrics{registry: prometheus.NewRegistry()}
	inactive, failed := string(schema.PhaseInactive), string(schema.PhaseFailed)
	counts := map[reconcile.PhaseReason]int{
		{Phase: inactive, Reason: decision.ReasonNodeLost}:                    2,
		{Phase: string(schema.PhaseUnknown), Reason: decision.ReasonNodeLost}: 1,
		{Phase: failed, Reason: decision.ReasonInvalidSpec}:                   1,
		{Phase: failed, Reason: "WrittenByHand"}:                              1,
		{Phase: failed, Reason: "AndAnother"}:                                 2,
		{Phase: inactive, Reason: "AndAnother"}:                               1,
		{Phase: reconcile.NoPhase}:                                            1,
	}
	m.CountReasons(func() map[reconcile.PhaseReason]int { return counts })
	got := reasonSamples(t, m.registry)
	want := map[reconcile.PhaseReason]float64{}
	for _, pr := range reconcile.CountedReasons() {
		want[pr] = 0
	}
	want[reconcile.PhaseReason{Phase: inactive, Reason: decision.ReasonNodeLost}] = 2
	want[reconcile.PhaseReason{Phase: string(schema.PhaseUnknown), Reason: decision.ReasonNodeLost}] = 1
	want[reconcile.PhaseReason{Phase: failed, Reason: decision.ReasonInvalidSpec}] = 1
	want[reconcile.PhaseReason{Phase: failed, Reason: OtherReason}] = 3
	want[reconcile.PhaseReason{Phase: inactive, Reason: OtherReason}] = 1
	want[reconcile.PhaseReason{Phase: reconcile.NoPhase}] = 1
	if !reflect.DeepEqual(got, want) {
		t.Errorf("exported\n%v\nwant\n%v", got, want)
	}

	// Once the VMs have gone, the pairs the controller writes read 0, and the Other ones go.
	counts = map[reconcile.PhaseReason]int{}
	got = reasonSamples(t, m.registry)
	if n := len(got); n != len(reconcile.CountedReasons()) {
		t.Errorf("%d pairs exported without VMs, want the %d known: %v", n, len(reconcile.CountedReasons()), got)
	}
	for pr, v := range got {
		if v != 0 {
			t.Errorf("phase %s reason %s = %v without VMs", pr.Phase, pr.Reason, v)
		}
	}
}

// TestReasonsSumToPhases: the reasons of a phase add up to its count in vmcontroller_vms,
// whatever someone else wrote: sum without (reason) of the one is the other.
func TestReasonsSumToPhases(t *testing.T) {
	m := &Metrics{registry: prometheus.NewRegistry()}
	reasons := map[reconcile.PhaseReason]int{
		{Phase: string(schema.PhaseCreating), Reason: decision.ReasonServerCreating}: 3,
		{Phase: string(schema.PhaseCreating), Reason: decision.ReasonNodeLost}:       1,
		{Phase: string(schema.PhaseCreating), Reason: "WrittenByHand"}:               2,
		{Phase: "FromANewerRelease", Reason: "Hibernated"}:                           1,
	}
	phases := map[string]int{}
	for pr, n := range reasons {
		phases[pr.Phase] += n
	}
	m.CountPhases(func() map[string]int { return phases })
	m.CountReasons(func() map[reconcile.PhaseReason]int { return reasons })
	sums := map[string]float64{}
	for pr, v := range reasonSamples(t, m.registry) {
		sums[pr.Phase] += v
	}
	byPhase := gathered(t, m.registry, Namespace+"_vms", "phase")
	if len(byPhase) != len(sums) {
		t.Errorf("%d phases in %s_vms, %d in %s_vm_reasons", len(byPhase), Namespace, len(sums), Namespace)
	}
	for phase, s := range byPhase {
		if v := s.GetGauge().GetValue(); v != sums[phase] {
			t.Errorf("phase %s: %v VMs, %v by reason", phase, v, sums[phase])
		}
	}
}
