package vmcache

import (
	"encoding/json"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// OnlyUsageChanged reports whether two versions of a cached VM differ in nothing a decision
// reads but the reported usage (and its condition). The VM informer drops such updates, so
// that the usage poller's own writes do not make the controller reconcile the VM again: usage
// reporting has no feedback loop.
func OnlyUsageChanged(old, cur *Object, f schema.Fields) bool {
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
// condition. Field-map paths are dotted paths, as schema reads them.
func withoutUsage(o *Object, f schema.Fields) (map[string]any, error) {
	raw, err := o.JSON()
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	for _, p := range []string{f.UsageCPU, f.UsageMemory} {
		if p != "" {
			removePruning(obj, strings.Split(p, "."))
		}
	}
	if f.Conditions != "" {
		path := strings.Split(f.Conditions, ".")
		if list, found, _ := unstructured.NestedSlice(obj, path...); found {
			kept := list[:0]
			for _, c := range list {
				if m, ok := c.(map[string]any); ok && m["type"] == schema.ConditionUsageReported {
					continue
				}
				kept = append(kept, c)
			}
			_ = unstructured.SetNestedSlice(obj, kept, path...)
		}
	}
	return obj, nil
}
