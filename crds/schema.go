package crds

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// The checks here read a CustomResourceDefinition as JSON, as the API server returns it, so
// that the check command can tell before the controller starts whether a CRD can carry what
// a field map says: the controller would otherwise find out one failed patch at a time.
// Whether the version is served is Served's question, asked first by the caller.

// StatusSubresource checks that version of the CRD has the /status subresource. Without it
// (the original tutorial's CRD had none) the controller must write its status through the
// main resource, conditional on the resourceVersion it decided on, so that a status write
// and a user's spec edit made at once conflict instead of one undoing the other: workable,
// but every such race costs a retry, so check reports it as a warning.
func StatusSubresource(crd []byte, version string) error {
	v, err := crdVersion(crd, version)
	if err != nil {
		return err
	}
	if !v.Get("subresources.status").IsObject() {
		return fmt.Errorf("CRD %s has no status subresource in version %s (add subresources: {status: {}})",
			gjson.GetBytes(crd, "metadata.name").String(), version)
	}
	return nil
}

// CheckSchema checks that every path of f exists in the OpenAPI schema of version of the CRD
// and allows what the controller reads or writes there. It returns how many paths it checked
// and one error per path that does not fit. A path under a schema node with
// x-kubernetes-preserve-unknown-fields (or open additionalProperties) exists by definition.
func CheckSchema(crd []byte, version string, f schema.Fields) (checked int, errs []error) {
	v, err := crdVersion(crd, version)
	if err != nil {
		return 0, []error{err}
	}
	root := v.Get("schema.openAPIV3Schema")
	if !root.IsObject() {
		return 0, []error{fmt.Errorf("version %s of the CRD has no schema.openAPIV3Schema", version)}
	}
	for _, p := range f.Paths() {
		if p.Path == "" {
			continue
		}
		checked++
		if err := checkNode(root, p.Path, p.Type); err != nil {
			errs = append(errs, fmt.Errorf("%s at %s: %w", p.Key, p.Path, err))
		}
	}
	return checked, errs
}

// ReclaimPolicyPath is where this project's CRD keeps a VM's reclaim policy.
const ReclaimPolicyPath = "spec.rootDiskReclaimPolicy"

// UnmappedReclaimPolicy is an error when the schema of the CRD's version has a reclaim policy
// at ReclaimPolicyPath and the field map f maps none (a field map given by hand, written for a
// CRD before the field, or one that leaves it out): the API server would accept a VM's Retain,
// and the controller, reading no policy, would delete the VM's disk with it. A schema that
// only preserves unknown fields there does not count: nothing says the field is one.
func UnmappedReclaimPolicy(crd []byte, version string, f schema.Fields) error {
	if f.RootDiskReclaimPolicy != "" {
		return nil
	}
	v, err := crdVersion(crd, version)
	if err != nil {
		return err
	}
	node := v.Get("schema.openAPIV3Schema")
	for _, s := range strings.Split(ReclaimPolicyPath, ".") {
		if node = property(node, s); !node.Exists() {
			return nil
		}
	}
	return fmt.Errorf("the schema of %s has %s, which the field map does not map: a VM's Retain there would be ignored, "+
		"and its disk deleted with it; map it (rootDiskReclaimPolicy: %s in the field map)", version, ReclaimPolicyPath, ReclaimPolicyPath)
}

// checkNode walks the schema along path and checks the type of what it finds.
func checkNode(node gjson.Result, path string, want schema.ValueType) error {
	segs := strings.Split(path, ".")
	for i, s := range segs {
		at := "the top level"
		if i > 0 {
			at = strings.Join(segs[:i], ".")
		}
		if p := property(node, s); p.Exists() {
			node = p
			continue
		}
		if node.Get("x-kubernetes-preserve-unknown-fields").Bool() {
			return nil // anything may be stored here
		}
		if ap := node.Get("additionalProperties"); ap.IsObject() {
			node = ap
			continue
		} else if ap.Type == gjson.True {
			return nil
		}
		if t := node.Get("type").String(); t != "" && t != "object" {
			return fmt.Errorf("%s is of type %s in the schema, so it has no field %q", at, t, s)
		}
		return fmt.Errorf("the schema has no property %q under %s", s, at)
	}
	return checkType(node, want)
}

// checkType checks that a schema node allows the value a field holds.
func checkType(node gjson.Result, want schema.ValueType) error {
	t := node.Get("type").String()
	intOrString := node.Get("x-kubernetes-int-or-string").Bool()
	if t == "" && (intOrString || node.Get("x-kubernetes-preserve-unknown-fields").Bool()) {
		if (want == schema.TypeConditions || want == schema.TypeObject) && intOrString {
			return fmt.Errorf("the schema says int-or-string; want %s", map[schema.ValueType]string{schema.TypeConditions: "an array of conditions", schema.TypeObject: "an object"}[want])
		}
		return nil
	}
	var ok bool
	var what string
	switch want {
	case schema.TypeString:
		ok, what = t == "string", "string"
	case schema.TypeQuantity:
		ok, what = t == "string" || t == "integer" || t == "number", "quantity (int-or-string, string or number)"
	case schema.TypeInteger:
		ok, what = t == "integer" || t == "number", "integer"
	case schema.TypeConditions:
		ok, what = t == "array", "array of conditions"
	case schema.TypeObject:
		ok, what = t == "object", "object"
	}
	if !ok {
		if t == "" {
			t = "no type"
		}
		return fmt.Errorf("the schema says %s; want %s", t, what)
	}
	return nil
}

// property returns the schema of node's property named key. It compares keys rather than
// building a gjson path, so that no character of a key is read as path syntax.
func property(node gjson.Result, key string) gjson.Result {
	var found gjson.Result
	node.Get("properties").ForEach(func(k, v gjson.Result) bool {
		if k.String() == key {
			found = v
			return false
		}
		return true
	})
	return found
}
