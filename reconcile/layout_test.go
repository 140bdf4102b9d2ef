package reconcile

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// otherGVR is the resource of testdata/crds/same-shape.yaml: this project's CRD of an earlier
// release under another group, whose layout the controller chooses from its schema.
var otherGVR = k8sschema.GroupVersionResource{Group: "other.example.org", Version: "v1alpha1", Resource: "virtualmachines"}

// layoutCRD is a CRD manifest as the API server returns it once it has accepted it:
// Established.
func layoutCRD(t *testing.T, yamlDoc string) *unstructured.Unstructured {
	t.Helper()
	data, err := sigsyaml.YAMLToJSON([]byte(yamlDoc))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = map[string]any{"conditions": []any{
		map[string]any{"type": "NamesAccepted", "status": "True"},
		map[string]any{"type": "Established", "status": "True"},
	}}
	return u
}

// sameShapeCRD is testdata/crds/same-shape.yaml, whose schema lacks the disk's reclaim
// policy; upgradedCRD is the same CRD upgraded in place to this project's current shape
// (the reproduction's `sed s/cloudnative\.czs/other.example.org/g crds/...yaml`).
func sameShapeCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile("../testdata/crds/same-shape.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return layoutCRD(t, string(data))
}

func upgradedCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile("../crds/virtualmachines.cloudnative.czs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return layoutCRD(t, strings.ReplaceAll(string(data), "cloudnative.czs", "other.example.org"))
}

// chosenLayout is the layout run chooses from crd at start-up.
func chosenLayout(t *testing.T, crd *unstructured.Unstructured) *crds.Layout {
	t.Helper()
	data, err := crd.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	l, err := crds.ChooseLayout(data, otherGVR.Version)
	if err != nil {
		t.Fatal(err)
	}
	return &l
}

// layoutClient is a dynamic fake serving CRDs and the VMs of otherGVR, holding objs. The
// fake does not replay what happened between an informer's list and its watch, so a test
// waits on the channel returned, closed once the CRD watch is registered, before it changes
// the CRD.
func layoutClient(objs ...runtime.Object) (*dynamicfake.FakeDynamicClient, <-chan struct{}) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[k8sschema.GroupVersionResource]string{crds.GVR: "CustomResourceDefinitionList", otherGVR: "VirtualMachineList"}, objs...)
	return client, watchOpened(client, crds.GVR)
}

// watchOpened serves the fake's watches from its tracker and returns a channel closed once a
// watch of gvr is open: the fake does not replay what happened between an informer's list and
// its watch, so a test waits for it before it changes anything.
func watchOpened(client *dynamicfake.FakeDynamicClient, gvr k8sschema.GroupVersionResource) <-chan struct{} {
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
		if action.GetResource() == gvr {
			once.Do(func() { close(watching) })
		}
		return true, wi, nil
	})
	return watching
}

// TestServedWatchLayout feeds the CRD watch of a controller whose field map was chosen from
// the CRD's schema the changes a CRD goes through. Those that leave the choice as it was (its
// status, its served flags, its labels, a field no layout has) change nothing; the upgrade to
// the current shape, whose schema gives the layout with the disk's reclaim policy, asks the
// controller to stop, once, and the resource stops counting as served; nothing after it
// counts. After each change the test waits until the watch has handled it (its test hook).
func TestServedWatchLayout(t *testing.T) {
	crd := sameShapeCRD(t)
	client, watching := layoutClient(crd.DeepCopy())
	crdClient := client.Resource(crds.GVR)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	changes := make(chan bool, 16)
	handled := make(chan string, 16)
	relayouts := make(chan *crds.LayoutChanged, 16)
	w := newServedWatch(client, otherGVR, slog.New(slog.DiscardHandler), func(_ context.Context, served bool) { changes <- served })
	w.layout = chosenLayout(t, crd)
	w.onLayout = func(c *crds.LayoutChanged) { relayouts <- c }
	w.handled = func(why string) { handled <- why }
	if err := w.start(ctx); err != nil {
		t.Fatal(err)
	}
	<-watching

	update := func(change func(u *unstructured.Unstructured)) func() error {
		return func() error {
			cur, err := crdClient.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(cur)
			_, err = crdClient.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}
	}
	upgraded := upgradedCRD(t)
	steps := []struct {
		name     string
		do       func() error // nil: the first list's
		why      string       // the reason the watch gives; "" for served
		relayout bool         // asks the controller to stop
		served   bool         // served() after it
	}{
		{name: "the first list: the CRD the layout was chosen from", served: true},
		{name: "status, labels and another version's served flag", do: update(func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"team": "vms"})
			if err := unstructured.SetNestedStringSlice(u.Object, []string{"v1alpha1"}, "status", "storedVersions"); err != nil {
				t.Fatal(err)
			}
			versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
			versions[1].(map[string]any)["served"] = false
			if err := unstructured.SetNestedSlice(u.Object, versions, "spec", "versions"); err != nil {
				t.Fatal(err)
			}
		}), served: true},
		{name: "a field no layout has", do: update(func(u *unstructured.Unstructured) {
			versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
			v := versions[0].(map[string]any)
			if err := unstructured.SetNestedField(v, map[string]any{"type": "string"},
				"schema", "openAPIV3Schema", "properties", "spec", "properties", "notes"); err != nil {
				t.Fatal(err)
			}
			if err := unstructured.SetNestedSlice(u.Object, versions, "spec", "versions"); err != nil {
				t.Fatal(err)
			}
		}), served: true},
		{name: "upgraded to the current shape", do: update(func(u *unstructured.Unstructured) {
			u.Object["spec"] = upgraded.Object["spec"]
		}), why: "the schema of v1alpha1 in CRD virtualmachines.other.example.org no longer gives the field map chosen from it", relayout: true},
		{name: "a label after it", do: update(func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"team": "other"})
		}), why: "the schema of v1alpha1 in CRD virtualmachines.other.example.org no longer gives the field map chosen from it"},
	}
	for _, s := range steps {
		if s.do != nil {
			if err := s.do(); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		if why := <-handled; why != s.why {
			t.Errorf("%s: the watch says %q, want %q", s.name, why, s.why)
		}
		// onLayout and onChange run before the event counts as handled: their calls are in
		// the channels now.
		select {
		case c := <-relayouts:
			if !s.relayout {
				t.Errorf("%s: asked to stop (%+v), want nothing", s.name, c)
			} else if !strings.Contains(c.Now, "every path (32)") || c.Was.Fields != w.layout.Fields {
				t.Errorf("%s: asked to stop with %+v, want the layout it had and the full one of today", s.name, c)
			}
		default:
			if s.relayout {
				t.Errorf("%s: not asked to stop", s.name)
			}
		}
		select {
		case served := <-changes:
			t.Errorf("%s: onChange(%t), want no call", s.name, served)
		default:
		}
		// The first list's event counts as synced only once its handler has returned: judged
		// from the next event on.
		if s.do != nil {
			if got := w.served(); got != s.served {
				t.Errorf("%s: served() = %t, want %t", s.name, got, s.served)
			}
		}
	}
}

