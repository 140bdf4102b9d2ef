package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// withoutStatusSubresource makes w's API serve the VMs as for a CRD version without the
// /status subresource: a patch of /status is NotFound (there is no such path), and a patch
// of the main resource that changes anything outside metadata, status included, makes a new
// generation (apiextensions-apiserver's rule for such CRDs). Like world.patch, it logs every
// patch, honours a resourceVersion precondition, and gives each write a new resourceVersion;
// unlike it, a write that changes nothing keeps the resourceVersion, as the API server's does.
func withoutStatusSubresource(w *world) {
	w.client.PrependReactor("patch", "virtualmachines", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		var body map[string]any
		if err := json.Unmarshal(p.GetPatch(), &body); err != nil {
			return true, nil, fmt.Errorf("patch of %s is not JSON: %w", p.GetName(), err)
		}
		srv, _ := w.servers.Observe(backend.Owner{Namespace: p.GetNamespace(), Name: p.GetName()})
		w.mu.Lock()
		w.log = append(w.log, write{name: p.GetName(), subresource: p.GetSubresource(), body: body, serverExisted: srv != nil})
		var injected error
		if errs := w.fail["main"]; len(errs) > 0 && p.GetSubresource() == "" {
			injected, w.fail["main"] = errs[0], errs[1:]
		}
		w.mu.Unlock()
		if p.GetSubresource() != "" {
			return true, nil, apierrors.NewNotFound(vmGVR.GroupResource(), p.GetName())
		}
		if injected != nil {
			return true, nil, injected
		}
		cur, next, err := w.merge(p, body)
		if err != nil {
			return true, nil, err
		}
		for _, path := range w.prune {
			unstructured.RemoveNestedField(next.Object, path...)
		}
		if equality.Semantic.DeepEqual(cur.Object, next.Object) {
			return true, next, nil
		}
		if !equality.Semantic.DeepEqual(outsideMetadata(cur), outsideMetadata(next)) {
			next.SetGeneration(cur.GetGeneration() + 1)
		}
		next, err = w.store(p, cur, next)
		return true, next, err
	})
}

// outsideMetadata is an object without its metadata: what the generation counts on a CRD
// without the status subresource.
func outsideMetadata(u *unstructured.Unstructured) map[string]any {
	m := u.DeepCopy().Object
	delete(m, "metadata")
	return m
}

// editSpec changes a VM in the API as a user's kubectl edit would: a new cpu, a new
// generation and resourceVersion.
func editSpec(t *testing.T, w *world, cpu string) {
	t.Helper()
	u := w.vm(t, "default", "test-vm")
	if err := unstructured.SetNestedField(u.Object, cpu, "spec", "resource", "cpu"); err != nil {
		t.Fatal(err)
	}
	u.SetGeneration(u.GetGeneration() + 1)
	n, _ := strconv.Atoi(u.GetResourceVersion())
	u.SetResourceVersion(strconv.Itoa(n + 1))
	if err := w.client.Tracker().Update(vmGVR, u, "default"); err != nil {
		t.Fatal(err)
	}
}

// generations reads a VM's metadata.generation, status.observedGeneration and the
// observedGeneration of each condition, by type.
func generations(t *testing.T, w *world) (gen, observed int64, conds map[string]int64) {
	t.Helper()
	u := w.vm(t, "default", "test-vm")
	observed, _, _ = unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	conds = map[string]int64{}
	for _, c := range list {
		m := c.(map[string]any)
		g, _ := m["observedGeneration"].(int64)
		conds[m["type"].(string)] = g
	}
	return u.GetGeneration(), observed, conds
}

// routes are the two ways status is written, for the tables that run in both.
var routes = map[string]bool{"status subresource": false, "main resource": true}

// routedWorld is a world whose API has the status subresource unless main.
func routedWorld(t *testing.T, main bool, cases ...string) *world {
	t.Helper()
	w := newWorld(t, cases...)
	if main {
		withoutStatusSubresource(w)
	}
	return w
}

// routedApplier is w's applier, writing status through the main resource if main.
func routedApplier(w *world, main bool) applier {
	a := w.applier()
	a.route = statusRoute{main: main}
	return a
}

