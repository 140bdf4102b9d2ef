package schema

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// ReclaimPolicy says what becomes of a VM's disk when the VM is deleted.
type ReclaimPolicy string

// The reclaim policies, in the words of a PersistentVolume's reclaim policy.
const (
	ReclaimDelete ReclaimPolicy = "Delete" // the disk goes with the VM (the default)
	ReclaimRetain ReclaimPolicy = "Retain" // the disk stays, for a later VM of the same name to adopt
)

// Spec is the validated desired state of a VirtualMachine.
type Spec struct {
	// RunStrategy says when the VM has a running server (runstrategy.go).
	RunStrategy RunStrategy
	CPU         resource.Quantity
	Memory      resource.Quantity
	RootDisk    resource.Quantity
	Image       string // empty: the controller's default image
	// StorageClass is the class of the VM's disk; empty: the cluster's default.
	StorageClass string
	// ReclaimPolicy is what becomes of the disk when the VM is deleted: ReclaimDelete when
	// the VM does not say; empty when what it says is not a policy (an error), which a
	// decision must not read as Delete.
	ReclaimPolicy ReclaimPolicy
	// ReclaimPolicySet says the VM names its reclaim policy. A VM that does not is read as
	// ReclaimDelete for a disk of its own making, but keeps a disk that is kept (one it
	// adopted from an earlier VM of its name, or one marked kept): only a policy the VM
	// names as Delete lets a kept disk go with it.
	ReclaimPolicySet bool
	// EvictionStrategy is what an eviction of the server does (eviction.go); empty when the
	// VM does not say, and the controller's --eviction-strategy applies.
	EvictionStrategy EvictionStrategy
	// Placement is where the server may run (placement.go); nil: anywhere.
	Placement *backend.Placement
}

// Spec decodes and validates the spec. Every problem is reported, each with its field path,
// the offending value and why it is refused, so that one status message tells the user all
// there is to fix.
func (vm VirtualMachine) Spec() (Spec, field.ErrorList) {
	f := vm.fields
	var errs field.ErrorList
	var s Spec

	// The run strategy's values are the CRD's own words (Fields.StrategyWord), so errors
	// quote those, not this project's.
	var v [9]gjson.Result
	vm.getAll(v[:], f.Action, f.CPU, f.Memory, f.RootDisk, f.Image, f.RootDiskStorageClass, f.RootDiskReclaimPolicy, f.EvictionStrategy, f.Placement)
	switch a := v[0]; {
	case !a.Exists():
		errs = append(errs, field.Required(fieldPath(f.Action), "must be one of "+quoted(f.StrategyWords())))
	case a.Type != gjson.String:
		errs = append(errs, field.Invalid(fieldPath(f.Action), a.Raw, "must be a string"))
	default:
		rs, ok := f.StrategyOf(a.Str)
		if !ok {
			errs = append(errs, field.NotSupported(fieldPath(f.Action), a.Str, f.StrategyWords()))
		}
		s.RunStrategy = rs
	}

	var err *field.Error
	if s.CPU, err = quantity(f.CPU, v[1], "1m", false); err != nil {
		errs = append(errs, err)
	}
	if s.Memory, err = quantity(f.Memory, v[2], MinMemory, true); err != nil {
		errs = append(errs, err)
	}
	if s.RootDisk, err = quantity(f.RootDisk, v[3], "1", true); err != nil {
		errs = append(errs, err)
	}

	if f.Image != "" {
		switch img := v[4]; {
		case !img.Exists():
		case img.Type != gjson.String:
			errs = append(errs, field.Invalid(fieldPath(f.Image), img.Raw, "must be a string"))
		default:
			s.Image = img.Str
		}
	}

	switch class := v[5]; {
	case f.RootDiskStorageClass == "" || !class.Exists():
	case class.Type != gjson.String:
		errs = append(errs, field.Invalid(fieldPath(f.RootDiskStorageClass), class.Raw, "must be a string"))
	default:
		for _, msg := range validation.IsDNS1123Subdomain(class.Str) {
			errs = append(errs, field.Invalid(fieldPath(f.RootDiskStorageClass), class.Str, "not a StorageClass name: "+msg))
		}
		s.StorageClass = class.Str
	}
	switch p := v[6]; {
	case f.RootDiskReclaimPolicy == "" || !p.Exists():
		s.ReclaimPolicy = ReclaimDelete
	case p.Type != gjson.String:
		s.ReclaimPolicySet = true
		errs = append(errs, field.Invalid(fieldPath(f.RootDiskReclaimPolicy), p.Raw, "must be a string"))
	case p.Str == string(ReclaimDelete), p.Str == string(ReclaimRetain):
		s.ReclaimPolicy, s.ReclaimPolicySet = ReclaimPolicy(p.Str), true
	default:
		s.ReclaimPolicySet = true
		errs = append(errs, field.NotSupported(fieldPath(f.RootDiskReclaimPolicy), p.Str, []string{string(ReclaimDelete), string(ReclaimRetain)}))
	}
	if s.EvictionStrategy, err = evictionStrategy(f.EvictionStrategy, v[7]); err != nil {
		errs = append(errs, err)
	}
	placed, perrs := placement(f.Placement, v[8])
	s.Placement, errs = placed, append(errs, perrs...)
	return s, errs
}

