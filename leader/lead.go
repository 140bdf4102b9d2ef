package leader

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Election is the leader election's configuration: run's flags.
type Election struct {
	// Name and Namespace name the Lease; Identity names this replica in it, unique per
	// process.
	Name, Namespace, Identity string
	// Lease, Renew and Retry are --lease-duration, --renew-deadline and --retry-period.
	Lease, Renew, Retry time.Duration
	// Fence, if set, is told of each renewal of the Lease by this replica (fencedLock).
	Fence *Fence
}

// errLostLease makes the process exit non-zero, so that it restarts with clean state rather
// than carrying on with caches and expectations from its time as leader.
type errLostLease struct{ lease string }

func (e errLostLease) Error() string {
	return fmt.Sprintf("lost the leader lease %s; exiting so that a restart begins clean", e.lease)
}

// Callbacks are what leading changes: the metric (SetLeader), and the liveness probe's
// watchdog (Healthz), which fails a leader whose renewals are stuck.
type Callbacks struct {
	SetLeader func(bool)
	Healthz   *leaderelection.HealthzAdaptor
}

// Lead campaigns for the Lease and runs work while this replica holds it. On ctx's end
// (SIGTERM) work drains first and only then is the Lease released, so the next leader starts
// no sooner than the last reconcile here has finished: a graceful handoff takes about a
// retry period. A lost Lease stops work and returns an error (errLostLease), so that the
// process exits and restarts clean.
func Lead(ctx context.Context, kube kubernetes.Interface, e Election, cb Callbacks, log *slog.Logger, work func(context.Context) error) error {
	var lock resourcelock.Interface = &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: e.Name, Namespace: e.Namespace},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	if e.Fence != nil {
		lock = fencedLock{Interface: lock, fence: e.Fence, log: log}
	}
	// The elector runs on its own context, cancelled only after work has drained.
	elCtx, elCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer elCancel()
	var led atomic.Bool
	workDone := make(chan error, 1)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.Lease,
		RenewDeadline:   e.Renew,
		RetryPeriod:     e.Retry,
		ReleaseOnCancel: true,
		Name:            e.Namespace + "/" + e.Name,
		WatchDog:        cb.Healthz,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) {
				led.Store(true)
				cb.SetLeader(true)
				log.Info("Became the leader", "lease", e.Namespace+"/"+e.Name, "identity", e.Identity)
				wctx, cancel := context.WithCancel(leading)
				stop := context.AfterFunc(ctx, cancel)
				err := work(wctx)
				stop()
				cancel()
				workDone <- err
				elCancel() // release the Lease now that nothing here writes any more
			},
			OnStoppedLeading: func() { cb.SetLeader(false) },
			OnNewLeader: func(id string) {
				if id != e.Identity {
					log.Info("Another replica leads; standing by", "leader", id, "lease", e.Namespace+"/"+e.Name)
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
	log.Info("Campaigning for the leader lease", "lease", e.Namespace+"/"+e.Name, "identity", e.Identity)
	le.Run(elCtx)
	if !led.Load() {
		return nil
	}
	err = <-workDone
	if ctx.Err() == nil {
		return errLostLease{e.Namespace + "/" + e.Name}
	}
	return err
}
