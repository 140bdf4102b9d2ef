package schema

import (
	"reflect"
	"strings"
)

// The CRD-schema checker (package crds) needs every path of a field map and what the CRD's
// schema must allow there; conversion between two versions (package convert) pairs the paths
// of one layout with the other's by Key. This is their one view of the map's internals.

// ValueType is what a CRD's schema must allow at a field's path.
type ValueType = valueType

// The value types of the fields.
const (
	TypeString     = typeString     // a string
	TypeQuantity   = typeQuantity   // a resource.Quantity: int-or-string, or a number or string
	TypeInteger    = typeInteger    // an integer
	TypeConditions = typeConditions // a list of metav1.Condition
	TypeObject     = typeObject     // an object
)

// Path is one field of a map: its key in a map file, where the object keeps it, and what it
// must be.
type Path struct {
	Key  string // as in a map file, e.g. "status.server.name"
	Path string // dotted path in the object; "" when the map leaves an optional field out
	Type ValueType
	// Required: a map must give it (the fields the controller cannot work without).
	Required bool
	inStatus bool
}

// status reports whether the field is a status field, written through /status.
func (p Path) status() bool { return p.inStatus }

// Paths lists every field of f, in the order of a map file. It reads each path straight from
// f (not through infos, which makes a pointer of each): it runs for each status patch of a VM
// that is not Active and for each object the conversion webhook converts.
func (f Fields) Paths() []Path {
	v := reflect.ValueOf(&f).Elem()
	out := make([]Path, len(fieldKeys))
	for i, k := range fieldKeys {
		out[i] = Path{Key: k.key, Path: v.Field(k.field).String(), Type: k.want, Required: k.required, inStatus: k.status}
	}
	return out
}

// Only is a layout with the one field of key at f's path, and nothing else: for checking one
// path of a map on its own.
func (f Fields) Only(key string) Fields {
	var out Fields
	src, dst := f.infos(), out.infos()
	for i := range src {
		if src[i].key == key {
			*dst[i].path = *src[i].path
		}
	}
	return out
}

// Without is f without the optional fields of keys (the disk's claimName, phase and capacity
// go together, as a map must give them: all or none, and its request with them; the request
// goes alone, as a CRD of an earlier release lacks it), and the keys of the fields it left
// out, in the order of a map file. Required fields stay.
func (f Fields) Without(keys map[string]bool) (Fields, []string) {
	out := f
	infos := out.infos()
	disk := false
	for _, fi := range infos {
		if keys[fi.key] && diskGroup(fi.key) {
			disk = true
		}
	}
	var left []string
	for _, fi := range infos {
		if fi.required || *fi.path == "" || !keys[fi.key] && !(disk && strings.HasPrefix(fi.key, "status.rootDisk.")) {
			continue
		}
		*fi.path = ""
		left = append(left, fi.key)
	}
	return out, left
}

// diskGroup reports whether key is one of the disk's status fields that a map gives together.
func diskGroup(key string) bool {
	return strings.HasPrefix(key, "status.rootDisk.") && key != "status.rootDisk.request"
}
