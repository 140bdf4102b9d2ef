package schema

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
)

// Path is one field of a map: its key in a map file, where the object keeps it, and what it
// must be.
type Path struct {
	Key  string // as in a map file, e.g. "status.server.name"
	Path string // dotted path in the object; "" when the map leaves an optional field out
	Type ValueType
}

// Paths lists every field of f, in the order of a map file.
func (f Fields) Paths() []Path {
	infos := f.infos()
	out := make([]Path, len(infos))
	for i, fi := range infos {
		out[i] = Path{Key: fi.key, Path: *fi.path, Type: fi.want}
	}
	return out
}
