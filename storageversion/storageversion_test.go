package storageversion

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/crds"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

var vms = k8sschema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1", Resource: "virtualmachines"}

func crdObject(storage string, stored ...string) *unstructured.Unstructured {
	var versions []any
	for _, v := range []string{"v1alpha1", "v1beta1", "v1"} {
		versions = append(versions, map[string]any{"name": v, "served": true, "storage": v == storage})
	}
	storedAny := make([]any, len(stored))
	for i, s := range stored {
		storedAny[i] = s
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": crds.DefaultName, "resourceVersion": "7"},
		"spec":     map[string]any{"group": "cloudnative.czs", "names": map[string]any{"plural": "virtualmachines"}, "versions": versions},
		"status":   map[string]any{"storedVersions": storedAny},
	}}
}

func vm(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cloudnative.czs/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": "uid-" + ns + "-" + name, "resourceVersion": "1" + name},
		"spec":     map[string]any{"runStrategy": "Always"},
	}}
}

// fakeCluster is the dynamic fake holding the CRD and five VMs.
func fakeCluster(t *testing.T, c *unstructured.Unstructured) *dynamicfake.FakeDynamicClient {
	t.Helper()
	objs := []runtime.Object{c, vm("a", "v1"), vm("a", "v2"), vm("b", "v3"), vm("b", "v4"), vm("c", "v5")}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{
		vms: "VirtualMachineList", crds.GVR: "CustomResourceDefinitionList"}, objs...)
}

// paged cuts the fake's lists of VMs into pages, as the API server does: the fake ignores
// Limit and Continue (its list action drops them before a reactor could see them). The
// continue token is the index of the next object; the token "stale" has expired, as a real
// one does after the compaction window. Everything else is the fake's.
type paged struct {
	*dynamicfake.FakeDynamicClient
}

func (p paged) Resource(gvr k8sschema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	r := p.FakeDynamicClient.Resource(gvr)
	if gvr != vms {
		return r
	}
	return pagedResource{r}
}

type pagedResource struct {
	dynamic.NamespaceableResourceInterface
}

func (r pagedResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if opts.Continue == "stale" {
		return nil, apierrors.NewResourceExpired("the continue token is too old")
	}
	all, err := r.NamespaceableResourceInterface.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	from := 0
	if opts.Continue != "" {
		from, _ = strconv.Atoi(opts.Continue)
	}
	to := min(from+int(opts.Limit), len(all.Items))
	page := &unstructured.UnstructuredList{Object: all.Object, Items: all.Items[from:to]}
	if to < len(all.Items) {
		page.SetContinue(strconv.Itoa(to))
	}
	return page, nil
}

// updates lists the objects updated, in order, with the resourceVersion each update carried.
func updates(dyn *dynamicfake.FakeDynamicClient, resource string) []string {
	var out []string
	for _, a := range dyn.Actions() {
		if u, ok := a.(k8stesting.UpdateActionImpl); ok && a.GetResource().Resource == resource && a.GetSubresource() == "" {
			o := u.GetObject().(*unstructured.Unstructured)
			out = append(out, o.GetNamespace()+"/"+o.GetName()+"@"+o.GetResourceVersion())
		}
	}
	return out
}

