// Leader election: every replica fills its caches; only the holder of the Lease reconciles.

package command

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
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
		lock = fencedLock{Interface: lock, fence: e.fence}
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
// stops every write of the controller, at the last point before it leaves the process, once
// this replica's last renewal of the Lease is too old for it still to be the leader.
//
// Why the bound holds: a standby takes the Lease only after it has seen the same record for
// --lease-duration by its own clock, and it sees a renewal no sooner than the renewal was
// sent. A renewal sent at T therefore keeps every other replica from leading until
// T + --lease-duration; this replica writes only until T + --renew-deadline, and the
// difference (--lease-duration > --renew-deadline, run's Validate) is the margin for a
// write that passed the fence to reach the API server, and for the clocks' rates to differ.

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
// writes are fenced too: it has none to make. Once this replica has released the Lease, the
// fence stays closed: a standby may lead as soon as it reads the release.
type fence struct {
	renew time.Duration
	clock fenceClock
	// refused, if set, counts each request refused (the metrics).
	refused func()

	mu       sync.Mutex
	renewed  bool
	sentMono time.Duration // when the last successful renewal was sent, by each clock
	sentWall time.Time
	// ended, once set, says why the fence is closed for good, whatever a renewal says.
	ended string
}

func newFence(renew time.Duration, clock fenceClock, refused func()) *fence {
	return &fence{renew: renew, clock: clock, refused: refused}
}

// sending reads the clocks before a renewal is sent: the renewal counts from then, the
// earliest any other replica can have seen it (conservative).
func (f *fence) sending() (time.Duration, time.Time) { return f.clock.mono(), f.clock.wall() }

// renewedAt records a successful renewal sent at mono and wall. An earlier renewal that
// returns late moves nothing back.
func (f *fence) renewedAt(mono time.Duration, wall time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended != "" {
		return
	}
	if !f.renewed || mono > f.sentMono {
		f.sentMono = mono
	}
	if !f.renewed || wall.After(f.sentWall) {
		f.sentWall = wall
	}
	f.renewed = true
}

// end closes the fence for good, for reason.
func (f *fence) end(reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended == "" {
		f.ended = reason
	}
}

// Check is nil while writes may go out, else an error wrapping reconcile.ErrFenced. A nil
// fence (no leader election) never refuses.
func (f *fence) Check() error {
	if f == nil {
		return nil
	}
	mono, wall := f.clock.mono(), f.clock.wall()
	f.mu.Lock()
	renewed, sentMono, sentWall, ended := f.renewed, f.sentMono, f.sentWall, f.ended
	f.mu.Unlock()
	if ended != "" {
		return fmt.Errorf("%w: %s", reconcile.ErrFenced, ended)
	}
	if !renewed {
		return fmt.Errorf("%w: this replica has not renewed the leader Lease", reconcile.ErrFenced)
	}
	age := max(mono-sentMono, wall.Sub(sentWall))
	if age >= f.renew {
		return fmt.Errorf("%w: the last renewal of the leader Lease was sent %s ago, past --renew-deadline %s",
			reconcile.ErrFenced, age.Round(time.Millisecond), f.renew)
	}
	return nil
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

// fencedTransport refuses a write the fence does not let out; client-go returns the error
// wrapped in a *url.Error, which errors.Is sees through.
type fencedTransport struct {
	next  http.RoundTripper
	fence *fence
}

func (t fencedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := t.fence.Check(); err != nil {
			if r.Body != nil {
				_ = r.Body.Close() // a RoundTripper closes the body, even on an error
			}
			if t.fence.refused != nil {
				t.fence.refused()
			}
			return nil, fmt.Errorf("%s %s: %w", r.Method, r.URL.Path, err)
		}
	}
	return t.next.RoundTrip(r)
}

// WrappedRoundTripper lets client-go see the transport underneath (utilnet.RoundTripperWrapper).
func (t fencedTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// fencedLock is the Lease lock with each successful Create or Update that makes this replica
// the holder told to the fence, timed from before the request was sent. The release (an
// Update that names no holder) closes the fence for good before it is sent: a standby that
// reads it may lead at once, while this replica's last renewal would otherwise keep its
// writes (the Events flushed on the way out) going for up to --renew-deadline.
type fencedLock struct {
	resourcelock.Interface
	fence *fence
}

func (l fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	mono, wall := l.fence.sending()
	if err := l.Interface.Create(ctx, ler); err != nil {
		return err // as the lock returned it: the elector reads it
	}
	if ler.HolderIdentity == l.Identity() {
		l.fence.renewedAt(mono, wall)
	}
	return nil
}

func (l fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if ler.HolderIdentity == "" {
		l.fence.end("this replica has released the leader Lease")
	}
	mono, wall := l.fence.sending()
	if err := l.Interface.Update(ctx, ler); err != nil {
		return err // as the lock returned it: the elector reads it
	}
	if ler.HolderIdentity == l.Identity() {
		l.fence.renewedAt(mono, wall)
	}
	return nil
}
