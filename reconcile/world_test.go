package reconcile

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The unit tests of the I/O half run against client-go's dynamic fake (the API), the memory
// backend (the servers) and the events fake (Events). A world holds the three and keeps one
// log of what happened to the VM and its server, in order.

var vmGVR = k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}

// now is the clock of the golden cases, which the worlds hold.
var now = decidecase.Now

type world struct {
	client   *dynamicfake.FakeDynamicClient
	servers  *memory.Backend
	recorder *events.FakeRecorder
	fields   schema.Fields

	mu sync.Mutex
	// fail holds errors to return for the next patches of a kind ("main" or "status"),
	// instead of carrying them out.
	fail map[string][]error
	// log is every write to a VM ("patch <name>" or "patch <name>/status"), carried out or
	// refused, with whether a server existed for the VM at that moment, in order. A patch
	// that changed nothing wrote nothing: it is in unchanged instead.
	log []write
	// unchanged are the patches that left the VM as it was (a resourceVersion precondition
	// alone, as before a disk's delete), in order: the API server writes nothing for them.
	unchanged []write
	// prune are the fields every write drops, as the API server prunes what a CRD's schema
	// does not have (a CRD older than the controller).
	prune [][]string
}

// write is one patch the fake API server received.
type write struct {
	name, subresource string
	body              map[string]any
	serverExisted     bool
	serverDeleting    bool // the server existed and was being deleted
}

// newWorld starts a world holding the VMs of the given testdata/decide cases.
func newWorld(t testing.TB, cases ...string) *world {
	t.Helper()
	var objs []runtime.Object
	for _, name := range cases {
		objs = append(objs, caseObject(t, name))
	}
	w := &world{
		client: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[k8sschema.GroupVersionResource]string{vmGVR: "VirtualMachineList"}, objs...),
		servers:  memory.New(),
		recorder: events.NewFakeRecorder(100),
		fields:   decidecase.Fields(t),
		fail:     map[string][]error{},
	}
	w.client.PrependReactor("patch", "virtualmachines", w.patch)
	return w
}

// failNext makes the next patch of the VM (kind "main") or of its status ("status") fail
// with err.
func (w *world) failNext(kind string, err error) {
	w.mu.Lock()
	w.fail[kind] = append(w.fail[kind], err)
	w.mu.Unlock()
}

// patch logs a merge patch and carries it out as the API server would, which the fake's
// tracker does not: a resourceVersion in the patch must be the object's (else Conflict), and
// every write gives the object a new resourceVersion. A patch that changes nothing is no
// write: it is answered with the object as it is, under the same resourceVersion, as the API
// server answers it, and logged apart (unchanged).
func (w *world) patch(a k8stesting.Action) (bool, runtime.Object, error) {
	p := a.(k8stesting.PatchAction)
	var body map[string]any
	if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
		return true, nil, fmt.Errorf("patch of %s is not JSON: %w", p.GetName(), err)
	}
	srv, _ := w.servers.Observe(backend.Owner{Namespace: p.GetNamespace(), Name: p.GetName()})
	kind := "main"
	if p.GetSubresource() != "" {
		kind = p.GetSubresource()
	}
	logged := write{name: p.GetName(), subresource: p.GetSubresource(), body: body, serverExisted: srv != nil, serverDeleting: srv != nil && srv.Deleting}
	w.mu.Lock()
	var injected error
	if errs := w.fail[kind]; len(errs) > 0 {
		injected, w.fail[kind] = errs[0], errs[1:]
	}
	w.mu.Unlock()
	var cur, next *unstructured.Unstructured
	err := injected
	if err == nil {
		cur, next, err = w.merge(p, body)
	}
	w.mu.Lock()
	if err == nil {
		for _, path := range w.prune {
			unstructured.RemoveNestedField(next.Object, path...)
		}
	}
	if err == nil && equality.Semantic.DeepEqual(cur.Object, next.Object) {
		w.unchanged = append(w.unchanged, logged)
		w.mu.Unlock()
		return true, cur, nil
	}
	w.log = append(w.log, logged)
	w.mu.Unlock()
	if err != nil {
		return true, nil, err
	}
	next, err = w.store(p, cur, next)
	return true, next, err
}