func storedVersions(t *testing.T, dyn *dynamicfake.FakeDynamicClient) []string {
	t.Helper()
	c, err := dyn.Resource(crds.GVR).Get(context.Background(), crds.DefaultName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, _, _ := unstructured.NestedStringSlice(c.Object, "status", "storedVersions")
	return s
}

func TestMigrate(t *testing.T) {
	all := []string{"a/v1@1v1", "a/v2@1v2", "b/v3@1v3", "b/v4@1v4", "c/v5@1v5"}
	for name, tc := range map[string]struct {
		continueToken string
		conflict      string // the object whose update conflicts, if any
		wantUpdates   []string
		want          Result
	}{
		"all pages": {"", "", all,
			Result{StorageVersion: "v1", Rewritten: 5, StoredBefore: []string{"v1alpha1", "v1"}, Trimmed: true}},
		"resumed": {"4", "", all[4:],
			Result{StorageVersion: "v1", Rewritten: 1, StoredBefore: []string{"v1alpha1", "v1"}, Trimmed: true}},
		"expired token": {"stale", "", all,
			Result{StorageVersion: "v1", Rewritten: 5, StoredBefore: []string{"v1alpha1", "v1"}, Trimmed: true}},
		"a conflict is someone else's write": {"", "v3", all,
			Result{StorageVersion: "v1", Rewritten: 4, Conflicts: 1, StoredBefore: []string{"v1alpha1", "v1"}, Trimmed: true}},
	} {
		t.Run(name, func(t *testing.T) {
			dyn := fakeCluster(t, crdObject("v1", "v1alpha1", "v1"))
			if tc.conflict != "" {
				dyn.PrependReactor("update", "virtualmachines", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if a.(k8stesting.UpdateActionImpl).GetObject().(*unstructured.Unstructured).GetName() == tc.conflict {
						return true, nil, apierrors.NewConflict(vms.GroupResource(), tc.conflict, nil)
					}
					return false, nil, nil
				})
			}
			m := &Migrator{Client: paged{dyn}, CRD: crds.DefaultName, PageSize: 2}
			res, err := m.Run(context.Background(), tc.continueToken)
			if err != nil {
				t.Fatal(err)
			}
			if got := updates(dyn, "virtualmachines"); !equal(got, tc.wantUpdates) {
				t.Errorf("updates %v, want %v", got, tc.wantUpdates)
			}
			if !equal(res.StoredBefore, tc.want.StoredBefore) || res.StorageVersion != tc.want.StorageVersion || res.Rewritten != tc.want.Rewritten ||
				res.Conflicts != tc.want.Conflicts || res.Gone != tc.want.Gone || res.Trimmed != tc.want.Trimmed {
				t.Errorf("result %+v, want %+v", res, tc.want)
			}
			if got := storedVersions(t, dyn); !equal(got, []string{"v1"}) {
				t.Errorf("storedVersions %v", got)
			}
		})
	}
}

// TestMigrateTwice: a second run rewrites the objects again, which changes nothing, and
// leaves storedVersions as the first left it.
func TestMigrateTwice(t *testing.T) {
	dyn := fakeCluster(t, crdObject("v1", "v1alpha1", "v1"))
	m := &Migrator{Client: paged{dyn}, CRD: crds.DefaultName, PageSize: 2}
	if _, err := m.Run(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	res, err := m.Run(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Trimmed || res.Rewritten != 5 || !equal(res.StoredBefore, []string{"v1"}) {
		t.Errorf("second run %+v", res)
	}
	if got := updates(dyn, "customresourcedefinitions"); len(got) != 0 {
		t.Errorf("the CRD was updated through the main resource: %v", got)
	}
}

func TestMigrateErrors(t *testing.T) {
	t.Run("no CRD", func(t *testing.T) {
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{crds.GVR: "CustomResourceDefinitionList"})
		_, err := (&Migrator{Client: paged{dyn}, CRD: crds.DefaultName}).Run(context.Background(), "")
		if want := `read CRD virtualmachines.cloudnative.czs: customresourcedefinitions.apiextensions.k8s.io "virtualmachines.cloudnative.czs" not found`; err == nil || err.Error() != want {
			t.Errorf("error %v", err)
		}
	})
	t.Run("no storage version", func(t *testing.T) {
		dyn := fakeCluster(t, crdObject("", "v1alpha1"))
		_, err := (&Migrator{Client: paged{dyn}, CRD: crds.DefaultName}).Run(context.Background(), "")
		if want := "CRD virtualmachines.cloudnative.czs has no storage version"; err == nil || err.Error() != want {
			t.Errorf("error %v", err)
		}
		if got := updates(dyn, "virtualmachines"); len(got) != 0 {
			t.Errorf("objects rewritten without a storage version: %v", got)
		}
	})
	t.Run("update fails", func(t *testing.T) {
		dyn := fakeCluster(t, crdObject("v1", "v1alpha1", "v1"))
		dyn.PrependReactor("update", "virtualmachines", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewInternalError(errString("conversion webhook unreachable"))
		})
		_, err := (&Migrator{Client: paged{dyn}, CRD: crds.DefaultName}).Run(context.Background(), "")
		if want := "rewrite virtualmachines a/v1: Internal error occurred: conversion webhook unreachable"; err == nil || err.Error() != want {
			t.Errorf("error %v", err)
		}
		// Nothing may be trimmed while an object may still be stored in an old version.
		if got := storedVersions(t, dyn); !equal(got, []string{"v1alpha1", "v1"}) {
			t.Errorf("storedVersions %v", got)
		}
	})
	t.Run("storage version changed", func(t *testing.T) {
		dyn := fakeCluster(t, crdObject("v1", "v1alpha1", "v1"))
		dyn.PrependReactor("update", "virtualmachines", func(k8stesting.Action) (bool, runtime.Object, error) {
			// Someone applies the CRD with another storage version mid-run.
			return false, nil, dyn.Tracker().Update(crds.GVR, crdObject("v1alpha1", "v1alpha1", "v1"), "")
		})
		_, err := (&Migrator{Client: paged{dyn}, CRD: crds.DefaultName}).Run(context.Background(), "")
		if want := "the storage version of CRD virtualmachines.cloudnative.czs changed from v1 to v1alpha1 during the migration; run it again"; err == nil || err.Error() != want {
			t.Errorf("error %v", err)
		}
	})
}

