package crds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/schema"
)

func crdJSON(t *testing.T, yamlDoc []byte) []byte {
	t.Helper()
	data, err := sigsyaml.YAMLToJSON(yamlDoc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// projectCRD is the CRD with every version (the webhook form: v1 is served only there).
func projectCRD(t *testing.T) []byte {
	t.Helper()
	data, err := WithWebhook(Webhook{Namespace: "vm-controller"})
	if err != nil {
		t.Fatal(err)
	}
	return crdJSON(t, data)
}

// builtin returns the built-in field map of a version of this project's CRD.
func builtin(t *testing.T, version string) schema.Fields {
	t.Helper()
	f, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// machineFields is the field map of the test CRD of another group.
func machineFields(t *testing.T) schema.Fields {
	t.Helper()
	f, err := schema.LoadFieldMap(filepath.Join("..", "testdata", "machines", "fieldmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func machineCRD(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "machines", "crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return crdJSON(t, data)
}

// TestCRDFitsMaps: every built-in map fits the schema of its version in crds/, and the test
// CRD of another group fits its map; this is what the check command verifies on a cluster.
func TestCRDFitsMaps(t *testing.T) {
	crd := projectCRD(t)
	for _, v := range schema.BuiltinVersions() {
		if err := StatusSubresource(crd, v); err != nil {
			t.Error(err)
		}
		n, errs := CheckSchema(crd, v, builtin(t, v))
		if len(errs) > 0 || n != 32 {
			t.Errorf("%s: %d paths checked, errors %v", v, n, errs)
		}
	}
	// One schema for both versions: conversion None rewrites apiVersion alone.
	a := gjson.GetBytes(crd, `spec.versions.#(name=="v1alpha1").schema`).Raw
	b := gjson.GetBytes(crd, `spec.versions.#(name=="v1beta1").schema`).Raw
	if a == "" || a != b {
		t.Errorf("the versions' schemas differ:\n%s\n%s", a, b)
	}

	f := machineFields(t)
	mc := machineCRD(t)
	if err := StatusSubresource(mc, "v1"); err != nil {
		t.Error(err)
	}
	if n, errs := CheckSchema(mc, "v1", f); len(errs) > 0 || n != 17 {
		t.Errorf("machines: %d paths checked, errors %v", n, errs)
	}
	// The Machine map does not fit the VirtualMachine CRD, and the other way round.
	if _, errs := CheckSchema(crd, "v1beta1", f); len(errs) != 17 {
		t.Errorf("machine map on the VM CRD: %d errors, want 17: %v", len(errs), errs)
	}
}

func TestCheckSchemaErrors(t *testing.T) {
	base := string(machineCRD(t))
	f := machineFields(t)
	tests := map[string]struct {
		old, new string // replace old with new in the Machine CRD's JSON
		fields   func(*schema.Fields)
		want     string // the errors, joined by "; "
	}{
		"missing property": {old: `"restarts":{"type":"integer"}`, new: `"restart":{"type":"integer"}`,
			want: `status.consecutiveFailures at status.restarts: the schema has no property "restarts" under status`},
		"missing parent": {fields: func(f *schema.Fields) { f.UsageCPU = "status.instance.usage.cores" },
			want: `status.server.usage.cpu at status.instance.usage.cores: the schema has no property "usage" under status.instance`},
		"through a scalar": {fields: func(f *schema.Fields) { f.Message = "status.state.text" },
			want: `status.message at status.state.text: status.state is of type string in the schema, so it has no field "text"`},
		"wrong type": {old: `"restarts":{"type":"integer"}`, new: `"restarts":{"type":"string"}`,
			want: `status.consecutiveFailures at status.restarts: the schema says string; want integer`},
		"conditions not a list": {old: `"health":{"items"`, new: `"health":{"type":"object","x-items"`,
			want: `status.conditions at status.health: the schema says object; want array of conditions`},
		"quantity a bool": {old: `"cores":{"anyOf":[{"type":"integer"},{"type":"string"}],"x-kubernetes-int-or-string":true}`, new: `"cores":{"type":"boolean"}`,
			want: `spec.resource.cpu at spec.shape.cores: the schema says boolean; want quantity (int-or-string, string or number)`},
		"top-level path": {fields: func(f *schema.Fields) { f.Image = "bootImage" },
			want: `spec.image at bootImage: the schema has no property "bootImage" under the top level`},
		"preserved unknown fields": {old: `"status":{"properties"`, new: `"status":{"x-kubernetes-preserve-unknown-fields":true,"properties"`,
			fields: func(f *schema.Fields) { f.Reason = "status.anything.goes" }},
		"open map": {old: `"status":{"properties"`, new: `"status":{"additionalProperties":{"type":"string"},"properties"`,
			fields: func(f *schema.Fields) { f.Reason = "status.why" }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			crd := base
			if tc.old != "" {
				if !strings.Contains(crd, tc.old) {
					t.Fatalf("%s is not in the CRD", tc.old)
				}
				crd = strings.Replace(crd, tc.old, tc.new, 1)
			}
			fields := f
			if tc.fields != nil {
				tc.fields(&fields)
			}
			_, errs := CheckSchema([]byte(crd), "v1", fields)
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if strings.Join(got, "; ") != tc.want {
				t.Errorf("errors\n%s\nwant\n%s", strings.Join(got, "; "), tc.want)
			}
		})
	}
}

func TestStatusSubresource(t *testing.T) {
	crd := string(machineCRD(t))
	if err := StatusSubresource([]byte(crd), "v2"); err == nil || err.Error() != "CRD machines.compute.example.org has no version v2" {
		t.Errorf("unknown version: %v", err)
	}
	without := strings.Replace(crd, `,"subresources":{"status":{}}`, "", 1)
	if without == crd {
		t.Fatal("no status subresource in the test CRD to remove")
	}
	want := "CRD machines.compute.example.org has no status subresource in version v1 (add subresources: {status: {}})"
	if err := StatusSubresource([]byte(without), "v1"); err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	if err := StatusSubresource([]byte("{"), "v1"); err == nil {
		t.Error("invalid JSON accepted")
	}
}

// TestUnmappedReclaimPolicy: a field map that maps no reclaim policy, for a CRD whose schema
// has one, is an error (a VM's Retain would be accepted and ignored, its disk deleted with
// it); a map that maps it, and a CRD without the field (the machines' CRD), are none.
func TestUnmappedReclaimPolicy(t *testing.T) {
	crd := projectCRD(t)
	full := builtin(t, "v1alpha1")
	if err := UnmappedReclaimPolicy(crd, "v1alpha1", full); err != nil {
		t.Errorf("the built-in map: %v", err)
	}
	without, _ := full.Without(map[string]bool{ReclaimPolicyPath: true})
	if without.RootDiskReclaimPolicy != "" {
		t.Fatal("the map still maps the reclaim policy")
	}
	err := UnmappedReclaimPolicy(crd, "v1alpha1", without)
	if err == nil || !strings.Contains(err.Error(), "rootDiskReclaimPolicy: spec.rootDiskReclaimPolicy") {
		t.Errorf("a map without the policy: %v, want an error that says how to map it", err)
	}
	if err := UnmappedReclaimPolicy(machineCRD(t), "v1", machineFields(t)); err != nil {
		t.Errorf("a CRD without the field: %v", err)
	}
}
