package schema

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cloudnative-czs/vm-controller/internal/strictyaml"
)

// A field map is a YAML file that says where each field of a VirtualMachine lives in some
// CRD. Its keys are the fields as this project's own CRD names them, nested the same way;
// each value is the dotted path of that field in the other CRD. The action also says which
// of its values mean active and inactive:
//
//	spec:
//	  action: {path: spec.power, active: "On", inactive: "Off"}
//	  resource: {cpu: spec.shape.cores, memory: spec.shape.ram, rootDisk: spec.disks.boot.size}
//	  image: spec.bootImage            # optional
//	  rootDiskStorageClassName: spec.disks.boot.class     # optional
//	  rootDiskReclaimPolicy: spec.disks.boot.reclaim      # optional
//	  evictionStrategy: spec.eviction                     # optional
//	status:
//	  phase: status.state
//	  ...
//
// The built-in maps of this project's versions (fieldmaps/*.yaml) are in the same format.

// fileMap is the document; unknown keys at any level are refused (yaml.v3 KnownFields).
//
// The file structs are the one declaration of a map file's keys: each scalar's `field` tag
// names the field of Fields that keeps its path, then says "required" if every map must give
// it, and what the CRD's schema must allow there when that is not a string ("quantity",
// "integer", "conditions" or "object"; valueType). A key under status is a status field.
// `field:"-"` marks a value that is not a path, read by its own code (the action's words).
// fieldKeys, and from it the parse, Paths and the CRD check, are derived from these tags, so
// a new key is a field of Fields and a tagged scalar here; a tag that names no string field
// of Fields panics at init, which stops every test run. The order of the keys here is that
// of the "known: ..." lists in errors (sections), not that of Paths.
type fileMap struct {
	Spec   fileSpec   `yaml:"spec"`
	Status fileStatus `yaml:"status"`
}

type fileSpec struct {
	Action                   fileAction   `yaml:"action"`
	Resource                 fileResource `yaml:"resource"`
	Image                    scalar       `yaml:"image" field:"Image"`
	RootDiskStorageClassName scalar       `yaml:"rootDiskStorageClassName" field:"RootDiskStorageClass"`
	RootDiskReclaimPolicy    scalar       `yaml:"rootDiskReclaimPolicy" field:"RootDiskReclaimPolicy"`
	EvictionStrategy         scalar       `yaml:"evictionStrategy" field:"EvictionStrategy"`
	Placement                scalar       `yaml:"placement" field:"Placement,object"`
}

type fileAction struct {
	Path     scalar `yaml:"path" field:"Action,required"`
	Active   scalar `yaml:"active" field:"-"`
	Inactive scalar `yaml:"inactive" field:"-"`
	// The words of the other run strategies, each optional (a layout without one cannot
	// express that strategy).
	RerunOnFailure scalar `yaml:"rerunOnFailure" field:"-"`
	Once           scalar `yaml:"once" field:"-"`
	Manual         scalar `yaml:"manual" field:"-"`
}

type fileResource struct {
	CPU      scalar `yaml:"cpu" field:"CPU,required,quantity"`
	Memory   scalar `yaml:"memory" field:"Memory,required,quantity"`
	RootDisk scalar `yaml:"rootDisk" field:"RootDisk,required,quantity"`
}

// The status fields the decision compares (everything but usage and lastUpdateTime, and
// the optional fields) are required: a status the controller writes and cannot read back
// would look changed on every reconcile and be written forever.
type fileStatus struct {
	Phase               scalar     `yaml:"phase" field:"Phase,required"`
	Reason              scalar     `yaml:"reason" field:"Reason,required"`
	Message             scalar     `yaml:"message" field:"Message,required"`
	Server              fileServer `yaml:"server"`
	ConsecutiveFailures scalar     `yaml:"consecutiveFailures" field:"ConsecutiveFailures,required,integer"`
	ObservedGeneration  scalar     `yaml:"observedGeneration" field:"ObservedGeneration,required,integer"`
	LastUpdateTime      scalar     `yaml:"lastUpdateTime" field:"LastUpdateTime"`
	Conditions          scalar     `yaml:"conditions" field:"Conditions,required,conditions"`
	RestartedAt         scalar     `yaml:"restartedAt" field:"RestartedAt"`
	RootDisk            fileDisk   `yaml:"rootDisk"`
	// The run strategies' fields (Fields.NextRetryTime, StartRequestedAt, StopRequestedAt).
	NextRetryTime    scalar `yaml:"nextRetryTime" field:"NextRetryTime"`
	StartRequestedAt scalar `yaml:"startRequestedAt" field:"StartRequestedAt"`
	StopRequestedAt  scalar `yaml:"stopRequestedAt" field:"StopRequestedAt"`
	Migration        scalar `yaml:"migration" field:"Migration,object"`
}

