package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// establishedCRD reads a CRD fixture as the API server would return it once Established.
func establishedCRD(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "crds", file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	m["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": "True"}}}
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	def, err := yaml.YAMLToJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	return def
}

// TestJudgeCRD: a CRD without the status subresource is a warning, which neither fails check
// nor stops run's preflight; with it, a pass.
func TestJudgeCRD(t *testing.T) {
	fields, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1alpha1"})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		file, name string
		want       string // the rows' results
		detail     string // in the crd row
	}{
		"status subresource":    {"same-shape.yaml", "virtualmachines.other.example.org", "crd pass,fields pass", "has the status subresource in v1alpha1"},
		"no status subresource": {"no-status.yaml", "virtualmachines.nostatus.example.org", "crd WARN,fields pass", "has no status subresource in version v1alpha1 (add subresources: {status: {}}): the controller writes status through the main resource"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rows := judgeCRD(tc.name, establishedCRD(t, tc.file), "v1alpha1", fields)
			var got []string
			for _, r := range rows {
				got = append(got, r.name+" "+r.result())
				if r.failed() {
					t.Errorf("row %s failed: %s", r.name, r.detail)
				}
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("rows %v, want %s", got, tc.want)
			}
			if !strings.Contains(rows[0].detail, tc.detail) {
				t.Errorf("crd row %q does not say %q", rows[0].detail, tc.detail)
			}
		})
	}
}
