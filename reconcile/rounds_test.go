package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// answeringBackend is the memory backend whose cache, by the number of the Observe (from 1),
// may answer otherwise: answers[n] is given what the memory backend shows, and says what the
// n-th Observe returns. Its reads past the cache (backend.Reader) read the memory backend, or
// fail with getErr.
type answeringBackend struct {
	*memory.Backend
	calls   atomic.Int32
	answers map[int32]func(*backend.Server) (*backend.Server, error)
	getErr  error
}

func (b *answeringBackend) Observe(vm backend.Owner) (*backend.Server, error) {
	n := b.calls.Add(1)
	s, err := b.Backend.Observe(vm)
	if answer, ok := b.answers[n]; ok && err == nil {
		return answer(s)
	}
	return s, err
}

func (b *answeringBackend) Get(_ context.Context, vm backend.Owner) (*backend.Server, error) {
	if b.getErr != nil {
		return nil, b.getErr
	}
	return b.Backend.Observe(vm)
}

// inState is an answer of answeringBackend: the server, in state.
func inState(state backend.State) func(*backend.Server) (*backend.Server, error) {
	return func(s *backend.Server) (*backend.Server, error) {
		if s != nil {
			s.State = state
		}
		return s, nil
	}
}

// TestRoundEndsAfterWrites: a reconcile whose later round ends before it applies (its
// gather or its confirm fails, or the server's cache has yet to show the server the status
// names) notes the writes of the rounds before, as one whose apply fails does: the next
// reconcile decides on the VM as the last of them returned it. They were not noted: each
// write's echo queued the VM again, and a reconcile before the cache caught up decided on
// its older version, and met a conflict of its own making (or sent a server action or an
// Event again).
func TestRoundEndsAfterWrites(t *testing.T) {
	boom := errors.New("backend down")
	tests := map[string]struct {
		vm      string
		server  bool // the case's server is there
		setup   func(w *world)
		answers map[int32]func(*backend.Server) (*backend.Server, error)
		getErr  error
		result  string // of the reconcile that ends early
	}{
		// Round 1 adds the finalizer, creates the server and writes the status; round 2's
		// gather fails.
		"gather fails": {vm: "create-new", answers: map[int32]func(*backend.Server) (*backend.Server, error){
			2: func(*backend.Server) (*backend.Server, error) { return nil, boom },
		}, result: ResultError},
		// Round 1 deletes the server and writes the status; round 2 sees it gone, and the
		// read that confirms so before the finalizer goes fails.
		"confirm fails": {vm: "delete-with-server", server: true, answers: map[int32]func(*backend.Server) (*backend.Server, error){
			2: func(*backend.Server) (*backend.Server, error) { return nil, nil },
		}, getErr: boom, result: ResultError},
		// Round 1 adds the finalizer; round 2's cache has yet to show the server the status
		// names, which a read past it finds: nothing is decided, and the VM waits.
		"server not cached yet": {vm: "active-steady", server: true, setup: func(w *world) {
			u := w.vm(t, testVM.Namespace, testVM.Name)
			u.SetFinalizers(nil)
			if err := w.client.Tracker().Update(vmGVR, u, testVM.Namespace); err != nil {
				t.Fatal(err)
			}
		}, answers: map[int32]func(*backend.Server) (*backend.Server, error){
			2: func(*backend.Server) (*backend.Server, error) { return nil, nil },
		}, result: ResultRequeue},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.vm)
			if tc.server {
				_, srv := decidecase.Read(t, caseFile(tc.vm))
				w.servers.Set(ownerOf(w.view(t, tc.vm)), srv)
			}
			if tc.setup != nil {
				tc.setup(w)
			}
			b := &answeringBackend{Backend: w.servers, answers: tc.answers, getErr: tc.getErr}
			c, r := newControllerOver(t, w, b, decision.UsagePolicy{})
			ctx := start(t, c)
			c.vms.Load().stop() // the cache keeps the VM as first listed, before any write
			c.processNextItem(ctx)
			if got := r.last(); got != tc.result {
				t.Fatalf("result %q, want %q", got, tc.result)
			}
			written := w.writes()
			if len(written) == 0 {
				t.Fatal("round 1 wrote nothing")
			}
			rv := w.vm(t, testVM.Namespace, testVM.Name).GetResourceVersion()
			if got := c.ledger.echoes.held(testVM); !slices.Equal(got, []string{"last", "versions"}) {
				t.Errorf("the ledger holds %v of the writes, want their versions and the VM as the last returned it", got)
			}

			// The next reconcile, the cache still behind, decides on the last write.
			b.answers, b.getErr = nil, nil
			c.queue.Add(testVM)
			c.processNextItem(ctx)
			if got := r.last(); got == ResultConflict || got == ResultError {
				t.Errorf("the next reconcile: %q, want it decided on the VM at %s, as written", got, rv)
			}
			for _, wr := range w.writes()[len(written):] {
				if at(wr.body, "metadata", "resourceVersion") != rv {
					t.Errorf("the next reconcile wrote %+v, on a VM older than its own last write (%s)", wr.body, rv)
				}
			}
		})
	}
}