type fileDisk struct {
	ClaimName scalar `yaml:"claimName" field:"RootDiskClaim"`
	Phase     scalar `yaml:"phase" field:"RootDiskPhase"`
	Capacity  scalar `yaml:"capacity" field:"RootDiskCapacity,quantity"`
	Request   scalar `yaml:"request" field:"RootDiskRequest,quantity"`
}

type fileServer struct {
	Name  scalar    `yaml:"name" field:"ServerName,required"`
	ID    scalar    `yaml:"id" field:"ServerID,required"`
	State scalar    `yaml:"state" field:"ServerState,required"`
	Usage fileUsage `yaml:"usage"`
	Node  scalar    `yaml:"node" field:"ServerNode"`
	IP    scalar    `yaml:"ip" field:"ServerIP"`
}

type fileUsage struct {
	CPU    scalar `yaml:"cpu" field:"UsageCPU,quantity"`
	Memory scalar `yaml:"memory" field:"UsageMemory,quantity"`
}

// scalar is one value of the file, kept with its position so that an error can point at it.
// Its shape is checked after decoding, where the key it belongs to is known.
type scalar struct {
	set   bool
	kind  yaml.Kind
	tag   string
	value string
	line  int
}

// UnmarshalYAML records the node; it never fails, so that every problem is reported with
// the key it belongs to. (yaml.v3 does not call it for null values: those read as unset.)
func (s *scalar) UnmarshalYAML(n *yaml.Node) error {
	*s = scalar{set: true, kind: n.Kind, tag: n.ShortTag(), value: n.Value, line: n.Line}
	return nil
}

// valueType is what a CRD's schema must allow at a field's path.
type valueType int

const (
	typeString     valueType = iota // a string
	typeQuantity                    // a resource.Quantity: int-or-string, or a number or string
	typeInteger                     // an integer
	typeConditions                  // a list of metav1.Condition
	typeObject                      // an object (its own fields are the schema's to say)
)

// valueTypes are the words of a `field` tag for the value types but a string, the default.
var valueTypes = map[string]valueType{"quantity": typeQuantity, "integer": typeInteger, "conditions": typeConditions, "object": typeObject}

// fieldKey is one path key of a map file, as its `field` tag declares it.
type fieldKey struct {
	key      string // as in a map file, e.g. "status.server.name"
	status   bool   // written through the /status subresource
	required bool
	want     valueType
	field    int   // the index of the Fields field that keeps its path
	file     []int // the index of its scalar in fileMap (reflect's FieldByIndex)
}

// fieldKeys are the path keys of a map file, in the order Fields declares the fields they
// fill. That order, not the file structs', is the order of Paths and decides the order of
// ParseFieldMap's messages on one line and which of two overlapping keys a message names
// first: keep a new field's place in Fields where its messages should come.
var fieldKeys = func() []fieldKey {
	keys, err := deriveFieldKeys(reflect.TypeFor[fileMap](), reflect.TypeFor[Fields]())
	if err != nil {
		panic("schema: the field map's declaration: " + err.Error())
	}
	return keys
}()

