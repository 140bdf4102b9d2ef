package pods

import (
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unique"

	googleuuid "github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// The compact encodings of cachedPod's fields. Each encoder reports whether its encoding reads
// back exactly what it was given (the same string; a quantity of the same value, format and
// text); cachePod keeps what does not as it was read.

// interned is a string kept once for all the pods that have it: a namespace, a node's name, an
// image, a scheduler's message are the same for many pods, and the decoder gives each pod its
// own copy. The zero value is "".
//
// The table is the unique package's, which drops a string once no cached pod refers to it, so
// that a long-running controller does not collect every message and node name it ever saw.
type interned struct{ h unique.Handle[string] }

func intern(s string) interned {
	if s == "" {
		return interned{}
	}
	return interned{unique.Make(s)}
}

func (i interned) String() string {
	if i == (interned{}) {
		return ""
	}
	return i.h.Value()
}

// placed is a pod's placement as the cache keeps it: its AnnotationPlacement, and the
// tolerations it has beyond those (backend.Server.AdmittedTolerations), which the pods of a
// namespace's VMs share, kept once as interned keeps a string. One handle for the two keeps a
// cached pod in its size class (BenchmarkCachedPodHeap); the tolerations are held as fields,
// not as text, so that a reconcile reads them back without decoding. The zero value is
// neither.
type placed struct{ h unique.Handle[placedText] }

type placedText struct {
	annotation string
	admitted   [maxAdmitted]toleration
	n          uint8 // how many of admitted are set
}

// maxAdmitted is how many admitted tolerations the compact form holds (a namespace's defaults
// are one or two); a pod with more is kept as read (cachePod's exact).
const maxAdmitted = 4

// toleration is a corev1.Toleration in a comparable form, its tolerationSeconds by value.
type toleration struct {
	key, value string
	operator   corev1.TolerationOperator
	effect     corev1.TaintEffect
	seconds    int64
	hasSeconds bool
}

// internPlaced makes the placed of annotation and admitted; ok is false when admitted has
// more tolerations than the compact form holds.
func internPlaced(annotation string, admitted []corev1.Toleration) (p placed, ok bool) {
	if len(admitted) > maxAdmitted {
		return placed{}, false
	}
	if annotation == "" && len(admitted) == 0 {
		return placed{}, true
	}
	t := placedText{annotation: annotation, n: uint8(len(admitted))}
	for i, a := range admitted {
		t.admitted[i] = toleration{key: a.Key, value: a.Value, operator: a.Operator, effect: a.Effect}
		if a.TolerationSeconds != nil {
			t.admitted[i].seconds, t.admitted[i].hasSeconds = *a.TolerationSeconds, true
		}
	}
	return placed{unique.Make(t)}, true
}

// annotation is the pod's AnnotationPlacement; "" for none.
func (p placed) annotation() string {
	if p == (placed{}) {
		return ""
	}
	return p.h.Value().annotation
}

// admitted is the pod's tolerations beyond its placement, in a slice of its own (a server kept
// as read, cachedPod.exact, shares its own instead: neither is to be changed); nil for none.
func (p placed) admitted() []corev1.Toleration {
	if p == (placed{}) {
		return nil
	}
	t := p.h.Value()
	if t.n == 0 {
		return nil
	}
	out := make([]corev1.Toleration, t.n)
	for i := range out {
		a := &t.admitted[i]
		out[i] = corev1.Toleration{Key: a.key, Value: a.value, Operator: a.operator, Effect: a.effect}
		if a.hasSeconds {
			seconds := a.seconds
			out[i].TolerationSeconds = &seconds
		}
	}
	return out
}

// uuid is a UID in the form the API server gives them, lowercase 8-4-4-4-12 hexadecimal, in
// 16 bytes instead of a 36-byte string.
type uuid = googleuuid.UUID

// parseUUID reads a UID in the API server's form; any other text (uppercase, braces, a UID a
// test made up) is not one, so that a uuid always writes back the text it was read from.
func parseUUID(s string) (uuid, bool) {
	u, err := googleuuid.Parse(s)
	return u, err == nil && u.String() == s
}

// parseVersion reads a resourceVersion that is a decimal number, as etcd's revisions are, and
// writes back the same text (no sign, no leading zero). A resourceVersion is opaque to clients:
// any other one is kept as text.
func parseVersion(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false
	}
	var buf [20]byte
	return v, string(strconv.AppendUint(buf[:0], v, 10)) == s
}

