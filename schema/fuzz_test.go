package schema

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"golang.org/x/tools/txtar"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	sigsyaml "sigs.k8s.io/yaml"
)

// The fuzz targets feed arbitrary objects, quantities and statuses through the views, the
// validation and the status patch. Their seeds are the VMs of the decision's golden cases,
// FuzzQuantity's list, and testdata/fuzz/<target>/ (which also keeps every input that once
// failed); plain `go test` runs all of them. To fuzz one target for longer (docs/reference/bad-input.md, Fuzzing):
//
//	go test ./schema -run '^$' -fuzz '^FuzzView$' -fuzztime 10m

// fuzzMaps are the layouts every target runs under: the built-in one (both versions share it)
// and the Machine map of testdata/machines, whose paths and action words differ.
func fuzzMaps(tb testing.TB) map[string]Fields {
	tb.Helper()
	machine, err := ParseFieldMap(machineMap(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return map[string]Fields{"v1alpha1": builtin(tb, "v1alpha1"), "machine": machine}
}

// goldenVMs returns the VMs of the decision's golden cases (testdata/decide) as JSON: base.yaml
// with each case's vm.patch.yaml (a JSON merge patch) applied, or a case's whole vm.yaml. The
// reconcile tests read the cases the same way (caseInput), refusing a key written twice.
func goldenVMs(tb testing.TB) [][]byte {
	tb.Helper()
	dir := filepath.Join("..", "testdata", "decide")
	files, err := filepath.Glob(filepath.Join(dir, "*.txtar"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden cases: %v", err)
	}
	baseYAML, err := os.ReadFile(filepath.Join(dir, "base.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	base, err := sigsyaml.YAMLToJSONStrict(baseYAML)
	if err != nil {
		tb.Fatalf("base.yaml: %v", err)
	}
	var out [][]byte
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			tb.Fatal(err)
		}
		for _, f := range ar.Files {
			if f.Name != "vm.yaml" && f.Name != "vm.patch.yaml" {
				continue
			}
			raw, err := sigsyaml.YAMLToJSONStrict(f.Data)
			if err != nil {
				tb.Fatalf("%s: %v", file, err)
			}
			if f.Name == "vm.patch.yaml" {
				if raw, err = jsonpatch.MergePatch(base, raw); err != nil {
					tb.Fatalf("%s: %v", file, err)
				}
			}
			out = append(out, raw)
		}
	}
	return out
}

// asCached returns data as the controller holds an object: decoded the way client-go decodes
// JSON into an unstructured object (integers as int64, other numbers as float64; the last of
// duplicate keys; invalid UTF-8 replaced). ok is false when data is not a JSON object.
func asCached(data []byte) (*unstructured.Unstructured, bool) {
	var obj map[string]any
	if err := utiljson.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, false
	}
	return &unstructured.Unstructured{Object: obj}, true
}

// decode makes a view of u from its JSON as encoding/json writes it, which is how the
// controller's informer caches it (vmcache.Compact: the same encoding, cut down to what a
// view reads, which vmcache's TestCompactReadsTheSame shows reads the same).
func decode(u *unstructured.Unstructured, f Fields) (VirtualMachine, error) {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return VirtualMachine{}, err
	}
	return ViewOf(raw, u.GetResourceVersion(), f), nil
}

// FuzzView: any bytes are refused by Parse or read without a panic; an object as the cache
// holds it decodes, its spec is either refused with true reasons at the spec's own paths or
// accepted as something a server can be made of, and its status survives being written back
// by the controller: read, rendered as the /status patch and read again, it says the same
// thing, and the write changes nothing outside the status.
func FuzzView(f *testing.F) {
	for _, raw := range goldenVMs(f) {
		f.Add(raw)
	}
	maps := fuzzMaps(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, fields := range maps {
			if vm, err := Parse(data, fields); err == nil {
				readAll(vm)
				checkOnePass(t, name, vm)
			}
			u, ok := asCached(data)
			if !ok {
				continue
			}
			vm, err := decode(u, fields)
			if err != nil {
				t.Fatalf("%s: decode a cached object: %v", name, err)
			}
			readAll(vm)
			checkSpec(t, name, vm)
			checkStatusWriteBack(t, name, vm)
		}
	})
}

