package command

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/events"

	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/reconcile"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

var _ readiness = (*reconcile.Controller)(nil)

// fixedReadiness answers /readyz's two questions as it is told.
type fixedReadiness struct{ synced, served bool }

func (r fixedReadiness) HasSynced() bool { return r.synced }
func (r fixedReadiness) Served() bool    { return r.served }

// get asks h for path and returns the status code and the body.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, strings.TrimSpace(string(body))
}

// TestReadyzSaysWhy: /readyz answers 503 with what keeps the controller from being ready: the
// VM resource not served (before, "caches not synced", which sent whoever read it to the
// caches rather than to the CRD), or the caches not synced.
func TestReadyzSaysWhy(t *testing.T) {
	alive := func(*http.Request) error { return nil }
	for name, tc := range map[string]struct {
		ready fixedReadiness
		code  int
		body  string
	}{
		"ready":               {fixedReadiness{synced: true, served: true}, http.StatusOK, "ok"},
		"caches not synced":   {fixedReadiness{served: true}, http.StatusServiceUnavailable, "caches not synced"},
		"resource not served": {fixedReadiness{}, http.StatusServiceUnavailable, notServed},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := get(t, healthMux(alive, tc.ready), "/readyz")
			if code != tc.code || body != tc.body {
				t.Errorf("/readyz: %d %q, want %d %q", code, body, tc.code, tc.body)
			}
		})
	}
}

// TestReadyzResourceNotServed: a controller whose VM resource's CRD does not serve the
// version answers /readyz with "not served", not "caches not synced".
func TestReadyzResourceNotServed(t *testing.T) {
	gvr := k8sschema.GroupVersionResource{Group: schema.Group, Version: "v1alpha1", Resource: "virtualmachines"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": crds.Name(gvr)},
		"spec": map[string]any{
			"group": gvr.Group, "scope": "Namespaced",
			"names":    map[string]any{"plural": gvr.Resource, "kind": "VirtualMachine"},
			"versions": []any{map[string]any{"name": gvr.Version, "served": false, "storage": true}},
		},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}},
	}}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[k8sschema.GroupVersionResource]string{crds.GVR: "CustomResourceDefinitionList", gvr: "VirtualMachineList"}, crd)
	fields, err := schema.ForVersion(gvr.GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	ctrl := reconcile.New(reconcile.Config{VMs: reconcile.Source{Client: client, GVR: gvr, Fields: fields},
		CRD: reconcile.CRD{Watch: true}, Backend: memory.New(), Policy: decision.DefaultPolicy,
		Report: reconcile.Report{Recorder: events.NewFakeRecorder(10), Logger: slog.New(slog.DiscardHandler)}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := ctrl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h := healthMux(func(*http.Request) error { return nil }, ctrl)
	var code int
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if code, body = get(t, h, "/readyz"); strings.HasPrefix(body, "VM resource not served") {
			break
		}
	}
	if code != http.StatusServiceUnavailable || body != notServed {
		t.Errorf("/readyz: %d %q, want %d %q", code, body, http.StatusServiceUnavailable, notServed)
	}
}