// TestControllerStopsOnLayoutChange is the reproduction's VM: made with rootDiskReclaimPolicy:
// Retain on the upgraded CRD, and deleted, while the controller still holds the layout it chose
// from the CRD before, without the reclaim policy. Decided on that layout its disk goes with
// it (reclaim policy Delete, as the field is not read): the first subtest shows it. Once the
// CRD watch has seen the upgrade, the informer of the VMs is stopped before the process is
// asked to stop, and a worker that takes the VM then decides nothing: the disk stays.
func TestControllerStopsOnLayoutChange(t *testing.T) {
	vm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": otherGVR.GroupVersion().String(),
		"kind":       "VirtualMachine",
		"metadata": map[string]any{"name": "od", "namespace": "default", "uid": "od-uid",
			"finalizers": []any{schema.Finalizer}, "deletionTimestamp": "2026-01-01T00:00:00Z"},
		"spec": map[string]any{"action": "active", "rootDiskReclaimPolicy": "Retain",
			"resource": map[string]any{"cpu": "500m", "memory": "512Mi", "rootDisk": "1Gi"}},
	}}
	owner := backend.Owner{APIVersion: vm.GetAPIVersion(), Kind: vm.GetKind(), Namespace: "default", Name: "od", UID: "od-uid"}

	for _, upgrade := range []bool{false, true} {
		name := "the layout still given: the disk goes"
		if upgrade {
			name = "the CRD upgraded: nothing is decided"
		}
		t.Run(name, func(t *testing.T) {
			crd := sameShapeCRD(t)
			client, watching := layoutClient(crd.DeepCopy(), vm.DeepCopy())
			servers := memory.New()
			servers.BindDisks(true)
			if _, err := servers.CreateDisk(context.Background(), owner, backend.DiskSpec{Size: resource.MustParse("1Gi")}); err != nil {
				t.Fatal(err)
			}
			recorder := events.NewFakeRecorder(100)
			relayouts := make(chan error, 1)
			var c *Controller
			var stoppedFirst, syncedAtCall bool
			layout := chosenLayout(t, crd)
			c = New(Config{VMs: Source{Client: client, GVR: otherGVR, Fields: layout.Fields}, Backend: servers, Policy: decision.DefaultPolicy,
				Report: Report{Recorder: recorder, Logger: slog.New(slog.DiscardHandler)},
				CRD: CRD{Watch: true, Layout: layout, OnLayoutChanged: func(err error) {
					stoppedFirst, syncedAtCall = c.vms.Load() == nil, c.HasSynced()
					relayouts <- err
				}}})
			ctx := start(t, c) // the VM of the first list is queued
			<-watching

			if upgrade {
				cur, err := client.Resource(crds.GVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				cur.Object["spec"] = upgradedCRD(t).Object["spec"]
				if _, err := client.Resource(crds.GVR).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				var changed *crds.LayoutChanged
				if err := <-relayouts; !errors.As(err, &changed) {
					t.Fatalf("OnLayoutChanged(%v), want a *crds.LayoutChanged", err)
				}
				if !stoppedFirst || syncedAtCall {
					t.Errorf("at OnLayoutChanged: informer stopped %t, synced %t; want it stopped and not synced", stoppedFirst, syncedAtCall)
				}
			}
			c.processNextItem(ctx)

			disk, _ := servers.ObserveDisk(owner)
			var reasons []string
			for len(recorder.Events) > 0 {
				reasons = append(reasons, strings.Fields(<-recorder.Events)[1])
			}
			if upgrade {
				if disk == nil || disk.Deleting || len(reasons) > 0 {
					t.Errorf("disk %+v, events %v: want the disk left as it was and nothing done", disk, reasons)
				}
				select {
				case err := <-relayouts:
					t.Errorf("OnLayoutChanged called again: %v", err)
				default:
				}
				return
			}
			if disk == nil || !disk.Deleting || !strings.Contains(strings.Join(reasons, ","), "DeletingDisk") {
				t.Errorf("disk %+v, events %v: want the disk deleted on the layout without the reclaim policy", disk, reasons)
			}
			select {
			case err := <-relayouts:
				t.Errorf("OnLayoutChanged(%v) with the CRD unchanged", err)
			default:
			}
		})
	}
}
