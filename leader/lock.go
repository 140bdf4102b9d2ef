package leader

import (
	"context"
	"log/slog"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

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
// unsent: the elector gives up once --renew-deadline has passed, and Lead returns
// errLostLease, so that the process restarts clean. The fence stays closed meanwhile.
type fencedLock struct {
	resourcelock.Interface
	fence *Fence
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