// TestLastRoundWrites: a reconcile whose last decision (maxDecisions) writes the VM notes
// every one of its writes, with the VM as the last returned it, and queues the VM as new work
// at once: the next reconcile decides on that write, though the cache has yet to bring it back,
// and the echo of each write brings nothing. Before, the last write was left to its echo,
// which came back as a status update and went to the backlog.
func TestLastRoundWrites(t *testing.T) {
	w := newWorld(t, "create-new")
	// The first reconcile adds the finalizer, creates the server and writes the status
	// (Creating), and finds nothing more to do. In the next, the server is ready (Active),
	// then failed (Failed), then ready again (Active); then, as the memory backend has it,
	// pending.
	b := &answeringBackend{Backend: w.servers, answers: map[int32]func(*backend.Server) (*backend.Server, error){
		3: inState(backend.StateReady), 4: inState(backend.StateFailed), 5: inState(backend.StateReady),
	}}
	c, r := newControllerOver(t, w, b, decision.UsagePolicy{})
	ctx := start(t, c)
	vms := c.vms.Load()
	vms.stop() // the cache keeps the VM as first listed: the echoes are handed over below
	obj, _, _ := vms.store.GetByKey(testVM.String())
	cachedRV, _ := strconv.Atoi(obj.(interface{ GetResourceVersion() string }).GetResourceVersion())
	c.processNextItem(ctx)
	if got := r.last(); got != ResultSuccess {
		t.Fatalf("first reconcile: %q, want success", got)
	}
	if got := c.ledger.echoes.held(testVM); !slices.Equal(got, []string{"last", "versions"}) {
		t.Fatalf("the first reconcile noted %v, want its writes and the VM as the last returned it", got)
	}
	c.queue.Add(testVM)
	c.processNextItem(ctx)
	if b.calls.Load() != 5 {
		t.Fatalf("%d observes, want 5: 2 in the first reconcile, 3 in the next", b.calls.Load())
	}
	var rvs []string // of the five writes: the first reconcile's two, the next's three
	for i := 1; i <= 5; i++ {
		rvs = append(rvs, strconv.Itoa(cachedRV+i))
	}
	if got := w.vm(t, testVM.Namespace, testVM.Name).GetResourceVersion(); got != rvs[4] {
		t.Fatalf("the VM is at %s, want five writes after %d", got, cachedRV)
	}
	c.ledger.echoes.mu.Lock()
	noted, last := slices.Clone(c.ledger.echoes.m[testVM]), c.ledger.echoes.last[testVM].rv
	c.ledger.echoes.mu.Unlock()
	if !slices.Equal(noted, rvs) || last != rvs[4] {
		t.Errorf("noted %v and the VM at %q; want the five writes, and the VM as the last returned it", noted, last)
	}
	if u, b := c.queue.Lens(); u != 1 || b != 0 {
		t.Fatalf("after the last decision: %d new work, %d backlog; want the VM as new work", u, b)
	}

	// The next reconcile decides on the VM as the last write returned it: its writes are
	// conditional on that write's version, not on the cache's.
	before := len(w.writes())
	c.processNextItem(ctx)
	if got := r.last(); got != ResultSuccess {
		t.Errorf("the next reconcile: %q, want success", got)
	}
	written := w.writes()[before:]
	if len(written) == 0 {
		t.Error("the next reconcile wrote nothing: the server is pending, not ready as the VM's status says")
	}
	for _, wr := range written {
		if got := at(wr.body, "metadata", "resourceVersion"); got != rvs[4] {
			t.Errorf("the next reconcile wrote at %v, want at the last write's %s", got, rvs[4])
		}
	}

	// The informer hands over each write's echo: none brings the VM back.
	final := w.vm(t, testVM.Namespace, testVM.Name)
	for i, rv := range rvs {
		echo := final.DeepCopy()
		echo.SetResourceVersion(rv)
		c.onVMUpdate(obj, cached(t, w, echo))
		if n := c.queue.Len(); n != 0 {
			t.Errorf("the echo of write %d (%s) queued %d keys, want none", i+1, rv, n)
		}
	}
}

