package convert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// FieldsAnnotation is the annotation that keeps, on an object converted from version gv, what
// gv had and the object's version has no place for: "cloudnative.czs/v1-fields".
func FieldsAnnotation(gv k8sschema.GroupVersion) string {
	return gv.Group + "/" + gv.Version + "-fields"
}

// Converter converts between the versions it knows the layouts of. The zero value knows
// none; Builtin knows this project's.
type Converter struct {
	layouts map[k8sschema.GroupVersion]schema.Fields
}

// Builtin returns a Converter for every version of cloudnative.czs with a built-in field map.
func Builtin() (*Converter, error) {
	c := &Converter{}
	for _, v := range schema.BuiltinVersions() {
		gv := k8sschema.GroupVersion{Group: schema.Group, Version: v}
		f, err := schema.ForVersion(gv)
		if err != nil {
			return nil, fmt.Errorf("load the field map of %s: %w", gv, err)
		}
		c.Add(gv, f)
	}
	return c, nil
}

// Add makes c know gv's layout, replacing what it knew of gv.
func (c *Converter) Add(gv k8sschema.GroupVersion, f schema.Fields) {
	if c.layouts == nil {
		c.layouts = map[k8sschema.GroupVersion]schema.Fields{}
	}
	c.layouts[gv] = f
}

// Versions lists the versions c converts between, sorted.
func (c *Converter) Versions() []string {
	out := make([]string, 0, len(c.layouts))
	for gv := range c.layouts {
		out = append(out, gv.String())
	}
	sort.Strings(out)
	return out
}

// NoteKind says what a conversion could not do as asked; it is the webhook's log message.
type NoteKind string

const (
	// KeptUnreadable: an annotation of kept fields that is not a JSON object of them, kept as
	// it is, its fields not restored.
	KeptUnreadable NoteKind = "kept an unreadable annotation"
	// DroppedKeptFields: the annotation of kept fields of the target version held fields that
	// no conversion puts there (fields the source version has a place for), which only a
	// client that wrote the annotation itself can have put there; dropped, not restored.
	DroppedKeptFields NoteKind = "dropped kept fields that no conversion keeps"
)

// Note is one thing a conversion could not do as asked and how it went on, for the log.
type Note struct {
	Kind NoteKind
	Text string // names the annotation and what became of it
}

// Convert returns the object obj (JSON, with apiVersion and kind) in version to. An object
// already in version to is returned as it is. Numbers pass through as they are written.
// notes say what the conversion could not do and worked around, for the log: an annotation
// of kept fields it cannot read, kept as it is; fields in the annotation of kept fields that
// no conversion keeps there, dropped.
func (c *Converter) Convert(obj []byte, to k8sschema.GroupVersion) (out []byte, notes []Note, err error) {
	m, err := decode(obj)
	if err != nil {
		return nil, nil, err
	}
	av, ok := m["apiVersion"].(string)
	if !ok {
		return nil, nil, errors.New("the object has no apiVersion")
	}
	from, err := k8sschema.ParseGroupVersion(av)
	if err != nil {
		return nil, nil, fmt.Errorf("parse apiVersion: %w", err)
	}
	if from == to {
		return obj, nil, nil
	}
	src, ok := c.layouts[from]
	if !ok {
		return nil, nil, fmt.Errorf("no field map for %s (known: %s)", from, strings.Join(c.Versions(), ", "))
	}
	dst, ok := c.layouts[to]
	if !ok {
		return nil, nil, fmt.Errorf("no field map for %s (known: %s)", to, strings.Join(c.Versions(), ", "))
	}
	converted, notes, err := convert(m, from, src, to, dst)
	if err != nil {
		return nil, nil, err
	}
	out, err = encode(converted)
	return out, notes, err
}

