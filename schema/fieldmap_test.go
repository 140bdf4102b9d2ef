package schema

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"gopkg.in/yaml.v3"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// builtin returns the built-in field map of a version of this project's CRD.
func builtin(t testing.TB, version string) Fields {
	t.Helper()
	f, err := ForVersion(k8sschema.GroupVersion{Group: Group, Version: version})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// machineMap is the field map of the test CRD of another group.
func machineMap(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "machines", "fieldmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestBuiltinMaps(t *testing.T) {
	if got := strings.Join(BuiltinVersions(), ","); got != "v1,v1alpha1,v1beta1" {
		t.Fatalf("built-in versions %s", got)
	}
	f := builtin(t, "v1alpha1")
	if f.Action != "spec.action" || f.ActiveValue != "active" || f.InactiveValue != "inactive" || f.CPU != "spec.resource.cpu" ||
		f.Image != "spec.image" || f.UsageMemory != "status.server.usage.memory" || f.Conditions != "status.conditions" {
		t.Errorf("v1alpha1 map read as %+v", f)
	}
	// Conversion None: one layout, whatever version the controller watches.
	if b := builtin(t, "v1beta1"); b != f {
		t.Errorf("v1beta1 map differs from v1alpha1:\n%+v\n%+v", b, f)
	}
	// v1 has its own shape (docs/versions.md): the same fields at other paths, and KubeVirt's
	// run strategies for the action. Its status is where v1alpha1 has it.
	v1 := builtin(t, "v1")
	if v1.Action != "spec.runStrategy" || v1.ActiveValue != "Always" || v1.InactiveValue != "Halted" ||
		v1.CPU != "spec.resources.requests.cpu" || v1.Memory != "spec.resources.requests.memory" || v1.RootDisk != "spec.rootDisk.size" ||
		v1.Image != "spec.image" || v1.RootDiskStorageClass != "spec.rootDisk.storageClassName" || v1.RootDiskReclaimPolicy != "spec.rootDisk.reclaimPolicy" {
		t.Errorf("v1 map read as %+v", v1)
	}
	if f.RootDiskStorageClass != "spec.rootDiskStorageClassName" || f.RootDiskReclaimPolicy != "spec.rootDiskReclaimPolicy" ||
		f.RootDiskClaim != "status.rootDisk.claimName" || f.RootDiskPhase != "status.rootDisk.phase" || f.RootDiskCapacity != "status.rootDisk.capacity" ||
		!f.HasRootDiskStatus() {
		t.Errorf("v1alpha1's disk fields read as %+v", f)
	}
	spec := func(f Fields) Fields {
		f.Action, f.ActiveValue, f.InactiveValue, f.CPU, f.Memory, f.RootDisk, f.Image = "", "", "", "", "", "", ""
		f.RootDiskStorageClass, f.RootDiskReclaimPolicy = "", ""
		f.RerunOnFailureValue, f.OnceValue, f.ManualValue = "", "", ""
		return f
	}
	if spec(v1) != spec(f) {
		t.Errorf("v1 status paths differ from v1alpha1's:\n%+v\n%+v", v1, f)
	}
	for _, gv := range []k8sschema.GroupVersion{{Group: Group, Version: "v2"}, {Group: "compute.example.org", Version: "v1alpha1"}} {
		if _, err := ForVersion(gv); err == nil {
			t.Errorf("ForVersion(%s) found a map", gv)
		}
	}
	_, err := ForVersion(k8sschema.GroupVersion{Group: "compute.example.org", Version: "v1"})
	if want := `no built-in field map for group "compute.example.org" (built in: cloudnative.czs/v1, cloudnative.czs/v1alpha1, cloudnative.czs/v1beta1); give one with --schema-file`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

func TestParseFieldMapMachine(t *testing.T) {
	f, err := ParseFieldMap(machineMap(t))
	if err != nil {
		t.Fatal(err)
	}
	want := Fields{
		Action: "spec.power", ActiveValue: "On", InactiveValue: "Off",
		CPU: "spec.shape.cores", Memory: "spec.shape.ram", RootDisk: "spec.disks.boot.size", Image: "spec.bootImage",
		Phase: "status.state", Reason: "status.stateReason", Message: "status.detail",
		ServerName: "status.instance.name", ServerID: "status.instance.uid", ServerState: "status.instance.podPhase",
		UsageCPU: "status.instance.used.cores", UsageMemory: "status.instance.used.ram",
		ConsecutiveFailures: "status.restarts", ObservedGeneration: "status.seenGeneration",
		LastUpdateTime: "status.updatedAt", Conditions: "status.health",
	}
	if f != want {
		t.Errorf("got\n%+v\nwant\n%+v", f, want)
	}

	// The action's own words are what the spec is read with and what errors quote.
	for power, want := range map[string]string{`"On"`: "Always", `"Off"`: "Halted"} {
		vm, _ := Parse([]byte(`{"spec":{"power":`+power+`,"shape":{"cores":1,"ram":"1Gi"},"disks":{"boot":{"size":"1Gi"}}}}`), f)
		s, errs := vm.Spec()
		if len(errs) > 0 || string(s.RunStrategy) != want {
			t.Errorf("power %s read as %q %v", power, s.RunStrategy, errs)
		}
	}
	vm, _ := Parse([]byte(`{"spec":{"power":"active","shape":{"cores":1,"ram":"1Gi"},"disks":{"boot":{"size":"1Gi"}}}}`), f)
	if _, errs := vm.Spec(); len(errs) != 1 || errs[0].Error() != `spec.power: Unsupported value: "active": supported values: "On", "Off"` {
		t.Errorf("errors %v", errs)
	}
}

// validMap is a complete map; the error cases below change one thing in it.
const validMap = `spec:
  action: {path: spec.action, active: active, inactive: inactive}
  resource: {cpu: spec.resource.cpu, memory: spec.resource.memory, rootDisk: spec.resource.rootDisk}
status:
  phase: status.phase
  reason: status.reason
  message: status.message
  server: {name: status.server.name, id: status.server.id, state: status.server.state}
  consecutiveFailures: status.consecutiveFailures
  observedGeneration: status.observedGeneration
  conditions: status.conditions
`

func TestParseFieldMapErrors(t *testing.T) {
	tests := map[string]struct {
		old, new string // replace old with new in validMap; empty old: new is the whole map
		want     string // the exact error
	}{
		"unknown top-level key": {"status:\n", "statu: {}\nstatus:\n",
			`line 4: unknown key "statu" in the top level (known: spec, status)`},
		"unknown key in spec": {"  resource:", "  cores: spec.cores\n  resource:",
			`line 3: unknown key "cores" in spec (known: action, resource, image, rootDiskStorageClassName, rootDiskReclaimPolicy, evictionStrategy, placement)`},
		"unknown key in server": {"state: status.server.state}", "state: status.server.state, address: status.ip}",
			`line 8: unknown key "address" in status.server (known: name, id, state, usage, node, ip)`},
		"misspelt key": {"rootDisk: spec", "rootdisk: spec",
			`line 3: unknown key "rootdisk" in spec.resource (known: cpu, memory, rootDisk)`},
		// yaml.v3 panics merging into a struct a mapping with a list as a key.
		"a list as a key beside a merge": {"", "? [a]\n: b\n<<: {}\n",
			`not valid YAML: line 1: a key that is a list or a mapping is not supported`},
		"missing required": {"  phase: status.phase\n", "",
			`status.phase is required`},
		"missing section": {"status:\n", "statusx:\n",
			`line 4: unknown key "statusx" in the top level (known: spec, status)`},
		"missing action values": {"{path: spec.action, active: active, inactive: inactive}", "{path: spec.action}",
			`spec.action.active is required: the value of the action that means active; spec.action.inactive is required: the value of the action that means inactive`},
		"action as a string": {"{path: spec.action, active: active, inactive: inactive}", "spec.action",
			"line 2: spec.action wants a mapping of path, active, inactive, rerunOnFailure, once, manual, got the string \"spec.ac...\""},
		"action values equal": {"inactive: inactive}", "inactive: active}",
			`line 2: spec.action.inactive: "active" is also the active value`},
		"action value a bool": {"active: active,", "active: true,",
			`line 2: spec.action.active: want a non-empty string, got the boolean true (quote it)`},
		"path a number": {"cpu: spec.resource.cpu", "cpu: 5",
			`line 3: spec.resource.cpu: want a path such as spec.resource.cpu, got the number 5`},
		"path a mapping": {"  message: status.message", "  message: {path: status.message}",
			`line 7: status.message: want a path such as status.message, got a mapping`},
		"path null": {"cpu: spec.resource.cpu", "cpu: ~",
			`spec.resource.cpu is required`},
		"empty path": {"cpu: spec.resource.cpu", `cpu: ""`,
			`line 3: spec.resource.cpu: the path is empty`},
		"empty segment": {"cpu: spec.resource.cpu", "cpu: spec..cpu",
			`line 3: spec.resource.cpu: path "spec..cpu" has an empty segment (at 2)`},
		"trailing dot": {"  reason: status.reason", "  reason: status.reason.",
			`line 6: status.reason: path "status.reason." has an empty segment (at 3)`},
		"bad character": {"  reason: status.reason", "  reason: status.re/ason",
			`line 6: status.reason: path "status.re/ason": segment "re/ason" has '/'; use letters, digits, '-' and '_'`},
		"wildcard": {"  reason: status.reason", "  reason: status.*",
			`line 6: status.reason: path "status.*": segment "*" has '*'; use letters, digits, '-' and '_'`},
		"status path outside status": {"  phase: status.phase", "  phase: spec.phase",
			`line 5: status.phase: path "spec.phase" is outside the status subtree: status fields are written through the /status subresource, which changes nothing else`},
		"status path is the subtree": {"  phase: status.phase", "  phase: status",
			`line 5: status.phase: path "status" is outside the status subtree: status fields are written through the /status subresource, which changes nothing else`},
		"spec path inside status": {"cpu: spec.resource.cpu", "cpu: status.cpu",
			`line 3: spec.resource.cpu: path "status.cpu" is inside the status subtree, which only the controller writes`},
		"spec path in metadata": {"cpu: spec.resource.cpu", "cpu: metadata.labels.cpu",
			`line 3: spec.resource.cpu: path "metadata.labels.cpu" is in the object's metadata, not a spec field`},
		"same path twice": {"  message: status.message", "  message: status.reason",
			`line 7: status.message: path "status.reason" is also the path of status.reason (line 6)`},
		// Of two overlapping keys, the one Fields declares first is named as the other's path
		// (fieldKeys), whatever their order in the file: restartedAt before the server's node.
		"the server's node at another's path": {"state: status.server.state}\n", "state: status.server.state, node: status.server.host}\n  restartedAt: status.server.host\n",
			`line 8: status.server.node: path "status.server.host" is also the path of status.restartedAt (line 9)`},
		"nested paths": {"  message: status.message", "  message: status.server.name.text",
			`line 7: status.message: path "status.server.name.text" is inside "status.server.name", the path of status.server.name (line 8)`},
		"spec paths nested": {"memory: spec.resource.memory", "memory: spec.resource.cpu.mem",
			`line 3: spec.resource.memory: path "spec.resource.cpu.mem" is inside "spec.resource.cpu", the path of spec.resource.cpu (line 3)`},
		"several problems": {"  phase: status.phase\n  reason: status.reason", "  phase: spec.phase\n  reason: status..reason",
			`line 5: status.phase: path "spec.phase" is outside the status subtree: status fields are written through the /status subresource, which changes nothing else; line 6: status.reason: path "status..reason" has an empty segment (at 2)`},
		"part of the disk": {"  conditions: status.conditions\n", "  conditions: status.conditions\n  rootDisk: {claimName: status.disk.name, phase: status.disk.phase}\n",
			`line 12: status.rootDisk: give claimName, phase and capacity together, or none of them`},
		"the disk's request alone": {"  conditions: status.conditions\n", "  conditions: status.conditions\n  rootDisk: {request: status.disk.request}\n",
			`line 12: status.rootDisk.request: give it with claimName, phase and capacity`},
		"empty file":     {"", "", `the field map is empty`},
		"only a comment": {"", "# nothing\n", `the field map is empty`},
		"a list":         {"", "- spec\n", `line 1: the top level wants a mapping of spec, status, got a list`},
		"a string":       {"", "spec.cpu\n", "line 1: the top level wants a mapping of spec, status, got the string \"spec.cpu\""},
		"two documents":  {"", validMap + "---\n" + validMap, `more than one YAML document: a field map is one`},
		"bad yaml":       {"", "spec: [\n", `not valid YAML: line 1: did not find expected node content`},
		"tabs":           {"", "spec:\n\taction: x\n", `not valid YAML: line 2: found character that cannot start any token`},
		"duplicate key":  {"  phase: status.phase\n", "  phase: status.phase\n  phase: status.phase\n", `line 6: mapping key "phase" already defined at line 5`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := tc.new
			if tc.old != "" {
				if !strings.Contains(validMap, tc.old) {
					t.Fatalf("%q is not in the valid map", tc.old)
				}
				in = strings.Replace(validMap, tc.old, tc.new, 1)
			}
			_, err := ParseFieldMap([]byte(in))
			if err == nil {
				t.Fatalf("accepted:\n%s", in)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n%s\nwant\n%s", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
	if _, err := ParseFieldMap([]byte(validMap)); err != nil {
		t.Fatalf("the valid map is refused: %v", err)
	}
}

func TestLoadFieldMap(t *testing.T) {
	if _, err := LoadFieldMap(filepath.Join(t.TempDir(), "none.yaml")); err == nil || !strings.HasPrefix(err.Error(), "read field map: open ") {
		t.Errorf("missing file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("spec: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFieldMap(bad); err == nil || !strings.HasPrefix(err.Error(), "field map "+bad+": spec.action.path is required; ") {
		t.Errorf("bad file: %v", err)
	}
}

// FuzzParseFieldMap: whatever the YAML, ParseFieldMap returns a map or an error of one line,
// never panics, and a map it accepts renders a status patch.
func FuzzParseFieldMap(f *testing.F) {
	f.Add([]byte(validMap))
	f.Add(machineMap(f))
	f.Add([]byte("spec: &a\n  action: *a\n"))
	f.Add([]byte("status: !!binary aGVsbG8=\n"))
	f.Add([]byte("<<: {spec: {}}\n"))
	f.Add([]byte("spec: {action: {path: [1, {a: b}]}}\n"))
	f.Add([]byte("? [a]\n: b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fields, err := ParseFieldMap(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			return
		}
		if _, err := StatusPatch(fields, Status{Phase: PhaseActive, Server: &ServerStatus{Name: "a", Usage: &Usage{CPU: "1"}}}, "1"); err != nil {
			t.Errorf("accepted map cannot render a status: %v", err)
		}
	})
}

// TestStatusRoundTripMaps: under every kind of map, a status written as a patch reads back as
// the same status, except the optional fields a map leaves out (usage, lastUpdateTime), which
// read back empty. Were it otherwise the controller would rewrite the status forever.
func TestStatusRoundTripMaps(t *testing.T) {
	machine, err := ParseFieldMap(machineMap(t))
	if err != nil {
		t.Fatal(err)
	}
	minimal, err := ParseFieldMap([]byte(validMap))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := Status{
		Phase: PhaseFailed, Reason: "ServerFailed", Message: "it failed",
		Server:              &ServerStatus{Name: "vm-server", ID: "uid-1", State: "Failed", Usage: &Usage{CPU: "250m", Memory: "100Mi"}},
		ConsecutiveFailures: 3, ObservedGeneration: 4, LastUpdateTime: at,
		Conditions: []Condition{{Type: ConditionReady, Status: ConditionFalse, ObservedGeneration: 4, LastTransitionTime: at, Reason: "ServerFailed", Message: "it failed"}},
		RootDisk:   &RootDiskStatus{ClaimName: "vm-rootdisk", Phase: "Bound", Capacity: "40G", Request: "40G"},
	}
	for name, f := range map[string]Fields{"v1beta1": builtin(t, "v1beta1"), "v1": builtin(t, "v1"), "machine": machine, "minimal": minimal} {
		t.Run(name, func(t *testing.T) {
			patch, err := StatusPatch(f, st, "")
			if err != nil {
				t.Fatal(err)
			}
			merged, err := jsonpatch.MergePatch([]byte(`{"metadata":{"name":"a"}}`), patch)
			if err != nil {
				t.Fatal(err)
			}
			vm, err := Parse(merged, f)
			if err != nil {
				t.Fatal(err)
			}
			want := st
			if f.UsageCPU == "" {
				srv := *st.Server
				srv.Usage = nil
				want.Server = &srv
			}
			if f.LastUpdateTime == "" {
				want.LastUpdateTime = time.Time{}
			}
			switch {
			case !f.HasRootDiskStatus():
				want.RootDisk = nil
			case f.RootDiskRequest == "":
				disk := *st.RootDisk
				disk.Request = ""
				want.RootDisk = &disk
			}
			got := vm.Status()
			if !got.SameAs(want) || !got.LastUpdateTime.Equal(want.LastUpdateTime) {
				t.Errorf("patch %s read back as %+v", patch, got)
			}
		})
	}
}

// TestParseFieldMapEveryKey: each key of a map file, set on its own beside the required ones,
// is read into its own field of Fields and into no other, and the action's words into theirs.
// A key declared for Fields but not read from the file would be silently never set.
//
// Every field of Fields is filled by one key: a field no key names would never be set.
func TestParseFieldMapEveryKey(t *testing.T) {
	// The action's words, read by their own code (`field:"-"`): key -> the field of Fields.
	words := map[string]string{
		"spec.action.active":         "ActiveValue",
		"spec.action.inactive":       "InactiveValue",
		"spec.action.rerunOnFailure": "RerunOnFailureValue",
		"spec.action.once":           "OnceValue",
		"spec.action.manual":         "ManualValue",
	}
	word := func(f Fields, k string) string { return reflect.ValueOf(f).FieldByName(words[k]).String() }
	filled := map[string]string{}
	for k, name := range words {
		filled[name] = k
	}
	var keys []string
	for _, fk := range fieldKeys {
		keys = append(keys, fk.key)
		filled[reflect.TypeFor[Fields]().Field(fk.field).Name] = fk.key
	}
	for name := range reflect.TypeFor[Fields]().Fields() {
		if filled[name.Name] == "" {
			t.Errorf("Fields.%s: no key of a map file fills it (a `field` tag in fieldmap.go, or a word here)", name.Name)
		}
	}
	for key := range words {
		keys = append(keys, key)
	}
	for _, key := range keys {
		t.Run(key, func(t *testing.T) {
			// Each field's path is its own key, and each word its key's last segment.
			doc := map[string]any{}
			set := func(k string) {
				m, segs := doc, strings.Split(k, ".")
				for _, s := range segs[:len(segs)-1] {
					if m[s] == nil {
						m[s] = map[string]any{}
					}
					m = m[s].(map[string]any)
				}
				m[segs[len(segs)-1]] = k
				if words[k] != "" {
					m[segs[len(segs)-1]] = segs[len(segs)-1]
				}
			}
			want := map[string]bool{key: true, "spec.action.active": true, "spec.action.inactive": true}
			for _, fi := range new(Fields).infos() {
				// The disk's claimName, phase and capacity go together, and its request with them.
				if fi.required || strings.HasPrefix(key, "status.rootDisk.") && diskGroup(fi.key) {
					want[fi.key] = true
				}
			}
			for k := range want {
				set(k)
			}
			data, err := yaml.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			f, err := ParseFieldMap(data)
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			for _, fi := range f.infos() {
				if w := map[bool]string{true: fi.key}[want[fi.key]]; *fi.path != w {
					t.Errorf("%s read as %q, want %q", fi.key, *fi.path, w)
				}
			}
			for k := range words {
				if w := map[bool]string{true: k[strings.LastIndex(k, ".")+1:]}[want[k]]; word(f, k) != w {
					t.Errorf("%s read as %q, want %q", k, word(f, k), w)
				}
			}
		})
	}
}

// tagFields and the tag* structs stand for Fields and the file structs in TestDeriveFieldKeys.
type tagFields struct {
	A, B string
	N    int
}

type tagStatus struct {
	X scalar `yaml:"x" field:"B,required,quantity"`
}

type tagGood struct {
	W      scalar    `yaml:"w" field:"-"`
	Status tagStatus `yaml:"status"`
	Y      scalar    `yaml:"y" field:"A"`
}

// TestDeriveFieldKeys: the keys of a map file are read from the file structs' `field` tags,
// and a tag that cannot be is refused with what is wrong, for fieldKeys to stop every test
// run on it.
func TestDeriveFieldKeys(t *testing.T) {
	keys, err := deriveFieldKeys(reflect.TypeFor[tagGood](), reflect.TypeFor[tagFields]())
	want := []fieldKey{
		{key: "y", field: 0, file: []int{2}},
		{key: "status.x", status: true, required: true, want: typeQuantity, field: 1, file: []int{1, 0}},
	}
	if err != nil || !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %+v, %v; want %+v", keys, err, want)
	}

	tests := map[string]struct {
		file any
		want string
	}{
		"no such field": {struct {
			X scalar `yaml:"x" field:"C,required"`
		}{}, `x: field tag "C,required" names C, which schema.tagFields does not have`},
		"not a string": {struct {
			S tagStatus `yaml:"spec"`
			X scalar    `yaml:"x" field:"N"`
		}{}, `x: field tag "N" names schema.tagFields.N, a int: a path is a string`},
		"no tag": {struct {
			X scalar `yaml:"x"`
		}{}, "x has no field tag: name the schema.tagFields field it fills, or say - for a value read by its own code"},
		"filled twice": {struct {
			X scalar    `yaml:"x" field:"B"`
			S tagStatus `yaml:"status"`
		}{}, `status.x: field tag "B,required,quantity" names schema.tagFields.B, which x fills already`},
		"unknown attribute": {struct {
			X scalar `yaml:"x" field:"A,optional"`
		}{}, `x: field tag "A,optional": unknown or repeated "optional" (want required and at most one of conditions, integer, object, quantity)`},
		"two types": {struct {
			X scalar `yaml:"x" field:"A,quantity,integer"`
		}{}, `x: field tag "A,quantity,integer": unknown or repeated "integer" (want required and at most one of conditions, integer, object, quantity)`},
		"not a mapping": {struct {
			X []scalar `yaml:"x"`
		}{}, `x is a []schema.scalar: a key is a scalar or a mapping of them (a struct)`},
		"an empty attribute": {struct {
			X scalar `yaml:"x" field:"A,"`
		}{}, `x: field tag "A,": unknown or repeated "" (want required and at most one of conditions, integer, object, quantity)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			keys, err := deriveFieldKeys(reflect.TypeOf(tc.file), reflect.TypeFor[tagFields]())
			if err == nil || err.Error() != tc.want {
				t.Errorf("keys %+v, error %v; want the error %s", keys, err, tc.want)
			}
		})
	}
}
