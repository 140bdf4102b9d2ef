package webhook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudnative-czs/vm-controller/convert"
)

// gatedBody is a request body that says when the handler first reads it, which it does only
// once the request has its turn, and gives nothing until the test releases it: a request
// holds its bytes for as long as the test wants, without sleeping.
type gatedBody struct {
	r       *bytes.Reader
	once    sync.Once
	started chan struct{} // closed at the first Read
	release chan struct{} // closed by the test
}

func newGatedBody(data []byte) *gatedBody {
	return &gatedBody{r: bytes.NewReader(data), started: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedBody) Read(p []byte) (int, error) {
	g.once.Do(func() { close(g.started) })
	<-g.release
	return g.r.Read(p)
}

// reading reports whether the handler has begun to read the body, that is has let it in.
func (g *gatedBody) reading() bool {
	select {
	case <-g.started:
		return true
	default:
		return false
	}
}

// boundedHandler is a handler whose reviews may hold total bytes at once, each at most
// maxBytes, and a channel that receives the size of each request that starts to wait.
func boundedHandler(t *testing.T, maxBytes, total int64) (Handler, *InFlight, chan int64) {
	t.Helper()
	conv, err := convert.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	queued := make(chan int64, 16)
	b := NewInFlight(total)
	b.queued = func(n int64) { queued <- n }
	return Handler{Converter: conv, MaxBytes: maxBytes, InFlight: b}, b, queued
}

// serveAsync serves the request in a goroutine; the channel receives its answer.
func serveAsync(h http.Handler, req *http.Request) <-chan *httptest.ResponseRecorder {
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		done <- rec
	}()
	return done
}

// post is a request of body, read from gated when there is one.
func post(ctx context.Context, body []byte, gated *gatedBody) *http.Request {
	var r io.Reader = bytes.NewReader(body)
	if gated != nil {
		r = gated
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/convert", r)
	req.ContentLength = int64(len(body))
	return req
}

// converted fails unless the answer is a converted review.
func converted(t *testing.T, name string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Errorf("%s: code %d: %s", name, rec.Code, strings.TrimSpace(rec.Body.String()))
		return
	}
	var out apiextensionsv1.ConversionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.Result.Status != metav1.StatusSuccess {
		t.Errorf("%s: not a converted review (%v): %.200s", name, err, rec.Body.String())
	}
}

// idle fails unless the bound holds no bytes and no request waits.
func idle(t *testing.T, b *InFlight) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used != 0 || b.waiters.Len() != 0 {
		t.Errorf("%d bytes held and %d requests waiting once every request is answered", b.used, b.waiters.Len())
	}
}

