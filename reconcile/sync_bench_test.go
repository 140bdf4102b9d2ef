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
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache/vmcachetest"
)

// BenchmarkColdSync is a cold start of the VM informer as the controller runs it: a watch
// list of syncVMs VMs, each with the managedFields of its three writers, from an HTTP server
// speaking the API server's JSON, through the decoder, client-go's reflector and DeltaFIFO,
// the indexer and the queueing handler, until the handler has seen them all. It is the
// controller's own part of a cold start, without TLS and without the API server's: profile it
// with -cpuprofile to see where that part goes.
func BenchmarkColdSync(b *testing.B) {
	const syncVMs = 20000
	active, err := os.ReadFile("../testdata/bench/active-vm.json")
	if err != nil {
		b.Fatal(err)
	}
	wireVM, err := vmcachetest.WithManagedFields(active)
	if err != nil {
		b.Fatal(err)
	}
	initial := make([][]byte, syncVMs)
	for i := range initial {
		initial[i] = vmcachetest.Rename(b, wireVM, fmt.Sprintf("vm-%06d", i), fmt.Sprint(1000+i))
	}
	s := &vmcachetest.APIServer{T: b, Initial: initial, RV: fmt.Sprint(1000 + syncVMs), Events: make(chan string)}
	srv := httptest.NewServer(s)
	defer srv.Close()
	defer close(s.Events)
	client, err := vmcache.RESTClientFor(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c := New(Config{Client: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), REST: client, GVR: vmGVR, Fields: decidecase.Fields(b), Namespace: "default", Selector: vmcachetest.Selector,
			Backend: memory.New(), Policy: serverPolicy, Recorder: events.NewFakeRecorder(1),
			Logger:      slog.New(slog.DiscardHandler),
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Millisecond, time.Millisecond)})
		ctx, cancel := context.WithCancel(b.Context())
		if err := c.startVMs(ctx); err != nil {
			b.Fatal(err)
		}
		// cache.WaitForCacheSync polls every 100 ms, which would be what this measures.
		for handled := c.vms.Load().handled; !handled.HasSynced(); {
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
