package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"

	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache/vmcachetest"
)

// BenchmarkColdSync is a cold start of the VM informer as the controller runs it: a watch
// list of syncVMs VMs, each with the managedFields of its three writers, from an HTTP server
// speaking the API server's JSON, through the decoder, client-go's reflector and FIFO,
// the indexer and the queueing handler, until the handler has seen them all. It is the
// controller's own part of a cold start, without TLS and without the API server's: profile it
// with -cpuprofile to see where that part goes.
func BenchmarkColdSync(b *testing.B) {
	const syncVMs = 20000
	client, s := coldSyncServer(b, syncVMs)
	b.ReportAllocs()
	for b.Loop() {
		c, cancel := startColdSync(b, client)
		// cache.WaitForCacheSync polls every 100 ms, which would be what this measures.
		for !c.vms.Load().ctrl.HasSynced() {
			time.Sleep(100 * time.Microsecond)
		}
		if n := c.queue.Len(); n != syncVMs {
			b.Fatalf("%d VMs queued, want %d", n, syncVMs)
		}
		cancel()
		c.queue.ShutDown()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*syncVMs), "ns/VM")
	for _, asked := range s.Asked() {
		if asked != "watchlist" {
			b.Fatalf("asked %q: each cold start is to be one watch list", s.Asked())
		}
	}
}

// coldSyncServer serves n Active VMs, each with the managedFields of its three writers, as
// the API server would to a watch list, and returns a REST client of it.
func coldSyncServer(t testing.TB, n int) (rest.Interface, *vmcachetest.APIServer) {
	t.Helper()
	active, err := os.ReadFile("../testdata/bench/active-vm.json")
	if err != nil {
		t.Fatal(err)
	}
	wireVM, err := vmcachetest.WithManagedFields(active)
	if err != nil {
		t.Fatal(err)
	}
	initial := make([][]byte, n)
	for i := range initial {
		initial[i] = vmcachetest.Rename(t, wireVM, fmt.Sprintf("vm-%06d", i), fmt.Sprint(1000+i))
	}
	s := &vmcachetest.APIServer{T: t, Initial: initial, RV: fmt.Sprint(1000 + n), Events: make(chan string)}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(s.Events) })
	client, err := vmcache.RESTClientFor(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return client, s
}

// startColdSync starts the VM informer of a new leading controller over client, without
// workers.
func startColdSync(t testing.TB, client rest.Interface) (*Controller, context.CancelFunc) {
	t.Helper()
	c := New(Config{
		VMs: Source{Client: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), REST: client, GVR: vmGVR, Fields: decidecase.Fields(t),
			Namespace: "default", Selector: vmcachetest.Selector},
		Backend: memory.New(), Policy: serverPolicy, Retry: quickRetry(),
		Report: Report{Recorder: events.NewFakeRecorder(1), Logger: slog.New(slog.DiscardHandler)}})
	ctx, cancel := context.WithCancel(t.Context())
	c.lead() // as RunWorkers, called at once without leader election
	if err := c.startVMs(ctx); err != nil {
		t.Fatal(err)
	}
	return c, cancel
}
