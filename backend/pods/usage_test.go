package pods

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestUsage reads PodMetrics the way metrics-server serves them, and tells a pod without
// figures yet from a cluster without the metrics API: through the aggregator, a list of a
// group no APIService serves is NotFound (which discovery confirms), and one whose APIService
// does not answer is ServiceUnavailable.
func TestUsage(t *testing.T) {
	metrics := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
		// metrics-server copies the pod's labels (its pkg/storage/pod.go), which the list
		// selects on.
		"metadata": map[string]any{"name": "vm-server", "namespace": "ns", "labels": map[string]any{LabelVMUID: "u"}},
		"containers": []any{
			map[string]any{"name": "server", "usage": map[string]any{"cpu": "250010900n", "memory": "100Mi"}},
			map[string]any{"name": "sidecar", "usage": map[string]any{"cpu": "10m", "memory": "1Mi"}},
		},
	}}
	served := []*metav1.APIResourceList{{GroupVersion: "metrics.k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "pods", Namespaced: true}}}}
	vm := backend.Owner{Namespace: "ns", Name: "vm", UID: "u"}
	tests := map[string]struct {
		objects []runtime.Object
		apis    []*metav1.APIResourceList
		listErr error  // the API server's answer to the list, if not the objects
		want    string // cpu/memory, or the error it wraps
		err     error
	}{
		"figures":           {[]runtime.Object{metrics}, served, nil, "260010900n/101Mi", nil},
		"no figures yet":    {nil, served, nil, "", backend.ErrNoUsage},
		"no metrics API":    {nil, nil, apierrors.NewNotFound(PodMetricsGVR.GroupResource(), ""), "", backend.ErrUsageUnavailable},
		"API not answering": {nil, served, apierrors.NewServiceUnavailable("the server is currently unable to handle the request"), "", backend.ErrUsageUnavailable},
		"no usage client":   {nil, served, nil, "", backend.ErrUsageUnavailable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{PodMetricsGVR: "PodMetricsList"})
			for _, o := range tc.objects {
				if err := client.Tracker().Create(PodMetricsGVR, o, "ns"); err != nil {
					t.Fatal(err)
				}
			}
			if tc.listErr != nil {
				client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.listErr })
			}
			disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.apis}}
			b := New(Config{Client: kubefake.NewClientset(), UsageClient: client, Discovery: disc})
			if name == "no usage client" {
				b = New(Config{Client: kubefake.NewClientset(), Discovery: disc})
			}
			u, err := b.Usage(context.Background(), vm)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := u.CPU.String() + "/" + u.Memory.String(); got != tc.want {
				t.Errorf("usage %s, want %s", got, tc.want)
			}
		})
	}
}

// TestUsageDiscoveryBounded: a list of pod metrics answered NotFound has discovery asked
// whether the metrics API is served at all; an aggregated API that does not answer holds that
// request, which the sample's context bounds as it bounds the list before it. Before, the
// request took no context, and the one usage poller waited for the API server's own timeout.
func TestUsageDiscoveryBounded(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	asked := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/metrics.k8s.io/v1beta1" { // discovery: never answers
			arrived <- struct{}{}
			select {
			case <-r.Context().Done():
				asked <- r.Context().Err()
			case <-release:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(apierrors.NewNotFound(PodMetricsGVR.GroupResource(), "vm-server").Status())
	}))
	defer srv.Close()
	defer close(release)
	cfg := &rest.Config{Host: srv.URL}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Discovery's own timeout (32 s by default) outlasts the wait below: only the sample's
	// context can end its request in time.
	disc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b := New(Config{Client: kubefake.NewClientset(), UsageClient: client, Discovery: disc})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Usage(ctx, backend.Owner{Namespace: "ns", Name: "vm", UID: "u"})
		done <- err
	}()
	// The sample's deadline passes (a cancel stands for it) while the discovery request hangs.
	select {
	case <-arrived:
		cancel()
	case err := <-done:
		t.Fatalf("the sample ended (%v) before it asked discovery", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, backend.ErrNoUsage) {
			t.Errorf("error %v, want one wrapping %v", err, backend.ErrNoUsage)
		}
	case <-time.After(time.Minute):
		t.Fatal("the sample did not end with its context: discovery's request does not take it")
	}
	select {
	case err := <-asked:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("discovery's request ended with %v, want the sample's context's end", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("discovery's request did not end")
	}
}
