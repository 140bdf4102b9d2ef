package convert

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestKeptFieldsRefused: the annotation of kept fields of the target version is the object's,
// which any client that may write the object may write. What it holds is restored only as far
// as a conversion from the target version could have kept it: never at a path of a field the
// source version has a place for (such a conversion moves it), but for an action word the
// source cannot say. The API server converts after it validates, and does not validate the
// result, so whatever else came back would be stored, or read, unchecked.
func TestKeptFieldsRefused(t *testing.T) {
	c := builtin(t)
	annotated := func(apiVersion, name, kept, rest string) string {
		a, _ := json.Marshal(kept)
		return `{"apiVersion":"cloudnative.czs/` + apiVersion + `","kind":"VirtualMachine","metadata":{"name":"vm","annotations":{"cloudnative.czs/` + name + `":` + string(a) + `}},` + rest + `}`
	}
	const (
		v1Spec    = `"spec":{"runStrategy":"Always","resources":{"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"10G"}}`
		alphaSpec = `"spec":{"action":"active","resource":{"cpu":1,"memory":"1Gi","rootDisk":"10G"}}`
		// alphaSpec without its action: the default, written in by the API server, is absent
		// from a hand-made object; the kept word is then the only one.
		alphaNoAction = `"spec":{"resource":{"cpu":1,"memory":"1Gi","rootDisk":"10G"}}`
	)
	for name, tc := range map[string]struct {
		in, to string
		want   string // the converted object
		note   string // the DroppedKeptFields note; "" for none
	}{
		// A v1 client writes a VM, stored as v1alpha1: without the refusal the stored object
		// had an image with a space, a reclaim policy and a phase no schema allows.
		"v1 write, stored as v1alpha1": {
			in: annotated("v1", "v1alpha1-fields",
				`{"spec":{"image":"evil image","rootDiskReclaimPolicy":"Bogus","evictionStrategy":"Whatever","resource":{"gpu":1},"unknown":true},"status":{"phase":"NotAPhase"}}`, v1Spec),
			to: "cloudnative.czs/v1alpha1",
			// What v1 has no place for comes back (the API server prunes it, v1alpha1's
			// schema having no place for it either).
			want: `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"vm"},"spec":{"action":"active","resource":{"cpu":1,"memory":"1Gi","rootDisk":"10G","gpu":1},"unknown":true}}`,
			note: "annotation cloudnative.czs/v1alpha1-fields held spec.evictionStrategy, spec.image, spec.rootDiskReclaimPolicy, status.phase, which no conversion from cloudnative.czs/v1alpha1 to cloudnative.czs/v1 keeps there: dropped, not restored",
		},
		// A write of the main resource in v1, as the API server converts it for storage in
		// v1alpha1 after resetting status to the stored one: the restart request would have
		// been recorded as acted on, and the disk's request lowered, letting rootDisk shrink.
		"v1 main-resource write: status": {
			in: `{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachine","metadata":{"name":"vm","annotations":{"cloudnative.czs/restartedAt":"r1","cloudnative.czs/v1alpha1-fields":"{\"status\":{\"restartedAt\":\"r1\",\"rootDisk\":{\"request\":\"1\"}}}"}},` +
				`"spec":{"runStrategy":"Always","resources":{"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"40G"}},"status":{"phase":"Active","rootDisk":{"claimName":"vm-rootdisk","phase":"Bound","capacity":"40G"}}}`,
			to:   "cloudnative.czs/v1alpha1",
			want: `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"vm","annotations":{"cloudnative.czs/restartedAt":"r1"}},"spec":{"action":"active","resource":{"cpu":1,"memory":"1Gi","rootDisk":"40G"}},"status":{"phase":"Active","rootDisk":{"claimName":"vm-rootdisk","phase":"Bound","capacity":"40G"}}}`,
			note: "annotation cloudnative.czs/v1alpha1-fields held status.restartedAt, status.rootDisk.request, which no conversion from cloudnative.czs/v1alpha1 to cloudnative.czs/v1 keeps there: dropped, not restored",
		},
		// A v1alpha1 client writes a VM, stored as v1 (or the controller reads a v1 object as
		// v1alpha1, its default): the limits, which v1alpha1 cannot hold, come back.
		"v1alpha1 write, stored as v1": {
			in: annotated("v1alpha1", "v1-fields",
				`{"spec":{"image":"evil image","runStrategy":"Halted","rootDisk":{"reclaimPolicy":"Bogus"},"resources":{"limits":{"cpu":2}}},"status":{"restartedAt":"r1"}}`, alphaSpec),
			to:   "cloudnative.czs/v1",
			want: `{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachine","metadata":{"name":"vm"},"spec":{"runStrategy":"Always","resources":{"limits":{"cpu":2},"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"10G"}}}`,
			note: "annotation cloudnative.czs/v1-fields held spec.image, spec.rootDisk.reclaimPolicy, spec.runStrategy, status.restartedAt, which no conversion from cloudnative.czs/v1 to cloudnative.czs/v1alpha1 keeps there: dropped, not restored",
		},
		"a strategy the source can say, where it has none": {
			in:   annotated("v1alpha1", "v1-fields", `{"spec":{"runStrategy":"Halted"}}`, alphaNoAction),
			to:   "cloudnative.czs/v1",
			want: `{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachine","metadata":{"name":"vm"},"spec":{"resources":{"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"10G"}}}`,
			note: "annotation cloudnative.czs/v1-fields held spec.runStrategy, which no conversion from cloudnative.czs/v1 to cloudnative.czs/v1alpha1 keeps there: dropped, not restored",
		},
		// What a conversion from v1 does keep: a run strategy v1alpha1 has no word for.
		"a strategy the source cannot say": {
			in:   annotated("v1alpha1", "v1-fields", `{"spec":{"runStrategy":"WaitAsReceiver"}}`, alphaNoAction),
			to:   "cloudnative.czs/v1",
			want: `{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachine","metadata":{"name":"vm"},"spec":{"runStrategy":"WaitAsReceiver","resources":{"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"10G"}}}`,
		},
		// A conversion keeps the object's own annotation among the fields only when it cannot
		// read it; a readable one is replaced, never kept.
		"a readable annotation of its own": {
			in:   annotated("v1alpha1", "v1-fields", `{"metadata":{"annotations":{"cloudnative.czs/v1-fields":"{\"spec\":{\"image\":\"x\"}}"}},"spec":{"resources":{"limits":{"cpu":2}}}}`, alphaSpec),
			to:   "cloudnative.czs/v1",
			want: `{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachine","metadata":{"name":"vm"},"spec":{"runStrategy":"Always","resources":{"limits":{"cpu":2},"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"10G"}}}`,
			note: "annotation cloudnative.czs/v1-fields held metadata, which no conversion from cloudnative.czs/v1 to cloudnative.czs/v1alpha1 keeps there: dropped, not restored",
		},
		"identity and metadata": {
			in:   annotated("v1alpha1", "v1-fields", `{"apiVersion":"x/v1","kind":"Pod","metadata":{"labels":{"a":"b"}}}`, alphaSpec),
			to:   "cloudnative.czs/v1",
			want: `{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachine","metadata":{"name":"vm"},"spec":{"runStrategy":"Always","resources":{"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"10G"}}}`,
			note: "annotation cloudnative.czs/v1-fields held apiVersion, kind, metadata, which no conversion from cloudnative.czs/v1 to cloudnative.czs/v1alpha1 keeps there: dropped, not restored",
		},
		// A conversion from v1alpha1 keeps a value above the paths of mapped fields that is no
		// object (no field under it could move): restored where the object has nothing there.
		// It sets none of the fields under it.
		"a value above mapped paths, where the object has none": {
			in:   annotated("v1", "v1alpha1-fields", `{"status":{"rootDisk":"x"}}`, v1Spec),
			to:   "cloudnative.czs/v1alpha1",
			want: `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"vm"},"spec":{"action":"active","resource":{"cpu":1,"memory":"1Gi","rootDisk":"10G"}},"status":{"rootDisk":"x"}}`,
		},
		// Between the two versions of one layout every field has a place: only what no map
		// knows can be kept.
		"v1alpha1 write, read as v1beta1": {
			in:   annotated("v1alpha1", "v1beta1-fields", `{"spec":{"image":"evil image","other":1},"status":{}}`, alphaSpec),
			to:   "cloudnative.czs/v1beta1",
			want: `{"apiVersion":"cloudnative.czs/v1beta1","kind":"VirtualMachine","metadata":{"name":"vm"},"spec":{"action":"active","other":1,"resource":{"cpu":1,"memory":"1Gi","rootDisk":"10G"}},"status":{}}`,
			note: "annotation cloudnative.czs/v1beta1-fields held spec.image, which no conversion from cloudnative.czs/v1beta1 to cloudnative.czs/v1alpha1 keeps there: dropped, not restored",
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, notes, err := c.Convert([]byte(tc.in), gv(t, tc.to))
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, out, []byte(tc.want)) {
				t.Errorf("converted:\n%s\nwant:\n%s", out, tc.want)
			}
			var want []Note
			if tc.note != "" {
				want = []Note{{DroppedKeptFields, tc.note}}
			}
			if len(notes) != len(want) || (len(want) > 0 && notes[0] != want[0]) {
				t.Errorf("notes %q, want %q", notes, want)
			}
		})
	}
}