// readAll reads every field a view offers.
func readAll(vm VirtualMachine) {
	_, _, _, _, _, _ = vm.APIVersion(), vm.Kind(), vm.Namespace(), vm.Name(), vm.UID(), vm.ResourceVersion()
	_, _, _, _ = vm.Generation(), vm.Deleting(), vm.Finalizers(), vm.HasFinalizer(Finalizer)
	_, _ = vm.Spec()
	_, _ = vm.Status(), vm.Settled()
}

// checkOnePass checks the reads made in one pass over the object against gjson's, path by
// path: getAll against get for every path of the map (and some that end or pass through
// arrays, objects and absent keys), Status against the status read field by field.
func checkOnePass(t *testing.T, layout string, vm VirtualMachine) {
	t.Helper()
	f := vm.Fields()
	paths := []string{f.Action, f.CPU, f.Memory, f.RootDisk, f.Image, f.Phase, f.Reason, f.Message, f.ServerName, f.ServerID,
		f.ServerState, f.UsageCPU, f.UsageMemory, f.ConsecutiveFailures, f.LastUpdateTime, f.ObservedGeneration, f.Conditions,
		f.RestartedAt, f.RootDiskStorageClass, f.RootDiskReclaimPolicy, f.RootDiskClaim, f.RootDiskPhase, f.RootDiskCapacity,
		"metadata", "metadata.finalizers.0", "status", "status.conditions.0.type", "spec.x.y.z", "kind.x", ""}
	got := make([]gjson.Result, len(paths))
	vm.getAll(got, paths...)
	for i, p := range paths {
		want := gjson.Result{}
		if p != "" {
			want = vm.get(p)
		}
		if got[i].Type != want.Type || got[i].Raw != want.Raw || got[i].Str != want.Str || got[i].Num != want.Num {
			t.Errorf("%s: %q read in one pass as %#v, path by path as %#v", layout, p, got[i], want)
		}
	}
	if got, want := vm.Status(), statusByPath(vm); !reflect.DeepEqual(got, want) {
		t.Errorf("%s: status read in one pass:\n%#v\npath by path:\n%#v", layout, got, want)
	}
}

// statusByPath reads the status one gjson Get per field, as Status did before it read them
// in one pass: the reference that Status is checked against.
func statusByPath(vm VirtualMachine) Status {
	f := vm.fields
	st := Status{
		Phase:               Phase(vm.str(f.Phase)),
		Reason:              vm.str(f.Reason),
		Message:             vm.str(f.Message),
		ConsecutiveFailures: int(vm.get(f.ConsecutiveFailures).Int()),
		ObservedGeneration:  vm.get(f.ObservedGeneration).Int(),
		LastUpdateTime:      parseTime(vm.str(f.LastUpdateTime)),
	}
	if f.RestartedAt != "" {
		st.RestartedAt = vm.str(f.RestartedAt)
	}
	if name, id, state := vm.get(f.ServerName), vm.get(f.ServerID), vm.get(f.ServerState); name.Exists() || id.Exists() || state.Exists() {
		st.Server = &ServerStatus{Name: name.String(), ID: id.String(), State: state.String()}
	}
	if f.ServerNode != "" || f.ServerIP != "" {
		if node, ip := vm.get(f.ServerNode), vm.get(f.ServerIP); node.Exists() && f.ServerNode != "" || ip.Exists() && f.ServerIP != "" {
			if st.Server == nil {
				st.Server = &ServerStatus{}
			}
			if f.ServerNode != "" {
				st.Server.Node = node.String()
			}
			if f.ServerIP != "" {
				st.Server.IP = ip.String()
			}
		}
	}
	if cpu, mem := vm.get(f.UsageCPU), vm.get(f.UsageMemory); cpu.Exists() || mem.Exists() {
		if st.Server == nil {
			st.Server = &ServerStatus{}
		}
		st.Server.Usage = &Usage{CPU: cpu.String(), Memory: mem.String()}
	}
	if f.RootDiskClaim != "" {
		if claim, phase, capacity := vm.get(f.RootDiskClaim), vm.get(f.RootDiskPhase), vm.get(f.RootDiskCapacity); claim.Exists() || phase.Exists() || capacity.Exists() {
			st.RootDisk = &RootDiskStatus{ClaimName: claim.String(), Phase: phase.String(), Capacity: capacity.String()}
		}
	}
	st.RunStrategyStatus = RunStrategyStatus{NextRetryTime: parseTime(vm.str(f.NextRetryTime)),
		StartRequestedAt: vm.str(f.StartRequestedAt), StopRequestedAt: vm.str(f.StopRequestedAt)}
	if f.Migration != "" {
		st.Migration = migrationOf(vm.get(f.Migration))
	}
	for _, c := range vm.get(f.Conditions).Array() {
		st.Conditions = append(st.Conditions, Condition{
			Type:               c.Get("type").String(),
			Status:             ConditionStatus(c.Get("status").String()),
			ObservedGeneration: c.Get("observedGeneration").Int(),
			LastTransitionTime: parseTime(c.Get("lastTransitionTime").String()),
			Reason:             c.Get("reason").String(),
			Message:            c.Get("message").String(),
		})
	}
	return st
}

