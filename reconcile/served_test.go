package reconcile

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/cloudnative-czs/vm-controller/crds"
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
		"metadata":   map[string]any{"name": crds.Name(gvr)},
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

// TestServedWatch drives the CRD watch through the life of a CRD with the dynamic fake. After
// each change to the CRD the test waits until the watch has handled that event, then asserts
// whether it is served, why not, and whether onChange was called: exactly once for a change
// of "served", never for an event that changes nothing.
func TestServedWatch(t *testing.T) {
	gvr := k8sschema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1alpha1", Resource: "virtualmachines"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[k8sschema.GroupVersionResource]string{crds.GVR: "CustomResourceDefinitionList"})
	watching := watchOpened(client, crds.GVR)
	crdClient := client.Resource(crds.GVR)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	changes := make(chan bool, 16)
	handled := make(chan string, 16)
	w := newServedWatch(client, gvr, slog.New(slog.DiscardHandler), func(_ context.Context, served bool) { changes <- served })
	w.handled = func(why string) { handled <- why }
	if !w.served() {
		t.Fatal("not served at start; the checks before start found it served")
	}
	if err := w.start(ctx); err != nil {
		t.Fatal(err)
	}
	<-watching

	name := crds.Name(gvr)
	steps := []struct {
		name   string
		do     func() error
		why    string // the reason the watch gives; "" for served
		change *bool  // the onChange call the event makes; nil for none
	}{
		{name: "created, not Established", do: func() error {
			_, err := crdClient.Create(ctx, servedCRD(gvr, true, false), metav1.CreateOptions{})
			return err
		}, why: "CRD " + name + " is not Established", change: onChange(false)},
		{name: "Established", do: func() error {
			_, err := crdClient.Update(ctx, servedCRD(gvr, true, true), metav1.UpdateOptions{})
			return err
		}, change: onChange(true)},
		{name: "an update that changes nothing", do: func() error {
			u := servedCRD(gvr, true, true)
			u.SetLabels(map[string]string{"team": "vms"})
			_, err := crdClient.Update(ctx, u, metav1.UpdateOptions{})
			return err
		}},
		{name: "version no longer served", do: func() error {
			_, err := crdClient.Update(ctx, servedCRD(gvr, false, true), metav1.UpdateOptions{})
			return err
		}, why: "CRD " + name + " does not serve version v1alpha1 (served: false)", change: onChange(false)},
		{name: "version served again", do: func() error {
			_, err := crdClient.Update(ctx, servedCRD(gvr, true, true), metav1.UpdateOptions{})
			return err
		}, change: onChange(true)},
		{name: "being deleted: still served", do: func() error {
			u := servedCRD(gvr, true, true)
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
			_, err := crdClient.Update(ctx, u, metav1.UpdateOptions{})
			return err
		}},
		{name: "deleted", do: func() error {
			return crdClient.Delete(ctx, name, metav1.DeleteOptions{})
		}, why: "CRD " + name + " was deleted", change: onChange(false)},
		{name: "created again", do: func() error {
			_, err := crdClient.Create(ctx, servedCRD(gvr, true, true), metav1.CreateOptions{})
			return err
		}, change: onChange(true)},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if why := <-handled; why != s.why {
			t.Errorf("%s: the watch says %q, want %q", s.name, why, s.why)
		}
		if got := w.served(); got != (s.why == "") {
			t.Errorf("%s: served() = %t", s.name, got)
		}
		// onChange runs before the event counts as handled, so its call is in the channel now.
		select {
		case got := <-changes:
			if s.change == nil || got != *s.change {
				t.Errorf("%s: onChange(%t), want %s", s.name, got, describeChange(s.change))
			}
		default:
			if s.change != nil {
				t.Errorf("%s: no onChange, want onChange(%t)", s.name, *s.change)
			}
		}
	}
}

// onChange is the call a step expects.
func onChange(served bool) *bool { return &served }

func describeChange(c *bool) string {
	if c == nil {
		return "no call"
	}
	return fmt.Sprintf("onChange(%t)", *c)
}

// TestServedBy: the watch reads a CRD through crds.Served, so it agrees with the check
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
