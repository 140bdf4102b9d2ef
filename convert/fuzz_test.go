package convert

import (
	"encoding/json"
	"fmt"
	"testing"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// choices hands out the fuzzer's bytes as decisions; when they run out every decision is 0,
// so that each input, however short, makes one object.
type choices struct{ data []byte }

func (c *choices) next(n int) int {
	if len(c.data) == 0 {
		return 0
	}
	b := c.data[0]
	c.data = c.data[1:]
	return int(b) % n
}

func (c *choices) coin() bool { return c.next(2) == 1 }

// word is a string that is often one a map gives meaning to, so that the generated objects
// hit the action's values and the reserved annotations' neighbours as well as noise.
func (c *choices) word() string {
	words := []string{"active", "inactive", "Always", "Halted", "Manual", "RerunOnFailure", "", "2", "4Gi", "40G", "x.y", "é"}
	if i := c.next(len(words) + 1); i < len(words) {
		return words[i]
	}
	return fmt.Sprintf("w%d", c.next(256))
}

// value is any JSON value, nested at most depth deep.
func (c *choices) value(depth int) any {
	kinds := 6
	if depth <= 0 {
		kinds = 4
	}
	switch c.next(kinds) {
	case 0:
		return c.word()
	case 1:
		return json.Number(fmt.Sprint(c.next(256) - 10))
	case 2:
		return nil
	case 3:
		return c.coin()
	case 4:
		n := c.next(3)
		out := make([]any, n)
		for i := range out {
			out[i] = c.value(depth - 1)
		}
		return out
	default:
		return c.object(depth - 1)
	}
}

// object is a JSON object of up to three keys, which are often keys that the maps use.
func (c *choices) object(depth int) map[string]any {
	keys := []string{"spec", "status", "resource", "resources", "requests", "limits", "cpu", "memory", "rootDisk", "size",
		"action", "runStrategy", "image", "server", "usage", "phase", "conditions", "extra"}
	out := map[string]any{}
	for range c.next(4) {
		out[keys[c.next(len(keys))]] = c.value(depth)
	}
	return out
}

// vm makes a VirtualMachine of apiVersion gv in layout f: each field of the layout present or
// not, with a value that is often the right kind and sometimes not, and noise anywhere.
func (c *choices) vm(gv k8sschema.GroupVersion, f schema.Fields) []byte {
	obj := c.object(3)
	for k := range obj {
		if k == "metadata" || k == "apiVersion" || k == "kind" {
			delete(obj, k)
		}
	}
	active, inactive := f.ActionValues()
	for _, p := range f.Paths() {
		if p.Path == "" || !c.coin() {
			continue
		}
		var v any
		switch {
		case p.Key == schema.ActionKey && c.next(4) > 0:
			v = []string{active, inactive, "Manual"}[c.next(3)]
		default:
			v = c.value(2)
		}
		_ = set(obj, p.Path, v) // a noise scalar on the way wins; fine, that is an object too
	}
	obj["apiVersion"] = gv.String()
	if c.next(8) > 0 {
		obj["kind"] = "VirtualMachine"
	}
	{
		// Every object the API server holds has metadata with a name.
		md := map[string]any{"name": c.word(), "uid": "u"}
		// The API server never stores an empty map of annotations. The reserved ones are the
		// conversion's, and one of the object's own version that it can read is replaced (see
		// the package comment); a word is never a JSON object, so those here are the ones it
		// cannot read, a hand edit's, which it keeps, the object's own as well as another's.
		if n := c.next(3); n > 0 {
			a := map[string]any{}
			keys := []string{"note", "cloudnative.czs/other", "x.io/v1-fields",
				FieldsAnnotation(v1alpha1), FieldsAnnotation(v1beta1), FieldsAnnotation(v1)}
			for range n {
				a[keys[c.next(len(keys))]] = c.word()
			}
			md["annotations"] = a
		}
		obj["metadata"] = md
	}
	data, err := encode(obj)
	if err != nil {
		panic(err)
	}
	return data
}

// roundTrip checks that an object of version a converted to b and back is what it was, and
// that the object in b, converted to a and back, is itself again: both are the states the
// API server holds.
func roundTrip(t *testing.T, data []byte, a, b k8sschema.GroupVersion) {
	c := builtin(t)
	fa, err := schema.ForVersion(a)
	if err != nil {
		t.Fatal(err)
	}
	obj := (&choices{data}).vm(a, fa)
	mid, _, err := c.Convert(obj, b)
	if err != nil {
		t.Fatalf("convert %s to %s: %v", obj, b, err)
	}
	back, _, err := c.Convert(mid, a)
	if err != nil {
		t.Fatalf("convert %s to %s: %v", mid, a, err)
	}
	if !sameJSON(t, back, obj) {
		t.Fatalf("round trip %s -> %s -> %s changed the object:\nin:   %s\nmid:  %s\nback: %s", a, b, a, obj, mid, back)
	}
	again, _, err := c.Convert(back, b)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, again, mid) {
		t.Fatalf("converting the round trip's result again differs:\nfirst:  %s\nsecond: %s", mid, again)
	}
}

var seeds = [][]byte{
	nil,
	{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
	{3, 0, 5, 2, 1, 1, 3, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 1, 5, 5, 5},
	[]byte("a seed of letters that reads as many different decisions, one byte each, for a long object"),
	{0, 2, 5, 1, 4, 3, 0, 1, 9, 1, 1, 2, 1, 3, 1, 0, 1, 1, 1, 2, 1, 1, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},
}

var (
	v1alpha1 = k8sschema.GroupVersion{Group: schema.Group, Version: "v1alpha1"}
	v1beta1  = k8sschema.GroupVersion{Group: schema.Group, Version: "v1beta1"}
	v1       = k8sschema.GroupVersion{Group: schema.Group, Version: "v1"}
)

// FuzzV1alpha1RoundTrip: v1alpha1 -> v1 -> v1alpha1 gives back any v1alpha1 object.
// go test ./convert -fuzz FuzzV1alpha1RoundTrip explores; plain go test runs the seeds.
func FuzzV1alpha1RoundTrip(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { roundTrip(t, data, v1alpha1, v1) })
}

// FuzzV1RoundTrip: v1 -> v1alpha1 -> v1 gives back any v1 object.
func FuzzV1RoundTrip(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { roundTrip(t, data, v1, v1alpha1) })
}

// FuzzV1beta1RoundTrip: between the two versions of one layout, both ways.
func FuzzV1beta1RoundTrip(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip(t, data, v1beta1, v1)
		roundTrip(t, data, v1alpha1, v1beta1)
	})
}
