package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cloudnative-czs/vm-controller/reconcile"
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
