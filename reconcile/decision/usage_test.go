package decision_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestDecideUsage: a usage sample is written only when it moved past the threshold and the
// absolute floor (10m of cpu, 4Mi of memory), when the maximum interval passed, or when the
// UsageReported condition changes; a missing metrics API removes usage and says why; a server
// without figures yet writes nothing.
func TestDecideUsage(t *testing.T) {
	p := decision.UsagePolicy{Interval: time.Minute, Threshold: 0.1, MaxInterval: 10 * time.Minute}
	reported := schema.Condition{Type: decision.ConditionUsageReported, Status: schema.ConditionTrue, Reason: decision.ReasonUsageReported,
		Message: "Usage comes from the metrics.k8s.io API", LastTransitionTime: now.Add(-time.Hour)}
	ready := schema.Condition{Type: schema.ConditionReady, Status: schema.ConditionTrue, Reason: decision.ReasonServerReady, LastTransitionTime: now.Add(-time.Hour)}
	status := func(u *schema.Usage, conds ...schema.Condition) schema.Status {
		return schema.Status{Phase: schema.PhaseActive, Server: &schema.ServerStatus{Name: "s", ID: "1", State: "Running", Usage: u}, Conditions: conds}
	}
	sample := func(cpu, mem string) backend.Usage {
		return backend.Usage{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem)}
	}
	tests := map[string]struct {
		current   schema.Status
		sample    backend.Usage
		err       error
		lastWrite time.Time
		write     bool
		usage     string // "cpu/memory" written, "" for none
		clear     bool
		condition string // UsageReported status/reason written, "" when the conditions are left alone
	}{
		"first sample":                         {status(nil, ready), sample("250010900n", "100Mi"), nil, time.Time{}, true, "250m/100Mi", false, "True/UsageReported"},
		"small move":                           {status(&schema.Usage{CPU: "250m", Memory: "100Mi"}, ready, reported), sample("260m", "104Mi"), nil, now.Add(-time.Minute), false, "", false, ""},
		"cpu moved past threshold":             {status(&schema.Usage{CPU: "250m", Memory: "100Mi"}, ready, reported), sample("300m", "100Mi"), nil, now.Add(-time.Minute), true, "300m/100Mi", false, ""},
		"memory from zero":                     {status(&schema.Usage{CPU: "250m", Memory: "0"}, ready, reported), sample("250m", "32Mi"), nil, now.Add(-time.Minute), true, "250m/32Mi", false, ""},
		"memory from zero, within the floor":   {status(&schema.Usage{CPU: "250m", Memory: "0"}, ready, reported), sample("250m", "4Mi"), nil, now.Add(-time.Minute), false, "", false, ""},
		"cpu past threshold, within the floor": {status(&schema.Usage{CPU: "20m", Memory: "100Mi"}, ready, reported), sample("29m", "100Mi"), nil, now.Add(-time.Minute), false, "", false, ""},
		"cpu past threshold and floor":         {status(&schema.Usage{CPU: "20m", Memory: "100Mi"}, ready, reported), sample("31m", "100Mi"), nil, now.Add(-time.Minute), true, "31m/100Mi", false, ""},
		"reported usage unreadable":            {status(&schema.Usage{CPU: "lots", Memory: "100Mi"}, ready, reported), sample("250m", "100Mi"), nil, now.Add(-time.Minute), true, "250m/100Mi", false, ""},
		"max interval passed":                  {status(&schema.Usage{CPU: "250m", Memory: "100Mi"}, ready, reported), sample("250m", "100Mi"), nil, now.Add(-10 * time.Minute), true, "250m/100Mi", false, ""},
		"no figures yet":                       {status(nil, ready), backend.Usage{}, fmt.Errorf("pod metrics: %w", backend.ErrNoUsage), time.Time{}, false, "", false, ""},
		"transient error":                      {status(&schema.Usage{CPU: "250m", Memory: "100Mi"}, ready, reported), backend.Usage{}, fmt.Errorf("timeout"), time.Time{}, false, "", false, ""},
		"metrics API gone":                     {status(&schema.Usage{CPU: "250m", Memory: "100Mi"}, ready, reported), backend.Usage{}, fmt.Errorf("no metrics.k8s.io: %w", backend.ErrUsageUnavailable), now.Add(-time.Minute), true, "", true, "False/MetricsAPIUnavailable"},
		"metrics API still gone": {status(nil, ready, schema.Condition{Type: decision.ConditionUsageReported, Status: schema.ConditionFalse, Reason: decision.ReasonMetricsAPIUnavailable,
			Message: "Usage is not reported: no metrics.k8s.io: usage figures are not available"}), backend.Usage{}, fmt.Errorf("no metrics.k8s.io: %w", backend.ErrUsageUnavailable), now.Add(-time.Hour), false, "", false, ""},
		"metrics API back": {status(nil, ready, schema.Condition{Type: decision.ConditionUsageReported, Status: schema.ConditionFalse, Reason: decision.ReasonMetricsAPIUnavailable}),
			sample("10m", "32Mi"), nil, time.Time{}, true, "10m/32Mi", false, "True/UsageReported"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			upd, write := p.DecideUsage(tc.current, 1, tc.sample, tc.err, tc.lastWrite, now)
			if write != tc.write {
				t.Fatalf("write = %v, want %v (%+v)", write, tc.write, upd)
			}
			if !write {
				return
			}
			usage := ""
			if upd.Usage != nil {
				usage = upd.Usage.CPU + "/" + upd.Usage.Memory
			}
			cond := ""
			if upd.Conditions != nil {
				c := schema.Status{Conditions: upd.Conditions}.Condition(decision.ConditionUsageReported)
				cond = string(c.Status) + "/" + c.Reason
				if r := (schema.Status{Conditions: upd.Conditions}).Condition(schema.ConditionReady); r == nil || *r != ready {
					t.Errorf("the Ready condition was not kept: %+v", upd.Conditions)
				}
			}
			if usage != tc.usage || upd.Clear != tc.clear || cond != tc.condition {
				t.Errorf("got usage %q clear %v condition %q, want %q %v %q", usage, upd.Clear, cond, tc.usage, tc.clear, tc.condition)
			}
		})
	}
}