// quantity reads a resource.Quantity, the value v at path, written either as a JSON number (2)
// or a string ("500m"), and requires it to be at least min; bytes quantities must also be
// whole numbers. A bytes quantity below min written without a unit is most likely a unit
// forgotten, and the refusal says what it is and, up to maxMebibytesHint, what was probably
// meant; above that, what min is in bytes.
func quantity(path string, v gjson.Result, min string, wholeBytes bool) (resource.Quantity, *field.Error) {
	fp := func() *field.Path { return fieldPath(path) } // for an error only: most quantities are valid
	var text string
	switch v.Type {
	case gjson.Null:
		if !v.Exists() {
			return resource.Quantity{}, field.Required(fp(), "a quantity such as "+example(wholeBytes))
		}
		return resource.Quantity{}, field.Invalid(fp(), nil, "must be a quantity such as "+example(wholeBytes))
	case gjson.Number:
		text = v.Raw
	case gjson.String:
		text = v.Str
	default:
		return resource.Quantity{}, field.Invalid(fp(), v.Raw, "must be a quantity such as "+example(wholeBytes))
	}
	if why := unreadable(text); why != "" {
		return resource.Quantity{}, field.Invalid(fp(), text, why+"; write it like "+example(wholeBytes))
	}
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return resource.Quantity{}, field.Invalid(fp(), text, "not a quantity; write it like "+example(wholeBytes))
	}
	if q.Sign() <= 0 {
		return resource.Quantity{}, field.Invalid(fp(), text, "must be greater than zero")
	}
	// Before any exact comparison: a huge exponent ("1e99999999") passes admission's pattern,
	// and comparing it exactly would take minutes of a worker's time.
	if tooLarge(q, wholeBytes) {
		limit := "9223372036854775807m (int64 millicores)"
		if wholeBytes {
			limit = "9223372036854775807 bytes (int64)"
		}
		return resource.Quantity{}, field.Invalid(fp(), text, "must be at most "+limit)
	}
	if m := resource.MustParse(min); q.Cmp(m) < 0 {
		why := "must be at least " + min
		if wholeBytes && strings.Trim(text, "0123456789") == "" { // a number without a unit: bytes
			if q.Value() <= maxMebibytesHint {
				why += fmt.Sprintf("; %s is %s bytes: did you mean %sMi?", text, text, text)
			} else {
				why = fmt.Sprintf("must be at least %s (%d bytes); %s is %s bytes", min, m.Value(), text, text)
			}
		}
		return resource.Quantity{}, field.Invalid(fp(), text, why)
	}
	if wholeBytes && resource.NewQuantity(q.Value(), q.Format).Cmp(q) != 0 {
		return resource.Quantity{}, field.Invalid(fp(), text, "must be a whole number of bytes")
	}
	return q, nil
}

