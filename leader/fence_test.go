package leader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/cloudnative-czs/vm-controller/reconcile"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// testClock is a fenceClock the test moves: each clock on its own, as a paused virtual
// machine's can part.
type testClock struct {
	mu   sync.Mutex
	mono time.Duration
	wall time.Time
	// running, once set (run), is when the clocks began to run with real time as well: the
	// fence's send deadline is a real timer that asks the fence again when it fires.
	running time.Time
}

func newTestClock() *testClock { return &testClock{wall: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *testClock) clock() fenceClock {
	return fenceClock{
		mono: func() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.mono + c.ranLocked() },
		wall: func() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.wall.Add(c.ranLocked()) },
	}
}

// run makes both clocks advance with real time from now on, besides the test's moves.
func (c *testClock) run() {
	c.mu.Lock()
	c.running = time.Now()
	c.mu.Unlock()
}

func (c *testClock) ranLocked() time.Duration {
	if c.running.IsZero() {
		return 0
	}
	return time.Since(c.running)
}

// advance moves the monotonic clock by mono and the wall clock by wall.
func (c *testClock) advance(mono, wall time.Duration) {
	c.mu.Lock()
	c.mono += mono
	c.wall = c.wall.Add(wall)
	c.mu.Unlock()
}

// fakeLock is a Lease lock whose Create and Update take as long as the test says, and fail
// when it says; Get returns the record the test says (read), or an error if none.
type fakeLock struct {
	resourcelock.Interface // nil: only Get, Create, Update, Identity and Describe are called
	clock                  *testClock
	took                   time.Duration
	fail                   error
	read                   *resourcelock.LeaderElectionRecord
}

func (l *fakeLock) Identity() string { return "me" }

func (l *fakeLock) Describe() string { return "ns/lease" }

func (l *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	if l.read == nil {
		return nil, nil, errors.New("no record")
	}
	r := *l.read
	return &r, nil, nil
}

func (l *fakeLock) Create(_ context.Context, _ resourcelock.LeaderElectionRecord) error {
	l.clock.advance(l.took, l.took)
	return l.fail
}

func (l *fakeLock) Update(_ context.Context, _ resourcelock.LeaderElectionRecord) error {
	l.clock.advance(l.took, l.took)
	return l.fail
}

// okTransport answers every request, counting them.
type okTransport struct{ sent atomic.Int32 }

