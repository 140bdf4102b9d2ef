package crds

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// webhookCRDForTest is the webhook form of the CRD, every version, as the API server gets it.
func webhookCRDForTest(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := WithWebhook(Webhook{Namespace: "vm-controller"})
	if err != nil {
		t.Fatal(err)
	}
	crd := decodeCRD(t, data)
	return &crd
}

// TestCRDValidates: the API server's own validation of a CRD (the one kubectl apply meets)
// accepts both forms, CEL rules included: they compile, and their estimated cost is within
// the API server's limits, which a rule that reads the status as well as the spec could pass.
func TestCRDValidates(t *testing.T) {
	plain, err := YAML()
	if err != nil {
		t.Fatal(err)
	}
	p := decodeCRD(t, plain)
	for name, crd := range map[string]*apiextensionsv1.CustomResourceDefinition{"plain": &p, "webhook": webhookCRDForTest(t)} {
		apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
		var internal apiextensions.CustomResourceDefinition
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, &internal, nil); err != nil {
			t.Fatal(err)
		}
		if errs := validation.ValidateCustomResourceDefinition(context.Background(), &internal); len(errs) > 0 {
			t.Errorf("%s form: the API server refuses the CRD: %v", name, errs.ToAggregate())
		}
	}
}

// TestRootDiskShrinkRule evaluates the CRD's CEL rules, as the API server does on an update
// of the main resource (whose status is then the stored one: the status subresource), in
// every version. A rootDisk below the one before is refused, unless it is at or above the
// disk's size or the size its claim asks for as the status records them: a growth that the
// class cannot make (DiskNotExpandable) can be taken back to the size the disk has, or, on
// storage that rounds a disk up, to the size its claim asks for. A status without the request
// (an earlier release's) is judged as before.
func TestRootDiskShrinkRule(t *testing.T) {
	crd := webhookCRDForTest(t)
	type vm struct {
		rootDisk any // the spec's
		capacity any // status.rootDisk.capacity; nil: none recorded
		request  any // status.rootDisk.request; nil: none recorded
	}
	tests := []struct {
		name     string
		old, new vm
		refused  bool
	}{
		{"a growth", vm{"1G", nil, nil}, vm{"2G", nil, nil}, false},
		{"the same", vm{"2G", "1G", "1G"}, vm{"2G", "1G", "1G"}, false},
		{"a shrink, no size recorded", vm{"2G", nil, nil}, vm{"1G", nil, nil}, true},
		{"back to the disk's size after a growth that did not happen", vm{"2G", "1G", "1G"}, vm{"1G", "1G", "1G"}, false},
		{"between the disk's size and the size before", vm{"2G", "1G", "1G"}, vm{"1500M", "1G", "1G"}, false},
		{"the disk's size in other units", vm{"2Gi", "1Gi", "1Gi"}, vm{"1073741824", "1Gi", "1Gi"}, false},
		{"an integer back to the disk's size", vm{int64(2000000000), int64(1000000000), int64(1000000000)}, vm{int64(1000000000), int64(1000000000), int64(1000000000)}, false},
		{"below the disk's size and the size before", vm{"2G", "1G", "1G"}, vm{"500M", "1G", "1G"}, true},
		{"below a disk larger than the size before", vm{"1G", "2G", "2G"}, vm{"500M", "2G", "2G"}, true},
		{"a capacity that is no quantity", vm{"2G", "lots", nil}, vm{"1G", "lots", nil}, true},
		// Storage that rounds a disk up: 1G asked, 1Gi made. A growth to 2G the class cannot
		// make is taken back to the claim's own 1G, below the disk's size.
		{"back to the request of a disk rounded up", vm{"2G", "1Gi", "1G"}, vm{"1G", "1Gi", "1G"}, false},
		{"to the size of a disk rounded up", vm{"2G", "1Gi", "1G"}, vm{"1Gi", "1Gi", "1G"}, false},
		{"below the request of a disk rounded up", vm{"2G", "1Gi", "1G"}, vm{"999M", "1Gi", "1G"}, true},
		{"a request not yet bound", vm{"2G", nil, "1G"}, vm{"1G", nil, "1G"}, false},
		{"a request that is no quantity", vm{"2G", "1Gi", "lots"}, vm{"1G", "1Gi", "lots"}, true},
		// A growth asked of the claim and not made (the storage refused it): the claim asks
		// for more than the disk has, and rootDisk goes no lower than the disk's size.
		{"below the size of a disk whose claim asks for more", vm{"2G", "1G", "2G"}, vm{"1G", "1G", "2G"}, false},
		{"below a disk whose claim asks for more", vm{"2G", "1G", "2G"}, vm{"500M", "1G", "2G"}, true},
		// An earlier release's status, without the request: as before.
		{"below a disk rounded up, no request recorded", vm{"2G", "1Gi", nil}, vm{"1G", "1Gi", nil}, true},
		{"to the size of a disk rounded up, no request recorded", vm{"2G", "1Gi", nil}, vm{"1Gi", "1Gi", nil}, false},
	}
	for _, version := range schema.BuiltinVersions() {
		f, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: version})
		if err != nil {
			t.Fatal(err)
		}
		validator, s := celValidator(t, crd, version)
		object := func(v vm) map[string]any {
			u := map[string]any{"apiVersion": schema.Group + "/" + version, "kind": "VirtualMachine",
				"metadata": map[string]any{"name": "vm", "namespace": "ns"}}
			if err := unstructured.SetNestedField(u, v.rootDisk, strings.Split(f.RootDisk, ".")...); err != nil {
				t.Fatal(err)
			}
			if v.capacity != nil || v.request != nil {
				disk := map[string]any{"claimName": "vm-rootdisk", "phase": "Pending"}
				if v.capacity != nil {
					disk["phase"], disk["capacity"] = "Bound", v.capacity
				}
				if v.request != nil {
					disk["request"] = v.request
				}
				u["status"] = map[string]any{"rootDisk": disk}
			}
			return u
		}
		for _, tc := range tests {
			errs, _ := validator.Validate(context.Background(), nil, s, object(tc.new), object(tc.old), celconfig.RuntimeCELCostBudget)
			switch {
			case tc.refused && len(errs) == 0:
				t.Errorf("%s, %s: %v to %v accepted, want it refused", version, tc.name, tc.old, tc.new)
			case tc.refused && !strings.Contains(errs.ToAggregate().Error(), f.RootDisk+": Invalid value"):
				t.Errorf("%s, %s: refused as %v, want it refused at %s", version, tc.name, errs.ToAggregate(), f.RootDisk)
			case !tc.refused && len(errs) > 0:
				t.Errorf("%s, %s: %v to %v refused: %v", version, tc.name, tc.old, tc.new, errs.ToAggregate())
			}
		}
		// A create has no size before it: nothing to shrink from.
		if errs, _ := validator.Validate(context.Background(), nil, s, object(vm{"1G", nil, nil}), nil, celconfig.RuntimeCELCostBudget); len(errs) > 0 {
			t.Errorf("%s: a create refused: %v", version, errs.ToAggregate())
		}
	}
}

