package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// fieldMapsDoc shows the field maps, the check of a CRD of another group, and the versions.
const fieldMapsDoc = "docs/field-maps-and-versions.md"

// fencedAfter returns the lines of the first fenced block of doc after the line that contains
// marker.
func fencedAfter(t *testing.T, doc, marker string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, marker)
	if !ok {
		t.Fatalf("%s: no %q", fieldMapsDoc, marker)
	}
	_, rest, ok = strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s: no block after %q", fieldMapsDoc, marker)
	}
	_, rest, _ = strings.Cut(rest, "\n") // the fence's language
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("%s: the block after %q does not end", fieldMapsDoc, marker)
	}
	return strings.Split(strings.TrimSuffix(block, "\n"), "\n")
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestFieldMapsDocCheckRow holds the fieldmap row the doc shows for
// testdata/crds/same-shape.yaml to the reason `check` prints there (crds.ChooseLayout's), which
// grew spec.placement and status.migration while the doc did not.
func TestFieldMapsDocCheckRow(t *testing.T) {
	lines := fencedAfter(t, readDoc(t, fieldMapsDoc), "here for `testdata/crds/same-shape.yaml`")
	if len(lines) != 1 {
		t.Fatalf("%s: the check's row is %d lines, want 1: %q", fieldMapsDoc, len(lines), lines)
	}
	yamlCRD, err := os.ReadFile("testdata/crds/same-shape.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd, err := yaml.YAMLToJSON(yamlCRD)
	if err != nil {
		t.Fatal(err)
	}
	l, err := crds.ChooseLayout(crd, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	name, rest, _ := strings.Cut(lines[0], " ")
	result, detail, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
	if detail = strings.TrimLeft(detail, " "); name != "fieldmap" || result != "pass" || detail != l.Why {
		t.Errorf("%s: the check's row is\n%s\nwant fieldmap, pass and\n%s", fieldMapsDoc, lines[0], l.Why)
	}
}

// TestFieldMapsDocWideColumns holds the columns of the doc's kubectl get -o wide of v1beta1 to
// the CRD's printer columns of v1beta1 (every one, -o wide shows those of priority 1 too).
func TestFieldMapsDocWideColumns(t *testing.T) {
	lines := fencedAfter(t, readDoc(t, fieldMapsDoc), "In another terminal:")
	var header, row []string
	for i, l := range lines {
		if strings.HasPrefix(l, "# NAME ") && i+1 < len(lines) {
			header, row = strings.Fields(strings.TrimPrefix(l, "#")), strings.Fields(strings.TrimPrefix(lines[i+1], "#"))
		}
	}
	data, err := os.ReadFile("crds/virtualmachines.cloudnative.czs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	want := []string{"NAME"}
	for _, v := range crd.Spec.Versions {
		if v.Name != "v1beta1" {
			continue
		}
		for _, c := range v.AdditionalPrinterColumns {
			want = append(want, strings.ToUpper(c.Name))
		}
	}
	if strings.Join(header, " ") != strings.Join(want, " ") || len(row) != len(header) {
		t.Errorf("%s: kubectl get -o wide shows\n%v\nwith a row of %d values; the CRD's v1beta1 has the columns\n%v", fieldMapsDoc, header, len(row), want)
	}
}

// TestFieldMapsDocKeys: the table of a map's keys has a row for every key a map may give
// (it lacked spec.placement, status.restartedAt and status.migration). A row names its first
// key whole and the next ones from a parent of it: `status.phase`, `.server.name`.
func TestFieldMapsDocKeys(t *testing.T) {
	f, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: "v1alpha1"})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, p := range f.Paths() {
		keys[p.Key] = true
	}
	code := regexp.MustCompile("`([^`]+)`")
	documented := map[string]bool{}
	for _, line := range strings.Split(readDoc(t, fieldMapsDoc), "\n") {
		if !strings.HasPrefix(line, "| `spec.") && !strings.HasPrefix(line, "| `status.") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " | ")
		var whole string
		for i, m := range code.FindAllStringSubmatch(first, -1) {
			if i == 0 {
				whole = m[1]
				documented[whole] = true
				continue
			}
			segs := strings.Split(whole, ".")
			for n := len(segs) - 1; n > 0; n-- {
				if k := strings.Join(segs[:n], ".") + m[1]; keys[k] {
					documented[k] = true
					break
				}
			}
		}
	}
	for k := range keys {
		if !documented[k] {
			t.Errorf("%s: the table of keys has no row for %s", fieldMapsDoc, k)
		}
	}
}
