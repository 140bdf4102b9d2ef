package schema

import (
	"encoding/json"
	"fmt"
)

// SampleSpec is what Sample puts in a VM's spec: the values a typical VM asks for.
type SampleSpec struct {
	CPU, Memory, RootDisk, Image string
}

// Sample renders a whole VM of layout f (apiVersion, kind, the metadata a cache keeps, the
// spec, and st as the controller writes it) as compact JSON.
//
// It is what a cache compresses VMs against: a VM repeats its layout's keys and most of its
// values (apiVersion, the finalizer, the phases, reasons and condition types), so a sample
// of that layout as a dictionary leaves little more than each VM's names, UIDs and times to
// store. The names and times in a sample are placeholders; nothing reads a sample as a VM.
func Sample(f Fields, apiVersion, kind string, spec SampleSpec, st Status) ([]byte, error) {
	root := map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata": map[string]any{
			"name": "vm-00000", "namespace": "default", "uid": "00000000-0000-0000-0000-000000000000",
			"generation": 1, "finalizers": []string{Finalizer},
		},
	}
	for _, e := range []struct{ path, v string }{
		{f.Action, f.activeValue()}, {f.CPU, spec.CPU}, {f.Memory, spec.Memory},
		{f.RootDisk, spec.RootDisk}, {f.Image, spec.Image},
	} {
		if e.path == "" || e.v == "" {
			continue
		}
		if err := setPath(root, e.path, e.v); err != nil {
			return nil, fmt.Errorf("sample spec: %w", err)
		}
	}
	patch, err := StatusPatch(f, st, "")
	if err != nil {
		return nil, fmt.Errorf("sample status: %w", err)
	}
	var status map[string]any
	if err := json.Unmarshal(patch, &status); err != nil {
		return nil, fmt.Errorf("sample status: %w", err)
	}
	merge(root, status)
	return json.Marshal(root)
}

// merge sets every leaf of src in dst, keeping what dst holds beside it; a null in src (a
// field StatusPatch clears) sets nothing. It walks src's tree because the paths are not known
// here, only the patch StatusPatch rendered; unstructured.SetNestedField sets one known path.
func merge(dst, src map[string]any) {
	for k, v := range src {
		switch v := v.(type) {
		case nil:
		case map[string]any:
			child, ok := dst[k].(map[string]any)
			if !ok {
				child = map[string]any{}
				dst[k] = child
			}
			merge(child, v)
		default:
			dst[k] = v
		}
	}
}