// checkSpec checks the spec's validation: errors only at the map's spec paths, one per field,
// each refusal of a quantity for a reason that holds; an accepted spec is a server's.
func checkSpec(t *testing.T, layout string, vm VirtualMachine) {
	t.Helper()
	f := vm.Fields()
	spec, errs := vm.Spec()
	quantities := rulesOf(f)
	seen := map[string]bool{}
	for _, e := range errs {
		if seen[e.Field] {
			t.Errorf("%s: two errors for %s: %v", layout, e.Field, errs)
		}
		seen[e.Field] = true
		if rule, ok := quantities[e.Field]; ok {
			if why := rule.falseRefusal(vm.get(e.Field), e.Detail); why != "" {
				t.Errorf("%s: %s refused: %v; but %s", layout, e.Field, e, why)
			}
			continue
		}
		if f.EvictionStrategy != "" && e.Field == f.EvictionStrategy {
			if v := vm.get(f.EvictionStrategy); v.Type == gjson.String && EvictionStrategy(v.Str).Valid() {
				t.Errorf("%s: %s refused: %v; but %q is a strategy", layout, e.Field, e, v.Str)
			}
			continue
		}
		if e.Field != f.Action && (f.Image == "" || e.Field != f.Image) && !underPlacement(f, e.Field) {
			t.Errorf("%s: error for %s, which is not a spec path of the map: %v", layout, e.Field, e)
		}
	}
	if len(errs) > 0 {
		return
	}
	if w := f.StrategyWord(spec.RunStrategy); w == "" || !slices.Contains(RunStrategies, spec.RunStrategy) {
		t.Errorf("%s: accepted action %q", layout, spec.RunStrategy)
	}
	for path, q := range map[string]resource.Quantity{f.CPU: spec.CPU, f.Memory: spec.Memory, f.RootDisk: spec.RootDisk} {
		if why := quantities[path].wrongAcceptance(q); why != "" {
			t.Errorf("%s: %s = %s accepted, but %s", layout, path, q.String(), why)
		}
	}
	if img := vm.get(f.Image); f.Image != "" && img.Exists() && spec.Image != img.String() {
		t.Errorf("%s: image %q read as %q", layout, img.String(), spec.Image)
	}
	if s := spec.EvictionStrategy; s != "" && (!s.Valid() || vm.get(f.EvictionStrategy).Str != string(s)) {
		t.Errorf("%s: eviction strategy %q accepted, read as %q", layout, vm.get(f.EvictionStrategy).Raw, s)
	}
}

// quantityRule is what a quantity field must be: at least min, at most what the resource
// model holds (Kubernetes counts cpu in int64 millicores and bytes in an int64: beyond that a
// scheduler or kubelet overflows), and a whole number when it counts bytes.
type quantityRule struct {
	min   string
	bytes bool
}

