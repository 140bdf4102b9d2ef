package pods

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestUsage reads PodMetrics the way metrics-server serves them, and tells a pod without
// figures yet from a cluster without the metrics API.
func TestUsage(t *testing.T) {
	metrics := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetrics",
		"metadata": map[string]any{"name": "vm-server", "namespace": "ns"},
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
		want    string // cpu/memory, or the error it wraps
		err     error
	}{
		"figures":         {[]runtime.Object{metrics}, served, "260010900n/101Mi", nil},
		"no figures yet":  {nil, served, "", backend.ErrNoUsage},
		"no metrics API":  {nil, nil, "", backend.ErrUsageUnavailable},
		"no usage client": {nil, served, "", backend.ErrUsageUnavailable},
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
