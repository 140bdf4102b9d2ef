package main

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// versionedPatch is the strategic merge patch that turns old into cur, on the condition of
// resourceVersion: the API server refuses it (Conflict) if the object has changed since the
// step was decided on it, and the step is decided again. old and cur are objects of one type
// that hold only the part a step writes (a status, a volume's capacity).
func versionedPatch[T any](old, cur T, resourceVersion string) ([]byte, error) {
	o, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	c, err := json.Marshal(cur)
	if err != nil {
		return nil, err
	}
	var schema T
	patch, err := strategicpatch.CreateTwoWayMergePatch(o, c, schema)
	if err != nil {
		return nil, fmt.Errorf("diff %T: %w", schema, err)
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	m["metadata"] = map[string]any{"resourceVersion": resourceVersion}
	return json.Marshal(m)
}