// TestIdleUsageWrites: an idle VM whose cpu hovers at a few millicores is written only when
// the maximum interval passes, not at every sample. Relative to a figure of 2m, a move to 3m
// is 50%, far past the threshold; only the absolute floor tells such noise from a change. A
// real move (the VM gets busy) is still written at the first sample that shows it.
func TestIdleUsageWrites(t *testing.T) {
	p := decision.DefaultUsagePolicy
	reported := schema.Condition{Type: decision.ConditionUsageReported, Status: schema.ConditionTrue, Reason: decision.ReasonUsageReported,
		Message: "Usage comes from the metrics.k8s.io API"}
	// One sample a minute: an hour of idling (cpu between 0 and 4m, memory a few KiB either
	// side of 100Mi), then the VM gets busy at minute 61.
	cpus := []string{"2m", "3m", "2m", "1m", "2m", "4m", "3m", "2m", "0", "1m"}
	mems := []string{"100Mi", "102412Ki", "102388Ki", "100Mi", "102420Ki"}
	usage := &schema.Usage{CPU: "2m", Memory: "100Mi"}
	last := now
	var written []string
	for i := 1; i <= 61; i++ {
		at := now.Add(time.Duration(i) * time.Minute)
		cpu, mem := cpus[i%len(cpus)], mems[i%len(mems)]
		if i == 61 {
			cpu = "500m"
		}
		st := schema.Status{Phase: schema.PhaseActive, Server: &schema.ServerStatus{Name: "s", ID: "1", Usage: usage}, Conditions: []schema.Condition{reported}}
		upd, write := p.DecideUsage(st, 1, backend.Usage{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem)}, nil, last, at)
		if !write {
			continue
		}
		if upd.Conditions != nil || upd.Clear || upd.Usage == nil {
			t.Fatalf("minute %d: want only usage written, got %+v", i, upd)
		}
		usage, last = upd.Usage, at
		written = append(written, fmt.Sprintf("%d:%s", i, upd.Usage.CPU))
	}
	// Every tenth minute for the maximum interval, and the busy sample at once.
	want := []string{"10:2m", "20:2m", "30:2m", "40:2m", "50:2m", "60:2m", "61:500m"}
	if !slices.Equal(written, want) {
		t.Errorf("written at (minute:cpu) %v, want %v", written, want)
	}
}
