// Leader election: every replica fills its caches; only the holder of the Lease reconciles.

package command

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/cloudnative-czs/vm-controller/reconcile"
)

// election is the leader election configuration from the flags.
type election struct {
	name, namespace, identity string
	lease, renew, retry       time.Duration
	// fence, if set, is told of each renewal of the Lease by this replica (fencedLock).
	fence *fence
}

// defaultIdentity names this replica in the Lease: the pod's name when it runs in a pod (so
// `kubectl get lease` points at it), else the host name; a random suffix keeps two processes
// on one host apart.
func defaultIdentity() string {
	host := os.Getenv("POD_NAME")
	if host == "" {
		host, _ = os.Hostname()
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}

// errLostLease makes the process exit non-zero, so that it restarts with clean state rather
// than carrying on with caches and expectations from its time as leader.
type errLostLease struct{ lease string }

func (e errLostLease) Error() string {
	return fmt.Sprintf("lost the leader lease %s; exiting so that a restart begins clean", e.lease)
}

// leaderCallbacks are what leading changes: the metric, and for tests and operators a log line.
type leaderCallbacks struct {
	setLeader func(bool)
	healthz   *leaderelection.HealthzAdaptor
}

// lead campaigns for the Lease and runs work while this replica holds it. On ctx's end
// (SIGTERM) work drains first and only then is the Lease released, so the next leader starts
// no sooner than the last reconcile here has finished: a graceful handoff takes about a
// retry period. A lost Lease stops work and returns errLostLease.
func lead(ctx context.Context, kube kubernetes.Interface, e election, cb leaderCallbacks, log *slog.Logger, work func(context.Context) error) error {
	var lock resourcelock.Interface = &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: e.name, Namespace: e.namespace},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.identity},
	}
	if e.fence != nil {
		lock = fencedLock{Interface: lock, fence: e.fence, log: log}
	}
	// The elector runs on its own context, cancelled only after work has drained.
	elCtx, elCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer elCancel()
	var led atomic.Bool
	workDone := make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.lease,
		RenewDeadline:   e.renew,
		RetryPeriod:     e.retry,
		ReleaseOnCancel: true,
		Name:            e.namespace + "/" + e.name,
		WatchDog:        cb.healthz,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				led.Store(true)
				cb.setLeader(true)
				log.Info("Became the leader", "lease", e.namespace+"/"+e.name, "identity", e.identity)
				wctx, cancel := context.WithCancel(leading)
				stop := context.AfterFunc(ctx, cancel)
				err := work(wctx)
				stop()
				cancel()
				workDone <- err
				elCancel() // release the Lease now that nothing here writes any more
			},
			OnStoppedLeading: func() { cb.setLeader(false) },
			OnNewLeader: func(id string) {
				if id != e.identity {
					log.Info("Another replica leads; standing by", "leader", id, "lease", e.namespace+"/"+e.name)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	// A signal before this replica leads ends the campaign at once.
	stop := context.AfterFunc(ctx, func() {
		if !led.Load() {
			elCancel()
		}
	})
	defer stop()
	log.Info("Campaigning for the leader lease", "lease", e.namespace+"/"+e.name, "identity", e.identity)
	le.Run(elCtx)
	if !led.Load() {
		return nil
	}
	err = <-workDone
	if ctx.Err() == nil {
		return errLostLease{e.namespace + "/" + e.name}
	}
	return err
}

// A leader paused (SIGSTOP, a frozen node, heavy swapping) for longer than the Lease resumes
// believing it leads: client-go's elector notices only when its renewals have failed for
// --renew-deadline, and until then the workers decided on state from before the pause and
// wrote it over the new leader's. A re-adopted claim that the new leader had released to
// keep, whose VM was gone, was deleted by the garbage collector with its volume. The fence
// bounds when each write of the controller starts, and when it is sent: it refuses a write
// before it leaves the process once this replica's last renewal of the Lease is too old for
// it still to be the leader, and abandons one still being dialled or sent when a standby
// could soon take over.
//
// Why the bound holds: a standby takes the Lease only after it has seen the same record for
// the duration that record holds (LeaseDurationSeconds: --lease-duration, which client-go
// writes cut down to whole seconds, so run's Validate wants whole seconds) by its own clock,
// and it sees a renewal no sooner than the renewal was sent. A renewal sent at T therefore
// keeps every other replica from leading until T + the record's duration; this replica
// starts writes only until T + --renew-deadline, and abandons any not yet answered at the
// midpoint between the two (fencedTransport). The rest is the margin for the clocks' rates
// to differ. A write's bytes already handed to the kernel cannot be recalled: past that
// point, the bound is best effort.

// fenceClock reads the two clocks the fence measures by: the monotonic one, and the wall
// clock without its monotonic reading. A paused virtual machine may not advance its guest's
// monotonic clock while the wall clock is set forward on its resume; a wall clock set back
// does not advance the other. The fence trips when either says the deadline has passed.
type fenceClock struct {
	mono func() time.Duration
	wall func() time.Time
}

// systemClock is the process's clocks: monotonic time since the fence was made, and the
// wall clock stripped of its monotonic reading (Round(0)).
func systemClock() fenceClock {
	start := time.Now()
	return fenceClock{mono: func() time.Duration { return time.Since(start) }, wall: func() time.Time { return time.Now().Round(0) }}
}

// fence lets this replica's writes leave the process only while its last renewal of the
// Lease is younger than the renew deadline (see above). Until its first renewal, a standby's
// writes are fenced too: it has none to make. Once this replica has released the Lease, or
// another replica has led since this one first acquired it, the fence stays closed: a standby
// may lead as soon as it reads the release, and a process that led before another replica's
// term holds caches and expectations from before it.
type fence struct {
	renew time.Duration
	clock fenceClock
	// refused, if set, counts each request refused (the metrics).
	refused func()

	mu       sync.Mutex
	renewed  bool
	sentMono time.Duration // when the last successful renewal was sent, by each clock
	sentWall time.Time
	// lease is the duration the last renewal's record holds, in whole seconds: what a
	// standby waits, whatever --lease-duration says.
	lease time.Duration
	// ended, once set, says why the fence is closed for good, whatever a renewal says.
	ended string
	// term is the record's LeaderTransitions at this replica's first acquisition of the
	// Lease (once termKnown): the one term in which this process may write.
	termKnown bool
	term      int
	// read is the record of the Lease as this replica last read it (fencedLock.Get), nil
	// if the last read failed or there was none: what a release is checked against.
	read *resourcelock.LeaderElectionRecord
}

func newFence(renew time.Duration, clock fenceClock, refused func()) *fence {
	return &fence{renew: renew, clock: clock, refused: refused}
}

// sending reads the clocks before a renewal is sent: the renewal counts from then, the
// earliest any other replica can have seen it (conservative).
func (f *fence) sending() (time.Duration, time.Time) { return f.clock.mono(), f.clock.wall() }

// renewedAt records a successful renewal sent at mono and wall, of a record that holds lease.
// An earlier renewal that returns late moves nothing back.
func (f *fence) renewedAt(mono time.Duration, wall time.Time, lease time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.renewedLocked(mono, wall, lease)
}

func (f *fence) renewedLocked(mono time.Duration, wall time.Time, lease time.Duration) {
	if f.ended != "" {
		return
	}
	f.lease = lease
	if !f.renewed || mono > f.sentMono {
		f.sentMono = mono
	}
	if !f.renewed || wall.After(f.sentWall) {
		f.sentWall = wall
	}
	f.renewed = true
}

// end closes the fence for good, for reason; true if it was not closed for good already.
func (f *fence) end(reason string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.endLocked(reason)
}

func (f *fence) endLocked(reason string) bool {
	if f.ended != "" {
		return false
	}
	f.ended = reason
	return true
}

// errOtherTerm refuses a write of the Lease that would make this replica its holder in
// another term than its first.
var errOtherTerm = errors.New("another replica has led since this replica first acquired the leader Lease; not taking it back in this process")

// inTerm is nil if a record naming this replica, of LeaderTransitions transitions, may be sent:
// it belongs to the term this process began in, or none is known yet. A new record (a Create
// once a term is known: the Lease was deleted meanwhile) cannot tell who led in between. A
// refusal closes the fence for good; first is true the first time.
func (f *fence) inTerm(transitions int, create bool) (first bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.termKnown || (!create && transitions == f.term) {
		return false, nil
	}
	return f.endLocked(errOtherTerm.Error()), errOtherTerm
}

// errReleaseNotOurs refuses a release of a Lease that, as last read, is not this replica's in
// its term: client-go's elector releases on its own view that it leads, which may be stale
// (its renewals failed while another replica took over), and sends the release over the
// record it has just read, which would end the new leader's term.
var errReleaseNotOurs = errors.New("not releasing the leader Lease: as last read, it is not this replica's in its term")

// readRecord remembers ler (nil: the read failed) as the record last read.
func (f *fence) readRecord(ler *resourcelock.LeaderElectionRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ler == nil {
		f.read = nil
		return
	}
	r := *ler
	f.read = &r
}

// mayRelease is nil if the record last read names identity as its holder in this process's
// term: only then is the Lease this replica's to release.
func (f *fence) mayRelease(identity string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.read == nil:
		return fmt.Errorf("%w (not read)", errReleaseNotOurs)
	case f.read.HolderIdentity != identity:
		return fmt.Errorf("%w (held by %q)", errReleaseNotOurs, f.read.HolderIdentity)
	case !f.termKnown || f.read.LeaderTransitions != f.term:
		return fmt.Errorf("%w (transitions %d)", errReleaseNotOurs, f.read.LeaderTransitions)
	}
	return nil
}