// A quantity is kept as a whole number of a unit fixed per resource and the code of its
// format; the code 0 stands for a resource the container does not set.
const (
	cpuScale   = resource.Milli // cpu in milli-units
	bytesScale = resource.Scale(0)
)

// quantityFormats are the formats a quantity can have, by code; "" first, for a quantity that
// is not set.
var quantityFormats = [...]resource.Format{"", resource.DecimalSI, resource.BinarySI, resource.DecimalExponent}

// compactQuantity returns q as a count of 10^scale units and its format's code, and whether
// quantityOf makes of them a quantity with q's value, format and text. It does not when q is
// not a whole number of such units (fractions of a byte or millicore), when q's text is not
// the canonical one (the decoder keeps the text as written when it looks canonical: "+1Gi",
// "1E3"), or when q is beyond the int64 range.
//
// scratch is room for a quantity's text, so that checking it allocates nothing.
func compactQuantity(q resource.Quantity, scale resource.Scale, scratch []byte) (v int64, format uint8, ok bool) {
	format, ok = index(quantityFormats[:], q.Format)
	if !ok {
		return 0, 0, false
	}
	if format == 0 {
		return 0, 0, q.IsZero() // not set: the zero Quantity
	}
	v = q.ScaledValue(scale)
	back := quantityOf(v, format, scale)
	if back == q { // as the decoder makes a quantity whose text it does not keep ("64Mi")
		return v, format, true
	}
	if back.Cmp(q) != 0 {
		return 0, 0, false
	}
	n, suffix := back.CanonicalizeBytes(scratch)
	text := q.String() // q is a copy: what String caches stays here
	return v, format, len(text) == len(n)+len(suffix) && text[:len(n)] == string(n) && text[len(n):] == string(suffix)
}

// quantityOf is the quantity compactQuantity encoded as v and format.
func quantityOf(v int64, format uint8, scale resource.Scale) resource.Quantity {
	if format == 0 {
		return resource.Quantity{}
	}
	q := resource.NewScaledQuantity(v, scale)
	q.Format = quantityFormats[format]
	return *q
}

// The words of a server that have few values, by code.
var (
	serverStates = [...]backend.State{backend.StatePending, backend.StateStarting, backend.StateReady,
		backend.StateFailed, backend.StateStopped, backend.StateLost}
	resizeStates = [...]backend.ResizeState{backend.ResizeNone, backend.ResizePending, backend.ResizeDeferred,
		backend.ResizeInfeasible, backend.ResizeInProgress}
	podPhases = [...]string{"", string(corev1.PodPending), string(corev1.PodRunning), string(corev1.PodSucceeded),
		string(corev1.PodFailed), string(corev1.PodUnknown)}
	waitReasons = [...]backend.WaitReason{"", backend.WaitUnschedulable, backend.WaitImage, backend.WaitStart}
)

// parseIP reads a pod IP as 16 bytes and the flag of its kind (none for ""), when they
// write back the same text; any other text (leading zeros, upper case, a zone) is not one,
// and the server is kept as read.
func parseIP(s string) ([16]byte, podFlags, bool) {
	if s == "" {
		return [16]byte{}, 0, true
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.String() != s {
		return [16]byte{}, 0, false
	}
	if a.Is4() {
		return a.As16(), podIPv4, true
	}
	return a.As16(), podIPv6, true
}

// parseRestart reads a restart mark ("" for none) as seconds since the epoch, when it is a
// time in RFC 3339 in UTC to the second, as restartText writes it back; any other text is not
// one, and the server is kept as read.
func parseRestart(s string) (int64, bool) {
	if s == "" {
		return 0, true
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, false
	}
	v := t.Unix()
	return v, restartText(v) == s
}

// restartText is the restart mark parseRestart read as v.
func restartText(v int64) string { return time.Unix(v, 0).UTC().Format(time.RFC3339) }

// keptByText is the names of what keeps a server running (backend.Server.KeptBy) as one
// interned text, joined by commas, and whether splitting it at the commas gives them back:
// container names are DNS labels, which have none; any other name (empty, with a comma) is
// not one, and the server is kept as read. Nil names are "".
func keptByText(names []string) (interned, bool) {
	for _, n := range names {
		if n == "" || strings.Contains(n, ",") {
			return interned{}, false
		}
	}
	return intern(strings.Join(names, ",")), true
}

// index is v's code in table.
func index[T comparable](table []T, v T) (uint8, bool) {
	for i, t := range table {
		if t == v {
			return uint8(i), true
		}
	}
	return 0, false
}
