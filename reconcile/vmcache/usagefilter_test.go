package vmcache

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
)

func cachedObj(t *testing.T, y string) *Object {
	t.Helper()
	// Through JSON, as objects reach the cache: integers stay integers.
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(j); err != nil {
		t.Fatal(err)
	}
	o, err := Compact(u, decidecase.Fields(t))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestOnlyUsageChanged: the controller's usage writes must not look like a change worth a
// reconcile, and every other change must.
func TestOnlyUsageChanged(t *testing.T) {
	base := `
apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: a, uid: u1, generation: 1, finalizers: [x]}
spec: {action: active}
status:
  phase: Active
  server: {name: a-server, id: p1, state: Running}
  conditions:
  - {type: Ready, status: "True", reason: ServerReady, message: ok, lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 1}
`
	withUsage := `
apiVersion: cloudnative.czs/v1alpha1
kind: VirtualMachine
metadata: {name: a, uid: u1, generation: 1, finalizers: [x]}
spec: {action: active}
status:
  phase: Active
  server: {name: a-server, id: p1, state: Running, usage: {cpu: 250m, memory: 100Mi}}
  conditions:
  - {type: Ready, status: "True", reason: ServerReady, message: ok, lastTransitionTime: "2026-01-01T00:00:00Z", observedGeneration: 1}
  - {type: UsageReported, status: "True", reason: UsageReported, message: m, lastTransitionTime: "2026-01-01T00:01:00Z", observedGeneration: 1}
`
	tests := map[string]struct {
		old, cur string
		want     bool
	}{
		"first usage with its condition": {base, withUsage, true},
		"usage moved":                    {withUsage, replace(withUsage, "cpu: 250m", "cpu: 500m"), true},
		"phase changed":                  {base, replace(base, "phase: Active", "phase: Creating"), false},
		"ready condition changed":        {withUsage, replace(withUsage, `status: "True", reason: ServerReady`, `status: "False", reason: ServerReady`), false},
		"spec changed":                   {base, replace(base, "generation: 1,", "generation: 2,"), false},
		"finalizer removed":              {base, replace(base, "finalizers: [x]", "finalizers: []"), false},
		"deletion requested":             {base, replace(base, "generation: 1,", `generation: 1, deletionTimestamp: "2026-01-01T00:00:00Z",`), false},
		"server replaced":                {withUsage, replace(withUsage, "id: p1", "id: p2"), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := OnlyUsageChanged(cachedObj(t, tc.old), cachedObj(t, tc.cur), decidecase.Fields(t)); got != tc.want {
				t.Errorf("OnlyUsageChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

func replace(s, old, new string) string {
	out := ""
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	return out + s
}
