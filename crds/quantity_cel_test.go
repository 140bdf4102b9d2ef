package crds

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"

	"github.com/cloudnative-czs/vm-controller/schema"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// quantityVM is a VM of version whose spec is valid but for the quantity of key (cpu, memory or
// rootDisk), which is value, as the API server decodes it from JSON (a number is an int64).
func quantityVM(t *testing.T, f schema.Fields, version, key string, value any) map[string]any {
	t.Helper()
	u := map[string]any{"apiVersion": schema.Group + "/" + version, "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm", "namespace": "ns"}}
	active := f.ActiveValue
	if active == "" {
		active = "active"
	}
	if err := unstructured.SetNestedField(u, active, strings.Split(f.Action, ".")...); err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{"cpu": f.CPU, "memory": f.Memory, "rootDisk": f.RootDisk}
	values := map[string]any{"cpu": int64(1), "memory": "1Gi", "rootDisk": "1Gi", key: value}
	for k, path := range paths {
		if err := unstructured.SetNestedField(u, values[k], strings.Split(path, ".")...); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

// controllerSpecErrors is what the controller's own check (schema's Spec) says of the VM.
func controllerSpecErrors(t *testing.T, f schema.Fields, vm map[string]any) field.ErrorList {
	t.Helper()
	raw, err := json.Marshal(vm)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := schema.Parse(raw, f)
	if err != nil {
		t.Fatal(err)
	}
	_, errs := parsed.Spec()
	return errs
}

// TestQuantityMinimumRule: the CEL rules on cpu, memory and rootDisk refuse on create, in every
// version, what the controller refuses for its sign or least value: a zero or a negative
// number (which the pattern, checking strings only, lets through), a cpu below 1m, memory
// below 1Mi (a number without a unit is bytes: up to 65536 the refusal says what was probably
// meant, in MiB, and beyond it the least in bytes), a rootDisk below one byte. Each refusal is
// the controller's own, field and words, so that a user reads the same whether the CRD or the
// controller says it. What the controller refuses for other reasons (a fraction of a byte, an
// exponent beyond 200) is left to it.
func TestQuantityMinimumRule(t *testing.T) {
	crd := webhookCRDForTest(t)
	tests := []struct {
		key   string
		value any
		want  string // the refusal's detail; empty: accepted
	}{
		{"cpu", int64(-1), "must be greater than zero"},
		{"cpu", int64(0), "must be greater than zero"},
		{"cpu", "0", "must be greater than zero"},
		{"cpu", "0m", "must be greater than zero"},
		{"cpu", "+0.0", "must be greater than zero"},
		{"cpu", "0.5m", "must be at least 1m"},
		{"cpu", ".0001", "must be at least 1m"},
		{"cpu", "1e-4", "must be at least 1m"},
		{"cpu", "1m", ""},
		{"cpu", "0.001", ""},
		{"cpu", int64(1), ""},
		{"cpu", "64", ""},
		{"memory", int64(-5), "must be greater than zero"},
		{"memory", int64(0), "must be greater than zero"},
		{"memory", "0", "must be greater than zero"},
		{"memory", "0Gi", "must be greater than zero"},
		{"memory", int64(512), "must be at least 1Mi; 512 is 512 bytes: did you mean 512Mi?"},
		{"memory", "512", "must be at least 1Mi; 512 is 512 bytes: did you mean 512Mi?"},
		{"memory", int64(65536), "must be at least 1Mi; 65536 is 65536 bytes: did you mean 65536Mi?"},
		{"memory", "065536", "must be at least 1Mi; 065536 is 065536 bytes: did you mean 065536Mi?"},
		{"memory", int64(65537), "must be at least 1Mi (1048576 bytes); 65537 is 65537 bytes"},
		{"memory", "65537", "must be at least 1Mi (1048576 bytes); 65537 is 65537 bytes"},
		{"memory", int64(1048575), "must be at least 1Mi (1048576 bytes); 1048575 is 1048575 bytes"},
		{"memory", "1M", "must be at least 1Mi"},
		{"memory", "1023Ki", "must be at least 1Mi"},
		{"memory", "1.5", "must be at least 1Mi"},
		{"memory", int64(1048576), ""},
		{"memory", "1Mi", ""},
		{"memory", "16Mi", ""},
		{"memory", "4G", ""},
		{"rootDisk", int64(-5), "must be greater than zero"},
		{"rootDisk", int64(0), "must be greater than zero"},
		{"rootDisk", "0", "must be greater than zero"},
		{"rootDisk", "0.5", "must be at least 1"},
		{"rootDisk", "500m", "must be at least 1"},
		{"rootDisk", int64(1), ""},
		{"rootDisk", "40G", ""},
		// Refused by the controller for other reasons than its least value: left to it.
		{"rootDisk", "1.5", ""},
		{"cpu", "1e300", ""},
		{"memory", "1e-300Mi", ""},
	}
	for _, version := range schema.BuiltinVersions() {
		f := builtin(t, version)
		validator, s := celValidator(t, crd, version)
		for _, tc := range tests {
			vm := quantityVM(t, f, version, tc.key, tc.value)
			errs, _ := validator.Validate(context.Background(), nil, s, vm, nil, celconfig.RuntimeCELCostBudget)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Errorf("%s %s %#v: refused: %v", version, tc.key, tc.value, errs.ToAggregate())
				}
				continue
			}
			path := map[string]string{"cpu": f.CPU, "memory": f.Memory, "rootDisk": f.RootDisk}[tc.key]
			if len(errs) != 1 || errs[0].Field != path || errs[0].Detail != tc.want {
				t.Errorf("%s %s %#v: refused as %v, want one refusal at %s: %s", version, tc.key, tc.value, errs.ToAggregate(), path, tc.want)
				continue
			}
			// The controller's words, at the same field.
			ctl := controllerSpecErrors(t, f, vm)
			if len(ctl) != 1 || ctl[0].Field != errs[0].Field || ctl[0].Detail != errs[0].Detail {
				t.Errorf("%s %s %#v: the CRD says %v, the controller %v: want the same", version, tc.key, tc.value, errs.ToAggregate(), ctl.ToAggregate())
			}
		}
	}
}