// deriveFieldKeys walks the file structs from file and reads each scalar's `field` tag
// against fields (Fields but in tests). A scalar without a tag, a tag naming no string field
// of fields or one that another key fills already, and an attribute it does not know or
// repeats are errors.
func deriveFieldKeys(file, fields reflect.Type) ([]fieldKey, error) {
	var keys []fieldKey
	filledBy := map[int]string{}
	var walk func(t reflect.Type, prefix string, index []int) error
	walk = func(t reflect.Type, prefix string, index []int) error {
		for i := range t.NumField() {
			fld := t.Field(i)
			if !fld.IsExported() {
				continue
			}
			key := prefix + strings.Split(fld.Tag.Get("yaml"), ",")[0]
			at := append(slices.Clone(index), i)
			if fld.Type != reflect.TypeFor[scalar]() {
				if fld.Type.Kind() != reflect.Struct {
					return fmt.Errorf("%s is a %s: a key is a scalar or a mapping of them (a struct)", key, fld.Type)
				}
				if err := walk(fld.Type, key+".", at); err != nil {
					return err
				}
				continue
			}
			tag, ok := fld.Tag.Lookup("field")
			switch {
			case !ok:
				return fmt.Errorf("%s has no field tag: name the %s field it fills, or say - for a value read by its own code", key, fields)
			case tag == "-":
				continue
			}
			attrs := strings.Split(tag, ",")
			name := attrs[0]
			dst, ok := fields.FieldByName(name)
			switch {
			case !ok || len(dst.Index) != 1:
				return fmt.Errorf("%s: field tag %q names %s, which %s does not have", key, tag, name, fields)
			case dst.Type.Kind() != reflect.String:
				return fmt.Errorf("%s: field tag %q names %s.%s, a %s: a path is a string", key, tag, fields, name, dst.Type)
			case filledBy[dst.Index[0]] != "":
				return fmt.Errorf("%s: field tag %q names %s.%s, which %s fills already", key, tag, fields, name, filledBy[dst.Index[0]])
			}
			filledBy[dst.Index[0]] = key
			k := fieldKey{key: key, status: strings.HasPrefix(key, "status."), field: dst.Index[0], file: at}
			typed := false
			for _, a := range attrs[1:] {
				vt, isType := valueTypes[a]
				switch {
				case a == "required" && !k.required:
					k.required = true
				case isType && !typed:
					k.want, typed = vt, true
				default:
					return fmt.Errorf("%s: field tag %q: unknown or repeated %q (want required and at most one of %s)",
						key, tag, a, strings.Join(slices.Sorted(maps.Keys(valueTypes)), ", "))
				}
			}
			keys = append(keys, k)
		}
		return nil
	}
	if err := walk(file, "", nil); err != nil {
		return nil, err
	}
	slices.SortStableFunc(keys, func(a, b fieldKey) int { return a.field - b.field })
	return keys, nil
}

// fieldInfo is one path key of a map with the place of its path in a Fields value.
type fieldInfo struct {
	fieldKey
	path *string
}

// infos lists every path key of a map file with its place in f, in the order of fieldKeys.
func (f *Fields) infos() []fieldInfo {
	v := reflect.ValueOf(f).Elem()
	out := make([]fieldInfo, len(fieldKeys))
	for i, k := range fieldKeys {
		out[i] = fieldInfo{k, v.Field(k.field).Addr().Interface().(*string)}
	}
	return out
}

// scalars pairs each key of infos with its value in the file.
func (m *fileMap) scalars() map[string]*scalar {
	v := reflect.ValueOf(m).Elem()
	out := make(map[string]*scalar, len(fieldKeys))
	for _, k := range fieldKeys {
		out[k.key] = v.FieldByIndex(k.file).Addr().Interface().(*scalar)
	}
	return out
}

// LoadFieldMap reads and validates a field-map file.
func LoadFieldMap(file string) (Fields, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Fields{}, fmt.Errorf("read field map: %w", err)
	}
	f, err := ParseFieldMap(data)
	if err != nil {
		return Fields{}, fmt.Errorf("field map %s: %w", file, err)
	}
	return f, nil
}