// TestRootDiskShrinkMessage: a refused rootDisk says what is allowed, the lowest size it takes.
func TestRootDiskShrinkMessage(t *testing.T) {
	crd := webhookCRDForTest(t)
	validator, s := celValidator(t, crd, "v1alpha1")
	vm := func(rootDisk string, capacity, request any) map[string]any {
		u := map[string]any{"apiVersion": "cloudnative.czs/v1alpha1", "kind": "VirtualMachine", "metadata": map[string]any{"name": "vm"},
			"spec": map[string]any{"resource": map[string]any{"rootDisk": rootDisk}}}
		disk := map[string]any{}
		if capacity != nil {
			disk["capacity"] = capacity
		}
		if request != nil {
			disk["request"] = request
		}
		if len(disk) > 0 {
			u["status"] = map[string]any{"rootDisk": disk}
		}
		return u
	}
	for _, tc := range []struct {
		old, new map[string]any
		want     string
	}{
		{vm("2G", "1G", nil), vm("500M", "1G", nil), `spec.resource.rootDisk: Invalid value: rootDisk cannot shrink below 1G, the disk's size (status.rootDisk.capacity): give 1G or more; the disk keeps its data and never shrinks`},
		{vm("2G", nil, nil), vm("1G", nil, nil), `spec.resource.rootDisk: Invalid value: rootDisk cannot shrink below 2G, the size asked before (status.rootDisk records no smaller disk): give 2G or more; the disk keeps its data and never shrinks`},
		{vm("2G", "1Gi", "1G"), vm("500M", "1Gi", "1G"), `spec.resource.rootDisk: Invalid value: rootDisk cannot shrink below 1G, the size the disk's claim asks for (status.rootDisk.request): give 1G or more; the disk keeps its data and never shrinks`},
		{vm("2G", "1G", "1G"), vm("500M", "1G", "1G"), `spec.resource.rootDisk: Invalid value: rootDisk cannot shrink below 1G, the size the disk's claim asks for (status.rootDisk.request): give 1G or more; the disk keeps its data and never shrinks`},
		{vm("2G", "1G", "2G"), vm("500M", "1G", "2G"), `spec.resource.rootDisk: Invalid value: rootDisk cannot shrink below 1G, the disk's size (status.rootDisk.capacity): give 1G or more; the disk keeps its data and never shrinks`},
		{vm("2G", nil, "1G"), vm("500M", nil, "1G"), `spec.resource.rootDisk: Invalid value: rootDisk cannot shrink below 1G, the size the disk's claim asks for (status.rootDisk.request): give 1G or more; the disk keeps its data and never shrinks`},
	} {
		errs, _ := validator.Validate(context.Background(), nil, s, tc.new, tc.old, celconfig.RuntimeCELCostBudget)
		if got := errs.ToAggregate(); got == nil || got.Error() != tc.want {
			t.Errorf("refusal %v\nwant       %s", got, tc.want)
		}
	}
}