// TestStatusRouteApply: the status a plan writes goes to /status, or on a CRD without it to
// the main resource; either way the patch holds the status and the resourceVersion
// precondition only, so that it cannot touch the spec or the finalizers. Through the main
// resource the write makes a generation, and it claims it: observedGeneration, the status's
// and the conditions', equals the generation the write made.
func TestStatusRouteApply(t *testing.T) {
	for name, main := range routes {
		t.Run(name, func(t *testing.T) {
			w := routedWorld(t, main, "create-finalizer-present")
			vm := w.view(t, "create-finalizer-present")
			spec, _, _ := unstructured.NestedMap(w.vm(t, "default", "test-vm").Object, "spec")
			if _, err := routedApplier(w, main).apply(context.Background(), vm, ownerOf(vm), nil, nil, serverPolicy.Decide(decision.Input{VM: vm, Now: now})); err != nil {
				t.Fatal(err)
			}
			ws := w.writes()
			if len(ws) != 1 {
				t.Fatalf("writes %+v, want the status alone (the finalizer is there)", ws)
			}
			wantSub := "status"
			if main {
				wantSub = ""
			}
			if ws[0].subresource != wantSub {
				t.Errorf("status written to subresource %q, want %q", ws[0].subresource, wantSub)
			}
			if keys := sortedKeys(ws[0].body); !reflect.DeepEqual(keys, []string{"metadata", "status"}) {
				t.Errorf("patch has %v, want metadata and status only", keys)
			}
			if md, _ := ws[0].body["metadata"].(map[string]any); !reflect.DeepEqual(md, map[string]any{"resourceVersion": "1000"}) {
				t.Errorf("patch metadata %v, want the precondition on resourceVersion 1000 only", md)
			}
			got := w.vm(t, "default", "test-vm")
			if phase := status(t, w, testVM, "phase"); phase != string(schema.PhaseCreating) {
				t.Errorf("phase %q, want Creating", phase)
			}
			if after, _, _ := unstructured.NestedMap(got.Object, "spec"); !reflect.DeepEqual(after, spec) {
				t.Errorf("spec %v after the status write, want %v", after, spec)
			}
			if !reflect.DeepEqual(got.GetFinalizers(), []string{schema.Finalizer}) {
				t.Errorf("finalizers %v", got.GetFinalizers())
			}
			gen, observed, conds := generations(t, w)
			wantGen := int64(1)
			if main {
				wantGen = 2
			}
			if gen != wantGen || observed != gen || conds[schema.ConditionReady] != gen {
				t.Errorf("generation %d, observedGeneration %d, Ready's %d: want all %d", gen, observed, conds[schema.ConditionReady], wantGen)
			}
		})
	}
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestStatusRouteConflict: a status write decided on a VM that changed since is refused
// with a conflict on either route, returned as today so that the queue decides again; the
// user's change stands and nothing claims it as observed.
func TestStatusRouteConflict(t *testing.T) {
	for name, main := range routes {
		t.Run(name, func(t *testing.T) {
			w := routedWorld(t, main, "create-finalizer-present")
			vm := w.view(t, "create-finalizer-present")
			editSpec(t, w, "3")
			_, err := routedApplier(w, main).apply(context.Background(), vm, ownerOf(vm), nil, nil, serverPolicy.Decide(decision.Input{VM: vm, Now: now}))
			if !apierrors.IsConflict(err) || !strings.HasPrefix(err.Error(), "write status") {
				t.Fatalf("apply: %v, want a conflict writing status", err)
			}
			if phase := status(t, w, testVM, "phase"); phase != "" {
				t.Errorf("phase %q written over the newer VM", phase)
			}
			cpu, _, _ := unstructured.NestedString(w.vm(t, "default", "test-vm").Object, "spec", "resource", "cpu")
			if gen, observed, _ := generations(t, w); cpu != "3" || gen != 2 || observed != 0 {
				t.Errorf("cpu %q, generation %d, observedGeneration %d: want the user's edit (3, 2) and no status", cpu, gen, observed)
			}
		})
	}
}

// TestStatusRoutePatch: what a status write renders. Through the main resource it claims the
// generation the write makes, for whatever was current (a condition observed earlier keeps
// its generation), even when only observedGeneration changes: that change makes the
// generation too. A write that would change nothing (the VM already says what the claim
// would, because someone wrote an observedGeneration ahead of the generation) makes no
// generation and claims none.
func TestStatusRoutePatch(t *testing.T) {
	f := decidecase.Fields(t)
	view := func(u *unstructured.Unstructured) schema.VirtualMachine { return cachedView(t, u, f) }
	steady := view(caseObject(t, "active-steady")) // generation 1, all observed at 1
	cur := steady.Status()
	decided := cur // as a decision at generation 1 writes it, now
	decided.LastUpdateTime = now
	changed := cur
	changed.Message = "changed"
	changed.Conditions = append(slices.Clone(cur.Conditions), schema.Condition{Type: "Old", Status: schema.ConditionTrue, Reason: "Old", ObservedGeneration: 0, LastTransitionTime: now})
	tests := map[string]struct {
		main bool
		vm   schema.VirtualMachine
		st   schema.Status
		// the observedGenerations written: the status's, then each condition's
		want []int64
	}{
		"subresource: as decided":                {vm: steady, st: changed, want: []int64{1, 1, 0}},
		"main resource: claims":                  {main: true, vm: steady, st: changed, want: []int64{2, 2, 0}},
		"main resource: observedGeneration only": {main: true, vm: steady, st: cur, want: []int64{2, 2}},
		"main resource: no change, no claim":     {main: true, vm: view(aheadVM(t)), st: decided, want: []int64{1, 1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			patch, err := statusRoute{main: tc.main}.statusPatch(f, tc.vm, tc.st, "1000")
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(patch, &m); err != nil {
				t.Fatal(err)
			}
			got := []int64{jsonInt(at(m, "status", "observedGeneration"))}
			for _, c := range at(m, "status", "conditions").([]any) {
				got = append(got, jsonInt(c.(map[string]any)["observedGeneration"]))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("observedGenerations %v, want %v", got, tc.want)
			}
		})
	}
}

// aheadVM is the steady Active VM with an observedGeneration (the status's and Ready's) one
// ahead of its generation, as only another writer leaves it, and last updated now: what a
// decision at its generation writes, claimed, is exactly what it holds.
func aheadVM(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := caseObject(t, "active-steady")
	_ = unstructured.SetNestedField(u.Object, int64(2), "status", "observedGeneration")
	_ = unstructured.SetNestedField(u.Object, now.Format(time.RFC3339), "status", "lastUpdateTime")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	conds[0].(map[string]any)["observedGeneration"] = int64(2)
	_ = unstructured.SetNestedSlice(u.Object, conds, "status", "conditions")
	return u
}

// jsonInt is a decoded JSON number as an int64; 0 when absent.
func jsonInt(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// TestStatusRouteController: a controller on a CRD without the status subresource brings a
// VM to Active, writing each status once: the decision on what a write returned finds the
// status current, although the write made a generation (without the claim it would write
// again, up to the last decision of the reconcile, and every echo would start over). What is
// reconciled afterwards writes nothing. An observedGeneration someone wrote ahead of the
// generation is corrected in two writes instead of being rewritten for ever.
func TestStatusRouteController(t *testing.T) {
	tests := map[string]struct {
		vm     *unstructured.Unstructured
		server string // the case whose server exists at the start; "" for none
		// writes of the first reconcile, in order: "main" or "status"
		first []string
		// the generation the first reconcile leaves
		gen int64
	}{
		"new VM":                    {vm: caseObject(t, "create-new"), first: []string{"main", "main"}, gen: 2},
		"observedGeneration ahead":  {vm: aheadVM(t), server: "active-steady", first: []string{"main", "main"}, gen: 3},
		"steady VM: nothing to say": {vm: caseObject(t, "active-steady"), server: "active-steady", first: nil, gen: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			if err := w.client.Tracker().Add(tc.vm); err != nil {
				t.Fatal(err)
			}
			withoutStatusSubresource(w)
			owner := ownerOf(w.view(t, "create-new"))
			if tc.server != "" {
				_, srv := decidecase.Read(t, caseFile(tc.server))
				w.servers.Set(owner, srv)
			}
			c := newRoutedController(t, w)
			ctx := start(t, c)
			c.processNextItem(ctx)
			if got := writeKinds(w.writes()); !slices.Equal(got, tc.first) {
				t.Fatalf("first reconcile wrote %v, want %v", got, tc.first)
			}
			gen, observed, conds := generations(t, w)
			if gen != tc.gen || observed != gen || conds[schema.ConditionReady] != gen {
				t.Errorf("generation %d, observedGeneration %d, Ready's %d: want all %d", gen, observed, conds[schema.ConditionReady], tc.gen)
			}
			if tc.server == "" { // the server the first reconcile created becomes ready
				srv, _ := w.servers.Observe(owner)
				srv.State, srv.Detail = backend.StateReady, "Running"
				w.servers.Set(owner, srv)
				n := len(w.writes())
				cachedAt(t, c, w, testVM)
				c.queue.Add(testVM)
				c.processNextItem(ctx)
				if phase := status(t, w, testVM, "phase"); phase != string(schema.PhaseActive) || len(w.writes()) != n+1 {
					t.Fatalf("phase %q after %v, want Active in one write", phase, writeKinds(w.writes()[n:]))
				}
				gen, observed, _ := generations(t, w)
				if gen != tc.gen+1 || observed != gen {
					t.Errorf("generation %d, observedGeneration %d: want both %d", gen, observed, tc.gen+1)
				}
			}
			n := len(w.writes())
			cachedAt(t, c, w, testVM)
			c.queue.Add(testVM)
			for c.queue.Len() > 0 {
				c.processNextItem(ctx)
			}
			if got := w.writes()[n:]; len(got) != 0 {
				t.Errorf("a reconcile of the settled VM wrote %v", writeKinds(got))
			}
		})
	}
}

// writeKinds names each write by where it went: "main" or a subresource.
func writeKinds(ws []write) []string {
	var out []string
	for _, w := range ws {
		k := "main"
		if w.subresource != "" {
			k = w.subresource
		}
		out = append(out, k)
	}
	return out
}

// newRoutedController builds a controller over w for a CRD without the status subresource,
// sampling usage (by hand: the interval is long) so that the poller is wired.
func newRoutedController(t *testing.T, w *world) *Controller {
	t.Helper()
	return New(Config{VMs: w.source(), CRD: CRD{NoStatusSubresource: true}, Backend: w.servers, Policy: serverPolicy,
		Usage: decision.UsagePolicy{Interval: time.Hour, Threshold: 0.1, MaxInterval: time.Hour}, Retry: quickRetry(),
		Report: w.report(nil), Now: func() time.Time { return now }})
}

// TestStatusRoutePoller: a usage report goes to /status, or on a CRD without it to the main
// resource, conditional on the resourceVersion sampled and claiming the generation it makes,
// so that a decision on the VM as written finds nothing to do; the informer is told to drop
// its echo. A report on a VM that changed since is refused with a conflict, as today, and the
// user's change is not claimed as observed.
func TestStatusRoutePoller(t *testing.T) {
	sample := backend.Usage{CPU: resource.MustParse("250m"), Memory: resource.MustParse("64Mi")}
	for name, main := range routes {
		for _, edited := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/edited=%v", name, edited), func(t *testing.T) {
				w := routedWorld(t, main, "active-steady")
				p := newPoller(t, w, &results{}, "active-steady")
				p.route = statusRoute{main: main}
				var echoes []string
				p.echo = func(vm cache.ObjectName, rv string) { echoes = append(echoes, vm.String()+"@"+rv) }
				vm, srv := decidecase.Read(t, caseFile("active-steady"))
				w.servers.SetUsage(ownerOf(vm), sample, nil)
				if edited {
					editSpec(t, w, "3")
				}
				if !p.sample(context.Background(), testVM) {
					t.Error("not sampled again")
				}
				ws := w.writes()
				wantSub := "status"
				if main {
					wantSub = ""
				}
				if len(ws) != 1 || ws[0].subresource != wantSub || at(ws[0].body, "metadata", "resourceVersion") != "1000" {
					t.Fatalf("writes %+v: want one to %q, conditional on resourceVersion 1000", ws, wantSub)
				}
				gen, observed, conds := generations(t, w)
				cpu := status(t, w, testVM, "server", "usage", "cpu")
				switch {
				case edited:
					if cpu != "" || gen != 2 || observed != 1 || len(echoes) != 0 {
						t.Errorf("usage %q, generation %d, observedGeneration %d, echoes %v: want the edit alone (2, 1)", cpu, gen, observed, echoes)
					}
					return
				case cpu != "250m":
					t.Errorf("usage cpu %q, want 250m", cpu)
				}
				wantGen := int64(1)
				var wantEchoes []string
				if main {
					wantGen, wantEchoes = 2, []string{"default/test-vm@1001"}
				}
				if gen != wantGen || observed != gen || conds[schema.ConditionReady] != gen || conds[decision.ConditionUsageReported] != gen {
					t.Errorf("generation %d, observedGeneration %d, conditions %v: want all %d", gen, observed, conds, wantGen)
				}
				if !slices.Equal(echoes, wantEchoes) {
					t.Errorf("echoes %v, want %v", echoes, wantEchoes)
				}
				if plan := serverPolicy.Decide(decision.Input{VM: cachedView(t, w.vm(t, "default", "test-vm"), w.fields), Server: srv, Now: now}); !plan.Empty() {
					t.Errorf("a decision on the VM as the report left it: %+v, want nothing", plan)
				}
			})
		}
	}
}

// TestStatusRouteEchoWired: a controller on a CRD without the status subresource has its
// poller note each write's resourceVersion with the echoes the informer's handler drops.
func TestStatusRouteEchoWired(t *testing.T) {
	c := newRoutedController(t, newWorld(t))
	if !c.usage.route.main || !c.applier.route.main {
		t.Fatal("the writers do not write through the main resource")
	}
	c.usage.echo(testVM, "1001")
	if !c.ledger.echoes.seen(testVM, "1001") {
		t.Error("the poller's write is not an echo to drop")
	}
}
