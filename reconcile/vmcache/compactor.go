package vmcache

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unique"
	"unsafe"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// Answer reads the API server's answer to a write of a VM (the VM as the write left it) in
// place, as the watch reads events: the JSON a view reads, cut as an Object's and not packed,
// and its resourceVersion. The loop decides again on it, without waiting for the watch to
// bring the write back.
func Answer(body []byte) (raw []byte, resourceVersion string, err error) {
	if !gjson.ValidBytes(body) {
		return nil, "", errors.New("the response is not valid JSON")
	}
	var c compactor
	var o Object
	// Read in place: gjson.ParseBytes would copy the whole answer first. What the compact
	// form keeps is copied out of body (compact's buffer, and clones of the metadata kept).
	if raw, err = c.compact(gjson.Parse(unsafeString(body)), &o, false); err != nil {
		return nil, "", fmt.Errorf("read the response: %w", err)
	}
	return raw, o.resourceVersion, nil
}

// compactor makes cached objects from JSON read in place, through a scratch buffer it reuses,
// and packs them (pack.go) through a second, so that each Object's bytes are allocated once,
// packed, at their exact size.
type compactor struct {
	buf, packed []byte
	fields      schema.Fields
}

// object makes the cached form of the JSON object v: every top-level field but metadata as
// it is, and of metadata only keptMetadata (see Compact, which makes the same form from an
// unstructured object). For a bookmark it also notes the end of a watch list's initial events.
func (c *compactor) object(v gjson.Result, bookmark bool) (*Object, error) {
	o := &Object{}
	b, err := c.compact(v, o, bookmark)
	if err != nil {
		return nil, err
	}
	o.packed = pack(&c.packed, b)
	o.phase = phaseOf(b, c.fields)
	o.reason = reasonOf(b, c.fields)
	o.settled = schema.ViewOf(b, "", c.fields).Settled()
	return o, nil
}

// compact writes the compact JSON of v into the compactor's scratch buffer and returns it
// (valid until the next call), and sets o's namespace, name, UID and resourceVersion.
func (c *compactor) compact(v gjson.Result, o *Object, bookmark bool) ([]byte, error) {
	if !v.IsObject() {
		return nil, errors.New("not a JSON object")
	}
	b := append(c.buf[:0], '{')
	bad := false
	v.ForEach(func(k, val gjson.Result) bool {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, k.Raw...)
		b = append(b, ':')
		if k.Str != "metadata" || !val.IsObject() {
			b = append(b, val.Raw...)
			return true
		}
		b = append(b, '{')
		n := 0
		val.ForEach(func(mk, mv gjson.Result) bool {
			switch mk.Str {
			case "resourceVersion":
				if mv.Type != gjson.String {
					bad = true
					return false
				}
				o.resourceVersion = strings.Clone(mv.Str)
				return true
			case "namespace":
				o.namespace = unique.Make(mv.String())
			case "name":
				o.name = strings.Clone(mv.String())
			case "uid":
				o.uid = types.UID(strings.Clone(mv.String()))
			case "annotations":
				if bookmark {
					mv.ForEach(func(ak, av gjson.Result) bool {
						if ak.Str == metav1.InitialEventsAnnotationKey && av.Str == "true" {
							o.initialEventsEnd = true
						}
						return true
					})
					return true
				}
				// The annotations a view reads (keptAnnotations), in their order.
				var kept [len(keptAnnotations)]gjson.Result
				mv.ForEach(func(ak, av gjson.Result) bool {
					if i := slices.Index(keptAnnotations[:], ak.Str); i >= 0 && !kept[i].Exists() {
						kept[i] = av
					}
					return true
				})
				first := true
				for i, v := range kept {
					if !v.Exists() {
						continue
					}
					if first {
						if n > 0 {
							b = append(b, ',')
						}
						n++
						b = append(b, `"annotations":{`...)
						first = false
					} else {
						b = append(b, ',')
					}
					b = strconv.AppendQuote(b, keptAnnotations[i])
					b = append(b, ':')
					b = append(b, v.Raw...)
				}
				if !first {
					b = append(b, '}')
				}
				return true
			case "generation", "deletionTimestamp", "finalizers":
			default:
				return true
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(b, mk.Raw...)
			b = append(b, ':')
			b = append(b, mv.Raw...)
			return true
		})
		b = append(b, '}')
		return true
	})
	b = append(b, '}')
	c.buf = b
	// What is kept must be JSON a view can read: the API server sends nothing else, but
	// a cache holding less would decide on garbage.
	if bad || !gjson.ValidBytes(b) {
		return nil, errors.New("not valid JSON")
	}
	return b, nil
}

// unsafeString reads b as a string without copying it; b must not change while the string
// or anything cut from it is in use.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// unsafeBytes reads s as bytes without copying it; they must not be written.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