type errString string

func (e errString) Error() string { return string(e) }

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// compacting cuts the fake's lists of VMs into pages with continue tokens that expire as the
// API server's do: every page of one list belongs to the snapshot of its first page, and a
// token is refused (410 Gone) once that snapshot is older than the compaction window. Time is
// counted in updates of VMs, which a run makes at a steady rate. A token is "<updates when
// the list began>:<index of the next object>".
type compacting struct {
	*dynamicfake.FakeDynamicClient
	window   int    // updates a token outlives; negative: it expires at once
	onExpire func() // if set, called as a token is refused
	updates  int
	lists    int
	expired  int // tokens refused
}

func (c *compacting) Resource(gvr k8sschema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	r := c.FakeDynamicClient.Resource(gvr)
	if gvr != vms {
		return r
	}
	return compactingResource{r, c}
}

type compactingResource struct {
	dynamic.NamespaceableResourceInterface
	c *compacting
}

func (r compactingResource) Namespace(ns string) dynamic.ResourceInterface {
	return compactingNamespace{r.NamespaceableResourceInterface.Namespace(ns), r.c}
}

func (r compactingResource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	c := r.c
	if c.lists++; c.lists > 100 {
		// A run that lists from the start for ever: stop it so that the test can say so.
		return nil, errString("the fake gave up after 100 lists")
	}
	began, from := c.updates, 0
	if opts.Continue != "" {
		b, f, ok := strings.Cut(opts.Continue, ":")
		var errB, errF error
		began, errB = strconv.Atoi(b)
		from, errF = strconv.Atoi(f)
		if !ok || errB != nil || errF != nil {
			return nil, apierrors.NewBadRequest("invalid continue token " + opts.Continue)
		}
		if c.window < 0 || c.updates-began > c.window {
			c.expired++
			if c.onExpire != nil {
				c.onExpire()
			}
			return nil, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result.")
		}
	}
	all, err := r.NamespaceableResourceInterface.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	to := min(from+int(opts.Limit), len(all.Items))
	page := &unstructured.UnstructuredList{Object: all.Object, Items: all.Items[from:to]}
	if to < len(all.Items) {
		page.SetContinue(fmt.Sprintf("%d:%d", began, to))
	}
	return page, nil
}

type compactingNamespace struct {
	dynamic.ResourceInterface
	c *compacting
}

func (n compactingNamespace) Update(ctx context.Context, o *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error) {
	n.c.updates++
	return n.ResourceInterface.Update(ctx, o, opts, sub...)
}

// twentyVMs is the dynamic fake holding the CRD, with storedVersions [v1alpha1 v1], and the
// VMs ns/vm00 to ns/vm19.
func twentyVMs() *dynamicfake.FakeDynamicClient {
	objs := []runtime.Object{crdObject("v1", "v1alpha1", "v1")}
	for i := range 20 {
		objs = append(objs, vm("ns", fmt.Sprintf("vm%02d", i)))
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[k8sschema.GroupVersionResource]string{
		vms: "VirtualMachineList", crds.GVR: "CustomResourceDefinitionList"}, objs...)
}

// updatesPerVM counts the updates of each VM, by name.
func updatesPerVM(dyn *dynamicfake.FakeDynamicClient) map[string]int {
	n := map[string]int{}
	for _, u := range updates(dyn, "virtualmachines") {
		name, _, _ := strings.Cut(u, "@")
		n[name]++
	}
	return n
}

