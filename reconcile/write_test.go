package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// writtenVM is a VM as the API server answers a write: managed fields, annotations and all.
const writtenVM = `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine",
 "metadata":{"name":"vm1","namespace":"ns","uid":"0b6a4c1e-2f5d-4e8a-9c3b-7d1e2f3a4b5c","resourceVersion":"4711",
  "generation":3,"finalizers":["cloudnative.czs/server-cleanup"],"creationTimestamp":"2026-11-23T10:00:00Z",
  "annotations":{"cloudnative.czs/restartedAt":"2026-11-23T11:00:00Z","note":"not read"},
  "managedFields":[{"manager":"vm-controller","operation":"Update","apiVersion":"cloudnative.czs/v1alpha1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{}}}]},
 "spec":{"action":"active","resource":{"cpu":"1","memory":"1Gi","rootDisk":"10Gi"}},
 "status":{"phase":"Active","reason":"ServerReady","server":{"name":"vm1-server","id":"pod-uid","state":"Running"}}}`

// TestRESTWriter: a status write goes out as a merge patch of the status subresource with
// the controller's field manager, and its answer is read into the same compact form, and so the
// same view, as the dynamic client's answer gives; API errors keep their kind and the API
// server's message.
func TestRESTWriter(t *testing.T) {
	var got struct{ method, path, contentType, fieldManager, body string }
	answer, code := writtenVM, http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.method, got.path, got.contentType = r.Method, r.URL.Path, r.Header.Get("Content-Type")
		got.fieldManager, got.body = r.URL.Query().Get("fieldManager"), string(b)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()
	client, err := vmcache.RESTClientFor(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	wr := restWriter{client: client, gvr: vmGVR}
	ctx := context.Background()

	out, err := wr.patch(ctx, "ns", "vm1", []byte(`{"status":{"phase":"Active"}}`), "status")
	if err != nil {
		t.Fatal(err)
	}
	if got.method != http.MethodPatch || got.path != "/apis/cloudnative.czs/v1alpha1/namespaces/ns/virtualmachines/vm1/status" ||
		got.contentType != "application/merge-patch+json" || got.fieldManager != fieldManager || got.body != `{"status":{"phase":"Active"}}` {
		t.Errorf("request %+v", got)
	}
	var u unstructured.Unstructured
	if err := json.Unmarshal([]byte(writtenVM), &u.Object); err != nil {
		t.Fatal(err)
	}
	want, err := writtenOf(&u)
	if err != nil {
		t.Fatal(err)
	}
	if out.rv != "4711" || out.rv != want.rv {
		t.Errorf("resourceVersion %q; want 4711", out.rv)
	}
	// The two forms may order keys differently; what a view reads of them must not differ.
	f := decidecase.Fields(t)
	if a, b := out.view(f).JSON(), want.view(f).JSON(); !sameJSON(t, a, b) {
		t.Errorf("view of the REST answer\n%s\nwant, as from the dynamic client,\n%s", a, b)
	}
	v := out.view(f)
	if v.Name() != "vm1" || v.Namespace() != "ns" || v.Generation() != 3 || !v.HasFinalizer(schema.Finalizer) ||
		v.Status().Phase != schema.PhaseActive || v.RestartRequested() != "2026-11-23T11:00:00Z" {
		t.Errorf("view %s", v.JSON())
	}
	if len(out.raw) >= len(writtenVM)*3/4 {
		t.Errorf("compact form of %d bytes from %d: managed fields kept?\n%s", len(out.raw), len(writtenVM), out.raw)
	}

	// The finalizer goes to the main resource.
	if _, err := wr.patch(ctx, "ns", "vm1", []byte(`{}`)); err != nil || got.path != "/apis/cloudnative.czs/v1alpha1/namespaces/ns/virtualmachines/vm1" {
		t.Errorf("main resource: %v, path %s", err, got.path)
	}

	for _, tc := range []struct {
		name   string
		code   int
		reason string
		is     func(error) bool
		// message is the API server's word on the refusal, which the error must carry: a
		// write an admission policy refuses was logged as "the server rejected our request
		// due to an error in our request", without the policy's message.
		message string
	}{
		{"conflict", http.StatusConflict, "Conflict", apierrors.IsConflict,
			`Operation cannot be fulfilled on virtualmachines.cloudnative.czs "vm1": the object has been modified; please apply your changes to the latest version and try again`},
		{"not found", http.StatusNotFound, "NotFound", apierrors.IsNotFound, `virtualmachines.cloudnative.czs "vm1" not found`},
		{"refused by a policy", http.StatusUnprocessableEntity, "Invalid", apierrors.IsInvalid,
			`virtualmachines.cloudnative.czs "vm1" is forbidden: ValidatingAdmissionPolicy 'hold' with binding 'hold' denied request: status held`},
	} {
		code = tc.code
		answer = fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":%q,"reason":%q,"code":%d}`, tc.message, tc.reason, tc.code)
		_, err := wr.patch(ctx, "ns", "vm1", []byte(`{}`), "status")
		if !tc.is(err) || err.Error() != tc.message {
			t.Errorf("%s: error %v, want the API server's %q", tc.name, err, tc.message)
		}
	}
	code, answer = http.StatusOK, `{"metadata":`
	if _, err := wr.patch(ctx, "ns", "vm1", []byte(`{}`), "status"); err == nil {
		t.Error("a truncated answer gave no error")
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// BenchmarkWriteResponse is the controller's cost of reading the answer to a VM write: as the
// dynamic client does (decode into unstructured, then encode the compact form) and as the
// REST writer does (read in place into the compact form).
func BenchmarkWriteResponse(b *testing.B) {
	body := []byte(writtenVM)
	b.Run("dynamic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, body)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := writtenOf(obj.(*unstructured.Unstructured)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := vmcache.Answer(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