func (t *okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.sent.Add(1)
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// TestFence: writes go out only within --renew-deadline of the sending of this replica's last
// successful renewal of the Lease, by both clocks; reads always. Before its first renewal, a
// standby writes nothing; a renewal that failed opens nothing; the release (no holder) closes
// the fence for good.
func TestFence(t *testing.T) {
	const renew = 3 * time.Second
	clk := newTestClock()
	var refused atomic.Int32
	f := newFence(renew, clk.clock(), func() { refused.Add(1) })
	lock := &fakeLock{clock: clk, took: 500 * time.Millisecond}
	fl := fencedLock{Interface: lock, fence: f}
	next := &okTransport{}
	rt := f.Wrap(next)
	ctx := context.Background()

	send := func(method string) error {
		req := httptest.NewRequest(method, "https://api/apis/x/v1/namespaces/a/things/b", strings.NewReader("{}"))
		resp, err := rt.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		return err
	}
	writesPass := func(when string, want bool) {
		t.Helper()
		for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			err := send(m)
			if got := err == nil; got != want {
				t.Errorf("%s: %s passes: %t, want %t (%v)", when, m, got, want, err)
			}
			if err != nil && !errors.Is(err, reconcile.ErrFenced) {
				t.Errorf("%s: %s refused with %v, want ErrFenced", when, m, err)
			}
		}
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			if err := send(m); err != nil {
				t.Errorf("%s: %s refused: %v; reads always pass", when, m, err)
			}
		}
	}

	writesPass("before the first renewal", false)
	if err := fl.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 4}); err != nil {
		t.Fatal(err)
	}
	// The renewal counts from its sending, 500ms ago, not from its answer.
	writesPass("after the renewal", true)
	clk.advance(renew-500*time.Millisecond-time.Millisecond, renew-500*time.Millisecond-time.Millisecond)
	writesPass("just before --renew-deadline", true)
	clk.advance(time.Millisecond, time.Millisecond)
	writesPass("at --renew-deadline of the sending", false)

	lock.fail = errors.New("conflict: another replica holds the Lease")
	if err := fl.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 4}); err == nil {
		t.Fatal("the failing Update succeeded")
	}
	writesPass("after a failed renewal", false)
	lock.fail = nil
	if err := fl.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 4}); err != nil {
		t.Fatal(err)
	}
	writesPass("after the next renewal", true)

	// A paused virtual machine: its guest's monotonic clock stood still, the wall clock
	// was set forward on its resume.
	clk.advance(0, renew)
	writesPass("with the wall clock past the deadline", false)
	if err := fl.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 4}); err != nil {
		t.Fatal(err)
	}
	writesPass("renewed again", true)
	// The wall clock set back: the monotonic one still counts.
	clk.advance(renew, -time.Hour)
	writesPass("with the monotonic clock past the deadline", false)

	if err := fl.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 4}); err != nil {
		t.Fatal(err)
	}
	writesPass("renewed before the release", true)
	// The release names no holder: a standby may lead as soon as it reads it, so it closes
	// the fence, however fresh the last renewal (sent 1s ago here). client-go reads the
	// Lease just before it.
	lock.read = &resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 4}
	if _, _, err := fl.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fl.Update(ctx, resourcelock.LeaderElectionRecord{}); err != nil {
		t.Fatal(err)
	}
	writesPass("after the release", false)
	// Nothing opens it again.
	if err := fl.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 4}); err != nil {
		t.Fatal(err)
	}
	writesPass("renewed after the release", false)

	if n := refused.Load(); n != 7*4 {
		t.Errorf("%d refusals counted, want %d", n, 7*4)
	}
	if err := (*Fence)(nil).Check(); err != nil {
		t.Errorf("no fence (no leader election): %v", err)
	}
	if (*Fence)(nil).Wrap(next) != http.RoundTripper(next) {
		t.Error("no fence wraps the transport")
	}
}

// TestLeadOpensFence: the elector's renewals reach the fence: once this replica leads, its
// writes go out; a fence given to Lead with no renewal of its own stays closed.
func TestLeadOpensFence(t *testing.T) {
	kube := fake.NewClientset()
	clk := newTestClock()
	f := newFence(time.Second, systemClock(), nil)
	closed := newFence(time.Second, clk.clock(), nil)
	e := Election{Name: "vm-controller", Namespace: "ns", Identity: "me", Lease: 2 * time.Second, Renew: time.Second,
		Retry: 100 * time.Millisecond, Fence: f}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var during, other error
	err := Lead(ctx, kube, e, Callbacks{SetLeader: func(bool) {}, Healthz: leaderelection.NewLeaderHealthzAdaptor(time.Second)},
		slog.New(slog.DiscardHandler), func(context.Context) error {
			during, other = f.Check(), closed.Check()
			cancel()
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if during != nil {
		t.Errorf("fence while leading: %v, want open", during)
	}
	if !errors.Is(other, reconcile.ErrFenced) {
		t.Errorf("a fence never renewed: %v, want ErrFenced", other)
	}
}

// fencedInTerm is a fence and the fenced lock over a counting fake whose first acquisition,
// by "me", fixed the term at 4 (the record's LeaderTransitions).
func fencedInTerm(t *testing.T) (*Fence, *countingLock, fencedLock) {
	t.Helper()
	clk := newTestClock()
	f := newFence(3*time.Second, clk.clock(), nil)
	lock := &countingLock{fakeLock: fakeLock{clock: clk}}
	fl := fencedLock{Interface: lock, fence: f}
	if err := fl.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 4, LeaderTransitions: 4}); err != nil {
		t.Fatal(err)
	}
	return f, lock, fl
}

