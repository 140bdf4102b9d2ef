package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/internal/golden"
)

// TestSplit: the split of two real profiles of one burst (vm-controller and the peer, the
// benchmarks page's 21:56 pair) is the page's table. go -C bench test . -run TestSplit -update
// rewrites it.
func TestSplit(t *testing.T) {
	var out bytes.Buffer
	err := splitCommand([]string{filepath.Join("testdata", "split-vm-controller.pb.gz"), filepath.Join("testdata", "split-peer.pb.gz")}, &out)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "split.md"), out.Bytes())
}

// TestSplitAddsUp: every sample lands in one part: the parts sum to the profile's total,
// which is the sum of its samples (3.09 s in the 21:56 profile, as go tool pprof says).
func TestSplitAddsUp(t *testing.T) {
	s, err := splitProfile(filepath.Join("testdata", "split-vm-controller.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, p := range partOrder {
		sum += s.seconds[p]
	}
	if d := sum - s.total; d > 1e-9 || d < -1e-9 || s.total < 3.085 || s.total > 3.095 {
		t.Errorf("parts sum to %.3f s, total %.3f s, want both 3.09 s", sum, s.total)
	}
}

// TestClassify: a stack goes to the first part whose rule it matches, so that a sample of the
// transport under a reconcile is the transport's, and decoding under a request is decoding.
func TestClassify(t *testing.T) {
	const (
		worker   = "github.com/cloudnative-czs/vm-controller/reconcile.(*Controller).processNextItem"
		patch    = "github.com/cloudnative-czs/vm-controller/reconcile.restWriter.patch"
		do       = "k8s.io/client-go/rest.(*Request).Do"
		watcher  = "k8s.io/apimachinery/pkg/watch.(*StreamWatcher).receive"
		peerLoop = "sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller).processNextWorkItem"
	)
	for _, c := range []struct {
		stack []string // leaf first
		want  part
	}{
		{[]string{"runtime.scanobject", "runtime.gcDrain", "runtime.gcBgMarkWorker"}, partGC},
		{[]string{"runtime.memclrNoHeapPointers", "runtime.mallocgc", "runtime.gcAssistAlloc", "encoding/json.Unmarshal"}, partGC},
		{[]string{"runtime.futex", "runtime.futexsleep", "runtime.stopm", "runtime.findRunnable", "runtime.schedule"}, partScheduler},
		{[]string{"internal/runtime/syscall/linux.Syscall6", "syscall.Syscall", "internal/poll.(*FD).Write", "crypto/tls.(*Conn).Write", "net/http.(*persistConn).writeLoop"}, partWire},
		{[]string{"runtime.futex", "runtime.notewakeup", "runtime.wakep", "runtime.ready", "runtime.chansend", worker}, partWire},
		{[]string{"net/http.(*persistConn).readLoop"}, partHTTP},
		{[]string{"net/http.(*Transport).roundTrip", do, patch, worker}, partRequests},
		{[]string{"io.ReadAll", "k8s.io/client-go/rest.(*Request).transformResponse", do, patch, worker}, partRequests},
		{[]string{"k8s.io/client-go/tools/cache.(*RealFIFO).Pop", "k8s.io/client-go/tools/cache.(*controller).processLoop"}, partInformers},
		{[]string{"github.com/tidwall/gjson.parseObject", "github.com/cloudnative-czs/vm-controller/reconcile/vmcache.(*compactor).compact", watcher}, partWatch},
		{[]string{"k8s.io/api/core/v1.(*PodSpec).Unmarshal", "github.com/cloudnative-czs/vm-controller/backend/pods.unmarshalPod", watcher}, partWatch},
		{[]string{"encoding/json.(*decodeState).object", "k8s.io/apimachinery/pkg/runtime/serializer/json.(*Serializer).Decode", watcher}, partWatch},
		{[]string{"github.com/tidwall/gjson.validpayload", "github.com/cloudnative-czs/vm-controller/reconcile/vmcache.Answer", patch, worker}, partAnswers},
		{[]string{"k8s.io/api/core/v1.(*Pod).Unmarshal", "k8s.io/client-go/rest.Result.Into", "k8s.io/client-go/gentype.(*Client[...]).Create", worker}, partAnswers},
		{[]string{"github.com/tidwall/gjson.getBytes", "github.com/cloudnative-czs/vm-controller/schema.VirtualMachine.get", worker}, partReads},
		// A reconcile's read of the cache, and the controllers' event handlers, as the
		// profiles have them: what a controller's code calls is its own.
		{[]string{"k8s.io/client-go/tools/cache.(*cache).GetByKey", "sigs.k8s.io/controller-runtime/pkg/cache/internal.(*CacheReader).Get",
			"sigs.k8s.io/controller-runtime/pkg/client.(*client).Get", "main.(*reconciler).Reconcile", peerLoop}, partOwn},
		{[]string{"github.com/cloudnative-czs/vm-controller/reconcile.(*echoes).seen", "github.com/cloudnative-czs/vm-controller/reconcile.(*Controller).startVMs.func2",
			"k8s.io/client-go/tools/cache.(*RealFIFO).PopBatch.func4", "k8s.io/client-go/tools/cache.(*RealFIFO).PopBatch", "k8s.io/client-go/tools/cache.(*controller).processLoop"}, partOwn},
		{[]string{"k8s.io/client-go/util/workqueue.(*Typed[...]).Add", "github.com/cloudnative-czs/vm-controller/reconcile/priority.(*Queue[...]).AddUrgent",
			"github.com/cloudnative-czs/vm-controller/reconcile.(*Controller).enqueue", "k8s.io/client-go/tools/cache.(*controller).processLoop"}, partOwn},
		{[]string{"k8s.io/client-go/util/workqueue.(*Typed[...]).Add", "sigs.k8s.io/controller-runtime/pkg/handler.(*EnqueueRequestForObject).Create",
			"k8s.io/client-go/tools/cache.(*processorListener).run"}, partLibraries},
		{[]string{"runtime.memmove", "k8s.io/client-go/util/workqueue.(*delayingType[...]).waitingLoop"}, partInformers},
		{[]string{"github.com/prometheus/client_golang/prometheus.(*histogram).Observe", "github.com/cloudnative-czs/vm-controller/metrics.(*requestLatency).Observe",
			"k8s.io/client-go/rest.(*Request).request.func1", do, patch, worker}, partRequests},
		{[]string{"sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller).reconcileHandler", peerLoop}, partLibraries},
		{[]string{"github.com/cloudnative-czs/vm-controller/reconcile/decision.Policy.Decide", worker}, partOwn},
		{[]string{"main.report", "main.(*reconciler).Reconcile"}, partOwn},
		{[]string{"runtime.memmove", "bytes.(*Buffer).Write"}, partOther},
	} {
		if got := classify(c.stack); got != c.want {
			t.Errorf("classify(%s) = %q, want %q", strings.Join(c.stack, " < "), got.name, c.want.name)
		}
	}
}

// TestSplitRefuses: no file, a missing file and a profile that is not of CPU are errors that
// say which.
func TestSplitRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "name CPU profiles"},
		{[]string{filepath.Join("testdata", "missing.pprof")}, "missing.pprof"},
		{[]string{filepath.Join("testdata", "split-allocs.pb.gz")}, "not a CPU profile"},
		{[]string{filepath.Join("testdata", "compare.json")}, "compare.json"},
	} {
		if err := splitCommand(c.args, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("split %v = %v, want an error with %q", c.args, err, c.want)
		}
	}
}