// acquired records a successful renewal sent at mono and wall of ler: the first begins the
// term.
func (f *fence) acquired(mono time.Duration, wall time.Time, ler resourcelock.LeaderElectionRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.termKnown {
		f.termKnown, f.term = true, ler.LeaderTransitions
	}
	f.renewedLocked(mono, wall, time.Duration(ler.LeaseDurationSeconds)*time.Second)
}

// Check is nil while writes may go out, else an error wrapping reconcile.ErrFenced. A nil
// fence (no leader election) never refuses.
func (f *fence) Check() error {
	if f == nil {
		return nil
	}
	_, err := f.open()
	return err
}

// open is how long a write that starts now has to be sent (fencedTransport), or the fence's
// error. Writes start until --renew-deadline after the last renewal's sending, or the
// duration its record holds if that is shorter (run's Validate wants it longer), and are
// sent until the midpoint between that and the record's duration.
func (f *fence) open() (time.Duration, error) {
	age, lease, err := f.age()
	if err != nil {
		return 0, err
	}
	start := min(f.renew, lease)
	if age >= start {
		return 0, fmt.Errorf("%w: the last renewal of the leader Lease was sent %s ago, past --renew-deadline %s (the Lease lasts %s)",
			reconcile.ErrFenced, age.Round(time.Millisecond), f.renew, lease)
	}
	return start + (lease-start)/2 - age, nil
}