// TestInFlightLargeWaitsSmallPasses: with two large reviews in flight and too little left for
// a third, the third is not read until one of the two is answered, and is then let in; a
// small review sent while it waits is converted at once rather than queued behind it.
func TestInFlightLargeWaitsSmallPasses(t *testing.T) {
	const large = 64 << 10
	h, b, queued := boundedHandler(t, large, 2*large+large/2)
	body := reviewOf(t, large)

	first, second, third := newGatedBody(body), newGatedBody(body), newGatedBody(body)
	firstDone := serveAsync(h, post(context.Background(), body, first))
	secondDone := serveAsync(h, post(context.Background(), body, second))
	<-first.started
	<-second.started

	thirdDone := serveAsync(h, post(context.Background(), body, third))
	select {
	case n := <-queued:
		if n != large {
			t.Fatalf("a request of %d bytes waits, want the third large one (%d)", n, large)
		}
	case <-third.started:
		t.Fatal("the third large review was read while two held all but half of one")
	}

	// The small review must not wait: were it queued, the hook says so and the test ends
	// its wait rather than hang.
	small := reviewOf(t, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	smallDone := serveAsync(h, post(ctx, small, nil))
	select {
	case rec := <-smallDone:
		converted(t, "small review", rec)
	case n := <-queued:
		cancel()
		<-smallDone
		t.Fatalf("a small review (%d bytes) waited behind the large one", n)
	}
	if third.reading() {
		t.Fatal("the third large review was let in before a large one was answered")
	}

	close(first.release)
	converted(t, "first large review", <-firstDone)
	<-third.started // let in by the first one's answer
	close(second.release)
	close(third.release)
	converted(t, "second large review", <-secondDone)
	converted(t, "third large review", <-thirdDone)
	idle(t, b)
}

// TestInFlightWaitEnds: a review that cannot get its turn before its context ends, or before
// the handler's own bound on waiting, is answered 503 with a message that says why and a
// Retry-After, having taken nothing: once the review that held the bytes is answered, a
// review of the whole bound is converted.
func TestInFlightWaitEnds(t *testing.T) {
	const size = 64 << 10
	body := reviewOf(t, size)
	tests := map[string]struct {
		maxWait time.Duration
		cancel  bool // end the request's context once it waits
		err     string
	}{
		"the request's context ends": {cancel: true, err: "context canceled"},
		"it waited MaxWait":          {maxWait: time.Nanosecond, err: "context deadline exceeded"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, b, queued := boundedHandler(t, size, size)
			h.MaxWait = tc.maxWait
			holder := newGatedBody(body)
			holderDone := serveAsync(h, post(context.Background(), body, holder))
			<-holder.started

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			waiter := newGatedBody(body)
			waiterDone := serveAsync(h, post(ctx, body, waiter))
			select {
			case <-queued:
			case <-waiter.started:
				t.Fatal("the review was read while another held every byte")
			}
			if tc.cancel {
				cancel()
			}
			rec := <-waiterDone
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("code %d, want 503: %s", rec.Code, rec.Body.String())
			}
			msg := strings.TrimSpace(rec.Body.String())
			for _, want := range []string{"review of 65536 bytes not read: other reviews hold the memory for it (--max-review-bytes-in-flight 65536)", tc.err} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
			if got := rec.Header().Get("Retry-After"); got != "1" {
				t.Errorf("Retry-After %q, want 1", got)
			}
			if waiter.reading() {
				t.Error("the review was read although it did not get its turn")
			}

			close(holder.release)
			converted(t, "the review that held the bytes", <-holderDone)
			idle(t, b)
			converted(t, "a review of the whole bound afterwards", <-serveAsync(h, post(context.Background(), body, nil)))
		})
	}
}

// TestInFlightBoundsTheCap: a handler whose MaxBytes is above its bound in flight reads no
// more than the bound, as a longer review could never get its turn: one of exactly the bound
// is converted, one a byte longer answered 413 at once, without waiting, whether its length
// is announced or not.
func TestInFlightBoundsTheCap(t *testing.T) {
	const total = 256 << 10
	h, b, queued := boundedHandler(t, 4*total, total)
	for name, tc := range sizeCases(total) {
		t.Run(name, func(t *testing.T) {
			tc.check(t, h)
			select {
			case n := <-queued:
				t.Errorf("a request of %d bytes waited with nothing else in flight", n)
			default:
			}
			idle(t, b)
		})
	}
}