// TestFenceTerm: the first acquisition fixes the term (the record's LeaderTransitions); its
// renewals open the fence. A record of another term, or a new record (the Lease was deleted
// meanwhile), is refused unsent and closes the fence for good.
func TestFenceTerm(t *testing.T) {
	f, lock, fl := fencedInTerm(t)
	ctx := context.Background()
	if err := fl.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 4, LeaderTransitions: 4}); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Fatalf("renewed in its term: %v", err)
	}
	for _, tc := range []struct {
		name   string
		create bool
		tr     int
	}{{"a new record", true, 0}, {"a new record of the same count", true, 4}, {"another term", false, 6}, {"the term again", false, 4}} {
		sent := lock.sent
		var err error
		if tc.create {
			err = fl.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 4, LeaderTransitions: tc.tr})
		} else {
			err = fl.Update(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 4, LeaderTransitions: tc.tr})
		}
		if tc.name == "the term again" {
			// Sent (the elector renews as it did), but the fence stays closed.
			if err != nil || lock.sent != sent+1 {
				t.Errorf("%s: %v, %d sent; want it sent", tc.name, err, lock.sent-sent)
			}
		} else if !errors.Is(err, errOtherTerm) || lock.sent != sent {
			t.Errorf("%s: %v, %d sent; want errOtherTerm, nothing sent", tc.name, err, lock.sent-sent)
		}
		if err := f.Check(); !errors.Is(err, reconcile.ErrFenced) {
			t.Errorf("%s: fence %v, want closed", tc.name, err)
		}
	}
}

// countingLock is a fakeLock that counts the records it was sent.
type countingLock struct {
	fakeLock
	sent int
}

func (l *countingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.sent++
	return l.fakeLock.Create(ctx, ler)
}

func (l *countingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	l.sent++
	return l.fakeLock.Update(ctx, ler)
}

// renewNow tells f of a renewal sent now, of a record that holds lease.
func renewNow(f *Fence, lease time.Duration) {
	mono, wall := f.sending()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewedLocked(mono, wall, lease)
}

// TestFenceRecordLease: the fence counts with the Lease's duration as its record holds it
// (whole seconds, what a standby waits), not as --lease-duration said it: writes start until
// --renew-deadline after the renewal's sending, or that duration if it is shorter, and are
// given until the midpoint between the two to be sent.
func TestFenceRecordLease(t *testing.T) {
	for _, tc := range []struct {
		renew, lease, age time.Duration
		open              bool
		left              time.Duration
	}{
		{3 * time.Second, 4 * time.Second, 0, true, 3500 * time.Millisecond},
		{3 * time.Second, 4 * time.Second, 2900 * time.Millisecond, true, 600 * time.Millisecond},
		{3 * time.Second, 4 * time.Second, 3 * time.Second, false, 0},
		// --lease-duration 2.9s was recorded as 2s (run's Validate refuses it now).
		{2500 * time.Millisecond, 2 * time.Second, 1900 * time.Millisecond, true, 100 * time.Millisecond},
		{2500 * time.Millisecond, 2 * time.Second, 2 * time.Second, false, 0},
		// Under a second, recorded as 0: a standby takes it at once.
		{500 * time.Millisecond, 0, 0, false, 0},
	} {
		clk := newTestClock()
		f := newFence(tc.renew, clk.clock(), nil)
		fl := fencedLock{Interface: &fakeLock{clock: clk}, fence: f}
		if err := fl.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "me",
			LeaseDurationSeconds: int(tc.lease / time.Second)}); err != nil {
			t.Fatal(err)
		}
		clk.advance(tc.age, tc.age)
		left, err := f.open()
		if (err == nil) != tc.open || left != tc.left {
			t.Errorf("renew %s, record %s, %s after the renewal: %s to send, %v; want open %t, %s", tc.renew, tc.lease, tc.age, left, err, tc.open, tc.left)
		}
	}
}

// answerTransport answers each request at once, or with an error, keeping its context.
type answerTransport struct {
	ctx  context.Context
	fail error
}

