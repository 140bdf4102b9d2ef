package leader

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/cloudnative-czs/vm-controller/reconcile"
)

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

// Fence lets this replica's writes leave the process only while its last renewal of the
// Lease is younger than the renew deadline (see above). Until its first renewal, a standby's
// writes are fenced too: it has none to make. Once this replica has released the Lease, or
// another replica has led since this one first acquired it, the fence stays closed: a standby
// may lead as soon as it reads the release, and a process that led before another replica's
// term holds caches and expectations from before it.
type Fence struct {
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

// NewFence is a fence for a renew deadline of renew (--renew-deadline), measured by the
// process's clocks, closed until this replica's first renewal of the Lease (Election.Fence).
// refused, if set, is called for each write the fence refuses or abandons (the metrics).
func NewFence(renew time.Duration, refused func()) *Fence {
	return newFence(renew, systemClock(), refused)
}

func newFence(renew time.Duration, clock fenceClock, refused func()) *Fence {
	return &Fence{renew: renew, clock: clock, refused: refused}
}

// sending reads the clocks before a renewal is sent: the renewal counts from then, the
// earliest any other replica can have seen it (conservative).
func (f *Fence) sending() (time.Duration, time.Time) { return f.clock.mono(), f.clock.wall() }

// renewedLocked records a successful renewal sent at mono and wall, of a record that holds
// lease. An earlier renewal that returns late moves nothing back.
func (f *Fence) renewedLocked(mono time.Duration, wall time.Time, lease time.Duration) {
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
func (f *Fence) end(reason string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.endLocked(reason)
}

func (f *Fence) endLocked(reason string) bool {
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
func (f *Fence) inTerm(transitions int, create bool) (first bool, err error) {
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
func (f *Fence) readRecord(ler *resourcelock.LeaderElectionRecord) {
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
func (f *Fence) mayRelease(identity string) error {
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
func (f *Fence) acquired(mono time.Duration, wall time.Time, ler resourcelock.LeaderElectionRecord) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.termKnown {
		f.termKnown, f.term = true, ler.LeaderTransitions
	}
	f.renewedLocked(mono, wall, time.Duration(ler.LeaseDurationSeconds)*time.Second)
}

// Check is nil while writes may go out, else an error wrapping reconcile.ErrFenced. A nil
// fence (no leader election) never refuses.
func (f *Fence) Check() error {
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
func (f *Fence) open() (time.Duration, error) {
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
func (f *Fence) sendLeft() (time.Duration, error) {
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
func (f *Fence) age() (age, lease time.Duration, err error) {
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
