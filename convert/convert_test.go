package convert

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/internal/golden"

	"golang.org/x/tools/txtar"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

func builtin(t testing.TB) *Converter {
	t.Helper()
	c, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func gv(t testing.TB, s string) k8sschema.GroupVersion {
	t.Helper()
	g, err := k8sschema.ParseGroupVersion(strings.TrimSpace(s))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// sameJSON reports whether a and b are the same JSON value, numbers compared as written.
func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	da, err := decode(a)
	if err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	db, err := decode(b)
	if err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(da, db)
}

func indent(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "  "); err != nil {
		t.Fatal(err)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// TestGolden converts each testdata/convert/*.txtar's input.json to the version in its "to"
// section and compares with its output.json (go test ./convert -update rewrites them). Unless
// the case has a "lossy" section saying why, converting the output back gives the input.
func TestGolden(t *testing.T) {
	c := builtin(t)
	files, err := filepath.Glob(filepath.Join("..", "testdata", "convert", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			sections := map[string][]byte{}
			for _, f := range ar.Files {
				sections[f.Name] = f.Data
			}
			in := sections["input.json"]
			got, _, err := c.Convert(in, gv(t, string(sections["to"])))
			if err != nil {
				t.Fatal(err)
			}
			got = indent(t, got)
			golden.CheckSection(t, file, "output.json", got)
			var from struct{ APIVersion string }
			if err := json.Unmarshal(in, &from); err != nil {
				t.Fatal(err)
			}
			back, _, err := c.Convert(got, gv(t, from.APIVersion))
			if err != nil {
				t.Fatal(err)
			}
			if _, lossy := sections["lossy"]; lossy == sameJSON(t, back, in) {
				t.Errorf("lossy case: %v; back:\n%s\ninput:\n%s", lossy, back, in)
			}
		})
	}
}

func TestConvertErrors(t *testing.T) {
	c := builtin(t)
	v1 := k8sschema.GroupVersion{Group: "cloudnative.czs", Version: "v1"}
	for name, tc := range map[string]struct {
		obj  string
		to   k8sschema.GroupVersion
		want string // the error
	}{
		"not JSON":         {`{"apiVersion":`, v1, "decode the object: unexpected EOF"},
		"not an object":    {`[1]`, v1, "decode the object: json: cannot unmarshal array into Go value of type map[string]interface {}"},
		"null":             {`null`, v1, "decode the object: not a JSON object"},
		"two values":       {`{} {}`, v1, "decode the object: more than one JSON value"},
		"no apiVersion":    {`{"kind":"VirtualMachine"}`, v1, "the object has no apiVersion"},
		"unknown source":   {`{"apiVersion":"cloudnative.czs/v9"}`, v1, "no field map for cloudnative.czs/v9 (known: cloudnative.czs/v1, cloudnative.czs/v1alpha1, cloudnative.czs/v1beta1)"},
		"unknown target":   {`{"apiVersion":"cloudnative.czs/v1alpha1"}`, k8sschema.GroupVersion{Group: "x.org", Version: "v1"}, "no field map for x.org/v1 (known: cloudnative.czs/v1, cloudnative.czs/v1alpha1, cloudnative.czs/v1beta1)"},
		"metadata":         {`{"apiVersion":"cloudnative.czs/v1alpha1","metadata":3}`, v1, "metadata is not an object"},
		"annotations":      {`{"apiVersion":"cloudnative.czs/v1alpha1","metadata":{"annotations":[]}}`, v1, "metadata.annotations is not an object"},
		"annotation value": {`{"apiVersion":"cloudnative.czs/v1alpha1","metadata":{"annotations":{"a":1}}}`, v1, `annotation "a" is not a string`},
		"bad apiVersion":   {`{"apiVersion":"a/b/c"}`, v1, "parse apiVersion: unexpected GroupVersion string: a/b/c"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := c.Convert([]byte(tc.obj), tc.to)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %s", err, tc.want)
			}
		})
	}
}

// TestSameVersion: an object already in the target version is returned untouched.
func TestSameVersion(t *testing.T) {
	in := []byte(`{"apiVersion":"cloudnative.czs/v1","spec":{"anything":1}}`)
	got, _, err := builtin(t).Convert(in, k8sschema.GroupVersion{Group: "cloudnative.czs", Version: "v1"})
	if err != nil || !bytes.Equal(got, in) {
		t.Errorf("got %s, %v", got, err)
	}
}