// TestInFlightLetsInOldestThatFit: bytes given back go to the waiting requests oldest first,
// each that fits in what is free, so a later small one is not held up by an earlier large
// one that does not fit yet; more than the bound is refused without waiting.
func TestInFlightLetsInOldestThatFit(t *testing.T) {
	b := NewInFlight(10)
	queued := make(chan int64, 4)
	b.queued = func(n int64) { queued <- n }
	ctx := context.Background()
	if err := b.acquire(ctx, 10); err != nil {
		t.Fatal(err)
	}
	granted := map[string]chan error{}
	for _, w := range []struct {
		name string
		n    int64
	}{{"a", 6}, {"b", 6}, {"c", 3}} {
		done := make(chan error, 1)
		granted[w.name] = done
		go func() { done <- b.acquire(ctx, w.n) }()
		<-queued // in this order
	}

	b.release(10) // a (6) fits, then b (6) does not, c (3) does
	for _, name := range []string{"a", "c"} {
		if err := <-granted[name]; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if used := b.inUse(); used != 9 {
		t.Fatalf("%d bytes held, want a's 6 and c's 3", used)
	}
	select {
	case <-granted["b"]:
		t.Fatal("b was let in with 1 byte free")
	default:
	}
	b.release(6) // a's
	if err := <-granted["b"]; err != nil {
		t.Fatal(err)
	}
	b.release(6)
	b.release(3)
	idle(t, b)

	var never errNeverFits
	if err := b.acquire(ctx, 11); !errors.As(err, &never) {
		t.Errorf("acquire of more than the bound: %v, want errNeverFits", err)
	}
}

// TestStalledBodyGivesBackItsShare: two requests that claim half the bound each and then send
// nothing of their bodies hold every byte in flight; a real review sent then waits for them,
// and once their bodies have not arrived within BodyTimeout each is answered 408 and its
// connection closed, which gives the bytes back, and the review waiting is converted rather
// than answered 503 at the end of its own wait, which is far longer. Over TLS, as the webhook
// serves.
func TestStalledBodyGivesBackItsShare(t *testing.T) {
	const share = 1 << 20
	h, b, queued := boundedHandler(t, share, 2*share)
	taken := make(chan int64, 4)
	b.taken = func(n int64) { taken <- n }
	// Long enough for the review below to be sent and queued behind the stalled requests
	// (which the test checks rather than assumes), short enough not to slow the test; the
	// wait ten times as long, so that the review can only be answered 200 if the stalled
	// requests let go of their bytes.
	h.BodyTimeout = time.Second
	h.MaxWait = 10 * time.Second
	srv := httptest.NewUnstartedServer(h)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	var stalled []*tls.Conn
	for range 2 {
		conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), srv.Client().Transport.(*http.Transport).TLSClientConfig)
		if err != nil {
			t.Fatal(err)
		}
		// Closed before the server (cleanups run last first), so that Close does not wait
		// for requests that still read, as it would on a server without the bound.
		t.Cleanup(func() { conn.Close() })
		if _, err := fmt.Fprintf(conn, "POST /convert HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", share); err != nil {
			t.Fatal(err)
		}
		if n := <-taken; n != share {
			t.Fatalf("a request took %d bytes, want the stalled one's %d", n, share)
		}
		stalled = append(stalled, conn)
	}

	if waitedThenConverted(t, srv, queued, "stalled requests"); t.Failed() {
		t.FailNow()
	}

	for i, conn := range stalled {
		// A bound on the test's wait, not on the server's: the answer has come already.
		if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("stalled request %d: no answer: %v", i, err)
		}
		msg, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
			t.Errorf("stalled request %d: %s (close %v): %s, want 408 and the connection closed", i, resp.Status, resp.Close, msg)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("stalled request %d: the connection is still open after its answer: %v", i, err)
		}
	}
	// The review's answer reaches the client before its handler gives its bytes back: Close
	// waits for the handlers.
	srv.Close()
	idle(t, b)
}

