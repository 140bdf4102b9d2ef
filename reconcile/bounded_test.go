package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache/vmcachetest"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// panickyBackend is the memory backend with a bug: while armed, Observe panics for one VM.
type panickyBackend struct {
	*memory.Backend
	name   string
	armed  atomic.Bool
	panics atomic.Int32
}

func (b *panickyBackend) Observe(vm backend.Owner) (*backend.Server, error) {
	if vm.Name == b.name && b.armed.Load() {
		b.panics.Add(1)
		panic("injected: observe " + vm.Name)
	}
	return b.Backend.Observe(vm)
}

// syncBuffer is a log the workers write while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestControllerPanic: a reconcile that panics is one failed reconcile. The one worker there
// is goes on to the other VM, the panic is logged with the VM's key and the stack and counted
// as the result "panic", and the VM is retried through the rate limiter until the bug is gone.
func TestControllerPanic(t *testing.T) {
	w := newWorld(t, "create-new")
	other := caseObject(t, "create-new")
	other.SetName("other-vm")
	if err := w.client.Tracker().Create(vmGVR, other, other.GetNamespace()); err != nil {
		t.Fatal(err)
	}
	buggy := &panickyBackend{Backend: w.servers, name: testVM.Name}
	buggy.armed.Store(true)
	c, r := newControllerOver(t, w, buggy, decision.UsagePolicy{})
	var log syncBuffer
	c.log = slog.New(slog.NewTextHandler(&log, nil))
	stop := runWorker(t, c)

	otherVM := cache.NewObjectName("default", "other-vm")
	eventually(t, "the other VM is reconciled by the worker that met the panic", func() bool {
		return status(t, w, otherVM, "phase") == string(schema.PhaseCreating)
	})
	// The outcome is counted after the panic is recovered: wait on the count, then compare it
	// with the panics the backend raised by then (one outcome per panic, never more).
	counted := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return strings.Count(strings.Join(r.outcomes, " "), "panic")
	}
	eventually(t, "the VM that panics is retried, each panic counted", func() bool { return counted() >= 3 })
	if n, raised := counted(), int(buggy.panics.Load()); n > raised || n < raised-1 {
		t.Errorf("%d reconciles counted as panic after %d panics, want one per panic", n, raised)
	}
	text := log.String()
	for _, want := range []string{`msg="Reconcile panicked; will retry"`, "vm=default/test-vm", `panic="injected: observe test-vm"`, "panickyBackend).Observe"} {
		if !strings.Contains(text, want) {
			t.Errorf("the log lacks %s:\n%s", want, text)
		}
	}

	buggy.armed.Store(false)
	eventually(t, "the VM is reconciled once the bug is gone", func() bool {
		return status(t, w, testVM, "phase") == string(schema.PhaseCreating)
	})
	if err := stop(); err != nil {
		t.Fatalf("RunWorkers: %v", err)
	}
}

// hangingAPIServer serves the VMs of vmcachetest.APIServer, and carries out merge patches of
// them, but while hanging it answers no patch: each waits until its client gives up.
type hangingAPIServer struct {
	*vmcachetest.APIServer
	hanging atomic.Bool
	gaveUp  atomic.Int32  // patches whose client went away unanswered
	stop    chan struct{} // closed at the end of the test, so that no handler outlives it

	mu  sync.Mutex
	vms map[string][]byte
	rv  int
}

func (s *hangingAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPatch {
		s.APIServer.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body) // read first: only then does the server notice the client leave
	if s.hanging.Load() {
		select {
		case <-r.Context().Done():
			s.gaveUp.Add(1)
		case <-s.stop:
		}
		return
	}
	path := strings.TrimPrefix(r.URL.Path, vmcachetest.Path+"/")
	name, _, _ := strings.Cut(path, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.vms[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	next, err := jsonpatch.MergePatch(cur, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.rv++
	next, err = jsonpatch.MergePatch(next, fmt.Appendf(nil, `{"metadata":{"resourceVersion":"%d"}}`, s.rv))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.vms[name] = next
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(next)
}

// TestControllerReconcileTimeout: a reconcile whose API call never gets an answer ends at
// --reconcile-timeout as a transient error: the result is "timeout", the error is the deadline,
// the request is given up, and the key is retried through the rate limiter; the worker is free
// at once, and the retry succeeds once the API server answers again.
func TestControllerReconcileTimeout(t *testing.T) {
	f := decidecase.Fields(t)
	raw, _ := decidecase.Input(t, caseFile("create-new"))
	vm := vmcachetest.Rename(t, raw, "vm1", "100")
	api := &hangingAPIServer{APIServer: &vmcachetest.APIServer{T: t, Initial: [][]byte{vm}, RV: "100", Events: make(chan string)},
		vms: map[string][]byte{"vm1": vm}, rv: 100, stop: make(chan struct{})}
	api.hanging.Store(true)
	srv := httptest.NewServer(api)
	defer srv.Close()
	defer close(api.stop)
	defer close(api.Events)
	client, err := vmcache.RESTClientFor(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := &results{}
	retry := quickRetry()
	retry.ReconcileTimeout = 50 * time.Millisecond
	c := New(Config{
		VMs: Source{Client: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), REST: client, GVR: vmGVR, Fields: f,
			Namespace: "default", Selector: vmcachetest.Selector},
		Backend: memory.New(), Policy: decision.DefaultPolicy, Retry: retry,
		Report: Report{Recorder: events.NewFakeRecorder(10), Logger: slog.New(slog.DiscardHandler), Observer: r},
		Now:    func() time.Time { return now }})
	ctx := start(t, c)
	key := cache.NewObjectName("default", "vm1")

	// The reconcile itself: its first write (the finalizer) waits for an answer that never
	// comes, until the deadline.
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Retry.ReconcileTimeout)
	_, err = c.reconcile(rctx, key, c.log, false)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reconcile against an API server that does not answer: %v, want the deadline", err)
	}

	// Through the loop: the key the first list queued times out, and is queued again.
	if !c.processNextItem(ctx) {
		t.Fatal("queue shut down")
	}
	if got := r.last(); got != "timeout" {
		t.Errorf("result %q, want timeout", got)
	}
	if n := c.queue.NumRequeues(key); n != 1 {
		t.Errorf("NumRequeues = %d, want 1", n)
	}
	eventually(t, "both hung requests are given up", func() bool { return api.gaveUp.Load() == 2 })

	api.hanging.Store(false)
	c.processNextItem(ctx) // the retry
	if got := r.last(); got == "timeout" || got == "error" {
		t.Errorf("the retry once the API server answers: %q", got)
	}
	api.mu.Lock()
	written := schema.ViewOf(api.vms["vm1"], "", f)
	api.mu.Unlock()
	if phase := written.Status().Phase; phase != schema.PhaseCreating || !written.HasFinalizer(schema.Finalizer) {
		t.Errorf("after the retry: phase %q, finalizer %t; want Creating with the finalizer", phase, written.HasFinalizer(schema.Finalizer))
	}
}
