package crds

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// otherCRD is a CRD file of testdata/crds as JSON: what the API server returns for it.
func otherCRD(t *testing.T, file string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "crds", file))
	if err != nil {
		t.Fatal(err)
	}
	return crdJSON(t, data)
}

// upgradedCRD is this project's CRD of today under the group of testdata/crds/same-shape.yaml:
// that CRD upgraded in place to the current shape.
func upgradedCRD(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("virtualmachines.cloudnative.czs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return crdJSON(t, []byte(strings.ReplaceAll(string(data), "cloudnative.czs", "other.example.org")))
}

// edit is crd with change made to it, as decoded JSON.
func edit(t *testing.T, crd []byte, change func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(crd, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRechoose: a CRD changed so that its schema chooses another layout, or none, is a
// change; one whose status, served flags, labels or unrelated parts of its schema changed is
// not.
func TestRechoose(t *testing.T) {
	sameShape := otherCRD(t, "same-shape.yaml")
	was, err := ChooseLayout(sameShape, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	versions := func(m map[string]any) []any { return m["spec"].(map[string]any)["versions"].([]any) }
	tests := map[string]struct {
		crd []byte
		now string // in the layout it gives now; "" for no change
	}{
		"unchanged": {crd: sameShape},
		"status, labels and served flags": {crd: edit(t, sameShape, func(m map[string]any) {
			m["metadata"].(map[string]any)["labels"] = map[string]any{"team": "vms"}
			m["status"] = map[string]any{"storedVersions": []any{"v1alpha1"}, "conditions": []any{
				map[string]any{"type": "Established", "status": "True"}}}
			versions(m)[1].(map[string]any)["served"] = false
		})},
		"a field no layout has": {crd: edit(t, sameShape, func(m map[string]any) {
			v := versions(m)[0].(map[string]any)
			spec := v["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)
			spec["properties"].(map[string]any)["notes"] = map[string]any{"type": "string"}
			delete(v, "additionalPrinterColumns")
		})},
		"upgraded to the current shape": {crd: upgradedCRD(t),
			now: "built-in layout of cloudnative.czs/v1alpha1: the CRD's schema has every path (32)"},
		"a schema that keeps unknown fields": {crd: edit(t, otherCRD(t, "open.yaml"), func(m map[string]any) {
			m["metadata"].(map[string]any)["name"] = "virtualmachines.other.example.org"
		}), now: "no layout: the schema of v1alpha1 accepts the layouts of cloudnative.czs/v1 and cloudnative.czs/v1alpha1 alike"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := was.Rechoose(tc.crd, "v1alpha1")
			if tc.now == "" {
				if err != nil {
					t.Fatalf("Rechoose = %v, want no change", err)
				}
				return
			}
			var changed *LayoutChanged
			if !errors.As(err, &changed) {
				t.Fatalf("Rechoose = %v, want a *LayoutChanged", err)
			}
			if !strings.Contains(changed.Now, tc.now) || changed.Was.Fields != was.Fields || changed.Version != "v1alpha1" ||
				changed.CRD != "virtualmachines.other.example.org" {
				t.Errorf("Rechoose = %+v, want the layout of same-shape.yaml and now %q", changed, tc.now)
			}
			if want := "the schema of v1alpha1 in CRD virtualmachines.other.example.org no longer gives the field map chosen from it"; err.Error() != want {
				t.Errorf("error %q, want %q", err, want)
			}
		})
	}
}
