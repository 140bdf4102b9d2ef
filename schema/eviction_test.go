package schema

import (
	"fmt"
	"testing"
)

// TestEvictionStrategy: each strategy is read in every built-in version; absent and null
// leave it to the controller's default; anything else is refused with the field's path.
func TestEvictionStrategy(t *testing.T) {
	tests := map[string]struct {
		value string // JSON of spec.evictionStrategy; "" leaves it out
		want  EvictionStrategy
		err   string // the field error, "" for none
	}{
		"absent":  {"", "", ""},
		"null":    {`null`, "", ""},
		"None":    {`"None"`, EvictionNone, ""},
		"Replace": {`"Replace"`, EvictionReplace, ""},
		"Block":   {`"Block"`, EvictionBlock, ""},
		"unknown": {`"LiveMigrate"`, "", `spec.evictionStrategy: Unsupported value: "LiveMigrate": supported values: "None", "Replace", "Block"`},
		"case":    {`"block"`, "", `spec.evictionStrategy: Unsupported value: "block": supported values: "None", "Replace", "Block"`},
		"number":  {`1`, "", `spec.evictionStrategy: Invalid value: "1": must be a string`},
	}
	specs := map[string]string{
		"v1alpha1": `{"action":"active","resource":{"cpu":1,"memory":"1Gi","rootDisk":"1Gi"}%s}`,
		"v1beta1":  `{"action":"active","resource":{"cpu":1,"memory":"1Gi","rootDisk":"1Gi"}%s}`,
		"v1":       `{"runStrategy":"Always","resources":{"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"1Gi"}%s}`,
	}
	for version, spec := range specs {
		for name, tc := range tests {
			t.Run(version+"/"+name, func(t *testing.T) {
				extra := ""
				if tc.value != "" {
					extra = `,"evictionStrategy":` + tc.value
				}
				vm, err := Parse([]byte(`{"spec":`+fmt.Sprintf(spec, extra)+`}`), builtin(t, version))
				if err != nil {
					t.Fatal(err)
				}
				s, errs := vm.Spec()
				got := ""
				if len(errs) > 0 {
					got = errs.ToAggregate().Error()
				}
				if got != tc.err || s.EvictionStrategy != tc.want {
					t.Errorf("got %q, errors %q; want %q, errors %q", s.EvictionStrategy, got, tc.want, tc.err)
				}
			})
		}
	}
}

// TestEvictionStrategyWithoutField: a layout without the field reads no strategy, whatever
// the object holds, so the controller's default applies.
func TestEvictionStrategyWithoutField(t *testing.T) {
	f := builtin(t, "v1alpha1")
	f.EvictionStrategy = ""
	vm, err := Parse([]byte(`{"spec":{"action":"active","resource":{"cpu":1,"memory":"1Gi","rootDisk":"1Gi"},"evictionStrategy":"bogus"}}`), f)
	if err != nil {
		t.Fatal(err)
	}
	if s, errs := vm.Spec(); len(errs) > 0 || s.EvictionStrategy != "" {
		t.Errorf("got %q, %v", s.EvictionStrategy, errs)
	}
}
