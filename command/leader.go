// Leader election: every replica fills its caches; only the holder of the Lease reconciles.

package command

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// election is the leader election configuration from the flags.
type election struct {
	name, namespace, identity string
	lease, renew, retry       time.Duration
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
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: e.name, Namespace: e.namespace},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.identity},
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
