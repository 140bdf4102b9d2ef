package crds

import (
	"strings"
	"testing"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

func TestName(t *testing.T) {
	tests := map[string]struct {
		gvr  k8sschema.GroupVersionResource
		want string
	}{
		"this project's": {k8sschema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1alpha1", Resource: "virtualmachines"}, "virtualmachines.cloudnative.czs"},
		"another group":  {k8sschema.GroupVersionResource{Group: "compute.example.org", Version: "v1", Resource: "machines"}, "machines.compute.example.org"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Name(tc.gvr); got != tc.want {
				t.Errorf("Name = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestServed: one row per way a CRD can fail to serve a version, and the ways it still does.
func TestServed(t *testing.T) {
	established := `,"status":{"conditions":[{"type":"NamesAccepted","status":"True"},{"type":"Established","status":"True"}]}`
	base := string(machineCRD(t))
	if !strings.HasSuffix(base, "}") || !strings.Contains(base, `"served":true`) {
		t.Fatalf("unexpected test CRD: %s", base)
	}
	withStatus := func(crd, status string) string { return strings.TrimSuffix(crd, "}") + status + "}" }
	replace := func(crd, old, new string) string {
		if !strings.Contains(crd, old) {
			t.Fatalf("%s is not in the test CRD", old)
		}
		return strings.Replace(crd, old, new, 1)
	}
	tests := map[string]struct {
		crd     string
		version string
		want    string // the error; "" for served
	}{
		"served and established": {crd: withStatus(base, established), version: "v1"},
		"being deleted": {crd: replace(withStatus(base, established), `"metadata":{`, `"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z",`),
			version: "v1"},
		"no such version": {crd: withStatus(base, established), version: "v2",
			want: "CRD machines.compute.example.org has no version v2"},
		"served: false": {crd: replace(withStatus(base, established), `"served":true`, `"served":false`), version: "v1",
			want: "CRD machines.compute.example.org does not serve version v1 (served: false)"},
		"no conditions yet": {crd: base, version: "v1",
			want: "CRD machines.compute.example.org is not Established"},
		"not established": {crd: withStatus(base, `,"status":{"conditions":[{"type":"Established","status":"False"}]}`), version: "v1",
			want: "CRD machines.compute.example.org is not Established"},
		"not JSON": {crd: "{", version: "v1", want: "the CRD is not valid JSON"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Served([]byte(tc.crd), tc.version)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Served = %q, want %q", got, tc.want)
			}
		})
	}
}
