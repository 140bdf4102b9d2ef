package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unique"
	"unsafe"

	"github.com/tidwall/gjson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// RESTClientFor makes the REST client the VM informer lists and watches with: JSON, with no
// decoding of its own (the ListerWatcher reads the bytes), paced as cfg says.
func RESTClientFor(cfg *rest.Config) (rest.Interface, error) {
	c, err := rest.UnversionedRESTClientFor(dynamic.ConfigFor(cfg))
	if err != nil {
		return nil, fmt.Errorf("make REST client: %w", err)
	}
	return c, nil
}

// ObjectList is a list of VMs as the VM ListerWatcher decodes it: what the reflector needs of a
// list (its resourceVersion and continue token, and the items) and nothing else.
type ObjectList struct {
	metav1.ListMeta
	Items []*Object
}

var _ metav1.ListInterface = (*ObjectList)(nil)

// GetObjectKind has nothing to tell: the reflector reads only the items and the list metadata.
func (l *ObjectList) GetObjectKind() k8sschema.ObjectKind { return k8sschema.EmptyObjectKind }

// DeepCopyObject copies the list; its items are immutable and shared.
func (l *ObjectList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = append([]*Object(nil), l.Items...)
	return &c
}

// vmListerWatcher lists and watches the VMs over the REST client and makes each object's
// cached form straight from the bytes on the wire.
//
// Why not the dynamic informer and a transform: client-go decoded every watch event into a
// tree of maps (unstructured) that the transform then encoded again into the compact JSON;
// under a burst that double decode was the largest part of the controller's CPU. Here each
// object is read once, in place, with gjson, and only the bytes a view reads are copied.
type vmListerWatcher struct {
	client rest.Interface
	// watchClient, if set, is what watches go through (see Config.WatchREST).
	watchClient rest.Interface
	gvr         k8sschema.GroupVersionResource
	namespace   string
	selector    string
	// fields is the VMs' layout, for the phase each cached Object keeps.
	fields schema.Fields
}

var (
	_ cache.ListerWatcher            = (*vmListerWatcher)(nil)
	_ cache.ListerWatcherWithContext = (*vmListerWatcher)(nil)
)

func (lw *vmListerWatcher) request(client rest.Interface, opts *metav1.ListOptions) *rest.Request {
	opts.LabelSelector = lw.selector
	return client.Get().AbsPath(resourcePath(lw.gvr, lw.namespace)...).SpecificallyVersionedParams(opts, metav1.ParameterCodec, metav1.SchemeGroupVersion)
}

// ListWithContext lists the VMs into an ObjectList.
func (lw *vmListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	body, err := lw.request(lw.client, &opts).Do(ctx).Raw()
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", lw.gvr.Resource, err)
	}
	return decodeList(body, lw.fields)
}

// WatchWithContext watches the VMs; each event's object is an *Object (a *metav1.Status for
// an error event).
func (lw *vmListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	client := lw.client
	if lw.watchClient != nil {
		client = lw.watchClient
	}
	body, err := lw.request(client, &opts).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", lw.gvr.Resource, err)
	}
	return watch.NewStreamWatcher(newWatchDecoder(body, lw.fields),
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")), nil
}

