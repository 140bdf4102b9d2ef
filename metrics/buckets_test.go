package metrics_test

import (
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cloudnative-czs/vm-controller/command"
	"github.com/cloudnative-czs/vm-controller/metrics"
)

// TestReconcileBucketsPastTimeout: the top finite bucket of
// vmcontroller_reconcile_duration_seconds lies above run's default --reconcile-timeout, read
// from the flag's declaration, so that a reconcile that runs to its deadline is counted in a
// bucket of its own. The buckets ended at 16.384 s under a timeout of 1m: a reconcile of 20 s
// or of 60 s fell in +Inf alike, and histogram_quantile, so VMControllerReconcileSlow's value
// and the dashboard, never read more than 16.38 s.
func TestReconcileBucketsPastTimeout(t *testing.T) {
	timeout := defaultReconcileTimeout(t)
	buckets := metrics.ReconcileBuckets
	top := time.Duration(buckets[len(buckets)-1] * float64(time.Second))
	if top <= timeout {
		t.Errorf("the top bucket of vmcontroller_reconcile_duration_seconds is %v, not above the default --reconcile-timeout %v: slower reconciles fall in +Inf and histogram_quantile stops at %v",
			top, timeout, top)
	}
}

// defaultReconcileTimeout is the default of run's --reconcile-timeout, as the command line
// declares it.
func defaultReconcileTimeout(t *testing.T) time.Duration {
	t.Helper()
	for _, c := range command.App("test").Commands {
		if c.Name != "run" {
			continue
		}
		for _, f := range c.Flags {
			if d, ok := f.(*cli.DurationFlag); ok && d.Name == "reconcile-timeout" {
				return d.Value
			}
		}
	}
	t.Fatal("run has no flag --reconcile-timeout")
	return 0
}