// convert moves each field from src's path to dst's, keeps the rest of the object in the
// annotation of from, and restores what an earlier conversion kept in the annotation of to.
//
// The annotations are the object's, and any client that may write the object may write them:
// what the annotation of to holds is restored only as far as a conversion from to could have
// kept it there (refuse), never where the source version has a place of its own. The API server
// does not validate the converted object (it prunes it): a field restored is one that no
// schema check saw, so it must be one that came from an object of to.
//
// An annotation of kept fields that is not a JSON object (a hand edit cut it short, gave it
// another type) cannot be restored. It is kept as it is, in both directions: it is the only
// copy of what it held, and can still be repaired. The conversion goes on, because the API
// server needs every stored object converted to read any of them (a list, the garbage
// collector, a namespace's deletion), and notes it. Where the source's own is unreadable and
// the fields the target cannot hold need its name, it is one more thing the target cannot
// hold: it goes into them, at metadata.annotations, and the way back puts it back.
func convert(m map[string]any, from k8sschema.GroupVersion, src schema.Fields, to k8sschema.GroupVersion, dst schema.Fields) (map[string]any, []Note, error) {
	var notes []Note
	meta, err := metadata(m)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]any{"apiVersion": to.String()}
	if k, ok := m["kind"]; ok {
		out["kind"] = k
	}
	// rest is everything but the object's identity; each field moved leaves it.
	rest := map[string]any{}
	for k, v := range m {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			rest[k] = v
		}
	}

	dstPaths := map[string]string{}
	for _, p := range dst.Paths() {
		dstPaths[p.Key] = p.Path
	}
	for _, p := range src.Paths() {
		target := dstPaths[p.Key]
		if p.Path == "" || target == "" {
			continue
		}
		// An object on the way that is no object holds nothing at the path: not found.
		v, ok, _ := unstructured.NestedFieldNoCopy(rest, strings.Split(p.Path, ".")...)
		if !ok {
			continue
		}
		if p.Key == schema.ActionKey {
			// The run strategy's words are each version's own; a value the source has no
			// meaning for, or a strategy the target has no word for, stays behind with the
			// rest (in the annotation, so that the way back restores it).
			w, ok := translate(v, src, dst)
			if !ok {
				continue
			}
			v = w
		}
		remove(rest, p.Path)
		if err := set(out, target, v); err != nil {
			return nil, nil, fmt.Errorf("write %s at %s: %w", p.Key, target, err)
		}
	}

	annotations, err := annotationsOf(meta)
	if err != nil {
		return nil, nil, err
	}
	changed := false
	// What the target version had when it was last converted away comes back where the
	// fields moved here left room for it; a field set since wins over the kept value.
	if kept, ok := annotations[FieldsAnnotation(to)]; ok {
		restore, err := keptFields(FieldsAnnotation(to), kept)
		if err != nil {
			notes = append(notes, Note{KeptUnreadable, err.Error() + ": kept as it is; what it held is not restored"})
		} else {
			own, hadOwn, refused := refuse(restore, FieldsAnnotation(to), src, dst)
			if len(refused) > 0 {
				notes = append(notes, Note{DroppedKeptFields, fmt.Sprintf("annotation %s held %s, which no conversion from %s to %s keeps there: dropped, not restored",
					FieldsAnnotation(to), strings.Join(refused, ", "), to, from)})
			}
			merge(out, restore)
			delete(annotations, FieldsAnnotation(to))
			if hadOwn {
				// The object's own, unreadable, which the way here kept among these (below).
				annotations[FieldsAnnotation(to)] = own
			}
			changed = true
		}
	}
	// The source's own: a readable one is replaced (the annotation is reserved); one it cannot
	// read is most likely the one a conversion to this version could not restore (above), and
	// is kept: as it is, or, when the fields the target cannot hold need its name, among them,
	// at metadata.annotations (rest has no metadata of its own), whence the way back restores it.
	if own, ok := annotations[FieldsAnnotation(from)]; ok {
		if _, err := keptFields(FieldsAnnotation(from), own); err == nil {
			delete(annotations, FieldsAnnotation(from))
			changed = true
		} else if len(rest) > 0 {
			rest["metadata"] = map[string]any{"annotations": map[string]any{FieldsAnnotation(from): own}}
			notes = append(notes, Note{KeptUnreadable, err.Error() + ": kept as it is within the new one, with the fields " + to.String() + " cannot hold; converting back restores it"})
		} else {
			notes = append(notes, Note{KeptUnreadable, err.Error() + ": kept as it is"})
		}
	}
	if len(rest) > 0 {
		data, err := encode(rest)
		if err != nil {
			return nil, nil, err
		}
		annotations[FieldsAnnotation(from)] = string(data)
		changed = true
	}

	switch {
	case !changed && meta != nil:
		out["metadata"] = meta
	case changed && (meta != nil || len(annotations) > 0):
		md := map[string]any{}
		for k, v := range meta {
			md[k] = v
		}
		if len(annotations) > 0 {
			md["annotations"] = annotations
		} else {
			// Left only by what conversion took out: the API server never stores an empty
			// map of annotations (it is omitted), so nothing is lost.
			delete(md, "annotations")
		}
		out["metadata"] = md
	}
	return out, notes, nil
}

