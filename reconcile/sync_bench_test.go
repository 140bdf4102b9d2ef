package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend/memory"
)

// BenchmarkColdSync is a cold start of the VM informer as the controller runs it: a watch
// list of syncVMs VMs, each with the managedFields of its three writers, from an HTTP server
// speaking the API server's JSON, through the decoder, client-go's reflector and DeltaFIFO,
// the indexer and the queueing handler, until the handler has seen them all. It is the
// controller's own part of a cold start, without TLS and without the API server's: profile it
// with -cpuprofile to see where that part goes.
func BenchmarkColdSync(b *testing.B) {
	const syncVMs = 20000
	initial := make([][]byte, syncVMs)
	for i := range initial {
		initial[i] = rename(b, wireVM, fmt.Sprintf("vm-%06d", i), fmt.Sprint(1000+i))
	}
	s := &apiServer{t: b, initial: initial, rv: fmt.Sprint(1000 + syncVMs), events: make(chan string)}
	srv := httptest.NewServer(s)
	defer srv.Close()
	defer close(s.events)
	client, err := RESTClientFor(&rest.Config{Host: srv.URL, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c := New(Config{Client: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), REST: client, GVR: vmGVR, Fields: v1alpha1(b), Namespace: "default", Selector: "team=a",
			Backend: memory.New(), Policy: DefaultPolicy, Recorder: events.NewFakeRecorder(1),
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
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, asked := range s.asked {
		if asked != "watchlist" {
			b.Fatalf("asked %q: each cold start is to be one watch list", s.asked)
		}
	}
}