// TestLastRoundAheadOfBacklog: a VM whose reconcile runs out of decisions with its last write
// yet to be decided on is reconciled again ahead of a start's backlog: it is a change under
// way. Left to its write's echo, a status update, it went to the end of the backlog.
func TestLastRoundAheadOfBacklog(t *testing.T) {
	w := newWorld(t)
	settledVMs(t, w, "settled-1", "settled-2", "settled-3")
	creatingWithServer(t, w)
	// The server is ready (Active), then seen on another node, then on a third: each
	// decision writes the status.
	onNode := func(node string) func(*backend.Server) (*backend.Server, error) {
		return func(s *backend.Server) (*backend.Server, error) {
			s.State, s.Node = backend.StateReady, node
			return s, nil
		}
	}
	b := &answeringBackend{Backend: w.servers, answers: map[int32]func(*backend.Server) (*backend.Server, error){
		1: onNode("node-a"), 2: onNode("node-b"), 3: onNode("node-c"),
	}}
	c, r := newControllerOver(t, w, b, decision.UsagePolicy{})
	ctx := start(t, c)
	if u, b := c.queue.Lens(); u != 1 || b != 3 {
		t.Fatalf("after the first list: %d new, %d backlog; want 1 and 3", u, b)
	}
	c.processNextItem(ctx)
	if got := r.last(); got != ResultSuccess {
		t.Fatalf("reconcile: %q, want success", got)
	}
	if n := b.calls.Load(); n != maxDecisions {
		t.Fatalf("%d decisions, want %d", n, maxDecisions)
	}
	if n := len(w.writes()); n != maxDecisions {
		t.Fatalf("%d writes, want one per decision (%d)", n, maxDecisions)
	}
	// Wait for the VM to be queued again, however it is (before, by its last write's echo):
	// the order, not the timing, is the test.
	eventually(t, "the VM is queued again", func() bool { return c.queue.Len() == 4 })
	var got []string
	for c.queue.Len() > 0 {
		got = append(got, next(t, c))
	}
	if want := []string{testVM.Name, "settled-1", "settled-2", "settled-3"}; !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

// creatingWithServer makes the case active-steady's VM in w on its way to its server
// (Creating: new work at a start), its server there already: every write of its reconcile is
// to its status, whose echo alone is backlog, and none is a server's change that the backend
// notifies.
func creatingWithServer(t *testing.T, w *world) {
	t.Helper()
	u := caseObject(t, "active-steady")
	if err := unstructured.SetNestedField(u.Object, string(schema.PhaseCreating), "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Tracker().Create(vmGVR, u, u.GetNamespace()); err != nil {
		t.Fatal(err)
	}
	_, srv := decidecase.Read(t, caseFile("active-steady"))
	w.servers.Set(ownerOf(w.view(t, "active-steady")), srv)
}

// TestUnsettledPaced: a VM whose reconciles run out of decisions again and again (here, its
// server is seen on another node at every look) is queued again at once the first time, and
// the next time only after Retry.UnsettledRateLimiter's delay: plans that never settle cost a
// few writes a minute, not a loop that starves the backlog. A reconcile that settles forgets
// the count.
func TestUnsettledPaced(t *testing.T) {
	w := newWorld(t)
	creatingWithServer(t, w)
	answers := map[int32]func(*backend.Server) (*backend.Server, error){}
	for i := int32(1); i <= 2*maxDecisions; i++ {
		node := fmt.Sprintf("node-%d", i)
		answers[i] = func(s *backend.Server) (*backend.Server, error) {
			s.State, s.Node = backend.StateReady, node
			return s, nil
		}
	}
	b := &answeringBackend{Backend: w.servers, answers: answers}
	r := &results{}
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Hour, time.Hour)
	retry := quickRetry()
	retry.UnsettledRateLimiter = limiter
	c := New(Config{VMs: w.source(), Backend: b, Policy: serverPolicy, Retry: retry,
		Report: w.report(r), Now: func() time.Time { return now }})
	ctx := start(t, c)
	key := cache.ObjectName{Namespace: testVM.Namespace, Name: testVM.Name}

	c.processNextItem(ctx) // three decisions, three writes: queued again at once
	if n := b.calls.Load(); n != maxDecisions {
		t.Fatalf("%d decisions, want %d", n, maxDecisions)
	}
	if u, _ := c.queue.Lens(); u != 1 || limiter.NumRequeues(key) != 1 {
		t.Fatalf("after the first run out: %d new, %d in a row; want 1 and 1", u, limiter.NumRequeues(key))
	}
	c.processNextItem(ctx) // three more: this time paced
	if n := b.calls.Load(); n != 2*maxDecisions {
		t.Fatalf("%d decisions, want %d", n, 2*maxDecisions)
	}
	if n := limiter.NumRequeues(key); n != 2 {
		t.Fatalf("%d run outs in a row counted, want 2", n)
	}
	// Barrier: a VM created now is new work; once it is queued, the unsettled VM, had it been
	// queued again as new work, would be ahead of it. (An echo of one of the second
	// reconcile's writes that came in while it ran may have queued the VM in the backlog, as
	// any reconcile's does: that is behind every new work, and no loop on the urgent lane.)
	other := caseObject(t, "active-steady")
	other.SetName("later-vm")
	other.SetUID("later-uid")
	if err := w.client.Tracker().Create(vmGVR, other, other.GetNamespace()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the later VM is queued as new work", func() bool { u, _ := c.queue.Lens(); return u > 0 })
	if u, _ := c.queue.Lens(); u != 1 {
		t.Errorf("%d keys queued as new work, want the later VM alone", u)
	}
	if got := next(t, c); got != "later-vm" {
		t.Errorf("queued %q first, want later-vm: the unsettled VM waits for its delay", got)
	}

	// Settled: the next reconcile of the VM has nothing to do, and forgets the count.
	b.answers = nil
	c.queue.AddUrgent(key)
	c.processNextItem(ctx)
	if n := limiter.NumRequeues(key); n != 0 {
		t.Errorf("a settled reconcile left %d run outs in a row counted, want 0", n)
	}
}
