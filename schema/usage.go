package schema

import (
	"encoding/json"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ConditionUsageReported is the condition about usage reporting; OnlyUsageChanged ignores
// it, since it changes together with the usage.
const ConditionUsageReported = "UsageReported"

// UsagePatch renders a usage report as a JSON merge patch for the /status subresource: the
// usage paths (null with u nil), and the conditions when conds is not nil. Only a patch that
// replaces the conditions list carries resourceVersion, so that it cannot undo a concurrent
// change of another condition; a usage-only patch touches nothing else and needs none.
func UsagePatch(f Fields, u *Usage, conds []Condition, resourceVersion string) ([]byte, error) {
	root := map[string]any{}
	var cpu, mem any
	if u != nil {
		cpu, mem = u.CPU, u.Memory
	}
	for _, kv := range []struct {
		path string
		v    any
	}{{f.UsageCPU, cpu}, {f.UsageMemory, mem}} {
		if kv.path == "" {
			continue
		}
		if err := setPath(root, kv.path, kv.v); err != nil {
			return nil, err
		}
	}
	if conds != nil {
		list := make([]map[string]any, 0, len(conds))
		for _, c := range conds {
			list = append(list, conditionJSON(c))
		}
		if err := setPath(root, f.Conditions, list); err != nil {
			return nil, err
		}
		if resourceVersion != "" {
			if err := setPath(root, "metadata.resourceVersion", resourceVersion); err != nil {
				return nil, err
			}
		}
	}
	return json.Marshal(root)
}

func conditionJSON(c Condition) map[string]any {
	m := map[string]any{
		"type": c.Type, "status": string(c.Status), "reason": c.Reason, "message": c.Message,
		"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
	}
	if c.ObservedGeneration != 0 {
		m["observedGeneration"] = c.ObservedGeneration
	}
	return m
}

// OnlyUsageChanged reports whether two versions of a cached VM differ in nothing a decision
// reads but the reported usage (and its condition). The controller's own usage writes then
// do not make it reconcile the VM again: usage reporting has no feedback loop.
func OnlyUsageChanged(old, cur *Object, f Fields) bool {
	if Same(old, cur) {
		return true
	}
	a, errA := withoutUsage(old, f)
	b, errB := withoutUsage(cur, f)
	return errA == nil && errB == nil && reflect.DeepEqual(a, b)
}

// removePruning removes the field at path and then every map on the way that it left empty,
// so that a status with usage and one that never had any compare equal.
func removePruning(m map[string]any, path []string) {
	if len(path) == 1 {
		delete(m, path[0])
		return
	}
	child, ok := m[path[0]].(map[string]any)
	if !ok {
		return
	}
	removePruning(child, path[1:])
	if len(child) == 0 {
		delete(m, path[0])
	}
}

// withoutUsage decodes a cached object without the usage fields and the UsageReported
// condition.
func withoutUsage(o *Object, f Fields) (map[string]any, error) {
	var obj map[string]any
	if err := json.Unmarshal(o.raw, &obj); err != nil {
		return nil, err
	}
	for _, p := range []string{f.UsageCPU, f.UsageMemory} {
		if p != "" {
			removePruning(obj, splitPath(p))
		}
	}
	if f.Conditions != "" {
		path := splitPath(f.Conditions)
		if list, found, _ := unstructured.NestedSlice(obj, path...); found {
			kept := list[:0]
			for _, c := range list {
				if m, ok := c.(map[string]any); ok && m["type"] == ConditionUsageReported {
					continue
				}
				kept = append(kept, c)
			}
			_ = unstructured.SetNestedSlice(obj, kept, path...)
		}
	}
	return obj, nil
}