// merge carries out the merge patch p (whose JSON is body) on the stored VM, without
// storing the result: a resourceVersion in the patch must be the object's, else Conflict.
func (w *world) merge(p k8stesting.PatchAction, body map[string]any) (cur, next *unstructured.Unstructured, err error) {
	obj, err := w.client.Tracker().Get(vmGVR, p.GetNamespace(), p.GetName())
	if err != nil {
		return nil, nil, err
	}
	cur = obj.(*unstructured.Unstructured)
	if rv, ok := at(body, "metadata", "resourceVersion").(string); ok && rv != cur.GetResourceVersion() {
		return nil, nil, apierrors.NewConflict(vmGVR.GroupResource(), p.GetName(), fmt.Errorf("resourceVersion %s is not %s", rv, cur.GetResourceVersion()))
	}
	raw, err := cur.MarshalJSON()
	if err != nil {
		return nil, nil, err
	}
	if raw, err = jsonpatch.MergePatch(raw, p.GetPatch()); err != nil {
		return nil, nil, err
	}
	next = &unstructured.Unstructured{}
	if err := next.UnmarshalJSON(raw); err != nil {
		return nil, nil, err
	}
	return cur, next, nil
}

// store stores next, the patched cur, under a new resourceVersion.
func (w *world) store(p k8stesting.PatchAction, cur, next *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	n, _ := strconv.Atoi(cur.GetResourceVersion())
	next.SetResourceVersion(strconv.Itoa(n + 1))
	if err := w.client.Tracker().Update(vmGVR, next, p.GetNamespace()); err != nil {
		return nil, err
	}
	return next, nil
}

// caseObject is the VM of testdata/decide/<name>.txtar as the API server would hold it.
func caseObject(t testing.TB, name string) *unstructured.Unstructured {
	t.Helper()
	raw, _ := decidecase.Input(t, caseFile(name))
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return u
}

// writes returns the patches received so far.
func (w *world) writes() []write {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]write(nil), w.log...)
}

// vm reads a VM back from the fake API server; nil when it is gone.
func (w *world) vm(t *testing.T, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := w.client.Tracker().Get(vmGVR, namespace, name)
	if err != nil {
		return nil
	}
	return obj.(*unstructured.Unstructured)
}

// events drains the events recorded so far, as "Type Reason Note".
func (w *world) events() []string {
	var out []string
	for {
		select {
		case e := <-w.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// view is the VM of a case as a reconcile sees it.
func (w *world) view(t *testing.T, name string) schema.VirtualMachine {
	t.Helper()
	return cachedView(t, caseObject(t, name), w.fields)
}

// cachedView is the view of u, in layout f, as the VM informer caches it.
func cachedView(tb testing.TB, u *unstructured.Unstructured, f schema.Fields) schema.VirtualMachine {
	tb.Helper()
	o, err := vmcache.Compact(u, f)
	if err != nil {
		tb.Fatal(err)
	}
	vm, err := o.View(f)
	if err != nil {
		tb.Fatal(err)
	}
	return vm
}

// at reads a dotted path of a decoded JSON object; nil when it is not there.
func at(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// serverPolicy is the policy of the tests of servers: the defaults, with each server's root
// disk its own (--root-disk ephemeral), as the golden cases they start from are decided. The
// tests of disks (disk_test.go) decide under decision.DefaultPolicy.
var serverPolicy = func() decision.Policy {
	p := decision.DefaultPolicy
	p.RootDisk = decision.RootDiskEphemeral
	return p
}()

// source is where a controller of the world finds its VMs: the fake API server, over the
// dynamic client.
func (w *world) source() Source {
	return Source{Client: w.client, GVR: vmGVR, Fields: w.fields}
}

// report is what a controller of the world reports to: the world's recorder, no logs, and r
// (nil: no observer).
func (w *world) report(r *results) Report {
	rep := Report{Recorder: w.recorder, Logger: slog.New(slog.DiscardHandler)}
	if r != nil {
		rep.Observer, rep.UsageObserver = r, r
	}
	return rep
}

// quickRetry retries a failed key after a millisecond, without the overall bucket.
func quickRetry() Retry {
	return Retry{RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](time.Millisecond, time.Millisecond)}
}