// keptFields reads the annotation name's value: a JSON object of kept fields.
func keptFields(name string, value any) (map[string]any, error) {
	s, _ := value.(string) // annotationsOf checked
	m, err := decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("annotation %s is not a JSON object of kept fields (%w)", name, err)
	}
	return m, nil
}

// translate returns the word of layout to for the run strategy that v, an action's value
// in layout from, names; false when v names none in from, or to has no word for it. Such a
// value is not moved: it is kept with the fields to cannot hold.
func translate(v any, from, to schema.Fields) (string, bool) {
	w, _ := v.(string)
	rs, ok := from.StrategyOf(w)
	if !ok || to.StrategyWord(rs) == "" {
		return "", false
	}
	return to.StrategyWord(rs), true
}

// refuse takes out of kept what no conversion from version to (layout dst) to the source
// version (layout src) would have put there, and names it. kept is what the annotation name,
// on the object being converted, holds of version to. Such a conversion moves every field
// that src has a place for, so kept never legitimately holds a value at dst's path of one
// (nor anything under it), but for an action word src cannot say; nor apiVersion, kind or
// metadata, but for the object's own annotation name when it is unreadable (convert keeps it
// there then), which refuse returns. The names are sorted.
//
// Anything else, the fields src has no place for, can have come from an object of to and is
// restored: those are the only fields the annotation is for. Without the refusal, any client
// that may write the object could write fields of the other version that no schema check sees
// (the API server validates an object in the version it was sent in, and converts after):
// spec.image or status.phase for the storage version, or, on a write of the main resource,
// status fields that the API server has just reset to the stored ones (status.restartedAt,
// status.rootDisk.request).
func refuse(kept map[string]any, name string, src, dst schema.Fields) (own string, hadOwn bool, refused []string) {
	placed := map[string]bool{}
	for _, p := range src.Paths() {
		placed[p.Key] = p.Path != ""
	}
	for _, p := range dst.Paths() {
		if p.Path == "" || !placed[p.Key] {
			continue
		}
		v, ok, _ := unstructured.NestedFieldNoCopy(kept, strings.Split(p.Path, ".")...)
		if !ok {
			continue
		}
		if p.Key == schema.ActionKey {
			if _, sayable := translate(v, dst, src); !sayable {
				continue // a conversion from dst keeps a word src cannot say
			}
		}
		remove(kept, p.Path)
		refused = append(refused, p.Path)
	}
	for _, k := range []string{"apiVersion", "kind"} {
		if _, ok := kept[k]; ok {
			delete(kept, k)
			refused = append(refused, k)
		}
	}
	if md, ok := kept["metadata"]; ok {
		delete(kept, "metadata")
		own, hadOwn = keptAnnotation(md, name)
		if hadOwn {
			if _, err := keptFields(name, own); err == nil {
				// Readable: convert replaces an object's own readable one, and never keeps it.
				own, hadOwn = "", false
			}
		}
		if want := map[string]any{"annotations": map[string]any{name: own}}; !hadOwn || !reflect.DeepEqual(md, want) {
			refused = append(refused, "metadata")
		}
	}
	sort.Strings(refused)
	return own, hadOwn, refused
}

