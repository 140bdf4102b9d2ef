package vmcachetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// Path is where APIServer serves the VMs: v1alpha1, namespace default.
const Path = "/apis/" + schema.Group + "/v1alpha1/namespaces/default/virtualmachines"

// Selector is the label selector every request to APIServer must carry.
const Selector = "team=a"

// APIServer speaks the API server's list and watch JSON for the VMs at Path: a list of the
// initial VMs, or a watch that (with sendInitialEvents) sends them as ADDED events and the
// bookmark that ends them, then whatever the test sends on Events until it is closed.
type APIServer struct {
	T       testing.TB
	Initial [][]byte // the VMs of the first list or watch list, as JSON
	RV      string   // the resourceVersion of the list and of the bookmark
	Events  chan string

	mu    sync.Mutex
	asked []string
}

// ServeHTTP answers a list or a watch.
func (s *APIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	if got := r.URL.Query().Get("labelSelector"); got != Selector {
		s.T.Errorf("labelSelector %q", got)
	}
	q := r.URL.Query()
	kind := "list"
	if q.Get("watch") == "true" {
		kind = "watch"
		if q.Get("sendInitialEvents") == "true" {
			kind = "watchlist"
		}
	}
	s.mu.Lock()
	s.asked = append(s.asked, kind)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if kind == "list" {
		items := bytes.Join(s.Initial, []byte(","))
		fmt.Fprintf(w, `{"apiVersion":"%s/v1alpha1","kind":"VirtualMachineList","metadata":{"resourceVersion":%q},"items":[%s]}`, schema.Group, s.RV, items)
		return
	}
	fl := w.(http.Flusher)
	if kind == "watchlist" {
		for _, vm := range s.Initial {
			fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", vm)
		}
		fmt.Fprintf(w, `{"type":"BOOKMARK","object":{"apiVersion":"%s/v1alpha1","kind":"VirtualMachine","metadata":{"resourceVersion":%q,"annotations":{"k8s.io/initial-events-end":"true"}}}}`+"\n", schema.Group, s.RV)
	}
	fl.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case e, ok := <-s.Events:
			if !ok {
				return
			}
			fmt.Fprintln(w, e)
			fl.Flush()
		}
	}
}

// Asked is what the server was asked so far, in order: "list", "watch" or "watchlist".
func (s *APIServer) Asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.asked)
}

// Rename sets a VM's name and resourceVersion.
func Rename(tb testing.TB, raw []byte, name, rv string) []byte {
	tb.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		tb.Fatal(err)
	}
	u.SetName(name)
	u.SetResourceVersion(rv)
	b, err := u.MarshalJSON()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// WithManagedFields is the VM raw as the API server sends it in a watch event: with the
// managedFields of its three writers (kubectl's apply, the controller's finalizer and its
// status), which the cached form drops.
func WithManagedFields(raw []byte) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	md, ok := m["metadata"].(map[string]any)
	if !ok {
		return nil, errors.New("the VM has no metadata")
	}
	md["managedFields"] = []any{
		map[string]any{"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "cloudnative.czs/v1alpha1",
			"time": "2026-11-21T20:00:00Z", "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:spec": map[string]any{".": map[string]any{}, "f:action": map[string]any{},
				"f:resource": map[string]any{".": map[string]any{}, "f:cpu": map[string]any{}, "f:memory": map[string]any{}, "f:rootDisk": map[string]any{}}}}},
		map[string]any{"manager": "vm-controller", "operation": "Update", "apiVersion": "cloudnative.czs/v1alpha1",
			"time": "2026-11-21T20:00:01Z", "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:finalizers": map[string]any{".": map[string]any{}, "v:\"cloudnative.czs/server-cleanup\"": map[string]any{}}}}},
		map[string]any{"manager": "vm-controller", "operation": "Update", "apiVersion": "cloudnative.czs/v1alpha1",
			"time": "2026-11-21T20:00:03Z", "fieldsType": "FieldsV1", "subresource": "status",
			"fieldsV1": map[string]any{"f:status": map[string]any{".": map[string]any{}, "f:phase": map[string]any{}, "f:reason": map[string]any{},
				"f:message": map[string]any{}, "f:server": map[string]any{}, "f:conditions": map[string]any{}}}},
	}
	return json.Marshal(m)
}