// TestQuantityRulesSkipLongExponents: a quantity with an exponent of four digits or more, which
// the pattern refuses, is left to it by every CEL rule on a quantity, on create and on update
// (rootDisk's shrink rule), in every version, before the rule reads it as a quantity. The API
// server evaluates the rules whatever the pattern says, and reading 1e-99999999 as a quantity
// takes it most of a minute of CPU, comparing 1e99999999 with another quantity longer still:
// without the rules' look at the exponent first, this test runs into go test's timeout. A
// stored size of an earlier release, whose pattern took any exponent, is left alone too.
func TestQuantityRulesSkipLongExponents(t *testing.T) {
	crd := webhookCRDForTest(t)
	for _, version := range schema.BuiltinVersions() {
		f := builtin(t, version)
		validator, s := celValidator(t, crd, version)
		for _, key := range []string{"cpu", "memory", "rootDisk"} {
			for _, v := range []string{"1e99999999", "1e-99999999", "1E1000", "5e+0000001", "1.5e-12345"} {
				vm := quantityVM(t, f, version, key, v)
				if errs, _ := validator.Validate(context.Background(), nil, s, vm, nil, celconfig.RuntimeCELCostBudget); len(errs) > 0 {
					t.Errorf("%s %s %q on create: refused by a CEL rule, want it left to the pattern: %v", version, key, v, errs.ToAggregate())
				}
			}
		}
		for _, sizes := range [][2]string{{"1G", "1e99999999"}, {"1e99999999", "1G"}, {"2G", "1e-99999999"}} {
			old, now := quantityVM(t, f, version, "rootDisk", sizes[0]), quantityVM(t, f, version, "rootDisk", sizes[1])
			if errs, _ := validator.Validate(context.Background(), nil, s, now, old, celconfig.RuntimeCELCostBudget); len(errs) > 0 {
				t.Errorf("%s rootDisk %s to %s: refused by a CEL rule, want it left to the pattern: %v", version, sizes[0], sizes[1], errs.ToAggregate())
			}
		}
	}
}

// TestQuantityMinimumRatchets: a VM stored before the least-value rules (memory 0, created
// under an earlier release's CRD) is not locked by them once the CRD is upgraded: an update
// that leaves the quantity as it is passes (the controller's finalizer removed, a status
// written, a label), as the API server ratchets a rule on an unchanged value (Kubernetes 1.30
// on; always since 1.33). A change of the quantity is judged: to another bad value, refused.
func TestQuantityMinimumRatchets(t *testing.T) {
	crd := webhookCRDForTest(t)
	for _, version := range schema.BuiltinVersions() {
		f := builtin(t, version)
		validator, s := celValidator(t, crd, version)
		update := func(now, old map[string]any) field.ErrorList {
			correlated := common.NewCorrelatedObject(now, old, &model.Structural{Structural: s})
			errs, _ := validator.Validate(context.Background(), nil, s, now, old, celconfig.RuntimeCELCostBudget, cel.WithRatcheting(correlated))
			return errs
		}
		old := quantityVM(t, f, version, "memory", int64(0))
		old["metadata"].(map[string]any)["finalizers"] = []any{"cloudnative.czs/server"}
		for name, change := range map[string]func(vm map[string]any){
			"finalizer removed": func(vm map[string]any) { delete(vm["metadata"].(map[string]any), "finalizers") },
			"status written":    func(vm map[string]any) { vm["status"] = map[string]any{"phase": "Failed", "reason": "InvalidSpec"} },
			"label added":       func(vm map[string]any) { vm["metadata"].(map[string]any)["labels"] = map[string]any{"a": "b"} },
			"cpu changed":       func(vm map[string]any) { _ = unstructured.SetNestedField(vm, int64(2), strings.Split(f.CPU, ".")...) },
		} {
			now := quantityVM(t, f, version, "memory", int64(0))
			now["metadata"].(map[string]any)["finalizers"] = []any{"cloudnative.czs/server"}
			change(now)
			if errs := update(now, old); len(errs) > 0 {
				t.Errorf("%s, memory 0 stored, %s: refused: %v", version, name, errs.ToAggregate())
			}
		}
		if errs := update(quantityVM(t, f, version, "memory", int64(512)), old); len(errs) != 1 || errs[0].Field != f.Memory {
			t.Errorf("%s, memory 0 stored, changed to 512: %v, want it refused at %s", version, errs.ToAggregate(), f.Memory)
		}
	}
}