// celValidator is the API server's CEL validator of version's schema, rooted at the resource.
func celValidator(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, version string) (*cel.Validator, *structuralschema.Structural) {
	t.Helper()
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			t.Fatal(err)
		}
		s, err := structuralschema.NewStructural(&internal)
		if err != nil {
			t.Fatal(err)
		}
		validator := cel.NewValidator(s, true, celconfig.PerCallLimit)
		if validator == nil {
			t.Fatalf("%s: no CEL rules in the schema", version)
		}
		return validator, s
	}
	t.Fatalf("the CRD has no version %s", version)
	return nil, nil
}

// TestQuantityExponentBounded: every quantity field of every version's spec refuses, at
// admission, an exponent beyond three digits (the status's are the controller's to write). The
// CRD's CEL rules leave such a value to the pattern (TestQuantityRulesSkipLongExponents), as
// reading or comparing it exactly takes the API server minutes of CPU for one request, so the
// pattern's is the refusal; the controller refuses an exponent beyond 200 either way (schema),
// so nothing a VM can use is lost.
func TestQuantityExponentBounded(t *testing.T) {
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{webhookCRDForTest(t)} {
		for _, v := range crd.Spec.Versions {
			var patterns []string
			var walk func(path string, p apiextensionsv1.JSONSchemaProps)
			walk = func(path string, p apiextensionsv1.JSONSchemaProps) {
				if p.XIntOrString {
					if p.Pattern == "" {
						t.Errorf("%s: %s takes any text", v.Name, path)
					}
					patterns = append(patterns, path+" "+p.Pattern)
				}
				for name, c := range p.Properties {
					walk(path+"."+name, c)
				}
				if p.Items != nil && p.Items.Schema != nil {
					walk(path+"[]", *p.Items.Schema)
				}
			}
			walk("spec", v.Schema.OpenAPIV3Schema.Properties["spec"])
			if len(patterns) < 3 {
				t.Fatalf("%s: %d quantity fields (%v), want cpu, memory and rootDisk at least", v.Name, len(patterns), patterns)
			}
			for _, pp := range patterns {
				path, pattern, _ := strings.Cut(pp, " ")
				re := regexp.MustCompile(pattern)
				for _, ok := range []string{"1", "500m", "1.5Gi", "1e3", "1E-3", "5e+100", "2e200"} {
					if !re.MatchString(ok) {
						t.Errorf("%s %s: %q refused, want it taken", v.Name, path, ok)
					}
				}
				for _, bad := range []string{"1e99999999", "1e-99999999", "1e1000", "1e1.5"} {
					if re.MatchString(bad) {
						t.Errorf("%s %s: %q taken, want it refused at admission", v.Name, path, bad)
					}
				}
			}
		}
	}
}