// sendLeft is how long a write already let out still has to be answered, counted from the
// fence's latest renewal: until the midpoint between the start limit and the record's
// duration after that renewal's sending (see open). Renewals sent since the write started
// count, so that a healthy leader's slow write is not abandoned; the fence closed for good,
// or the midpoint passed, is the fence's error.
func (f *fence) sendLeft() (time.Duration, error) {
	age, lease, err := f.age()
	if err != nil {
		return 0, err
	}
	start := min(f.renew, lease)
	if left := start + (lease-start)/2 - age; left > 0 {
		return left, nil
	}
	return 0, fmt.Errorf("%w: the last renewal of the leader Lease was sent %s ago, near the %s after which a standby may take it",
		reconcile.ErrFenced, age.Round(time.Millisecond), lease)
}

// age is how long ago the last renewal was sent, by whichever clock says longer, and the
// duration its record holds; or the fence's error if it is closed for good or was never
// opened.
func (f *fence) age() (age, lease time.Duration, err error) {
	mono, wall := f.clock.mono(), f.clock.wall()
	f.mu.Lock()
	renewed, sentMono, sentWall, lease, ended := f.renewed, f.sentMono, f.sentWall, f.lease, f.ended
	f.mu.Unlock()
	if ended != "" {
		return 0, 0, fmt.Errorf("%w: %s", reconcile.ErrFenced, ended)
	}
	if !renewed {
		return 0, 0, fmt.Errorf("%w: this replica has not renewed the leader Lease", reconcile.ErrFenced)
	}
	return max(mono-sentMono, wall.Sub(sentWall)), lease, nil
}

