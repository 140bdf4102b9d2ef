package schema

import (
	"strconv"
	"time"

	"github.com/tidwall/gjson"
	"gopkg.in/yaml.v3"
)

// RunStrategy says when a VM has a running server: KubeVirt's run strategies, with their
// meanings (docs/run-strategies.md). In v1 it is spec.runStrategy, in KubeVirt's words; the
// older versions write it as spec.action, in words of their own (a field map's action words).
type RunStrategy string

// The run strategies.
const (
	// RunAlways keeps a server running: one that shuts down is replaced at once, one that
	// fails after a backoff.
	RunAlways RunStrategy = "Always"
	// RunRerunOnFailure replaces a server that fails (after the backoff); a clean shutdown
	// of the guest leaves the VM stopped.
	RunRerunOnFailure RunStrategy = "RerunOnFailure"
	// RunOnce starts a server once and never replaces it, whatever its end.
	RunOnce RunStrategy = "Once"
	// RunManual starts and stops a server only when asked to (the start and stop requests);
	// a server that ends is not replaced.
	RunManual RunStrategy = "Manual"
	// RunHalted keeps no server, and keeps the object.
	RunHalted RunStrategy = "Halted"
)

// RunStrategies lists every run strategy, in the order the references list them.
var RunStrategies = []RunStrategy{RunAlways, RunRerunOnFailure, RunOnce, RunManual, RunHalted}

// StrategyWord is the layout's word for s in its action field; "" when the layout cannot
// express s (a field map without a word for it: a documented limit of such a layout).
func (f Fields) StrategyWord(s RunStrategy) string {
	switch s {
	case RunAlways:
		return f.activeValue()
	case RunHalted:
		return f.inactiveValue()
	case RunRerunOnFailure:
		return f.RerunOnFailureValue
	case RunOnce:
		return f.OnceValue
	case RunManual:
		return f.ManualValue
	}
	return ""
}

// StrategyOf is the run strategy that the layout's word w means; false when w means none.
func (f Fields) StrategyOf(w string) (RunStrategy, bool) {
	for _, s := range RunStrategies {
		if word := f.StrategyWord(s); word != "" && word == w {
			return s, true
		}
	}
	return "", false
}

