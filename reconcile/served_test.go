package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/crd"
)

// servedCRD is the CRD of gvr with its one version served or not, and Established or not.
func servedCRD(gvr k8sschema.GroupVersionResource, served, established bool) *unstructured.Unstructured {
	status := "False"
	if established {
		status = "True"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": crd.Name(gvr)},
		"spec": map[string]any{
			"group": gvr.Group,
			"names": map[string]any{"plural": gvr.Resource, "kind": "VirtualMachine"},
			"scope": "Namespaced",
			"versions": []any{
				map[string]any{"name": gvr.Version, "served": served, "storage": true},
			},
		},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "NamesAccepted", "status": "True"},
			map[string]any{"type": "Established", "status": status},
		}},
	}}
}

// TestServedWatch drives the CRD watch through the life of a CRD with the dynamic fake: each
// change of "served" calls onChange exactly once, in order, and events that change nothing
// (an unrelated update, a CRD being deleted) call it not at all. Every step that should not
// call onChange is followed by one that should, so a stray call shows up as the wrong value
// in the sequence.
func TestServedWatch(t *testing.T) {
	gvr := k8sschema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1alpha1", Resource: "virtualmachines"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[k8sschema.GroupVersionResource]string{crd.GVR: "CustomResourceDefinitionList"})
	// The fake does not replay what happened between the informer's list and its watch, so
	// the test waits until the watch is registered before it changes anything.
	watching := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if a, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = a.ListOptions
		}
		wi, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		once.Do(func() { close(watching) })
		return true, wi, nil
	})
	crds := client.Resource(crd.GVR)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	changes := make(chan bool, 16)
	w := newServedWatch(client, gvr, slog.New(slog.DiscardHandler), func(_ context.Context, served bool) { changes <- served })
	if !w.served() {
		t.Fatal("not served at start; the checks before start found it served")
	}
	if err := w.start(ctx); err != nil {
		t.Fatal(err)
	}
	<-watching
	expect := func(step string, want bool) {
		t.Helper()
		if got := <-changes; got != want {
			t.Fatalf("%s: onChange(%t), want onChange(%t)", step, got, want)
		}
		if got := w.served(); got != want {
			t.Fatalf("%s: served() = %t after onChange(%t)", step, got, want)
		}
	}
	update := func(obj *unstructured.Unstructured) {
		t.Helper()
		if _, err := crds.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Created but not yet Established: not served.
	if _, err := crds.Create(ctx, servedCRD(gvr, true, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("created, not Established", false)
	update(servedCRD(gvr, true, true))
	expect("Established", true)

	// An update that leaves it served changes nothing; the next change is the first call.
	labelled := servedCRD(gvr, true, true)
	labelled.SetLabels(map[string]string{"team": "vms"})
	update(labelled)
	update(servedCRD(gvr, false, true))
	expect("version no longer served", false)
	update(servedCRD(gvr, true, true))
	expect("version served again", true)

	// A CRD being deleted still serves its objects; only its removal ends that.
	deleting := servedCRD(gvr, true, true)
	now := metav1.Now()
	deleting.SetDeletionTimestamp(&now)
	update(deleting)
	if err := crds.Delete(ctx, crd.Name(gvr), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("deleted", false)

	// Back again.
	if _, err := crds.Create(ctx, servedCRD(gvr, true, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("created again", true)
	select {
	case got := <-changes:
		t.Errorf("an extra onChange(%t) after the last change", got)
	default:
	}
}

// TestServedBy: the watch reads a CRD through crd.Served, so it agrees with the check
// command on what "served" means.
func TestServedBy(t *testing.T) {
	gvr := k8sschema.GroupVersionResource{Group: "compute.example.org", Version: "v1", Resource: "machines"}
	tests := map[string]struct {
		obj  any
		want string
	}{
		"served":          {servedCRD(gvr, true, true), ""},
		"not served":      {servedCRD(gvr, false, true), "CRD machines.compute.example.org does not serve version v1 (served: false)"},
		"not established": {servedCRD(gvr, true, false), "CRD machines.compute.example.org is not Established"},
		"not an object":   {"tombstone", "the CRD cannot be read (a string)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := servedBy(tc.obj, gvr.Version); got != tc.want {
				t.Errorf("servedBy = %q, want %q", got, tc.want)
			}
		})
	}
}