// rulesOf maps each quantity path of f to its rule.
func rulesOf(f Fields) map[string]quantityRule {
	return map[string]quantityRule{f.CPU: {"1m", false}, f.Memory: {MinMemory, true}, f.RootDisk: {"1", true}}
}

// tooLarge tells whether q is beyond what the resource model holds. Quantities with huge
// exponents are compared as floats first: comparing them exactly takes seconds.
func (r quantityRule) tooLarge(q resource.Quantity) bool {
	f := q.AsApproximateFloat64()
	switch {
	case math.IsInf(f, 1) || f > 1e19:
		return true
	case f < 9e15:
		return false
	case r.bytes:
		return q.Cmp(*resource.NewQuantity(math.MaxInt64, resource.BinarySI)) > 0
	default:
		return q.Cmp(*resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)) > 0
	}
}

// tooSmall tells whether q is below the rule's minimum. Quantities far from it either way are
// compared as floats: comparing one with a huge exponent exactly takes seconds.
func (r quantityRule) tooSmall(q resource.Quantity) bool {
	m := resource.MustParse(r.min)
	if f, min := q.AsApproximateFloat64(), m.AsApproximateFloat64(); f < min/2 || f > min*2 {
		return f < min/2
	}
	return q.Cmp(m) < 0
}

// valid tells whether text is a quantity this field takes.
func (r quantityRule) valid(text string) bool {
	if !readable(text) {
		return false
	}
	q, err := resource.ParseQuantity(text)
	return err == nil && q.Sign() > 0 && !r.tooSmall(q) && !r.tooLarge(q) && (!r.bytes || whole(q))
}

// wrongAcceptance says what is wrong with an accepted quantity, or "". A server is made of
// q.String(): the pod carries that text, and the controller compares the pod's quantity with
// the spec's by value, so the text must read back as the same value or the server would be
// replaced forever.
func (r quantityRule) wrongAcceptance(q resource.Quantity) string {
	switch {
	case r.tooSmall(q):
		return "it is below " + r.min
	case r.tooLarge(q):
		return "it is beyond what the resource model holds (int64 millicores of cpu, int64 bytes)"
	case r.bytes && !whole(q):
		return "it is not a whole number of bytes"
	}
	text := q.String()
	back, err := resource.ParseQuantity(text)
	if err != nil || back.Cmp(q) != 0 {
		return "its text " + text + " does not read back as the same value"
	}
	data, err := json.Marshal(q)
	var again resource.Quantity
	if err != nil || json.Unmarshal(data, &again) != nil || again.Cmp(q) != 0 {
		return "it does not survive JSON"
	}
	return ""
}

// exponentText is a decimal exponent ending a quantity's text.
var exponentText = regexp.MustCompile(`[eE][+-]?([0-9]+)$`)

// readable is the bound on a quantity's text: at most 100 characters, and an exponent, if it
// ends with one, of at most 200 either way.
func readable(text string) bool {
	if len(text) > 100 {
		return false
	}
	m := exponentText.FindStringSubmatch(text)
	if m == nil {
		return true
	}
	n, err := strconv.Atoi(m[1])
	return err == nil && n <= 200
}

// falseRefusal says why the reason given for refusing the value v is false, or "".
func (r quantityRule) falseRefusal(v gjson.Result, detail string) string {
	var text string
	switch v.Type {
	case gjson.String:
		text = v.Str
	case gjson.Number:
		text = v.Raw
	default:
		return "" // absent, or not a string or number: no quantity to judge
	}
	if strings.HasPrefix(detail, "longer than") || strings.HasPrefix(detail, "its exponent is out of range") {
		if readable(text) {
			return text + " is within the bounds on a quantity's text"
		}
		return ""
	}
	q, err := resource.ParseQuantity(text)
	switch {
	case strings.HasPrefix(detail, "not a quantity"):
		if err == nil {
			return text + " is a quantity"
		}
	case err != nil:
		return text + " is not a quantity, and the reason does not say so"
	case detail == "must be greater than zero":
		if q.Sign() > 0 {
			return text + " is greater than zero"
		}
	case strings.HasPrefix(detail, "must be at least "):
		if !r.tooSmall(q) {
			return text + " is at least " + r.min
		}
	case detail == "must be a whole number of bytes":
		if whole(q) {
			return text + " is a whole number"
		}
	case r.valid(text):
		return text + " is valid"
	}
	return ""
}