// TestMigrateOutlivesItsTokens: a pass over 20 VMs in pages of 5 takes 20 updates, longer than
// a continue token lives. When one expires the run lists from the start again and skips what
// it has rewritten, so it ends, having rewritten each VM once, and trims storedVersions. It
// rewrote the same VMs from the start for ever: a pass never got to the end, and
// storedVersions was never trimmed.
func TestMigrateOutlivesItsTokens(t *testing.T) {
	for name, tc := range map[string]struct {
		window      int
		recreate    bool // ns/vm03 is deleted and created again as the first token expires
		wantExpired int
		want        Result
	}{
		// Pages 1-3, then the token of page 4 has expired; pages 1-3 skipped, page 4.
		"a pass gets through three pages": {12, false, 1, Result{Rewritten: 20, Skipped: 15}},
		// Pages 1-2; pages 1-2 skipped, pages 3-4.
		"a pass gets through two pages": {7, false, 1, Result{Rewritten: 20, Skipped: 10}},
		// Each pass gets one page further: three tokens expire.
		"a pass gets through one page": {4, false, 3, Result{Rewritten: 20, Skipped: 30}},
		// The VM created again has a new UID: the second pass rewrites it.
		"a VM deleted and created again": {12, true, 1, Result{Rewritten: 21, Skipped: 14}},
	} {
		t.Run(name, func(t *testing.T) {
			dyn := twentyVMs()
			c := &compacting{FakeDynamicClient: dyn, window: tc.window}
			if tc.recreate {
				c.onExpire = func() {
					if c.expired > 1 {
						return
					}
					again := vm("ns", "vm03")
					again.SetUID("uid-ns-vm03-again")
					if err := dyn.Tracker().Delete(vms, "ns", "vm03"); err != nil {
						t.Error(err)
					}
					if err := dyn.Tracker().Create(vms, again, "ns"); err != nil {
						t.Error(err)
					}
				}
			}
			m := &Migrator{Client: c, CRD: crds.DefaultName, PageSize: 5}
			res, err := m.Run(context.Background(), "")
			if err != nil {
				t.Fatalf("the run did not end: %v (%d updates, %d tokens expired)", err, c.updates, c.expired)
			}
			perVM := updatesPerVM(dyn)
			for i := range 20 {
				name, want := fmt.Sprintf("ns/vm%02d", i), 1
				if tc.recreate && name == "ns/vm03" {
					want = 2 // once as the VM it was, once as the VM it is
				}
				if perVM[name] != want {
					t.Errorf("%s rewritten %d times, want %d", name, perVM[name], want)
				}
			}
			if c.expired != tc.wantExpired {
				t.Errorf("%d tokens expired, want %d", c.expired, tc.wantExpired)
			}
			if res.Rewritten != tc.want.Rewritten || res.Skipped != tc.want.Skipped || res.Conflicts != 0 || res.Gone != 0 || !res.Trimmed {
				t.Errorf("result %+v, want %d rewritten, %d skipped, trimmed", res, tc.want.Rewritten, tc.want.Skipped)
			}
			if got := storedVersions(t, dyn); !equal(got, []string{"v1"}) {
				t.Errorf("storedVersions %v, want [v1]", got)
			}
		})
	}
}

// TestMigrateTokensThatNeverLast: when the token expires before a pass from the start gets
// past what the run has rewritten, no later pass would get further: the run stops with the
// expiry, having rewritten the first page once, and trims nothing.
func TestMigrateTokensThatNeverLast(t *testing.T) {
	dyn := twentyVMs()
	c := &compacting{FakeDynamicClient: dyn, window: -1}
	m := &Migrator{Client: c, CRD: crds.DefaultName, PageSize: 5}
	res, err := m.Run(context.Background(), "")
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("error %v, want the expired token's", err)
	}
	if want := "list virtualmachines.cloudnative.czs: the continue token expired before a pass from the start got past the 5 objects this run has rewritten"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to begin %q", err, want)
	}
	perVM := updatesPerVM(dyn)
	for i := range 20 {
		name, want := fmt.Sprintf("ns/vm%02d", i), 0
		if i < 5 {
			want = 1
		}
		if perVM[name] != want {
			t.Errorf("%s rewritten %d times, want %d", name, perVM[name], want)
		}
	}
	if res.Rewritten != 5 || res.Skipped != 5 || c.expired != 2 {
		t.Errorf("result %+v, %d tokens expired; want 5 rewritten, 5 skipped, 2 expired", res, c.expired)
	}
	if got := storedVersions(t, dyn); !equal(got, []string{"v1alpha1", "v1"}) {
		t.Errorf("storedVersions %v, want them untouched", got)
	}
}