// TestUnreadableKeptFields: an annotation of kept fields that is not a JSON object of them
// (cut short, of the wrong type) cannot be restored. The conversion goes on, as the API server
// needs every stored object to read, keeps the annotation (it is the only copy of what it
// held, and can still be repaired) and says so. Where the object's own is unreadable and the
// fields the target cannot hold need its name, it is kept with them, and converting back gives
// the object as it was, the unreadable annotation included.
func TestUnreadableKeptFields(t *testing.T) {
	c := builtin(t)
	v1 := gv(t, "cloudnative.czs/v1")
	v1alpha1 := gv(t, "cloudnative.czs/v1alpha1")
	obj := func(apiVersion, kept, spec string) []byte {
		a, _ := json.Marshal(kept)
		return []byte(`{"apiVersion":"` + apiVersion + `","kind":"VirtualMachine","metadata":{"name":"vm","annotations":{"cloudnative.czs/v1-fields":` + string(a) + `}},"spec":` + spec + `}`)
	}
	const alpha = `{"resource":{"cpu":1,"memory":"1Gi","rootDisk":"1G"}}`
	for name, tc := range map[string]struct {
		in       []byte
		to       k8sschema.GroupVersion
		wantNote string
		wantKept string // cloudnative.czs/v1-fields of the result; "" for the input's, as it is
	}{
		"cut short, read as v1": {obj("cloudnative.czs/v1alpha1", `{"spec":{"runStrategy":"Wait`, alpha), v1,
			"annotation cloudnative.czs/v1-fields is not a JSON object of kept fields (decode the object: unexpected EOF): kept as it is; what it held is not restored", ""},
		"a list, read as v1": {obj("cloudnative.czs/v1alpha1", `["runStrategy"]`, alpha), v1,
			"annotation cloudnative.czs/v1-fields is not a JSON object of kept fields (decode the object: json: cannot unmarshal array into Go value of type map[string]interface {}): kept as it is; what it held is not restored", ""},
		"null, read as v1": {obj("cloudnative.czs/v1alpha1", `null`, alpha), v1,
			"annotation cloudnative.czs/v1-fields is not a JSON object of kept fields (decode the object: not a JSON object): kept as it is; what it held is not restored", ""},
		"back to v1alpha1": {obj("cloudnative.czs/v1", `{"spec":`, `{"resources":{"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"1G"}}`), v1alpha1,
			"annotation cloudnative.czs/v1-fields is not a JSON object of kept fields (decode the object: unexpected EOF): kept as it is", ""},
		// The stored v1 object of the cases above, given limits by a v1 client since: every
		// read of it as v1alpha1 converts it.
		"back with fields v1alpha1 cannot hold": {obj("cloudnative.czs/v1", `{"spec":`, `{"runStrategy":"Always","resources":{"limits":{"cpu":2},"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"1G"}}`), v1alpha1,
			"annotation cloudnative.czs/v1-fields is not a JSON object of kept fields (decode the object: unexpected EOF): kept as it is within the new one, with the fields cloudnative.czs/v1alpha1 cannot hold; converting back restores it",
			`{"metadata":{"annotations":{"cloudnative.czs/v1-fields":"{\"spec\":"}},"spec":{"resources":{"limits":{"cpu":2}}}}`},
	} {
		t.Run(name, func(t *testing.T) {
			out, notes, err := c.Convert(tc.in, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			if len(notes) != 1 || notes[0] != (Note{KeptUnreadable, tc.wantNote}) {
				t.Errorf("notes %q, want %q", notes, tc.wantNote)
			}
			var in, got struct {
				APIVersion string
				Metadata   struct{ Annotations map[string]string }
			}
			if err := json.Unmarshal(tc.in, &in); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			want := tc.wantKept
			if want == "" {
				want = in.Metadata.Annotations["cloudnative.czs/v1-fields"]
			}
			if k := "cloudnative.czs/v1-fields"; got.Metadata.Annotations[k] != want {
				t.Errorf("annotation %s: %q, want %q", k, got.Metadata.Annotations[k], want)
			}
			back, _, err := c.Convert(out, gv(t, in.APIVersion))
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, back, tc.in) {
				t.Errorf("converted back:\n%s\nwant the input:\n%s", back, tc.in)
			}
		})
	}
}