// whole reports whether q is an integer, by exact decimal arithmetic. (ParseQuantity keeps at
// most nine decimal places, so the power of ten stays small.)
func whole(q resource.Quantity) bool {
	c := q.DeepCopy()
	d := c.AsDec()
	if d.Scale() <= 0 {
		return true
	}
	ten := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale())), nil)
	return new(big.Int).Mod(d.UnscaledBig(), ten).Sign() == 0
}

// checkStatusWriteBack writes the status the view reads back as the controller writes a
// status, and reads it again.
func checkStatusWriteBack(t *testing.T, layout string, vm VirtualMachine) {
	t.Helper()
	st := vm.Status()
	if !st.SameAs(st) {
		t.Fatalf("%s: a status is not the same as itself: %+v", layout, st)
	}
	patch, err := StatusPatch(vm.Fields(), st, vm.ResourceVersion())
	if err != nil {
		t.Fatalf("%s: render the status: %v", layout, err)
	}
	back := writeStatus(t, vm, patch)
	if got := back.Status(); !got.SameAs(st) {
		a, _ := json.Marshal(st)
		b, _ := json.Marshal(got)
		t.Errorf("%s: status written back reads differently (it would be rewritten forever)\nread  %s\npatch %s\nback  %s", layout, a, patch, b)
	}
}

// writeStatus applies a status patch to the view's object as the /status subresource does:
// a JSON merge patch of which only the status counts. It fails the test if the patch
// reaches outside the status (and the resourceVersion precondition).
func writeStatus(t *testing.T, vm VirtualMachine, patch []byte) VirtualMachine {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(patch, &top); err != nil {
		t.Fatalf("patch %s is not a JSON object: %v", patch, err)
	}
	for k, v := range top {
		switch {
		case k == "status":
		case k == "metadata" && string(v) == `{"resourceVersion":`+mustJSON(t, vm.ResourceVersion())+`}`:
		default:
			t.Errorf("status patch %s sets %s outside the status", patch, k)
		}
	}
	merged, err := jsonpatch.MergePatch(vm.JSON(), patch)
	if err != nil {
		t.Fatalf("merge %s: %v", patch, err)
	}
	back, err := Parse(merged, vm.Fields())
	if err != nil {
		t.Fatal(err)
	}
	s1, e1 := vm.Spec()
	s2, e2 := back.Spec()
	if !sameSpec(s1, s2) || e1.ToAggregate() == nil != (e2.ToAggregate() == nil) ||
		vm.Name() != back.Name() || vm.Generation() != back.Generation() || vm.Deleting() != back.Deleting() ||
		strings.Join(vm.Finalizers(), ",") != strings.Join(back.Finalizers(), ",") {
		t.Errorf("the status patch %s changed what the VM asks for", patch)
	}
	return back
}

