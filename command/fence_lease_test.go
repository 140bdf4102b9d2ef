package command

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/cloudnative-czs/vm-controller/reconcile"
)

func quietCallbacks() leaderCallbacks {
	return leaderCallbacks{setLeader: func(bool) {}, healthz: leaderelection.NewLeaderHealthzAdaptor(time.Second)}
}

// TestLeadReleaseClosesFence: the release on shutdown leaves the Lease with no holder, which
// a standby may take at once; the fence is closed by then, although the last renewal is far
// younger than --renew-deadline: what the process writes on its way out (the Events it
// flushes) is refused.
func TestLeadReleaseClosesFence(t *testing.T) {
	kube := fake.NewClientset()
	f := newFence(10*time.Second, systemClock(), nil)
	e := election{name: "l", namespace: "ns", identity: "a", lease: 15 * time.Second, renew: 10 * time.Second,
		retry: 500 * time.Millisecond, fence: f}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var during error
	err := lead(ctx, kube, e, quietCallbacks(), slog.New(slog.DiscardHandler), func(ctx context.Context) error {
		during = f.Check()
		cancel()
		<-ctx.Done()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if during != nil {
		t.Fatalf("fence while leading: %v, want open", during)
	}
	l, err := kube.CoordinationV1().Leases("ns").Get(context.Background(), "l", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		t.Fatalf("holder %q after the release, want none", *h)
	}
	if err := f.Check(); !errors.Is(err, reconcile.ErrFenced) {
		t.Errorf("fence after the release: %v, want ErrFenced", err)
	}
}
