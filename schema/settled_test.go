package schema

import (
	"fmt"
	"testing"
)

// TestSettled: a VM is settled when its status describes it as it is; each way it can not
// be is one row.
func TestSettled(t *testing.T) {
	tests := map[string]struct {
		meta, status string
		want         bool
	}{
		"up to date":            {`"generation":2`, `"phase":"Active","observedGeneration":2`, true},
		"no status":             {`"generation":1`, ``, false},
		"no phase":              {`"generation":1`, `"observedGeneration":1`, false},
		"spec changed":          {`"generation":3`, `"phase":"Active","observedGeneration":2`, false},
		"being deleted":         {`"generation":2,"deletionTimestamp":"2026-01-01T00:00:00Z"`, `"phase":"Active","observedGeneration":2`, false},
		"restart asked for":     {`"generation":2,"annotations":{"` + AnnotationRestartedAt + `":"t1"}`, `"phase":"Active","observedGeneration":2`, false},
		"restart done":          {`"generation":2,"annotations":{"` + AnnotationRestartedAt + `":"t1"}`, `"phase":"Active","observedGeneration":2,"restartedAt":"t1"`, true},
		"another restart asked": {`"generation":2,"annotations":{"` + AnnotationRestartedAt + `":"t2"}`, `"phase":"Active","observedGeneration":2,"restartedAt":"t1"`, false},
		"Failed, up to date":    {`"generation":2`, `"phase":"Failed","observedGeneration":2`, true},
		"start asked for":       {`"generation":2,"annotations":{"` + AnnotationStartRequestedAt + `":"t1"}`, `"phase":"Inactive","observedGeneration":2`, false},
		"start done":            {`"generation":2,"annotations":{"` + AnnotationStartRequestedAt + `":"t1"}`, `"phase":"Active","observedGeneration":2,"startRequestedAt":"t1"`, true},
		"stop asked for":        {`"generation":2,"annotations":{"` + AnnotationStopRequestedAt + `":"t2"}`, `"phase":"Active","observedGeneration":2,"stopRequestedAt":"t1"`, false},
		"stop done":             {`"generation":2,"annotations":{"` + AnnotationStopRequestedAt + `":"t2"}`, `"phase":"Inactive","observedGeneration":2,"stopRequestedAt":"t2"`, true},
		"migration asked for":   {`"generation":2,"annotations":{"` + AnnotationMigrateRequestedAt + `":"t1"}`, `"phase":"Active","observedGeneration":2`, false},
		"migration recorded":    {`"generation":2,"annotations":{"` + AnnotationMigrateRequestedAt + `":"t1"}`, `"phase":"Active","observedGeneration":2,"migration":{"requestedAt":"t1","phase":"Refused"}`, true},
		"another migration":     {`"generation":2,"annotations":{"` + AnnotationMigrateRequestedAt + `":"t2"}`, `"phase":"Active","observedGeneration":2,"migration":{"requestedAt":"t1","phase":"Succeeded"}`, false},
	}
	f := builtin(t, "v1alpha1")
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			raw := fmt.Sprintf(`{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"n",%s},"spec":{},"status":{%s}}`, tc.meta, tc.status)
			vm, err := Parse([]byte(raw), f)
			if err != nil {
				t.Fatal(err)
			}
			if got := vm.Settled(); got != tc.want {
				t.Errorf("Settled = %t, want %t: %s", got, tc.want, raw)
			}
		})
	}
}

// TestCommonParent: the status fields' common parent, which Settled reads once; layouts whose
// fields share none are read field by field.
func TestCommonParent(t *testing.T) {
	tests := []struct {
		paths []string
		want  string
	}{
		{[]string{"status.phase", "status.observedGeneration", "status.restartedAt"}, "status"},
		{[]string{"status.phase", "status.observedGeneration", ""}, "status"},
		{[]string{"status.a.phase", "status.a.gen", "status.b.x"}, "status"},
		{[]string{"status.a.phase", "status.a.gen"}, "status.a"},
		{[]string{"status.phase", "state.gen"}, ""},
		{[]string{"phase", "status.gen"}, ""},
		{[]string{"", ""}, ""},
	}
	for _, tc := range tests {
		if got := commonParent(tc.paths); got != tc.want {
			t.Errorf("commonParent(%q) = %q, want %q", tc.paths, got, tc.want)
		}
	}
}