// FuzzKeptFieldsRefused: whatever the annotation of the target version's kept fields holds, the
// converted object has at the path of each field the source has a place for what the source
// had there (translated, for the action), or nothing, but for an action word the source cannot
// say; and no annotation of kept fields but the unreadable ones that the source carried.
// go test ./convert -fuzz FuzzKeptFieldsRefused explores; plain go test runs the seeds.
func FuzzKeptFieldsRefused(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	pairs := [][2]k8sschema.GroupVersion{{v1, v1alpha1}, {v1alpha1, v1}, {v1alpha1, v1beta1}, {v1beta1, v1}}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := builtin(t)
		ch := &choices{data}
		pair := pairs[ch.next(len(pairs))]
		from, to := pair[0], pair[1]
		src, err := schema.ForVersion(from)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := schema.ForVersion(to)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := decode(ch.vm(from, src))
		if err != nil {
			t.Fatal(err)
		}
		// The target's annotation, written by hand: an object of noise with a value at
		// each of the target's paths, or not, and perhaps metadata.
		kept := ch.object(2)
		for _, p := range dst.Paths() {
			if p.Path != "" && ch.coin() {
				_ = set(kept, p.Path, ch.value(1))
			}
		}
		if ch.coin() {
			kept["metadata"] = map[string]any{"annotations": map[string]any{FieldsAnnotation(to): ch.word()}}
		}
		text, err := encode(kept)
		if err != nil {
			t.Fatal(err)
		}
		md := obj["metadata"].(map[string]any)
		a, _ := md["annotations"].(map[string]any)
		if a == nil {
			a = map[string]any{}
			md["annotations"] = a
		}
		a[FieldsAnnotation(to)] = string(text)
		in, err := encode(obj)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := c.Convert(in, to)
		if err != nil {
			t.Fatalf("convert %s to %s: %v", in, to, err)
		}
		got, err := decode(out)
		if err != nil {
			t.Fatal(err)
		}
		srcPath := map[string]string{}
		for _, p := range src.Paths() {
			srcPath[p.Key] = p.Path
		}
		for _, p := range dst.Paths() {
			if p.Path == "" || srcPath[p.Key] == "" {
				continue
			}
			was, had := lookup(obj, srcPath[p.Key])
			now, has := lookup(got, p.Path)
			if p.Key == schema.ActionKey {
				if w, ok := translate(was, src, dst); had && ok {
					was = w
				} else if _, sayable := translate(now, dst, src); has && !sayable {
					continue // an action word the source cannot say: kept by a conversion
				} else {
					had = false
				}
			}
			if has != had || (has && !sameJSON(t, mustEncode(t, now), mustEncode(t, was))) {
				t.Fatalf("%s: %s to %s gives %v (present %v), the source had %v (present %v)\nin:  %s\nout: %s", p.Key, from, to, now, has, was, had, in, out)
			}
		}
		gotMD, _ := got["metadata"].(map[string]any)
		gotA, _ := gotMD["annotations"].(map[string]any)
		if v, ok := gotA[FieldsAnnotation(to)]; ok {
			if _, err := keptFields(FieldsAnnotation(to), v); err == nil {
				t.Fatalf("%s to %s keeps a readable %s: %s\nin:  %s\nout: %s", from, to, FieldsAnnotation(to), v, in, out)
			}
		}
	})
}

func lookup(m map[string]any, path string) (any, bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(m, strings.Split(path, ".")...)
	return v, ok
}

// mustEncode wraps a value in an object, for sameJSON.
func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := encode(map[string]any{"v": v})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