// MinMemory is the least memory a VM may ask for. No guest runs in less than a mebibyte: a
// kernel alone takes several, and the server is a container whose memory limit this is,
// which container runtimes refuse below a few megabytes (Docker's least is 6MB). The bound
// is kept that low so that it judges no small guest a user might run (the project's own
// tests use 16Mi), and it catches the common slip, a number without a unit, which is bytes:
// "512" is 512 bytes, and a VM of that size could never start. Without the bound the
// controller would create such a server, or resize a running one down to it.
const MinMemory = "1Mi"

// maxMebibytesHint is the largest number without a unit that a refusal below the least
// bytes quantity takes for mebibytes with the unit forgotten, and asks "did you mean
// 512Mi?" of. A VM's memory written in MiB is a size a server is given, from a few hundred
// (512) to a few tens of thousands (16384, 65536): 64Gi is already as much as most nodes can
// give one pod. A larger number below 1Mi, read as MiB, would be 64Gi to 1Ti, which few
// nodes hold; it is more likely bytes miscounted (1000000 for 1M, 1048575 one short of 1Mi),
// and a hint of "1048575Mi", a tebibyte, would mislead. Such a number is told its size in
// bytes and the least in bytes instead. The CRD's CEL rule on memory carries the same bound
// (crds TestQuantityMinimumRule holds the two to the same words on either side of it).
const maxMebibytesHint = 65536

// The bounds on a quantity's text before it is parsed (unreadable). Admission's pattern lets
// through an exponent of any length, which apimachinery reads into an int32: "1e4294967297"
// wraps round to 10, and "1e-99999999" keeps a worker busy for minutes, past any deadline. No
// quantity the resource model holds needs more: from a mantissa of maxQuantityText digits,
// maxExponent reaches beyond int64 bytes and below a millicore either way.
const (
	maxQuantityText = 100
	maxExponent     = 200
)

// unreadable says why text is refused before it is parsed, or "": too long, or a decimal
// exponent beyond maxExponent either way.
func unreadable(text string) string {
	if len(text) > maxQuantityText {
		return fmt.Sprintf("longer than %d characters", maxQuantityText)
	}
	if e, ok := decimalExponent(text); ok && (e > maxExponent || e < -maxExponent) {
		return fmt.Sprintf("its exponent is out of range (at most %d either way)", maxExponent)
	}
	return ""
}

// decimalExponent is the exponent of a quantity written with one ("1e3", "5E-2"), and whether
// it has one: not a suffix such as E (exa) or Ei. An exponent too long to read is reported as
// beyond any bound.
func decimalExponent(text string) (int, bool) {
	i := strings.IndexAny(text, "eE")
	if i < 0 {
		return 0, false
	}
	exp, neg := text[i+1:], false
	if exp != "" && (exp[0] == '+' || exp[0] == '-') {
		exp, neg = exp[1:], exp[0] == '-'
	}
	if exp == "" || strings.Trim(exp, "0123456789") != "" {
		return 0, false
	}
	// Leading zeros say nothing of its size ("0e00000000000" is 0).
	if exp = strings.TrimLeft(exp, "0"); exp == "" {
		exp = "0"
	}
	n := math.MaxInt32
	if len(exp) <= 9 {
		n, _ = strconv.Atoi(exp)
	}
	if neg {
		n = -n
	}
	return n, true
}

// tooLarge reports whether q is beyond what the resource model holds: int64 bytes, or int64
// millicores of cpu. A float comparison settles all but values near the limit, cheaply, and
// only those are compared exactly.
func tooLarge(q resource.Quantity, bytes bool) bool {
	f := q.AsApproximateFloat64()
	switch {
	case math.IsInf(f, 1) || math.IsNaN(f) || f > 1e19:
		return true
	case f < 9e15:
		return false
	case bytes:
		return q.Cmp(*resource.NewQuantity(math.MaxInt64, resource.BinarySI)) > 0
	default:
		return q.Cmp(*resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)) > 0
	}
}

func example(bytes bool) string {
	if bytes {
		return `"4G" or "512Mi"`
	}
	return `2 or "500m"`
}

// fieldPath turns a dotted path into a field.Path for error messages.
func fieldPath(path string) *field.Path {
	var p *field.Path
	for _, s := range splitPath(path) {
		if p == nil {
			p = field.NewPath(s)
		} else {
			p = p.Child(s)
		}
	}
	return p
}