// List is ListWithContext without a context, for client-go's older interface.
func (lw *vmListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch is WatchWithContext without a context, for client-go's older interface.
func (lw *vmListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// decodeList reads a list response: its metadata and each item's cached form.
func decodeList(body []byte, f schema.Fields) (*ObjectList, error) {
	if !gjson.ValidBytes(body) {
		return nil, errors.New("decode list: not valid JSON")
	}
	top := gjson.Parse(unsafeString(body))
	md := top.Get("metadata")
	l := &ObjectList{ListMeta: metav1.ListMeta{
		ResourceVersion: strings.Clone(md.Get("resourceVersion").String()),
		Continue:        strings.Clone(md.Get("continue").String()),
	}}
	if n := md.Get("remainingItemCount"); n.Exists() {
		c := n.Int()
		l.RemainingItemCount = &c
	}
	items := top.Get("items")
	l.Items = make([]*Object, 0, len(items.Array()))
	c := compactor{fields: f}
	var err error
	items.ForEach(func(_, v gjson.Result) bool {
		var o *Object
		if o, err = c.object(v, false); err != nil {
			return false
		}
		l.Items = append(l.Items, o)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("decode list: %w", err)
	}
	return l, nil
}

// watchDecoder reads a JSON watch stream, one event at a time, into cached objects.
type watchDecoder struct {
	body   io.ReadCloser
	frames frameReader
	c      compactor
}

func newWatchDecoder(body io.ReadCloser, f schema.Fields) *watchDecoder {
	return &watchDecoder{body: body, frames: frameReader{r: body}, c: compactor{fields: f}}
}

// Decode reads the next event. io.EOF ends the stream.
func (d *watchDecoder) Decode() (watch.EventType, runtime.Object, error) {
	event, err := d.frames.next()
	if err != nil {
		return "", nil, err
	}
	// The event's bytes are read in place and overwritten by the next event: everything kept
	// (the compact JSON, the metadata strings) is copied out by the compactor, which checks
	// that what it keeps is valid JSON. The rest (managedFields above all, most of an event's
	// bytes) is only skipped over, as the frame reader delimits it.
	ev := gjson.Parse(unsafeString(event))
	obj, ok := d.frames.object(event)
	if !ok {
		obj = ev.Get("object")
	}
	// The type is one of client-go's constants, never a string cut from the event's bytes,
	// which the next event overwrites while this one is still on its way to the reflector.
	var typ watch.EventType
	switch t := ev.Get("type").Str; t {
	case string(watch.Added):
		typ = watch.Added
	case string(watch.Modified):
		typ = watch.Modified
	case string(watch.Deleted):
		typ = watch.Deleted
	case string(watch.Bookmark):
		typ = watch.Bookmark
	case string(watch.Error):
		typ = watch.Error
	default:
		return "", nil, fmt.Errorf("decode event: unknown type %q", t)
	}
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		o, err := d.c.object(obj, typ == watch.Bookmark)
		if err != nil {
			return "", nil, fmt.Errorf("decode %s event: %w", typ, err)
		}
		return typ, o, nil
	case watch.Error:
		if !gjson.Valid(obj.Raw) {
			return "", nil, errors.New("decode error event: not valid JSON")
		}
		st := &metav1.Status{}
		if err := json.Unmarshal([]byte(obj.Raw), st); err != nil {
			return "", nil, fmt.Errorf("decode error event: %w", err)
		}
		return typ, st, nil
	}
	return "", nil, fmt.Errorf("decode event: unknown type %q", typ)
}

// Close closes the stream.
func (d *watchDecoder) Close() { _ = d.body.Close() }

// frameReader cuts a stream of JSON objects (a watch stream: one event after another,
// whatever the whitespace between them) into one object at a time.
//
// Why not json.Decoder: it scans each event twice (to find its end, then again to copy it into
// a RawMessage) with encoding/json's general scanner, which was most of the decoder's time.
// Finding the end of an object needs only its braces and strings. Most of an event's bytes
// are inside strings (managedFields above all), so a string is skipped with bytes.IndexByte
// to its closing quote rather than byte by byte.
//
// On the way it notes where each object directly inside the frame starts and ends: a watch
// event has one, its "object", which the decoder then reads without gjson scanning the whole
// event once more to find it (see object).
type frameReader struct {
	r          io.Reader
	buf        []byte
	start, end int // buf[start:end] is read but not yet returned
	// inner is the span, in the last frame returned, of its last object value at depth 1,
	// and inners how many such objects it held.
	inner  [2]int
	inners int
}

// object returns the value of the frame's "object" field as the frame reader found it: the
// frame's only object one level down, behind the key "object". ok is false when the frame
// does not have exactly that shape, and the caller asks gjson instead.
func (f *frameReader) object(frame []byte) (gjson.Result, bool) {
	if f.inners != 1 {
		return gjson.Result{}, false
	}
	from, to := f.inner[0], f.inner[1]
	i := from - 1
	for i >= 0 && isSpace(frame[i]) {
		i--
	}
	if i < 0 || frame[i] != ':' {
		return gjson.Result{}, false
	}
	i--
	for i >= 0 && isSpace(frame[i]) {
		i--
	}
	const key = `"object"`
	if i < len(key) || string(frame[i-len(key)+1:i+1]) != key || frame[i-len(key)] == '\\' {
		return gjson.Result{}, false
	}
	return gjson.Result{Type: gjson.JSON, Raw: unsafeString(frame[from:to])}, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// next returns the next object's bytes, which are valid until the following call.
func (f *frameReader) next() ([]byte, error) {
	depth, inString := 0, false
	i := f.start
	f.inners = 0
	for {
		for i < f.end {
			if inString {
				q := bytes.IndexByte(f.buf[i:f.end], '"')
				if q < 0 {
					i = f.end
					break
				}
				i += q
				// A quote ends the string unless an odd run of backslashes escapes it. The
				// run stops at the string's opening quote at the latest, which is in this
				// frame, so it never reaches before f.start.
				n := 0
				for j := i - 1; f.buf[j] == '\\'; j-- {
					n++
				}
				inString = n%2 == 1
				i++
				continue
			}
			c := f.buf[i]
			i++
			switch c {
			case '"':
				inString = true
			case '{', '[':
				if depth == 1 && c == '{' {
					f.inner[0] = i - 1 - f.start
					f.inners++
				}
				depth++
			case '}', ']':
				depth--
				if depth == 1 && c == '}' {
					f.inner[1] = i - f.start
				}
				if depth == 0 {
					frame := f.buf[f.start:i]
					f.start = i
					return frame, nil
				}
			case ' ', '\t', '\r', '\n':
				if depth == 0 {
					f.start = i // whitespace between objects
				}
			default:
				if depth == 0 {
					return nil, fmt.Errorf("decode event: unexpected %q between objects", c)
				}
			}
		}
		// Keep the part of an object read so far at the front, and make room for more.
		if f.start > 0 {
			n := copy(f.buf, f.buf[f.start:f.end])
			i -= f.start
			f.start, f.end = 0, n
		}
		if f.end == len(f.buf) {
			f.buf = append(f.buf, make([]byte, max(len(f.buf), 32<<10))...)
		}
		n, err := f.r.Read(f.buf[f.end:])
		f.end += n
		if n == 0 && err != nil {
			if err == io.EOF && f.start == f.end {
				return nil, io.EOF
			}
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
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
				// The one annotation a view reads (see keptMetadata).
				var kept gjson.Result
				mv.ForEach(func(ak, av gjson.Result) bool {
					if ak.Str == schema.AnnotationRestartedAt {
						kept = av
						return false
					}
					return true
				})
				if !kept.Exists() {
					return true
				}
				if n > 0 {
					b = append(b, ',')
				}
				n++
				b = append(b, `"annotations":{`...)
				b = strconv.AppendQuote(b, schema.AnnotationRestartedAt)
				b = append(b, ':')
				b = append(b, kept.Raw...)
				b = append(b, '}')
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
