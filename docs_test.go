package main

import (
	"encoding/json"
	"fmt"
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

// badInputDoc is the table of what each bad input gives.
const badInputDoc = "docs/reference/bad-input.md"

// documentedQuantities are the quantities the table must place: each one where it is refused,
// at admission or by the controller. A negative number and a string that the schema's pattern
// let through were said to be refused at admission; the API server stored them, and the
// controller refused them. An exponent of many digits is refused at admission: the CRD's rule
// would compare it exactly, at a cost to the API server.
var documentedQuantities = []string{"cpu: -1", "memory: -5", "rootDisk: -5", `cpu: "1e2.5"`, `rootDisk: "1e99999999"`, `cpu: "1e300"`, "cpu: two", "memory: 4GB"}

// TestBadInputQuantities holds the quantity examples of docs/reference/bad-input.md (a
// backquoted `cpu: ...`, `memory: ...` or `rootDisk: ...` in a row of its tables) to the CRD
// and the controller, in every version with a built-in field map: a row whose user sees
// "admission: ..." has examples the CRD's schema refuses; any other row, examples the schema
// lets through and the controller refuses, as the row's "Invalid spec: ..." says.
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
					refused, why := admission(t, crd, version, example)
					switch {
					case refused && !atAdmission:
						t.Errorf("%s: `%s` is refused at admission in %s (%s), and the doc says the controller refuses it", badInputDoc, example, version, why)
					case !refused && atAdmission:
						t.Errorf("%s: `%s` passes admission in %s, and the doc says admission refuses it", badInputDoc, example, version)
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

// admission says whether the CRD's schema of version refuses the example's value at its path
// on create, and why. It applies what the schema of a quantity says, the parts of OpenAPI
// validation that a quantity's schema uses (int-or-string, pattern, maxLength, minimum); a
// schema that says more fails the test, so that this check learns it rather than pass over it.
func admission(t *testing.T, crd apiextensionsv1.CustomResourceDefinition, version, example string) (refused bool, why string) {
	t.Helper()
	path, value := quantityField(t, version, example)
	var props *apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			props = v.Schema.OpenAPIV3Schema
		}
	}
	if props == nil {
		t.Fatalf("the CRD has no version %s", version)
	}
	for _, name := range strings.Split(path, ".") {
		p, ok := props.Properties[name]
		if !ok {
			t.Fatalf("the schema of %s has no %s", version, path)
		}
		props = &p
	}
	for _, rule := range props.XValidations {
		if !strings.Contains(rule.Rule, "oldSelf") { // a rule on oldSelf applies to updates only
			t.Fatalf("%s %s: rule %q: this check does not evaluate CEL; extend it", version, path, rule.Rule)
		}
	}
	rest := *props
	rest.Description, rest.AnyOf, rest.XIntOrString, rest.Pattern, rest.MaxLength, rest.Minimum, rest.XValidations = "", nil, false, "", nil, nil, nil
	if b, _ := json.Marshal(rest); string(b) != "{}" {
		t.Fatalf("%s %s: the schema says %s, which this check does not apply; extend it", version, path, b)
	}
	if !props.XIntOrString {
		t.Fatalf("%s %s: not int-or-string", version, path)
	}
	switch v := value.(type) {
	case float64:
		if v != float64(int64(v)) {
			return true, "not an integer"
		}
		if props.Minimum != nil && v < *props.Minimum {
			return true, fmt.Sprintf("below the minimum %g", *props.Minimum)
		}
	case string:
		if props.Pattern != "" && !regexp.MustCompile(props.Pattern).MatchString(v) {
			return true, "does not match the pattern"
		}
		if props.MaxLength != nil && int64(len(v)) > *props.MaxLength {
			return true, "too long"
		}
	default:
		return true, fmt.Sprintf("a %T", v)
	}
	return false, ""
}

// controllerErrors are the controller's complaints about a VM of version with the example's
// quantity and valid values elsewhere.
func controllerErrors(t *testing.T, version, example string) []string {
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
