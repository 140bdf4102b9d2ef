package leader

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/cloudnative-czs/vm-controller/reconcile"
)

func quietCallbacks() Callbacks {
	return Callbacks{SetLeader: func(bool) {}, Healthz: leaderelection.NewLeaderHealthzAdaptor(time.Second)}
}

// TestLeadReleaseClosesFence: the release on shutdown leaves the Lease with no holder, which
// a standby may take at once; the fence is closed by then, although the last renewal is far
// younger than --renew-deadline: what the process writes on its way out (the Events it
// flushes) is refused.
func TestLeadReleaseClosesFence(t *testing.T) {
	kube := fake.NewClientset()
	f := NewFence(10*time.Second, nil)
	e := Election{Name: "l", Namespace: "ns", Identity: "a", Lease: 15 * time.Second, Renew: 10 * time.Second,
		Retry: 500 * time.Millisecond, Fence: f}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var during error
	err := Lead(ctx, kube, e, quietCallbacks(), slog.New(slog.DiscardHandler), func(ctx context.Context) error {
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

// leaseServer is one Lease with the API server's optimistic concurrency (an Update of a stale
// resourceVersion is a Conflict), which the fake clientset's tracker lacks, shared by the fake
// clientsets it is installed in. hook runs before each Update with the holder it names, and
// may hold it up.
type leaseServer struct {
	mu      sync.Mutex
	lease   *coordinationv1.Lease
	rv      int
	holders []string // the holder named by each successful write, in order
	hook    func(holder string)
}

func (s *leaseServer) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lease == nil || s.lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *s.lease.Spec.HolderIdentity
}

func (s *leaseServer) written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.holders)
}

func (s *leaseServer) install(kube *fake.Clientset) {
	gr := k8sschema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	holderOf := func(l *coordinationv1.Lease) string {
		if l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	kube.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// By verb: a CreateAction and an UpdateAction have the same methods.
		switch a.GetVerb() {
		case "get":
			a := a.(k8stesting.GetAction)
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.lease == nil {
				return true, nil, apierrors.NewNotFound(gr, a.GetName())
			}
			return true, s.lease.DeepCopy(), nil
		case "create":
			l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.lease != nil {
				return true, nil, apierrors.NewAlreadyExists(gr, l.Name)
			}
			s.rv++
			l.ResourceVersion = strconv.Itoa(s.rv)
			s.lease = l
			s.holders = append(s.holders, holderOf(l))
			return true, l.DeepCopy(), nil
		case "update":
			l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
			if s.hook != nil {
				s.hook(holderOf(l))
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.lease == nil || l.ResourceVersion != s.lease.ResourceVersion {
				return true, nil, apierrors.NewConflict(gr, l.Name, errors.New("the object has been modified"))
			}
			s.rv++
			l.ResourceVersion = strconv.Itoa(s.rv)
			s.lease = l
			s.holders = append(s.holders, holderOf(l))
			return true, l.DeepCopy(), nil
		}
		return false, nil, nil
	})
}

