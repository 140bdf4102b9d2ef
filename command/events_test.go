package command

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// slowSink is an API server that takes a while to store each Event, and gives up on one whose
// request is cancelled.
type slowSink struct {
	mu     sync.Mutex
	stored []string
}

func (s *slowSink) store(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(100 * time.Millisecond):
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stored = append(s.stored, e.Reason)
	return e, nil
}

func (s *slowSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.store(ctx, e)
}

func (s *slowSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return s.store(ctx, e)
}

func (s *slowSink) Patch(ctx context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return s.store(ctx, e)
}

// TestEventsFlushed: the Events recorded up to the end of the drain, the last write's
// included, reach the API server before run returns, though the server takes a while for
// each. Sending stopped at SIGTERM: the Events of the writes made while draining were dropped.
func TestEventsFlushed(t *testing.T) {
	sink := &slowSink{}
	s, err := startEvents(sink)
	if err != nil {
		t.Fatal(err)
	}
	recorder := s.NewRecorder(scheme.Scheme, "vm-controller")
	regarding := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm", UID: "u1"}}
	for _, reason := range []string{"ServerCreated", "Active"} { // a reconcile finishing during the drain
		recorder.Eventf(regarding, nil, corev1.EventTypeNormal, reason, "Reconcile", "%s", reason)
	}
	start := time.Now()
	s.flush(eventsFlushTimeout)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.stored) != 2 {
		t.Errorf("stored %q after the flush (%s), want both Events", sink.stored, time.Since(start).Round(time.Millisecond))
	}
}
