package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/crds"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// badInputDoc is the table of what each bad input gives.
const badInputDoc = "docs/reference/bad-input.md"

// documentedQuantities are the quantities the table must place: each one where it is refused,
// at admission or by the controller. A negative number and a string that the schema's pattern
// let through were once said to be refused at admission; the API server stored them, and the
// controller refused them. A zero, a negative number and memory without a unit (bytes) are
// refused at admission by the CRD's CEL rules since; a fraction of a byte and an exponent the
// pattern lets through (three digits) beyond 200 are still the controller's to refuse. An
// exponent of many digits is refused at admission by the pattern alone.
var documentedQuantities = []string{"cpu: -1", "memory: -5", "rootDisk: -5", "memory: 0", "memory: 512", `rootDisk: "1.5"`,
	`cpu: "1e2.5"`, `rootDisk: "1e99999999"`, `cpu: "1e300"`, "cpu: two", "memory: 4GB"}

// TestBadInputQuantities holds the quantity examples of docs/reference/bad-input.md (a
// backquoted `cpu: ...`, `memory: ...` or `rootDisk: ...` in a row of its tables) to the CRD
// and the controller, in every version with a built-in field map: a row whose user sees
// "admission: ..." has examples the API server refuses, and gives the words of each refusal
// by a CEL rule; any other row, examples the API server lets through and the controller
// refuses, as the row's "Invalid spec: ..." says.
func TestBadInputQuantities(t *testing.T) {
	doc, err := os.ReadFile(badInputDoc)
	if err != nil {
		t.Fatal(err)
	}
	crd := webhookCRD(t)
	snippet := regexp.MustCompile("`((?:cpu|memory|rootDisk): [^`]+)`")
	found := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		cols := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| ") || len(cols) < 3 {
			continue
		}
		for _, m := range snippet.FindAllStringSubmatch(cols[0], -1) {
			example := m[1]
			found[example] = true
			t.Run(example, func(t *testing.T) {
				atAdmission := strings.HasPrefix(cols[1], "admission:")
				if !atAdmission && !strings.Contains(cols[1], "Invalid spec:") {
					t.Fatalf("%s: the row of `%s` says neither admission: nor Invalid spec:", badInputDoc, example)
				}
				for _, version := range schema.BuiltinVersions() {
					refused, errs := admission(t, crd, version, example)
					switch {
					case refused && !atAdmission:
						t.Errorf("%s: `%s` is refused at admission in %s (%s), and the doc says the controller refuses it", badInputDoc, example, version, errs.ToAggregate())
					case !refused && atAdmission:
						t.Errorf("%s: `%s` passes admission in %s, and the doc says admission refuses it", badInputDoc, example, version)
					case refused && version == "v1alpha1":
						for _, e := range errs {
							if !strings.Contains(e.Detail, "should match") && !strings.Contains(cols[1], e.Detail) { // not the pattern's
								t.Errorf("%s: the row of `%s` does not give the words of its refusal at admission, %s", badInputDoc, example, e)
							}
						}
					case !refused:
						if errs := controllerErrors(t, version, example); len(errs) == 0 {
							t.Errorf("%s: `%s` passes admission and the controller in %s", badInputDoc, example, version)
						} else if version == "v1alpha1" && strings.HasPrefix(example, "cpu: ") && !strings.Contains(cols[1], "Invalid spec: "+errs[0]) {
							t.Errorf("%s: the row of `%s` does not give the controller's message, Invalid spec: %s", badInputDoc, example, errs[0])
						}
					}
				}
			})
		}
	}
	for _, example := range documentedQuantities {
		if !found[example] {
			t.Errorf("%s: no row gives `%s` as an example: say where it is refused", badInputDoc, example)
		}
	}
}