// wrap is rt with every request but a read (GET, HEAD: lists and watches included) refused
// while the fence is closed; nil: rt as it is. A nil rt is http.DefaultTransport, as an
// http.Client takes it (client-go leaves it nil for a plain configuration).
func (f *fence) wrap(rt http.RoundTripper) http.RoundTripper {
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
	fence *fence
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
	fence  *fence
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

// fencedLock is the Lease lock with each successful Create or Update that makes this replica
// the holder told to the fence, timed from before the request was sent. The release (an
// Update that names no holder) closes the fence for good before it is sent: a standby that
// reads it may lead at once, while this replica's last renewal would otherwise keep its
// writes (the Events flushed on the way out) going for up to --renew-deadline.
//
// The release is sent only if the record read just before it (client-go's release reads the
// Lease first, then decides on its own view that it leads) names this replica in its term: a
// leader whose renewals failed while another took over would otherwise release the new
// leader's Lease, and the new leader, finding its record gone, would refuse another term and
// exit, leaving the Lease to whoever takes it next.
//
// A successful write cannot tell a renewal from a new term: a leader whose renewal stalled
// past the Lease, while another replica led and released it, won the Lease back and wrote on
// with the caches and expectations from before the other's term. So the first acquisition
// fixes this process's term (the record's LeaderTransitions, which the elector raises for
// each new holder and keeps while one renews), and a record of another term is refused
// unsent: the elector gives up once --renew-deadline has passed, and lead returns
// errLostLease, so that the process restarts clean. The fence stays closed meanwhile.
type fencedLock struct {
	resourcelock.Interface
	fence *fence
	log   *slog.Logger
}

func (l fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	mine := ler.HolderIdentity == l.Identity()
	if mine {
		if err := l.checkTerm(ler, true); err != nil {
			return err
		}
	}
	mono, wall := l.fence.sending()
	if err := l.Interface.Create(ctx, ler); err != nil {
		return err // as the lock returned it: the elector reads it
	}
	if mine {
		l.fence.acquired(mono, wall, ler)
	}
	return nil
}

// Get is the lock's Get, remembering the record read: client-go's release reads the Lease
// just before it sends the release, and decides on its own (possibly stale) view of leading,
// so Update checks the release against it.
func (l fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	ler, raw, err := l.Interface.Get(ctx)
	if err != nil {
		l.fence.readRecord(nil)
		return ler, raw, err // as the lock returned it: the elector reads it (NotFound)
	}
	l.fence.readRecord(ler)
	return ler, raw, nil
}

func (l fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	mine := ler.HolderIdentity == l.Identity()
	switch {
	case mine:
		if err := l.checkTerm(ler, false); err != nil {
			return err
		}
	case ler.HolderIdentity == "":
		// Closed whether or not the release is sent: this replica is done leading.
		l.fence.end("this replica is releasing the leader Lease")
		if err := l.fence.mayRelease(l.Identity()); err != nil {
			if l.log != nil {
				l.log.Info("Not releasing the leader Lease: as last read, it is not this replica's in its term", "lease", l.Describe(), "reason", err)
			}
			return err
		}
	}
	mono, wall := l.fence.sending()
	if err := l.Interface.Update(ctx, ler); err != nil {
		return err // as the lock returned it: the elector reads it
	}
	if mine {
		l.fence.acquired(mono, wall, ler)
	}
	return nil
}

// checkTerm refuses ler if it would begin another term than this process's (fence.inTerm),
// saying so once.
func (l fencedLock) checkTerm(ler resourcelock.LeaderElectionRecord, create bool) error {
	first, err := l.fence.inTerm(ler.LeaderTransitions, create)
	if first && l.log != nil {
		l.log.Info("Another replica has led since this one acquired the Lease; not taking it back, exiting once the elector gives up",
			"lease", l.Describe(), "transitions", ler.LeaderTransitions, "create", create)
	}
	return err
}