func sameSpec(a, b Spec) bool {
	return a.RunStrategy == b.RunStrategy && a.Image == b.Image && a.CPU.Cmp(b.CPU) == 0 && a.Memory.Cmp(b.Memory) == 0 && a.RootDisk.Cmp(b.RootDisk) == 0
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// FuzzQuantity puts one text into each quantity field, as a string and, when it is an
// integer the API server stores as one, as a number: it is accepted exactly when it is a
// quantity of at least the field's minimum, at most what the resource model holds, and whole
// for bytes; it is refused for a reason that holds; and an accepted one reads back the same
// from the text a server is made with.
func FuzzQuantity(f *testing.F) {
	for _, s := range []string{"2", "500m", "1m", "0.9m", "0", "-1", "+1", "1Ki", "0.5Ki", "1.5", "1e-3", "1P", "9223372036854775807m", ".5", "5.", "1e", "Ki", "1 Gi", "١", "0x10", "1_000",
		"1e-99999999", "1e2147483648", "1e4294967297", "1e200", "1e201", "1E", "1Ei", "1e+3", "1E-3", "0e00000000000", "1e0000000000003"} {
		f.Add(s)
	}
	maps := fuzzMaps(f)
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) {
			return // the API server stores UTF-8 only
		}
		values := []string{mustJSON(t, text)}
		if n, ok := asInteger(text); ok {
			values = append(values, n)
		}
		for name, fields := range maps {
			for path, rule := range rulesOf(fields) {
				for _, v := range values {
					vm := vmWith(t, fields, path, v)
					spec, errs := vm.Spec()
					q := map[string]resource.Quantity{fields.CPU: spec.CPU, fields.Memory: spec.Memory, fields.RootDisk: spec.RootDisk}[path]
					valid := rule.valid(text)
					switch {
					case len(errs) == 0:
						why := rule.wrongAcceptance(q)
						if why == "" && !valid {
							why = "it is not a quantity this field takes"
						}
						if why != "" {
							t.Errorf("%s: %s = %s accepted as %s, but %s", name, path, v, q.String(), why)
						}
					case len(errs) != 1 || errs[0].Field != path:
						t.Errorf("%s: %s = %s: errors %v, want one for %s", name, path, v, errs, path)
					case valid:
						t.Errorf("%s: %s = %s refused: %v", name, path, v, errs[0])
					default:
						if why := rule.falseRefusal(vm.get(path), errs[0].Detail); why != "" {
							t.Errorf("%s: %s = %s refused: %v; but %s", name, path, v, errs[0], why)
						}
					}
				}
			}
		}
	})
}

// asInteger returns text as a JSON integer if the API server would store it as one (it fits
// an int64), in the form the cache holds it.
func asInteger(text string) (string, bool) {
	n, ok := new(big.Int).SetString(text, 10)
	if !ok || !n.IsInt64() || strings.TrimLeft(text, "+-0123456789") != "" {
		return "", false
	}
	return n.String(), true
}