// ParseFieldMap decodes and validates a field map. Every problem is reported, with the line
// it is on where there is one, in one error of one line: unknown keys, missing required
// fields, values that are not paths, malformed paths, a status path outside the status
// subtree or a spec path inside it, and two fields at the same or nested paths.
func ParseFieldMap(data []byte) (Fields, error) {
	var m fileMap
	dec := strictyaml.NewDecoder(data)
	if err := dec.Decode(&m); err != nil {
		if errors.Is(err, io.EOF) {
			return Fields{}, errors.New("the field map is empty")
		}
		return Fields{}, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Fields{}, errors.New("more than one YAML document: a field map is one")
	}

	var f Fields
	var errs problems
	values := m.scalars()
	for _, fi := range f.infos() {
		s := values[fi.key]
		if !s.set {
			if fi.required {
				errs.add(0, "%s is required", fi.key)
			}
			continue
		}
		if s.kind != yaml.ScalarNode || s.tag != "!!str" {
			errs.add(s.line, "%s: want a path such as %s, got %s", fi.key, strings.TrimSuffix(fi.key, ".path"), describe(*s))
			continue
		}
		if err := checkPath(s.value, fi.status); err != nil {
			errs.add(s.line, "%s: %v", fi.key, err)
			continue
		}
		*fi.path = s.value
	}
	for _, v := range []struct {
		key string
		s   scalar
		dst *string
	}{{"spec.action.active", m.Spec.Action.Active, &f.ActiveValue}, {"spec.action.inactive", m.Spec.Action.Inactive, &f.InactiveValue}} {
		switch {
		case !v.s.set:
			errs.add(0, "%s is required: the value of the action that means %s", v.key, strings.TrimPrefix(v.key, "spec.action."))
		case v.s.kind != yaml.ScalarNode || v.s.tag != "!!str" || v.s.value == "":
			errs.add(v.s.line, "%s: want a non-empty string, got %s (quote it)", v.key, describe(v.s))
		default:
			*v.dst = v.s.value
		}
	}
	if f.ActiveValue != "" && f.ActiveValue == f.InactiveValue {
		errs.add(m.Spec.Action.Inactive.line, "spec.action.inactive: %q is also the active value", f.InactiveValue)
	}
	strategyWords(&f, m.Spec.Action, &errs)
	overlaps(&f, values, &errs)
	if disk := [...]string{f.RootDiskClaim, f.RootDiskPhase, f.RootDiskCapacity}; (disk[0] == "" || disk[1] == "" || disk[2] == "") &&
		(disk[0] != "" || disk[1] != "" || disk[2] != "") {
		errs.add(m.Status.RootDisk.ClaimName.line, "status.rootDisk: give claimName, phase and capacity together, or none of them")
	}
	if f.RootDiskRequest != "" && f.RootDiskClaim == "" {
		errs.add(m.Status.RootDisk.Request.line, "status.rootDisk.request: give it with claimName, phase and capacity")
	}
	if err := errs.err(); err != nil {
		return Fields{}, err
	}
	return f, nil
}

