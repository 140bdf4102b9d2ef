package schema

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestPaused: only the value "true" pauses.
func TestPaused(t *testing.T) {
	tests := map[string]bool{`{"` + AnnotationPaused + `":"true"}`: true, `{"` + AnnotationPaused + `":"false"}`: false,
		`{"` + AnnotationPaused + `":"yes"}`: false, `{}`: false, `{"cloudnative.czs/other":"true"}`: false}
	for ann, want := range tests {
		raw := fmt.Sprintf(`{"metadata":{"name":"n","annotations":%s}}`, ann)
		vm, err := Parse([]byte(raw), builtin(t, "v1alpha1"))
		if err != nil {
			t.Fatal(err)
		}
		if got := vm.Paused(); got != want {
			t.Errorf("annotations %s: Paused = %t, want %t", ann, got, want)
		}
	}
}

// TestStatusPatchNoPhase: a status with no phase (a VM paused before its first reconcile,
// which gets the Paused condition only) writes the phase as null, not as "", which the
// CRD's enum refuses.
func TestStatusPatchNoPhase(t *testing.T) {
	st := Status{Conditions: []Condition{{Type: ConditionPaused, Status: ConditionTrue, Reason: "Paused", Message: "m",
		LastTransitionTime: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}}
	patch, err := StatusPatch(builtin(t, "v1alpha1"), st, "7")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Status map[string]any `json:"status"`
	}
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	if v, ok := got.Status["phase"]; !ok || v != nil {
		t.Errorf("phase %v (present %t) in %s, want null", v, ok, patch)
	}
}
