package crds

import (
	"errors"
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
		is      error  // the kind of error, for errors.Is; nil for none
	}{
		"served and established": {crd: withStatus(base, established), version: "v1"},
		"being deleted": {crd: replace(withStatus(base, established), `"metadata":{`, `"metadata":{"deletionTimestamp":"2026-01-01T00:00:00Z",`),
			version: "v1"},
		"no such version": {crd: withStatus(base, established), version: "v2",
			want: "CRD machines.compute.example.org has no version v2", is: ErrNoVersion},
		"served: false": {crd: replace(withStatus(base, established), `"served":true`, `"served":false`), version: "v1",
			want: "CRD machines.compute.example.org does not serve version v1 (served: false)", is: ErrNotServed},
		"no conditions yet": {crd: base, version: "v1",
			want: "CRD machines.compute.example.org is not Established", is: ErrNotEstablished},
		"not established": {crd: withStatus(base, `,"status":{"conditions":[{"type":"Established","status":"False"}]}`), version: "v1",
			want: "CRD machines.compute.example.org is not Established", is: ErrNotEstablished},
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
			for _, kind := range []error{ErrNoVersion, ErrNotServed, ErrNotEstablished} {
				if got, want := errors.Is(err, kind), kind == tc.is; got != want {
					t.Errorf("errors.Is(%v, %v) = %t, want %t", err, kind, got, want)
				}
			}
		})
	}
}

// TestStorageResource: the resource in the version with storage: true, whichever its place
// among the versions; none is an error that names the CRD.
func TestStorageResource(t *testing.T) {
	plain, err := YAML()
	if err != nil {
		t.Fatal(err)
	}
	stored := func(version string) []byte {
		data, err := WithWebhook(Webhook{Namespace: "ops", StorageVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		return crdJSON(t, data)
	}
	noStorage := strings.Replace(string(machineCRD(t)), `"storage":true`, `"storage":false`, 1)
	tests := map[string]struct {
		crd  []byte
		want string // the resource, or the error
	}{
		"the plain form":          {crdJSON(t, plain), "cloudnative.czs/v1alpha1, Resource=virtualmachines"},
		"the webhook form, in v1": {stored("v1"), "cloudnative.czs/v1, Resource=virtualmachines"},
		"another group":           {machineCRD(t), "compute.example.org/v1, Resource=machines"},
		"no storage version":      {[]byte(noStorage), "CRD machines.compute.example.org has no storage version"},
		"storage: \"true\"":       {[]byte(strings.Replace(noStorage, `"storage":false`, `"storage":"true"`, 1)), "CRD machines.compute.example.org has no storage version"},
		"not JSON":                {[]byte("{"), "the CRD is not valid JSON"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			gvr, err := StorageResource(tc.crd)
			got := gvr.String()
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("StorageResource = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestConversion: the strategy and the caBundle as the CRD has them; a field of another type
// than string is none.
func TestConversion(t *testing.T) {
	tests := map[string]struct {
		crd                string
		strategy, caBundle string
	}{
		"none set":   {crd: `{"spec":{}}`},
		"None":       {crd: `{"spec":{"conversion":{"strategy":"None"}}}`, strategy: "None"},
		"no bundle":  {crd: `{"spec":{"conversion":{"strategy":"Webhook","webhook":{"clientConfig":{"service":{"name":"s"}}}}}}`, strategy: "Webhook"},
		"a bundle":   {crd: `{"spec":{"conversion":{"strategy":"Webhook","webhook":{"clientConfig":{"caBundle":"UEVN"}}}}}`, strategy: "Webhook", caBundle: "UEVN"},
		"not string": {crd: `{"spec":{"conversion":{"strategy":1,"webhook":{"clientConfig":{"caBundle":{"a":"b"}}}}}}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ConversionStrategy([]byte(tc.crd)); got != tc.strategy {
				t.Errorf("ConversionStrategy = %q, want %q", got, tc.strategy)
			}
			if got := CABundle([]byte(tc.crd)); got != tc.caBundle {
				t.Errorf("CABundle = %q, want %q", got, tc.caBundle)
			}
		})
	}
}

// TestWebhookOnly: v1 is only in the webhook form; the plain form's versions, and a version
// in neither, are not.
func TestWebhookOnly(t *testing.T) {
	for version, want := range map[string]bool{"v1": true, "v1alpha1": false, "v1beta1": false, "v2": false, "": false} {
		if got := WebhookOnly(version); got != want {
			t.Errorf("WebhookOnly(%q) = %t, want %t", version, got, want)
		}
	}
}
