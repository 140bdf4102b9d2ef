package webhook

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// TestWantsBundle: the CRD watch wakes the certificates for a CRD with webhook conversion
// whose caBundle is not the one in use, and for none other.
func TestWantsBundle(t *testing.T) {
	crd := func(conversion map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "virtualmachines.cloudnative.czs"},
			"spec":     map[string]any{"conversion": conversion},
		}}
	}
	webhook := func(bundle any) map[string]any {
		return map[string]any{"strategy": "Webhook", "webhook": map[string]any{"clientConfig": map[string]any{"caBundle": bundle}}}
	}
	tests := map[string]struct {
		obj   any
		inUse string // the caBundle in use; "": none yet
		want  bool
	}{
		"conversion None":              {obj: crd(map[string]any{"strategy": "None"}), inUse: "UEVN"},
		"no conversion set":            {obj: crd(nil), inUse: "UEVN"},
		"the bundle in use":            {obj: crd(webhook("UEVN")), inUse: "UEVN"},
		"another bundle":               {obj: crd(webhook("T0xE")), inUse: "UEVN", want: true},
		"no bundle":                    {obj: crd(map[string]any{"strategy": "Webhook"}), inUse: "UEVN", want: true},
		"a bundle that is no string":   {obj: crd(webhook(int64(1))), inUse: "UEVN", want: true},
		"none in use yet":              {obj: crd(webhook("UEVN")), want: true},
		"a tombstone, not the CRD":     {obj: "virtualmachines.cloudnative.czs"},
		"a strategy that is no string": {obj: crd(map[string]any{"strategy": true}), inUse: "UEVN"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := &Certs{caBundle: tc.inUse}
			if got := c.wantsBundle(tc.obj); got != tc.want {
				t.Errorf("wantsBundle = %t, want %t", got, tc.want)
			}
		})
	}
}
