// The Events of run: sent while the controller runs, and those of its last writes sent before
// it exits.

package command

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
)

// eventsFlushTimeout bounds how long run waits, after the drain, for the Events still being
// sent: inside the Deployment's termination grace period (40s) once --shutdown-timeout's
// default (30s) has passed.
const eventsFlushTimeout = 5 * time.Second

// eventSender sends the Events recorded through its broadcaster to a sink until flush, after
// the drain: the Events of the writes made while draining are sent too. Sending until
// SIGTERM only dropped them: the broadcaster stopped handing Events over, and the requests in
// flight were cancelled.
type eventSender struct {
	events.EventBroadcaster
	sink    *countingSink
	stop    context.CancelFunc
	flushed sync.Once
}

// startEvents starts sending the Events recorded through the returned broadcaster to sink.
func startEvents(sink events.EventSink) (*eventSender, error) {
	s := &eventSender{sink: &countingSink{sink: sink}}
	s.EventBroadcaster = events.NewBroadcaster(s.sink)
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	if err := s.StartRecordingToSinkWithContext(ctx); err != nil {
		stop()
		return nil, err
	}
	return s, nil
}

// flush sends the Events recorded so far, waiting up to timeout, and stops sending. client-go
// offers no flush, and hands each Event on from a goroutine of its own twice: the recorder to
// the broadcaster, and the broadcaster to a request. So flush waits for both: for the requests
// to settle (settle), then takes no more Events, the broadcaster handing every one it has to
// its request (Shutdown), and waits for those requests to settle. (A request that fails is
// retried only after 10s, past any flush: it is dropped, as at any stop.)
//
// Only the first call does so; later ones return at once. A leader flushes at the end of its
// work, before it releases its Lease (thenFlush).
func (s *eventSender) flush(timeout time.Duration) {
	s.flushed.Do(func() {
		deadline := time.Now().Add(timeout)
		s.settle(deadline)
		s.Shutdown()
		s.settle(deadline)
		s.stop()
	})
}

// settle waits until no request is under way at two looks flushPoll apart, or deadline: time
// enough for the goroutines that hand Events on to have started their requests.
func (s *eventSender) settle(deadline time.Time) {
	for idle := 0; idle < 2 && time.Now().Before(deadline); {
		if s.sink.inFlight.Load() == 0 {
			idle++
		} else {
			idle = 0
		}
		time.Sleep(flushPoll)
	}
}

// flushPoll is how often flush looks at the requests under way.
const flushPoll = 20 * time.Millisecond

// countingSink is a sink that counts its requests under way.
type countingSink struct {
	sink     events.EventSink
	inFlight atomic.Int64
}

func (c *countingSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	return c.sink.Create(ctx, e)
}

func (c *countingSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	return c.sink.Update(ctx, e)
}

func (c *countingSink) Patch(ctx context.Context, old *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	return c.sink.Patch(ctx, old, data)
}

// thenFlush is work followed by the flush of the Events it recorded, as one piece of work: a
// leader sends the Events of its last writes while it still holds its Lease, whose release
// fences every later write (package leader), so that they are not refused on the way out.
func thenFlush(work func(context.Context) error, s *eventSender) func(context.Context) error {
	return func(ctx context.Context) error {
		err := work(ctx)
		s.flush(eventsFlushTimeout)
		return err
	}
}