func (t *answerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.ctx = r.Context()
	if r.Body != nil {
		_ = r.Body.Close()
	}
	if t.fail != nil {
		return nil, t.fail
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// blockTransport answers no request until its context ends, or 5s have passed.
type blockTransport struct{}

func (blockTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case <-r.Context().Done():
		return nil, r.Context().Err()
	case <-time.After(5 * time.Second):
		return nil, errors.New("no answer in 5s")
	}
}

// TestFencedTransportSendLimit: a write the fence let out is abandoned, as fenced, if still
// unanswered when its time to send is up; one answered in time is read whole, however long
// that takes. The context each write goes out with ends once its answer is closed, or with
// its error: nothing is left behind.
func TestFencedTransportSendLimit(t *testing.T) {
	clk := newTestClock()
	var refused atomic.Int32
	f := newFence(3*time.Second, clk.clock(), func() { refused.Add(1) })
	renewNow(f, 4*time.Second)
	clk.advance(2950*time.Millisecond, 2950*time.Millisecond) // 550ms to send
	write := func() *http.Request {
		return httptest.NewRequest(http.MethodPatch, "https://api/apis/x/v1/namespaces/a/things/b", strings.NewReader("{}"))
	}

	next := &answerTransport{}
	resp, err := f.Wrap(next).RoundTrip(write())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(650 * time.Millisecond)
	if err := next.ctx.Err(); err != nil {
		t.Errorf("an answered write's context ended before its body was closed: %v", err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "{}" {
		t.Errorf("body %q, %v", b, err)
	}
	_ = resp.Body.Close()
	if next.ctx.Err() == nil {
		t.Error("the write's context lives on after its body was closed")
	}

	failing := &answerTransport{fail: errors.New("connection refused")}
	if _, err := f.Wrap(failing).RoundTrip(write()); err == nil || errors.Is(err, reconcile.ErrFenced) {
		t.Errorf("a failed write: %v, want its own error", err)
	}
	if failing.ctx.Err() == nil {
		t.Error("the write's context lives on after its error")
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("%d refusals counted, want none yet", n)
	}

	clk.run() // the fence's time passes with the write's: no renewal comes
	start := time.Now()
	_, err = f.Wrap(blockTransport{}).RoundTrip(write())
	if !errors.Is(err, reconcile.ErrFenced) {
		t.Errorf("a write unanswered past its time: %v, want ErrFenced", err)
	}
	if took := time.Since(start); took < 500*time.Millisecond || took > 4*time.Second {
		t.Errorf("abandoned after %s, want about 550ms", took)
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("%d refusals counted, want 1", n)
	}
}

// TestFencedSlowDial: through a client-go client over a real HTTP server, its transport
// wrapped as run wraps its clients', a write that the fence let out just before
// --renew-deadline but whose connection takes long to dial (a SYN retransmitted) is abandoned
// when its time to send is up: it never reaches the API server, which a standby may lead
// through by then.
func TestFencedSlowDial(t *testing.T) {
	var arrived atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			arrived.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"b","namespace":"ns"}}`)
	}))
	t.Cleanup(srv.Close)
	clk := newTestClock()
	f := newFence(3*time.Second, clk.clock(), nil)
	cfg := &rest.Config{Host: srv.URL}
	const dial = 1200 * time.Millisecond
	dialed := make(chan struct{})
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		defer close(dialed)
		time.Sleep(dial) // not cut short: the dial outlives the write
		return (&net.Dialer{}).DialContext(context.WithoutCancel(ctx), network, addr)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc.Transport = f.Wrap(hc.Transport)
	client, err := dynamic.NewForConfigAndClient(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	renewNow(f, 4*time.Second)
	clk.advance(2900*time.Millisecond, 2900*time.Millisecond) // 600ms to send
	clk.run()                                                 // and no renewal comes
	_, err = client.Resource(k8sschema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("ns").
		Patch(context.Background(), "b", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	if !errors.Is(err, reconcile.ErrFenced) {
		t.Errorf("a write still dialling past its time to send: %v, want ErrFenced", err)
	}
	<-dialed
	time.Sleep(200 * time.Millisecond)
	if n := arrived.Load(); n != 0 {
		t.Errorf("%d writes reached the server after their time to send", n)
	}
}

// TestFenceReleaseOnlyOwnRecord: client-go's release reads the Lease, then decides on its own
// view that it leads, which may be stale. The release is sent only if the record just read
// names this replica in its term; else it is refused unsent. Either way the fence closes.
func TestFenceReleaseOnlyOwnRecord(t *testing.T) {
	for _, tc := range []struct {
		name string
		read *resourcelock.LeaderElectionRecord
		sent bool
	}{
		{"its own record in its term", &resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaderTransitions: 4}, true},
		{"another's record", &resourcelock.LeaderElectionRecord{HolderIdentity: "b", LeaderTransitions: 5}, false},
		{"its name in another term", &resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaderTransitions: 6}, false},
		{"a record released already", &resourcelock.LeaderElectionRecord{LeaderTransitions: 5}, false},
		{"no record (the read failed)", nil, false},
	} {
		f, lock, fl := fencedInTerm(t)
		ctx := context.Background()
		lock.read = tc.read
		_, _, _ = fl.Get(ctx)
		sent := lock.sent
		err := fl.Update(ctx, resourcelock.LeaderElectionRecord{LeaderTransitions: 4, LeaseDurationSeconds: 1})
		if got := lock.sent > sent; got != tc.sent || (err == nil) != tc.sent {
			t.Errorf("release after reading %s: sent %t, %v; want sent %t", tc.name, got, err, tc.sent)
		}
		if err := f.Check(); !errors.Is(err, reconcile.ErrFenced) {
			t.Errorf("release after reading %s: fence %v, want closed", tc.name, err)
		}
	}
}

// TestFencedSlowWriteOfHealthyLeader: over a real HTTP server, a leader that renews all along
// has a write that takes longer than the time to send its first renewal gave it (a slow
// admission webhook, a loaded API server) answered, not abandoned: the deadline follows the
// latest renewal.
func TestFencedSlowWriteOfHealthyLeader(t *testing.T) {
	var applied atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		time.Sleep(2 * time.Second) // past the 1.5s the renewal before the write gives
		applied.Add(1)
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	var refused atomic.Int32
	f := newFence(time.Second, systemClock(), func() { refused.Add(1) })
	renewNow(f, 2*time.Second)
	stop := make(chan struct{})
	renewing := make(chan struct{})
	go func() { // a renewal every 100ms: the leader is healthy throughout
		defer close(renewing)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				renewNow(f, 2*time.Second)
			}
		}
	}()
	defer func() { close(stop); <-renewing }()
	req, err := http.NewRequest(http.MethodPatch, srv.URL+"/x", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: f.Wrap(nil)}).Do(req)
	if err != nil {
		t.Fatalf("a healthy leader's slow write: %v, want it answered", err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "{}" {
		t.Errorf("body %q, %v", b, err)
	}
	_ = resp.Body.Close()
	if n := applied.Load(); n != 1 {
		t.Errorf("%d writes applied, want 1", n)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("%d refusals counted, want none", n)
	}
}

// answerLate answers each write only once its context has ended: an answer that arrives just
// as the fence's deadline fires.
type answerLate struct{}

func (answerLate) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
	}
	return &http.Response{StatusCode: http.StatusOK, Request: r, Body: io.NopCloser(readerFunc(func([]byte) (int, error) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return 0, io.EOF
	}))}, nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestFencedAnsweredAsDeadlineFires: a write whose answer arrives as its deadline fires is
// abandoned as fenced, and counted, not handed on with a body whose read fails as cancelled.
func TestFencedAnsweredAsDeadlineFires(t *testing.T) {
	clk := newTestClock()
	var refused atomic.Int32
	f := newFence(3*time.Second, clk.clock(), func() { refused.Add(1) })
	renewNow(f, 4*time.Second)
	clk.advance(2950*time.Millisecond, 2950*time.Millisecond) // 550ms to send
	clk.run()                                                 // and no renewal comes
	req := httptest.NewRequest(http.MethodPatch, "https://api/x", strings.NewReader("{}"))
	resp, err := f.Wrap(answerLate{}).RoundTrip(req)
	if err == nil {
		_, rerr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		t.Fatalf("an answer as the deadline fired was handed on (its body read: %v), want ErrFenced", rerr)
	}
	if !errors.Is(err, reconcile.ErrFenced) || resp != nil {
		t.Errorf("an answer as the deadline fired: %v, %v; want ErrFenced and no response", resp, err)
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("%d refusals counted, want 1", n)
	}
}
