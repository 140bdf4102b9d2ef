package vmcache

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestAnswer: the answer to a write of every golden VM reads into the JSON a view reads, as the
// dynamic client's answer does through CompactJSON, with its resourceVersion; an answer that
// is not a VM's JSON object is an error.
func TestAnswer(t *testing.T) {
	for name, raw := range goldenVMs(t) {
		got, rv, err := Answer(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		want, err := CompactJSON(u)
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) || rv != u.GetResourceVersion() {
			t.Errorf("%s: answer read as %s at %q, want %s at %q", name, got, rv, want, u.GetResourceVersion())
		}
	}
	for _, bad := range []string{`{"metadata":`, `[1]`, `{"metadata":{"resourceVersion":7}}`} {
		if _, _, err := Answer([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