// vmWith returns a valid VM of the layout with the field at path set to the JSON value v.
func vmWith(t *testing.T, f Fields, path, v string) VirtualMachine {
	t.Helper()
	obj := map[string]any{}
	set := func(p string, raw string) {
		var val any
		if err := utiljson.Unmarshal([]byte(raw), &val); err != nil {
			t.Fatalf("value %s: %v", raw, err)
		}
		if err := setPath(obj, p, val); err != nil {
			t.Fatal(err)
		}
	}
	set(f.Action, mustJSON(t, f.activeValue()))
	for _, p := range []string{f.CPU, f.Memory, f.RootDisk} {
		if p == path {
			set(p, v)
		} else {
			set(p, `"1Gi"`)
		}
	}
	vm, err := decode(&unstructured.Unstructured{Object: obj}, f)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// FuzzStatusPatch renders arbitrary statuses as the /status patch, under each layout, onto a
// VM without a status and onto one whose status says otherwise: what is read back is the
// status written, the patch touches nothing but the status, a status without a server
// leaves none behind, and a migration record replaces the one there wholly; and the patch is byte for byte what json.Marshal writes for its tree of
// maps (marshalPatch).
func FuzzStatusPatch(f *testing.F) {
	maps := fuzzMaps(f)
	f.Fuzz(func(t *testing.T, phase, reason, message string, hasServer bool, name, id, state string, hasUsage bool, cpu, memory string,
		failures int, generation, updated int64, ctype, cstatus, creason, cmessage string, cgeneration, ctime int64, rv string) {
		for _, s := range []string{phase, reason, message, name, id, state, cpu, memory, ctype, cstatus, creason, cmessage, rv} {
			if !utf8.ValidString(s) {
				return // statuses are JSON: UTF-8 only
			}
		}
		st := Status{Phase: Phase(phase), Reason: reason, Message: message, ConsecutiveFailures: failures,
			ObservedGeneration: generation, LastUpdateTime: time.Unix(updated, 0).UTC()}
		if hasServer {
			st.Server = &ServerStatus{Name: name, ID: id, State: state}
			if hasUsage {
				st.Server.Usage = &Usage{CPU: cpu, Memory: memory}
			}
		}
		if ctype != "" || cstatus != "" {
			st.Conditions = []Condition{{Type: ctype, Status: ConditionStatus(cstatus), Reason: creason, Message: cmessage,
				ObservedGeneration: cgeneration, LastTransitionTime: time.Unix(ctime, 0).UTC()}}
		}
		if !hasServer {
			// A migration refused: a record without nodes, written onto one with them
			// (otherStatus).
			st.Migration = &MigrationStatus{RequestedAt: "r" + reason, Phase: MigrationRefused, Message: message}
		}
		for layout, fields := range maps {
			patch, err := StatusPatch(fields, st, rv)
			if err != nil {
				t.Fatalf("%s: render %+v: %v", layout, st, err)
			}
			if want := marshalPatch(t, statusValues(fields, st, rv)); !bytes.Equal(patch, want) {
				t.Errorf("%s: wrote %s\nwhere json.Marshal writes %s", layout, patch, want)
			}
			for base, old := range map[string]Status{"no status": {}, "another status": otherStatus(st)} {
				vm := withStatus(t, fields, old, rv)
				back := writeStatus(t, vm, patch).Status()
				want := st
				if fields.Migration == "" {
					want.Migration = nil // a layout without the record
				}
				if st.Server != nil && st.Server.Usage == nil && old.Server != nil && st.Phase == PhaseActive {
					// Usage has a writer of its own: an Active VM's status that carries none
					// leaves the reported usage as it is (one that is not Active reports
					// none, and its write removes it).
					srv := *st.Server
					srv.Usage = old.Server.Usage
					want.Server = &srv
				}
				if !back.SameAs(want) {
					a, _ := json.Marshal(want)
					b, _ := json.Marshal(back)
					t.Errorf("%s onto %s: wrote %s\nas %s\nread back %s", layout, base, a, patch, b)
				}
				if st.Server == nil && back.Server != nil {
					t.Errorf("%s onto %s: a status without a server read back with %+v", layout, base, back.Server)
				}
			}
		}
	})
}

// otherStatus is a status that differs from st in every field, with usage.
func otherStatus(st Status) Status {
	at := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	return Status{Phase: Phase(string(st.Phase) + "x"), Reason: st.Reason + "x", Message: st.Message + "x",
		Server:              &ServerStatus{Name: "old-server", ID: "old-id", State: "Old", Usage: &Usage{CPU: "1", Memory: "1Gi"}},
		ConsecutiveFailures: st.ConsecutiveFailures + 1, ObservedGeneration: st.ObservedGeneration + 1, LastUpdateTime: at,
		Conditions: []Condition{{Type: "Other", Status: ConditionUnknown, Reason: "Old", Message: "old", LastTransitionTime: at},
			{Type: ConditionReady, Status: ConditionFalse, Reason: "Old", Message: "old", LastTransitionTime: at}},
		Migration: &MigrationStatus{RequestedAt: "old", Phase: MigrationSucceeded, SourceNode: "old-a", TargetNode: "old-b", Message: "old"}}
}

// withStatus is a VM of the layout that carries st, written as the controller writes one.
func withStatus(t *testing.T, f Fields, st Status, rv string) VirtualMachine {
	t.Helper()
	base := map[string]any{"metadata": map[string]any{"name": "vm", "resourceVersion": rv, "generation": int64(1)}}
	for _, p := range []string{f.CPU, f.Memory, f.RootDisk} {
		if err := setPath(base, p, "1Gi"); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := json.Marshal(base)
	if err != nil {
		t.Fatal(err)
	}
	if st.Phase != "" {
		patch, err := StatusPatch(f, st, "")
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = jsonpatch.MergePatch(raw, patch); err != nil {
			t.Fatal(err)
		}
	}
	vm, err := Parse(raw, f)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}