// pollUntil polls cond until it holds, or fails the test after d.
func pollUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLeadRefusesAnotherTerm: a leader whose renewal stalls past the Lease (as in a pause),
// while a standby takes the Lease and releases it again (its SIGTERM), finds the Lease free
// when the stalled renewal returns. It does not take it back in this process: its caches and
// expectations are from before the other's term. The record of its new term is refused
// unsent, its fence stays closed, the elector gives up, and Lead returns errLostLease, so
// that the process restarts clean.
func TestLeadRefusesAnotherTerm(t *testing.T) {
	srv := &leaseServer{}
	var stallA atomic.Bool
	release := make(chan struct{})
	srv.hook = func(h string) {
		if h == "a" && stallA.CompareAndSwap(true, false) {
			<-release // until b has led and released
		}
	}
	// One clientset each: the fake runs its reactors one at a time, and a's stall must
	// not hold b's requests.
	kubeA, kubeB := fake.NewClientset(), fake.NewClientset()
	srv.install(kubeA)
	srv.install(kubeB)
	const lease, renew = 2 * time.Second, 1500 * time.Millisecond
	fa := NewFence(renew, nil)
	fb := NewFence(renew, nil)
	ea := Election{Name: "l", Namespace: "ns", Identity: "a", Lease: lease, Renew: renew, Retry: 500 * time.Millisecond, Fence: fa}
	eb := Election{Name: "l", Namespace: "ns", Identity: "b", Lease: lease, Renew: renew, Retry: 100 * time.Millisecond, Fence: fb}
	log := slog.New(slog.DiscardHandler)

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	aLeads := make(chan struct{})
	var aWorkEnded atomic.Bool
	aDone := make(chan error, 1)
	go func() {
		aDone <- Lead(ctxA, kubeA, ea, quietCallbacks(), log, func(ctx context.Context) error {
			close(aLeads)
			<-ctx.Done()
			aWorkEnded.Store(true)
			return nil
		})
	}()
	<-aLeads
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	bLed := make(chan error, 1)
	go func() {
		// b leads and is at once told to stop (a rollout's SIGTERM): it releases the Lease.
		_ = Lead(ctxB, kubeB, eb, quietCallbacks(), log, func(context.Context) error {
			bLed <- fa.Check()
			return nil
		})
	}()
	time.Sleep(300 * time.Millisecond)
	stallA.Store(true)
	select {
	case err := <-bLed:
		if !errors.Is(err, reconcile.ErrFenced) {
			t.Errorf("a's fence while b led: %v, want ErrFenced", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("b never led")
	}
	pollUntil(t, "b's release", 5*time.Second, func() bool { return srv.holder() == "" })
	close(release)

	// Until Lead returns, a's fence stays closed.
	var opened atomic.Bool
	var err error
	func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		timeout := time.After(15 * time.Second)
		for {
			if fa.Check() == nil {
				opened.Store(true)
			}
			select {
			case err = <-aDone:
				return
			case <-tick.C:
			case <-timeout:
				t.Fatalf("a's lead never returned; holders written %q", srv.written())
			}
		}
	}()
	if !errors.As(err, new(errLostLease)) {
		t.Errorf("a's lead returned %v, want errLostLease", err)
	}
	if !aWorkEnded.Load() {
		t.Error("a's work did not end")
	}
	if opened.Load() {
		t.Error("a's fence opened again after b's term")
	}
	if err := fa.Check(); !errors.Is(err, reconcile.ErrFenced) {
		t.Errorf("a's fence after Lead returned: %v, want ErrFenced", err)
	}
	w := srv.written()
	if i := slices.Index(w, "b"); i < 0 || slices.Contains(w[i:], "a") {
		t.Errorf("holders written %q: a must not hold the Lease after b", w)
	}
}

// TestLeadStaleReleaseSparesNewLeader: a leader cut off from the API server (its renewals time
// out) gives up once --renew-deadline has passed and, on its way out, releases the Lease:
// client-go's release reads the Lease and then decides on its own stale view that it leads.
// By then a standby has taken the Lease; the release, were it sent, would end the new
// leader's term, which, finding its record gone, would refuse another term and exit, leaving
// nobody leading. The release is refused unsent: the new leader leads on.
func TestLeadStaleReleaseSparesNewLeader(t *testing.T) {
	srv := &leaseServer{}
	kubeA, kubeB := fake.NewClientset(), fake.NewClientset()
	srv.install(kubeA)
	srv.install(kubeB)
	// a: renewals every second, given up 1.9s after the first that fails; so after its last
	// success at t0, tries at t0+1s and t0+2s, and the release's read at t0+2.9s.
	const lease = 3 * time.Second
	var partitionAt atomic.Int64 // unix nanos of t0; 0: a reaches the API server
	var armed, healed atomic.Bool
	kubeA.PrependReactor("*", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := partitionAt.Load()
		if p == 0 || healed.Load() {
			return false, nil, nil
		}
		if a.GetVerb() == "get" && time.Since(time.Unix(0, p)) > 2450*time.Millisecond {
			// The release's read: the network is back, and b holds the Lease by then.
			deadline := time.Now().Add(5 * time.Second)
			for srv.holder() != "b" && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			healed.Store(true)
			return false, nil, nil
		}
		return true, nil, errors.New("dial tcp: i/o timeout")
	})
	srv.hook = func(h string) {
		if h == "a" && armed.CompareAndSwap(true, false) {
			go func() { time.Sleep(time.Millisecond); partitionAt.Store(time.Now().UnixNano()) }()
		}
	}
	fa := NewFence(1900*time.Millisecond, nil)
	fb := NewFence(1900*time.Millisecond, nil)
	ea := Election{Name: "l", Namespace: "ns", Identity: "a", Lease: lease, Renew: 1900 * time.Millisecond, Retry: time.Second, Fence: fa}
	eb := Election{Name: "l", Namespace: "ns", Identity: "b", Lease: lease, Renew: 1900 * time.Millisecond, Retry: 100 * time.Millisecond, Fence: fb}
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	aLeads := make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		aDone <- Lead(ctx, kubeA, ea, quietCallbacks(), log, func(ctx context.Context) error { close(aLeads); <-ctx.Done(); return nil })
	}()
	<-aLeads
	var bLed atomic.Bool
	bDone := make(chan error, 1)
	go func() {
		bDone <- Lead(ctx, kubeB, eb, quietCallbacks(), log, func(ctx context.Context) error { bLed.Store(true); <-ctx.Done(); return nil })
	}()
	time.Sleep(300 * time.Millisecond)
	armed.Store(true)

	select {
	case err := <-aDone:
		if !errors.As(err, new(errLostLease)) {
			t.Errorf("a's lead returned %v, want errLostLease", err)
		}
	case err := <-bDone:
		t.Fatalf("b's lead returned %v before a gave up (b led: %t); holders written %q", err, bLed.Load(), srv.written())
	case <-time.After(15 * time.Second):
		t.Fatalf("a never gave up; holders written %q", srv.written())
	}
	if !healed.Load() {
		t.Fatalf("a gave up without reading the Lease after b took it; holders written %q", srv.written())
	}
	// b leads on, through several renewals.
	select {
	case err := <-bDone:
		t.Fatalf("b's lead returned %v after a's release; holders written %q", err, srv.written())
	case <-time.After(2 * time.Second):
	}
	if !bLed.Load() {
		t.Error("b never led")
	}
	if err := fb.Check(); err != nil {
		t.Errorf("b's fence: %v, want open", err)
	}
	w := srv.written()
	if i := slices.Index(w, "b"); i < 0 || slices.ContainsFunc(w[i:], func(h string) bool { return h != "b" }) {
		t.Errorf("holders written %q: want b's alone once b holds the Lease", w)
	}
}

