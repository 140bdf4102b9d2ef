package vmcache

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// reads is everything a view offers, for comparing two views.
type reads struct {
	APIVersion, Kind, Namespace, Name, UID, ResourceVersion string
	Generation                                              int64
	Deleting                                                bool
	Finalizers                                              []string
	Spec                                                    schema.Spec
	SpecErrs                                                string
	Status                                                  schema.Status
	RestartRequested                                        string
}

func readOf(vm schema.VirtualMachine) reads {
	spec, errs := vm.Spec()
	return reads{vm.APIVersion(), vm.Kind(), vm.Namespace(), vm.Name(), string(vm.UID()), vm.ResourceVersion(),
		vm.Generation(), vm.Deleting(), vm.Finalizers(), spec, fmt.Sprint(errs), vm.Status(), vm.RestartRequested()}
}

// TestCompactReadsTheSame: a view of the cached form reads exactly what a view of the whole
// object reads, for every golden VM under every layout, while what no view reads is gone.
func TestCompactReadsTheSame(t *testing.T) {
	files := decidecase.Files(t, filepath.Join("..", "..", "testdata", "decide"))
	machine, err := os.ReadFile(filepath.Join("..", "..", "testdata", "machines", "fieldmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	machineFields, err := schema.ParseFieldMap(machine)
	if err != nil {
		t.Fatal(err)
	}
	layouts := map[string]schema.Fields{"v1alpha1": decidecase.Fields(t), "machine": machineFields}
	for i, file := range files {
		raw, _ := decidecase.Input(t, file)
		var obj map[string]any
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			obj["metadata"] = md
		}
		// What the API server adds and no view reads.
		md["resourceVersion"] = "4711"
		md["labels"] = map[string]any{"team": "a"}
		md["annotations"] = map[string]any{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 2000)}
		md["managedFields"] = []any{map[string]any{"manager": "kubectl", "fieldsV1": map[string]any{"f:spec": map[string]any{}}}}
		md["creationTimestamp"] = "2026-01-01T00:00:00Z"
		whole, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		for name, f := range layouts {
			want, err := schema.Parse(whole, f)
			if err != nil {
				t.Fatal(err)
			}
			o, err := Compact(&unstructured.Unstructured{Object: obj}, f)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := readOf(mustView(t, o, f)), readOf(want); !reflect.DeepEqual(got, want) {
				t.Errorf("VM %d, %s: the cached form reads\n%+v\nthe object reads\n%+v", i, name, got, want)
			}
			for _, gone := range []string{"metadata.labels", "metadata.annotations", "metadata.managedFields", "metadata.creationTimestamp", "metadata.resourceVersion"} {
				if gjson.GetBytes(rawOf(t, o), gone).Exists() {
					t.Errorf("VM %d: the cached form keeps %s", i, gone)
				}
			}
			if o.Size() >= len(whole)/2 {
				t.Errorf("VM %d: cached form is %d bytes of the object's %d", i, o.Size(), len(whole))
			}
			if o.Phase() != want.Phase() {
				t.Errorf("VM %d, %s: the cached phase is %q, the object's %q", i, name, o.Phase(), want.Phase())
			}
			if o.Reason() != want.Status().Reason {
				t.Errorf("VM %d, %s: the cached reason is %q, the object's %q", i, name, o.Reason(), want.Status().Reason)
			}
			if o.GetName() != want.Name() || o.GetNamespace() != want.Namespace() || o.GetResourceVersion() != "4711" || o.GetUID() != want.UID() {
				t.Errorf("VM %d: the informer's metadata is %s/%s %s %s", i, o.GetNamespace(), o.GetName(), o.GetUID(), o.GetResourceVersion())
			}
		}
	}
}

