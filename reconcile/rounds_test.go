package reconcile

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
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

// TestLastRoundWrites: a reconcile whose last decision (maxDecisions) writes the VM notes the
// writes of the rounds before, which that decision was made on, and forgets the VM as an
// earlier write returned it (here, an earlier reconcile's, which it started from): the last
// write was not decided on, and its echo, alone, brings the VM back. Nothing was noted: the
// echo of every write queued the VM again, and a reconcile then decided on the cache's older
// version, or on the earlier reconcile's last write.
func TestLastRoundWrites(t *testing.T) {
	w := newWorld(t, "create-new")
	// The first reconcile adds the finalizer, creates the server and writes the status
	// (Creating), and finds nothing more to do. In the next, the server is ready (Active),
	// then failed (Failed), then ready again (Active).
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
	noted, last := slices.Clone(c.ledger.echoes.m[testVM]), has(c.ledger.echoes.last, testVM)
	c.ledger.echoes.mu.Unlock()
	if !slices.Equal(noted, rvs[:4]) || last {
		t.Errorf("noted %v (and a VM as a write returned it: %t); want the four writes decided on, and no VM", noted, last)
	}

	// The informer hands over each write's echo: those decided on bring nothing, the last
	// brings the VM back.
	final := w.vm(t, testVM.Namespace, testVM.Name)
	for i, rv := range rvs {
		echo := final.DeepCopy()
		echo.SetResourceVersion(rv)
		c.onVMUpdate(obj, cached(t, w, echo))
		want := 0
		if i == len(rvs)-1 {
			want = 1
		}
		if n := c.queue.Len(); n != want {
			t.Errorf("the echo of write %d (%s) queued %d keys, want %d", i+1, rv, n, want)
		}
	}
}
