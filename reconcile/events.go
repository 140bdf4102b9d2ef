package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// WarningsOnly records the Warning events of r and drops the Normal ones (CreatingServer,
// ServerReady and the like). Every event is an object the API server writes to etcd; at many
// VMs, two Normal events per VM brought to Active are a measurable part of what the API server
// does (docs/dev/benchmarks.md), while the status already says the same. What went wrong (a failed or
// missing server, an invalid spec, a lost node) is still recorded.
func WarningsOnly(r events.EventRecorder) events.EventRecorder { return warningsOnly{r} }

type warningsOnly struct{ r events.EventRecorder }

func (w warningsOnly) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if eventtype == decision.EventWarning {
		w.r.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}
}

// goneNamespaceFor is how long Events for a namespace the API server called terminating are
// dropped without a request: a namespace's deletion takes seconds to minutes, and one that
// lingers (a finalizer of someone else's) is asked again after this.
const goneNamespaceFor = time.Minute

// SkipTerminatingNamespaces is sink, but for the Events of a namespace being deleted. The API
// server refuses to create anything there; a namespace deleted with many VMs in it took one
// refused create and one ERROR line of the events library per VM, as its servers went
// (ServerMissing) before its VMs did. The first refusal marks the namespace for
// goneNamespaceFor: its Events are dropped meanwhile without a request, each refusal is
// answered as a success (the Event could never be stored, and is not an error of the
// controller's), and the namespace is logged once, at debug level.
func SkipTerminatingNamespaces(sink events.EventSink, log *slog.Logger, now func() time.Time) events.EventSink {
	return &skipTerminating{sink: sink, log: log, now: now, gone: map[string]time.Time{}}
}

type skipTerminating struct {
	sink events.EventSink
	log  *slog.Logger
	now  func() time.Time
	mu   sync.Mutex
	gone map[string]time.Time // namespace -> until when its Events are dropped
}

func (s *skipTerminating) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.send(e, func() (*eventsv1.Event, error) { return s.sink.Create(ctx, e) })
}

func (s *skipTerminating) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.send(e, func() (*eventsv1.Event, error) { return s.sink.Update(ctx, e) })
}

func (s *skipTerminating) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return s.send(old, func() (*eventsv1.Event, error) { return s.sink.Patch(ctx, old, data) })
}

// send makes the request unless e's namespace is known to be going, and notes the namespace
// when the API server says it is.
func (s *skipTerminating) send(e *eventsv1.Event, request func() (*eventsv1.Event, error)) (*eventsv1.Event, error) {
	ns := e.Namespace
	s.mu.Lock()
	until, known := s.gone[ns]
	if known && s.now().After(until) {
		delete(s.gone, ns)
		known = false
	}
	s.mu.Unlock()
	if known {
		return e, nil
	}
	out, err := request()
	if !namespaceGoing(err) {
		return out, err
	}
	s.mu.Lock()
	_, noted := s.gone[ns]
	s.gone[ns] = s.now().Add(goneNamespaceFor)
	s.mu.Unlock()
	if !noted {
		s.log.Debug("Namespace is being deleted: dropping its Events", "namespace", ns, "for", goneNamespaceFor)
	}
	return e, nil
}