// StrategyWords lists the layout's words, in the order of RunStrategies, leaving out the
// strategies it cannot express.
func (f Fields) StrategyWords() []string {
	var out []string
	for _, s := range RunStrategies {
		if w := f.StrategyWord(s); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// The start and stop requests: each is one annotation a user (or `kubectl vm start|stop`)
// writes with the time of the request, in the convention of the restart annotation. The
// controller acts on a value once and records it in status (startRequestedAt,
// stopRequestedAt); of two new requests the later one wins. They mean something under the
// strategies that start and stop on request (Manual, RerunOnFailure, Once); under Always and
// Halted the spec says it all, and a request is recorded without effect.
const (
	AnnotationStartRequestedAt = "cloudnative.czs/startRequestedAt"
	AnnotationStopRequestedAt  = "cloudnative.czs/stopRequestedAt"
	// AnnotationStopGracePeriod is the grace period, in whole seconds, of the deletion of the
	// server that a stop makes (a stop request, or runStrategy Halted); `kubectl vm stop
	// --grace-period N` writes it with the stop, --force writes 0. Absent: the backend's
	// default.
	AnnotationStopGracePeriod = "cloudnative.czs/stopGracePeriodSeconds"
)

// Request is a start or stop request read from the VM: the annotation's value, "" when there
// is none or the layout has no status field to record it in, and its time (zero when the
// value is not an RFC 3339 time: such a request is older than any timed one).
type Request struct {
	Value string
	At    time.Time
}

// StartRequested and StopRequested are the start and stop requests the VM carries.
func (vm VirtualMachine) StartRequested() Request {
	return vm.request(startAnnotationPath, vm.fields.StartRequestedAt)
}

// StopRequested: see StartRequested.
func (vm VirtualMachine) StopRequested() Request {
	return vm.request(stopAnnotationPath, vm.fields.StopRequestedAt)
}

// The gjson paths of the annotations read on every decision, escaped once.
var (
	startAnnotationPath     = "metadata.annotations." + escapeGJSON(AnnotationStartRequestedAt)
	stopAnnotationPath      = "metadata.annotations." + escapeGJSON(AnnotationStopRequestedAt)
	stopGraceAnnotationPath = "metadata.annotations." + escapeGJSON(AnnotationStopGracePeriod)
)

// request reads the request at the annotation's gjson path, for a layout that records
// requests at recordedAt.
func (vm VirtualMachine) request(annotationPath, recordedAt string) Request {
	if recordedAt == "" {
		return Request{}
	}
	return RequestOf(gjson.GetBytes(vm.raw, annotationPath).String())
}

// RequestOf is the request of value v, an annotation's or the one status records of it.
func RequestOf(v string) Request {
	if v == "" {
		return Request{}
	}
	return Request{Value: v, At: parseTime(v)}
}

// StopGracePeriod is the grace period the stop annotation asks for; false when there is
// none, or its value is not a whole number of seconds from 0 up.
func (vm VirtualMachine) StopGracePeriod() (time.Duration, bool) {
	v := gjson.GetBytes(vm.raw, stopGraceAnnotationPath).String()
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// strategyWords reads a field map's optional words of the run strategies other than Always
// and Halted (spec.action.rerunOnFailure, once, manual): each a non-empty string, no two
// strategies with one word.
func strategyWords(f *Fields, a fileAction, errs *problems) {
	for _, v := range []struct {
		key string
		s   scalar
		dst *string
	}{
		{"spec.action.rerunOnFailure", a.RerunOnFailure, &f.RerunOnFailureValue},
		{"spec.action.once", a.Once, &f.OnceValue},
		{"spec.action.manual", a.Manual, &f.ManualValue},
	} {
		switch {
		case !v.s.set:
		case v.s.kind != yaml.ScalarNode || v.s.tag != "!!str" || v.s.value == "":
			errs.add(v.s.line, "%s: want a non-empty string, got %s (quote it)", v.key, describe(v.s))
		default:
			for _, other := range []string{f.ActiveValue, f.InactiveValue, f.RerunOnFailureValue, f.OnceValue, f.ManualValue} {
				if other != "" && other == v.s.value {
					errs.add(v.s.line, "%s: %q is also the word of another run strategy", v.key, v.s.value)
				}
			}
			*v.dst = v.s.value
		}
	}
}

// quoted lists words as "a", "b" or "c", for an error message.
func quoted(words []string) string {
	out := ""
	for i, w := range words {
		switch {
		case i == 0:
		case i == len(words)-1:
			out += " or "
		default:
			out += ", "
		}
		out += strconv.Quote(w)
	}
	return out
}

// pathValue is one value of a status patch at its path; a nil value removes the field.
type pathValue struct {
	path string
	v    any
}

// values are the run strategies' fields of a status patch, each set or removed.
func (r RunStrategyStatus) values(f Fields) []pathValue {
	var next, start, stop any
	if !r.NextRetryTime.IsZero() {
		next = r.NextRetryTime.UTC().Format(time.RFC3339)
	}
	if r.StartRequestedAt != "" {
		start = r.StartRequestedAt
	}
	if r.StopRequestedAt != "" {
		stop = r.StopRequestedAt
	}
	return []pathValue{{f.NextRetryTime, next}, {f.StartRequestedAt, start}, {f.StopRequestedAt, stop}}
}

// runStrategyStatus is the run strategies' status fields, from their values as read.
func runStrategyStatus(next, start, stop gjson.Result) RunStrategyStatus {
	return RunStrategyStatus{NextRetryTime: parseTime(next.String()), StartRequestedAt: start.String(), StopRequestedAt: stop.String()}
}
