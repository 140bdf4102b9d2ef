package decision

import (
	"errors"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// ConditionUsageReported says whether status.server.usage is being reported, and why not.
const ConditionUsageReported = schema.ConditionUsageReported

// UsagePolicy says how often a VM's usage is sampled and when a sample is worth a write.
type UsagePolicy struct {
	// Interval is the time between two samples of one VM (the poller adds ±10% jitter).
	Interval time.Duration
	// Threshold is the relative change of cpu or memory that is worth a status write, if the
	// change is also past an absolute floor (usageCPUFloor, usageMemoryFloor).
	Threshold float64
	// MaxInterval is the longest time reported usage goes unwritten while it is available,
	// even if it did not move.
	MaxInterval time.Duration
}

// DefaultUsagePolicy is the usage policy of a controller started without flags.
var DefaultUsagePolicy = UsagePolicy{Interval: time.Minute, Threshold: 0.1, MaxInterval: 10 * time.Minute}

// UsageUpdate is what one usage sample asks to write.
type UsageUpdate struct {
	// Usage is the usage to report; nil with Clear to remove it.
	Usage *schema.Usage
	Clear bool
	// Conditions is the whole conditions list to write, when UsageReported changes; nil to
	// leave the conditions alone.
	Conditions []schema.Condition
}

// DecideUsage decides, from the status a VM carries, one sample (or why there is none), when
// usage was last written, and the time, whether to write: only when usage moved by more than
// the threshold and the floor, MaxInterval passed, or the UsageReported condition changes. A
// server without figures yet, or a failed sample, writes nothing: the next sample will tell.
func (p UsagePolicy) DecideUsage(current schema.Status, generation int64, sample backend.Usage, sampleErr error, lastWrite, now time.Time) (UsageUpdate, bool) {
	now = now.UTC().Truncate(time.Second)
	old := current.Condition(ConditionUsageReported)
	var have *schema.Usage
	if current.Server != nil {
		have = current.Server.Usage
	}
	switch {
	case errors.Is(sampleErr, backend.ErrUsageUnavailable):
		cond := schema.Condition{Type: ConditionUsageReported, Status: schema.ConditionFalse, Reason: ReasonMetricsAPIUnavailable,
			Message: "Usage is not reported: " + sampleErr.Error(), ObservedGeneration: generation, LastTransitionTime: now}
		upd := UsageUpdate{Clear: have != nil}
		if old == nil || old.Status != cond.Status || old.Reason != cond.Reason || old.Message != cond.Message {
			upd.Conditions = schema.SetCondition(current.Conditions, cond)
		}
		return upd, upd.Clear || upd.Conditions != nil
	case sampleErr != nil:
		return UsageUpdate{}, false
	}
	// Millicores and whole bytes: metrics APIs report nanocores, which say nothing more to a
	// reader of the status and would make every sample look new.
	cpu := resource.NewMilliQuantity(int64(math.Round(sample.CPU.AsApproximateFloat64()*1000)), resource.DecimalSI)
	mem := resource.NewQuantity(sample.Memory.Value(), resource.BinarySI)
	got := &schema.Usage{CPU: cpu.String(), Memory: mem.String()}
	upd := UsageUpdate{Usage: got}
	if old == nil || old.Status != schema.ConditionTrue {
		upd.Conditions = schema.SetCondition(current.Conditions, schema.Condition{Type: ConditionUsageReported, Status: schema.ConditionTrue,
			Reason: ReasonUsageReported, Message: "Usage comes from the metrics.k8s.io API", ObservedGeneration: generation, LastTransitionTime: now})
	}
	write := upd.Conditions != nil || have == nil || !now.Before(lastWrite.Add(p.MaxInterval)) ||
		moved(have.CPU, *cpu, p.Threshold, usageCPUFloor) || moved(have.Memory, *mem, p.Threshold, usageMemoryFloor)
	return upd, write
}

// The absolute floors under which a move of usage is not worth a write, whatever the
// threshold says. Relative to a figure near zero any move is large (2m to 3m of cpu is 50%),
// and a VM that idles moves by that much from one sample to the next, so without a floor an
// idle VM is written at every sample. The floors are fixed amounts, not fractions of what the
// VM asks for: the noise they hide (the guest's timers and agents, page cache coming and
// going) is of about the same size in a small VM as in a large one, and a fraction of a small
// request would be below the millicore a figure is rounded to. Above a figure of floor /
// threshold (100m of cpu, 40Mi of memory at 10%) the relative threshold is the larger and
// decides alone; a move within a floor still shows at the next write that MaxInterval forces.
const (
	usageCPUFloor    = 0.01    // cores: 10m, a hundredth of a core
	usageMemoryFloor = 4 << 20 // bytes: 4Mi
)

// moved reports whether a quantity changed by more than floor and by more than threshold,
// relative to the reported value (from zero, any change past the floor counts; from a value
// that does not parse, any change).
func moved(reported string, now resource.Quantity, threshold, floor float64) bool {
	q, err := resource.ParseQuantity(reported)
	if err != nil {
		return true
	}
	a, b := q.AsApproximateFloat64(), now.AsApproximateFloat64()
	d := math.Abs(b - a)
	if d <= floor {
		return false
	}
	return a == 0 || d/math.Abs(a) > threshold
}

// usageReported drops the UsageReported condition from conds, the conditions of st (a status
// a reconcile writes), once st no longer bears it out, so that it goes in the same write as
// the usage it describes. True says status.server.usage holds the server's figures: it goes
// with them (report drops usage once the VM is not Active on the server it was sampled from).
// False says why an Active VM's usage is not sampled: it goes once the VM is not Active or has
// no server, since nothing is sampled for it then; while it is, the poller keeps it or turns it
// True. The poller writes no status for a VM that is not Active, so a condition left here
// would stay for as long as the VM does.
func usageReported(conds []schema.Condition, st *schema.Status) []schema.Condition {
	i := slices.IndexFunc(conds, func(c schema.Condition) bool { return c.Type == ConditionUsageReported })
	if i < 0 {
		return conds
	}
	sampled := st.Phase == schema.PhaseActive && st.Server != nil
	if !sampled || conds[i].Status == schema.ConditionTrue && st.Server.Usage == nil {
		return schema.RemoveCondition(conds, ConditionUsageReported)
	}
	return conds
}