// TestLeadLeaseDeletedExits: the Lease deleted under a healthy leader (kubectl delete lease)
// cannot tell who led meanwhile: the leader's renewal would re-create it as a new term, which
// the fence refuses. The fence closes, and once --renew-deadline has passed Lead returns
// errLostLease, so that the process restarts clean and a standby, or the restart, takes the
// new Lease.
func TestLeadLeaseDeletedExits(t *testing.T) {
	kube := fake.NewClientset()
	f := NewFence(1500*time.Millisecond, nil)
	e := Election{Name: "l", Namespace: "ns", Identity: "a", Lease: 2 * time.Second, Renew: 1500 * time.Millisecond, Retry: 200 * time.Millisecond, Fence: f}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leads := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Lead(ctx, kube, e, quietCallbacks(), slog.New(slog.DiscardHandler), func(ctx context.Context) error {
			close(leads)
			<-ctx.Done()
			return nil
		})
	}()
	<-leads
	time.Sleep(500 * time.Millisecond)
	if err := kube.CoordinationV1().Leases("ns").Delete(context.Background(), "l", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.As(err, new(errLostLease)) {
			t.Errorf("lead returned %v, want errLostLease", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lead still running 10s after the Lease was deleted")
	}
	if err := f.Check(); !errors.Is(err, reconcile.ErrFenced) {
		t.Errorf("fence after the Lease was deleted: %v, want closed", err)
	}
	if _, err := kube.CoordinationV1().Leases("ns").Get(context.Background(), "l", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Lease after the leader exited: %v, want not re-created", err)
	}
}
