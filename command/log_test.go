package command

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// TestAPIWarningsLoggedAtWarn: a warning the API server sends with an answer (here of a VM
// name longer than a pod's hostname takes) is logged at WARN with the text as an attribute,
// not at INFO as client-go's own handler logs it.
func TestAPIWarningsLoggedAtWarn(t *testing.T) {
	const text = "metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [must be no more than 63 characters]"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("Warning", `299 - "`+text+`"`)
		_, _ = w.Write([]byte(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"vms"}}`))
	}))
	defer srv.Close()

	before := slog.Default()
	t.Cleanup(func() {
		slog.SetDefault(before)
		klog.ClearLogger()
		rest.SetDefaultWarningHandlerWithContext(rest.WarningLogger{})
	})
	var out bytes.Buffer
	if _, err := (logFlags{LogLevel: "info", LogFormat: "json"}).setUp(&out); err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Get(context.Background(), "vms", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	var line struct{ Level, Msg, Warning string }
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("%v: %q, want one JSON line", err, out.String())
	}
	if line.Level != "WARN" || line.Msg != "The API server warned" || line.Warning != text {
		t.Errorf("logged %q; want level WARN, msg %q, warning %q", out.String(), "The API server warned", text)
	}
}