// TestSame: versions that differ in resourceVersion, labels or annotations only are the
// same to the controller; any change a view reads is not.
func TestSame(t *testing.T) {
	base := `
apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: a, uid: u1, generation: 1, resourceVersion: "1", labels: {x: y}, finalizers: [x]}
spec: {action: active}
status: {phase: Active}
`
	tests := map[string]struct {
		cur  string
		same bool
	}{
		"resync":            {base, true},
		"new version only":  {replace(base, `resourceVersion: "1"`, `resourceVersion: "2"`), true},
		"labels changed":    {replace(base, "labels: {x: y}", "labels: {x: z}"), true},
		"annotation added":  {replace(base, "labels: {x: y}", "labels: {x: y}, annotations: {a: b}"), true},
		"paused":            {replace(base, "labels: {x: y}", `labels: {x: y}, annotations: {"cloudnative.czs/paused": "true"}`), false},
		"restart asked":     {replace(base, "labels: {x: y}", `labels: {x: y}, annotations: {"cloudnative.czs/restartedAt": "t"}`), false},
		"spec changed":      {replace(base, "action: active", "action: inactive"), false},
		"status changed":    {replace(base, "phase: Active", "phase: Creating"), false},
		"finalizer removed": {replace(base, "finalizers: [x]", "finalizers: []"), false},
		"deletion":          {replace(base, "finalizers: [x]", `finalizers: [x], deletionTimestamp: "2026-01-01T00:00:00Z"`), false},
		"generation":        {replace(base, "generation: 1", "generation: 2"), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Same(cachedObj(t, base), cachedObj(t, tc.cur)); got != tc.same {
				t.Errorf("Same = %v, want %v", got, tc.same)
			}
		})
	}
}

// TestObjectKeys: client-go's informer keys, indexes and tombstones read an Object's metadata
// through meta.Accessor.
func TestObjectKeys(t *testing.T) {
	o := cachedObj(t, `{apiVersion: v1, kind: VirtualMachine, metadata: {name: a, namespace: ns, uid: u1, resourceVersion: "5"}}`)
	if key, err := cache.MetaNamespaceKeyFunc(o); err != nil || key != "ns/a" {
		t.Errorf("key %q, %v", key, err)
	}
	if ns, err := cache.MetaNamespaceIndexFunc(o); err != nil || len(ns) != 1 || ns[0] != "ns" {
		t.Errorf("namespace index %v, %v", ns, err)
	}
	if name, err := cache.DeletionHandlingObjectToName(cache.DeletedFinalStateUnknown{Key: "ns/a", Obj: o}); err != nil || name.String() != "ns/a" {
		t.Errorf("tombstone %v, %v", name, err)
	}
	m, err := meta.Accessor(o)
	if err != nil || m.GetResourceVersion() != "5" || m.GetUID() != "u1" || m.GetAnnotations() != nil {
		t.Errorf("accessor %v, %v", m, err)
	}
	// Read in place, with no ObjectMeta made for it.
	if m != metav1.Object(o) {
		t.Errorf("meta.Accessor made %T, want the Object itself", m)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = cache.MetaNamespaceKeyFunc(o) }); n > 1 {
		t.Errorf("a key costs %v allocations, want at most 1 (the key's string)", n)
	}
}

// mustView is o's view in layout f; the test fails when o does not unpack.
func mustView(tb testing.TB, o *Object, f schema.Fields) schema.VirtualMachine {
	tb.Helper()
	vm, err := o.View(f)
	if err != nil {
		tb.Fatal(err)
	}
	return vm
}

// rawOf is o's compact JSON, unpacked.
func rawOf(tb testing.TB, o *Object) []byte {
	tb.Helper()
	raw, err := o.JSON()
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// TestTransform: the informer's transform keeps tombstones and other objects as they are and
// makes an Object of an unstructured one.
func TestTransform(t *testing.T) {
	f := decidecase.Fields(t)
	tomb := cache.DeletedFinalStateUnknown{Key: "default/test-vm"}
	if got, err := Transform(f)(tomb); err != nil || got != any(tomb) {
		t.Errorf("Transform(tombstone) = %v, %v", got, err)
	}
	raw, _ := decidecase.Input(t, filepath.Join("..", "..", "testdata", "decide", "create-new.txtar"))
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	got, err := Transform(f)(u)
	if o, ok := got.(*Object); err != nil || !ok || o.GetName() != "test-vm" || o.DeepCopyObject() != o || !o.GetObjectKind().GroupVersionKind().Empty() {
		t.Errorf("Transform(vm) = %#v, %v", got, err)
	}
}