// webhookCRD is the CRD with every version.
func webhookCRD(t *testing.T) apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := crds.WithWebhook(crds.Webhook{Namespace: "vm-controller"})
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// quantityField reads an example, `cpu: -1`, into the field map's path of that quantity in
// version and the value as JSON decodes it.
func quantityField(t *testing.T, version, example string) (path string, value any) {
	t.Helper()
	f, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(example), &m); err != nil || len(m) != 1 {
		t.Fatalf("`%s`: not one field: %v", example, err)
	}
	for name, v := range m {
		path = map[string]string{"cpu": f.CPU, "memory": f.Memory, "rootDisk": f.RootDisk}[name]
		value = v
	}
	return path, value
}

// admission says whether the API server refuses a VM of version with the example's quantity
// (and valid values elsewhere) on create, and why: the CRD's OpenAPI schema, then its CEL rules
// unless an error of the schema keeps them from running, as the API server's own validation
// of a custom resource does.
func admission(t *testing.T, crd apiextensionsv1.CustomResourceDefinition, version, example string) (refused bool, errs field.ErrorList) {
	t.Helper()
	var props *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			props = v.Schema.OpenAPIV3Schema
		}
	}
	if props == nil {
		t.Fatalf("the CRD has no version %s", version)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, &internal, nil); err != nil {
		t.Fatal(err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(&internal)
	if err != nil {
		t.Fatal(err)
	}
	obj := exampleVM(t, version, example)
	errs = apiservervalidation.ValidateCustomResource(nil, obj, validator)
	for _, e := range errs {
		switch e.Type { // the errors that keep the API server from evaluating the CEL rules
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true, errs
		}
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	celErrs, _ := cel.NewValidator(s, true, celconfig.PerCallLimit).Validate(context.Background(), nil, s, obj, nil, celconfig.RuntimeCELCostBudget)
	errs = append(errs, celErrs...)
	return len(errs) > 0, errs
}

// exampleVM is a VM of version with the example's quantity and valid values elsewhere, as the
// API server decodes it (a whole number is an int64).
func exampleVM(t *testing.T, version, example string) map[string]any {
	t.Helper()
	f, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{"apiVersion": schema.Group + "/" + version, "kind": "VirtualMachine", "metadata": map[string]any{"name": "vm", "namespace": "ns"}}
	set := func(path string, v any) {
		m, names := obj, strings.Split(path, ".")
		for _, n := range names[:len(names)-1] {
			if _, ok := m[n].(map[string]any); !ok {
				m[n] = map[string]any{}
			}
			m = m[n].(map[string]any)
		}
		m[names[len(names)-1]] = v
	}
	active := f.ActiveValue
	if active == "" {
		active = "active"
	}
	set(f.Action, active)
	set(f.CPU, 1)
	set(f.Memory, "1Gi")
	set(f.RootDisk, "1Gi")
	set(quantityField(t, version, example))
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var decoded map[string]any
	if err := utiljson.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	return decoded
}

// controllerErrors are the controller's complaints about a VM of version with the example's
// quantity and valid values elsewhere.
func controllerErrors(t *testing.T, version, example string) []string {
	t.Helper()
	f, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(exampleVM(t, version, example))
	if err != nil {
		t.Fatal(err)
	}
	vm, err := schema.Parse(raw, f)
	if err != nil {
		t.Fatal(err)
	}
	_, errs := vm.Spec()
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

// maxDocPage is the most bytes a page of the docs (README.md, docs/) may hold: a page says
// how to do one thing and where things stand, and one that grows past this is split, or
// its history moved out (bench/results/HISTORY.md), rather than left to grow as the
// benchmarks page once did, to 145 KB.
const maxDocPage = 40960

// TestDocPagesBounded holds every page of the docs to maxDocPage.
func TestDocPagesBounded(t *testing.T) {
	pages := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("found only %d pages: %q", len(pages), pages)
	}
	for _, p := range pages {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > maxDocPage {
			t.Errorf("%s is %d bytes, over %d: split it, or move what it keeps of the past out", p, info.Size(), maxDocPage)
		}
	}
}
