package leader

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Wrap is rt with every request but a read (GET, HEAD: lists and watches included) refused
// while the fence is closed; nil: rt as it is. A nil rt is http.DefaultTransport, as an
// http.Client takes it (client-go leaves it nil for a plain configuration).
func (f *Fence) Wrap(rt http.RoundTripper) http.RoundTripper {
	if f == nil {
		return rt
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	return fencedTransport{next: rt, fence: f}
}

// fencedTransport refuses a write the fence does not let out, and abandons one that the fence
// let out but that is still unanswered (being dialled, waiting for a connection, being sent)
// when the fence's time to send it is up: the fence bounds when a write starts, and a slow
// dial would otherwise deliver it after a standby took over. That time counts from the
// latest renewal, those sent while the write was under way included (sendDeadline), so a
// healthy leader's slow write goes through. An answer that arrives as the time is up is
// abandoned too: its context is cancelled, so its body could not be read. client-go returns
// the error wrapped in a *url.Error, which errors.Is sees through.
type fencedTransport struct {
	next  http.RoundTripper
	fence *Fence
}

// Where a write let out stands; the first of answered and abandoned holds.
const (
	writeSending int32 = iota
	writeAnswered
	writeAbandoned
)

// sendDeadline abandons a write let out (cancels its context) once the fence says its time to
// be answered is up. The time is the fence's, not fixed when the write started: when the
// timer fires, the fence is asked again, and a leader that renewed meanwhile gets the time
// its latest renewal gives (the timer is armed again for it); only the fence's own verdict
// abandons the write.
type sendDeadline struct {
	fence  *Fence
	cancel context.CancelFunc

	mu    sync.Mutex
	state int32
	timer *time.Timer
	why   error // the fence's error, once abandoned
}

func (d *sendDeadline) arm(left time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer = time.AfterFunc(left, d.fire)
}

func (d *sendDeadline) fire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != writeSending {
		return
	}
	left, err := d.fence.sendLeft()
	if err == nil {
		d.timer = time.AfterFunc(left, d.fire)
		return
	}
	d.state, d.why = writeAbandoned, err
	d.cancel()
}

// answered settles the write as answered unless it was abandoned first; it returns the
// fence's error if it was.
func (d *sendDeadline) answered() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state == writeSending {
		d.state = writeAnswered
		d.timer.Stop()
	}
	return d.why
}

func (t fencedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return t.next.RoundTrip(r)
	}
	left, err := t.fence.open()
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close() // a RoundTripper closes the body, even on an error
		}
		return nil, t.refuse(r, err)
	}
	// The request's own context, cancelled when the time to send is up and the write is
	// still unanswered; once answered, only when its body is closed (or on an error), so
	// that an answer that came in time is read whole.
	ctx, cancel := context.WithCancel(r.Context())
	d := &sendDeadline{fence: t.fence, cancel: cancel}
	began := time.Now()
	d.arm(left)
	resp, err := t.next.RoundTrip(r.WithContext(ctx))
	if why := d.answered(); why != nil {
		// Abandoned, even if an answer came as the deadline fired: its context is
		// cancelled, so its body could not be read whole, and the caller is told (and the
		// metric counts) the fence's reason rather than a cancelled read.
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
		cancel()
		return nil, t.refuse(r, fmt.Errorf("abandoned unanswered %s after the fence let it out, when a standby may soon take the Lease: %w",
			time.Since(began).Round(time.Millisecond), why))
	}
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose(resp.Body, cancel)
	return resp, nil
}

// refuse counts a write the fence refused or abandoned, and says so.
func (t fencedTransport) refuse(r *http.Request, err error) error {
	if t.fence.refused != nil {
		t.fence.refused()
	}
	return fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, err)
}

// cancelOnClose is body, which cancels the request's context once closed; one that is also a
// writer (the answer to an upgrade) stays one.
func cancelOnClose(body io.ReadCloser, cancel context.CancelFunc) io.ReadCloser {
	if rw, ok := body.(io.ReadWriteCloser); ok {
		return cancelRWBody{rw, cancel}
	}
	return cancelBody{body, cancel}
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelBody) Close() error {
	defer b.cancel()
	return b.ReadCloser.Close()
}

type cancelRWBody struct {
	io.ReadWriteCloser
	cancel context.CancelFunc
}

func (b cancelRWBody) Close() error {
	defer b.cancel()
	return b.ReadWriteCloser.Close()
}

// WrappedRoundTripper lets client-go see the transport underneath (utilnet.RoundTripperWrapper).
func (t fencedTransport) WrappedRoundTripper() http.RoundTripper { return t.next }