// segment is what a path segment may hold. It is stricter than what JSON allows on purpose:
// these keys are used by gjson, by the status patch and by the CRD schema walk, and none of
// them then needs escaping.
var segment = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// checkPath validates one path: non-empty segments of letters, digits, '-' and '_', under
// status for a status field and outside it (and outside metadata) for a spec field.
func checkPath(p string, status bool) error {
	if p == "" {
		return errors.New("the path is empty")
	}
	segs := splitPath(p)
	for i, s := range segs {
		if s == "" {
			return fmt.Errorf("path %q has an empty segment (at %d)", p, i+1)
		}
		if !segment.MatchString(s) {
			bad := strings.TrimLeft(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
			return fmt.Errorf("path %q: segment %q has %q; use letters, digits, '-' and '_'", p, s, []rune(bad)[0])
		}
	}
	switch {
	case status && (segs[0] != "status" || len(segs) < 2):
		return fmt.Errorf("path %q is outside the status subtree: status fields are written through the /status subresource, which changes nothing else", p)
	case !status && segs[0] == "status":
		return fmt.Errorf("path %q is inside the status subtree, which only the controller writes", p)
	case !status && (segs[0] == "metadata" || segs[0] == "apiVersion" || segs[0] == "kind"):
		return fmt.Errorf("path %q is in the object's %s, not a spec field", p, segs[0])
	}
	return nil
}

// overlaps reports two fields at the same path, or one inside the other: they would
// overwrite each other in the object and the status patch.
func overlaps(f *Fields, values map[string]*scalar, errs *problems) {
	infos := f.infos()
	for i, a := range infos {
		for _, b := range infos[i+1:] {
			pa, pb := *a.path, *b.path
			if pa == "" || pb == "" {
				continue
			}
			la, lb := values[a.key].line, values[b.key].line
			switch {
			case pa == pb:
				errs.add(lb, "%s: path %q is also the path of %s (line %d)", b.key, pb, a.key, la)
			case strings.HasPrefix(pb, pa+"."):
				errs.add(lb, "%s: path %q is inside %q, the path of %s (line %d)", b.key, pb, pa, a.key, la)
			case strings.HasPrefix(pa, pb+"."):
				errs.add(la, "%s: path %q is inside %q, the path of %s (line %d)", a.key, pa, pb, b.key, lb)
			}
		}
	}
}

// describe names what a value is, for errors: `a mapping`, `the number 5`.
func describe(s scalar) string {
	switch s.kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch s.tag {
	case "!!str":
		return fmt.Sprintf("%q", s.value)
	case "!!int", "!!float":
		return "the number " + s.value
	case "!!bool":
		return "the boolean " + s.value
	}
	return fmt.Sprintf("%s %s", s.tag, s.value)
}

// problems collects validation errors and renders them, ordered by line, as one line.
type problems []struct {
	line int
	msg  string
}

func (p *problems) add(line int, format string, args ...any) {
	*p = append(*p, struct {
		line int
		msg  string
	}{line, fmt.Sprintf(format, args...)})
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	sort.SliceStable(p, func(i, j int) bool { return p[i].line < p[j].line })
	msgs := make([]string, len(p))
	for i, e := range p {
		msgs[i] = e.msg
		if e.line > 0 {
			msgs[i] = fmt.Sprintf("line %d: %s", e.line, e.msg)
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// yamlError turns yaml.v3's errors into one line in the file's own terms: its type errors
// name Go types ("field x not found in type schema.fileSpec") and span several lines.
func yamlError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return fmt.Errorf("not valid YAML: %s", strings.ReplaceAll(strings.TrimPrefix(err.Error(), "yaml: "), "\n", `\n`))
	}
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		if m := unknownField.FindStringSubmatch(e); m != nil {
			sec := sections[m[3]]
			e = fmt.Sprintf("%sunknown key %q in %s (known: %s)", m[1], m[2], sec.name, strings.Join(sec.keys, ", "))
		} else if m := wrongKind.FindStringSubmatch(e); m != nil {
			sec := sections[m[4]]
			got := kindWord[m[2]]
			if got == "" {
				got = "a value tagged " + m[2]
			}
			if m[3] != "" {
				got += fmt.Sprintf(" %q", m[3])
			}
			e = fmt.Sprintf("%s%s wants a mapping of %s, got %s", m[1], sec.name, strings.Join(sec.keys, ", "), got)
		}
		msgs[i] = strings.ReplaceAll(e, "\n", `\n`)
	}
	return errors.New(strings.Join(msgs, "; "))
}

var (
	unknownField = regexp.MustCompile("(?s)^(line \\d+: )field (.*) not found in type schema\\.(\\w+)$")
	wrongKind    = regexp.MustCompile("(?s)^(line \\d+: )cannot unmarshal (!\\S*?)(?: `(.*)`)? into schema\\.(\\w+)$")
	kindWord     = map[string]string{"!!str": "the string", "!!seq": "a list", "!!int": "the number", "!!float": "the number", "!!bool": "the boolean", "!!map": "a mapping"}
)

// section is a mapping of a field-map file, for errors about it.
type section struct {
	name string
	keys []string
}

// sections names each mapping type of the file by its place in the file and lists its keys.
var sections = func() map[string]section {
	out := map[string]section{}
	var walk func(t reflect.Type, name string)
	walk = func(t reflect.Type, name string) {
		var keys []string
		for i := range t.NumField() {
			fld := t.Field(i)
			if !fld.IsExported() {
				continue
			}
			key := strings.Split(fld.Tag.Get("yaml"), ",")[0]
			keys = append(keys, key)
			if fld.Type.Kind() == reflect.Struct && fld.Type != reflect.TypeOf(scalar{}) {
				walk(fld.Type, strings.TrimPrefix(name+"."+key, "."))
			}
		}
		if name == "" {
			name = "the top level"
		}
		out[t.Name()] = section{name: name, keys: keys}
	}
	walk(reflect.TypeOf(fileMap{}), "")
	return out
}()