// keptAnnotation returns the annotation name that kept fields hold at metadata.annotations
// (md): an object's own annotation of kept fields, unreadable, kept with the fields when they
// needed its name.
func keptAnnotation(md any, name string) (string, bool) {
	m, _ := md.(map[string]any)
	a, _ := m["annotations"].(map[string]any)
	v, ok := a[name].(string)
	return v, ok
}

// metadata returns the object's metadata, nil when it has none.
func metadata(m map[string]any) (map[string]any, error) {
	v, ok := m["metadata"]
	if !ok {
		return nil, nil
	}
	md, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("metadata is not an object")
	}
	return md, nil
}

// annotationsOf returns a copy of the annotations, which it checks are strings: those of an
// object the API server holds always are.
func annotationsOf(md map[string]any) (map[string]any, error) {
	out := map[string]any{}
	v, ok := md["annotations"]
	if !ok || v == nil {
		return out, nil
	}
	a, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("metadata.annotations is not an object")
	}
	for k, v := range a {
		if _, ok := v.(string); !ok {
			return nil, fmt.Errorf("annotation %q is not a string", k)
		}
		out[k] = v
	}
	return out, nil
}

// remove deletes the value at a dotted path, and each object above it that this leaves empty:
// those existed only to hold it. An object that was empty before stays. It is not
// unstructured.RemoveNestedField, which leaves the emptied objects behind: they would be kept
// in the annotation, and an object whose every field has a place in both versions would
// come back from a round trip with an annotation it did not have.
func remove(m map[string]any, path string) {
	segs := strings.Split(path, ".")
	parents := []map[string]any{m}
	for _, s := range segs[:len(segs)-1] {
		next, ok := parents[len(parents)-1][s].(map[string]any)
		if !ok {
			return
		}
		parents = append(parents, next)
	}
	delete(parents[len(parents)-1], segs[len(segs)-1])
	for i := len(parents) - 1; i > 0 && len(parents[i]) == 0; i-- {
		delete(parents[i-1], segs[i-1])
	}
}

// set writes v at a dotted path, making the objects on the way. It is not
// unstructured.SetNestedField, which deep-copies v (a copy of every value moved, for nothing:
// v has left the source) and replaces a null on the way with an object: here a null on the
// way, like any other value that is no object, is an error naming where, since it is another
// field's value.
func set(m map[string]any, path string, v any) error {
	segs := strings.Split(path, ".")
	cur := m
	for i, s := range segs[:len(segs)-1] {
		next, ok := cur[s]
		if !ok {
			n := map[string]any{}
			cur[s] = n
			cur = n
			continue
		}
		if cur, ok = next.(map[string]any); !ok {
			return fmt.Errorf("%s is not an object", strings.Join(segs[:i+1], "."))
		}
	}
	cur[segs[len(segs)-1]] = v
	return nil
}

// merge adds src's values to dst where dst has none; where both hold objects it merges them.
// A value dst has wins: it was set since src was kept. apimachinery has no such merge (its
// helpers set one path at a time), and no path is known here: kept fields are whatever the
// other version had no place for.
func merge(dst, src map[string]any) {
	for k, v := range src {
		cur, ok := dst[k]
		if !ok {
			dst[k] = v
			continue
		}
		cm, ok1 := cur.(map[string]any)
		vm, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			merge(cm, vm)
		}
	}
}

// decode reads a JSON object, numbers as json.Number so that they pass through unchanged.
func decode(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode the object: %w", err)
	}
	if m == nil {
		return nil, errors.New("decode the object: not a JSON object")
	}
	if dec.More() {
		return nil, errors.New("decode the object: more than one JSON value")
	}
	return m, nil
}

func encode(m map[string]any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("encode the object: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