// reviewOfMany is a valid review of n VMs of v1alpha1, to be converted to v1: its answer is
// about as large as the review.
func reviewOfMany(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"many","desiredAPIVersion":"cloudnative.czs/v1","objects":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"vm-%d","namespace":"default"},"spec":{"action":"active","resource":{"cpu":2,"memory":"4Gi","rootDisk":"40G"}}}`, i)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

// smallSendBuffer is a listener whose connections have a send buffer of a few KiB, which also
// turns off the kernel's growing of it: an answer of a few hundred KiB fills it, and the
// socket's, long before a client that does not read has taken it.
type smallSendBuffer struct{ net.Listener }

func (l smallSendBuffer) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		if err := tc.SetWriteBuffer(4096); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, err
}

// syncBuffer is a log the server's goroutines write while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestUnreadAnswerGivesBackItsShare: a client that sends a whole review and never reads the
// answer holds its share of the bound until the answer could not be written within
// BodyTimeout; the handler then gives the bytes back, and a review that waits for them is
// converted rather than answered 503 at the end of its own wait, which is far longer. Without
// a bound on the write, the handler stays in Write for as long as the client keeps the
// connection open, and two such clients hold the default bound for good.
func TestUnreadAnswerGivesBackItsShare(t *testing.T) {
	big := reviewOfMany(1500) // about 300 KiB, and as much of answer
	h, b, queued := boundedHandler(t, int64(len(big)), int64(len(big)))
	taken := make(chan int64, 4)
	b.taken = func(n int64) { taken <- n }
	var logs syncBuffer
	h.Log = slog.New(slog.NewTextHandler(&logs, nil))
	// As in TestStalledBodyGivesBackItsShare: the review below can only be answered 200 if
	// the unread answer lets go of its bytes.
	h.BodyTimeout = time.Second
	h.MaxWait = 10 * time.Second
	srv := httptest.NewUnstartedServer(h)
	srv.Listener = smallSendBuffer{srv.Listener}
	srv.Start()
	// Closed after the client's connection (cleanups run last first): Close waits for the
	// handlers, which ends the test's requests before idle checks the bound.
	t.Cleanup(func() {
		srv.Close()
		idle(t, b)
	})

	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "POST /convert HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(big), big); err != nil {
		t.Fatal(err)
	}
	// ... and never reads the answer.
	if n := <-taken; n != int64(len(big)) {
		t.Fatalf("a request took %d bytes, want the unread one's %d", n, len(big))
	}

	waitedThenConverted(t, srv, queued, "an unread answer")
	if want := `msg="review answer not taken in time" timeout=1s`; !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant a line with %s", logs.String(), want)
	}
}

// TestInFlightChunkedTakesTheCap: a review without a Content-Length (chunked) takes the whole
// cap from the bound before a byte of it is read, as its body may be that long; taking less,
// reviews of unknown length could together read more than the bound.
func TestInFlightChunkedTakesTheCap(t *testing.T) {
	const maxBytes, total = 1 << 20, 2 << 20
	h, b, _ := boundedHandler(t, maxBytes, total)
	taken := make(chan int64, 4)
	b.taken = func(n int64) { taken <- n }
	body := reviewOf(t, 4096)
	g := newGatedBody(body)
	req := post(context.Background(), body, g)
	req.ContentLength = -1
	done := serveAsync(h, req)
	if n := <-taken; n != maxBytes {
		t.Errorf("a chunked review took %d bytes of the bound before it was read, want the cap %d", n, maxBytes)
	}
	close(g.release)
	converted(t, "a chunked review", <-done)
	idle(t, b)
}

// TestInFlightLetInAsContextEnds: a waiting request let in just as its context ends, after it
// has seen the context end and before it leaves the queue, keeps the bytes and is told so
// (acquire returns nil), so that its caller gives them back once answered; told it has
// nothing, the caller would never release them, and the bound would shrink by them for good.
func TestInFlightLetInAsContextEnds(t *testing.T) {
	b := NewInFlight(10)
	if err := b.acquire(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Ended once it waits, before its select: the request sees its context end, not its
	// turn, and then, before it takes the lock to leave, the bytes are given back and it is
	// let in.
	b.queued = func(int64) { cancel() }
	b.leaving = func(int64) { b.release(10) }
	if err := b.acquire(ctx, 7); err != nil {
		t.Fatalf("acquire: %v, with %d bytes held for it", err, b.inUse())
	}
	if used := b.inUse(); used != 7 {
		t.Fatalf("%d bytes held, want the 7 the request was let in with", used)
	}
	b.release(7)
	idle(t, b)
}

// waitedThenConverted posts a small review to srv while what holds names holds the bound in
// flight: the review waits (queued reports its size) rather than being answered at once, and
// is converted once the bound is given back.
func waitedThenConverted(t *testing.T, srv *httptest.Server, queued <-chan int64, holds string) {
	t.Helper()
	body := reviewOf(t, 1024)
	type answer struct {
		code int
		body []byte
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := srv.Client().Post(srv.URL+"/convert", "application/json", bytes.NewReader(body))
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		done <- answer{resp.StatusCode, data, err}
	}()
	select {
	case n := <-queued:
		if n != int64(len(body)) {
			t.Fatalf("a request of %d bytes waits, want the review's %d", n, len(body))
		}
	case a := <-done:
		t.Fatalf("the review was answered (%d %v) without waiting for %s: they did not hold the bound", a.code, a.err, holds)
	}
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	rec := httptest.NewRecorder() // what converted reads
	rec.WriteHeader(a.code)
	rec.Body.Write(a.body)
	converted(t, "the review sent while "+holds+" held the bound", rec)
}
